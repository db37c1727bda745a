//! Encryption at rest in the binary: the server's store wrapped by the configuration
//! (`--encryption-provider-config`, or the data directory's, generated at the first start), and
//! `setpoint encryption status | rewrite | rotate`, which work on the store directly (the
//! embedded store with its server stopped; etcd beside running servers for `status` and
//! `rewrite`). docs/design/encryption-at-rest.md has the procedures.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use futures::{StreamExt, TryStreamExt};
use setpoint_apiserver::encryption::{self, EncryptedStore, EncryptionConfig, StoredForm};
use setpoint_store::{
    EmbeddedConfig, EmbeddedStore, KeyValue, ListRequest, Pages, Store, StoreError,
};

use crate::cli::{StoreArgs, StoreKind};

/// Keys read per page.
const PAGE: usize = 500;
/// Rewrites in flight.
const CONCURRENT_WRITES: usize = 32;

/// `setpoint encryption …`.
#[derive(Debug, Subcommand)]
pub(crate) enum EncryptionCommand {
    /// Count the stored objects of each resource the configuration names by how they are
    /// stored: under which key, or in plaintext.
    Status(EncryptionArgs),
    /// Rewrite every object of the resources the configuration names that is not stored the
    /// way a write stores it now (the first provider's first key): after adding a resource or
    /// a new first key. Safe beside running servers on etcd (each rewrite is conditional on the
    /// object being unchanged), once every server reads the new form.
    Rewrite(EncryptionArgs),
    /// Rotate the key, with every server stopped: add a new first key to the configuration
    /// file, rewrite every encrypted object with it, then retire the old keys. With several
    /// servers, copy the file to each one's data directory before starting them again.
    Rotate(EncryptionArgs),
}

/// Where the store and the configuration are.
#[derive(Debug, Args)]
pub(crate) struct EncryptionArgs {
    /// The server's data directory (its embedded store `DIR/store`, its configuration
    /// `DIR/pki/encryption-config.yaml`).
    #[arg(long, value_name = "DIR")]
    pub(crate) data_dir: PathBuf,
    /// The configuration file, when not the data directory's.
    #[arg(long, value_name = "FILE")]
    pub(crate) encryption_provider_config: Option<PathBuf>,
    /// The store.
    #[command(flatten)]
    pub(crate) store: StoreArgs,
}

/// The server's store, encrypted as the configuration says; the data directory's
/// configuration is generated if neither it nor `file` exists.
pub(crate) async fn encrypted(
    store: Arc<dyn Store>,
    data_dir: &Path,
    file: Option<&Path>,
) -> Result<Arc<dyn Store>> {
    let (config, path, generated) = match file {
        Some(file) => (encryption::load(file)?, file.to_owned(), false),
        None => {
            let path = encryption::default_config_path(data_dir);
            let (config, generated) = encryption::load_or_generate(&path)?;
            (config, path, generated)
        }
    };
    encryption::check_store(store.as_ref(), &config).await?;
    if config.encrypts_anything() {
        tracing::info!(
            config = %path.display(),
            resources = ?config.resources(),
            generated,
            "encryption at rest is on"
        );
    } else {
        tracing::warn!(config = %path.display(), "encryption at rest is off: no resource's first provider encrypts");
    }
    Ok(Arc::new(EncryptedStore::new(store, Arc::new(config))))
}

/// Runs `setpoint encryption …`.
pub(crate) async fn encryption(command: EncryptionCommand) -> Result<()> {
    let args = match &command {
        EncryptionCommand::Status(args)
        | EncryptionCommand::Rewrite(args)
        | EncryptionCommand::Rotate(args) => args,
    };
    let path = args
        .encryption_provider_config
        .clone()
        .unwrap_or_else(|| encryption::default_config_path(&args.data_dir));
    let config = encryption::load(&path)?;
    let (store, embedded) = open(args).await?;
    let result = match &command {
        EncryptionCommand::Status(_) => status(store.as_ref(), &config).await.map(|counts| {
            print!("{}", render_status(&path, &counts));
        }),
        EncryptionCommand::Rewrite(_) => rewrite(store.as_ref(), &config)
            .await
            .map(|n| println!("rewrote {n} objects with the current key")),
        EncryptionCommand::Rotate(_) => rotate(store.as_ref(), &config, &path).await,
    };
    drop(store);
    if let Some(embedded) = embedded {
        tokio::task::spawn_blocking(move || embedded.close()).await?;
    }
    if matches!(command, EncryptionCommand::Rotate(_)) && args.store.kind == StoreKind::Etcd {
        eprintln!(
            "every server of this etcd must now use {} (copy it to each one's DATA_DIR/pki) before it starts",
            path.display()
        );
    }
    result
}

/// The store as stored (not decrypted), and the embedded one to close.
async fn open(args: &EncryptionArgs) -> Result<(Arc<dyn Store>, Option<EmbeddedStore>)> {
    match args.store.kind {
        StoreKind::Embedded => {
            let store_dir = args.data_dir.join("store");
            if !store_dir.exists() {
                bail!("{} holds no store", args.data_dir.display());
            }
            let config = EmbeddedConfig::on_disk(&store_dir).without_auto_compaction();
            let store = tokio::task::spawn_blocking(move || EmbeddedStore::open(config))
                .await?
                .with_context(|| {
                    format!(
                        "opening the embedded store in {} (stop the server using it first)",
                        store_dir.display()
                    )
                })?;
            Ok((Arc::new(store.clone()), Some(store)))
        }
        StoreKind::Etcd => Ok((
            crate::server::open_etcd(&args.store.etcd, None).await?,
            None,
        )),
    }
}

/// How many objects of each resource are stored in each form.
pub(crate) async fn status(
    store: &dyn Store,
    config: &EncryptionConfig,
) -> Result<BTreeMap<(String, StoredForm), u64>> {
    let mut counts = BTreeMap::new();
    let mut pages = Pages::new(store, ListRequest::prefix("/registry/").limit(PAGE));
    while let Some(page) = pages.next().await.context("reading the store")? {
        for kv in &page.kvs {
            if let Some(found) = config.classify(&kv.key, &kv.value) {
                *counts.entry(found).or_insert(0) += 1;
            }
        }
    }
    Ok(counts)
}

fn render_status(path: &Path, counts: &BTreeMap<(String, StoredForm), u64>) -> String {
    let mut out = format!("configuration: {}\n", path.display());
    out.push_str(&format!(
        "{:<32} {:<32} {}\n",
        "RESOURCE", "STORED AS", "OBJECTS"
    ));
    for ((resource, form), n) in counts {
        out.push_str(&format!("{resource:<32} {:<32} {n}\n", form.to_string()));
    }
    if counts.is_empty() {
        out.push_str("(no stored object of the configured resources)\n");
    }
    out
}

/// Rewrites every object of the configured resources not stored in the current form; returns
/// how many were rewritten. Values that no provider reads are reported, not touched.
pub(crate) async fn rewrite(store: &dyn Store, config: &EncryptionConfig) -> Result<u64> {
    let mut pages = Pages::new(store, ListRequest::prefix("/registry/").limit(PAGE));
    let mut rewritten = 0;
    let mut unreadable = Vec::new();
    while let Some(page) = pages.next().await.context("reading the store")? {
        let stale: Vec<KeyValue> = page
            .kvs
            .into_iter()
            .filter(|kv| !config.is_current(&kv.key, &kv.value))
            .collect();
        let results: Vec<Option<String>> = futures::stream::iter(stale)
            .map(|kv| rewrite_one(store, config, kv))
            .buffer_unordered(CONCURRENT_WRITES)
            .try_collect()
            .await?;
        for result in results {
            match result {
                None => rewritten += 1,
                Some(problem) => unreadable.push(problem),
            }
        }
    }
    if !unreadable.is_empty() {
        bail!(
            "rewrote {rewritten} objects, but {} could not be read with this configuration and were left as stored: {}",
            unreadable.len(),
            unreadable.join("; ")
        );
    }
    Ok(rewritten)
}

/// Rewrites one object unless it changed meanwhile (a server's write stores the current form
/// itself) or is gone; `Some(problem)` when its value cannot be read.
async fn rewrite_one(
    store: &dyn Store,
    config: &EncryptionConfig,
    kv: KeyValue,
) -> Result<Option<String>> {
    let name = String::from_utf8_lossy(&kv.key).into_owned();
    let plain = match config.from_storage(&kv.key, kv.value.clone()) {
        Ok(plain) => plain,
        Err(e) => return Ok(Some(format!("{name}: {e}"))),
    };
    let sealed = config
        .to_storage(&kv.key, plain)
        .with_context(|| format!("encrypting {name}"))?;
    match store
        .update(kv.key.clone(), sealed, Some(kv.mod_revision))
        .await
    {
        Ok(_) | Err(StoreError::Conflict { .. } | StoreError::NotFound) => Ok(None),
        Err(e) => Err(e).with_context(|| format!("rewriting {name}")),
    }
}

/// Rotates the key: new first key (file written), every object rewritten with it, old keys
/// retired (file written again). A failure before the end leaves a file that reads everything.
async fn rotate(store: &dyn Store, config: &EncryptionConfig, path: &Path) -> Result<()> {
    let (text, name) = encryption::with_new_key(config)?;
    let with_both = EncryptionConfig::from_yaml(&text)?;
    encryption::write(path, &text)?;
    let rewritten = rewrite(store, &with_both).await.with_context(|| {
        format!(
            "{} now holds the new key {name:?} first and the old keys after it; nothing was retired",
            path.display()
        )
    })?;
    let retired = encryption::with_old_keys_retired(&with_both)?;
    encryption::write(path, &retired)?;
    println!(
        "rotated to key {name:?}: rewrote {rewritten} objects; the old keys are retired from {}",
        path.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use setpoint_store::ModelStore;

    #[tokio::test]
    async fn rotate_should_rewrite_every_secret_with_the_new_key_and_retire_the_old() {
        let dir = tempfile::tempdir().unwrap();
        let path = encryption::default_config_path(dir.path());
        let (old, _) = encryption::load_or_generate(&path).unwrap();
        let old = Arc::new(old);
        let raw = Arc::new(ModelStore::new());
        let plain_before = Bytes::from_static(b"{\"before\":1}");
        raw.create(
            Bytes::from_static(b"/registry/secrets/a/plain"),
            plain_before.clone(),
        )
        .await
        .unwrap();
        let store = EncryptedStore::new(raw.clone(), old.clone());
        for i in 0..3 {
            store
                .create(
                    Bytes::from(format!("/registry/secrets/a/s{i}")),
                    Bytes::from(format!("{{\"i\":{i}}}")),
                )
                .await
                .unwrap();
        }
        store
            .create(
                Bytes::from_static(b"/registry/configmaps/a/c"),
                Bytes::from_static(b"{}"),
            )
            .await
            .unwrap();
        let counts = status(raw.as_ref(), &old).await.unwrap();
        assert_eq!(
            counts[&("secrets".to_owned(), StoredForm::Key("aesgcm:key1".into()))],
            3
        );
        assert_eq!(counts[&("secrets".to_owned(), StoredForm::Plain)], 1);
        assert_eq!(counts.len(), 2, "configmaps are not counted: {counts:?}");

        rotate(raw.as_ref(), &old, &path).await.unwrap();
        let new = encryption::load(&path).unwrap();
        let counts = status(raw.as_ref(), &new).await.unwrap();
        assert_eq!(
            counts.into_iter().collect::<Vec<_>>(),
            vec![(
                ("secrets".to_owned(), StoredForm::Key("aesgcm:key2".into())),
                4
            )]
        );
        let after = EncryptedStore::new(raw.clone(), Arc::new(new));
        assert_eq!(
            after
                .get(b"/registry/secrets/a/s2")
                .await
                .unwrap()
                .unwrap()
                .value,
            "{\"i\":2}"
        );
        assert_eq!(
            after
                .get(b"/registry/secrets/a/plain")
                .await
                .unwrap()
                .unwrap()
                .value,
            plain_before
        );
        // The old key is gone: a value it wrote no longer reads.
        let by_old = old
            .to_storage(b"/registry/secrets/a/x", Bytes::from_static(b"x"))
            .unwrap();
        raw.create(Bytes::from_static(b"/registry/secrets/a/x"), by_old)
            .await
            .unwrap();
        assert!(after.get(b"/registry/secrets/a/x").await.is_err());
        // The configmap was never touched.
        assert_eq!(
            raw.get(b"/registry/configmaps/a/c")
                .await
                .unwrap()
                .unwrap()
                .value,
            "{}"
        );
        // A rewrite now finds the unreadable one and says so.
        let error = rewrite(raw.as_ref(), &encryption::load(&path).unwrap())
            .await
            .unwrap_err();
        assert!(
            error.to_string().contains("/registry/secrets/a/x"),
            "{error}"
        );
    }
}

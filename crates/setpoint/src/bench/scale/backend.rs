//! The store under the server of `setpoint bench scale`: the embedded store in the server's
//! data directory, or a local etcd member (fsyncs on) that outlives the server's restarts and
//! is stopped when the [`Backend`] is dropped. Also how big a directory is on disk.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};

use crate::cli::StoreKind;

/// The store the server runs on.
pub(super) struct Backend {
    /// Which store.
    kind: StoreKind,
    /// The local etcd member, for [`StoreKind::Etcd`].
    #[cfg(feature = "etcd")]
    etcd: Option<setpoint_store::LocalEtcd>,
}

impl Backend {
    /// The store `kind` for a server whose benchmark directory is `root`: nothing to start for
    /// the embedded store; a durable local etcd member with its data under `root` for etcd.
    pub(super) async fn start(kind: StoreKind, root: &Path) -> Result<Self> {
        match kind {
            StoreKind::Embedded => Ok(Backend {
                kind,
                #[cfg(feature = "etcd")]
                etcd: None,
            }),
            StoreKind::Etcd => start_etcd(root).await,
        }
    }

    /// What to name the store in titles.
    pub(super) fn label(&self) -> &'static str {
        match self.kind {
            StoreKind::Embedded => "embedded store",
            StoreKind::Etcd => "etcd (a local member, fsyncs on)",
        }
    }

    /// The `setpoint server` flags that put it on this store.
    pub(super) fn server_args(&self) -> Vec<String> {
        #[cfg(feature = "etcd")]
        if let Some(etcd) = &self.etcd {
            return vec![
                "--store".to_owned(),
                "etcd".to_owned(),
                "--etcd-endpoints".to_owned(),
                etcd.endpoint().to_owned(),
            ];
        }
        Vec::new()
    }

    /// Where the stored objects are on disk: `<root>/data/store` for the embedded store, the
    /// etcd member's data directory for etcd.
    pub(super) fn store_dir(&self, root: &Path) -> PathBuf {
        #[cfg(feature = "etcd")]
        if let Some(etcd) = &self.etcd {
            return etcd.data_dir();
        }
        root.join("data").join("store")
    }

    /// Stops the etcd member, if any, off the async threads.
    pub(super) async fn stop(self) -> Result<()> {
        #[cfg(feature = "etcd")]
        if let Some(etcd) = self.etcd {
            tokio::task::spawn_blocking(move || drop(etcd)).await?;
        }
        Ok(())
    }
}

#[cfg(feature = "etcd")]
async fn start_etcd(root: &Path) -> Result<Backend> {
    let parent = root.to_owned();
    let etcd =
        tokio::task::spawn_blocking(move || setpoint_store::LocalEtcd::start_durable_in(&parent))
            .await?
            .context("starting a local etcd")?;
    Ok(Backend {
        kind: StoreKind::Etcd,
        etcd: Some(etcd),
    })
}

#[cfg(not(feature = "etcd"))]
async fn start_etcd(_root: &Path) -> Result<Backend> {
    anyhow::bail!(
        "this setpoint was built without etcd support: rebuild with `cargo build --release --features etcd` (needs `protoc`, Debian package protobuf-compiler)"
    )
}

/// The bytes the files under `dir` occupy on disk (allocated blocks, so sparse and
/// preallocated files count as what they take), 0 if it does not exist.
pub(super) fn disk_usage(dir: &Path) -> Result<u64> {
    use std::os::unix::fs::MetadataExt as _;
    let metadata = match std::fs::symlink_metadata(dir) {
        Ok(metadata) => metadata,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e).with_context(|| format!("reading {}", dir.display())),
    };
    let mut total = metadata.blocks() * 512;
    if metadata.is_dir() {
        let entries =
            std::fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))?;
        for entry in entries {
            let entry = entry.with_context(|| format!("listing {}", dir.display()))?;
            total += disk_usage(&entry.path())?;
        }
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disk_usage_should_count_the_files_below_a_directory() {
        let dir = tempfile::tempdir().expect("tempdir");
        let empty = disk_usage(dir.path()).expect("usage");
        std::fs::create_dir(dir.path().join("sub")).expect("mkdir");
        std::fs::write(dir.path().join("sub/a"), vec![7u8; 64 * 1024]).expect("write");
        let full = disk_usage(dir.path()).expect("usage");
        assert!(full >= empty + 64 * 1024, "{empty} → {full}");
        assert_eq!(disk_usage(&dir.path().join("missing")).expect("usage"), 0);
    }
}

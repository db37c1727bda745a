//! Encryption at rest: the values of the resources an `EncryptionConfiguration` names (by
//! default `secrets`) are stored encrypted, in kube-apiserver's format, by wrapping the store the
//! API runs on ([`EncryptedStore`]). See `docs/design/encryption-at-rest.md`.
//!
//! - [`EncryptionConfig`] is a validated configuration file (`config.rs` holds its format and
//!   validation; `providers.rs` what it compiles to; `resources.rs` which resource a storage
//!   key belongs to; `aesgcm.rs` the one encrypting provider).
//! - `file.rs` reads, generates (`DATA_DIR/pki/encryption-config.yaml`, mode 0600) and
//!   rewrites the file for a key rotation.
//! - [`check_store`] refuses to start on a store whose Secrets were encrypted with keys the
//!   configuration does not hold (a second server given a fresh data directory).

mod aesgcm;
mod config;
mod file;
mod providers;
mod resources;
mod store;

use std::path::Path;

use setpoint_store::{ListRequest, Store};

pub use file::{
    default_config_path, load, load_or_generate, with_new_key, with_old_keys_retired, write,
    DEFAULT_FILE,
};
pub use providers::{EncryptionConfig, StoredForm};
pub use store::EncryptedStore;

/// Why a configuration cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum EncryptionError {
    /// The file is not YAML (or JSON) of the expected shape.
    #[error("the encryption configuration does not parse: {0}")]
    Parse(String),
    /// The file parses but breaks the rules, one message per problem.
    #[error("the encryption configuration is invalid: {}", .0.join("; "))]
    Invalid(Vec<String>),
    /// One of the above, in a named file.
    #[error("{path}: {source}")]
    InFile {
        /// The file.
        path: String,
        /// What is wrong with it.
        #[source]
        source: Box<EncryptionError>,
    },
    /// Reading or writing the file failed.
    #[error("{context}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The system's random number generator failed.
    #[error("the system's random number generator failed")]
    Random,
    /// A rotation found no resource whose first provider is aesgcm.
    #[error(
        "no resource is encrypted (no entry's first provider is aesgcm): there is no key to rotate"
    )]
    NothingToRotate,
    /// The store holds values this configuration cannot read.
    #[error("{0}")]
    Unreadable(String),
}

impl EncryptionError {
    fn in_file(self, path: &Path) -> EncryptionError {
        EncryptionError::InFile {
            path: path.display().to_string(),
            source: Box::new(self),
        }
    }
}

/// Why a value could not be transformed.
#[derive(Debug, thiserror::Error)]
pub enum TransformError {
    /// No provider of the value's resource reads it.
    #[error("no provider of the encryption configuration reads it (it was written with {found})")]
    NoProvider {
        /// What the value was written with.
        found: String,
    },
    /// The key its prefix names failed to decrypt it.
    #[error("{provider} key {key:?} failed to decrypt it (another secret under that name, or altered data)")]
    Open {
        /// `aesgcm`.
        provider: &'static str,
        /// The key's name.
        key: String,
    },
    /// Encrypting failed.
    #[error("aesgcm key {key:?} failed to encrypt it")]
    Seal {
        /// The key's name.
        key: String,
    },
    /// The system's random number generator failed.
    #[error("the system's random number generator failed")]
    Random,
}

/// Checks that `config` reads the Secrets already in `store` (the first page of them): a
/// server started with a fresh data directory on a shared etcd would otherwise generate a key
/// of its own and fail every read of the cluster's Secrets.
pub async fn check_store(
    store: &dyn Store,
    config: &EncryptionConfig,
) -> Result<(), EncryptionError> {
    let page = store
        .list(ListRequest::prefix("/registry/secrets/").limit(100))
        .await
        .map_err(|e| EncryptionError::Unreadable(format!("reading the stored Secrets: {e}")))?;
    for kv in &page.kvs {
        if let Err(e) = config.from_storage(&kv.key, kv.value.clone()) {
            return Err(EncryptionError::Unreadable(format!(
                "the store holds Secrets this server's encryption configuration cannot read ({}: {e}); \
                 servers sharing a store must share its keys: copy DATA_DIR/pki/{DEFAULT_FILE} from \
                 the first server (or pass the cluster's file with --encryption-provider-config)",
                String::from_utf8_lossy(&kv.key)
            )));
        }
    }
    Ok(())
}

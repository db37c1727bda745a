//! [`EncryptionConfig`]: a validated `EncryptionConfiguration`, compiled into what each
//! resource's values go through. For a resource, the first entry of the file naming it wins
//! (its exact name, else `*.<group>`, else `*.*`); of that entry's providers the first
//! transforms every write and all of them read: an aesgcm key reads the values its prefix
//! marks, identity reads values without any `k8s:enc:` prefix (the plaintext written before
//! encryption was configured).

use std::collections::HashMap;

use bytes::Bytes;
use ring::rand::SystemRandom;

use super::aesgcm::{self, AesGcmKey};
use super::config::{self, EncryptionConfiguration};
use super::resources::group_resource_of;
use super::{EncryptionError, TransformError};

/// What marks every encrypted value, whichever provider wrote it.
const ENCRYPTED: &[u8] = b"k8s:enc:";

/// One provider, ready to use.
#[derive(Debug)]
enum Provider {
    /// Keys in order: the first encrypts.
    AesGcm(Vec<AesGcmKey>),
    Identity,
}

/// The providers of one entry of the file, in order.
#[derive(Debug)]
struct Providers(Vec<Provider>);

/// How a stored value was written, as `setpoint encryption status` reports it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum StoredForm {
    /// Plaintext (the identity provider).
    Plain,
    /// Encrypted with a key the configuration lists: `aesgcm:<name>`.
    Key(String),
    /// Encrypted with something the configuration does not list (the stored prefix, e.g.
    /// `k8s:enc:aesgcm:v1:old`).
    Unknown(String),
}

impl std::fmt::Display for StoredForm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoredForm::Plain => f.write_str("identity (plaintext)"),
            StoredForm::Key(key) => f.write_str(key),
            StoredForm::Unknown(prefix) => write!(f, "unknown ({prefix})"),
        }
    }
}

/// A validated encryption configuration: which values are encrypted, and how.
pub struct EncryptionConfig {
    file: EncryptionConfiguration,
    entries: Vec<Providers>,
    /// Entry index by group, then resource (looked up without allocating).
    exact: HashMap<String, HashMap<String, usize>>,
    /// Entry index by group, for `*.<group>` (`*.` is the core group).
    any_in_group: HashMap<String, usize>,
    /// The entry of `*.*`.
    any: Option<usize>,
    random: SystemRandom,
}

impl std::fmt::Debug for EncryptionConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EncryptionConfig")
            .field("resources", &self.resources())
            .finish_non_exhaustive()
    }
}

impl EncryptionConfig {
    /// Parses and validates a file's text (YAML or JSON).
    pub fn from_yaml(text: &str) -> Result<EncryptionConfig, EncryptionError> {
        let file: EncryptionConfiguration =
            serde_yaml_ng::from_str(text).map_err(|e| EncryptionError::Parse(e.to_string()))?;
        Self::compile(file)
    }

    pub(crate) fn compile(
        file: EncryptionConfiguration,
    ) -> Result<EncryptionConfig, EncryptionError> {
        let errors = config::validate(&file);
        if !errors.is_empty() {
            return Err(EncryptionError::Invalid(errors));
        }
        let mut compiled = EncryptionConfig {
            entries: Vec::new(),
            exact: HashMap::new(),
            any_in_group: HashMap::new(),
            any: None,
            random: SystemRandom::new(),
            file: file.clone(),
        };
        for (index, entry) in file.resources.iter().enumerate() {
            let mut providers = Vec::new();
            for provider in &entry.providers {
                if let Some(keys) = &provider.aesgcm {
                    let mut compiled_keys = Vec::new();
                    for key in &keys.keys {
                        let secret = config::decode_secret(&key.secret)
                            .and_then(|secret| AesGcmKey::new(&key.name, &secret))
                            .ok_or_else(|| {
                                EncryptionError::Invalid(vec![format!(
                                    "aesgcm key {:?}: not a 16- or 32-byte base64 secret",
                                    key.name
                                )])
                            })?;
                        compiled_keys.push(secret);
                    }
                    providers.push(Provider::AesGcm(compiled_keys));
                } else {
                    providers.push(Provider::Identity);
                }
            }
            compiled.entries.push(Providers(providers));
            // The first entry naming a resource wins; later ones are masked for it.
            for name in &entry.resources {
                let (group, resource) = config::parse_group_resource(name);
                match (group.as_str(), resource.as_str()) {
                    ("*", "*") => {
                        compiled.any.get_or_insert(index);
                    }
                    (group, "*") => {
                        compiled
                            .any_in_group
                            .entry(group.to_owned())
                            .or_insert(index);
                    }
                    _ => {
                        compiled
                            .exact
                            .entry(group)
                            .or_default()
                            .entry(resource)
                            .or_insert(index);
                    }
                }
            }
        }
        Ok(compiled)
    }

    /// The file form (for rewriting it, as a key rotation does).
    pub(crate) fn file(&self) -> &EncryptionConfiguration {
        &self.file
    }

    /// The resources the file names, in its order.
    pub fn resources(&self) -> Vec<String> {
        self.file
            .resources
            .iter()
            .flat_map(|entry| entry.resources.iter().cloned())
            .collect()
    }

    /// The providers of the resource at `storage_key`, and the resource's group and name;
    /// `None` when no entry names it (values pass untouched).
    fn providers_for<'k>(&self, storage_key: &'k [u8]) -> Option<(&Providers, &'k str, &'k str)> {
        let (group, resource) = group_resource_of(storage_key)?;
        let index = self
            .exact
            .get(group)
            .and_then(|resources| resources.get(resource))
            .or_else(|| self.any_in_group.get(group))
            .or(self.any.as_ref())?;
        Some((self.entries.get(*index)?, group, resource))
    }

    /// Whether any value of the store is transformed by this configuration's writes.
    pub fn encrypts_anything(&self) -> bool {
        self.entries
            .iter()
            .any(|p| matches!(p.0.first(), Some(Provider::AesGcm(_))))
    }

    /// The value to store at `storage_key` for the plaintext `plain`.
    pub fn to_storage(&self, storage_key: &[u8], plain: Bytes) -> Result<Bytes, TransformError> {
        let Some((providers, _, _)) = self.providers_for(storage_key) else {
            return Ok(plain);
        };
        match providers.0.first() {
            Some(Provider::AesGcm(keys)) => match keys.first() {
                Some(key) => Ok(Bytes::from(key.seal(&self.random, storage_key, &plain)?)),
                None => Ok(plain),
            },
            Some(Provider::Identity) | None => Ok(plain),
        }
    }

    /// The plaintext of the value `stored` at `storage_key`.
    pub fn from_storage(&self, storage_key: &[u8], stored: Bytes) -> Result<Bytes, TransformError> {
        let Some((providers, _, _)) = self.providers_for(storage_key) else {
            return Ok(stored);
        };
        let mut failure = None;
        for provider in &providers.0 {
            match provider {
                Provider::AesGcm(keys) => {
                    for key in keys.iter().filter(|key| key.wrote(&stored)) {
                        match key.open(storage_key, &stored) {
                            Ok(plain) => return Ok(Bytes::from(plain)),
                            Err(e) => failure = Some(e),
                        }
                    }
                }
                Provider::Identity if !stored.starts_with(ENCRYPTED) => return Ok(stored),
                Provider::Identity => {}
            }
        }
        Err(failure.unwrap_or_else(|| TransformError::NoProvider {
            found: if stored.starts_with(ENCRYPTED) {
                format!("the prefix {:?}", prefix_of(&stored))
            } else {
                "no encryption (plaintext), but identity is not a provider".to_owned()
            },
        }))
    }

    /// The resource of `storage_key` (`secrets`) and how `stored` was written; `None` for a key
    /// of a resource the configuration does not name.
    pub fn classify(&self, storage_key: &[u8], stored: &[u8]) -> Option<(String, StoredForm)> {
        let (providers, group, resource) = self.providers_for(storage_key)?;
        let resource = if group.is_empty() {
            resource.to_owned()
        } else {
            format!("{resource}.{group}")
        };
        if !stored.starts_with(ENCRYPTED) {
            return Some((resource, StoredForm::Plain));
        }
        let form = providers
            .0
            .iter()
            .find_map(|provider| match provider {
                Provider::AesGcm(keys) => keys
                    .iter()
                    .find(|key| key.wrote(stored))
                    .map(|key| StoredForm::Key(format!("aesgcm:{}", key.name()))),
                Provider::Identity => None,
            })
            .unwrap_or_else(|| StoredForm::Unknown(prefix_of(stored)));
        Some((resource, form))
    }

    /// Whether `stored` is already in the form a write at `storage_key` produces now (with the
    /// first provider's first key), so a rewrite may skip it.
    pub fn is_current(&self, storage_key: &[u8], stored: &[u8]) -> bool {
        let Some((providers, _, _)) = self.providers_for(storage_key) else {
            return true;
        };
        match providers.0.first() {
            Some(Provider::AesGcm(keys)) => keys.first().is_some_and(|key| key.wrote(stored)),
            Some(Provider::Identity) | None => !stored.starts_with(ENCRYPTED),
        }
    }
}

/// The provider and key name of an encrypted value: `k8s:enc:aesgcm:v1:key1`.
fn prefix_of(stored: &[u8]) -> String {
    let text = String::from_utf8_lossy(&stored[..stored.len().min(80)]).into_owned();
    let parts: Vec<&str> = text.splitn(6, ':').collect();
    if text.starts_with(aesgcm::PREFIX) && parts.len() >= 5 {
        parts[..5].join(":")
    } else {
        parts[..parts.len().min(3)].join(":")
    }
}

#[cfg(test)]
mod tests;

//! The `EncryptionConfiguration` file (kube-apiserver's `apiserver.config.k8s.io/v1` format,
//! the file `--encryption-provider-config` names): its serde form, and its validation with
//! kube-apiserver's field paths and messages, plus setpoint's refusals of the providers it does
//! not implement (`aescbc`, `secretbox`, `kms`, 24-byte AES keys), each saying why.

use base64::Engine as _;
use serde::{Deserialize, Serialize};

/// The `apiVersion` of the file.
pub(crate) const API_VERSION: &str = "apiserver.config.k8s.io/v1";
/// The `kind` of the file.
pub(crate) const KIND: &str = "EncryptionConfiguration";

/// The file as written: which resources are encrypted by which providers.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct EncryptionConfiguration {
    #[serde(default)]
    pub(crate) api_version: String,
    #[serde(default)]
    pub(crate) kind: String,
    #[serde(default)]
    pub(crate) resources: Vec<ResourceConfiguration>,
}

/// One entry: resources (`secrets`, `deployments.apps`, `*.apps`, `*.`, `*.*`) and their
/// providers, the first of which encrypts what is written while every one of them reads.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ResourceConfiguration {
    #[serde(default)]
    pub(crate) resources: Vec<String>,
    #[serde(default)]
    pub(crate) providers: Vec<ProviderConfiguration>,
}

/// One provider; exactly one field is set.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ProviderConfiguration {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) aesgcm: Option<KeysConfiguration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) aescbc: Option<KeysConfiguration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) secretbox: Option<KeysConfiguration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) identity: Option<IdentityConfiguration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) kms: Option<serde_json::Value>,
}

/// The keys of a key-based provider; the first encrypts.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct KeysConfiguration {
    #[serde(default)]
    pub(crate) keys: Vec<Key>,
}

/// A named key: `secret` is its bytes in standard base64.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Key {
    #[serde(default)]
    pub(crate) name: String,
    #[serde(default)]
    pub(crate) secret: String,
}

/// The identity provider (no settings).
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct IdentityConfiguration {}

/// A group and a resource as the file names them: `deployments.apps` → (`apps`,
/// `deployments`); `secrets` → (``, `secrets`); `*.` → (``, `*`); `*.*` → (`*`, `*`).
pub(crate) fn parse_group_resource(text: &str) -> (String, String) {
    match text.split_once('.') {
        Some((resource, group)) => (group.to_owned(), resource.to_owned()),
        None => (String::new(), text.to_owned()),
    }
}

/// Validates a parsed file; each problem is one line
/// `path: Invalid value: …: message` as kube-apiserver words it.
pub(crate) fn validate(config: &EncryptionConfiguration) -> Vec<String> {
    let mut errors = Vec::new();
    if config.api_version != API_VERSION || config.kind != KIND {
        errors.push(format!(
            "apiVersion/kind: Invalid value: \"{}/{}\": the file must be apiVersion: {API_VERSION}, kind: {KIND}",
            config.api_version, config.kind
        ));
        return errors;
    }
    if config.resources.is_empty() {
        errors.push("resources: Required value: at least one resources is required".into());
        return errors;
    }
    for (i, entry) in config.resources.iter().enumerate() {
        let r = format!("resources[{i}].resources");
        let p = format!("resources[{i}].providers");
        if entry.resources.is_empty() {
            errors.push(format!("{r}: Required value: at least one {r} is required"));
        }
        validate_overlap(&entry.resources, &r, &mut errors);
        validate_names(&entry.resources, &r, &mut errors);
        if entry.providers.is_empty() {
            errors.push(format!("{p}: Required value: at least one {p} is required"));
        }
        for (j, provider) in entry.providers.iter().enumerate() {
            validate_provider(provider, &format!("{p}[{j}]"), &mut errors);
        }
    }
    errors
}

fn validate_overlap(resources: &[String], path: &str, errors: &mut Vec<String>) {
    let parsed: Vec<_> = resources.iter().map(|r| parse_group_resource(r)).collect();
    let mut duplicate = false;
    let mut overlap = false;
    for (i, a) in parsed.iter().enumerate() {
        for (j, b) in parsed.iter().enumerate() {
            if i == j {
                continue;
            }
            if a == b {
                duplicate = true;
            } else if (a.0 == "*" && a.1 == "*") || (a.0 == b.0 && (a.1 == "*" || b.1 == "*")) {
                overlap = true;
            }
        }
    }
    let value = serde_json::to_string(resources).unwrap_or_default();
    if duplicate {
        errors.push(format!(
            "{path}: Invalid value: {value}: the same resource cannot be specified multiple times"
        ));
    }
    if overlap {
        errors.push(format!(
            "{path}: Invalid value: {value}: using overlapping resources such as 'secrets' and '*.' in the same resource list is not allowed as they will be masked"
        ));
    }
}

fn validate_names(resources: &[String], path: &str, errors: &mut Vec<String>) {
    for (j, name) in resources.iter().enumerate() {
        let (group, resource) = parse_group_resource(name);
        let message = if name.to_lowercase() != *name {
            "resource name should not contain capital letters"
        } else if name == "*" {
            "use '*.' to encrypt all the resources from core API group or *.* to encrypt all resources"
        } else if matches!(
            name.as_str(),
            "apiserveripinfo" | "serviceipallocations" | "servicenodeportallocations"
        ) {
            "resources which do not have REST API/s cannot be encrypted"
        } else if group == "events.k8s.io" {
            "'*.events.k8s.io' objects are stored using the 'events' API group in etcd. Use 'events' instead in the config file"
        } else if group == "extensions" {
            "'extensions' group has been removed and cannot be used for encryption"
        } else if group == "*" && resource != "*" {
            "encrypting the same resource across groups is not supported"
        } else {
            continue;
        };
        errors.push(format!("{path}[{j}]: Invalid value: \"{name}\": {message}"));
    }
}

fn validate_provider(provider: &ProviderConfiguration, path: &str, errors: &mut Vec<String>) {
    let set = [
        provider.kms.is_some(),
        provider.aesgcm.is_some(),
        provider.aescbc.is_some(),
        provider.secretbox.is_some(),
        provider.identity.is_some(),
    ]
    .into_iter()
    .filter(|s| *s)
    .count();
    if set == 0 {
        errors.push(format!("{path}: Invalid value: {{}}: provider does not contain any of the expected providers: KMS, AESGCM, AESCBC, Secretbox, Identity"));
        return;
    }
    if set > 1 {
        errors.push(format!("{path}: Invalid value: …: more than one provider specified in a single element, should split into different list elements"));
        return;
    }
    let unsupported = |name: &str, why: &str| {
        format!("{path}.{name}: Unsupported value: \"{name}\": setpoint implements the aesgcm and identity providers only; {why}")
    };
    if let Some(keys) = &provider.aesgcm {
        let keys_path = format!("{path}.aesgcm.keys");
        validate_keys(&keys.keys, &keys_path, &[16, 24, 32], errors);
        for (i, key) in keys.keys.iter().enumerate() {
            if decode_secret(&key.secret).is_some_and(|bytes| bytes.len() == 24) {
                errors.push(format!(
                    "{keys_path}[{i}].secret: Unsupported value: \"REDACTED\": a 24-byte (AES-192) key is not supported: ring, setpoint's cryptography library, provides AES-128-GCM and AES-256-GCM; use a 32-byte key"
                ));
            }
        }
    } else if provider.aescbc.is_some() {
        errors.push(unsupported(
            "aescbc",
            "ring, setpoint's cryptography library, has no AES-CBC (kube-apiserver's docs advise against aescbc anyway): use aesgcm",
        ));
    } else if provider.secretbox.is_some() {
        errors.push(unsupported(
            "secretbox",
            "ring, setpoint's cryptography library, has no XSalsa20-Poly1305: use aesgcm",
        ));
    } else if provider.kms.is_some() {
        errors.push(unsupported(
            "kms",
            "there is no KMS plugin client: use aesgcm with a key kept in the data directory",
        ));
    }
}

fn validate_keys(keys: &[Key], path: &str, sizes: &[usize], errors: &mut Vec<String>) {
    if keys.is_empty() {
        errors.push(format!(
            "{path}: Required value: at least one keys is required"
        ));
        return;
    }
    let mut names = std::collections::BTreeSet::new();
    for (i, key) in keys.iter().enumerate() {
        let at = format!("{path}[{i}]");
        if key.name.is_empty() {
            errors.push(format!(
                "{at}.name: Required value: name is a mandatory field for a key"
            ));
        } else if key.name.contains(':') {
            // The name is part of the stored prefix `k8s:enc:aesgcm:v1:<name>:`.
            errors.push(format!(
                "{at}.name: Invalid value: \"{}\": a key name must not contain ':'",
                key.name
            ));
        } else if !names.insert(key.name.as_str()) {
            errors.push(format!(
                "{at}.name: Duplicate value: \"{}\": key names must be unique within a provider",
                key.name
            ));
        }
        if key.secret.is_empty() {
            errors.push(format!(
                "{at}.secret: Required value: secret is a mandatory field for a key"
            ));
            continue;
        }
        match decode_secret(&key.secret) {
            None => errors.push(format!(
                "{at}.secret: Invalid value: \"REDACTED\": secrets must be base64 encoded"
            )),
            Some(bytes) if !sizes.contains(&bytes.len()) => errors.push(format!(
                "{at}.secret: Invalid value: \"REDACTED\": secret is not of the expected length, got {}, expected one of {sizes:?}",
                bytes.len()
            )),
            Some(_) => {}
        }
    }
}

/// The bytes of a base64 secret, if it decodes.
pub(crate) fn decode_secret(secret: &str) -> Option<Vec<u8>> {
    base64::engine::general_purpose::STANDARD
        .decode(secret.trim())
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errors_of(yaml: &str) -> Vec<String> {
        let config: EncryptionConfiguration = serde_yaml_ng::from_str(yaml).unwrap();
        validate(&config)
    }

    const HEAD: &str = "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\n";

    #[test]
    fn validate_should_accept_aesgcm_and_identity() {
        let yaml = format!(
            "{HEAD}resources:\n- resources: [secrets, '*.apps']\n  providers:\n  - aesgcm:\n      keys:\n      - {{name: k1, secret: {}}}\n  - identity: {{}}\n",
            base64::engine::general_purpose::STANDARD.encode([7u8; 32])
        );
        assert_eq!(errors_of(&yaml), Vec::<String>::new());
    }

    #[test]
    fn validate_should_word_errors_as_kube_apiserver() {
        let yaml = format!(
            "{HEAD}resources:\n- resources: [secrets, '*.', Pods, '*', pods.*, events.events.k8s.io]\n  providers:\n  - aesgcm:\n      keys:\n      - {{name: k1, secret: c2hvcnQ=}}\n      - {{name: '', secret: '!!'}}\n  - {{}}\n"
        );
        let errors = errors_of(&yaml).join("\n");
        for expected in [
            "resources[0].resources: Invalid value: [\"secrets\",\"*.\",\"Pods\",\"*\",\"pods.*\",\"events.events.k8s.io\"]: using overlapping resources",
            "resources[0].resources[2]: Invalid value: \"Pods\": resource name should not contain capital letters",
            "resources[0].resources[3]: Invalid value: \"*\": use '*.' to encrypt all",
            "resources[0].resources[4]: Invalid value: \"pods.*\": encrypting the same resource across groups is not supported",
            "resources[0].resources[5]: Invalid value: \"events.events.k8s.io\": '*.events.k8s.io' objects are stored",
            "resources[0].providers[0].aesgcm.keys[0].secret: Invalid value: \"REDACTED\": secret is not of the expected length, got 5, expected one of [16, 24, 32]",
            "resources[0].providers[0].aesgcm.keys[1].name: Required value: name is a mandatory field for a key",
            "resources[0].providers[0].aesgcm.keys[1].secret: Invalid value: \"REDACTED\": secrets must be base64 encoded",
            "resources[0].providers[1]: Invalid value: {}: provider does not contain any of the expected providers",
        ] {
            assert!(errors.contains(expected), "missing {expected:?} in\n{errors}");
        }
    }

    #[test]
    fn validate_should_refuse_what_ring_cannot_do_saying_why() {
        let key24 = base64::engine::general_purpose::STANDARD.encode([1u8; 24]);
        let yaml = format!(
            "{HEAD}resources:\n- resources: [secrets]\n  providers:\n  - aesgcm: {{keys: [{{name: a, secret: {key24}}}]}}\n  - secretbox: {{keys: [{{name: b, secret: {key24}}}]}}\n  - aescbc: {{keys: [{{name: c, secret: {key24}}}]}}\n"
        );
        let errors = errors_of(&yaml).join("\n");
        assert!(
            errors.contains("a 24-byte (AES-192) key is not supported"),
            "{errors}"
        );
        assert!(
            errors.contains("providers[1].secretbox: Unsupported value"),
            "{errors}"
        );
        assert!(errors.contains("no XSalsa20-Poly1305"), "{errors}");
        assert!(
            errors.contains("providers[2].aescbc: Unsupported value"),
            "{errors}"
        );
    }

    #[test]
    fn validate_should_refuse_another_kind_and_no_resources() {
        let config: EncryptionConfiguration =
            serde_yaml_ng::from_str("apiVersion: v1\nkind: Secret\n").unwrap();
        assert!(validate(&config)[0].contains("must be apiVersion: apiserver.config.k8s.io/v1"));
        assert_eq!(
            errors_of(HEAD),
            vec!["resources: Required value: at least one resources is required".to_owned()]
        );
    }
}

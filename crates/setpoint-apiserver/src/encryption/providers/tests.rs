use base64::Engine as _;
use bytes::Bytes;

use super::*;

fn secret(byte: u8) -> String {
    base64::engine::general_purpose::STANDARD.encode([byte; 32])
}

fn config(entries: &str) -> EncryptionConfig {
    EncryptionConfig::from_yaml(&format!(
        "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n{entries}"
    ))
    .unwrap()
}

#[test]
fn first_provider_should_write_and_every_provider_read() {
    let old = config(&format!(
        "- resources: [secrets]\n  providers:\n  - aesgcm: {{keys: [{{name: a, secret: {}}}]}}\n",
        secret(1)
    ));
    let both = config(&format!(
        "- resources: [secrets]\n  providers:\n  - aesgcm: {{keys: [{{name: b, secret: {}}}, {{name: a, secret: {}}}]}}\n  - identity: {{}}\n",
        secret(2),
        secret(1)
    ));
    let key = b"/registry/secrets/ns/s";
    let by_old = old.to_storage(key, Bytes::from_static(b"{}")).unwrap();
    assert!(by_old.starts_with(b"k8s:enc:aesgcm:v1:a:"));
    assert_eq!(both.from_storage(key, by_old.clone()).unwrap(), "{}");
    assert_eq!(
        both.classify(key, &by_old),
        Some(("secrets".into(), StoredForm::Key("aesgcm:a".into())))
    );
    let by_new = both.to_storage(key, Bytes::from_static(b"{}")).unwrap();
    assert!(by_new.starts_with(b"k8s:enc:aesgcm:v1:b:"));
    // Plaintext from before encryption: identity reads it; without identity it is an error.
    assert_eq!(
        both.from_storage(key, Bytes::from_static(b"{\"a\":1}"))
            .unwrap(),
        "{\"a\":1}"
    );
    let error = old
        .from_storage(key, Bytes::from_static(b"{}"))
        .unwrap_err();
    assert!(
        error.to_string().contains("identity is not a provider"),
        "{error}"
    );
    // A key the configuration lost: named in the error.
    let error = config(&format!(
        "- resources: [secrets]\n  providers:\n  - aesgcm: {{keys: [{{name: c, secret: {}}}]}}\n  - identity: {{}}\n",
        secret(3)
    ))
    .from_storage(key, by_old.clone())
    .unwrap_err();
    assert!(error.to_string().contains("k8s:enc:aesgcm:v1:a"), "{error}");
    // The same name with another secret: a decryption failure naming the key.
    let error = config(&format!(
        "- resources: [secrets]\n  providers:\n  - aesgcm: {{keys: [{{name: a, secret: {}}}]}}\n",
        secret(9)
    ))
    .from_storage(key, by_old)
    .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("aesgcm key \"a\" failed to decrypt"),
        "{error}"
    );
}

#[test]
fn resources_should_match_exactly_then_by_group_then_everything_first_entry_winning() {
    let c = config(&format!(
        "- resources: [configmaps]\n  providers:\n  - identity: {{}}\n\
         - resources: ['*.apps', configmaps]\n  providers:\n  - aesgcm: {{keys: [{{name: apps, secret: {}}}]}}\n\
         - resources: ['*.*']\n  providers:\n  - aesgcm: {{keys: [{{name: all, secret: {}}}]}}\n",
        secret(1),
        secret(2)
    ));
    let written = |key: &[u8]| c.to_storage(key, Bytes::from_static(b"x")).unwrap();
    assert_eq!(written(b"/registry/configmaps/ns/c"), "x");
    assert!(written(b"/registry/deployments/ns/d").starts_with(b"k8s:enc:aesgcm:v1:apps:"));
    assert!(written(b"/registry/secrets/ns/s").starts_with(b"k8s:enc:aesgcm:v1:all:"));
    assert!(written(b"/registry/example.com/widgets/ns/w").starts_with(b"k8s:enc:aesgcm:v1:all:"));
    // Keys of no resource are never transformed.
    assert_eq!(written(b"/registry/compact_rev_key"), "x");
    assert!(c.classify(b"/registry/compact_rev_key", b"x").is_none());
}

#[test]
fn secrets_only_should_leave_configmaps_plain() {
    let c = config(&format!(
        "- resources: [secrets]\n  providers:\n  - aesgcm: {{keys: [{{name: a, secret: {}}}]}}\n  - identity: {{}}\n",
        secret(1)
    ));
    assert_eq!(
        c.to_storage(b"/registry/configmaps/ns/c", Bytes::from_static(b"x"))
            .unwrap(),
        "x"
    );
    assert!(c.is_current(b"/registry/configmaps/ns/c", b"x"));
    assert!(!c.is_current(b"/registry/secrets/ns/c", b"x"));
    assert!(c.encrypts_anything());
}

use std::sync::Arc;

use base64::Engine as _;
use bytes::Bytes;
use futures::StreamExt as _;
use setpoint_store::{ModelStore, Store, StoreError};

use super::*;
use crate::encryption::check_store;

fn encrypted() -> (Arc<ModelStore>, EncryptedStore) {
    let raw = Arc::new(ModelStore::new());
    let config = EncryptionConfig::from_yaml(&format!(
        "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n\
         - resources: [secrets]\n  providers:\n  - aesgcm: {{keys: [{{name: k, secret: {}}}]}}\n  - identity: {{}}\n",
        base64::engine::general_purpose::STANDARD.encode([5u8; 32])
    ))
    .unwrap();
    let store = EncryptedStore::new(raw.clone(), Arc::new(config));
    (raw, store)
}

#[tokio::test]
async fn values_should_be_stored_encrypted_and_read_back_plain_everywhere() {
    let (raw, store) = encrypted();
    let key = Bytes::from_static(b"/registry/secrets/ns/s");
    let mut watch = store
        .watch(Bytes::from_static(b"/registry/secrets/"), Revision::ZERO)
        .await
        .unwrap();
    let created = store
        .create(key.clone(), Bytes::from_static(b"one"))
        .await
        .unwrap();
    assert_eq!(created.value, "one");
    let stored = raw.get(&key).await.unwrap().unwrap();
    assert!(stored.value.starts_with(b"k8s:enc:aesgcm:v1:k:"));
    store
        .update(
            key.clone(),
            Bytes::from_static(b"two"),
            Some(created.mod_revision),
        )
        .await
        .unwrap();
    assert_eq!(store.get(&key).await.unwrap().unwrap().value, "two");
    let listed = store
        .list(ListRequest::prefix("/registry/secrets/"))
        .await
        .unwrap();
    assert_eq!(listed.kvs[0].value, "two");
    // A failed write's current value is decrypted too.
    match store.create(key.clone(), Bytes::from_static(b"x")).await {
        Err(StoreError::AlreadyExists { current }) => assert_eq!(current.value, "two"),
        other => panic!("{other:?}"),
    }
    let deleted = store.delete(key.clone(), None).await.unwrap();
    assert_eq!(deleted.prev.unwrap().value, "two");
    let mut seen = Vec::new();
    while seen.len() < 3 {
        let batch = watch.next().await.unwrap().unwrap();
        for event in batch.events {
            seen.push((
                event.kv.value.clone(),
                event.prev.map(|p| p.value).unwrap_or_default(),
            ));
        }
    }
    assert_eq!(
        seen,
        vec![
            (Bytes::from_static(b"one"), Bytes::new()),
            (Bytes::from_static(b"two"), Bytes::from_static(b"one")),
            (Bytes::new(), Bytes::from_static(b"two")),
        ]
    );
}

#[tokio::test]
async fn plaintext_from_before_should_read_and_an_unreadable_value_fail_get_by_key() {
    let (raw, store) = encrypted();
    raw.create(
        Bytes::from_static(b"/registry/secrets/ns/old"),
        Bytes::from_static(b"plain"),
    )
    .await
    .unwrap();
    raw.create(
        Bytes::from_static(b"/registry/secrets/ns/bad"),
        Bytes::from_static(b"k8s:enc:aesgcm:v1:gone:xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"),
    )
    .await
    .unwrap();
    assert_eq!(
        store
            .get(b"/registry/secrets/ns/old")
            .await
            .unwrap()
            .unwrap()
            .value,
        "plain"
    );
    let error = store.get(b"/registry/secrets/ns/bad").await.unwrap_err();
    assert!(
        error
            .to_string()
            .contains("unable to transform key \"/registry/secrets/ns/bad\""),
        "{error}"
    );
    // A list still answers: the readable value plain, the unreadable one as stored.
    let listed = store
        .list(ListRequest::prefix("/registry/secrets/"))
        .await
        .unwrap();
    assert_eq!(listed.kvs.len(), 2);
    assert!(listed.kvs[0].value.starts_with(b"k8s:enc:"));
    assert_eq!(listed.kvs[1].value, "plain");
    assert!(check_store(raw.as_ref(), store.config.as_ref())
        .await
        .is_err());
}

#[tokio::test]
async fn other_resources_should_pass_through_untouched() {
    let (raw, store) = encrypted();
    let key = Bytes::from_static(b"/registry/configmaps/ns/c");
    store
        .create(key.clone(), Bytes::from_static(b"plain"))
        .await
        .unwrap();
    assert_eq!(raw.get(&key).await.unwrap().unwrap().value, "plain");
}

//! The etcd backend over TLS: a local etcd member serving clients with a certificate from a
//! test CA and requiring client certificates. With the CA and a client certificate the store
//! works; without a client certificate, or without the CA, connecting fails with a clear
//! `Unavailable` instead of hanging.

#![cfg(feature = "etcd")]

use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use rcgen::{
    BasicConstraints, CertificateParams, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, SanType,
};
use setpoint_store::{EtcdConfig, EtcdStore, EtcdTls, LocalEtcd, LocalEtcdTls, Store, StoreError};

/// PEM files: a CA, a serving certificate for 127.0.0.1, a client certificate.
struct Pki {
    ca: PathBuf,
    server: (PathBuf, PathBuf),
    client: (PathBuf, PathBuf),
}

fn issue(dir: &Path) -> Pki {
    let write = |name: &str, pem: String| {
        let path = dir.join(name);
        std::fs::write(&path, pem).expect("write a PEM file");
        path
    };
    let ca_key = KeyPair::generate().expect("CA key");
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_cert = ca_params.self_signed(&ca_key).expect("CA certificate");
    let ca = write("ca.pem", ca_cert.pem());
    let issuer = Issuer::new(ca_params, ca_key);

    let server_key = KeyPair::generate().expect("server key");
    let mut server_params = CertificateParams::new(vec!["localhost".to_owned()]).expect("params");
    server_params
        .subject_alt_names
        .push(SanType::IpAddress([127, 0, 0, 1].into()));
    server_params.extended_key_usages = vec![
        ExtendedKeyUsagePurpose::ServerAuth,
        ExtendedKeyUsagePurpose::ClientAuth,
    ];
    let server_cert = server_params
        .signed_by(&server_key, &issuer)
        .expect("server certificate");

    let client_key = KeyPair::generate().expect("client key");
    let mut client_params = CertificateParams::new(Vec::<String>::new()).expect("params");
    client_params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let client_cert = client_params
        .signed_by(&client_key, &issuer)
        .expect("client certificate");

    Pki {
        ca,
        server: (
            write("server.pem", server_cert.pem()),
            write("server-key.pem", server_key.serialize_pem()),
        ),
        client: (
            write("client.pem", client_cert.pem()),
            write("client-key.pem", client_key.serialize_pem()),
        ),
    }
}

fn config(etcd: &LocalEtcd, tls: EtcdTls) -> EtcdConfig {
    let mut config = etcd.config().without_auto_compaction();
    config.tls = Some(tls);
    config.connect_timeout = Duration::from_secs(2);
    config.request_timeout = Duration::from_secs(3);
    config
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_should_work_over_tls_with_a_client_certificate_and_refuse_without() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let pki = issue(dir.path());
    let etcd = LocalEtcd::start_tls(&LocalEtcdTls {
        cert: pki.server.0.clone(),
        key: pki.server.1.clone(),
        ca: pki.ca.clone(),
    })
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(etcd.endpoint().starts_with("https://127.0.0.1:"));

    let store = EtcdStore::connect(config(
        &etcd,
        EtcdTls {
            ca_cert: Some(pki.ca.clone()),
            client_cert: Some(pki.client.0.clone()),
            client_key: Some(pki.client.1.clone()),
        },
    ))
    .await
    .unwrap_or_else(|e| panic!("connecting over TLS: {e}"));
    let kv = store
        .create(Bytes::from_static(b"/registry/x"), Bytes::from_static(b"v"))
        .await
        .expect("a create over TLS");
    assert_eq!(
        store.get(b"/registry/x").await.expect("get"),
        Some(kv.clone())
    );

    for (what, tls) in [
        (
            "without a client certificate",
            EtcdTls {
                ca_cert: Some(pki.ca.clone()),
                ..EtcdTls::default()
            },
        ),
        (
            "without the CA",
            EtcdTls {
                ca_cert: None,
                client_cert: Some(pki.client.0.clone()),
                client_key: Some(pki.client.1.clone()),
            },
        ),
    ] {
        match EtcdStore::connect(config(&etcd, tls)).await {
            Err(StoreError::Unavailable(message)) => {
                assert!(message.contains("etcd"), "{what}: {message}")
            }
            Err(other) => panic!("{what}: expected Unavailable, got {other}"),
            Ok(_) => panic!("{what}: connected"),
        }
    }

    match EtcdStore::connect(config(
        &etcd,
        EtcdTls {
            ca_cert: Some(pki.ca.clone()),
            client_cert: Some(pki.client.0.clone()),
            client_key: None,
        },
    ))
    .await
    {
        Err(StoreError::InvalidArgument(_)) => {}
        other => panic!(
            "a certificate without its key: expected InvalidArgument, got {:?}",
            other.err()
        ),
    }
}

//! The certificate provider against an in-process API server, on a manual clock: a
//! self-signed Issuer issues a root CA Certificate into a Secret; a CA Issuer made from that
//! Secret issues a leaf whose chain `openssl verify` accepts, also written to a directory;
//! moving the clock past the renewal time renews it (new serial, revision + 1, one
//! CertificateRequest kept by `revisionHistoryLimit`); a deleted file, an edited spec and a
//! deleted Secret are re-issued; an RSA Certificate is issued with a PKCS#1 key, one asking
//! for an RSA size Setpoint does not make is refused with the reason in `Synced`; deleting
//! the Certificate removes its Secret and files. A ClusterIssuer signs with a CA Secret in
//! the cluster resource namespace. One server, one loop.

use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::api::events::v1::Event;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::Api;
use serde_json::{json, Value};
use setpoint_providers::certs::{self, Certificate, CertificateRequest, ClusterIssuer, Issuer};
use setpoint_providers::{ProviderContext, ProviderSettings};
use setpoint_runtime::{Clock, InformerFactory, Metrics};
use setpoint_testenv::{eventually, Running, TestEnv};
use x509_parser::prelude::{FromDer as _, X509Certificate};

const NS: &str = "default";

fn from_json<T: serde::de::DeserializeOwned>(value: Value) -> T {
    serde_json::from_value(value).expect("a valid object")
}

async fn create<T>(api: &Api<T>, object: Value)
where
    T: Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let object: T = from_json(object);
    // The CRDs are installed by the loop at start: retry until they are served.
    eventually("the object is created (its CRD served)", || async {
        api.create(&PostParams::default(), &object)
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    })
    .await;
}

fn ready(conditions: Option<&Value>) -> bool {
    conditions
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Ready" && c["status"] == "True")
}

async fn certificate(api: &Api<Certificate>, name: &str) -> Value {
    serde_json::to_value(api.get(name).await.expect("the Certificate")).expect("json")
}

/// Waits for `name` to be Ready at revision `revision` and returns it.
async fn ready_at(api: &Api<Certificate>, name: &str, revision: i64) -> Value {
    eventually(
        &format!("Certificate {name} is Ready at revision {revision}"),
        || async {
            let cert = certificate(api, name).await;
            if ready(cert.pointer("/status/conditions"))
                && cert.pointer("/status/revision").and_then(Value::as_i64) == Some(revision)
                && cert.pointer("/status/notAfter").is_some()
            {
                Ok(cert)
            } else {
                Err(format!("status: {}", cert["status"]))
            }
        },
    )
    .await
}

fn key(secret: &Secret, key: &str) -> String {
    secret
        .data
        .as_ref()
        .and_then(|d| d.get(key))
        .map(|v| String::from_utf8(v.0.clone()).expect("PEM is text"))
        .unwrap_or_default()
}

/// The leaf's serial (hex) and DNS names.
fn leaf(pem: &str) -> (String, BTreeSet<String>) {
    let block = x509_parser::pem::Pem::iter_from_buffer(pem.as_bytes())
        .next()
        .expect("a PEM block")
        .expect("PEM");
    let (_, cert) = X509Certificate::from_der(&block.contents).expect("a certificate");
    let names = cert
        .subject_alternative_name()
        .ok()
        .flatten()
        .map(|san| {
            san.value
                .general_names
                .iter()
                .filter_map(|n| match n {
                    x509_parser::extensions::GeneralName::DNSName(d) => Some((*d).to_owned()),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    (cert.raw_serial_as_string(), names)
}

/// `openssl verify -CAfile ca.crt tls.crt` at the clock's time.
fn openssl_verify(dir: &Path, at: DateTime<Utc>) {
    let version = std::process::Command::new("openssl")
        .arg("version")
        .output();
    if !version.is_ok_and(|o| o.status.success()) {
        println!("SKIPPED openssl verify: no openssl on PATH");
        return;
    }
    let out = std::process::Command::new("openssl")
        .args(["verify", "-attime", &at.timestamp().to_string(), "-CAfile"])
        .arg(dir.join("ca.crt"))
        .arg(dir.join("tls.crt"))
        .output()
        .expect("openssl runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains(": OK"),
        "openssl verify failed: {stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificates_are_issued_verified_renewed_and_reissued() {
    let env = TestEnv::start().await.expect("the API server starts");
    let client = env.client();
    let start = DateTime::from_timestamp(Utc::now().timestamp(), 0).expect("now");
    let clock = Clock::manual(start);
    let dir = tempfile::tempdir().expect("a temporary directory");
    let ctx = ProviderContext {
        client: client.clone(),
        factory: InformerFactory::new(client.clone()),
        metrics: Metrics::new(),
        clock: clock.clone(),
        settings: ProviderSettings {
            poll_interval: Duration::from_millis(500),
            dir: Some(dir.path().to_path_buf()),
            ..ProviderSettings::default()
        },
    };
    let running = Running::spawn(|token| certs::run(ctx, token));
    let issuers: Api<Issuer> = client.namespaced_api(NS);
    let certificates: Api<Certificate> = client.namespaced_api(NS);
    let secrets: Api<Secret> = client.namespaced_api(NS);
    let requests: Api<CertificateRequest> = client.namespaced_api(NS);

    // A self-signed issuer makes a root CA (a year, so the renewal below leaves it alone).
    create(
        &issuers,
        json!({"apiVersion": "cert-manager.io/v1", "kind": "Issuer",
               "metadata": {"name": "selfsigned"}, "spec": {"selfSigned": {}}}),
    )
    .await;
    create(
        &certificates,
        json!({"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
               "metadata": {"name": "root-ca"},
               "spec": {"secretName": "root-ca", "isCA": true, "commonName": "test root",
                        "duration": "8760h",
                        "privateKey": {"algorithm": "ECDSA", "size": 256},
                        "issuerRef": {"name": "selfsigned", "kind": "Issuer"}}}),
    )
    .await;
    ready_at(&certificates, "root-ca", 1).await;
    let root = secrets.get("root-ca").await.expect("the root CA's Secret");
    assert_eq!(root.type_.as_deref(), Some("kubernetes.io/tls"));
    for k in ["tls.crt", "tls.key", "ca.crt"] {
        assert!(key(&root, k).contains("-----BEGIN"), "{k} of the root CA");
    }

    eventually("an event says the root CA's Secret was created", || async {
        let events = client
            .namespaced_api::<Event>(NS)
            .list(&ListParams::default())
            .await
            .expect("events");
        events
            .items
            .iter()
            .any(|e| {
                e.reason.as_deref() == Some("CreatedExternalResource")
                    && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("root-ca")
            })
            .then_some(())
    })
    .await;

    // A CA issuer from that Secret.
    create(
        &issuers,
        json!({"apiVersion": "cert-manager.io/v1", "kind": "Issuer",
               "metadata": {"name": "ca"}, "spec": {"ca": {"secretName": "root-ca"}}}),
    )
    .await;
    eventually("the CA issuer is Ready", || async {
        let issuer = serde_json::to_value(issuers.get("ca").await.expect("issuer")).expect("json");
        ready(issuer.pointer("/status/conditions")).then_some(())
    })
    .await;

    // A ClusterIssuer signs with a CA Secret in the cluster resource namespace, `cert-manager`.
    let namespaces: Api<Namespace> = client.api();
    namespaces
        .create(
            &PostParams::default(),
            &from_json(json!({"metadata": {"name": "cert-manager"}})),
        )
        .await
        .expect("the cluster resource namespace");
    let mut copy = root.clone();
    copy.metadata = from_json(json!({"name": "cluster-root", "namespace": "cert-manager"}));
    client
        .namespaced_api::<Secret>("cert-manager")
        .create(&PostParams::default(), &copy)
        .await
        .expect("the ClusterIssuer's CA Secret");
    create(
        &client.api::<ClusterIssuer>(),
        json!({"apiVersion": "cert-manager.io/v1", "kind": "ClusterIssuer",
               "metadata": {"name": "cluster-ca"}, "spec": {"ca": {"secretName": "cluster-root"}}}),
    )
    .await;
    create(
        &certificates,
        json!({"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
               "metadata": {"name": "api"},
               "spec": {"secretName": "api-tls", "dnsNames": ["api.example"],
                        "privateKey": {"algorithm": "Ed25519"},
                        "issuerRef": {"name": "cluster-ca", "kind": "ClusterIssuer",
                                      "group": "cert-manager.io"}}}),
    )
    .await;
    ready_at(&certificates, "api", 1).await;
    let api_secret = secrets
        .get("api-tls")
        .await
        .expect("the ClusterIssuer's leaf");
    assert_eq!(key(&api_secret, "ca.crt"), key(&root, "tls.crt"));

    // A leaf, also written to a directory, one CertificateRequest kept.
    let web_dir = dir.path().join("web");
    create(
        &certificates,
        json!({"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
               "metadata": {"name": "web"},
               "spec": {"secretName": "web-tls", "commonName": "web",
                        "dnsNames": ["web.example"], "ipAddresses": ["127.0.0.1"],
                        "revisionHistoryLimit": 1,
                        "directory": web_dir.to_str().expect("utf-8"),
                        "issuerRef": {"name": "ca"}}}),
    )
    .await;
    let web = ready_at(&certificates, "web", 1).await;
    let secret = secrets.get("web-tls").await.expect("the leaf's Secret");
    assert_eq!(
        key(&secret, "ca.crt"),
        key(&root, "tls.crt"),
        "ca.crt is the root"
    );
    assert_eq!(
        std::fs::read_to_string(web_dir.join("tls.crt")).expect("tls.crt"),
        key(&secret, "tls.crt")
    );
    let mode = std::fs::metadata(web_dir.join("tls.key"))
        .expect("tls.key")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "tls.key is private");
    openssl_verify(&web_dir, clock.now());
    let (serial1, _) = leaf(&key(&secret, "tls.crt"));
    let renewal: DateTime<Utc> = web["status"]["renewalTime"]
        .as_str()
        .expect("renewalTime")
        .parse()
        .expect("RFC 3339");
    assert_eq!(renewal, start + chrono::Duration::days(60), "⅔ of 90 days");

    // Past the renewal time: renewed, with a new serial; one CertificateRequest kept.
    clock.advance(Duration::from_secs(61 * 24 * 3600));
    ready_at(&certificates, "web", 2).await;
    let secret = secrets.get("web-tls").await.expect("the Secret");
    let (serial2, _) = leaf(&key(&secret, "tls.crt"));
    assert_ne!(serial1, serial2, "renewal issues a new certificate");
    let kept = eventually("one CertificateRequest is kept", || async {
        let list = requests
            .list(&ListParams::default().labels("cert-manager.io/certificate-name=web"))
            .await
            .expect("list");
        let names: Vec<String> = list
            .items
            .iter()
            .filter_map(|r| r.metadata.name.clone())
            .collect();
        if names.len() == 1 {
            Ok(names)
        } else {
            Err(format!("{names:?}"))
        }
    })
    .await;
    assert_eq!(kept, ["web-2"]);
    let request = requests.get("web-2").await.expect("web-2");
    assert!(String::from_utf8_lossy(&request.spec.request.0).contains("CERTIFICATE REQUEST"));
    assert_eq!(
        request
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("cert-manager.io/certificate-revision"))
            .map(String::as_str),
        Some("2")
    );
    openssl_verify(&web_dir, clock.now());

    // A deleted file is re-issued.
    std::fs::remove_file(web_dir.join("tls.crt")).expect("remove tls.crt");
    ready_at(&certificates, "web", 3).await;
    assert!(web_dir.join("tls.crt").exists(), "tls.crt is back");

    // An edited spec is re-issued.
    certificates
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"dnsNames": ["web.example", "www.example"]}})),
        )
        .await
        .expect("patch dnsNames");
    ready_at(&certificates, "web", 4).await;
    let secret = secrets.get("web-tls").await.expect("the Secret");
    let (_, names) = leaf(&key(&secret, "tls.crt"));
    assert_eq!(
        names,
        BTreeSet::from(["web.example".to_owned(), "www.example".to_owned()])
    );

    // A deleted Secret is re-issued (the loop watches Secrets).
    secrets
        .delete("web-tls", &DeleteParams::default())
        .await
        .expect("delete the Secret");
    ready_at(&certificates, "web", 5).await;
    assert!(secrets.get_opt("web-tls").await.expect("get").is_some());

    // RSA, as cert-manager's default: issued, its key written PKCS#1.
    create(
        &certificates,
        json!({"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
               "metadata": {"name": "rsa"},
               "spec": {"secretName": "rsa-tls", "commonName": "rsa",
                        "privateKey": {"algorithm": "RSA", "size": 2048},
                        "issuerRef": {"name": "selfsigned"}}}),
    )
    .await;
    ready_at(&certificates, "rsa", 1).await;
    let rsa = secrets.get("rsa-tls").await.expect("the RSA Secret");
    assert!(
        key(&rsa, "tls.key").starts_with("-----BEGIN RSA PRIVATE KEY-----"),
        "{}",
        key(&rsa, "tls.key")
    );
    // A size Setpoint does not generate: said in Synced, not faked.
    create(
        &certificates,
        json!({"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
               "metadata": {"name": "rsa-small"},
               "spec": {"secretName": "rsa-small-tls", "commonName": "rsa",
                        "privateKey": {"algorithm": "RSA", "size": 1024},
                        "issuerRef": {"name": "selfsigned"}}}),
    )
    .await;
    eventually(
        "the 1024-bit RSA Certificate is Synced=False saying why",
        || async {
            let cert = certificate(&certificates, "rsa-small").await;
            cert.pointer("/status/conditions")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .any(|c| {
                    c["type"] == "Synced"
                        && c["status"] == "False"
                        && c["message"].as_str().is_some_and(|m| m.contains("1024"))
                })
                .then_some(())
        },
    )
    .await;
    assert!(secrets
        .get_opt("rsa-small-tls")
        .await
        .expect("get")
        .is_none());

    // Deleted (deletionPolicy Delete, the default): the Secret and the files go with it.
    certificates
        .delete("web", &DeleteParams::default())
        .await
        .expect("delete");
    eventually(
        "the Certificate, its Secret and its files are gone",
        || async {
            let gone = certificates.get_opt("web").await.expect("get").is_none()
                && secrets.get_opt("web-tls").await.expect("get").is_none()
                && !web_dir.join("tls.key").exists();
            gone.then_some(())
        },
    )
    .await;
    running.stop().await;
}

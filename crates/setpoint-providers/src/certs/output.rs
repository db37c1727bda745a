//! Where an issued certificate goes: the CertificateRequest that records it (one per
//! issuance, named `<certificate>-<revision>`, controlled by the Certificate, the oldest
//! pruned beyond `revisionHistoryLimit`), the Secret (`tls.crt`, `tls.key`, `ca.crt`, type
//! `kubernetes.io/tls`, cert-manager's annotations, `secretTemplate`'s labels and
//! annotations; other keys a user added are kept) and, with `spec.directory`, the three files
//! (written to a temporary name and renamed; `tls.key` mode 0600). Every write is idempotent.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::ByteString;
use kube::api::{DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Resource as _, ResourceExt as _};
use serde_json::json;
use setpoint_runtime::Client;

use super::certificate::Certificate;
use super::inspect::KeyMaterial;
use super::pki::Issued;
use super::request::{CertificateRequest, CertificateRequestSpec};
use super::timing::rfc3339;

/// Annotation with the revision an object (CertificateRequest, Secret) belongs to.
pub(crate) const REVISION: &str = "cert-manager.io/certificate-revision";
/// Annotation and label naming the Certificate an object belongs to.
pub(crate) const CERTIFICATE_NAME: &str = "cert-manager.io/certificate-name";
/// The Secret type of a key pair.
pub(crate) const TLS_SECRET_TYPE: &str = "kubernetes.io/tls";

/// A write that failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum OutputError {
    /// An API write.
    #[error("{what}")]
    Api {
        /// What was written.
        what: String,
        /// Why it failed.
        #[source]
        source: kube::Error,
    },
    /// A file write.
    #[error("{what} {path}")]
    File {
        /// What was done.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// Why it failed.
        #[source]
        source: std::io::Error,
    },
    /// `spec.directory` is not absolute.
    #[error("spec.directory {0:?} is not an absolute path")]
    RelativeDirectory(String),
}

fn api(what: String) -> impl FnOnce(kube::Error) -> OutputError {
    move |source| OutputError::Api { what, source }
}

/// Records issuance `revision` of `cert` as a CertificateRequest with its result.
pub(crate) async fn record_request(
    client: &Client,
    cert: &Certificate,
    revision: i32,
    issued: &Issued,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<(), OutputError> {
    let namespace = cert.namespace().unwrap_or_default();
    let name = format!("{}-{revision}", cert.name_any());
    let api_ = client.namespaced_api::<CertificateRequest>(&namespace);
    let request = CertificateRequest {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(namespace.clone()),
            labels: Some(BTreeMap::from([(
                CERTIFICATE_NAME.to_owned(),
                cert.name_any(),
            )])),
            annotations: Some(BTreeMap::from([
                (CERTIFICATE_NAME.to_owned(), cert.name_any()),
                (REVISION.to_owned(), revision.to_string()),
                (
                    "cert-manager.io/private-key-secret-name".to_owned(),
                    cert.spec.secret_name.clone(),
                ),
            ])),
            owner_references: cert.controller_owner_ref(&()).map(|r| vec![r]),
            ..ObjectMeta::default()
        },
        spec: CertificateRequestSpec {
            request: ByteString(issued.csr_pem.clone().into_bytes()),
            issuer_ref: cert.spec.issuer_ref.clone(),
            duration: cert.spec.duration.clone(),
            is_ca: cert.spec.is_ca,
            usages: cert.spec.usages.clone(),
        },
        status: None,
    };
    match api_.create(&PostParams::default(), &request).await {
        Ok(_) => {}
        // A retry of the same issuance: the request is there; its status is rewritten below.
        Err(kube::Error::Api(status)) if status.code == 409 => {}
        Err(e) => {
            return Err(api(format!(
                "creating CertificateRequest {namespace}/{name}"
            ))(e))
        }
    }
    let at = rfc3339(now);
    let condition = |type_: &str, reason: &str, message: &str| {
        json!({"type": type_, "status": "True", "reason": reason, "message": message,
               "lastTransitionTime": at})
    };
    let status = json!({"status": {
        "conditions": [
            condition("Approved", "cert-manager.io", "Certificate request has been approved by cert-manager.io"),
            condition("Ready", "Issued", "Certificate fetched from issuer successfully"),
        ],
        "certificate": ByteString(issued.chain_pem.clone().into_bytes()),
        "ca": ByteString(issued.ca_pem.clone().into_bytes()),
    }});
    api_.patch_status(&name, &PatchParams::default(), &Patch::Merge(status))
        .await
        .map_err(api(format!(
            "writing the status of CertificateRequest {namespace}/{name}"
        )))?;
    Ok(())
}

/// Deletes `cert`'s oldest CertificateRequests beyond its `revisionHistoryLimit` (none when
/// unset).
pub(crate) async fn prune_requests(client: &Client, cert: &Certificate) -> Result<(), OutputError> {
    let Some(limit) = cert.spec.revision_history_limit else {
        return Ok(());
    };
    let limit = usize::try_from(limit.max(1)).unwrap_or(1);
    let namespace = cert.namespace().unwrap_or_default();
    let api_ = client.namespaced_api::<CertificateRequest>(&namespace);
    let selector = format!("{CERTIFICATE_NAME}={}", cert.name_any());
    let list = api_
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(api(format!(
            "listing the CertificateRequests of {namespace}/{}",
            cert.name_any()
        )))?;
    let uid = cert.uid();
    let mut owned: Vec<(i64, String)> = list
        .items
        .iter()
        .filter(|r| {
            r.owner_references()
                .iter()
                .any(|o| Some(&o.uid) == uid.as_ref())
        })
        .map(|r| {
            let revision = r
                .annotations()
                .get(REVISION)
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            (revision, r.name_any())
        })
        .collect();
    owned.sort();
    let excess = owned.len().saturating_sub(limit);
    for (_, name) in owned.into_iter().take(excess) {
        match api_.delete(&name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(e) => {
                return Err(api(format!(
                    "deleting CertificateRequest {namespace}/{name}"
                ))(e))
            }
        }
    }
    Ok(())
}

/// The Secret `cert` should have, around `material`, at `revision`.
fn desired_secret(cert: &Certificate, material: &KeyMaterial, revision: i32) -> Secret {
    let spec = &cert.spec;
    let mut annotations = BTreeMap::new();
    let mut labels = BTreeMap::from([(
        "controller.cert-manager.io/fao".to_owned(),
        "true".to_owned(),
    )]);
    if let Some(template) = &spec.secret_template {
        annotations.extend(template.annotations.clone());
        labels.extend(template.labels.clone());
    }
    let join = |list: &Option<Vec<String>>| list.as_deref().unwrap_or_default().join(",");
    annotations.extend([
        (
            "cert-manager.io/alt-names".to_owned(),
            join(&spec.dns_names),
        ),
        (
            "cert-manager.io/ip-sans".to_owned(),
            join(&spec.ip_addresses),
        ),
        ("cert-manager.io/uri-sans".to_owned(), join(&spec.uris)),
        (
            "cert-manager.io/email-sans".to_owned(),
            join(&spec.email_addresses),
        ),
        (
            "cert-manager.io/common-name".to_owned(),
            spec.common_name.clone().unwrap_or_default(),
        ),
        (
            "cert-manager.io/issuer-name".to_owned(),
            spec.issuer_ref.name.clone(),
        ),
        (
            "cert-manager.io/issuer-kind".to_owned(),
            spec.issuer_ref.kind().to_owned(),
        ),
        (
            "cert-manager.io/issuer-group".to_owned(),
            spec.issuer_ref.group().to_owned(),
        ),
        (CERTIFICATE_NAME.to_owned(), cert.name_any()),
        (REVISION.to_owned(), revision.to_string()),
    ]);
    if let Some(orgs) = spec.subject.as_ref().map(|s| s.organizations.join(",")) {
        annotations.insert("cert-manager.io/subject-organizations".to_owned(), orgs);
    }
    let data = BTreeMap::from([
        (
            "tls.crt".to_owned(),
            ByteString(material.tls_crt.clone().into_bytes()),
        ),
        (
            "tls.key".to_owned(),
            ByteString(material.tls_key.clone().into_bytes()),
        ),
        (
            "ca.crt".to_owned(),
            ByteString(material.ca_crt.clone().into_bytes()),
        ),
    ]);
    Secret {
        metadata: ObjectMeta {
            name: Some(spec.secret_name.clone()),
            namespace: cert.namespace(),
            annotations: Some(annotations),
            labels: Some(labels),
            ..ObjectMeta::default()
        },
        type_: Some(TLS_SECRET_TYPE.to_owned()),
        data: Some(data),
        ..Secret::default()
    }
}

/// Whether `secret` carries the metadata `cert` asks for (issuer annotations,
/// `secretTemplate`).
pub(crate) fn secret_metadata_matches(cert: &Certificate, secret: &Secret) -> bool {
    let want = desired_secret(cert, &KeyMaterial::default(), 0);
    let has = |want: &Option<BTreeMap<String, String>>, have: &BTreeMap<String, String>| {
        want.iter()
            .flatten()
            .filter(|(k, _)| k.as_str() != REVISION)
            .all(|(k, v)| have.get(k) == Some(v))
    };
    secret.type_.as_deref() == Some(TLS_SECRET_TYPE)
        && has(&want.metadata.annotations, secret.annotations())
        && has(&want.metadata.labels, secret.labels())
}

/// Writes `material` at `revision` into `cert`'s Secret (created, or updated keeping its other
/// keys, labels and annotations; recreated if it is of another type).
pub(crate) async fn write_secret(
    client: &Client,
    cert: &Certificate,
    material: &KeyMaterial,
    revision: i32,
) -> Result<(), OutputError> {
    let namespace = cert.namespace().unwrap_or_default();
    let name = cert.spec.secret_name.clone();
    let secrets = client.namespaced_api::<Secret>(&namespace);
    let what = |verb: &str| format!("{verb} Secret {namespace}/{name}");
    let desired = desired_secret(cert, material, revision);
    let existing = secrets.get_opt(&name).await.map_err(api(what("reading")))?;
    match existing {
        Some(old) if old.type_.as_deref() == Some(TLS_SECRET_TYPE) => {
            let mut new = old;
            new.metadata
                .annotations
                .get_or_insert_with(BTreeMap::new)
                .extend(desired.metadata.annotations.unwrap_or_default());
            new.metadata
                .labels
                .get_or_insert_with(BTreeMap::new)
                .extend(desired.metadata.labels.unwrap_or_default());
            new.data
                .get_or_insert_with(BTreeMap::new)
                .extend(desired.data.unwrap_or_default());
            secrets
                .replace(&name, &PostParams::default(), &new)
                .await
                .map_err(api(what("updating")))?;
        }
        Some(_) => {
            // A Secret's type cannot change: replace it.
            secrets
                .delete(&name, &DeleteParams::default())
                .await
                .map_err(api(what("deleting (wrong type)")))?;
            secrets
                .create(&PostParams::default(), &desired)
                .await
                .map_err(api(what("creating")))?;
        }
        None => {
            secrets
                .create(&PostParams::default(), &desired)
                .await
                .map_err(api(what("creating")))?;
        }
    }
    Ok(())
}

/// Deletes `cert`'s Secret (gone already is fine).
pub(crate) async fn delete_secret(client: &Client, cert: &Certificate) -> Result<(), OutputError> {
    let namespace = cert.namespace().unwrap_or_default();
    let name = &cert.spec.secret_name;
    match client
        .namespaced_api::<Secret>(&namespace)
        .delete(name, &DeleteParams::default())
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(e) => Err(api(format!("deleting Secret {namespace}/{name}"))(e)),
    }
}

/// The three files, in the order read and written: (name, mode).
const FILES: [(&str, u32); 3] = [("tls.crt", 0o644), ("tls.key", 0o600), ("ca.crt", 0o644)];

/// `spec.directory` as a path, which must be absolute.
pub(crate) fn directory(cert: &Certificate) -> Result<Option<PathBuf>, OutputError> {
    match cert.spec.directory.as_deref().filter(|d| !d.is_empty()) {
        None => Ok(None),
        Some(d) if Path::new(d).is_absolute() => Ok(Some(PathBuf::from(d))),
        Some(d) => Err(OutputError::RelativeDirectory(d.to_owned())),
    }
}

/// What is wrong with the files in `dir` against `material`, if anything (missing, different,
/// `tls.key` readable by others).
pub(crate) async fn files_problem(dir: PathBuf, material: KeyMaterial) -> Option<String> {
    tokio::task::spawn_blocking(move || {
        use std::os::unix::fs::PermissionsExt as _;
        let want = [&material.tls_crt, &material.tls_key, &material.ca_crt];
        for ((name, mode), want) in FILES.iter().zip(want) {
            let path = dir.join(name);
            match std::fs::read(&path) {
                Err(_) => return Some(format!("{} is missing", path.display())),
                Ok(have) if have != want.as_bytes() => {
                    return Some(format!("{} differs from the Secret", path.display()));
                }
                Ok(_) => {}
            }
            let actual = std::fs::metadata(&path)
                .map(|m| m.permissions().mode() & 0o777)
                .unwrap_or(0);
            if *mode == 0o600 && actual != 0o600 {
                return Some(format!("{} has mode {actual:o}, not 600", path.display()));
            }
        }
        None
    })
    .await
    .unwrap_or_else(|_| Some("checking the files failed".to_owned()))
}

/// Writes `material` into `dir` (made if missing).
pub(crate) async fn write_files(dir: PathBuf, material: KeyMaterial) -> Result<(), OutputError> {
    let outcome = tokio::task::spawn_blocking(move || {
        use std::io::Write as _;
        use std::os::unix::fs::OpenOptionsExt as _;
        std::fs::create_dir_all(&dir).map_err(|source| OutputError::File {
            what: "making the directory",
            path: dir.clone(),
            source,
        })?;
        let contents = [&material.tls_crt, &material.tls_key, &material.ca_crt];
        for ((name, mode), contents) in FILES.iter().zip(contents) {
            let path = dir.join(name);
            let temporary = dir.join(format!(".{name}.tmp"));
            let _ = std::fs::remove_file(&temporary);
            let write = || -> std::io::Result<()> {
                let mut file = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(*mode)
                    .open(&temporary)?;
                file.write_all(contents.as_bytes())?;
                file.sync_all()?;
                std::fs::rename(&temporary, &path)
            };
            write().map_err(|source| OutputError::File {
                what: "writing",
                path: path.clone(),
                source,
            })?;
        }
        Ok(())
    })
    .await;
    outcome.unwrap_or_else(|e| {
        Err(OutputError::File {
            what: "writing into",
            path: PathBuf::new(),
            source: std::io::Error::other(e.to_string()),
        })
    })
}

/// Removes the three files from `dir` (absent is fine; the directory itself stays).
pub(crate) async fn delete_files(dir: PathBuf) -> Result<(), OutputError> {
    tokio::task::spawn_blocking(move || {
        for (name, _) in FILES {
            let path = dir.join(name);
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(source) => {
                    return Err(OutputError::File {
                        what: "removing",
                        path,
                        source,
                    })
                }
            }
        }
        Ok(())
    })
    .await
    .unwrap_or(Ok(()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::certs::certificate::{CertificateSpec, IssuerReference, SecretTemplate};

    fn cert() -> Certificate {
        let mut cert = Certificate::new(
            "web",
            CertificateSpec {
                secret_name: "web-tls".to_owned(),
                issuer_ref: IssuerReference {
                    name: "ca".to_owned(),
                    ..IssuerReference::default()
                },
                dns_names: Some(vec!["a.example".to_owned(), "b.example".to_owned()]),
                secret_template: Some(SecretTemplate {
                    labels: BTreeMap::from([("team".to_owned(), "web".to_owned())]),
                    annotations: BTreeMap::from([("note".to_owned(), "x".to_owned())]),
                }),
                ..CertificateSpec::default()
            },
        );
        cert.metadata.namespace = Some("default".to_owned());
        cert
    }

    #[test]
    fn the_secret_carries_cert_managers_annotations_and_the_template() {
        let cert = cert();
        let secret = desired_secret(&cert, &KeyMaterial::default(), 3);
        let annotations = secret.metadata.annotations.clone().unwrap_or_default();
        assert_eq!(
            annotations["cert-manager.io/alt-names"],
            "a.example,b.example"
        );
        assert_eq!(annotations["cert-manager.io/issuer-name"], "ca");
        assert_eq!(annotations["cert-manager.io/issuer-kind"], "Issuer");
        assert_eq!(
            annotations["cert-manager.io/issuer-group"],
            "cert-manager.io"
        );
        assert_eq!(annotations[REVISION], "3");
        assert_eq!(annotations["note"], "x");
        assert_eq!(
            secret.metadata.labels.clone().unwrap_or_default()["team"],
            "web"
        );
        assert_eq!(secret.type_.as_deref(), Some(TLS_SECRET_TYPE));
        assert!(secret_metadata_matches(&cert, &secret));
    }

    #[test]
    fn a_secret_missing_the_template_or_of_another_type_does_not_match() {
        let cert = cert();
        let mut secret = desired_secret(&cert, &KeyMaterial::default(), 1);
        secret.metadata.labels = None;
        assert!(
            !secret_metadata_matches(&cert, &secret),
            "template label removed"
        );
        let mut secret = desired_secret(&cert, &KeyMaterial::default(), 1);
        secret.type_ = Some("Opaque".to_owned());
        assert!(!secret_metadata_matches(&cert, &secret), "another type");
        let mut other = cert.clone();
        other.spec.issuer_ref.name = "another".to_owned();
        let secret = desired_secret(&cert, &KeyMaterial::default(), 1);
        assert!(!secret_metadata_matches(&other, &secret), "another issuer");
    }

    #[test]
    fn only_an_absolute_directory_is_accepted() {
        let mut cert = cert();
        assert!(directory(&cert).expect("none").is_none());
        cert.spec.directory = Some("/var/lib/tls".to_owned());
        assert_eq!(
            directory(&cert).expect("absolute"),
            Some(PathBuf::from("/var/lib/tls"))
        );
        cert.spec.directory = Some("tls".to_owned());
        assert!(directory(&cert).is_err());
    }

    #[tokio::test]
    async fn files_are_written_private_and_checked() {
        use std::os::unix::fs::PermissionsExt as _;
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("certs");
        let material = KeyMaterial {
            tls_crt: "crt".to_owned(),
            tls_key: "key".to_owned(),
            ca_crt: "ca".to_owned(),
        };
        write_files(dir.clone(), material.clone())
            .await
            .expect("written");
        assert_eq!(files_problem(dir.clone(), material.clone()).await, None);
        let mode = std::fs::metadata(dir.join("tls.key"))
            .expect("key")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        std::fs::write(dir.join("ca.crt"), "edited").expect("edit");
        assert!(
            files_problem(dir.clone(), material.clone()).await.is_some(),
            "edited"
        );
        write_files(dir.clone(), material.clone())
            .await
            .expect("rewritten");
        std::fs::set_permissions(dir.join("tls.key"), std::fs::Permissions::from_mode(0o644))
            .expect("chmod");
        assert!(
            files_problem(dir.clone(), material.clone()).await.is_some(),
            "readable key"
        );
        delete_files(dir.clone()).await.expect("deleted");
        assert!(files_problem(dir, material).await.is_some(), "missing");
    }
}

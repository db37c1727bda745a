//! A Certificate's external object for the managed-resource loop: its Secret and, with
//! `spec.directory`, the files there. [`CertificateConnector`] resolves the issuer;
//! [`CertificateExternal`] observes (the Secret present, its key pair matching the spec and
//! signed by the issuer, its metadata as asked, the files equal to it, the renewal time not
//! reached — the next observation is set to it), and creates and updates by issuing anew
//! (revision + 1, recorded in a CertificateRequest). Deleting removes the Secret and the files.

use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt as _;
use serde_json::json;
use setpoint_runtime::managed::{
    ConnectionDetails, Connector, Creation, ExternalClient, ExternalError, Observation, Readiness,
};
use setpoint_runtime::{Client, Clock};

use super::certificate::Certificate;
use super::inspect::{inspect, KeyMaterial, Verdict};
use super::output::{self, REVISION};
use super::pki::{self, Signer};
use super::signer::{resolve, secret_text, SignerError};
use super::timing::rfc3339;

/// Makes a [`CertificateExternal`] per reconcile.
#[derive(Clone)]
pub(crate) struct CertificateConnector {
    /// Reads issuers and Secrets, writes Secrets and CertificateRequests.
    pub(crate) client: Client,
    /// The time certificates are issued and renewed by.
    pub(crate) clock: Clock,
}

/// One Certificate's Secret and files, with the signer its issuer resolved to (an error when
/// the issuer cannot sign: observing and issuing fail with it, deleting does not need it).
pub(crate) struct CertificateExternal {
    client: Client,
    clock: Clock,
    signer: Result<Signer, String>,
}

impl Connector<Certificate> for CertificateConnector {
    type External = CertificateExternal;

    async fn connect(&self, cert: &Certificate) -> Result<CertificateExternal, ExternalError> {
        let namespace = cert.namespace().unwrap_or_default();
        let signer = if cert.metadata.deletion_timestamp.is_some() {
            Err("the Certificate is being deleted".to_owned())
        } else {
            resolve(&self.client, &namespace, &cert.spec.issuer_ref)
                .await
                .map_err(|e: SignerError| e.to_string())
        };
        Ok(CertificateExternal {
            client: self.client.clone(),
            clock: self.clock.clone(),
            signer,
        })
    }
}

impl CertificateExternal {
    fn signer(&self) -> Result<&Signer, ExternalError> {
        self.signer
            .as_ref()
            .map_err(|e| format!("the issuer cannot sign: {e}").into())
    }

    async fn secret(&self, cert: &Certificate) -> Result<Option<Secret>, ExternalError> {
        let namespace = cert.namespace().unwrap_or_default();
        Ok(self
            .client
            .namespaced_api::<Secret>(&namespace)
            .get_opt(&cert.spec.secret_name)
            .await?)
    }

    /// Issues `cert` anew and writes it everywhere.
    async fn issue(&self, cert: &Certificate) -> Result<(), ExternalError> {
        let signer = self.signer()?;
        let existing = self.secret(cert).await?;
        let material = existing.as_ref().map(material_of).unwrap_or_default();
        let revision = cert
            .revision()
            .max(existing.as_ref().map_or(0, revision_of))
            + 1;
        let now = self.clock.now();
        // Off the runtime: an RSA key takes a while to generate.
        let (spec, existing_key) = (cert.spec.clone(), material.tls_key.clone());
        let key = tokio::task::spawn_blocking(move || pki::private_key(&spec, Some(&existing_key)))
            .await??;
        let issued = pki::issue(&cert.spec, &key, signer, now)?;
        let directory = output::directory(cert)?;
        output::record_request(&self.client, cert, revision, &issued, now).await?;
        let material = KeyMaterial {
            tls_crt: issued.chain_pem,
            tls_key: issued.key_pem,
            ca_crt: issued.ca_pem,
        };
        output::write_secret(&self.client, cert, &material, revision).await?;
        if let Some(dir) = directory {
            output::write_files(dir, material).await?;
        }
        output::prune_requests(&self.client, cert).await?;
        Ok(())
    }
}

impl ExternalClient<Certificate> for CertificateExternal {
    async fn observe(&self, cert: &Certificate) -> Result<Observation, ExternalError> {
        let Some(secret) = self.secret(cert).await? else {
            return Ok(Observation::missing());
        };
        if cert.metadata.deletion_timestamp.is_some() {
            // Only existence matters now.
            return Ok(Observation::available());
        }
        let signer = self.signer()?;
        let material = material_of(&secret);
        let now = self.clock.now();
        let mut observation = Observation::available();
        let mut status = json!({"revision": revision_of(&secret)});
        let problem = match inspect(&cert.spec, &material, signer, now) {
            Verdict::Mismatch(problem, validity) => {
                if let Some(v) = validity {
                    status["notBefore"] = json!(rfc3339(v.not_before));
                    status["notAfter"] = json!(rfc3339(v.not_after));
                }
                observation.readiness = Readiness::Unavailable(problem.clone());
                Some(problem)
            }
            Verdict::Valid {
                validity,
                due,
                expired,
                ..
            } => {
                status["notBefore"] = json!(rfc3339(validity.not_before));
                status["notAfter"] = json!(rfc3339(validity.not_after));
                status["renewalTime"] = json!(rfc3339(validity.renewal));
                let until = (validity.renewal - now).to_std().unwrap_or_default();
                observation.next_observation = Some(until.max(Duration::from_secs(1)));
                if expired {
                    observation.readiness =
                        Readiness::Unavailable("the certificate has expired".to_owned());
                }
                if due {
                    Some("the renewal time has passed".to_owned())
                } else if !output::secret_metadata_matches(cert, &secret) {
                    Some("the Secret's type, labels or annotations differ".to_owned())
                } else if let Some(dir) = output::directory(cert)? {
                    output::files_problem(dir, material).await
                } else {
                    None
                }
            }
        };
        observation.status = Some(status);
        if let Some(problem) = problem {
            observation.up_to_date = false;
            observation.diff = Some(problem);
        }
        Ok(observation)
    }

    async fn create(&self, cert: &Certificate) -> Result<Creation, ExternalError> {
        self.issue(cert).await?;
        Ok(Creation::default())
    }

    async fn update(&self, cert: &Certificate) -> Result<ConnectionDetails, ExternalError> {
        self.issue(cert).await?;
        Ok(ConnectionDetails::new())
    }

    async fn delete(&self, cert: &Certificate) -> Result<(), ExternalError> {
        output::delete_secret(&self.client, cert).await?;
        if let Some(dir) = output::directory(cert)? {
            output::delete_files(dir).await?;
        }
        Ok(())
    }
}

/// The key pair a Secret holds.
fn material_of(secret: &Secret) -> KeyMaterial {
    KeyMaterial {
        tls_crt: secret_text(secret, "tls.crt"),
        tls_key: secret_text(secret, "tls.key"),
        ca_crt: secret_text(secret, "ca.crt"),
    }
}

/// The revision a Secret was written at (0 when unknown).
fn revision_of(secret: &Secret) -> i32 {
    secret
        .annotations()
        .get(REVISION)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

//! The built-in admission of CertificateSigningRequests, as kube-apiserver's CSR strategy and
//! its `CertificateApproval`, `CertificateSigning` and `CertificateSubjectRestriction` plugins
//! have it (they need who asks and through which subresource, which the kind's strategy does
//! not see):
//!
//! - **create**: the requester is recorded in `spec.username`, `uid`, `groups`, `extra`
//!   (whatever the client sent there is replaced); a `kubernetes.io/kube-apiserver-client`
//!   request for the `system:masters` group is refused (403).
//! - **`approval`** (where `kubectl certificate approve|deny` writes): only the `Approved` and
//!   `Denied` conditions may change here (the certificate is kept), an existing one is never
//!   removed (422), and the user needs `approve` on `signers` named by the signer
//!   (`example.com/signer`) or its domain (`example.com/*`) (403).
//! - **`status`** (where a signer writes): `Approved`/`Denied` are kept as they were; a
//!   certificate, once set, never changes (422); setting one needs `sign` on the signer (403)
//!   and must be PEM `CERTIFICATE` blocks that parse (422).
//!
//! New conditions get `lastUpdateTime`/`lastTransitionTime` now when the client left them out.

use std::sync::Arc;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use serde_json::{json, Value};
use setpoint_core::{ApiError, Cause};

use crate::api::Api;
use crate::auth::User;
use crate::authz::{Attributes, Authorizer as _, Chain};
use crate::registry::store::Operation;
use crate::registry::ResourceDef;

const GROUP: &str = "certificates.k8s.io";
const APPROVAL_TYPES: [&str; 2] = ["Approved", "Denied"];

/// The CSR rules for one request.
pub(crate) struct Certificates {
    user: Option<User>,
    authorizer: Arc<Chain>,
    subresource: String,
}

/// The CSR rules of a request on `def`, if it is on CertificateSigningRequests.
pub(crate) fn for_request(
    api: &Api,
    def: &ResourceDef,
    subresource: &str,
    user: Option<&User>,
) -> Option<Certificates> {
    (def.gvk.group == GROUP && def.plural == "certificatesigningrequests").then(|| Certificates {
        user: user.cloned(),
        authorizer: api.authorizer().clone(),
        subresource: subresource.to_owned(),
    })
}

fn conditions(o: &Value) -> Vec<Value> {
    o["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn certificate(o: &Value) -> &str {
    o["status"]["certificate"].as_str().unwrap_or_default()
}

impl Certificates {
    /// Records the requester on a create; keeps what a subresource may not change on an update.
    /// Returns whether `object` changed.
    pub(crate) fn mutate(
        &self,
        operation: Operation,
        object: Option<&mut Value>,
        old: Option<&Value>,
    ) -> bool {
        let Some(object) = object else {
            return false;
        };
        let before = object.clone();
        match (operation, old) {
            (Operation::Create, _) => {
                if let (Some(user), Some(spec)) = (&self.user, object["spec"].as_object_mut()) {
                    spec.insert("username".into(), json!(user.name));
                    spec.remove("uid");
                    if !user.uid.is_empty() {
                        spec.insert("uid".into(), json!(user.uid));
                    }
                    spec.insert("groups".into(), json!(user.groups));
                    spec.remove("extra");
                    if !user.extra.is_empty() {
                        spec.insert("extra".into(), json!(user.extra));
                    }
                }
            }
            (Operation::Update, Some(old)) if self.subresource == "approval" => {
                match old["status"].get("certificate") {
                    Some(c) => object["status"]["certificate"] = c.clone(),
                    None => {
                        if let Some(status) = object["status"].as_object_mut() {
                            status.remove("certificate");
                        }
                    }
                }
                stamp(object, old);
            }
            (Operation::Update, Some(old)) if self.subresource == "status" => {
                let kept = conditions(old)
                    .into_iter()
                    .filter(|c| APPROVAL_TYPES.iter().any(|t| c["type"] == *t));
                let mut list: Vec<Value> = conditions(object)
                    .into_iter()
                    .filter(|c| !APPROVAL_TYPES.iter().any(|t| c["type"] == *t))
                    .collect();
                list.extend(kept);
                if object["status"].is_object() || !list.is_empty() {
                    object["status"]["conditions"] = json!(list);
                }
                stamp(object, old);
            }
            _ => {}
        }
        *object != before
    }

    /// The rules a write must meet (see the module documentation).
    pub(crate) fn validate(
        &self,
        def: &ResourceDef,
        operation: Operation,
        object: Option<&Value>,
        old: Option<&Value>,
    ) -> Result<(), ApiError> {
        let Some(object) = object else {
            return Ok(());
        };
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        let signer = object["spec"]["signerName"].as_str().unwrap_or_default();
        let forbidden = |why: String| ApiError::forbidden_object(&def.group_resource(), name, &why);
        match (operation, old) {
            (Operation::Create, _) => {
                if signer == "kubernetes.io/kube-apiserver-client"
                    && requested_organizations(object)
                        .iter()
                        .any(|o| o == "system:masters")
                {
                    return Err(forbidden(
                        "use of kubernetes.io/kube-apiserver-client signer with system:masters group is not allowed".to_owned(),
                    ));
                }
                Ok(())
            }
            (Operation::Update, Some(old)) if self.subresource == "approval" => {
                let mut causes = Vec::new();
                for kind in APPROVAL_TYPES {
                    let had = conditions(old).iter().any(|c| c["type"] == kind);
                    let has = conditions(object).iter().any(|c| c["type"] == kind);
                    if had && !has {
                        causes.push(Cause::forbidden(
                            "status.conditions",
                            &format!("updates may not remove a condition of type {kind:?}"),
                        ));
                    }
                }
                if !causes.is_empty() {
                    return Err(def.invalid(name, causes));
                }
                if !self.allowed("approve", signer) {
                    return Err(forbidden(format!(
                        "user not permitted to approve requests with signerName {signer:?}"
                    )));
                }
                Ok(())
            }
            (Operation::Update, Some(old)) if self.subresource == "status" => {
                let (before, after) = (certificate(old), certificate(object));
                if before == after {
                    return Ok(());
                }
                if !before.is_empty() {
                    return Err(def.invalid(
                        name,
                        vec![Cause::forbidden(
                            "status.certificate",
                            "updates may not modify existing certificate content",
                        )],
                    ));
                }
                if !self.allowed("sign", signer) {
                    return Err(forbidden(format!(
                        "user not permitted to sign requests with signerName {signer:?}"
                    )));
                }
                if !certificates_parse(after) {
                    return Err(def.invalid(
                        name,
                        vec![Cause::invalid(
                            "status.certificate",
                            &json!("<certificate data>"),
                            "must contain one or more PEM CERTIFICATE blocks that parse",
                        )],
                    ));
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Whether the user may `verb` the signer `signer`, by its name or its domain's `*`.
    fn allowed(&self, verb: &str, signer: &str) -> bool {
        let Some(user) = &self.user else {
            return true;
        };
        let ask = |name: &str| {
            let attributes = Attributes::resource(user, verb, GROUP, "signers", "", name);
            self.authorizer.authorize(&attributes).allowed()
        };
        ask(signer)
            || signer
                .split_once('/')
                .is_some_and(|(domain, _)| ask(&format!("{domain}/*")))
    }
}

/// Stamps conditions new since `old` (or changed) with the current time where unset.
fn stamp(object: &mut Value, old: &Value) {
    let now = json!(chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string());
    let previous = conditions(old);
    let Some(list) = object["status"]["conditions"].as_array_mut() else {
        return;
    };
    for condition in list.iter_mut().filter_map(Value::as_object_mut) {
        if previous.iter().any(|p| p.as_object() == Some(condition)) {
            continue;
        }
        for field in ["lastUpdateTime", "lastTransitionTime"] {
            if condition.get(field).is_none_or(Value::is_null) {
                condition.insert(field.into(), now.clone());
            }
        }
    }
}

/// The organizations (`O`) of the request in `spec.request` (none if it does not parse).
fn requested_organizations(object: &Value) -> Vec<String> {
    use x509_parser::prelude::FromDer as _;
    let Some(pem) = object["spec"]["request"]
        .as_str()
        .and_then(|r| STANDARD.decode(r).ok())
    else {
        return Vec::new();
    };
    let Some(block) = x509_parser::pem::Pem::iter_from_buffer(&pem)
        .filter_map(Result::ok)
        .find(|b| b.label == "CERTIFICATE REQUEST")
    else {
        return Vec::new();
    };
    let Ok((_, csr)) =
        x509_parser::certification_request::X509CertificationRequest::from_der(&block.contents)
    else {
        return Vec::new();
    };
    csr.certification_request_info
        .subject
        .iter_organization()
        .filter_map(|a| a.as_str().ok().map(str::to_owned))
        .collect()
}

/// Whether `encoded` (base64 of PEM) holds at least one `CERTIFICATE` block and every such
/// block parses as X.509.
fn certificates_parse(encoded: &str) -> bool {
    let Ok(pem) = STANDARD.decode(encoded) else {
        return false;
    };
    let mut any = false;
    for block in x509_parser::pem::Pem::iter_from_buffer(&pem) {
        match block {
            Ok(block) if block.label == "CERTIFICATE" => {
                if block.parse_x509().is_err() {
                    return false;
                }
                any = true;
            }
            Ok(_) => {}
            Err(_) => return false,
        }
    }
    any
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_certificate_must_be_pem_certificate_blocks() {
        assert!(!certificates_parse(&STANDARD.encode("junk")));
        assert!(!certificates_parse("%%%"));
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::default()
            .self_signed(&key)
            .unwrap();
        assert!(certificates_parse(&STANDARD.encode(cert.pem())));
        let two = format!("{}{}", cert.pem(), cert.pem());
        assert!(certificates_parse(&STANDARD.encode(two)));
    }

    #[test]
    fn new_conditions_should_be_stamped_and_old_ones_kept() {
        let old = json!({"status": {"conditions": [{"type": "Approved", "status": "True", "lastUpdateTime": "2020-01-01T00:00:00Z"}]}});
        let mut new = old.clone();
        new["status"]["conditions"]
            .as_array_mut()
            .unwrap()
            .push(json!({"type": "Failed", "status": "True"}));
        stamp(&mut new, &old);
        assert_eq!(
            new["status"]["conditions"][0]["lastUpdateTime"],
            "2020-01-01T00:00:00Z"
        );
        assert!(new["status"]["conditions"][1]["lastTransitionTime"].is_string());
    }
}

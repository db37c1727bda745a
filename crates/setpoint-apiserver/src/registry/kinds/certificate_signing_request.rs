//! certificates.k8s.io/v1 CertificateSigningRequest (cluster-scoped): a request for a signed
//! certificate. The request is a PEM `CERTIFICATE REQUEST`, the signer a qualified name
//! (`example.com/signer`), the usages known ones, a requested duration at least ten minutes;
//! the spec never changes (an update keeps the stored one, as kube-apiserver's does). The
//! `status` subresource and the `approval` subresource (where `kubectl certificate approve`
//! writes its condition) change only the status; conditions default to status `True`, and a
//! request is never both approved and denied. The request must be one PEM `CERTIFICATE
//! REQUEST` that parses and whose signature verifies. Who asks, and what each subresource may
//! change (approval conditions only through `approval`, the certificate only through
//! `status`, with the `approve`/`sign` permissions on the signer), is admission's part:
//! `admission/builtin/certificates.rs`. The signers run in `setpoint-controllers`
//! (`certificates/`).

use std::sync::Arc;

use async_trait::async_trait;
use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use chrono::{DateTime, Utc};
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use serde_json::{json, Value};
use setpoint_core::Cause;

use crate::registry::defaults::default;
use crate::registry::identity::{status, Identity, ALL_VERBS, STATUS_VERBS};
use crate::registry::strategy::{round_trip, schema_of, validate_name, NameRule, Strategy, TypedSchema};
use crate::registry::table::{age_cell, human_duration, name_cell, Column};
use crate::registry::validation::{object_meta, required};
use crate::registry::{ResourceDef, Subresource};

pub(crate) fn resources() -> Vec<ResourceDef> {
    vec![Identity {
        group: "certificates.k8s.io",
        version: "v1",
        kind: "CertificateSigningRequest",
        plural: "certificatesigningrequests",
        singular: "certificatesigningrequest",
        short_names: &["csr"],
        categories: &[],
        namespaced: false,
        verbs: ALL_VERBS,
    }
    .build(Arc::new(SigningRequests), |g| {
        vec![
            Subresource {
                name: "approval",
                kind: g.clone(),
                verbs: STATUS_VERBS,
            },
            status(g),
        ]
    })]
}

const USAGES: &[&str] = &[
    "signing",
    "digital signature",
    "content commitment",
    "key encipherment",
    "key agreement",
    "data encipherment",
    "cert sign",
    "crl sign",
    "encipher only",
    "decipher only",
    "any",
    "server auth",
    "client auth",
    "code signing",
    "email protection",
    "s/mime",
    "ipsec end system",
    "ipsec tunnel",
    "ipsec user",
    "timestamping",
    "ocsp signing",
    "microsoft sgc",
    "netscape sgc",
];

/// The shortest certificate lifetime a request may ask for, in seconds.
const MIN_EXPIRATION: i64 = 600;

#[derive(Debug)]
struct SigningRequests;

fn conditions(o: &Value) -> &[Value] {
    o["status"]["conditions"].as_array().map(Vec::as_slice).unwrap_or_default()
}

#[async_trait]
impl Strategy for SigningRequests {
    fn normalize(&self, object: &Value) -> Result<Value, String> {
        round_trip::<CertificateSigningRequest>(object)
    }

    fn typed_schema(&self) -> Option<TypedSchema> {
        schema_of::<CertificateSigningRequest>()
    }

    fn has_status(&self) -> bool {
        true
    }

    fn apply_defaults(&self, object: &mut Value) {
        let list = object
            .get_mut("status")
            .and_then(|s| s.get_mut("conditions"))
            .and_then(Value::as_array_mut);
        for condition in list.into_iter().flatten().filter_map(Value::as_object_mut) {
            default(condition, "status", json!("True"));
        }
    }

    fn prepare_update(&self, new: &mut Value, old: &Value) {
        if let Some(map) = new.as_object_mut() {
            map.insert("spec".into(), old["spec"].clone());
        }
        self.apply_defaults(new);
    }

    async fn validate(&self, object: &Value, _old: Option<&Value>) -> Vec<Cause> {
        let mut causes = object_meta(object);
        let spec = &object["spec"];
        let request = &spec["request"];
        match request.as_str().map(|r| STANDARD.decode(r)) {
            None => causes.push(Cause::required("spec.request")),
            Some(Ok(pem)) => {
                if let Err(why) = check_request(&pem) {
                    causes.push(Cause::invalid("spec.request", request, why));
                }
            }
            Some(Err(_)) => causes.push(Cause::invalid(
                "spec.request",
                request,
                "PEM block type must be CERTIFICATE REQUEST",
            )),
        }
        match spec["signerName"].as_str() {
            None | Some("") => causes.push(Cause::required("spec.signerName")),
            Some(signer) => {
                let qualified = signer.split_once('/').is_some_and(|(domain, path)| {
                    !path.is_empty() && validate_name(domain, NameRule::Subdomain).is_empty()
                });
                if !qualified {
                    causes.push(Cause::invalid(
                        "spec.signerName",
                        &spec["signerName"],
                        "must be a fully qualified domain and path of the form 'example.com/signer-name'",
                    ));
                }
            }
        }
        required(object, "/spec/usages", &mut causes);
        for (i, usage) in spec["usages"].as_array().into_iter().flatten().enumerate() {
            if !usage.as_str().is_some_and(|u| USAGES.contains(&u)) {
                causes.push(Cause::not_supported(format!("spec.usages[{i}]"), usage, USAGES));
            }
        }
        let expiration = &spec["expirationSeconds"];
        if expiration.as_i64().is_some_and(|s| s < MIN_EXPIRATION) {
            causes.push(Cause::invalid(
                "spec.expirationSeconds",
                expiration,
                "may not specify a duration less than 600 seconds (10 minutes)",
            ));
        }
        let has = |kind: &str| conditions(object).iter().any(|c| c["type"] == kind);
        if has("Approved") && has("Denied") {
            causes.push(Cause::invalid(
                "status.conditions",
                &object["status"]["conditions"],
                "Approved and Denied conditions are mutually exclusive",
            ));
        }
        causes
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            Column::name(),
            Column::new("Age", 0),
            Column::new("SignerName", 0),
            Column::new("Requestor", 0),
            Column::new("RequestedDuration", 0),
            Column::new("Condition", 0),
        ]
    }

    fn cells(&self, o: &Value, now: DateTime<Utc>) -> Vec<Value> {
        let spec = &o["spec"];
        let duration = spec["expirationSeconds"]
            .as_i64()
            .map_or_else(|| "<none>".to_owned(), human_duration);
        vec![
            name_cell(o),
            age_cell(o, now),
            json!(spec["signerName"].as_str().unwrap_or_default()),
            json!(spec["username"].as_str().unwrap_or_default()),
            json!(duration),
            json!(condition(o)),
        ]
    }
}

/// Checks that `pem` holds a `CERTIFICATE REQUEST` block that parses and whose signature
/// verifies; the reason otherwise.
fn check_request(pem: &[u8]) -> Result<(), &'static str> {
    use x509_parser::prelude::FromDer as _;
    let block = x509_parser::pem::Pem::iter_from_buffer(pem)
        .filter_map(Result::ok)
        .find(|b| b.label == "CERTIFICATE REQUEST")
        .ok_or("PEM block type must be CERTIFICATE REQUEST")?;
    let (_, csr) =
        x509_parser::certification_request::X509CertificationRequest::from_der(&block.contents)
            .map_err(|_| "the certificate request does not parse")?;
    csr.verify_signature()
        .map_err(|_| "the certificate request's signature is invalid")
}

/// The `Condition` cell: `Denied`, `Approved` or `Pending`, then `,Failed` and `,Issued`.
fn condition(o: &Value) -> String {
    let has = |kind: &str| conditions(o).iter().any(|c| c["type"] == kind);
    let mut text = if has("Denied") {
        "Denied".to_owned()
    } else if has("Approved") {
        "Approved".to_owned()
    } else {
        "Pending".to_owned()
    };
    if has("Failed") {
        text.push_str(",Failed");
    }
    if o["status"]["certificate"].as_str().is_some_and(|c| !c.is_empty()) {
        text.push_str(",Issued");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn csr() -> Value {
        let key = rcgen::KeyPair::generate().unwrap();
        let request = rcgen::CertificateParams::default().serialize_request(&key).unwrap();
        let pem = STANDARD.encode(request.pem().unwrap());
        json!({"metadata": {"name": "c"}, "spec": {"request": pem, "signerName": "example.com/signer", "usages": ["client auth"]}})
    }

    fn fields(o: &Value) -> Vec<String> {
        futures::executor::block_on(SigningRequests.validate(o, None))
            .into_iter()
            .map(|c| c.field)
            .collect()
    }

    #[test]
    fn requests_signers_and_usages_should_be_checked() {
        assert!(fields(&csr()).is_empty());
        let mut bad = csr();
        bad["spec"]["request"] = json!(STANDARD.encode("not a pem"));
        bad["spec"]["signerName"] = json!("signer");
        bad["spec"]["usages"] = json!(["everything"]);
        bad["spec"]["expirationSeconds"] = json!(60);
        assert_eq!(fields(&bad), ["spec.request", "spec.signerName", "spec.usages[0]", "spec.expirationSeconds"]);
        let mut unsigned = csr();
        unsigned["spec"]["request"] = json!(STANDARD.encode("-----BEGIN CERTIFICATE REQUEST-----\nMIIB\n-----END CERTIFICATE REQUEST-----\n"));
        assert_eq!(fields(&unsigned), ["spec.request"]);
    }

    #[test]
    fn approval_should_keep_the_spec_and_show_in_the_row() {
        let old = csr();
        let mut new = old.clone();
        new["spec"]["signerName"] = json!("example.com/other");
        new["status"] = json!({"conditions": [{"type": "Approved", "reason": "ok"}]});
        SigningRequests.prepare_update(&mut new, &old);
        assert_eq!(new["spec"], old["spec"]);
        assert_eq!(new["status"]["conditions"][0]["status"], "True");
        assert_eq!(condition(&new), "Approved");
        new["status"]["conditions"] = json!([{"type": "Approved"}, {"type": "Denied"}]);
        assert_eq!(fields(&new), ["status.conditions"]);
    }
}

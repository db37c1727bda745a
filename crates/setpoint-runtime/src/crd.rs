//! Installing a CustomResourceDefinition and waiting until its resource is served.
//!
//! A custom resource is defined in Rust with `kube`'s derive (`#[derive(CustomResource,
//! JsonSchema)]`, re-exported as [`kube::CustomResource`] and [`schemars`](crate::schemars)):
//! the derive gives the typed object (usable with [`Client::api`], informers, `Controller`,
//! `owns`, status, finalizers and events like any built-in kind) and its CRD manifest, with an
//! OpenAPI schema generated from the Rust types (`Foo::crd()`). [`install_crd`] creates or
//! updates that CRD and returns once the server reports it `Established`: from then on the
//! resource is in discovery and list/watch/create work, so informers started afterwards sync.
//!
//! Promises: `install_crd` is idempotent (a CRD whose spec already has every field of the one
//! given — the server adds defaults such as `conversion` — is left alone) and bounded (it gives up after its timeout with an error naming the CRD, instead of
//! waiting forever for a CRD whose names conflict with another resource's).

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::PostParams;
use serde_json::Value;
use tokio::time::{sleep, Instant};

use crate::Client;

/// How often [`install_crd`] reads the CRD's status while waiting for `Established`.
const POLL: Duration = Duration::from_millis(50);

/// Errors installing a CustomResourceDefinition.
#[derive(Debug, thiserror::Error)]
pub enum CrdError {
    /// The CRD given has no `metadata.name`.
    #[error("the CustomResourceDefinition has no name")]
    Unnamed,
    /// The API refused to create, read or update the CRD.
    #[error("{action} CustomResourceDefinition {name}")]
    Api {
        /// What was being done.
        action: &'static str,
        /// The CRD.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// The server refused the CRD's names (they clash with another resource of the group).
    #[error("CustomResourceDefinition {name}: names not accepted: {message}")]
    NamesNotAccepted {
        /// The CRD.
        name: String,
        /// The server's explanation (the `NamesAccepted` condition's message).
        message: String,
    },
    /// The CRD was not `Established` within the timeout.
    #[error("CustomResourceDefinition {name} not established after {waited:?}")]
    Timeout {
        /// The CRD.
        name: String,
        /// How long [`install_crd`] waited.
        waited: Duration,
    },
}

/// Creates `crd`, or replaces the spec of the CRD of that name if it exists with another spec
/// (one lacking a field of `crd`'s or holding another value for it; fields the server
/// defaulted are not a difference),
/// then waits (polling every 50 ms, at most `timeout`) until its `Established` condition is
/// `True`. Returns the CRD as last read. Cancel-safe in effect: a cancelled call may have
/// written the CRD, and calling again finishes the job.
///
/// ```no_run
/// use std::time::Duration;
/// use setpoint_runtime::kube::CustomResourceExt;
/// # async fn example<Foo: CustomResourceExt>(client: setpoint_runtime::Client) -> Result<(), setpoint_runtime::CrdError> {
/// setpoint_runtime::install_crd(&client, &Foo::crd(), Duration::from_secs(30)).await?;
/// # Ok(()) }
/// ```
pub async fn install_crd(
    client: &Client,
    crd: &CustomResourceDefinition,
    timeout: Duration,
) -> Result<CustomResourceDefinition, CrdError> {
    let name = crd.metadata.name.clone().ok_or(CrdError::Unnamed)?;
    let api = client.api::<CustomResourceDefinition>();
    let api_error = |action, source| CrdError::Api {
        action,
        name: name.clone(),
        source,
    };
    match api.create(&PostParams::default(), crd).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 409 => {
            let mut current = api.get(&name).await.map_err(|e| api_error("reading", e))?;
            let wanted = serde_json::to_value(&crd.spec).unwrap_or(Value::Null);
            let stored = serde_json::to_value(&current.spec).unwrap_or(Value::Null);
            if !contains(&stored, &wanted) {
                current.spec = crd.spec.clone();
                api.replace(&name, &PostParams::default(), &current)
                    .await
                    .map_err(|e| api_error("updating", e))?;
            }
        }
        Err(e) => return Err(api_error("creating", e)),
    }
    let deadline = Instant::now() + timeout;
    loop {
        let current = api.get(&name).await.map_err(|e| api_error("reading", e))?;
        let conditions = current
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_deref())
            .unwrap_or_default();
        let condition = |kind: &str| conditions.iter().find(|c| c.type_ == kind);
        if condition("Established").is_some_and(|c| c.status == "True") {
            return Ok(current);
        }
        if let Some(refused) = condition("NamesAccepted").filter(|c| c.status == "False") {
            return Err(CrdError::NamesNotAccepted {
                name,
                message: refused.message.clone().unwrap_or_default(),
            });
        }
        if Instant::now() >= deadline {
            return Err(CrdError::Timeout {
                name,
                waited: timeout,
            });
        }
        sleep(POLL).await;
    }
}

/// Whether `outer` has every field of `inner` with the same value: objects may have more
/// keys, arrays must have the same length and contain their counterparts element by element.
fn contains(outer: &Value, inner: &Value) -> bool {
    match (outer, inner) {
        (Value::Object(o), Value::Object(i)) => i
            .iter()
            .all(|(k, v)| o.get(k).is_some_and(|ov| contains(ov, v))),
        (Value::Array(o), Value::Array(i)) => {
            o.len() == i.len() && o.iter().zip(i).all(|(ov, iv)| contains(ov, iv))
        }
        (o, i) => o == i,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::contains;

    #[test]
    fn stored_spec_with_server_defaults_should_contain_the_wanted_spec() {
        let wanted = json!({"group": "g", "versions": [{"name": "v1", "served": true}]});
        let stored = json!({"group": "g", "conversion": {"strategy": "None"},
            "versions": [{"name": "v1", "served": true, "storage": true}]});
        assert!(contains(&stored, &wanted));
    }

    #[test]
    fn changed_or_missing_fields_should_be_differences() {
        let wanted = json!({"group": "g", "versions": [{"name": "v1", "served": true}]});
        assert!(!contains(
            &json!({"group": "g", "versions": [{"name": "v1", "served": false}]}),
            &wanted
        ));
        assert!(!contains(&json!({"group": "g"}), &wanted));
        assert!(!contains(
            &json!({"group": "g", "versions": [{"name": "v1", "served": true}, {"name": "v2"}]}),
            &wanted
        ));
    }
}

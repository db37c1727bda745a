//! core/v1 ComponentStatus (deprecated since v1.19; get and list only, cluster-scoped, short
//! name `cs`): the health of the control plane's parts, computed on every read and never
//! stored: `scheduler`, `controller-manager` and `etcd-0`, each with one `Healthy` condition
//! (`True` with the message `ok`, or `False` with the error). Where the health comes from is
//! `api/components.rs`; how a request is answered is `handlers/component_status.rs`. Its row
//! is `NAME STATUS MESSAGE ERROR`, and every answer carries kube-apiserver's deprecation
//! warning.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::ComponentStatus;
use serde_json::{json, Value};
use setpoint_core::Cause;

use crate::registry::identity::Identity;
use crate::registry::strategy::{round_trip, schema_of, Strategy, TypedSchema};
use crate::registry::table::{name_cell, Column};
use crate::registry::ResourceDef;

/// The components, in the order they are listed.
pub(crate) const COMPONENTS: &[&str] = &["scheduler", "controller-manager", "etcd-0"];

/// The warning every ComponentStatus answer carries.
pub(crate) const COMPONENT_STATUS_DEPRECATED: &str = "v1 ComponentStatus is deprecated in v1.19+";

pub(crate) fn resources() -> Vec<ResourceDef> {
    vec![Identity {
        group: "",
        version: "v1",
        kind: "ComponentStatus",
        plural: "componentstatuses",
        singular: "componentstatus",
        short_names: &["cs"],
        categories: &[],
        namespaced: false,
        verbs: &["get", "list"],
    }
    .build(Arc::new(ComponentStatuses), |_| vec![])]
}

/// The ComponentStatus of `name`: healthy, or not with the reason why.
pub(crate) fn component_status(name: &str, health: Result<(), String>) -> Value {
    let condition = match health {
        Ok(()) => json!({"type": "Healthy", "status": "True", "message": "ok"}),
        Err(error) => json!({"type": "Healthy", "status": "False", "error": error}),
    };
    json!({
        "kind": "ComponentStatus",
        "apiVersion": "v1",
        "metadata": {"name": name},
        "conditions": [condition],
    })
}

#[derive(Debug)]
struct ComponentStatuses;

#[async_trait]
impl Strategy for ComponentStatuses {
    fn normalize(&self, object: &Value) -> Result<Value, String> {
        round_trip::<ComponentStatus>(object)
    }

    fn typed_schema(&self) -> Option<TypedSchema> {
        schema_of::<ComponentStatus>()
    }

    fn reports_components(&self) -> bool {
        true
    }

    async fn validate(&self, _object: &Value, _old: Option<&Value>) -> Vec<Cause> {
        Vec::new()
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            Column::name(),
            Column::new("Status", 0),
            Column::new("Message", 0),
            Column::new("Error", 0),
        ]
    }

    fn cells(&self, o: &Value, _now: DateTime<Utc>) -> Vec<Value> {
        let healthy = o["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["type"] == "Healthy");
        let (status, message, error) = match healthy {
            Some(c) => (
                if c["status"] == "True" { "Healthy" } else { "Unhealthy" },
                c["message"].as_str().unwrap_or_default(),
                c["error"].as_str().unwrap_or_default(),
            ),
            None => ("Unknown", "", ""),
        };
        vec![name_cell(o), json!(status), json!(message), json!(error)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_should_say_healthy_with_the_message_or_unhealthy_with_the_error() {
        let now = Utc::now();
        let ok = component_status("etcd-0", Ok(()));
        assert_eq!(ComponentStatuses.normalize(&ok).unwrap(), ok);
        assert_eq!(ComponentStatuses.cells(&ok, now), [json!("etcd-0"), json!("Healthy"), json!("ok"), json!("")]);
        let down = component_status("scheduler", Err("not running".into()));
        assert_eq!(ComponentStatuses.cells(&down, now)[1..], [json!("Unhealthy"), json!(""), json!("not running")]);
        let unknown = json!({"metadata": {"name": "x"}});
        assert_eq!(ComponentStatuses.cells(&unknown, now)[1], "Unknown");
    }
}

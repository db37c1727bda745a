//! The health of the control plane's parts, as core/v1 ComponentStatus reports it. `etcd-0` is
//! the store: healthy when it answers a read of its current revision within 2 s. `scheduler`
//! and `controller-manager` are what the process embedding the API says of its own loops
//! ([`Api::set_component_check`]: `setpoint server` reports whether their task is still
//! running, as kube-apiserver probes the local components' `/healthz`); a process that runs no
//! such loop (`--roles apiserver`) falls back to the component's leader Lease in `kube-system`
//! (`setpoint-scheduler`, `setpoint-controller-manager`): healthy while some process holds it
//! and renews it in time.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::Api;
use crate::registry::{component_status, COMPONENTS};

/// What the embedding process says of one component: `Ok`, or why it is unhealthy.
pub type ComponentCheck = Arc<dyn Fn() -> Result<(), String> + Send + Sync>;

/// How long the store has to answer.
const STORE_TIMEOUT: Duration = Duration::from_secs(2);

/// The namespace of the components' Leases.
const LEASE_NAMESPACE: &str = "kube-system";

/// The leader Lease of a component that has one.
fn lease_of(component: &str) -> Option<&'static str> {
    match component {
        "scheduler" => Some("setpoint-scheduler"),
        "controller-manager" => Some("setpoint-controller-manager"),
        _ => None,
    }
}

/// Whether a Lease is held and renewed within its duration at `now`.
fn lease_health(lease: &Value, now: DateTime<Utc>) -> Result<(), String> {
    let name = lease["metadata"]["name"].as_str().unwrap_or_default();
    let spec = &lease["spec"];
    if spec["holderIdentity"].as_str().is_none_or(str::is_empty) {
        return Err(format!(
            "no process holds the Lease {LEASE_NAMESPACE}/{name}"
        ));
    }
    let renewed = spec["renewTime"]
        .as_str()
        .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
        .map(|t| t.with_timezone(&Utc));
    let duration = spec["leaseDurationSeconds"].as_i64().unwrap_or(0);
    match renewed {
        Some(at) if at + chrono::Duration::seconds(duration) >= now => Ok(()),
        Some(at) => Err(format!(
            "the Lease {LEASE_NAMESPACE}/{name} was last renewed {}s ago (it lasts {duration}s)",
            (now - at).num_seconds()
        )),
        None => Err(format!(
            "the Lease {LEASE_NAMESPACE}/{name} was never renewed"
        )),
    }
}

impl Api {
    /// Tells the API how `component` (`scheduler` or `controller-manager`) is, for
    /// ComponentStatus; a later call for the same component replaces the check.
    pub fn set_component_check(&self, component: &str, check: ComponentCheck) {
        self.component_checks
            .write()
            .insert(component.to_owned(), check);
    }

    /// Every component's ComponentStatus, in [`COMPONENTS`] order.
    pub(crate) async fn component_statuses(&self) -> Vec<Value> {
        let mut out = Vec::with_capacity(COMPONENTS.len());
        for name in COMPONENTS {
            out.push(component_status(name, self.component_health(name).await));
        }
        out
    }

    /// The health of one component.
    async fn component_health(&self, component: &str) -> Result<(), String> {
        if component == "etcd-0" {
            return match tokio::time::timeout(STORE_TIMEOUT, self.store.current_revision()).await {
                Ok(Ok(_)) => Ok(()),
                Ok(Err(e)) => Err(e.to_string()),
                Err(_) => Err(format!(
                    "the store did not answer within {}s",
                    STORE_TIMEOUT.as_secs()
                )),
            };
        }
        let check = self.component_checks.read().get(component).cloned();
        if let Some(check) = check {
            return check();
        }
        let lease = lease_of(component).ok_or_else(|| format!("unknown component {component}"))?;
        let leases = self
            .registry_store_of("coordination.k8s.io", "v1", "leases")
            .map_err(|e| e.message)?;
        match leases.get(Some(LEASE_NAMESPACE), lease).await {
            Ok(object) => lease_health(&object, Utc::now()),
            Err(e) if e.reason == setpoint_core::Reason::NotFound => Err(format!(
                "this process does not run the {component}, and no Lease {LEASE_NAMESPACE}/{lease} shows one elsewhere"
            )),
            Err(e) => Err(e.message),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_lease_should_be_healthy_while_held_and_renewed_in_time() {
        let now = Utc::now();
        let lease = |holder: &str, renewed: DateTime<Utc>| {
            json!({"metadata": {"name": "setpoint-scheduler"}, "spec": {
                "holderIdentity": holder, "leaseDurationSeconds": 15,
                "renewTime": renewed.to_rfc3339_opts(chrono::SecondsFormat::Micros, true)}})
        };
        assert_eq!(
            lease_health(&lease("a", now - chrono::Duration::seconds(5)), now),
            Ok(())
        );
        let stale =
            lease_health(&lease("a", now - chrono::Duration::seconds(60)), now).unwrap_err();
        assert!(stale.contains("last renewed 60s ago"), "{stale}");
        let free = lease_health(&lease("", now), now).unwrap_err();
        assert!(free.contains("no process holds"), "{free}");
    }
}

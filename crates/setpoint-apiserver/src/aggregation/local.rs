//! The local APIServices: one per group-version this server serves itself, as kube-apiserver
//! registers them — built-in ones with its priority table and the label
//! `kube-aggregator.kubernetes.io/automanaged: onstart` (a group-version missing from the
//! table gets none, as in kube), those of CRDs with priorities 1000/100 and `automanaged:
//! "true"`, `metrics.k8s.io/v1beta1` (served here) with 100/100 as metrics-server registers
//! it. All have `spec.service: null` and `Available=True reason=Local`.
//!
//! They are registered before the API is served; then a task keeps them: within a second of
//! what is served changing (a CRD added or removed) or
//! of an APIService changing, it creates the missing ones, corrects changed ones and deletes
//! automanaged ones no longer served — writing nothing when nothing differs. An APIService
//! with a Service is never touched: whoever registered it (a real metrics-server for
//! `v1beta1.metrics.k8s.io`) owns it, and the proxy serves it.

use std::collections::BTreeMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

use serde_json::{json, Value};
use setpoint_core::ApiError;

use crate::api::Api;
use crate::registry::store::delete_options::DeleteOptions;
use crate::registry::store::{RegistryStore, Scope};

/// The label of APIServices the server manages.
pub(crate) const AUTOMANAGED: &str = "kube-aggregator.kubernetes.io/automanaged";

/// How often the task looks for changes.
const POLL: Duration = Duration::from_secs(1);

/// kube-apiserver's `(groupPriorityMinimum, versionPriority)` of its built-in group-versions.
const PRIORITIES: &[(&str, &str, i64, i64)] = &[
    ("", "v1", 18000, 1),
    ("apiregistration.k8s.io", "v1", 18000, 15),
    ("apps", "v1", 17800, 15),
    ("events.k8s.io", "v1", 17750, 15),
    ("authentication.k8s.io", "v1", 17700, 15),
    ("authorization.k8s.io", "v1", 17600, 15),
    ("autoscaling", "v1", 17500, 15),
    ("autoscaling", "v2", 17500, 30),
    ("batch", "v1", 17400, 15),
    ("certificates.k8s.io", "v1", 17300, 15),
    ("networking.k8s.io", "v1", 17200, 15),
    ("networking.k8s.io", "v1beta1", 17200, 9),
    ("policy", "v1", 17100, 15),
    ("rbac.authorization.k8s.io", "v1", 17000, 15),
    ("storage.k8s.io", "v1", 16800, 15),
    ("storage.k8s.io", "v1beta1", 16800, 9),
    ("apiextensions.k8s.io", "v1", 16700, 15),
    ("admissionregistration.k8s.io", "v1", 16700, 15),
    ("admissionregistration.k8s.io", "v1beta1", 16700, 12),
    ("scheduling.k8s.io", "v1", 16600, 15),
    ("coordination.k8s.io", "v1", 16500, 15),
    ("node.k8s.io", "v1", 16300, 15),
    ("discovery.k8s.io", "v1", 16200, 15),
    ("flowcontrol.apiserver.k8s.io", "v1", 16100, 21),
    ("flowcontrol.apiserver.k8s.io", "v1beta3", 16100, 18),
    ("internal.apiserver.k8s.io", "v1alpha1", 16000, 9),
    ("resource.k8s.io", "v1beta2", 15900, 15),
    ("resource.k8s.io", "v1beta1", 15900, 9),
    ("resource.k8s.io", "v1alpha3", 15900, 1),
    ("storagemigration.k8s.io", "v1alpha1", 15800, 9),
];

/// The priorities of CRD group-versions (kube's CRD registration controller).
const CRD_PRIORITIES: (i64, i64) = (1000, 100);

/// The group Setpoint serves itself beside the registry (`handlers/metrics`).
const METRICS_GROUP: &str = "metrics.k8s.io";

/// The priorities of `metrics.k8s.io` (those metrics-server registers).
const METRICS_PRIORITIES: (i64, i64) = (100, 100);

/// The priorities of a built-in group-version, if kube has it in its table.
pub(crate) fn builtin_priority(group: &str, version: &str) -> Option<(i64, i64)> {
    PRIORITIES
        .iter()
        .find(|(g, v, _, _)| *g == group && *v == version)
        .map(|(_, _, gp, vp)| (*gp, *vp))
}

/// The group priority `/apis` orders a locally served group by.
pub(crate) fn group_priority(api: &Api, group: &str) -> i64 {
    if group == METRICS_GROUP {
        return METRICS_PRIORITIES.0;
    }
    let served = api.served();
    let versions = served
        .registry
        .groups()
        .iter()
        .find(|(g, _)| g == group)
        .map(|(_, vs)| vs.clone())
        .unwrap_or_default();
    versions
        .iter()
        .filter_map(|v| builtin_priority(group, v).map(|p| p.0))
        .max()
        .unwrap_or(CRD_PRIORITIES.0)
}

/// One local APIService as it should be.
#[derive(Debug, PartialEq)]
struct Desired {
    group: String,
    version: String,
    priorities: (i64, i64),
    /// The label's value: `onstart` (built in) or `true` (a CRD's).
    managed: &'static str,
}

impl Desired {
    /// `VERSION.GROUP`: the core group's is `v1.`, as in kube.
    fn name(&self) -> String {
        format!("{}.{}", self.version, self.group)
    }

    fn spec(&self) -> Value {
        json!({"group": self.group, "version": self.version,
            "groupPriorityMinimum": self.priorities.0, "versionPriority": self.priorities.1})
    }
}

/// The local APIServices of what `api` serves now, by name.
fn desired(api: &Api) -> BTreeMap<String, Desired> {
    let served = api.served();
    let custom: Vec<(String, String)> = served
        .custom
        .values()
        .flatten()
        .map(|d| (d.gvk.group.clone(), d.gvk.version.clone()))
        .collect();
    let mut out = BTreeMap::new();
    let mut add = |d: Desired| {
        out.insert(d.name(), d);
    };
    for (group, versions) in served.registry.groups() {
        for version in versions {
            let gv = (group.clone(), version.clone());
            if custom.contains(&gv) {
                add(Desired {
                    group: gv.0,
                    version: gv.1,
                    priorities: CRD_PRIORITIES,
                    managed: "true",
                });
            } else if let Some(priorities) = builtin_priority(group, version) {
                add(Desired {
                    group: gv.0,
                    version: gv.1,
                    priorities,
                    managed: "onstart",
                });
            }
        }
    }
    add(Desired {
        group: METRICS_GROUP.to_owned(),
        version: "v1beta1".to_owned(),
        priorities: METRICS_PRIORITIES,
        managed: "onstart",
    });
    out
}

/// The `Available` condition of a local APIService (its transition time kept if it was so).
fn local_condition(old: &Value) -> Value {
    let same = old["status"] == "True" && old["reason"] == "Local";
    let since = if same && old["lastTransitionTime"].is_string() {
        old["lastTransitionTime"].clone()
    } else {
        json!(chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
    };
    json!({"type": "Available", "status": "True", "lastTransitionTime": since,
        "reason": "Local", "message": "Local APIServices are always available"})
}

/// Whether `current` already is `want` (spec, label, condition).
fn up_to_date(current: &Value, want: &Desired) -> bool {
    let spec = &current["spec"];
    let condition = super::available_condition(current);
    spec["group"] == want.group.as_str()
        && spec["version"] == want.version.as_str()
        && spec["groupPriorityMinimum"] == want.priorities.0
        && spec["versionPriority"] == want.priorities.1
        && current["metadata"]["labels"][AUTOMANAGED] == want.managed
        && condition.is_some_and(|c| c["status"] == "True" && c["reason"] == "Local")
}

/// Brings the local APIServices to what is served now; writes only what differs.
pub(crate) async fn reconcile(api: &Api) -> Result<(), ApiError> {
    let served = api.served();
    let Some(store) = served
        .store("apiregistration.k8s.io", "v1", "apiservices")
        .cloned()
    else {
        return Ok(());
    };
    let want = desired(api);
    let mut existing: BTreeMap<String, Value> = BTreeMap::new();
    for v in store.consistent_values().await? {
        if let Some(name) = v["metadata"]["name"].as_str() {
            existing.insert(name.to_owned(), v);
        }
    }
    for (name, d) in &want {
        match existing.get(name) {
            Some(current) if !current["spec"]["service"].is_null() => {}
            Some(current) if up_to_date(current, d) => {}
            Some(_) => write(&store, name, d).await?,
            None => {
                let object = json!({"apiVersion": "apiregistration.k8s.io/v1",
                    "kind": "APIService", "metadata": {"name": name,
                        "labels": {AUTOMANAGED: d.managed}}, "spec": d.spec()});
                match store.create(None, object, false).await {
                    Ok(_) => {}
                    Err(e) if e.reason == setpoint_core::Reason::AlreadyExists => {}
                    Err(e) => return Err(e),
                }
                write(&store, name, d).await?;
            }
        }
    }
    for (name, current) in &existing {
        let managed = current["metadata"]["labels"][AUTOMANAGED].is_string();
        if managed && current["spec"]["service"].is_null() && !want.contains_key(name) {
            match store.delete(None, name, &DeleteOptions::default()).await {
                Ok(_) => {}
                Err(e) if e.reason == setpoint_core::Reason::NotFound => {}
                Err(e) => return Err(e),
            }
        }
    }
    Ok(())
}

/// Sets the spec, label and `Available` condition of the local APIService `name`.
async fn write(store: &RegistryStore, name: &str, d: &Desired) -> Result<(), ApiError> {
    let spec = d.spec();
    let managed = d.managed;
    let change = move |current: &Value| -> Result<Value, ApiError> {
        let mut next = current.clone();
        if !next["spec"]["service"].is_null() {
            return Ok(next);
        }
        next["spec"] = spec.clone();
        if !next["metadata"]["labels"].is_object() {
            next["metadata"]["labels"] = json!({});
        }
        next["metadata"]["labels"][AUTOMANAGED] = json!(managed);
        let old = super::available_condition(&next)
            .cloned()
            .unwrap_or(Value::Null);
        next["status"] = json!({"conditions": [local_condition(&old)]});
        Ok(next)
    };
    match store.update(None, name, Scope::Full, false, &change).await {
        Ok(_) => Ok(()),
        Err(e) if e.reason == setpoint_core::Reason::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// Registers the local APIServices (before the API answers its first request, so that
/// nothing is written behind a client's back later unless what is served changes), then
/// starts the task keeping them; it ends with the API.
pub(crate) async fn start(api: &Arc<Api>) {
    if let Err(error) = reconcile(api).await {
        tracing::warn!(%error, "cannot register the local APIServices");
    }
    let served = api.served();
    let last = served
        .store("apiregistration.k8s.io", "v1", "apiservices")
        .filter(|s| s.cache().is_ready())
        .map(|s| (Arc::as_ptr(&served) as usize, s.cache().snapshot().0));
    tokio::spawn(run(Arc::downgrade(api), last));
}

async fn run(weak: Weak<Api>, last: Option<(usize, crate::watchcache::Objects)>) {
    let mut last = last;
    loop {
        {
            let Some(api) = weak.upgrade() else { return };
            let served = api.served();
            let seen = served
                .store("apiregistration.k8s.io", "v1", "apiservices")
                .filter(|s| s.cache().is_ready())
                .map(|s| (Arc::as_ptr(&served) as usize, s.cache().snapshot().0));
            let changed = match (&last, &seen) {
                (_, None) => false,
                (Some((p, o)), Some((q, n))) => p != q || !o.ptr_eq(n),
                (None, Some(_)) => true,
            };
            if changed {
                match reconcile(&api).await {
                    Ok(()) => last = seen,
                    Err(error) => tracing::warn!(%error, "cannot register the local APIServices"),
                }
            }
        }
        tokio::time::sleep(POLL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_priority_table_should_hold_kubes_values() {
        assert_eq!(builtin_priority("", "v1"), Some((18000, 1)));
        assert_eq!(builtin_priority("apps", "v1"), Some((17800, 15)));
        assert_eq!(builtin_priority("autoscaling", "v2"), Some((17500, 30)));
        assert_eq!(builtin_priority("example.com", "v1"), None);
        let d = Desired {
            group: String::new(),
            version: "v1".into(),
            priorities: (18000, 1),
            managed: "onstart",
        };
        assert_eq!(d.name(), "v1.");
        let stored = json!({"metadata": {"labels": {AUTOMANAGED: "onstart"}},
            "spec": d.spec(), "status": {"conditions": [local_condition(&Value::Null)]}});
        assert!(up_to_date(&stored, &d));
        let mut moved = stored.clone();
        moved["spec"]["versionPriority"] = json!(2);
        assert!(!up_to_date(&moved, &d));
    }
}

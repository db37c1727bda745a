//! ResourceQuota admission: what a write adds to its namespace's usage is charged to every
//! quota that covers it (its scopes match and it limits one of the resources), by a
//! conditional update of the quota's `status.used` (retried on conflict), so two creates racing
//! for the last unit cannot both pass. A charge over `status.hard` is refused with
//! kube-apiserver's 403 (`exceeded quota: q, requested: pods=1, used: pods=3, limited:
//! pods=3`); a pod under a quota of CPU or memory must set what the quota limits (`failed
//! quota: q: must specify limits.cpu for: c`). Creates are charged; updates only for what they
//! add (a claim resized, a service's type changed). A dry run checks without charging.
//!
//! A charge is never given back by admission: the quota loop counts the namespace again (a
//! write refused after its charge, or by a later quota, is corrected at its next sync).

use serde_json::Value;
use setpoint_core::quota::{self, Usage};
use setpoint_core::ApiError;

use super::{cached, forbidden, Builtin};
use crate::registry::store::{Operation, Scope};
use crate::registry::ResourceDef;

/// The usage a write adds: all of a created object's, the growth of an updated one's.
fn delta(def: &ResourceDef, operation: Operation, object: &Value, old: Option<&Value>) -> Usage {
    let (group, plural) = (def.gvk.group.as_str(), def.plural.as_str());
    let new = quota::object_usage(group, plural, object);
    match (operation, old) {
        (Operation::Create, _) => new,
        (Operation::Update, Some(old))
            if group.is_empty() && matches!(plural, "services" | "persistentvolumeclaims") =>
        {
            let before = quota::object_usage(group, plural, old);
            new.into_iter()
                .filter_map(|(k, v)| {
                    let grown = v - before.get(&k).copied().unwrap_or(0);
                    (grown > 0).then_some((k, grown))
                })
                .collect()
        }
        _ => Usage::new(),
    }
}

pub(super) async fn charge(
    builtin: &Builtin,
    def: &ResourceDef,
    operation: Operation,
    object: &Value,
    old: Option<&Value>,
    dry_run: bool,
) -> Result<(), ApiError> {
    let delta = delta(def, operation, object, old);
    if delta.is_empty() {
        return Ok(());
    }
    let is_pod = def.gvk.group.is_empty() && def.plural == "pods";
    let mut quotas = cached(&builtin.served, "resourcequotas", &builtin.namespace);
    quotas.sort_by(|a, b| {
        a["metadata"]["name"]
            .as_str()
            .cmp(&b["metadata"]["name"].as_str())
    });
    let Some(store) = builtin.served.store("", "v1", "resourcequotas") else {
        return Ok(());
    };
    for q in quotas {
        let name = q["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        // What the loop has recorded as hard: a quota it has not synced yet covers nothing
        // (kube-apiserver reads `status.hard` too).
        let hard = &q["status"]["hard"];
        // The quota covers the object when it limits something of its kind.
        let limited: Vec<String> = hard
            .as_object()
            .into_iter()
            .flatten()
            .map(|(k, _)| k.clone())
            .filter(|k| {
                quota::resources_of(k).is_some_and(|(g, p)| g == def.gvk.group && p == def.plural)
            })
            .collect();
        if limited.is_empty() || !quota::matches_scopes(&q, is_pod, object) {
            continue;
        }
        if is_pod && operation == Operation::Create {
            let names = hard
                .as_object()
                .into_iter()
                .flatten()
                .map(|(k, _)| k.as_str());
            if let Some(why) = quota::required_missing(names, object) {
                return Err(forbidden(
                    def,
                    object,
                    &format!("failed quota: {name}: {why}"),
                ));
            }
        }
        let refuse = |status: &Value| -> Result<Usage, ApiError> {
            quota::charge(status, &delta).map_err(|over| match over {
                Some(over) => forbidden(def, object, &over.message(&name)),
                None => forbidden(
                    def,
                    object,
                    &format!(
                        "status unknown for quota: {name}, resources: {}",
                        limited.join(",")
                    ),
                ),
            })
        };
        if dry_run {
            refuse(&q["status"])?;
            continue;
        }
        let change = |current: &Value| -> Result<Value, ApiError> {
            let used = refuse(&current["status"])?;
            let mut new = current.clone();
            // The write is conditional on the revision read (the update retries a conflict).
            if let Some(meta) = new["metadata"].as_object_mut() {
                meta.remove("resourceVersion");
            }
            new["status"]["used"] = quota::to_list(&used);
            Ok(new)
        };
        match store
            .update(
                Some(&builtin.namespace),
                &name,
                Scope::Status,
                false,
                &change,
            )
            .await
        {
            Ok(_) => {}
            // Deleted meanwhile: nothing to charge.
            Err(e) if e.reason == setpoint_core::Reason::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

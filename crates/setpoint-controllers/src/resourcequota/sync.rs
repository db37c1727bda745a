//! One sync of a quota: count what the objects of its namespace that it covers use of each
//! resource it limits, and write `status.hard` (its `spec.hard`) and `status.used` when they
//! differ from what is stored (conditional on the quota's resource version; a conflict is
//! retried). A lower count waits until the quota has gone uncharged for
//! [`SETTLE`](super::SETTLE).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::api::core::v1::ResourceQuota;
use kube::api::{ApiResource, DynamicObject, ListParams, PostParams};
use kube::core::GroupVersionKind;
use serde_json::Value;
use setpoint_core::quota::{self, Usage};
use setpoint_runtime::Action;

use super::{Context, FULL_RESYNC, SETTLE};

/// Why a sync failed (retried with backoff).
#[derive(Debug, thiserror::Error)]
pub(crate) enum SyncError {
    /// Listing a counted kind, or writing the status, failed.
    #[error("resource quota {quota}: {source}")]
    Api {
        quota: String,
        #[source]
        source: kube::Error,
    },
    /// An object or the quota did not encode.
    #[error("resource quota {quota}: {source}")]
    Encode {
        quota: String,
        #[source]
        source: serde_json::Error,
    },
}

/// The objects of (group, plural) in `namespace`, as JSON.
async fn objects(
    ctx: &Context,
    namespace: &str,
    group: &str,
    plural: &str,
) -> Result<Vec<Value>, kube::Error> {
    fn values<K: serde::Serialize>(list: Vec<Arc<K>>) -> Vec<Value> {
        list.iter()
            .filter_map(|o| serde_json::to_value(o.as_ref()).ok())
            .collect()
    }
    if group.is_empty() {
        match plural {
            "pods" => return Ok(values(ctx.pods.list_namespace(namespace))),
            "services" => return Ok(values(ctx.services.list_namespace(namespace))),
            "persistentvolumeclaims" => return Ok(values(ctx.claims.list_namespace(namespace))),
            _ => {}
        }
    }
    // Anything else only counts: its metadata is enough.
    let version = if group.is_empty() {
        "v1".to_owned()
    } else {
        // The group's preferred version; a group not served counts nothing.
        let groups = ctx.client.kube().list_api_groups().await?;
        let found = groups.groups.into_iter().find(|g| g.name == group);
        let preferred = found.and_then(|g| {
            g.preferred_version
                .or_else(|| g.versions.into_iter().next())
                .map(|v| v.version)
        });
        match preferred {
            Some(v) => v,
            None => return Ok(Vec::new()),
        }
    };
    let gvk = GroupVersionKind::gvk(group, &version, "");
    let resource = ApiResource::from_gvk_with_plural(&gvk, plural);
    let api: kube::Api<DynamicObject> =
        kube::Api::namespaced_with(ctx.client.kube().clone(), namespace, &resource);
    let list = api.list_metadata(&ListParams::default()).await?;
    Ok(list
        .items
        .iter()
        .filter_map(|o| serde_json::to_value(o).ok())
        .collect())
}

/// What the quota's namespace uses of each resource `hard` names (zero when nothing does).
async fn usage(ctx: &Context, quota: &Value, namespace: &str) -> Result<Usage, kube::Error> {
    let hard = quota::usage_of(&quota["spec"]["hard"]);
    let mut kinds: BTreeMap<(String, String), ()> = BTreeMap::new();
    for name in hard.keys() {
        if let Some(kind) = quota::resources_of(name) {
            kinds.insert(kind, ());
        }
    }
    let mut used: Usage = hard.keys().map(|k| (k.clone(), 0)).collect();
    for (group, plural) in kinds.keys() {
        let is_pod = group.is_empty() && plural == "pods";
        let listed = match objects(ctx, namespace, group, plural).await {
            Ok(l) => l,
            // A kind the server does not serve counts nothing.
            Err(kube::Error::Api(e)) if e.code == 404 => continue,
            Err(e) => return Err(e),
        };
        for object in listed
            .iter()
            .filter(|o| quota::matches_scopes(quota, is_pod, o))
        {
            for (k, v) in quota::object_usage(group, plural, object) {
                if let Some(u) = used.get_mut(&k) {
                    *u += v;
                }
            }
        }
    }
    Ok(used)
}

/// Whether `counted` is lower than `recorded` for some resource.
fn lowers(recorded: &Usage, counted: &Usage) -> bool {
    counted
        .iter()
        .any(|(k, v)| recorded.get(k).is_some_and(|r| r > v))
}

/// Counts the quota's usage and writes its status when it changed.
pub(crate) async fn reconcile(
    quota: Arc<ResourceQuota>,
    ctx: Arc<Context>,
) -> Result<Action, SyncError> {
    let name = quota.metadata.name.clone().unwrap_or_default();
    let namespace = quota.metadata.namespace.clone().unwrap_or_default();
    let id = format!("{namespace}/{name}");
    let value = serde_json::to_value(quota.as_ref()).map_err(|source| SyncError::Encode {
        quota: id.clone(),
        source,
    })?;
    let used = usage(&ctx, &value, &namespace)
        .await
        .map_err(|source| SyncError::Api {
            quota: id.clone(),
            source,
        })?;
    let hard = value["spec"]["hard"].clone();
    let hard = if hard.is_object() {
        hard
    } else {
        serde_json::json!({})
    };
    let status = serde_json::json!({"hard": hard, "used": quota::to_list(&used)});
    let current = &value["status"];
    let same = quota::usage_of(&current["hard"]) == quota::usage_of(&status["hard"])
        && quota::usage_of(&current["used"]) == used
        && current["hard"].as_object().map_or(0, |m| m.len())
            == status["hard"].as_object().map_or(0, |m| m.len());
    if !same && lowers(&quota::usage_of(&current["used"]), &used) {
        // Only once the quota has gone uncharged for SETTLE (see the module's docs).
        let key = setpoint_runtime::ObjectKey::of(quota.as_ref());
        let rv = quota.metadata.resource_version.clone().unwrap_or_default();
        let mut settling = ctx.settling.lock();
        match settling.get(&key) {
            Some((seen, since)) if *seen == rv && since.elapsed() >= SETTLE => {
                settling.remove(&key);
            }
            Some((seen, since)) if *seen == rv => {
                return Ok(Action::requeue(SETTLE.saturating_sub(since.elapsed())));
            }
            _ => {
                settling.insert(key, (rv, Instant::now()));
                return Ok(Action::requeue(SETTLE));
            }
        }
    }
    if !same {
        let mut updated = value.clone();
        updated["status"] = status;
        let updated: ResourceQuota =
            serde_json::from_value(updated).map_err(|source| SyncError::Encode {
                quota: id.clone(),
                source,
            })?;
        let api: kube::Api<ResourceQuota> = ctx.client.namespaced_api(&namespace);
        match api
            .replace_status(&name, &PostParams::default(), &updated)
            .await
        {
            Ok(_) => {}
            // Gone meanwhile: nothing to count.
            Err(kube::Error::Api(e)) if e.code == 404 => return Ok(Action::await_change()),
            // Changed meanwhile (admission charged it): count again.
            Err(kube::Error::Api(e)) if e.code == 409 => {
                return Ok(Action::requeue(std::time::Duration::from_millis(50)))
            }
            Err(source) => return Err(SyncError::Api { quota: id, source }),
        }
    }
    Ok(Action::requeue(FULL_RESYNC))
}

//! The built-in admission plugins kube-apiserver enables by default that act on objects'
//! resources: LimitRanger ([`limit_range`]: defaults, then bounds), ServiceAccount
//! ([`service_account`]: a pod's ServiceAccount defaulted and checked, its token mounted;
//! when enabled) and ResourceQuota ([`quota`]: usage charged to the namespace's quotas,
//! creates over them refused).
//!
//! They run inside the request's admission (`super::dispatch`) in kube-apiserver's order:
//! LimitRanger's defaults before the mutating webhooks, its bounds before the validating
//! policies and webhooks, and ResourceQuota last, just before the write; ServiceAccount
//! mutates after LimitRanger and validates after it. A request only gets them when its
//! namespace has a LimitRange or a ResourceQuota (read from their watch caches) or it is a pod
//! write with ServiceAccount admission on, so other requests pay one cache lookup.

pub(super) mod certificates;
mod limit_range;
pub(super) mod node_restriction;
mod quota;
pub(crate) mod service_account;

use std::sync::Arc;

use serde_json::Value;
use setpoint_core::ApiError;

use crate::api::Served;
use crate::registry::store::Operation;
use crate::registry::ResourceDef;

/// The LimitRanges and whether there are ResourceQuotas in the namespace of one request.
pub(super) struct Builtin {
    served: Arc<Served>,
    namespace: String,
    limit_ranges: Vec<Value>,
    quotas: bool,
    /// ServiceAccount admission applies (a pod, with the plugin on).
    service_accounts: bool,
}

/// The objects of a namespaced core/v1 resource in `namespace`, from its watch cache.
fn cached(served: &Served, plural: &str, namespace: &str) -> Vec<Value> {
    let Some(store) = served.store("", "v1", plural) else {
        return Vec::new();
    };
    let prefix = store.def.collection_prefix(Some(namespace));
    let (objects, _) = store.cache().snapshot();
    objects
        .range(bytes::Bytes::from(prefix.clone())..)
        .take_while(|(k, _)| k.starts_with(prefix.as_bytes()))
        .filter_map(|(_, o)| serde_json::from_slice(&o.json.bytes()).ok())
        .collect()
}

/// The built-in plugins of a write on `def` in `namespace`, if any applies.
pub(super) fn for_request(
    served: &Arc<Served>,
    def: &ResourceDef,
    subresource: &str,
    namespace: Option<&str>,
    service_accounts: bool,
) -> Option<Builtin> {
    let namespace = namespace?;
    if !subresource.is_empty() || !def.namespaced {
        return None;
    }
    let core = def.gvk.group.is_empty();
    let limited = core && matches!(def.plural.as_str(), "pods" | "persistentvolumeclaims");
    let limit_ranges = if limited {
        cached(served, "limitranges", namespace)
    } else {
        Vec::new()
    };
    let quotas = !cached_is_empty(served, "resourcequotas", namespace);
    let service_accounts = service_accounts && is_core(def, "pods");
    if limit_ranges.is_empty() && !quotas && !service_accounts {
        return None;
    }
    Some(Builtin {
        served: served.clone(),
        namespace: namespace.to_owned(),
        limit_ranges,
        quotas,
        service_accounts,
    })
}

fn cached_is_empty(served: &Served, plural: &str, namespace: &str) -> bool {
    let Some(store) = served.store("", "v1", plural) else {
        return true;
    };
    let prefix = store.def.collection_prefix(Some(namespace));
    let (objects, _) = store.cache().snapshot();
    let first = objects.range(bytes::Bytes::from(prefix.clone())..).next();
    !first.is_some_and(|(k, _)| k.starts_with(prefix.as_bytes()))
}

impl Builtin {
    /// LimitRanger's defaults, then ServiceAccount's; whether the object changed.
    pub(super) async fn mutate(
        &self,
        def: &ResourceDef,
        operation: Operation,
        object: Option<&mut Value>,
    ) -> Result<bool, ApiError> {
        match object {
            Some(o) if operation == Operation::Create && is_core(def, "pods") => {
                let mut changed = limit_range::default_pod(&self.limit_ranges, o);
                if self.service_accounts {
                    changed |= service_account::admit(&self.served, &self.namespace, o)
                        .await
                        .map_err(|why| forbidden_create(def, o, &why))?;
                }
                Ok(changed)
            }
            _ => Ok(false),
        }
    }

    /// ServiceAccount's checks of a pod being created.
    pub(super) async fn validate_service_account(
        &self,
        def: &ResourceDef,
        operation: Operation,
        object: Option<&Value>,
    ) -> Result<(), ApiError> {
        match object {
            Some(o) if self.service_accounts && operation == Operation::Create => {
                service_account::validate(&self.served, &self.namespace, o)
                    .await
                    .map_err(|why| forbidden_create(def, o, &why))
            }
            _ => Ok(()),
        }
    }

    /// LimitRanger's bounds, checked before the validating webhooks.
    pub(super) fn validate_limits(
        &self,
        def: &ResourceDef,
        operation: Operation,
        object: Option<&Value>,
    ) -> Result<(), ApiError> {
        let Some(object) = object else { return Ok(()) };
        let why = match operation {
            Operation::Create if is_core(def, "pods") => {
                limit_range::check_pod(&self.limit_ranges, object)
            }
            Operation::Create | Operation::Update if is_core(def, "persistentvolumeclaims") => {
                limit_range::check_claim(&self.limit_ranges, object)
            }
            _ => None,
        };
        match why {
            Some(why) => Err(forbidden(def, object, &why)),
            None => Ok(()),
        }
    }

    /// ResourceQuota: the write's usage charged to every quota of the namespace that covers it.
    pub(super) async fn charge_quotas(
        &self,
        def: &ResourceDef,
        operation: Operation,
        object: Option<&Value>,
        old: Option<&Value>,
        dry_run: bool,
    ) -> Result<(), ApiError> {
        if !self.quotas {
            return Ok(());
        }
        let Some(object) = object else { return Ok(()) };
        quota::charge(self, def, operation, object, old, dry_run).await
    }
}

fn is_core(def: &ResourceDef, plural: &str) -> bool {
    def.gvk.group.is_empty() && def.plural == plural
}

/// 403 for an object being created, named as kube-apiserver's admission names it before a
/// name is generated: its name, else its `generateName`, else `Unknown`.
fn forbidden_create(def: &ResourceDef, object: &Value, why: &str) -> ApiError {
    let meta = &object["metadata"];
    let name = [&meta["name"], &meta["generateName"]]
        .into_iter()
        .filter_map(Value::as_str)
        .find(|n| !n.is_empty())
        .unwrap_or("Unknown");
    ApiError::forbidden_object(&def.group_resource(), name, why)
}

/// 403 `<resource> "<name>" is forbidden: <why>`, as kube-apiserver's admission refuses.
fn forbidden(def: &ResourceDef, object: &Value, why: &str) -> ApiError {
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    ApiError::forbidden_object(&def.group_resource(), name, why)
}

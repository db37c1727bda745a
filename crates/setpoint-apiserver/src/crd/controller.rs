//! The CRD controller, run inside the API server as kube-apiserver runs its own: for each
//! stored CRD it decides what is served and says so in the CRD's status.
//!
//! - **Names**: a CRD whose plural, singular, kind, list kind or short names collide with a
//!   resource of the same group served for another CRD (or built in) gets
//!   `NamesAccepted=False` and is not served; otherwise `NamesAccepted=True`,
//!   `Established=True`, `status.acceptedNames` and the storage version in
//!   `status.storedVersions`, and its resources are registered (see [`Api::set_custom`]).
//! - **Deletion**: DELETE adds the `customresourcecleanup.apiextensions.k8s.io` finalizer and
//!   marks the CRD; the controller sets `Terminating=True`, refuses new objects, deletes every
//!   object of the resource (objects with finalizers are marked and waited for, re-checked
//!   every second), then removes the finalizer, so the CRD goes and its resources leave
//!   discovery.
//! - **When**: at start (every stored CRD, before the API answers, so CRDs survive a
//!   restart), after every CRD write made through the API (before the answer, so the new
//!   resource is in discovery at once), and on every CRD watch event.
//!
//! Reconciling is idempotent and serialized by [`Api::registration`].

use std::sync::{Arc, Weak};
use std::time::Duration;

use bytes::Bytes;
use serde_json::{json, Value};
use setpoint_core::{ApiError, Revision};
use setpoint_store::{ListRequest, Pages, StoreError};

use super::build::{resources_of, CRD_PREFIX};
use crate::api::Api;
use crate::registry::meta;
use crate::registry::store::{store_error, RegistryStore, Scope, Updated};
use crate::registry::ResourceDef;
use crate::watchcache::Filter;

/// The finalizer that holds a CRD until its objects are gone.
pub(crate) const CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

/// How often terminating CRDs are looked at again while their objects are finalized.
const RECHECK: Duration = Duration::from_secs(1);

/// The registry store of CustomResourceDefinitions.
fn crd_store(api: &Api) -> Result<Arc<RegistryStore>, ApiError> {
    api.registry_store_of("apiextensions.k8s.io", "v1", "customresourcedefinitions")
        .map_err(|_| ApiError::internal("no customresourcedefinitions resource"))
}

/// The names of every stored CRD.
async fn stored_names(api: &Api) -> Result<Vec<String>, ApiError> {
    let mut names = Vec::new();
    let request = ListRequest::prefix(Bytes::from_static(CRD_PREFIX.as_bytes())).limit(500);
    let mut pages = Pages::new(&*api.store, request);
    while let Some(page) = pages.next().await.map_err(store_error)? {
        for kv in &page.kvs {
            if let Some(name) = kv.key.strip_prefix(CRD_PREFIX.as_bytes()) {
                names.push(String::from_utf8_lossy(name).into_owned());
            }
        }
    }
    Ok(names)
}

/// Registers every stored CRD, then keeps following them in a background task that ends
/// when the API is dropped.
pub(crate) async fn start(api: &Arc<Api>) -> Result<(), ApiError> {
    let crds = crd_store(api)?;
    reconcile_all(api).await;
    let cache = crds.cache().clone();
    // Where the store cannot tell a quiet watch it is current, the cache only waits to be
    // loaded: `reconcile_all` read the store itself, and `follow` starts from the cache.
    let current = if api.store.watch_progress_is_prompt() {
        api.store.current_revision().await.map_err(store_error)?
    } else {
        Revision::ZERO
    };
    cache.wait_for(current, Duration::from_secs(10)).await?;
    let weak = Arc::downgrade(api);
    tokio::spawn(follow(weak, crds.def.clone(), cache.revision()));
    Ok(())
}

async fn follow(api: Weak<Api>, def: Arc<ResourceDef>, mut from: Revision) {
    let mut tick = tokio::time::interval(RECHECK);
    loop {
        let Some(cache) = api
            .upgrade()
            .and_then(|a| a.registry_store(&def).ok())
            .map(|s| s.cache().clone())
        else {
            return;
        };
        let mut watcher = match cache.watch(from, Filter::default()) {
            Ok(w) => w,
            Err(_) => {
                // Fell behind the window: look at everything again.
                let Some(a) = api.upgrade() else { return };
                reconcile_all(&a).await;
                from = cache.revision();
                continue;
            }
        };
        drop(cache);
        loop {
            tokio::select! {
                events = watcher.next() => {
                    let Some(a) = api.upgrade() else { return };
                    match events {
                        Ok(events) => {
                            for e in events {
                                let object: Value = serde_json::from_slice(&e.object.json.bytes()).unwrap_or(Value::Null);
                                if let Some(name) = object["metadata"]["name"].as_str() {
                                    reconcile(&a, name).await;
                                }
                            }
                            from = watcher.cursor();
                        }
                        Err(_) => {
                            reconcile_all(&a).await;
                            from = a.store.current_revision().await.unwrap_or(from);
                            break;
                        }
                    }
                }
                _ = tick.tick() => {
                    let Some(a) = api.upgrade() else { return };
                    let terminating: Vec<String> = a
                        .served()
                        .custom
                        .iter()
                        .filter(|(_, defs)| defs.iter().any(|d| super::custom_of(d).is_some_and(|c| c.terminating())))
                        .map(|(name, _)| name.clone())
                        .collect();
                    for name in terminating {
                        reconcile(&a, &name).await;
                    }
                }
            }
        }
    }
}

/// Reconciles every stored CRD and drops the registrations of CRDs no longer stored.
async fn reconcile_all(api: &Api) {
    let mut names = match stored_names(api).await {
        Ok(n) => n,
        Err(error) => {
            tracing::warn!(%error, "cannot list CustomResourceDefinitions");
            return;
        }
    };
    for registered in api.served().custom.keys() {
        if !names.contains(registered) {
            names.push(registered.clone());
        }
    }
    for name in names {
        reconcile(api, &name).await;
    }
}

/// After a write through the API to one CRD (`Some(name)`) or to several (`None`).
pub(crate) async fn reconcile_after_write(api: &Api, name: Option<&str>) {
    match name {
        Some(name) => reconcile(api, name).await,
        None => reconcile_all(api).await,
    }
}

/// Brings what is served for the CRD `name`, and its status, in line with the stored CRD.
pub(crate) async fn reconcile(api: &Api, name: &str) {
    let _guard = api.registration.lock().await;
    let served_before = api.served().custom.len();
    if let Err(error) = reconcile_locked(api, name).await {
        tracing::warn!(crd = name, %error, "CustomResourceDefinition not reconciled");
    }
    if api.served().custom.len() < served_before {
        // Names were freed: CRDs refused for a conflict may be served now.
        let Ok(stored) = stored_names(api).await else {
            return;
        };
        for other in stored {
            if other != name && !api.served().custom.contains_key(&other) {
                if let Err(error) = reconcile_locked(api, &other).await {
                    tracing::warn!(crd = other, %error, "CustomResourceDefinition not reconciled");
                }
            }
        }
    }
}

async fn reconcile_locked(api: &Api, name: &str) -> Result<(), ApiError> {
    let crds = crd_store(api)?;
    let def = &crds.def;
    let Some(kv) = api
        .store
        .get(def.key(None, name).as_bytes())
        .await
        .map_err(store_error)?
    else {
        if api.served().custom.contains_key(name) {
            api.set_custom(name, Vec::new());
            tracing::info!(crd = name, "custom resource no longer served");
        }
        return Ok(());
    };
    let crd: Value = serde_json::from_slice(&kv.value)
        .map_err(|e| ApiError::internal(format!("stored CRD does not decode: {e}")))?;
    if !crd["metadata"]["deletionTimestamp"].is_null() {
        return terminate(api, &crds, name, &crd).await;
    }
    let conditions = match names_conflict(api, name, &crd) {
        Some(conflict) => {
            vec![
                condition("NamesAccepted", "False", "NameConflict", &conflict),
                condition(
                    "Established",
                    "False",
                    "NotAccepted",
                    "not all names are accepted",
                ),
            ]
        }
        None => {
            let built = resources_of(&crd, &api.this).map_err(ApiError::internal)?;
            let unchanged = api.served().custom.get(name).is_some_and(|defs| {
                defs.len() == built.len()
                    && defs
                        .iter()
                        .all(|d| super::custom_of(d).is_some_and(|c| c.spec == crd["spec"]))
            });
            if !unchanged {
                api.set_custom(name, built.into_iter().map(Arc::new).collect());
                tracing::info!(crd = name, "custom resource served");
            }
            vec![
                condition("NamesAccepted", "True", "NoConflicts", "no conflicts found"),
                condition(
                    "Established",
                    "True",
                    "InitialNamesAccepted",
                    "the initial names have been accepted",
                ),
            ]
        }
    };
    let accepted = conditions[0]["status"] == "True";
    set_status(&crds, name, &conditions, accepted).await
}

/// A condition as the CRD's status lists it.
fn condition(kind: &str, status: &str, reason: &str, message: &str) -> Value {
    json!({"type": kind, "status": status, "reason": reason, "message": message})
}

/// Why the CRD's names cannot be served, if they cannot: another resource of the group
/// already uses one of them.
fn names_conflict(api: &Api, name: &str, crd: &Value) -> Option<String> {
    let spec = &crd["spec"];
    let group = spec["group"].as_str().unwrap_or_default();
    let names = &spec["names"];
    let mut wanted: Vec<String> = ["plural", "singular"]
        .iter()
        .filter_map(|k| names[*k].as_str().map(str::to_owned))
        .collect();
    if let Some(short) = names["shortNames"].as_array() {
        wanted.extend(short.iter().filter_map(|s| s.as_str().map(str::to_owned)));
    }
    let kinds: Vec<&str> = ["kind", "listKind"]
        .iter()
        .filter_map(|k| names[*k].as_str())
        .collect();
    let served = api.served();
    for other in served.registry.all() {
        if other.gvk.group != group || super::custom_of(other).is_some_and(|c| c.crd_name == name) {
            continue;
        }
        let mut taken = vec![other.plural.clone(), other.singular.clone()];
        taken.extend(other.short_names.iter().cloned());
        if let Some(n) = wanted.iter().find(|w| taken.contains(w)) {
            return Some(format!("{n:?} is already in use"));
        }
        let other_kinds = [other.gvk.kind.clone(), other.list_kind()];
        if let Some(k) = kinds.iter().find(|k| other_kinds.iter().any(|o| o == *k)) {
            return Some(format!("{k:?} is already in use"));
        }
    }
    None
}

/// Writes the conditions (keeping the transition time of those that did not change), and,
/// when the names are accepted, `acceptedNames` and the storage version in `storedVersions`.
async fn set_status(
    crds: &RegistryStore,
    name: &str,
    conditions: &[Value],
    accepted: bool,
) -> Result<(), ApiError> {
    crds.update(None, name, Scope::Full, false, &|current| {
        let mut next = current.clone();
        meta::metadata(&mut next).remove("resourceVersion");
        let existing = current["status"]["conditions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let mut merged: Vec<Value> = existing
            .iter()
            .filter(|c| !conditions.iter().any(|n| n["type"] == c["type"]))
            .cloned()
            .collect();
        for c in conditions {
            let mut c = c.clone();
            let before = existing.iter().find(|e| e["type"] == c["type"]);
            c["lastTransitionTime"] = match before {
                Some(b) if b["status"] == c["status"] => b["lastTransitionTime"].clone(),
                _ => json!(meta::now()),
            };
            merged.push(c);
        }
        next["status"]["conditions"] = json!(merged);
        if accepted {
            let names = &current["spec"]["names"];
            let mut accepted_names = json!({});
            for k in [
                "plural",
                "singular",
                "kind",
                "listKind",
                "shortNames",
                "categories",
            ] {
                if !names[k].is_null() {
                    accepted_names[k] = names[k].clone();
                }
            }
            next["status"]["acceptedNames"] = accepted_names;
            let mut stored: Vec<Value> = current["status"]["storedVersions"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            if let Some(storage) = current["spec"]["versions"]
                .as_array()
                .and_then(|vs| vs.iter().find(|v| v["storage"] == json!(true)))
            {
                if !stored.contains(&storage["name"]) {
                    stored.push(storage["name"].clone());
                }
            }
            next["status"]["storedVersions"] = json!(stored);
        } else if next["status"]["acceptedNames"].is_null() {
            next["status"]["acceptedNames"] = json!({"plural": "", "kind": ""});
        }
        Ok(next)
    })
    .await
    .map(|_| ())
}

/// A CRD being deleted: stop creates, delete the objects, then release the CRD.
async fn terminate(
    api: &Api,
    crds: &RegistryStore,
    name: &str,
    crd: &Value,
) -> Result<(), ApiError> {
    let registered = api.served().custom.get(name).cloned().unwrap_or_default();
    for d in &registered {
        if let Some(c) = super::custom_of(d) {
            c.set_terminating();
        }
    }
    let group = crd["spec"]["group"].as_str().unwrap_or_default();
    let plural = crd["spec"]["names"]["plural"].as_str().unwrap_or_default();
    let remaining = if group.is_empty() || plural.is_empty() {
        0
    } else {
        delete_objects(
            api,
            registered.first(),
            &format!("/registry/{group}/{plural}/"),
        )
        .await?
    };
    if remaining > 0 {
        let message = format!("CustomResource deletion is in progress: {remaining} objects remain");
        set_status(
            crds,
            name,
            &[condition(
                "Terminating",
                "True",
                "InstanceDeletionInProgress",
                &message,
            )],
            false,
        )
        .await?;
        return Ok(());
    }
    // Out of discovery first: once the CRD is gone, so is its resource. Its watch caches
    // first catch up with the deletions, so watchers see every object go before the watch
    // ends.
    if !registered.is_empty() {
        let now = api.store.current_revision().await.map_err(store_error)?;
        for d in &registered {
            if let Ok(cache) = api.registry_store(d).map(|s| s.cache().clone()) {
                if api.store.watch_progress_is_prompt() {
                    cache.wait_for(now, Duration::from_secs(3)).await?;
                } else {
                    // Every object is deleted by now: wait for the cache to see them go.
                    cache.wait_until_empty(Duration::from_secs(3)).await;
                }
            }
        }
        api.set_custom(name, Vec::new());
    }
    let updated = crds
        .update(None, name, Scope::Full, false, &|current| {
            let mut next = current.clone();
            let m = meta::metadata(&mut next);
            m.remove("resourceVersion");
            if let Some(list) = m.get_mut("finalizers").and_then(Value::as_array_mut) {
                list.retain(|f| f != CLEANUP_FINALIZER);
            }
            Ok(next)
        })
        .await?;
    if matches!(updated, Updated::Deleted(_)) {
        tracing::info!(
            crd = name,
            "CustomResourceDefinition and its objects deleted"
        );
    }
    Ok(())
}

/// Deletes every object under `prefix`: at once when it has no finalizers, else by marking
/// it. Returns how many are left.
async fn delete_objects(
    api: &Api,
    def: Option<&Arc<ResourceDef>>,
    prefix: &str,
) -> Result<usize, ApiError> {
    let page = api
        .store
        .list(ListRequest::prefix(Bytes::from(prefix.to_owned())))
        .await
        .map_err(store_error)?;
    let mut remaining = 0;
    for kv in &page.kvs {
        let object: Value = serde_json::from_slice(&kv.value).unwrap_or(Value::Null);
        if meta::finalizers(&object).is_empty() {
            match api
                .store
                .delete(kv.key.clone(), Some(kv.mod_revision))
                .await
            {
                Ok(_) | Err(StoreError::NotFound) => {}
                Err(StoreError::Conflict { .. }) => remaining += 1,
                Err(e) => return Err(store_error(e)),
            }
            continue;
        }
        remaining += 1;
        let (Some(def), false) = (def, !object["metadata"]["deletionTimestamp"].is_null()) else {
            continue;
        };
        let namespace = object["metadata"]["namespace"].as_str();
        let object_name = object["metadata"]["name"].as_str().unwrap_or_default();
        let Ok(store) = api.registry_store(def) else {
            continue;
        };
        let marked = store
            .update(namespace, object_name, Scope::Full, false, &|current| {
                let mut next = current.clone();
                let m = meta::metadata(&mut next);
                m.remove("resourceVersion");
                if m.get("deletionTimestamp").is_none_or(Value::is_null) {
                    m.insert("deletionTimestamp".into(), json!(meta::now()));
                    m.insert("deletionGracePeriodSeconds".into(), json!(0));
                }
                Ok(next)
            })
            .await;
        if let Err(e) = marked {
            if e.reason != setpoint_core::Reason::NotFound {
                return Err(e);
            }
        }
    }
    Ok(remaining)
}

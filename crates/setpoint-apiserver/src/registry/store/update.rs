//! Update: the read-modify-write loop every PUT, PATCH, subresource write and server-made
//! change goes through ([`RegistryStore::update`]): read the object, compute its new state,
//! keep what the client may not change, apply the kind's `prepare_update`, bump `generation`
//! on a spec change, validate, then write conditionally on the revision read — retried on
//! conflict unless the client named a `resourceVersion`, which then must match (else 409).
//! An update that removes the last finalizer of an object being deleted deletes it.
//! Admission: mutation after `prepare_update`, validation after validation (not for `Full`,
//! the server's own changes).

use bytes::Bytes;
use serde_json::{json, Value};
use setpoint_core::{ApiError, Cause, Revision};
use setpoint_store::StoreError;

use super::{store_error, Operation, RegistryStore};
use crate::registry::meta::{self, meta_str};

/// What an update may touch.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scope {
    /// The main resource: status changes are ignored where the kind has a status subresource.
    Main,
    /// The status subresource: only status changes.
    Status,
    /// A change the server makes itself (marking for deletion): nothing is masked.
    Full,
}

/// The outcome of an update.
pub(crate) enum Updated {
    /// The object as stored now.
    Stored(Value),
    /// The update removed the last finalizer of an object being deleted: it is gone.
    Deleted(Value),
}

impl RegistryStore {
    /// Reads the object, computes its new state with `change`, and writes it conditionally;
    /// retries on a conflict unless the new state carries the client's own resource version.
    pub(crate) async fn update(
        &self,
        namespace: Option<&str>,
        name: &str,
        scope: Scope,
        dry_run: bool,
        change: &(dyn Fn(&Value) -> Result<Value, ApiError> + Sync),
    ) -> Result<Updated, ApiError> {
        let def = &*self.def;
        let key = def.key(namespace, name);
        let gr = def.group_resource();
        loop {
            let kv = self
                .store
                .get(key.as_bytes())
                .await
                .map_err(store_error)?
                .ok_or_else(|| ApiError::not_found(&gr, name))?;
            let stored: Value = serde_json::from_slice(&kv.value)
                .map_err(|e| ApiError::internal(format!("stored object does not decode: {e}")))?;
            let mut current = self.served(stored).await?;
            let rv = kv.mod_revision.to_string();
            meta::metadata(&mut current).insert("resourceVersion".into(), json!(rv));
            let mut new = change(&current)?;
            let precondition = meta_str(&new, "resourceVersion")
                .filter(|s| !s.is_empty())
                .map(str::to_owned);
            if let Some(p) = &precondition {
                if p.parse::<Revision>().is_err() {
                    return Err(ApiError::bad_request(format!(
                        "invalid resource version {p:?}"
                    )));
                }
                if *p != rv {
                    return Err(ApiError::modified(&gr, name));
                }
            }
            // An update or patch may not move an object: kube-apiserver refuses a namespace that
            // differs from the request's (an empty one defaults to it; cluster-scoped objects
            // have theirs cleared) before it checks the name.
            if let Some(ns) = namespace {
                if meta_str(&new, "namespace").is_some_and(|n| !n.is_empty() && n != ns) {
                    return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
                }
            }
            if meta_str(&new, "name").is_some_and(|n| n != name) {
                return Err(ApiError::bad_request(format!(
                    "the name of the object ({}) does not match the name on the URL ({name})",
                    meta_str(&new, "name").unwrap_or_default()
                )));
            }
            meta::keep_system_fields(&mut new, &current, scope == Scope::Full);

            {
                let meta = meta::metadata(&mut new);
                meta.insert("name".into(), json!(name));
                match namespace {
                    Some(ns) => meta.insert("namespace".into(), json!(ns)),
                    None => meta.remove("namespace"),
                };
            }
            match scope {
                Scope::Main if def.strategy.has_status() => {
                    new["status"] = current["status"].clone()
                }
                Scope::Main | Scope::Full => {}
                Scope::Status => {
                    let status = new["status"].clone();
                    let managed = new["metadata"]["managedFields"].clone();
                    let labels = new["metadata"]["labels"].clone();
                    let annotations = new["metadata"]["annotations"].clone();
                    new = current.clone();
                    new["status"] = status;
                    let meta = meta::metadata(&mut new);
                    meta.remove("resourceVersion");
                    for (field, value) in [
                        ("labels", labels),
                        ("annotations", annotations),
                        ("managedFields", managed),
                    ] {
                        if value.is_null() {
                            meta.remove(field);
                        } else {
                            meta.insert(field.into(), value);
                        }
                    }
                }
            }
            if let Some(map) = new.as_object_mut() {
                if map.get("status").is_some_and(Value::is_null) {
                    map.remove("status");
                }
            }
            def.strategy.prepare_update(&mut new, &current);
            // Admission (not for the server's own changes): mutating webhooks see the defaulted
            // object; what they change is prepared again.
            if scope != Scope::Full
                && self
                    .admit_mutation(Operation::Update, Some(&mut new), Some(&current), dry_run)
                    .await?
            {
                def.strategy.prepare_update(&mut new, &current);
            }
            if scope == Scope::Main {
                def.strategy.before_update(self, &mut new, &current).await?;
            }
            if def.strategy.generation_changed(&new, &current) {
                let g = current["metadata"]["generation"].as_i64().unwrap_or(1);
                meta::metadata(&mut new).insert("generation".into(), json!(g + 1));
            }
            // A change the server makes itself (binding a pod, marking for deletion) is trusted
            // past the rules that stop clients changing immutable fields: `pods/binding` sets
            // `spec.nodeName`, which no client update may.
            let old = (scope != Scope::Full).then_some(&current);
            let mut causes = def.strategy.validate(&new, old).await;
            let old_finalizers = meta::finalizers(&current);
            let new_finalizers = meta::finalizers(&new);
            let deleting = !current["metadata"]["deletionTimestamp"].is_null();
            if deleting && new_finalizers.iter().any(|f| !old_finalizers.contains(f)) {
                causes.push(Cause::forbidden(
                    "metadata.finalizers",
                    "no new finalizers can be added if the object is being deleted",
                ));
            }
            if !causes.is_empty() {
                return Err(def.invalid(name, causes));
            }
            if scope != Scope::Full {
                self.admit_validation(Operation::Update, Some(&new), Some(&current), dry_run)
                    .await?;
            }
            let mut unchanged = current.clone();
            meta::metadata(&mut unchanged).remove("resourceVersion");
            if new == unchanged {
                return Ok(Updated::Stored(current));
            }
            if dry_run {
                // Nothing was written, so the object is still at the version read; kube-apiserver
                // answers a dry-run update with it (`kubectl diff` compares it to the live one).
                meta::metadata(&mut new).insert("resourceVersion".into(), json!(rv));
                return Ok(Updated::Stored(new));
            }
            // A namespace is held by its `spec.finalizers` too (the namespace controller's
            // `kubernetes`, removed through `finalize`), as kube-apiserver's namespace storage does.
            let held_by_spec = def.strategy.held(&new);
            if deleting && new_finalizers.is_empty() && !held_by_spec {
                match self
                    .store
                    .delete(Bytes::from(key.clone()), Some(kv.mod_revision))
                    .await
                {
                    Ok(event) => {
                        meta::metadata(&mut new).insert(
                            "resourceVersion".into(),
                            json!(event.revision().to_string()),
                        );
                        return Ok(Updated::Deleted(new));
                    }
                    Err(StoreError::Conflict { .. }) if precondition.is_none() => continue,
                    Err(e) => return Err(self.error_for(name, e)),
                }
            }
            let mut stored = self.stored(new.clone()).await?;
            let bytes = super::convert::storage_bytes(&mut stored);
            match self
                .store
                .update(Bytes::from(key.clone()), bytes, Some(kv.mod_revision))
                .await
            {
                Ok(stored) => {
                    meta::metadata(&mut new).insert(
                        "resourceVersion".into(),
                        json!(stored.mod_revision.to_string()),
                    );
                    return Ok(Updated::Stored(new));
                }
                Err(StoreError::Conflict { .. }) if precondition.is_none() => continue,
                Err(e) => return Err(self.error_for(name, e)),
            }
        }
    }
}

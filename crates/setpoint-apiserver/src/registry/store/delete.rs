//! Delete, with kube-apiserver's two-phase deletion: an object with finalizers (or deleted
//! with `Foreground`/`Orphan` propagation, which add theirs) is only marked with
//! `deletionTimestamp`; a scheduled pod is deleted gracefully (marked, for its node to stop
//! it); a namespace becomes `Terminating`. Everything else goes at once. Preconditions (uid,
//! resource version) are checked against the object read; a dry run stops before the write.

use bytes::Bytes;
use serde_json::{json, Value};
use setpoint_core::{ApiError, Revision};
use setpoint_store::StoreError;

use super::delete_options::DeleteOptions;
use super::{ListOptions, Operation, RegistryStore, Scope, Updated};
use crate::registry::meta::{self, meta_str};

/// What a delete did.
pub(crate) enum Deleted {
    /// The object is gone (or, in a dry run, would be): as it was last.
    Gone(Value),
    /// The object was marked for deletion (finalizers or a grace period hold it): as stored.
    Marked(Value),
}

impl RegistryStore {
    /// Deletes the object `name` of `namespace` with `options`.
    pub(crate) async fn delete(
        &self,
        namespace: Option<&str>,
        name: &str,
        options: &DeleteOptions,
    ) -> Result<Deleted, ApiError> {
        let current = self.get(namespace, name).await?;
        self.delete_object(current, options).await
    }

    /// Removes the object `name` of `namespace` from the store, whatever holds it, if it is
    /// still at `revision` (any revision: `None`); an object already gone is no error. For a
    /// namespace whose finalizers are all done.
    pub(crate) async fn remove(
        &self,
        namespace: Option<&str>,
        name: &str,
        revision: Option<Revision>,
    ) -> Result<(), ApiError> {
        let key = self.def.key(namespace, name);
        match self.store.delete(Bytes::from(key), revision).await {
            Ok(_) | Err(StoreError::NotFound) => Ok(()),
            Err(e) => Err(self.error_for(name, e)),
        }
    }

    /// Deletes `current` (as just read) with `options`.
    async fn delete_object(
        &self,
        current: Value,
        options: &DeleteOptions,
    ) -> Result<Deleted, ApiError> {
        let def = &*self.def;
        let dry_run = options.dry_run;
        let name = meta_str(&current, "name").unwrap_or_default().to_owned();
        let namespace = meta_str(&current, "namespace")
            .filter(|_| def.namespaced)
            .map(str::to_owned);
        let namespace = namespace.as_deref();
        let uid = meta_str(&current, "uid").unwrap_or_default().to_owned();
        let rv = meta_str(&current, "resourceVersion")
            .unwrap_or_default()
            .to_owned();
        if options.precondition_uid.as_ref().is_some_and(|u| *u != uid) {
            return Err(ApiError::conflict(
                &def.group_resource(),
                &name,
                &format!(
                    "Precondition failed: UID in precondition: {}, UID in object meta: {uid}",
                    options.precondition_uid.as_deref().unwrap_or_default()
                ),
            ));
        }
        if options.precondition_rv.as_ref().is_some_and(|r| *r != rv) {
            return Err(ApiError::conflict(
            &def.group_resource(),
            &name,
            &format!(
                "Precondition failed: ResourceVersion in precondition: {}, ResourceVersion in object meta: {rv}",
                options.precondition_rv.as_deref().unwrap_or_default()
            ),
        ));
        }

        // Admission sees the object as it is before anything is decided (the internal update
        // that marks it is not admitted again).
        self.admit_mutation(Operation::Delete, None, Some(&current), dry_run)
            .await?;
        self.admit_validation(Operation::Delete, None, Some(&current), dry_run)
            .await?;

        let strategy = &def.strategy;
        let add_finalizer = strategy.deletion_finalizer(options.propagation);
        let graceful = strategy
            .graceful_deletion_seconds(&current, options.grace_period)
            .is_some();
        let has_finalizers = !meta::finalizers(&current).is_empty() || strategy.held(&current);
        let mark = has_finalizers || add_finalizer.is_some() || graceful;

        if !mark {
            if dry_run {
                return Ok(Deleted::Gone(current));
            }
            let expected = rv.parse::<Revision>().ok();
            return match self
                .store
                .delete(Bytes::from(def.key(namespace, &name)), expected)
                .await
            {
                Ok(event) => {
                    let mut gone = current;
                    meta::metadata(&mut gone).insert(
                        "resourceVersion".into(),
                        json!(event.revision().to_string()),
                    );
                    Ok(Deleted::Gone(gone))
                }
                Err(StoreError::Conflict { .. }) => {
                    // Changed since we read it: decide again on the new state.
                    let fresh = self.get(namespace, &name).await?;
                    Box::pin(self.delete_object(fresh, options)).await
                }
                Err(e) => Err(self.error_for(&name, e)),
            };
        }

        let grace = options.grace_period;
        let updated = self
            .update(namespace, &name, Scope::Full, dry_run, &|current| {
                let mut next = current.clone();
                let already = !current["metadata"]["deletionTimestamp"].is_null();
                {
                    let meta = meta::metadata(&mut next);
                    meta.remove("resourceVersion");
                    if !already {
                        let seconds = if graceful {
                            strategy
                                .graceful_deletion_seconds(current, grace)
                                .unwrap_or(0)
                        } else {
                            0
                        };
                        meta.insert(
                            "deletionTimestamp".into(),
                            json!(deletion_timestamp(chrono::Utc::now(), seconds)),
                        );
                        meta.insert("deletionGracePeriodSeconds".into(), json!(seconds));
                    }
                    if let Some(f) = add_finalizer {
                        let list = meta.entry("finalizers").or_insert_with(|| json!([]));
                        if let Some(arr) = list.as_array_mut() {
                            if !arr.iter().any(|x| x == f) && !already {
                                // One propagation policy at a time: finalizer validation refuses
                                // orphan with foregroundDeletion, and kube-apiserver swaps them.
                                let other = match f {
                                    "orphan" => Some("foregroundDeletion"),
                                    "foregroundDeletion" => Some("orphan"),
                                    _ => None,
                                };
                                arr.retain(|x| other.is_none_or(|o| x != o));
                                arr.push(json!(f));
                            }
                        }
                    }
                }
                strategy.mark_deleting(&mut next);
                Ok(next)
            })
            .await?;
        Ok(match updated {
            Updated::Deleted(o) => Deleted::Gone(o),
            Updated::Stored(o) => Deleted::Marked(o),
        })
    }

    /// Deletes every object of `namespace` that `options` select (read consistently); returns
    /// them as they were, and the revision they were read at.
    pub(crate) async fn delete_collection(
        &self,
        namespace: Option<&str>,
        options: &ListOptions,
        delete_options: &DeleteOptions,
    ) -> Result<(Vec<Value>, Revision), ApiError> {
        let (objects, revision) = self.consistent().await?;
        let prefix = self.def.collection_prefix(namespace);
        let mut deleted = Vec::new();
        for (key, o) in objects.iter() {
            if !key.starts_with(prefix.as_bytes()) || !options.filter.matches(o) {
                continue;
            }
            let Ok(current) = serde_json::from_slice::<Value>(&o.json.bytes()) else {
                continue;
            };
            match self.delete_object(current.clone(), delete_options).await {
                Ok(_) => deleted.push(current),
                Err(e) if e.reason == setpoint_core::Reason::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        Ok((deleted, revision))
    }
}

/// The latest deletion time written: Go clients cannot carry a year past 9999 in a
/// `metav1.Time`, and Rust ones (`jiff`, under k8s-openapi) nothing past this instant.
const LATEST_DELETION: &str = "9999-12-30T22:00:00Z";

/// When an object deleted at `now` with a grace period of `seconds` is due to go, as an
/// RFC 3339 time. Grace periods are client input of any size: the time saturates at
/// [`LATEST_DELETION`].
fn deletion_timestamp(now: chrono::DateTime<chrono::Utc>, seconds: i64) -> String {
    let latest = chrono::DateTime::parse_from_rfc3339(LATEST_DELETION)
        .map(|t| t.with_timezone(&chrono::Utc))
        .unwrap_or(chrono::DateTime::<chrono::Utc>::MAX_UTC);
    let at = chrono::TimeDelta::try_seconds(seconds)
        .and_then(|d| now.checked_add_signed(d))
        .map_or(latest, |at| at.min(latest));
    at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deletion_timestamps_should_saturate_instead_of_panicking() {
        // Regression (issue 14.2): a huge grace period panicked in `Duration::seconds`.
        let now = chrono::DateTime::parse_from_rfc3339("2026-01-02T03:04:05Z")
            .unwrap()
            .with_timezone(&chrono::Utc);
        assert_eq!(deletion_timestamp(now, 30), "2026-01-02T03:04:35Z");
        assert_eq!(deletion_timestamp(now, 0), "2026-01-02T03:04:05Z");
        for huge in [i64::MAX, i64::MAX / 1000, 400_000_000_000] {
            assert_eq!(deletion_timestamp(now, huge), LATEST_DELETION);
            // Clients in Rust read it back.
            let parsed: k8s_openapi::jiff::Timestamp =
                deletion_timestamp(now, huge).parse().unwrap();
            assert_eq!(parsed.to_string(), LATEST_DELETION);
        }
    }
}

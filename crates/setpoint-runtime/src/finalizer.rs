//! Finalizers: make the API server keep an object until this controller has cleaned up after it.
//!
//! [`finalizer`] wraps a reconcile: it adds the finalizer to objects that lack it, runs
//! [`FinalizerEvent::Apply`] on live objects and [`FinalizerEvent::Cleanup`] on objects being
//! deleted, and removes the finalizer only after a cleanup succeeded — so a failed cleanup keeps
//! the object (and is retried), and a successful one lets the deletion finish.
//! [`add_finalizer`] and [`remove_finalizer`] do the two writes on their own.
//!
//! Every write is a JSON patch guarded by a `test` operation on the finalizer list it was
//! computed from, so a concurrent writer cannot be overwritten: if the list changed in between,
//! the server rejects the patch (`422`) and nothing is written.

use std::convert::Infallible;
use std::fmt::{Debug, Display};
use std::future::Future;
use std::sync::Arc;

use kube::api::{Patch, PatchParams};
use kube::Resource;
use serde::de::DeserializeOwned;
use serde_json::{json, Value};

use crate::Action;

/// Attempts [`add_finalizer`] and [`remove_finalizer`] make when the object keeps changing under
/// them.
const ATTEMPTS: u32 = 5;

/// What the reconcile given to [`finalizer`] is asked to do.
#[derive(Debug)]
pub enum FinalizerEvent<K> {
    /// The object is live and carries the finalizer: reconcile it as usual.
    Apply(Arc<K>),
    /// The object is being deleted and still carries the finalizer: release whatever it holds
    /// outside the API. Return an error to keep the object (the cleanup is retried).
    Cleanup(Arc<K>),
}

/// What [`finalizer`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Finalized<R> {
    /// The object lacked the finalizer and it was added; nothing else ran. The write changes the
    /// object, which triggers the next reconcile.
    FinalizerAdded,
    /// [`FinalizerEvent::Apply`] ran and returned this.
    Applied(R),
    /// [`FinalizerEvent::Cleanup`] ran, returned this, and the finalizer was removed.
    CleanedUp(R),
    /// The object is being deleted and no longer carries the finalizer: nothing ran.
    AlreadyFinalized,
}

impl Finalized<Action> {
    /// The [`Action`] to hand back to the controller: the reconcile's own, or
    /// [`Action::AwaitChange`] where none ran (the finalizer's write, or the deletion, will
    /// trigger what comes next).
    pub fn action(self) -> Action {
        match self {
            Finalized::Applied(action) | Finalized::CleanedUp(action) => action,
            Finalized::FinalizerAdded | Finalized::AlreadyFinalized => Action::AwaitChange,
        }
    }
}

/// Why [`finalizer`], [`add_finalizer`] or [`remove_finalizer`] failed. `E` is the reconcile's
/// error (none for the standalone functions).
#[derive(Debug, thiserror::Error)]
pub enum FinalizerError<E = Infallible> {
    /// [`FinalizerEvent::Apply`] failed.
    #[error("apply failed: {0}")]
    ApplyFailed(E),
    /// [`FinalizerEvent::Cleanup`] failed; the finalizer was kept.
    #[error("cleanup failed: {0}")]
    CleanupFailed(E),
    /// The finalizer could not be added. A `422` means the object's finalizers changed since it
    /// was read: reconcile again with the fresh object.
    #[error("adding finalizer {finalizer} to {name}")]
    Add {
        /// The object's name.
        name: String,
        /// The finalizer.
        finalizer: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// The finalizer could not be removed (a `422`: the finalizers changed since read).
    #[error("removing finalizer {finalizer} from {name}")]
    Remove {
        /// The object's name.
        name: String,
        /// The finalizer.
        finalizer: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// The object could not be read.
    #[error("reading {name}")]
    Get {
        /// The object's name.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// The object given has no name.
    #[error("the object has no name")]
    UnnamedObject,
}

/// Runs `reconcile` for `obj` under finalizer `finalizer_name` (a qualified name such as
/// `example.com/cleanup`). `api` must address `obj`'s namespace (or be cluster-wide for a
/// cluster-scoped kind).
///
/// | object | finalizer present | result |
/// |---|---|---|
/// | live | no | finalizer added, [`Finalized::FinalizerAdded`] |
/// | live | yes | `Apply`, [`Finalized::Applied`] |
/// | being deleted | yes | `Cleanup`; on success the finalizer is removed, [`Finalized::CleanedUp`] |
/// | being deleted | no | [`Finalized::AlreadyFinalized`] |
///
/// The finalizer writes are guarded by the finalizer list of `obj`: if `obj` is stale the write
/// fails with [`FinalizerError::Add`] / [`FinalizerError::Remove`] and should be retried
/// with a fresher object (a controller retries with backoff anyway). Not cancel-safe: a
/// cancelled call may have run part of the reconcile.
///
/// ```no_run
/// use std::sync::Arc;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use setpoint_runtime::{finalizer, Action, FinalizerEvent};
/// # async fn example(client: setpoint_runtime::Client, obj: Arc<ConfigMap>) {
/// let api = client.namespaced_api::<ConfigMap>("default");
/// let result = finalizer(&api, "example.com/cleanup", obj, |event| async move {
///     match event {
///         FinalizerEvent::Apply(_cm) => Ok::<_, std::io::Error>(Action::await_change()),
///         FinalizerEvent::Cleanup(_cm) => Ok(Action::await_change()),
///     }
/// })
/// .await;
/// let action = result.map(|done| done.action());
/// # let _ = action; }
/// ```
pub async fn finalizer<K, F, Fut, R, E>(
    api: &kube::Api<K>,
    finalizer_name: &str,
    obj: Arc<K>,
    reconcile: F,
) -> Result<Finalized<R>, FinalizerError<E>>
where
    K: Resource + Clone + DeserializeOwned + Debug,
    F: FnOnce(FinalizerEvent<K>) -> Fut,
    Fut: Future<Output = Result<R, E>>,
    E: Display,
{
    let meta = obj.meta();
    let name = meta.name.clone().ok_or(FinalizerError::UnnamedObject)?;
    let finalizers = meta.finalizers.as_deref();
    let has_ours = finalizers
        .unwrap_or_default()
        .iter()
        .any(|f| f == finalizer_name);
    match (meta.deletion_timestamp.is_some(), has_ours) {
        (false, false) => {
            let patch = add_patch(finalizers, finalizer_name);
            json_patch(api, &name, patch)
                .await
                .map_err(|source| FinalizerError::Add {
                    name,
                    finalizer: finalizer_name.to_owned(),
                    source,
                })?;
            Ok(Finalized::FinalizerAdded)
        }
        (false, true) => reconcile(FinalizerEvent::Apply(obj))
            .await
            .map(Finalized::Applied)
            .map_err(FinalizerError::ApplyFailed),
        (true, true) => {
            let patch = remove_patch(finalizers.unwrap_or_default(), finalizer_name);
            let done = reconcile(FinalizerEvent::Cleanup(obj))
                .await
                .map_err(FinalizerError::CleanupFailed)?;
            if let Some(patch) = patch {
                json_patch(api, &name, patch)
                    .await
                    .map_err(|source| FinalizerError::Remove {
                        name,
                        finalizer: finalizer_name.to_owned(),
                        source,
                    })?;
            }
            Ok(Finalized::CleanedUp(done))
        }
        (true, false) => Ok(Finalized::AlreadyFinalized),
    }
}

/// Adds `finalizer` to object `name` unless it is there already, reading the object afresh and
/// retrying (a few times) when the finalizers change between read and write. Returns the object
/// as last read or written. Cancel-safe in effect: a cancelled call added the finalizer or
/// did not, and calling again finishes the job.
pub async fn add_finalizer<K>(
    api: &kube::Api<K>,
    name: &str,
    finalizer: &str,
) -> Result<K, FinalizerError>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    let mut attempt = 1;
    loop {
        let current = api.get(name).await.map_err(|source| FinalizerError::Get {
            name: name.to_owned(),
            source,
        })?;
        let finalizers = current.meta().finalizers.as_deref();
        if finalizers
            .unwrap_or_default()
            .iter()
            .any(|f| f == finalizer)
        {
            return Ok(current);
        }
        match json_patch(api, name, add_patch(finalizers, finalizer)).await {
            Ok(written) => return Ok(written),
            Err(source) if attempt < ATTEMPTS && is_stale(&source) => attempt += 1,
            Err(source) => {
                return Err(FinalizerError::Add {
                    name: name.to_owned(),
                    finalizer: finalizer.to_owned(),
                    source,
                })
            }
        }
    }
}

/// Removes `finalizer` from object `name` if it is there, reading the object afresh and retrying
/// (a few times) when the finalizers change between read and write. Returns the object as last
/// read or written, or `None` if it is gone (removing its last finalizer may delete it).
/// Cancel-safe in effect, like [`add_finalizer`].
pub async fn remove_finalizer<K>(
    api: &kube::Api<K>,
    name: &str,
    finalizer: &str,
) -> Result<Option<K>, FinalizerError>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    let mut attempt = 1;
    loop {
        let Some(current) = api
            .get_opt(name)
            .await
            .map_err(|source| FinalizerError::Get {
                name: name.to_owned(),
                source,
            })?
        else {
            return Ok(None);
        };
        let finalizers = current.meta().finalizers.as_deref().unwrap_or_default();
        let Some(patch) = remove_patch(finalizers, finalizer) else {
            return Ok(Some(current));
        };
        match json_patch(api, name, patch).await {
            Ok(written) => return Ok(Some(written)),
            Err(kube::Error::Api(status)) if status.code == 404 => return Ok(None),
            Err(source) if attempt < ATTEMPTS && is_stale(&source) => attempt += 1,
            Err(source) => {
                return Err(FinalizerError::Remove {
                    name: name.to_owned(),
                    finalizer: finalizer.to_owned(),
                    source,
                })
            }
        }
    }
}

/// A patch adding `finalizer` to a list currently `current` (`None`: no list at all), that
/// applies only if the list is still exactly `current`.
fn add_patch(current: Option<&[String]>, finalizer: &str) -> Value {
    match current {
        // A test of an absent member against null passes (as in kube-apiserver).
        None => json!([
            {"op": "test", "path": "/metadata/finalizers", "value": null},
            {"op": "add", "path": "/metadata/finalizers", "value": [finalizer]},
        ]),
        Some(list) => json!([
            {"op": "test", "path": "/metadata/finalizers", "value": list},
            {"op": "add", "path": "/metadata/finalizers/-", "value": finalizer},
        ]),
    }
}

/// A patch removing every occurrence of `finalizer` from `current`, each removal guarded by a
/// test that the entry at that index is still `finalizer`; `None` if there is none.
fn remove_patch(current: &[String], finalizer: &str) -> Option<Value> {
    let ops: Vec<Value> = current
        .iter()
        .enumerate()
        .rev()
        .filter(|(_, f)| *f == finalizer)
        .flat_map(|(i, _)| {
            let path = format!("/metadata/finalizers/{i}");
            [
                json!({"op": "test", "path": path, "value": finalizer}),
                json!({"op": "remove", "path": path}),
            ]
        })
        .collect();
    (!ops.is_empty()).then_some(Value::Array(ops))
}

async fn json_patch<K>(api: &kube::Api<K>, name: &str, patch: Value) -> Result<K, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    let patch = Patch::<()>::Json(serde_json::from_value(patch).map_err(kube::Error::SerdeError)?);
    api.patch(name, &PatchParams::default(), &patch).await
}

/// Whether `error` says the object changed under a guarded write (a failed `test`: `422`, or a
/// `409 Conflict`).
fn is_stale(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 422 || status.code == 409)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(finalizers: Option<Vec<&str>>) -> Value {
        match finalizers {
            None => json!({"metadata": {"name": "x"}}),
            Some(list) => json!({"metadata": {"name": "x", "finalizers": list}}),
        }
    }

    fn strings(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn add_patch_should_create_the_list_when_absent() {
        let patched = setpoint_core::json_patch(meta(None), add_patch(None, "a/f"))
            .expect("applies to an object without finalizers");
        assert_eq!(patched, meta(Some(vec!["a/f"])));
    }

    #[test]
    fn add_patch_should_append_when_the_list_is_unchanged() {
        let list = strings(&["x/other"]);
        let patched =
            setpoint_core::json_patch(meta(Some(vec!["x/other"])), add_patch(Some(&list), "a/f"))
                .expect("applies");
        assert_eq!(patched, meta(Some(vec!["x/other", "a/f"])));
        let empty: Vec<String> = Vec::new();
        let patched = setpoint_core::json_patch(meta(Some(vec![])), add_patch(Some(&empty), "a/f"))
            .expect("applies to an empty list");
        assert_eq!(patched, meta(Some(vec!["a/f"])));
    }

    #[test]
    fn add_patch_should_fail_when_the_list_changed_since_read() {
        let read = strings(&["x/other"]);
        for now in [meta(None), meta(Some(vec!["x/other", "y/new"]))] {
            assert!(setpoint_core::json_patch(now, add_patch(Some(&read), "a/f")).is_err());
        }
        assert!(
            setpoint_core::json_patch(meta(Some(vec!["y/new"])), add_patch(None, "a/f")).is_err()
        );
    }

    #[test]
    fn remove_patch_should_remove_every_occurrence_and_only_at_the_read_positions() {
        let read = strings(&["a/f", "x/other", "a/f"]);
        let patch = remove_patch(&read, "a/f").expect("present");
        let patched =
            setpoint_core::json_patch(meta(Some(vec!["a/f", "x/other", "a/f"])), patch.clone())
                .expect("applies");
        assert_eq!(patched, meta(Some(vec!["x/other"])));
        // Someone reordered the list in between: nothing is removed.
        assert!(
            setpoint_core::json_patch(meta(Some(vec!["x/other", "a/f", "a/f"])), patch).is_err()
        );
        assert_eq!(remove_patch(&strings(&["x/other"]), "a/f"), None);
    }

    #[test]
    fn finalized_should_map_to_the_controller_action() {
        let requeue = Action::requeue(std::time::Duration::from_secs(5));
        assert_eq!(Finalized::Applied(requeue).action(), requeue);
        assert_eq!(Finalized::CleanedUp(requeue).action(), requeue);
        assert_eq!(Finalized::FinalizerAdded.action(), Action::AwaitChange);
        assert_eq!(Finalized::AlreadyFinalized.action(), Action::AwaitChange);
    }
}

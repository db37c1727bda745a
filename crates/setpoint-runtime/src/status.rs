//! Writing an object's status through its `status` subresource, safely beside other writers.
//!
//! [`update_status`] reads the latest object, applies a mutation to it and replaces the status
//! with the `resourceVersion` it read as precondition; if someone else wrote in between (`409
//! Conflict`) it reads again and re-applies the mutation — so the mutation must be a function of
//! the object it is given, not of a copy the caller holds. It writes nothing when the mutation
//! changes nothing, so a reconcile that recomputes an unchanged status costs one read and no
//! write (and triggers no watch event).

use std::fmt::Debug;

use kube::api::PostParams;
use kube::Resource;
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::time::{sleep, Duration};

/// How many times, and how patiently, [`update_status_with`] retries after conflicts. The default
/// is client-go's `retry.DefaultRetry`: 5 attempts, 10 ms apart, with up to 10 % jitter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConflictRetry {
    /// Attempts in all, including the first (at least one is made).
    pub attempts: u32,
    /// Wait before each retry.
    pub backoff: Duration,
}

impl Default for ConflictRetry {
    fn default() -> Self {
        ConflictRetry {
            attempts: 5,
            backoff: Duration::from_millis(10),
        }
    }
}

/// What [`update_status`] did.
#[derive(Clone, Debug, PartialEq)]
pub enum StatusUpdate<K> {
    /// The status was written; the object as the server returned it.
    Updated(K),
    /// The mutation changed nothing, so nothing was written; the object as read.
    Unchanged(K),
}

impl<K> StatusUpdate<K> {
    /// The object, written or not.
    pub fn into_object(self) -> K {
        match self {
            StatusUpdate::Updated(k) | StatusUpdate::Unchanged(k) => k,
        }
    }
}

/// Why a status update failed.
#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    /// The object could not be read.
    #[error("reading {name} for a status update")]
    Get {
        /// The object's name.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// The status could not be written (for a reason other than a conflict).
    #[error("writing the status of {name}")]
    Replace {
        /// The object's name.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Every attempt met a conflicting write.
    #[error("the status of {name} still conflicted after {attempts} attempts")]
    Conflict {
        /// The object's name.
        name: String,
        /// Attempts made.
        attempts: u32,
        /// The last conflict.
        #[source]
        source: kube::Error,
    },
    /// The object could not be serialized to compare it before and after the mutation.
    #[error("comparing {name} before and after the status mutation")]
    Compare {
        /// The object's name.
        name: String,
        /// The serialization error.
        #[source]
        source: serde_json::Error,
    },
}

/// [`update_status_with`] with the default [`ConflictRetry`]. A cancelled call may or may not
/// have written (the status is then what the mutation made of some version of the object).
///
/// ```no_run
/// use k8s_openapi::api::apps::v1::{Deployment, DeploymentStatus};
/// # async fn example(client: setpoint_runtime::Client) -> Result<(), setpoint_runtime::StatusError> {
/// let deployments = client.namespaced_api::<Deployment>("default");
/// setpoint_runtime::update_status(&deployments, "web", |d: &mut Deployment| {
///     let replicas = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
///     d.status.get_or_insert_with(DeploymentStatus::default).replicas = Some(replicas);
/// })
/// .await?;
/// # Ok(()) }
/// ```
pub async fn update_status<K, F>(
    api: &kube::Api<K>,
    name: &str,
    mutate: F,
) -> Result<StatusUpdate<K>, StatusError>
where
    K: Resource + Clone + Serialize + DeserializeOwned + Debug,
    F: FnMut(&mut K),
{
    update_status_with(api, name, ConflictRetry::default(), mutate).await
}

/// Reads object `name`, applies `mutate` to it and, if that changed anything, replaces its
/// status, conditional on the `resourceVersion` read. On `409 Conflict` waits
/// `retry.backoff` (jittered) and starts over from a fresh read, up to `retry.attempts` times.
/// `mutate` sees the whole object but only its status is written (the subresource ignores the
/// rest). A cancelled call may or may not have written.
pub async fn update_status_with<K, F>(
    api: &kube::Api<K>,
    name: &str,
    retry: ConflictRetry,
    mut mutate: F,
) -> Result<StatusUpdate<K>, StatusError>
where
    K: Resource + Clone + Serialize + DeserializeOwned + Debug,
    F: FnMut(&mut K),
{
    let attempts = retry.attempts.max(1);
    let mut attempt = 1;
    loop {
        let current = api.get(name).await.map_err(|source| StatusError::Get {
            name: name.to_owned(),
            source,
        })?;
        let mut changed = current.clone();
        mutate(&mut changed);
        if same(&current, &changed).map_err(|source| StatusError::Compare {
            name: name.to_owned(),
            source,
        })? {
            return Ok(StatusUpdate::Unchanged(current));
        }
        // The precondition is the version read, whatever the mutation did to the metadata.
        changed.meta_mut().resource_version = current.meta().resource_version.clone();
        match api
            .replace_status(name, &PostParams::default(), &changed)
            .await
        {
            Ok(written) => return Ok(StatusUpdate::Updated(written)),
            Err(source) if is_conflict(&source) => {
                if attempt >= attempts {
                    return Err(StatusError::Conflict {
                        name: name.to_owned(),
                        attempts,
                        source,
                    });
                }
                attempt += 1;
                sleep(jittered(retry.backoff)).await;
            }
            Err(source) => {
                return Err(StatusError::Replace {
                    name: name.to_owned(),
                    source,
                })
            }
        }
    }
}

fn same<K: Serialize>(a: &K, b: &K) -> Result<bool, serde_json::Error> {
    Ok(serde_json::to_value(a)? == serde_json::to_value(b)?)
}

/// Whether `error` is the API server's `409 Conflict`.
pub(crate) fn is_conflict(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 409)
}

/// `d` plus up to 10 % (client-go's `DefaultRetry` jitter).
fn jittered(d: Duration) -> Duration {
    use rand::Rng;
    d + d.mul_f64(rand::thread_rng().gen_range(0.0..0.1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;

    #[test]
    fn comparison_should_see_any_field_change_and_nothing_else() {
        let a = ConfigMap {
            data: Some([("k".to_owned(), "v".to_owned())].into()),
            ..Default::default()
        };
        let mut b = a.clone();
        assert!(same(&a, &b).expect("serializable"));
        b.data = Some([("k".to_owned(), "w".to_owned())].into());
        assert!(!same(&a, &b).expect("serializable"));
    }

    #[test]
    fn jitter_should_add_at_most_ten_percent() {
        for _ in 0..100 {
            let d = jittered(Duration::from_millis(100));
            assert!(d >= Duration::from_millis(100) && d <= Duration::from_millis(110));
        }
    }
}

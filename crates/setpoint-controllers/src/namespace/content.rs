//! Removing one resource's objects from a terminating namespace, and counting what is left.
//!
//! Order, as kube-controller-manager's namespace deleter: estimate how long pods may take to
//! stop (the longest `terminationGracePeriodSeconds` of the non-terminal pods), delete the
//! whole collection (or, where the server does not offer that, list and delete each object),
//! all with `Background` propagation, then list again. Objects still there are expected while
//! pods terminate or finalizers are pending — that yields an estimate of how long to wait —
//! and an error otherwise (something should have gone and did not). A resource the server
//! stopped serving meanwhile (404) or does not allow the verb for (405) counts as empty.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, ListParams};
use setpoint_runtime::Client;

use super::discovery::{Deletable, Removal};

/// How long objects held by finalizers may take to go, in seconds. kube-controller-manager
/// uses 15 s (a requeue after 8 s); Setpoint looks again sooner, after 5 s.
const FINALIZER_ESTIMATE_SECONDS: u64 = 8;

/// What is left of one resource after a deletion pass.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(super) struct Cleared {
    /// Seconds the remaining objects may still take to go away; 0 when none are expected to
    /// remain.
    pub(super) estimate_seconds: u64,
    /// Objects still present (0 when unknown: the resource cannot be listed).
    pub(super) remaining: usize,
    /// Objects still present, by each finalizer they carry.
    pub(super) finalizers: BTreeMap<String, usize>,
}

/// Why one resource could not be cleared.
#[derive(Debug, thiserror::Error)]
pub(super) enum ContentError {
    /// The pods could not be listed to estimate their termination.
    #[error("estimating how long the pods take to terminate")]
    Estimate(#[source] kube::Error),
    /// `deletecollection` failed.
    #[error("deleting the collection of {resource}")]
    DeleteCollection {
        /// `resource.group`.
        resource: String,
        /// The API's answer.
        #[source]
        source: kube::Error,
    },
    /// One object could not be deleted.
    #[error("deleting {resource} {name}")]
    Delete {
        /// `resource.group`.
        resource: String,
        /// The object.
        name: String,
        /// The API's answer.
        #[source]
        source: kube::Error,
    },
    /// The objects could not be listed.
    #[error("listing {resource}")]
    List {
        /// `resource.group`.
        resource: String,
        /// The API's answer.
        #[source]
        source: kube::Error,
    },
    /// Objects without finalizers or termination pending are still there after deletion.
    #[error("unexpected items still remain in namespace {namespace} for {resource}")]
    Unexpected {
        /// The namespace.
        namespace: String,
        /// `resource.group`.
        resource: String,
    },
}

impl ContentError {
    /// The error with its causes, for a condition message.
    pub(super) fn render(&self) -> String {
        let mut out = self.to_string();
        let mut source = std::error::Error::source(self);
        while let Some(s) = source {
            out.push_str(": ");
            out.push_str(&s.to_string());
            source = s.source();
        }
        out
    }
}

/// The result of clearing one resource: what is left, and the error if a step failed (what is
/// left is then as far as known).
#[derive(Debug)]
pub(super) struct Outcome {
    /// What is left.
    pub(super) cleared: Cleared,
    /// The step that failed, if one did.
    pub(super) error: Option<ContentError>,
}

impl Outcome {
    fn done(cleared: Cleared) -> Outcome {
        Outcome {
            cleared,
            error: None,
        }
    }

    fn failed(estimate_seconds: u64, error: ContentError) -> Outcome {
        Outcome {
            cleared: Cleared {
                estimate_seconds,
                ..Cleared::default()
            },
            error: Some(error),
        }
    }
}

/// Deletes every object of `target` in `namespace` and reports what is left. Not cancel-safe
/// in the sense that a cancelled call may have deleted some objects — which a later pass
/// simply does not find again.
pub(super) async fn clear(client: &Client, namespace: &str, target: &Deletable) -> Outcome {
    let resource = target.group_resource();
    let estimate = if target.resource.group.is_empty() && target.resource.plural == "pods" {
        match pod_termination_estimate(client, namespace).await {
            Ok(e) => e,
            Err(e) => return Outcome::failed(0, ContentError::Estimate(e)),
        }
    } else {
        0
    };
    let api = client.dynamic_api(&target.resource, Some(namespace));
    let delete = DeleteParams::background();

    let mut each = target.removal == Removal::EachThenList;
    if !each {
        match api.delete_collection(&delete, &ListParams::default()).await {
            Ok(_) => {}
            Err(e) if unsupported(&e) => each = true,
            Err(source) => {
                return Outcome::failed(
                    estimate,
                    ContentError::DeleteCollection { resource, source },
                )
            }
        }
    }
    if each {
        let listed = match api.list_metadata(&ListParams::default()).await {
            Ok(list) => list.items,
            Err(e) if unsupported(&e) => Vec::new(),
            Err(source) => {
                return Outcome::failed(estimate, ContentError::List { resource, source })
            }
        };
        for item in listed {
            let Some(name) = item.metadata.name else {
                continue;
            };
            match api.delete(&name, &delete).await {
                Ok(_) => {}
                Err(e) if unsupported(&e) => {}
                Err(source) => {
                    return Outcome::failed(
                        estimate,
                        ContentError::Delete {
                            resource,
                            name,
                            source,
                        },
                    )
                }
            }
        }
    }
    if target.removal == Removal::CollectionOnly {
        return Outcome::done(Cleared {
            estimate_seconds: estimate,
            ..Cleared::default()
        });
    }

    let left = match api.list_metadata(&ListParams::default()).await {
        Ok(list) => list.items,
        Err(e) if unsupported(&e) => Vec::new(),
        Err(source) => return Outcome::failed(estimate, ContentError::List { resource, source }),
    };
    if left.is_empty() {
        return Outcome::done(Cleared::default());
    }
    let mut finalizers = BTreeMap::new();
    for item in &left {
        for f in item.metadata.finalizers.iter().flatten() {
            *finalizers.entry(f.clone()).or_insert(0) += 1;
        }
    }
    let estimate_seconds = if estimate > 0 {
        estimate
    } else if !finalizers.is_empty() {
        FINALIZER_ESTIMATE_SECONDS
    } else {
        // Nothing should hold these: deleted, yet still here.
        return Outcome {
            cleared: Cleared {
                estimate_seconds: 0,
                remaining: left.len(),
                finalizers,
            },
            error: Some(ContentError::Unexpected {
                namespace: namespace.to_owned(),
                resource,
            }),
        };
    };
    Outcome::done(Cleared {
        estimate_seconds,
        remaining: left.len(),
        finalizers,
    })
}

/// The longest grace period of the namespace's pods that have not finished, in seconds.
async fn pod_termination_estimate(client: &Client, namespace: &str) -> Result<u64, kube::Error> {
    let pods = client
        .namespaced_api::<Pod>(namespace)
        .list(&ListParams::default())
        .await?;
    Ok(pods
        .items
        .iter()
        .filter(|p| {
            let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
            !matches!(phase, Some("Succeeded" | "Failed"))
        })
        .filter_map(|p| p.spec.as_ref()?.termination_grace_period_seconds)
        .map(|s| u64::try_from(s).unwrap_or(0))
        .max()
        .unwrap_or(0))
}

/// The server does not serve the resource (any more) or does not allow the verb on it.
fn unsupported(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404 || s.code == 405)
}

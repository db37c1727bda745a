//! The namespace controller (kube-controller-manager's `namespace`): when a namespace is
//! deleted — it has a `deletionTimestamp` and is `Terminating` — deletes everything in it, then
//! removes the `kubernetes` finalizer from its `spec.finalizers` through the
//! `namespaces/{name}/finalize` subresource, after which the API server removes it (once its
//! `metadata.finalizers` are gone too).
//!
//! Each pass over a terminating namespace ([`reconcile`]): discover every namespaced resource
//! the server serves ([`discovery`]), clear each one ([`content`]), write the five deletion
//! conditions to the namespace's status ([`conditions`]), then
//! - any step failed: the pass fails and is retried with backoff (5 ms doubling to 60 s);
//! - objects remain that are expected to go (pods terminating, finalizers pending): look
//!   again after half the estimate, plus a second (at most 30 s);
//! - nothing remains: finalize.
//!
//! Invariant: the `kubernetes` finalizer is removed only after a pass in which discovery was
//! complete, every resource was cleared without error and a list of each found nothing — so a
//! namespace never disappears while something it held is still stored.

mod conditions;
mod content;
mod discovery;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, NamespaceStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::PostParams;
use setpoint_runtime::{
    update_status, Action, Backoff, Client, Controller, ControllerError, Predicate, RateLimit,
    StatusError,
};
use tokio_util::sync::CancellationToken;

use crate::LoopContext;
use conditions::PassReport;

/// The finalizer this loop owns in `spec.finalizers`.
const FINALIZER: &str = "kubernetes";
/// Parallel namespace deletions (kube-controller-manager's `--concurrent-namespace-syncs`).
const CONCURRENT_SYNCS: usize = 10;
/// The longest wait for content expected to go. Grace periods are client input of any size
/// (up to 2^63 − 1 s), and pods mostly stop well before theirs ends: a namespace is looked at
/// again at least this often, so it goes soon after its last pod.
const MAX_CONTENT_WAIT: Duration = Duration::from_secs(30);
/// Every terminating namespace is looked at again this often even without changes
/// (kube-controller-manager's `--namespace-sync-period`).
const RESYNC: Duration = Duration::from_secs(300);

/// Why a pass over a namespace failed; the namespace is retried with backoff.
#[derive(Debug, thiserror::Error)]
enum NamespaceError {
    /// Discovery or content deletion failed for some resources (the conditions name them).
    #[error("deleting the content of namespace {name}: {failures} step(s) failed, first: {first}")]
    Content {
        /// The namespace.
        name: String,
        /// How many discovery and deletion steps failed.
        failures: usize,
        /// The first failure, rendered.
        first: String,
    },
    /// The namespace could not be read before finalizing.
    #[error("reading namespace {name} to finalize it")]
    Get {
        /// The namespace.
        name: String,
        /// The API's answer.
        #[source]
        source: kube::Error,
    },
    /// The `finalize` subresource refused.
    #[error("finalizing namespace {name}")]
    Finalize {
        /// The namespace.
        name: String,
        /// The API's answer.
        #[source]
        source: kube::Error,
    },
}

/// What every pass needs.
struct Deleter {
    client: Client,
}

/// Runs the loop until `shutdown` is cancelled.
pub(crate) async fn run(
    ctx: LoopContext,
    shutdown: CancellationToken,
) -> Result<(), ControllerError> {
    let controller = Controller::<Namespace>::new(&ctx.factory)
        .named("namespace")
        .registered_in(&ctx.metrics)
        .predicate(Predicate::new(needs_pass))
        .concurrency(CONCURRENT_SYNCS)
        .resync(RESYNC)
        .rate_limit(RateLimit {
            backoff: Backoff::new(Duration::from_millis(5), Duration::from_secs(60)),
            bucket: None,
        });
    let deleter = Arc::new(Deleter { client: ctx.client });
    controller
        .run(reconcile, deleter, shutdown.cancelled_owned())
        .await
}

/// Adds and updates that can start or advance a deletion: a namespace being deleted, and then
/// only when its deletion starts or its finalizers change — not on this loop's own status
/// writes, which would otherwise start every pass twice.
fn needs_pass(old: Option<&Namespace>, new: &Namespace) -> bool {
    if new.metadata.deletion_timestamp.is_none() {
        return false;
    }
    let Some(old) = old else {
        return true;
    };
    old.metadata.deletion_timestamp.is_none()
        || old.metadata.finalizers != new.metadata.finalizers
        || old.spec.as_ref().and_then(|s| s.finalizers.as_ref())
            != new.spec.as_ref().and_then(|s| s.finalizers.as_ref())
}

fn holds_finalizer(ns: &Namespace) -> bool {
    ns.spec
        .as_ref()
        .and_then(|s| s.finalizers.as_ref())
        .is_some_and(|f| f.iter().any(|x| x == FINALIZER))
}

/// One deletion pass over `ns` (see the module docs).
async fn reconcile(ns: Arc<Namespace>, deleter: Arc<Deleter>) -> Result<Action, NamespaceError> {
    let Some(name) = ns.metadata.name.clone() else {
        return Ok(Action::await_change());
    };
    if ns.metadata.deletion_timestamp.is_none() || !holds_finalizer(&ns) {
        // Not deleted, or already finalized (other finalizers are their owners' business).
        return Ok(Action::await_change());
    }
    let client = &deleter.client;

    let discovered = discovery::discover(client.kube()).await;
    let mut report = PassReport {
        discovery_failures: discovered.failures,
        ..PassReport::default()
    };
    let mut estimate = 0;
    for target in &discovered.resources {
        let outcome = content::clear(client, &name, target).await;
        if let Some(e) = &outcome.error {
            tracing::debug!(namespace = %name, error = %e.render(), "deleting content failed");
            report.content_failures.push(e.render());
        }
        let cleared = outcome.cleared;
        estimate = estimate.max(cleared.estimate_seconds);
        if cleared.remaining > 0 {
            report
                .remaining
                .insert(target.group_resource(), cleared.remaining);
            for (f, n) in cleared.finalizers {
                *report.finalizers.entry(f).or_insert(0) += n;
            }
        }
    }
    write_conditions(client, &name, &report).await;

    if !report.succeeded() {
        let failures: Vec<&String> = report
            .discovery_failures
            .iter()
            .chain(&report.content_failures)
            .collect();
        return Err(NamespaceError::Content {
            name,
            failures: failures.len(),
            first: failures.first().map(|s| (*s).clone()).unwrap_or_default(),
        });
    }
    if estimate > 0 {
        return Ok(Action::requeue(content_wait(estimate)));
    }
    finalize(client, &name).await?;
    Ok(Action::await_change())
}

/// How long to wait before looking again at a namespace whose content is expected to go
/// within `estimate` seconds: half of it plus a second, as kube-controller-manager waits, but
/// at most [`MAX_CONTENT_WAIT`].
fn content_wait(estimate: u64) -> Duration {
    Duration::from_secs(estimate / 2)
        .saturating_add(Duration::from_secs(1))
        .min(MAX_CONTENT_WAIT)
}

/// Writes the pass's conditions (and the `Terminating` phase) to the namespace's status;
/// nothing when they are unchanged. A failure is logged, not returned: the conditions report
/// on the deletion, they do not gate it (as in kube-controller-manager).
async fn write_conditions(client: &Client, name: &str, report: &PassReport) {
    let wanted = report.conditions();
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let written = update_status(&client.api::<Namespace>(), name, |ns: &mut Namespace| {
        let status = ns.status.get_or_insert_with(NamespaceStatus::default);
        status.phase = Some("Terminating".to_owned());
        conditions::merge(status, wanted.clone(), now.clone());
    })
    .await;
    match written {
        Ok(_) => {}
        Err(StatusError::Get { source, .. }) if is_not_found(&source) => {}
        Err(e) => tracing::warn!(namespace = %name, error = %e, "updating the deletion conditions"),
    }
}

/// Removes [`FINALIZER`] from the namespace's `spec.finalizers` through `finalize`, from a
/// fresh read (the subresource replaces the whole list, so a stale copy could bring back a
/// finalizer someone else removed).
async fn finalize(client: &Client, name: &str) -> Result<(), NamespaceError> {
    let api = client.api::<Namespace>();
    let mut ns = match api.get(name).await {
        Ok(ns) => ns,
        Err(e) if is_not_found(&e) => return Ok(()),
        Err(source) => {
            return Err(NamespaceError::Get {
                name: name.to_owned(),
                source,
            })
        }
    };
    if !holds_finalizer(&ns) {
        return Ok(());
    }
    if let Some(finalizers) = ns.spec.as_mut().and_then(|s| s.finalizers.as_mut()) {
        finalizers.retain(|f| f != FINALIZER);
    }
    match api
        .replace_subresource("finalize", name, &PostParams::default(), &ns)
        .await
    {
        Ok(_) => {
            tracing::info!(namespace = %name, "namespace content deleted; finalized");
            Ok(())
        }
        Err(e) if is_not_found(&e) => Ok(()),
        Err(source) => Err(NamespaceError::Finalize {
            name: name.to_owned(),
            source,
        }),
    }
}

fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::NamespaceSpec;

    fn namespace(deleting: bool, finalizers: &[&str]) -> Namespace {
        let mut ns = Namespace::default();
        ns.metadata.name = Some("demo".to_owned());
        if deleting {
            ns.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
        }
        ns.spec = Some(NamespaceSpec {
            finalizers: Some(finalizers.iter().map(|f| (*f).to_owned()).collect()),
        });
        ns
    }

    #[test]
    fn needs_pass_should_skip_live_namespaces_and_own_status_writes() {
        let live = namespace(false, &["kubernetes"]);
        let deleting = namespace(true, &["kubernetes"]);
        assert!(!needs_pass(None, &live));
        assert!(needs_pass(None, &deleting));
        assert!(needs_pass(Some(&live), &deleting));
        let mut status_written = deleting.clone();
        status_written.status = Some(NamespaceStatus {
            phase: Some("Terminating".to_owned()),
            conditions: None,
        });
        assert!(!needs_pass(Some(&deleting), &status_written));
        let finalized = namespace(true, &[]);
        assert!(needs_pass(Some(&deleting), &finalized));
    }

    #[test]
    fn content_waits_should_be_bounded_whatever_the_grace_period() {
        // Regression (issue 14.2): a pod's grace period of 2^63 - 1 s kept its namespace
        // waiting for ever.
        assert_eq!(content_wait(30), Duration::from_secs(16));
        assert_eq!(content_wait(0), Duration::from_secs(1));
        assert_eq!(content_wait(i64::MAX.unsigned_abs()), MAX_CONTENT_WAIT);
        assert_eq!(content_wait(u64::MAX), MAX_CONTENT_WAIT);
    }

    #[test]
    fn holds_finalizer_should_look_only_at_spec_finalizers() {
        assert!(holds_finalizer(&namespace(true, &["kubernetes"])));
        let mut other = namespace(true, &[]);
        other.metadata.finalizers = Some(vec!["kubernetes".to_owned()]);
        assert!(!holds_finalizer(&other));
    }
}

//! One reconcile of a Sync, level-triggered and idempotent: check dependencies, read the
//! source's artifact, build the path, settle namespaces/labels/ignored fields, apply in stages
//! (writing only what differs), watch the applied kinds for drift, prune what left the source,
//! check health, and write the status — only what changed, so a reconcile of an unchanged
//! source over unchanged objects writes nothing at all.
//!
//! A suspended Sync does nothing (only a reconcile request is recorded as handled).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use setpoint_runtime::{Action, EventDetails, ObjectKey, StatusError};
use tokio::time::Instant;

use super::apply::{Applier, Change};
use super::checks::{health_targets, wait_healthy};
use super::impersonate;
use super::prepare::{prepare, Desired};
use super::prune;
use super::source;
use super::status::{self, reason, Outcome};
use super::{Context, SyncError};
use crate::error_chain;
use crate::kinds::{Inventory, Sync, RECONCILE_REQUESTED_AT};
use crate::manifests::{self, ObjectId};

/// A Sync's durations.
struct Timing {
    interval: Duration,
    retry: Duration,
    timeout: Duration,
}

fn timing(sync: &Sync) -> Result<Timing, String> {
    let parse = |field: &str, text: &str| {
        crate::duration::parse(text).map_err(|e| format!("spec.{field}: {e}"))
    };
    let interval = parse("interval", &sync.spec.interval)?.max(Duration::from_secs(1));
    let retry = match &sync.spec.retry_interval {
        Some(text) => parse("retryInterval", text)?.max(Duration::from_millis(100)),
        None => interval,
    };
    let timeout = match &sync.spec.timeout {
        Some(text) => parse("timeout", text)?,
        None => interval,
    };
    Ok(Timing {
        interval,
        retry,
        timeout,
    })
}

/// What one attempt did, beside its outcome.
#[derive(Default)]
struct Report {
    changes: Vec<(ObjectId, Change)>,
    deleted: Vec<ObjectId>,
}

/// Reconciles one Sync.
pub(super) async fn reconcile(cached: Arc<Sync>, ctx: Arc<Context>) -> Result<Action, SyncError> {
    let name = cached.metadata.name.clone().unwrap_or_default();
    let namespace = cached.metadata.namespace.clone().unwrap_or_default();
    let api = kube::Api::<Sync>::namespaced(ctx.client.kube().clone(), &namespace);
    // The inventory decides what is pruned: read it fresh, not from a cache that may not have
    // seen the last reconcile's status yet.
    let sync = match api.get_opt(&name).await {
        Ok(Some(sync)) => sync,
        Ok(None) => {
            let key = ObjectKey::namespaced(&namespace, &name);
            ctx.builds.lock().remove(&key);
            ctx.memos.forget(&key);
            return Ok(Action::await_change());
        }
        Err(e) => return Err(SyncError::Read(format!("{namespace}/{name}"), e)),
    };
    let handled = sync
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(RECONCILE_REQUESTED_AT))
        .cloned();
    if sync.spec.suspend {
        let outcome = Outcome {
            handled,
            ..Outcome::default()
        };
        status::write(&api, &name, &outcome)
            .await
            .map_err(|e| SyncError::Status(format!("{namespace}/{name}"), e))?;
        return Ok(Action::await_change());
    }
    let mut report = Report::default();
    let (mut outcome, requeue) = match timing(&sync) {
        Ok(timing) => attempt(&sync, &ctx, &api, &timing, &mut report).await,
        Err(message) => (
            failed(reason::RECONCILIATION_FAILED, message, true),
            Duration::from_secs(60),
        ),
    };
    outcome.handled = handled;
    let previous = status::ready_message(&sync).map(str::to_owned);
    if let Err(e) = status::write(&api, &name, &outcome).await {
        if is_gone(&e) {
            // Deleted while being reconciled (a dependency's deletion woke it, say): done.
            return Ok(Action::await_change());
        }
        // The controller logs the error's own message; the API's reason is in its sources.
        let key = format!("{namespace}/{name}");
        let chain = error_chain(&e);
        tracing::debug!(sync = %key, error = %chain, "writing a Sync status");
        return Err(SyncError::Status(key, e));
    }
    publish_events(&ctx, &sync, &outcome, &report, previous.as_deref());
    Ok(Action::requeue(requeue))
}

/// `Ready=False` with `reason` (and `Stalled` when it will not pass without a change).
fn failed(reason: &'static str, message: String, stalled: bool) -> Outcome {
    Outcome {
        ready: Some((false, reason, message.clone())),
        stalled: stalled.then_some((reason, message)),
        ..Outcome::default()
    }
}

/// Everything but the status write and events.
async fn attempt(
    sync: &Sync,
    ctx: &Context,
    api: &kube::Api<Sync>,
    timing: &Timing,
    report: &mut Report,
) -> (Outcome, Duration) {
    let name = sync.metadata.name.clone().unwrap_or_default();
    let namespace = sync.metadata.namespace.clone().unwrap_or_default();
    let retry = timing.retry;
    if let Err(message) = source::dependencies(sync, &ctx.syncs, &ctx.repositories) {
        return (failed(reason::DEPENDENCY_NOT_READY, message, false), retry);
    }
    let artifact = match source::artifact(sync, &ctx.repositories) {
        Ok(artifact) => artifact,
        Err(message) => return (failed(reason::ARTIFACT_FAILED, message, false), retry),
    };
    let revision = artifact.revision.clone();
    let with_revision = |mut outcome: Outcome| {
        outcome.attempted_revision = Some(revision.clone());
        outcome
    };
    let dir = match ctx.artifacts.dir(&artifact.path) {
        Ok(dir) => dir,
        Err(e) => return (failed(reason::ARTIFACT_FAILED, e.to_string(), false), retry),
    };
    let path = sync.spec.path.clone().unwrap_or_default();
    let key = ObjectKey::namespaced(&namespace, &name);
    // An artifact never changes once it exists: its build is kept until the next one.
    let built_from = (artifact.path.clone(), path.clone());
    let cached = ctx
        .builds
        .lock()
        .get(&key)
        .filter(|(from, _)| *from == built_from)
        .map(|(_, objects)| objects.clone());
    let built = match cached {
        Some(objects) => Ok(Ok((*objects).clone())),
        None => tokio::task::spawn_blocking(move || manifests::build(&dir, &path)).await,
    };
    let objects = match built {
        Ok(Ok(objects)) => {
            ctx.builds
                .lock()
                .insert(key.clone(), (built_from, Arc::new(objects.clone())));
            objects
        }
        Ok(Err(e)) => {
            let outcome = failed(reason::BUILD_FAILED, error_chain(&e), true);
            return (with_revision(outcome), retry);
        }
        Err(e) => {
            let outcome = failed(reason::BUILD_FAILED, e.to_string(), false);
            return (with_revision(outcome), retry);
        }
    };
    let client = match impersonate::client_for(
        &ctx.client,
        &namespace,
        sync.spec.service_account_name.as_deref(),
    ) {
        Ok(client) => client,
        Err(e) => {
            let outcome = failed(reason::IMPERSONATION_FAILED, e.to_string(), true);
            return (with_revision(outcome), retry);
        }
    };
    let desired = match prepare(sync, objects, &client, &ctx.discovery).await {
        Ok(desired) => desired,
        Err(e) => {
            let outcome = failed(reason::BUILD_FAILED, error_chain(&e), true);
            return (with_revision(outcome), retry);
        }
    };
    let old = sync
        .status
        .as_ref()
        .and_then(|s| s.inventory.clone())
        .unwrap_or_default();
    let mut entries: Vec<_> = desired.iter().map(Desired::inventory_entry).collect();
    entries.sort();
    let new = Inventory { entries };
    if sync.spec.prune
        && new.entries.is_empty()
        && !old.entries.is_empty()
        && !sync.spec.allow_empty_prune
    {
        let message = format!(
            "the source yields no objects at revision {revision}; refusing to prune the {} \
             applied before (set allowEmptyPrune to allow it)",
            old.entries.len()
        );
        return (
            with_revision(failed(reason::PRUNE_REFUSED, message, true)),
            retry,
        );
    }
    let new_revision = sync
        .status
        .as_ref()
        .and_then(|s| s.last_applied_revision.as_deref())
        != Some(revision.as_str());
    if new_revision {
        let progressing = Outcome {
            reconciling: Some((
                reason::PROGRESSING,
                format!("Applying revision: {revision}"),
            )),
            ..Outcome::default()
        };
        // Best effort: the final status write below reports the result either way.
        let _ = status::write(api, &name, &progressing).await;
    }
    let deadline = Instant::now() + timing.timeout;
    let applier = Applier {
        client: &client,
        discovery: &ctx.discovery,
        deadline,
    };
    let requested = sync
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(RECONCILE_REQUESTED_AT));
    let handled = sync
        .status
        .as_ref()
        .and_then(|s| s.last_handled_reconcile_at.as_ref());
    let verified = if requested.is_some() && requested != handled {
        // A reconcile request verifies everything.
        HashSet::new()
    } else {
        let live = cached_versions(ctx, &client, &desired).await;
        ctx.memos.verified(&key, &desired, &live, timing.interval)
    };
    match applier.apply_all(&desired, &verified).await {
        Ok(applied) => {
            ctx.memos
                .record(&key, &desired, &applied, verified.is_empty());
            report.changes = applied.into_iter().map(|a| (a.id, a.change)).collect();
        }
        Err(e) => {
            ctx.memos.forget(&key);
            let outcome = failed(reason::RECONCILIATION_FAILED, e.to_string(), false);
            return (with_revision(outcome), retry);
        }
    }
    watch_for_drift(ctx, &client, &desired).await;
    if sync.spec.prune {
        let stale = prune::stale(&old, &new);
        match prune::prune(&client, &ctx.discovery, &stale, &name, &namespace).await {
            Ok(pruned) => report.deleted = pruned.deleted,
            Err(e) => {
                let mut outcome = failed(reason::PRUNE_FAILED, e.to_string(), false);
                outcome.inventory = Some(merged(&old, &new));
                return (with_revision(outcome), retry);
            }
        }
    }
    let mut outcome = Outcome {
        inventory: Some(new),
        ..Outcome::default()
    };
    let checks = health_targets(sync, &desired);
    if !checks.is_empty() {
        match wait_healthy(ctx, &client, &checks, deadline).await {
            Ok(()) => {
                outcome.healthy = Some((true, reason::SUCCEEDED, "Health check passed".to_owned()));
            }
            Err(message) => {
                outcome.ready = Some((false, reason::HEALTH_CHECK_FAILED, message.clone()));
                outcome.stalled = Some((reason::HEALTH_CHECK_FAILED, message.clone()));
                outcome.healthy = Some((false, reason::HEALTH_CHECK_FAILED, message));
                return (with_revision(outcome), retry);
            }
        }
    }
    outcome.ready = Some((
        true,
        reason::SUCCEEDED,
        format!("Applied revision: {revision}"),
    ));
    outcome.applied_revision = Some(revision.clone());
    (with_revision(outcome), timing.interval)
}

/// The `resourceVersion` the drift watches have cached for each desired object.
async fn cached_versions(
    ctx: &Context,
    client: &kube::Client,
    desired: &[Desired],
) -> HashMap<ObjectId, String> {
    let mut versions = HashMap::with_capacity(desired.len());
    for d in desired {
        let Ok(served) = ctx
            .discovery
            .resolve(client, &d.id.group, &d.version, &d.id.kind)
            .await
        else {
            continue;
        };
        let namespace = served.namespaced.then_some(d.id.namespace.as_str());
        if let Some(rv) = ctx
            .drift
            .resource_version(&served.resource, namespace, &d.id.name)
        {
            versions.insert(d.id.clone(), rv);
        }
    }
    versions
}

/// Old and new inventories together (after a failed prune, what may still exist).
fn merged(old: &Inventory, new: &Inventory) -> Inventory {
    let mut entries = old.entries.clone();
    for entry in &new.entries {
        if !entries.iter().any(|e| e.id == entry.id) {
            entries.push(entry.clone());
        }
    }
    entries.sort();
    Inventory { entries }
}

/// Starts the drift watches of the applied kinds (once each).
async fn watch_for_drift(ctx: &Context, client: &kube::Client, desired: &[Desired]) {
    let mut seen = std::collections::HashSet::new();
    for d in desired {
        if !seen.insert((d.id.group.clone(), d.version.clone(), d.id.kind.clone())) {
            continue;
        }
        if let Ok(served) = ctx
            .discovery
            .resolve(client, &d.id.group, &d.version, &d.id.kind)
            .await
        {
            ctx.drift.watch(&served.resource);
        }
    }
}

/// Normal `Progressing` listing what changed (only when something did); a Warning when the
/// reconcile failed with a new message.
fn publish_events(
    ctx: &Context,
    sync: &Sync,
    outcome: &Outcome,
    report: &Report,
    previous: Option<&str>,
) {
    let mut lines: Vec<String> = report
        .changes
        .iter()
        .filter(|(_, change)| *change != Change::Unchanged)
        .map(|(id, change)| format!("{id} {change}"))
        .collect();
    lines.extend(report.deleted.iter().map(|id| format!("{id} deleted")));
    if !lines.is_empty() {
        ctx.recorder.publish_for(
            sync,
            EventDetails::normal("Progressing", "Reconcile").with_note(lines.join("\n")),
        );
    }
    if let Some((false, reason, message)) = &outcome.ready {
        if previous != Some(message.as_str()) {
            ctx.recorder.publish_for(
                sync,
                EventDetails::warning(*reason, "Reconcile").with_note(message.clone()),
            );
        }
    }
}

/// Whether a status write failed because the Sync no longer exists.
fn is_gone(error: &StatusError) -> bool {
    match error {
        StatusError::Get { source, .. } | StatusError::Replace { source, .. } => {
            matches!(source, kube::Error::Api(status) if status.code == 404)
        }
        _ => false,
    }
}

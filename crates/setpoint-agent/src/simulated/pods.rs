//! The pods of simulated nodes: one pod watch for all of them (bound pods only, filtered by
//! node name), reconciled by a bounded pool of workers. A pod bound to a simulated node is
//! marked `Running` (after the start-up delay, counted from when this process first saw it
//! there); a pod being deleted is removed at once (`gracePeriodSeconds=0`, uid precondition),
//! as the kubelet does once its containers stopped (a pod holding finalizers is first marked
//! `Failed`, as the kubelet marks a deleted pod that had not finished). A pod that runs to
//! completion (`completion`) is marked `Succeeded` or `Failed` once its run time is over.
//!
//! Scales with one work queue and no per-pod timers: a pod still within its start-up delay or
//! its run time is requeued for the remaining time (the queue's delayed adds are one ordered
//! heap, not a timer per pod).

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, Patch, PatchParams, Preconditions};
use kube::Api;
use parking_lot::Mutex;
use setpoint_runtime::{Action, Client, Controller, InformerFactory, InformerOptions, Predicate};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::completion::{finished_status, restarted_status, run_of};
use super::pod_status::running_status;
use crate::node::time_now;

/// A simulated node as its pods see it.
#[derive(Debug)]
pub(super) struct PodHost {
    /// The node's `InternalIP`, every pod's `hostIP`.
    pub(super) host_ip: Ipv4Addr,
    /// The first of the node's pod addresses (`.0` of its /24); pods get `.1` to `.254`.
    pub(super) pod_net: Ipv4Addr,
    /// Pods started so far, for the next pod address.
    pub(super) started: AtomicU32,
}

impl PodHost {
    /// The next pod address in the node's range, wrapping after 254.
    fn next_pod_ip(&self) -> Ipv4Addr {
        let n = self.started.fetch_add(1, Ordering::Relaxed) % 254 + 1;
        Ipv4Addr::from(u32::from(self.pod_net) + n)
    }
}

/// What every reconcile shares.
pub(super) struct PodContext {
    /// Where status patches and deletes go.
    pub(super) client: Client,
    /// The simulated nodes, by name.
    pub(super) hosts: HashMap<String, PodHost>,
    /// How long a pod stays `Pending` on its node before it runs.
    pub(super) start_delay: Duration,
    /// When (local clock) each pod still within its delay was first seen, by uid. Empty when
    /// the delay is zero; an entry is removed when its pod is started or deleted.
    pub(super) first_seen: Mutex<HashMap<String, Instant>>,
    /// When (local clock) each pod that runs to completion was last started, by uid; an entry
    /// is removed when its pod finishes or is deleted.
    pub(super) started: Mutex<HashMap<String, Instant>>,
}

/// Runs the pod reconciler until `shutdown`, with `concurrency` reconciles at once. A
/// controller error (its cache never synced) is logged and the controller started again.
pub(super) async fn run_pods(
    factory: &InformerFactory,
    ctx: Arc<PodContext>,
    concurrency: usize,
    shutdown: CancellationToken,
) {
    let field_selector = if ctx.hosts.len() == 1 {
        ctx.hosts
            .keys()
            .next()
            .map(|name| format!("spec.nodeName={name}"))
    } else {
        Some("spec.nodeName!=".to_owned())
    };
    loop {
        let names: Vec<String> = ctx.hosts.keys().cloned().collect();
        let ours = Predicate::new(move |_old: Option<&Pod>, new: &Pod| {
            new.spec
                .as_ref()
                .and_then(|s| s.node_name.as_ref())
                .is_some_and(|n| names.contains(n))
        });
        let controller = Controller::<Pod>::new(factory)
            .named("simulated-pods")
            .for_options(
                InformerOptions {
                    field_selector: field_selector.clone(),
                    ..InformerOptions::default()
                }
                .strip_managed_fields(),
            )
            .predicate(ours)
            .concurrency(concurrency)
            .cache_sync_timeout(Duration::from_secs(24 * 3600));
        let stop = shutdown.clone();
        match controller
            .run(
                reconcile,
                ctx.clone(),
                async move { stop.cancelled().await },
            )
            .await
        {
            Ok(()) => return,
            Err(error) => {
                tracing::error!(%error, "the simulated pods' controller stopped; restarting it");
                tokio::select! {
                    () = shutdown.cancelled() => return,
                    () = tokio::time::sleep(Duration::from_secs(1)) => {}
                }
            }
        }
    }
}

/// Brings one pod of a simulated node to where the kubelet would: deleted if being deleted,
/// `Running` once its start-up delay passed.
async fn reconcile(pod: Arc<Pod>, ctx: Arc<PodContext>) -> Result<Action, kube::Error> {
    let Some(host) = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_ref())
        .and_then(|n| ctx.hosts.get(n))
    else {
        return Ok(Action::await_change());
    };
    let name = pod.metadata.name.clone().unwrap_or_default();
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let api: Api<Pod> = ctx.client.namespaced_api(&namespace);
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    if pod.metadata.deletion_timestamp.is_some() {
        ctx.first_seen.lock().remove(&uid);
        ctx.started.lock().remove(&uid);
        let holds = pod
            .metadata
            .finalizers
            .as_ref()
            .is_some_and(|f| !f.is_empty());
        if holds && !matches!(phase, Some("Succeeded" | "Failed")) {
            let patch = serde_json::json!({ "status": { "phase": "Failed" } });
            match api
                .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => return Ok(Action::await_change()),
                Err(e) => return Err(e),
            }
        }
        let params = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions {
                uid: Some(uid),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        return match api.delete(&name, &params).await {
            Ok(_) => Ok(Action::await_change()),
            // Gone already, or replaced by a pod of the same name.
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {
                Ok(Action::await_change())
            }
            Err(e) => Err(e),
        };
    }
    let run = run_of(&pod);
    if matches!(phase, Some("Succeeded" | "Failed")) {
        return Ok(Action::await_change());
    }
    if phase == Some("Running") {
        let Some(run) = run else {
            return Ok(Action::await_change());
        };
        return finish(&api, &pod, run, &ctx).await;
    }
    if !ctx.start_delay.is_zero() {
        let now = Instant::now();
        let first = *ctx.first_seen.lock().entry(uid.clone()).or_insert(now);
        let due = first + ctx.start_delay;
        if due > now {
            return Ok(Action::requeue(due - now));
        }
    }
    let status = running_status(&pod, host.host_ip, host.next_pod_ip(), &time_now());
    let patch = serde_json::json!({ "status": status });
    match api
        .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 404 => {}
        Err(e) => return Err(e),
    }
    ctx.first_seen.lock().remove(&uid);
    match run {
        Some(run) => {
            ctx.started.lock().insert(uid, Instant::now());
            Ok(Action::requeue(run.time))
        }
        None => Ok(Action::await_change()),
    }
}

/// Ends the run of a running pod whose run time is over (requeues it until then): marks it
/// `Succeeded` or `Failed`, or restarts it in place under `OnFailure`. A pod this process did
/// not start (it restarted) is timed from its `startTime`.
async fn finish(
    api: &Api<Pod>,
    pod: &Pod,
    run: super::completion::Run,
    ctx: &PodContext,
) -> Result<Action, kube::Error> {
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let now = Instant::now();
    let started = *ctx.started.lock().entry(uid.clone()).or_insert_with(|| {
        let since = pod
            .status
            .as_ref()
            .and_then(|s| s.start_time.as_ref())
            .and_then(|t| {
                let elapsed = k8s_openapi::jiff::Timestamp::now().duration_since(t.0);
                Duration::try_from(elapsed).ok()
            })
            .unwrap_or_default();
        now.checked_sub(since).unwrap_or(now)
    });
    let due = started + run.time;
    if due > now {
        return Ok(Action::requeue(due - now));
    }
    let running = pod.status.clone().unwrap_or_default();
    let time = time_now();
    let restart = run.restarts && run.exit_code != 0;
    let status = if restart {
        restarted_status(&running, run.exit_code, &time)
    } else {
        finished_status(&running, run.exit_code, &time)
    };
    let patch = serde_json::json!({ "status": status });
    let name = pod.metadata.name.clone().unwrap_or_default();
    match api
        .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 404 => {}
        Err(e) => return Err(e),
    }
    if restart {
        ctx.started.lock().insert(uid, Instant::now());
        Ok(Action::requeue(run.time))
    } else {
        ctx.started.lock().remove(&uid);
        Ok(Action::await_change())
    }
}

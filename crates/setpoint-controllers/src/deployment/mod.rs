//! The Deployment loop (kube-controller-manager's `deployment-controller`): rolls each
//! Deployment's pod template out through ReplicaSets.
//!
//! - [`sync`]: one sync — claim ReplicaSets ([`claim`]), find or create the new one
//!   ([`new_rs`], named and labelled by [`template`]'s `pod-template-hash`, with the
//!   [`annotations`] Kubernetes writes), then scale ([`scale`]: paused or resized), roll
//!   ([`rolling`], [`recreate`]), clean up old history ([`cleanup`]) and write the status
//!   ([`status`]). The numbers — `maxSurge`, `maxUnavailable`, proportional shares — are in
//!   [`sizing`].
//! - [`expectations`]: a Deployment does not act again until the ReplicaSet cache shows its
//!   previous writes, so a lagging cache never makes it create a ReplicaSet twice or scale one
//!   twice.
//! - [`watch`]: the handlers that feed the loop.
//!
//! Promises: at most `spec.replicas + maxSurge` pods and at least `spec.replicas −
//! maxUnavailable` available ones during a rolling update (as far as ReplicaSet statuses
//! tell); never old and new pods at once with Recreate; never touches a ReplicaSet another
//! controller controls. Design and invariants: `docs/design/controllers.md`.

mod annotations;
mod claim;
mod cleanup;
mod error;
mod expectations;
mod new_rs;
mod recreate;
mod replicasets;
mod rolling;
mod scale;
mod sizing;
mod status;
mod sync;
mod template;
mod watch;

use std::sync::Arc;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use setpoint_runtime::{
    Client, Controller, ControllerError, EventRecorder, InformerOptions, ObjectCache, ObjectKey,
    Reporter,
};
use tokio_util::sync::CancellationToken;

use crate::LoopContext;
use expectations::Expectations;
use watch::{ForgetDeleted, PodDeletions, ReplicaSetEvents};

/// The controller's name, as kube-controller-manager names it (logs, metrics, Events).
const CONTROLLER_NAME: &str = "deployment-controller";

/// Syncs of different Deployments at once (`--concurrent-deployment-syncs`).
const CONCURRENT_SYNCS: usize = 5;

/// What every sync shares.
pub(super) struct Context {
    /// Where writes go.
    client: Client,
    /// The shared ReplicaSet cache.
    replicasets: ObjectCache<ReplicaSet>,
    /// The shared pod cache (for Recreate: are the old pods gone?).
    pods: ObjectCache<Pod>,
    /// ReplicaSet writes not yet observed, by Deployment.
    expectations: Arc<Expectations>,
    /// `ScalingReplicaSet` and `SelectingAll` Events on Deployments.
    recorder: EventRecorder,
}

impl Context {
    /// Records that `deployment` wrote `written` (as the server returned it), unless the cache
    /// already shows it: the watch event may have been handled before this call, and would
    /// then never mark it observed.
    fn expect_written(&self, deployment: &ObjectKey, written: &ReplicaSet) {
        let Some(name) = written.metadata.name.as_deref() else {
            return;
        };
        let version = written.metadata.resource_version.as_deref();
        self.expectations.expect_version(deployment, name, version);
        if let Some(cached) = self.replicasets.get(&ObjectKey::of(written)) {
            let cached_version = cached.metadata.resource_version.as_deref();
            self.expectations.observed(deployment, name, cached_version);
        }
    }

    /// Records that `deployment` deletes `rs`, unless the cache no longer has it.
    fn expect_deleted(&self, deployment: &ObjectKey, rs: &ReplicaSet) {
        let Some(name) = rs.metadata.name.as_deref() else {
            return;
        };
        self.expectations.expect_gone(deployment, name);
        let key = ObjectKey::of(rs);
        if self
            .replicasets
            .get(&key)
            .is_none_or(|cached| cached.metadata.uid != rs.metadata.uid)
        {
            self.expectations.observed_gone(deployment, name);
        }
    }
}

/// Runs the loop until `shutdown` is cancelled.
pub(crate) async fn run(
    ctx: LoopContext,
    shutdown: CancellationToken,
) -> Result<(), ControllerError> {
    let expectations = Arc::new(Expectations::default());
    let deployment_informer = ctx.factory.informer::<Deployment>();
    let forget = deployment_informer.add_handler(ForgetDeleted {
        expectations: expectations.clone(),
    });
    let deployments = deployment_informer.store();
    let replicasets = ctx.factory.informer::<ReplicaSet>().store();
    let context = Arc::new(Context {
        recorder: EventRecorder::new(
            ctx.client.clone(),
            Reporter::new(CONTROLLER_NAME, "setpoint"),
        ),
        client: ctx.client,
        replicasets: replicasets.clone(),
        pods: ctx.factory.informer::<Pod>().store(),
        expectations: expectations.clone(),
    });
    let rs_deployments = deployments.clone();
    let result = Controller::<Deployment>::new(&ctx.factory)
        .named(CONTROLLER_NAME)
        .registered_in(&ctx.metrics)
        .concurrency(CONCURRENT_SYNCS)
        .watches_handler(InformerOptions::default(), move |enqueuer| {
            ReplicaSetEvents {
                expectations,
                deployments: rs_deployments,
                enqueuer,
            }
        })
        .watches_handler(InformerOptions::default(), move |enqueuer| PodDeletions {
            replicasets,
            deployments,
            enqueuer,
        })
        .run(sync::reconcile, context, shutdown.cancelled_owned())
        .await;
    forget.remove();
    result
}

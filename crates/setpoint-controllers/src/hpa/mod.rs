//! The HorizontalPodAutoscaler loop (kube-controller-manager's HPA controller). Every sync
//! period (15 s, `--hpa-sync-period`) and on every spec change, per `autoscaling/v2` HPA:
//! read the `scale` subresource of `spec.scaleTargetRef` (any kind that has one — found
//! through discovery), list the pods its selector matches and their `metrics.k8s.io`
//! PodMetrics, and ask `setpoint-control`'s [`HpaRecommender`] — the Kubernetes decision,
//! with its stabilization and rate-policy history kept per HPA — for a replica count. A
//! changed count is written to the scale subresource and, only once that write succeeded,
//! recorded with the recommender ([`Recommender::record_scale`]). Then `status` is written:
//! `currentReplicas`, `desiredReplicas`, `currentMetrics`, `lastScaleTime`, conditions.
//!
//! `Resource` metrics (`Utilization` and `AverageValue` targets) and `Object` and `External`
//! metrics (`Value` and `AverageValue` targets, read from fields of API objects by
//! [`metric_source`]) are evaluated; `Pods` and `ContainerResource` metrics are not (there is
//! no custom metrics API), and an HPA naming only those reports `ScalingActive=False,
//! InvalidMetricSourceType`.

mod field_path;
pub(crate) mod metric_source;
pub(crate) mod observe;
pub(crate) mod status;
pub(crate) mod target;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use kube::api::{Patch, PatchParams};
use parking_lot::Mutex;
use serde_json::{json, Value};
use setpoint_control::hpa::{HpaRecommender, HpaSpec, HpaTuning};
use setpoint_control::{Observation, Recommendation, Recommender};
use setpoint_runtime::{Action, Client, Controller, ControllerError, Predicate};
use tokio_util::sync::CancellationToken;

use crate::LoopContext;

const NAME: &str = "horizontal-pod-autoscaler";
const CONCURRENCY: usize = 5;

/// Why one HPA sync failed (it is retried with backoff; its status says why when it can).
#[derive(Debug, thiserror::Error)]
enum HpaError {
    /// The HPA's own status could not be written.
    #[error("writing the status of HPA {0}")]
    Status(String, #[source] kube::Error),
}

/// One HPA's recommender and the spec it was built for.
struct Tracked {
    spec: HpaSpec,
    recommender: HpaRecommender,
    /// When this HPA was last synced (entries of deleted HPAs are dropped after a while).
    seen: Duration,
}

struct Context {
    client: Client,
    sync_period: Duration,
    /// By HPA uid.
    tracked: Mutex<HashMap<String, Tracked>>,
}

/// Runs the loop until `shutdown` is cancelled.
pub(crate) async fn run(
    ctx: LoopContext,
    shutdown: CancellationToken,
) -> Result<(), ControllerError> {
    let context = Arc::new(Context {
        client: ctx.client.clone(),
        sync_period: ctx.settings.hpa_sync_period,
        tracked: Mutex::new(HashMap::new()),
    });
    Controller::<HorizontalPodAutoscaler>::new(&ctx.factory)
        .named(NAME)
        .registered_in(&ctx.metrics)
        .concurrency(CONCURRENCY)
        .predicate(Predicate::generation_changed())
        .run(reconcile, context, shutdown.cancelled_owned())
        .await
}

async fn reconcile(
    hpa: Arc<HorizontalPodAutoscaler>,
    ctx: Arc<Context>,
) -> Result<Action, HpaError> {
    let namespace = hpa.metadata.namespace.clone().unwrap_or_default();
    let name = hpa.metadata.name.clone().unwrap_or_default();
    let uid = hpa.metadata.uid.clone().unwrap_or_default();
    let now = observe::now();
    let now_text = target::rfc3339(now);
    let old_status = serde_json::to_value(&hpa.status).unwrap_or(Value::Null);
    let previous = &old_status["conditions"];
    let mut status = status::carried(&old_status);
    status["observedGeneration"] = json!(hpa.metadata.generation);
    let translated = observe::hpa_spec(&hpa.spec.clone().unwrap_or_default());
    let (spec, unsupported) = (&translated.spec, &translated.unsupported);

    let target_ref = hpa
        .spec
        .as_ref()
        .map(|s| s.scale_target_ref.clone())
        .unwrap_or_default();
    match target::read(&ctx.client, &namespace, &target_ref, &translated.sources).await {
        Err((reason, message)) => {
            status["conditions"] = json!([status::condition(
                previous,
                "AbleToScale",
                false,
                reason,
                &message,
                &now_text
            )]);
        }
        Ok(target) => {
            let current = target.current;
            status["currentReplicas"] = json!(target.status_replicas);
            match decide(&ctx, &uid, spec, unsupported, now, &target.observation) {
                Err(message) => {
                    status["desiredReplicas"] = json!(current);
                    status["conditions"] = json!([
                        status::condition(
                            previous,
                            "AbleToScale",
                            true,
                            "SucceededGetScale",
                            "the HPA controller was able to get the target's current scale",
                            &now_text
                        ),
                        status::condition(
                            previous,
                            "ScalingActive",
                            false,
                            "InvalidMetricSourceType",
                            &message,
                            &now_text
                        ),
                    ]);
                }
                Ok(rec) => {
                    let mut conditions = status::conditions(&rec, previous, &now_text);
                    if !target.has_selector {
                        conditions.retain(|c| c["type"] != "ScalingActive");
                        conditions.push(status::condition(
                            previous,
                            "ScalingActive",
                            false,
                            "InvalidSelector",
                            "the HPA target's scale is missing a selector",
                            &now_text,
                        ));
                    }
                    status["currentMetrics"] = json!(status::current_metrics(&rec, &translated));
                    let mut desired = current;
                    if rec.replicas != current {
                        match target.rescale(&target_ref.name, rec.replicas).await {
                            Ok(()) => {
                                if let Some(t) = ctx.tracked.lock().get_mut(&uid) {
                                    t.recommender.record_scale(now, current, rec.replicas);
                                }
                                status["lastScaleTime"] = json!(now_text);
                                tracing::info!(hpa = %format!("{namespace}/{name}"), from = current, to = rec.replicas, "rescaled");
                                desired = rec.replicas;
                            }
                            Err(e) => {
                                conditions.retain(|c| c["type"] != "AbleToScale");
                                conditions.push(status::condition(previous, "AbleToScale", false, "FailedUpdateScale",
                                    &format!("the HPA controller was unable to update the target scale: {e}"), &now_text));
                            }
                        }
                    }
                    status["desiredReplicas"] = json!(desired);
                    status["conditions"] = json!(conditions);
                }
            }
            if !unsupported.is_empty() {
                tracing::debug!(hpa = %name, ?unsupported, "metric types not evaluated");
            }
        }
    }
    let api = ctx
        .client
        .namespaced_api::<HorizontalPodAutoscaler>(&namespace);
    if differs(&old_status, &status) {
        api.patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": status})),
        )
        .await
        .map_err(|e| HpaError::Status(format!("{namespace}/{name}"), e))?;
    }
    Ok(Action::requeue(ctx.sync_period))
}

/// Whether `new` changes anything in `old` (keys `new` sets).
fn differs(old: &Value, new: &Value) -> bool {
    new.as_object()
        .is_some_and(|m| m.iter().any(|(k, v)| old.get(k) != Some(v)))
}

/// Runs the recommender of HPA `uid` (made, or remade when the spec changed). `Err` with a
/// message when the spec names no metric the recommender can evaluate (`unsupported`: the
/// types it set aside).
fn decide(
    ctx: &Context,
    uid: &str,
    spec: &HpaSpec,
    unsupported: &[String],
    now: Duration,
    obs: &Observation,
) -> Result<Recommendation, String> {
    if spec.metrics.is_empty() && !unsupported.is_empty() {
        return Err(format!(
            "the HPA was unable to compute the replica count: metric types {unsupported:?} are not supported by Setpoint (Resource, Object and External are)"
        ));
    }
    let mut tracked = ctx.tracked.lock();
    let stale = ctx
        .sync_period
        .saturating_mul(20)
        .max(Duration::from_secs(600));
    tracked.retain(|_, t| now.saturating_sub(t.seen) < stale);
    let entry = match tracked.get_mut(uid) {
        Some(t) if t.spec == *spec => t,
        _ => {
            let recommender = HpaRecommender::new(spec.clone(), HpaTuning::default())
                .map_err(|e| format!("the HPA was unable to compute the replica count: {e}"))?;
            tracked.insert(
                uid.to_owned(),
                Tracked {
                    spec: spec.clone(),
                    recommender,
                    seen: now,
                },
            );
            tracked
                .get_mut(uid)
                .ok_or_else(|| "internal: recommender vanished".to_owned())?
        }
    };
    entry.seen = now;
    Ok(entry.recommender.recommend(now, obs))
}

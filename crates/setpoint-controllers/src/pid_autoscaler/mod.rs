//! The PIDAutoscaler loop: the HPA loop's inputs and outputs with `setpoint-control`'s
//! [`PidAutoscaler`] law in place of the HPA's. It installs its CRD at start
//! ([`install_crd`]), then every sample period (`spec.samplePeriodSeconds`, else the HPA sync
//! period) and on every spec change, per PIDAutoscaler: reads the target's `scale`, observes
//! its pods and PodMetrics and the values of its `Object` and `External` metrics (as the HPA
//! loop does), runs the law (kept per object, so I and D carry over), writes a
//! changed count to the scale subresource and, once that succeeded, records it with the law;
//! then writes status with the P, I, D terms.

mod resource;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscalerSpec;
use kube::api::{Patch, PatchParams};
use kube::CustomResourceExt;
use parking_lot::Mutex;
use serde_json::{json, Value};
use setpoint_control::{PidAutoscaler, PidAutoscalerConfig, Recommendation, Recommender};
use setpoint_runtime::{install_crd, Action, Client, Controller, ControllerError, Predicate};
use tokio_util::sync::CancellationToken;

use crate::hpa::{observe, status, target};
use crate::LoopContext;
pub use resource::{Gains, PIDAutoscaler, PidAutoscalerSpec, PidAutoscalerStatus, Terms};

const NAME: &str = "pid-autoscaler";
const CONCURRENCY: usize = 5;
const CRD_TIMEOUT: Duration = Duration::from_secs(60);

/// Why one PIDAutoscaler sync failed (retried with backoff).
#[derive(Debug, thiserror::Error)]
enum PidLoopError {
    /// The object's status could not be written.
    #[error("writing the status of PIDAutoscaler {0}")]
    Status(String, #[source] kube::Error),
}

struct Tracked {
    config: PidAutoscalerConfig,
    law: PidAutoscaler,
    seen: Duration,
}

struct Context {
    client: Client,
    sync_period: Duration,
    /// By object uid.
    tracked: Mutex<HashMap<String, Tracked>>,
}

/// Installs the CRD, then runs the loop until `shutdown` is cancelled.
pub(crate) async fn run(
    ctx: LoopContext,
    shutdown: CancellationToken,
) -> Result<(), ControllerError> {
    if let Err(e) = install_crd(&ctx.client, &PIDAutoscaler::crd(), CRD_TIMEOUT).await {
        tracing::error!(error = %e, "installing the PIDAutoscaler CRD; the loop does not run");
        shutdown.cancelled().await;
        return Ok(());
    }
    let context = Arc::new(Context {
        client: ctx.client.clone(),
        sync_period: ctx.settings.hpa_sync_period,
        tracked: Mutex::new(HashMap::new()),
    });
    Controller::<PIDAutoscaler>::new(&ctx.factory)
        .named(NAME)
        .registered_in(&ctx.metrics)
        .concurrency(CONCURRENCY)
        .predicate(Predicate::generation_changed())
        .run(reconcile, context, shutdown.cancelled_owned())
        .await
}

/// The law's configuration from a spec: the tuned defaults, with what the spec sets; and
/// the spec's metrics as the law takes them.
fn config(
    spec: &PidAutoscalerSpec,
    period: Duration,
) -> (PidAutoscalerConfig, observe::Translated) {
    let translated = observe::hpa_spec(&HorizontalPodAutoscalerSpec {
        scale_target_ref: spec.scale_target_ref.clone(),
        min_replicas: spec.min_replicas,
        max_replicas: spec.max_replicas,
        metrics: Some(spec.metrics.clone()),
        behavior: spec.behavior.clone(),
    });
    let hpa = &translated.spec;
    let mut cfg = PidAutoscalerConfig::cpu(hpa.min_replicas, hpa.max_replicas, 1);
    cfg.metrics = hpa.metrics.clone();
    cfg.behavior = hpa.behavior.clone();
    cfg.period = period;
    if let Some(g) = &spec.gains {
        (cfg.kp, cfg.ki, cfg.kd) = (g.kp, g.ki, g.kd);
    }
    if let Some(d) = spec.deadband {
        cfg.deadband = d;
    }
    (cfg, translated)
}

fn decide(
    ctx: &Context,
    uid: &str,
    cfg: &PidAutoscalerConfig,
    now: Duration,
    obs: &setpoint_control::Observation,
) -> Result<Recommendation, String> {
    let mut tracked = ctx.tracked.lock();
    let stale = ctx
        .sync_period
        .saturating_mul(20)
        .max(Duration::from_secs(600));
    tracked.retain(|_, t| now.saturating_sub(t.seen) < stale);
    if tracked.get(uid).is_none_or(|t| t.config != *cfg) {
        let law = PidAutoscaler::new(cfg.clone())
            .map_err(|e| format!("the autoscaler was unable to compute the replica count: {e}"))?;
        tracked.insert(
            uid.to_owned(),
            Tracked {
                config: cfg.clone(),
                law,
                seen: now,
            },
        );
    }
    let entry = tracked
        .get_mut(uid)
        .ok_or_else(|| "internal: law vanished".to_owned())?;
    entry.seen = now;
    Ok(entry.law.recommend(now, obs))
}

async fn reconcile(pa: Arc<PIDAutoscaler>, ctx: Arc<Context>) -> Result<Action, PidLoopError> {
    let namespace = pa.metadata.namespace.clone().unwrap_or_default();
    let name = pa.metadata.name.clone().unwrap_or_default();
    let uid = pa.metadata.uid.clone().unwrap_or_default();
    let period = pa
        .spec
        .sample_period_seconds
        .map_or(ctx.sync_period, |s| Duration::from_secs(u64::from(s)));
    let now = observe::now();
    let now_text = target::rfc3339(now);
    let old = serde_json::to_value(&pa.status).unwrap_or(Value::Null);
    let previous = &old["conditions"];
    let mut st = status::carried(&old);
    let (cfg, translated) = config(&pa.spec, period);
    let target_ref = &pa.spec.scale_target_ref;
    match target::read(&ctx.client, &namespace, target_ref, &translated.sources).await {
        Err((reason, message)) => {
            st["conditions"] = json!([status::condition(
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
            st["currentReplicas"] = json!(target.status_replicas);
            match decide(&ctx, &uid, &cfg, now, &target.observation) {
                Err(message) => {
                    st["desiredReplicas"] = json!(current);
                    st["conditions"] = json!([status::condition(
                        previous,
                        "ScalingActive",
                        false,
                        "InvalidMetricSourceType",
                        &message,
                        &now_text
                    )]);
                }
                Ok(rec) => {
                    let mut conditions = status::conditions(&rec, previous, &now_text);
                    st["currentMetrics"] = json!(status::current_metrics(&rec, &translated));
                    if let Some(t) = rec.terms {
                        st["terms"] = json!({"p": t.p, "i": t.i, "d": t.d, "output": t.output});
                    }
                    let mut desired = current;
                    if rec.replicas != current {
                        match target.rescale(&target_ref.name, rec.replicas).await {
                            Ok(()) => {
                                if let Some(t) = ctx.tracked.lock().get_mut(&uid) {
                                    t.law.record_scale(now, current, rec.replicas);
                                }
                                st["lastScaleTime"] = json!(now_text);
                                desired = rec.replicas;
                            }
                            Err(e) => {
                                conditions.retain(|c| c["type"] != "AbleToScale");
                                conditions.push(status::condition(
                                    previous,
                                    "AbleToScale",
                                    false,
                                    "FailedUpdateScale",
                                    &format!(
                                        "the autoscaler was unable to update the target scale: {e}"
                                    ),
                                    &now_text,
                                ));
                            }
                        }
                    }
                    st["desiredReplicas"] = json!(desired);
                    st["conditions"] = json!(conditions);
                }
            }
        }
    }
    let api = kube::Api::<PIDAutoscaler>::namespaced(ctx.client.kube().clone(), &namespace);
    api.patch_status(
        &name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": st})),
    )
    .await
    .map_err(|e| PidLoopError::Status(format!("{namespace}/{name}"), e))?;
    Ok(Action::requeue(period))
}

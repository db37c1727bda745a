//! Controllers against a real in-process API server: convergence, owner-triggered drift repair,
//! watches, retries with backoff, panics, timeouts, requeues, predicates, resync, the
//! concurrency bound, graceful shutdown and the cache-sync timeout.
//!
//! The server's store runs on its own thread, so these tests run in real time, poll with
//! generous deadlines and never assert on how long something took. (The same behaviours are
//! tested with paused time, without a server, in `src/controller/workers_tests.rs`.)

mod convergence;
mod limits;
mod outcomes;
mod triggers;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
// A kind the server does not serve (resource.k8s.io is off by default in 1.33, as here).
use k8s_openapi::api::core::v1::{ConfigMap, Container, PodSpec, PodTemplateSpec, Secret};
use k8s_openapi::api::resource::v1beta1::ResourceClaim;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::{DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, Resource, ResourceExt};
use parking_lot::Mutex;
use serde_json::json;
use setpoint_runtime::{
    Action, Client, Controller, ControllerError, ControllerHandle, InformerFactory, ObjectKey,
    Predicate, Reconciler,
};
use setpoint_testenv::TestEnv;
use setpoint_testenv::{eventually, Running};
use tokio::sync::{Notify, Semaphore};
use tokio::time::{sleep, Instant};

const NS: &str = "default";

/// Starts `controller` with `reconciler` and context `context`; returns the running loop and
/// the handle that reads its metrics.
fn start<K, R, C>(
    controller: Controller<K>,
    reconciler: R,
    context: C,
) -> (Running<ControllerError>, ControllerHandle)
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Default,
    R: Reconciler<K, C>,
    C: Send + Sync + 'static,
{
    let handle = controller.handle();
    let running = Running::spawn(move |shutdown| {
        controller.run(reconciler, Arc::new(context), shutdown.cancelled_owned())
    });
    (running, handle)
}

/// How many times each object was reconciled.
#[derive(Default)]
struct Counts(Mutex<HashMap<String, usize>>);

impl Counts {
    /// Records a call for `name`; returns its number (1 for the first).
    fn record(&self, name: &str) -> usize {
        let mut counts = self.0.lock();
        let n = counts.entry(name.to_owned()).or_insert(0);
        *n += 1;
        *n
    }

    fn of(&self, name: &str) -> usize {
        self.0.lock().get(name).copied().unwrap_or(0)
    }
}

fn configmap(name: &str, data: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(NS.into()),
            ..Default::default()
        },
        data: Some(
            data.iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        ),
        ..Default::default()
    }
}

async fn create_configmap(api: &Api<ConfigMap>, name: &str) {
    api.create(&PostParams::default(), &configmap(name, &[("k", "v")]))
        .await
        .expect("create configmap");
}

/// A controller over every ConfigMap that counts reconciles and runs `behave` on each.
fn counting<F, Fut>(
    counts: &Arc<Counts>,
    behave: F,
) -> impl Reconciler<ConfigMap, (), Error = String>
where
    F: Fn(String, usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<Action, String>> + Send + 'static,
{
    let counts = Arc::clone(counts);
    move |cm: Arc<ConfigMap>, _: Arc<()>| {
        let name = cm.name_any();
        let n = counts.record(&name);
        behave(name, n)
    }
}

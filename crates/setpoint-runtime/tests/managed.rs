//! The managed-resource loop (`setpoint_runtime::managed`) against a real in-process API
//! server, with a small managed kind (`Bucket`) and a fake outside world: an in-memory map of
//! buckets behind a mutex, whose failures the test switches on and off per bucket. The loop
//! under test is the real `ManagedReconciler` run by a real `Controller`.
//!
//! One server and one controller serve every check (each on its own buckets), in real time with
//! short poll intervals and generous deadlines; nothing asserts how long anything took.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use k8s_openapi::api::core::v1::{Secret, Service, ServicePort, ServiceSpec};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{CustomResource, CustomResourceExt, Resource, ResourceExt};
use parking_lot::Mutex;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use setpoint_runtime::managed::{
    self, condition, external_name, ConnectionDetails, Connector, Creation, ExternalClient,
    ExternalError, Managed, ManagedOptions, ManagedReconciler, Observation, Readiness,
    ResourceSpec,
};
use setpoint_runtime::{install_crd, Client, Controller, EventRecorder, InformerFactory, Reporter};
use setpoint_testenv::{eventually, TestEnv};
use tokio::sync::oneshot;

const NS: &str = "default";
const POLL: Duration = Duration::from_millis(300);

/// A bucket in the fake outside world.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "test.setpoint.dev",
    version = "v1",
    kind = "Bucket",
    namespaced,
    status = "BucketStatus"
)]
#[serde(rename_all = "camelCase")]
struct BucketSpec {
    #[serde(flatten)]
    resource: ResourceSpec,
    for_provider: BucketParameters,
    /// `false`: the bucket wants no external bucket (as a Service that stops being a
    /// LoadBalancer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    external: Option<bool>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct BucketParameters {
    size: i64,
    /// Defaulted by the outside world (late-initialised).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    region: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct BucketStatus {
    #[serde(default)]
    conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    at_provider: Option<BucketObservation>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
struct BucketObservation {
    size: i64,
}

/// The same, cluster-scoped (its connection Secret's namespace must be named).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "test.setpoint.dev",
    version = "v1",
    kind = "ClusterBucket",
    status = "BucketStatus"
)]
struct ClusterBucketSpec {
    #[serde(flatten)]
    bucket: BucketSpec,
}

/// Both kinds of bucket, for the one fake.
trait AnyBucket: Managed {
    fn bucket(&self) -> &BucketSpec;
    fn bucket_status(&self) -> Option<&BucketStatus>;
}

impl AnyBucket for Bucket {
    fn bucket(&self) -> &BucketSpec {
        &self.spec
    }
    fn bucket_status(&self) -> Option<&BucketStatus> {
        self.status.as_ref()
    }
}

impl AnyBucket for ClusterBucket {
    fn bucket(&self) -> &BucketSpec {
        &self.spec.bucket
    }
    fn bucket_status(&self) -> Option<&BucketStatus> {
        self.status.as_ref()
    }
}

macro_rules! managed_bucket {
    ($kind:ty) => {
        impl Managed for $kind {
            fn resource_spec(&self) -> Option<&ResourceSpec> {
                Some(&self.bucket().resource)
            }

            fn conditions(&self) -> Vec<Condition> {
                self.bucket_status()
                    .map(|s| s.conditions.clone())
                    .unwrap_or_default()
            }

            fn wants_external(&self) -> bool {
                self.bucket().external != Some(false)
            }
        }
    };
}

managed_bucket!(Bucket);
managed_bucket!(ClusterBucket);

/// Buckets with this annotation get a name the fake chooses at creation (`gen-<name>`).
const GENERATE_NAME: &str = "test.setpoint.dev/generate-name";

/// A bucket outside the API.
#[derive(Clone, Debug, PartialEq)]
struct Remote {
    size: i64,
    region: String,
}

/// The fake outside world: buckets by external name, the calls made, failures to inject (by
/// the managed object's name).
#[derive(Default)]
struct World {
    buckets: Mutex<BTreeMap<String, Remote>>,
    /// (operation, object name) of every call.
    calls: Mutex<Vec<(&'static str, String)>>,
    /// (operation, object name) that fail.
    failing: Mutex<BTreeSet<(&'static str, String)>>,
}

impl World {
    fn call(&self, op: &'static str, bucket: &impl Resource) -> Result<(), ExternalError> {
        let name = bucket.name_any();
        self.calls.lock().push((op, name.clone()));
        if self.failing.lock().contains(&(op, name.clone())) {
            return Err(format!("the bucket service refused to {op} {name}").into());
        }
        Ok(())
    }

    fn fail(&self, op: &'static str, name: &str, on: bool) {
        let key = (op, name.to_owned());
        if on {
            self.failing.lock().insert(key);
        } else {
            self.failing.lock().remove(&key);
        }
    }

    fn count(&self, op: &str, name: &str) -> usize {
        self.calls
            .lock()
            .iter()
            .filter(|(o, n)| *o == op && n == name)
            .count()
    }

    fn get(&self, external: &str) -> Option<Remote> {
        self.buckets.lock().get(external).cloned()
    }
}

struct Fake(Arc<World>);

impl<K: AnyBucket> Connector<K> for Fake {
    type External = FakeClient;

    async fn connect(&self, bucket: &K) -> Result<FakeClient, ExternalError> {
        self.0.call("connect", bucket)?;
        Ok(FakeClient(self.0.clone()))
    }
}

struct FakeClient(Arc<World>);

impl<K: AnyBucket> ExternalClient<K> for FakeClient {
    async fn observe(&self, bucket: &K) -> Result<Observation, ExternalError> {
        self.0.call("observe", bucket)?;
        let name = external_name(bucket);
        let Some(remote) = self.0.get(&name) else {
            return Ok(Observation::missing());
        };
        let wanted = &bucket.bucket().for_provider;
        Ok(Observation {
            up_to_date: wanted.size == remote.size,
            diff: Some(format!("size {} → {}", remote.size, wanted.size)),
            late_initialized: wanted
                .region
                .is_none()
                .then(|| json!({"spec": {"forProvider": {"region": remote.region}}})),
            status: Some(json!({"atProvider": {"size": remote.size}})),
            readiness: if remote.size > 0 {
                Readiness::Available
            } else {
                Readiness::Unavailable("an empty bucket".into())
            },
            connection_details: [("endpoint".to_owned(), format!("bucket://{name}").into())].into(),
            ..Observation::available()
        })
    }

    async fn create(&self, bucket: &K) -> Result<Creation, ExternalError> {
        self.0.call("create", bucket)?;
        let wanted = &bucket.bucket().for_provider;
        let remote = Remote {
            size: wanted.size,
            region: wanted.region.clone().unwrap_or_else(|| "eu-1".into()),
        };
        let generated = bucket
            .annotations()
            .contains_key(GENERATE_NAME)
            .then(|| format!("gen-{}", bucket.name_any()));
        let name = generated.clone().unwrap_or_else(|| external_name(bucket));
        self.0.buckets.lock().insert(name, remote);
        Ok(Creation {
            external_name: generated,
            connection_details: [("password".to_owned(), b"s3cret".to_vec())].into(),
        })
    }

    async fn update(&self, bucket: &K) -> Result<ConnectionDetails, ExternalError> {
        self.0.call("update", bucket)?;
        if let Some(remote) = self.0.buckets.lock().get_mut(&external_name(bucket)) {
            remote.size = bucket.bucket().for_provider.size;
        }
        Ok(ConnectionDetails::new())
    }

    async fn delete(&self, bucket: &K) -> Result<(), ExternalError> {
        self.0.call("delete", bucket)?;
        self.0.buckets.lock().remove(&external_name(bucket));
        Ok(())
    }
}

fn bucket(name: &str, size: i64, resource: ResourceSpec) -> Bucket {
    let mut b = Bucket::new(
        name,
        BucketSpec {
            resource,
            for_provider: BucketParameters { size, region: None },
            external: None,
        },
    );
    b.metadata.namespace = Some(NS.into());
    b
}

/// The bucket's condition `type_` as (status, reason, message).
fn condition_of(b: &impl Managed, type_: &str) -> Option<(String, String, String)> {
    b.conditions()
        .into_iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status, c.reason, c.message))
}

/// The test's server, loop and world.
struct Fixture {
    _env: TestEnv,
    client: Client,
    world: Arc<World>,
    buckets: kube::Api<Bucket>,
    loops: Vec<Loop>,
}

/// A running loop: how to stop it, and its task.
type Loop = (
    oneshot::Sender<()>,
    tokio::task::JoinHandle<Result<(), setpoint_runtime::ControllerError>>,
);

/// Runs the managed-resource loop for buckets of kind `K` against `world`.
fn spawn_loop<K: AnyBucket>(
    client: &Client,
    factory: &InformerFactory,
    world: &Arc<World>,
    name: &str,
) -> Loop {
    let options = ManagedOptions {
        poll_interval: POLL,
        after_create: Duration::from_millis(100),
        ..ManagedOptions::new(name)
    };
    let reconciler =
        ManagedReconciler::new(client.clone(), Fake(world.clone()), options).with_events(
            EventRecorder::new(client.clone(), Reporter::new(name, format!("{name}-0"))),
        );
    let controller = Controller::<K>::new(factory)
        .named(name)
        .predicate(managed::changes());
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(controller.run(reconciler, Arc::new(()), async {
        let _ = stopped.await;
    }));
    (stop, task)
}

impl Fixture {
    async fn start() -> Fixture {
        let env = TestEnv::start().await.expect("test env");
        let client = env.client();
        install_crd(&client, &Bucket::crd(), Duration::from_secs(30))
            .await
            .expect("CRD established");
        install_crd(&client, &ClusterBucket::crd(), Duration::from_secs(30))
            .await
            .expect("CRD established");
        let world = Arc::new(World::default());
        let factory = InformerFactory::new(client.clone());
        let loops = vec![
            spawn_loop::<Bucket>(&client, &factory, &world, "bucket-loop"),
            spawn_loop::<ClusterBucket>(&client, &factory, &world, "cluster-bucket-loop"),
        ];
        Fixture {
            buckets: client.namespaced_api::<Bucket>(NS),
            _env: env,
            client,
            world,
            loops,
        }
    }

    async fn create(&self, b: &Bucket) {
        self.buckets
            .create(&PostParams::default(), b)
            .await
            .expect("create bucket");
    }

    async fn patch(&self, name: &str, patch: serde_json::Value) {
        self.buckets
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("patch bucket");
    }

    /// Waits until bucket `name` satisfies `check`, and returns it.
    async fn until(&self, what: &str, name: &str, check: impl Fn(&Bucket) -> bool) -> Bucket {
        eventually(what, || async {
            let b = self.buckets.get_opt(name).await.ok()??;
            check(&b).then_some(b)
        })
        .await
    }

    async fn until_gone(&self, name: &str) {
        eventually(&format!("{name} is gone"), || async {
            self.buckets
                .get_opt(name)
                .await
                .ok()?
                .is_none()
                .then_some(())
        })
        .await;
    }

    async fn delete(&self, name: &str) {
        self.buckets
            .delete(name, &DeleteParams::default())
            .await
            .expect("delete bucket");
    }

    async fn stop(self) {
        for (stop, task) in self.loops {
            let _ = stop.send(());
            task.await.expect("no panic").expect("clean shutdown");
        }
    }
}

fn is(b: &impl Managed, type_: &str, status: &str, reason: &str) -> bool {
    condition_of(b, type_).is_some_and(|(s, r, _)| s == status && r == reason)
}

fn ready_and_synced(b: &Bucket) -> bool {
    is(b, condition::READY, "True", condition::AVAILABLE)
        && is(b, condition::SYNCED, "True", condition::RECONCILE_SUCCESS)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn managed_loop_should_create_observe_update_and_delete() {
    let f = Fixture::start().await;

    // Create → Ready/Synced, the external name and create annotations, the finalizer, the
    // spec late-initialised, the observed state and the connection Secret.
    let mut happy = bucket("happy", 3, ResourceSpec::default());
    happy.spec.resource.write_connection_secret_to_ref = Some(managed::SecretReference {
        name: "happy-conn".into(),
        namespace: None,
    });
    f.create(&happy).await;
    let b = f
        .until(
            "happy is ready, synced and late-initialised",
            "happy",
            |b| ready_and_synced(b) && b.spec.for_provider.region.is_some(),
        )
        .await;
    assert_eq!(b.spec.for_provider.region.as_deref(), Some("eu-1"));
    assert_eq!(b.finalizers(), [managed::FINALIZER.to_owned()]);
    let annotations = b.annotations();
    assert_eq!(annotations[managed::EXTERNAL_NAME], "happy");
    assert!(annotations.contains_key(managed::EXTERNAL_CREATE_PENDING));
    assert!(annotations.contains_key(managed::EXTERNAL_CREATE_SUCCEEDED));
    assert!(!annotations.contains_key(managed::EXTERNAL_CREATE_FAILED));
    let status = b.status.as_ref().expect("status");
    assert_eq!(status.at_provider, Some(BucketObservation { size: 3 }));
    assert!(status
        .conditions
        .iter()
        .all(|c| c.observed_generation == b.metadata.generation));
    assert_eq!(
        f.world.get("happy"),
        Some(Remote {
            size: 3,
            region: "eu-1".into()
        })
    );
    assert_eq!(f.world.count("create", "happy"), 1, "created once");
    let secret = f
        .client
        .namespaced_api::<Secret>(NS)
        .get("happy-conn")
        .await
        .expect("connection secret");
    assert_eq!(
        secret.type_.as_deref(),
        Some(managed::CONNECTION_SECRET_TYPE)
    );
    let data = secret.data.clone().unwrap_or_default();
    assert_eq!(data["password"].0, b"s3cret");
    assert_eq!(data["endpoint"].0, b"bucket://happy");
    let owner = &secret.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), Some(&owner.uid)),
        ("Bucket", b.meta().uid.as_ref())
    );

    eventually("a CreatedExternalResource event regards happy", || async {
        let events = f
            .client
            .namespaced_api::<Event>(NS)
            .list(&ListParams::default())
            .await
            .ok()?;
        events
            .items
            .iter()
            .any(|e| {
                e.reason.as_deref() == Some("CreatedExternalResource")
                    && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("happy")
            })
            .then_some(())
    })
    .await;

    // A spec change is applied at once; drift behind the loop's back at the next observation.
    f.patch("happy", json!({"spec": {"forProvider": {"size": 4}}}))
        .await;
    eventually("the remote bucket follows the spec", || async {
        (f.world.get("happy")?.size == 4).then_some(())
    })
    .await;
    if let Some(remote) = f.world.buckets.lock().get_mut("happy") {
        remote.size = 9;
    }
    eventually("the drift is corrected", || async {
        (f.world.get("happy")?.size == 4).then_some(())
    })
    .await;
    assert!(f.world.count("update", "happy") >= 2);
    let again = f
        .client
        .namespaced_api::<Secret>(NS)
        .get("happy-conn")
        .await
        .expect("connection secret");
    assert_eq!(
        again.metadata.resource_version, secret.metadata.resource_version,
        "an unchanged Secret is not written again"
    );

    // External errors: Synced=False with the message, then recovery.
    f.world.fail("observe", "happy", true);
    let b = f
        .until("happy's observe failure is reported", "happy", |b| {
            is(b, condition::SYNCED, "False", condition::RECONCILE_ERROR)
        })
        .await;
    let (_, _, message) = condition_of(&b, condition::SYNCED).expect("synced");
    assert_eq!(
        message,
        "observe: the bucket service refused to observe happy"
    );
    f.world.fail("observe", "happy", false);
    f.until("happy recovers", "happy", ready_and_synced).await;

    // Delete: the external bucket goes, then the finalizer, then the object.
    f.delete("happy").await;
    f.until_gone("happy").await;
    assert_eq!(f.world.get("happy"), None);
    assert_eq!(f.world.count("delete", "happy"), 1);

    f.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn managed_loop_should_guard_creation_and_honour_policies() {
    let f = Fixture::start().await;

    // An external-name annotation is honoured.
    let mut named = bucket("named", 2, ResourceSpec::default());
    named.metadata.annotations =
        Some([(managed::EXTERNAL_NAME.to_owned(), "remote-x".to_owned())].into());
    f.create(&named).await;
    f.until("named is ready", "named", ready_and_synced).await;
    assert!(f.world.get("remote-x").is_some());
    assert!(f.world.get("named").is_none());

    // A name the outside world chose at creation is recorded.
    let mut generated = bucket("generated", 2, ResourceSpec::default());
    generated.metadata.annotations = Some([(GENERATE_NAME.to_owned(), "true".to_owned())].into());
    f.create(&generated).await;
    let b = f
        .until("generated is ready", "generated", ready_and_synced)
        .await;
    assert_eq!(b.annotations()[managed::EXTERNAL_NAME], "gen-generated");
    assert!(f.world.get("gen-generated").is_some());
    assert_eq!(f.world.count("create", "generated"), 1);

    // A create pending without a result blocks creation until a person removes the mark.
    let mut stuck = bucket("stuck", 2, ResourceSpec::default());
    stuck.metadata.annotations = Some(
        [(
            managed::EXTERNAL_CREATE_PENDING.to_owned(),
            Utc::now().to_rfc3339(),
        )]
        .into(),
    );
    f.create(&stuck).await;
    let b = f
        .until("stuck says it cannot tell", "stuck", |b| {
            is(b, condition::SYNCED, "False", condition::RECONCILE_ERROR)
        })
        .await;
    let (_, _, message) = condition_of(&b, condition::SYNCED).expect("synced");
    assert!(
        message.starts_with("cannot determine creation result"),
        "{message}"
    );
    assert_eq!(f.world.count("create", "stuck"), 0, "no second create");
    assert_eq!(
        f.world.count("connect", "stuck"),
        0,
        "blocked before connecting"
    );
    f.patch(
        "stuck",
        json!({"metadata": {"annotations": {managed::EXTERNAL_CREATE_PENDING: null}}}),
    )
    .await;
    f.until("stuck is created once released", "stuck", ready_and_synced)
        .await;
    assert_eq!(f.world.count("create", "stuck"), 1);

    // A failing create: -failed, Synced=False, retried; then it succeeds.
    f.world.fail("create", "flaky", true);
    f.create(&bucket("flaky", 2, ResourceSpec::default())).await;
    let b = f
        .until("flaky's create failure is recorded", "flaky", |b| {
            b.annotations()
                .contains_key(managed::EXTERNAL_CREATE_FAILED)
                && is(b, condition::SYNCED, "False", condition::RECONCILE_ERROR)
        })
        .await;
    let (_, _, message) = condition_of(&b, condition::SYNCED).expect("synced");
    assert_eq!(
        message,
        "create: the bucket service refused to create flaky"
    );
    assert!(is(&b, condition::READY, "False", condition::CREATING));
    eventually("flaky's create is retried", || async {
        f.world.count("create", "flaky") >= 2
    })
    .await;
    f.world.fail("create", "flaky", false);
    f.until("flaky is created at last", "flaky", ready_and_synced)
        .await;

    // Observe-only: a bucket that exists is reported, never updated or deleted; one that does
    // not is never created.
    let observe_only = ResourceSpec {
        management_policies: Some(vec![managed::ManagementAction::Observe]),
        ..ResourceSpec::default()
    };
    f.world.buckets.lock().insert(
        "seen".into(),
        Remote {
            size: 5,
            region: "us-2".into(),
        },
    );
    f.create(&bucket("seen", 7, observe_only.clone())).await;
    let b = f
        .until("seen is observed", "seen", |b| {
            ready_and_synced(b)
                && b.status.as_ref().and_then(|s| s.at_provider.clone())
                    == Some(BucketObservation { size: 5 })
        })
        .await;
    assert_eq!(b.spec.for_provider.region, None, "no late initialisation");
    f.create(&bucket("unseen", 1, observe_only)).await;
    let b = f
        .until("unseen is reported missing", "unseen", |b| {
            is(b, condition::SYNCED, "False", condition::RECONCILE_ERROR)
        })
        .await;
    assert_eq!(
        condition_of(&b, condition::SYNCED).map(|c| c.2).as_deref(),
        Some("external resource does not exist")
    );
    f.delete("seen").await;
    f.until_gone("seen").await;
    f.delete("unseen").await;
    f.until_gone("unseen").await;
    assert_eq!(f.world.get("seen").map(|r| r.size), Some(5), "untouched");
    for op in ["create", "update", "delete"] {
        assert_eq!(
            f.world.count(op, "seen") + f.world.count(op, "unseen"),
            0,
            "{op}"
        );
    }

    // deletionPolicy: Orphan leaves the external bucket.
    let orphan = ResourceSpec {
        deletion_policy: Some(managed::DeletionPolicy::Orphan),
        ..ResourceSpec::default()
    };
    f.create(&bucket("orphan", 1, orphan)).await;
    f.until("orphan is ready", "orphan", ready_and_synced).await;
    f.delete("orphan").await;
    f.until_gone("orphan").await;
    assert!(f.world.get("orphan").is_some());
    assert_eq!(f.world.count("delete", "orphan"), 0);

    f.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn managed_loop_should_pause_and_release() {
    let f = Fixture::start().await;

    // Paused: Synced=False/ReconcilePaused, and nothing reaches the outside world.
    f.create(&bucket("calm", 2, ResourceSpec::default())).await;
    f.until("calm is ready", "calm", ready_and_synced).await;
    f.patch(
        "calm",
        json!({"metadata": {"annotations": {managed::PAUSED: "true"}}}),
    )
    .await;
    f.until("calm is paused", "calm", |b| {
        is(b, condition::SYNCED, "False", condition::RECONCILE_PAUSED)
    })
    .await;
    let connects = f.world.count("connect", "calm");
    f.patch("calm", json!({"spec": {"forProvider": {"size": 6}}}))
        .await;
    // A negative check needs a wait: several poll intervals.
    tokio::time::sleep(POLL * 4).await;
    assert_eq!(f.world.count("connect", "calm"), connects, "paused");
    assert_eq!(f.world.get("calm").map(|r| r.size), Some(2));
    f.patch(
        "calm",
        json!({"metadata": {"annotations": {managed::PAUSED: null}}}),
    )
    .await;
    eventually("calm is updated once unpaused", || async {
        (f.world.get("calm")?.size == 6).then_some(())
    })
    .await;

    // No longer wanting an external bucket: it is deleted, the finalizer and the conditions
    // go, the object stays.
    f.until("calm is synced", "calm", ready_and_synced).await;
    f.patch("calm", json!({"spec": {"external": false}})).await;
    let b = f
        .until("calm is released", "calm", |b| b.finalizers().is_empty())
        .await;
    assert_eq!(f.world.get("calm"), None);
    assert_eq!(condition_of(&b, condition::READY), None);
    assert_eq!(condition_of(&b, condition::SYNCED), None);
    // Deleting it now involves the loop no more.
    f.delete("calm").await;
    f.until_gone("calm").await;
    assert_eq!(f.world.count("delete", "calm"), 1);

    // A cluster-scoped kind, its connection Secret in the namespace its reference names.
    let clustered = kube::Api::<ClusterBucket>::all(f.client.kube().clone());
    let mut spec = bucket("global", 1, ResourceSpec::default()).spec;
    spec.resource.write_connection_secret_to_ref = Some(managed::SecretReference {
        name: "global-conn".into(),
        namespace: Some(NS.into()),
    });
    clustered
        .create(
            &PostParams::default(),
            &ClusterBucket::new("global", ClusterBucketSpec { bucket: spec }),
        )
        .await
        .expect("create cluster bucket");
    let global = eventually("global is ready", || async {
        let b = clustered.get_opt("global").await.ok()??;
        (is(&b, condition::READY, "True", condition::AVAILABLE)
            && is(&b, condition::SYNCED, "True", condition::RECONCILE_SUCCESS))
        .then_some(b)
    })
    .await;
    let secret = f
        .client
        .namespaced_api::<Secret>(NS)
        .get("global-conn")
        .await
        .expect("connection secret");
    assert_eq!(
        secret.owner_references()[0].uid,
        global.meta().uid.clone().unwrap_or_default()
    );
    clustered
        .delete("global", &DeleteParams::default())
        .await
        .expect("delete cluster bucket");
    eventually("global is gone", || async {
        clustered
            .get_opt("global")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
    assert_eq!(f.world.get("global"), None);

    f.stop().await;
}

/// A fake balancer service for LoadBalancer Services: addresses by Service name.
#[derive(Default)]
struct Balancers(Mutex<BTreeMap<String, String>>);

struct BalancerConnector(Arc<Balancers>);

impl Connector<Service> for BalancerConnector {
    type External = BalancerClient;

    async fn connect(&self, _: &Service) -> Result<BalancerClient, ExternalError> {
        Ok(BalancerClient(self.0.clone()))
    }
}

struct BalancerClient(Arc<Balancers>);

impl ExternalClient<Service> for BalancerClient {
    async fn observe(&self, service: &Service) -> Result<Observation, ExternalError> {
        Ok(match self.0 .0.lock().get(&service.name_any()) {
            Some(ip) => Observation {
                status: Some(json!({"loadBalancer": {"ingress": [{"ip": ip}]}})),
                ..Observation::available()
            },
            None => Observation {
                status: Some(json!({"loadBalancer": {"ingress": null}})),
                ..Observation::missing()
            },
        })
    }

    async fn create(&self, service: &Service) -> Result<Creation, ExternalError> {
        self.0
             .0
            .lock()
            .insert(service.name_any(), "127.0.100.1".to_owned());
        Ok(Creation::default())
    }

    async fn update(&self, _: &Service) -> Result<ConnectionDetails, ExternalError> {
        Ok(ConnectionDetails::new())
    }

    async fn delete(&self, service: &Service) -> Result<(), ExternalError> {
        self.0 .0.lock().remove(&service.name_any());
        Ok(())
    }
}

fn service(name: &str, type_: &str) -> Service {
    Service {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            namespace: Some(NS.into()),
            ..Default::default()
        },
        spec: Some(ServiceSpec {
            type_: Some(type_.into()),
            ports: Some(vec![ServicePort {
                port: 80,
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn ingress(s: &Service) -> Option<String> {
    s.status
        .as_ref()?
        .load_balancer
        .as_ref()?
        .ingress
        .as_ref()?
        .first()?
        .ip
        .clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn managed_loop_should_serve_load_balancer_services() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let balancers = Arc::new(Balancers::default());
    let factory = InformerFactory::new(client.clone());
    let reconciler = ManagedReconciler::new(
        client.clone(),
        BalancerConnector(balancers.clone()),
        ManagedOptions {
            poll_interval: POLL,
            ..ManagedOptions::new("service-lb")
        },
    );
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(
        Controller::<Service>::new(&factory)
            .named("service-lb")
            .predicate(managed::changes())
            .run(reconciler, Arc::new(()), async {
                let _ = stopped.await;
            }),
    );
    let services = client.namespaced_api::<Service>(NS);
    let create = |s: Service| {
        let services = services.clone();
        async move {
            services
                .create(&PostParams::default(), &s)
                .await
                .expect("create service");
        }
    };
    create(service("plain", "ClusterIP")).await;
    create(service("web", "LoadBalancer")).await;
    let web = eventually("web has an ingress address and is ready", || async {
        let s = services.get("web").await.ok()?;
        (ingress(&s).is_some()
            && is(&s, condition::READY, "True", condition::AVAILABLE)
            && is(&s, condition::SYNCED, "True", condition::RECONCILE_SUCCESS))
        .then_some(s)
    })
    .await;
    assert_eq!(ingress(&web).as_deref(), Some("127.0.100.1"));
    assert_eq!(web.finalizers(), [managed::SERVICE_LB_FINALIZER.to_owned()]);
    let plain = services.get("plain").await.expect("plain");
    assert!(
        plain.finalizers().is_empty(),
        "a ClusterIP Service is left alone"
    );
    assert!(balancers.0.lock().get("plain").is_none());

    // A Service that stops being a LoadBalancer is released (its class may not change while
    // it is one: the API server refuses that, as kube-apiserver does). Its ports are given
    // again without the node port it had (Setpoint does not yet drop it on a type change as
    // kube-apiserver does).
    services
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"type": "ClusterIP", "ports": [{"port": 80}]}})),
        )
        .await
        .expect("change type");
    let web = eventually("web is released", || async {
        let s = services.get("web").await.ok()?;
        (s.finalizers().is_empty() && ingress(&s).is_none()).then_some(s)
    })
    .await;
    assert_eq!(condition_of(&web, condition::READY), None);
    assert!(balancers.0.lock().is_empty());

    let _ = stop.send(());
    task.await.expect("no panic").expect("clean shutdown");
}

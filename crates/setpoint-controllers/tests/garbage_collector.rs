//! The garbage collector against a real in-process API server: background, foreground and
//! orphan propagation, dangling owner references, owners not (yet) in the collector's cache,
//! cluster-scoped owners of namespaced dependents, references across namespaces, and owners of a
//! custom kind defined after the collector started.
//!
//! Real time (the server's store runs on its own thread): every wait polls with a deadline.

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Event, Namespace, Node, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, Resource, ResourceExt};
use serde_json::json;
use setpoint_controllers::{LoopContext, LoopSelection};
use setpoint_testenv::TestEnv;
use tokio::time::{sleep, Instant};
use tokio_util::sync::CancellationToken;

const NS: &str = "default";

/// The server and a running garbage collector (stopped on drop).
struct Gc {
    env: TestEnv,
    stop: CancellationToken,
}

impl Gc {
    async fn start() -> Gc {
        let env = TestEnv::start().await.expect("test env starts");
        let stop = CancellationToken::new();
        let ctx = LoopContext::new(env.client());
        let selection: LoopSelection = "garbage-collector".parse().expect("known loop");
        let token = stop.clone();
        tokio::spawn(async move { setpoint_controllers::run(ctx, &selection, token).await });
        Gc { env, stop }
    }

    fn configmaps(&self, ns: &str) -> Api<ConfigMap> {
        self.env.client().namespaced_api::<ConfigMap>(ns)
    }

    /// Creates a config map in `ns` owned by `owners`.
    async fn configmap(&self, ns: &str, name: &str, owners: Vec<OwnerReference>) -> ConfigMap {
        let cm = ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.into()),
                owner_references: (!owners.is_empty()).then_some(owners),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        };
        self.configmaps(ns)
            .create(&PostParams::default(), &cm)
            .await
            .expect("config map created")
    }

    async fn exists(&self, ns: &str, name: &str) -> Option<ConfigMap> {
        self.configmaps(ns).get_opt(name).await.expect("get works")
    }

    /// Waits until the config map is gone.
    async fn until_gone(&self, ns: &str, name: &str) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.exists(ns, name).await.is_some() {
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {ns}/{name} to go"
            );
            sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits until the config map is marked for deletion (and still there).
    async fn until_deleting(&self, ns: &str, name: &str) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let cm = self.exists(ns, name).await.expect("held by its finalizer");
            if cm.metadata.deletion_timestamp.is_some() {
                return;
            }
            assert!(Instant::now() < deadline, "{ns}/{name} never deleted");
            sleep(Duration::from_millis(20)).await;
        }
    }

    /// Gives the config map (in `NS`) a finalizer of ours that holds its deletion up.
    async fn hold(&self, name: &str) {
        self.configmaps(NS)
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"finalizers": ["test.setpoint.dev/hold"]}})),
            )
            .await
            .expect("finalizer added");
    }

    /// Removes the finalizer [`Gc::hold`] added.
    async fn release(&self, name: &str) {
        self.configmaps(NS)
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"finalizers": null}})),
            )
            .await
            .expect("finalizer removed");
    }

    /// Proves the collector has processed everything created so far: a fresh dangling
    /// dependent created now is collected (the queue is worked in order of arrival only
    /// loosely, so this is a liveness fence, not an ordering guarantee; callers also wait).
    async fn fence(&self, name: &str) {
        self.configmap(
            NS,
            name,
            vec![reference_to("ConfigMap", "v1", "nobody", "no-such-uid")],
        )
        .await;
        self.until_gone(NS, name).await;
    }
}

impl Drop for Gc {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

fn reference_to(kind: &str, api_version: &str, name: &str, uid: &str) -> OwnerReference {
    OwnerReference {
        api_version: api_version.into(),
        kind: kind.into(),
        name: name.into(),
        uid: uid.into(),
        block_owner_deletion: None,
        controller: None,
    }
}

/// An owner reference to `owner`.
fn owned_by<K: Resource<DynamicType = ()>>(owner: &K) -> OwnerReference {
    reference_to(
        &K::kind(&()),
        &K::api_version(&()),
        &owner.name_any(),
        owner
            .meta()
            .uid
            .as_deref()
            .expect("created objects have uids"),
    )
}

fn blocking(mut r: OwnerReference) -> OwnerReference {
    r.block_owner_deletion = Some(true);
    r
}

fn delete_with(policy: kube::api::PropagationPolicy) -> DeleteParams {
    DeleteParams {
        propagation_policy: Some(policy),
        ..DeleteParams::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_delete_should_remove_dependents_transitively() {
    let gc = Gc::start().await;
    let owner = gc.configmap(NS, "owner", vec![]).await;
    let child = gc.configmap(NS, "child", vec![owned_by(&owner)]).await;
    gc.configmap(NS, "grandchild", vec![owned_by(&child)]).await;
    gc.configmaps(NS)
        .delete("owner", &DeleteParams::default())
        .await
        .expect("owner deleted");
    gc.until_gone(NS, "child").await;
    gc.until_gone(NS, "grandchild").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreground_delete_should_keep_owner_until_blocking_dependents_are_gone() {
    let gc = Gc::start().await;
    let owner = gc.configmap(NS, "owner", vec![]).await;
    gc.configmap(NS, "child", vec![blocking(owned_by(&owner))])
        .await;
    gc.hold("child").await;
    gc.configmaps(NS)
        .delete(
            "owner",
            &delete_with(kube::api::PropagationPolicy::Foreground),
        )
        .await
        .expect("owner deleted");

    // The collector deletes the child (which its finalizer holds)…
    gc.until_deleting(NS, "child").await;
    // …and the owner waits for it, with the foregroundDeletion finalizer.
    gc.fence("fence").await;
    let waiting = gc
        .exists(NS, "owner")
        .await
        .expect("owner waits for its child");
    assert!(waiting.metadata.deletion_timestamp.is_some());
    assert_eq!(
        waiting.metadata.finalizers.as_deref(),
        Some(&["foregroundDeletion".to_string()][..])
    );

    gc.release("child").await;
    gc.until_gone(NS, "child").await;
    gc.until_gone(NS, "owner").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreground_delete_should_delete_dependents_of_dependents_first() {
    let gc = Gc::start().await;
    let owner = gc.configmap(NS, "owner", vec![]).await;
    let child = gc
        .configmap(NS, "child", vec![blocking(owned_by(&owner))])
        .await;
    gc.configmap(NS, "grandchild", vec![blocking(owned_by(&child))])
        .await;
    gc.hold("grandchild").await;
    gc.configmaps(NS)
        .delete(
            "owner",
            &delete_with(kube::api::PropagationPolicy::Foreground),
        )
        .await
        .expect("owner deleted");
    gc.until_deleting(NS, "grandchild").await;
    gc.fence("fence").await;
    // The child, having a dependent of its own, was deleted in the foreground too.
    for name in ["child", "owner"] {
        let waiting = gc.exists(NS, name).await.expect("waits for the grandchild");
        assert_eq!(
            waiting.metadata.finalizers.as_deref(),
            Some(&["foregroundDeletion".to_string()][..]),
            "{name}"
        );
    }
    gc.release("grandchild").await;
    gc.until_gone(NS, "grandchild").await;
    gc.until_gone(NS, "child").await;
    gc.until_gone(NS, "owner").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orphan_delete_should_keep_dependents_without_the_reference() {
    let gc = Gc::start().await;
    let owner = gc.configmap(NS, "owner", vec![]).await;
    let other = gc.configmap(NS, "other-owner", vec![]).await;
    gc.configmap(NS, "child", vec![owned_by(&owner), owned_by(&other)])
        .await;
    gc.configmap(NS, "only-child", vec![owned_by(&owner)]).await;
    gc.configmaps(NS)
        .delete("owner", &delete_with(kube::api::PropagationPolicy::Orphan))
        .await
        .expect("owner deleted");
    gc.until_gone(NS, "owner").await;
    gc.fence("fence").await;
    let child = gc
        .exists(NS, "child")
        .await
        .expect("child orphaned, not deleted");
    assert_eq!(
        child.metadata.owner_references,
        Some(vec![owned_by(&other)]),
        "only the reference to the deleted owner is removed"
    );
    let only = gc
        .exists(NS, "only-child")
        .await
        .expect("only-child orphaned, not deleted");
    assert_eq!(only.metadata.owner_references, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dependent_of_missing_owner_should_be_deleted() {
    let gc = Gc::start().await;
    gc.configmap(
        NS,
        "dangling",
        vec![reference_to("ConfigMap", "v1", "ghost", "0000-no-such-uid")],
    )
    .await;
    gc.until_gone(NS, "dangling").await;
    // An object holding the owner's name with another uid is not the owner.
    gc.configmap(NS, "impostor", vec![]).await;
    gc.configmap(
        NS,
        "fooled",
        vec![reference_to(
            "ConfigMap",
            "v1",
            "impostor",
            "0000-other-uid",
        )],
    )
    .await;
    gc.until_gone(NS, "fooled").await;
    assert!(gc.exists(NS, "impostor").await.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dependent_should_survive_owner_not_yet_in_cache() {
    let gc = Gc::start().await;
    // Owner and dependent back to back: the dependent may reach the collector first.
    let owner = gc.configmap(NS, "owner", vec![]).await;
    gc.configmap(NS, "child", vec![owned_by(&owner)]).await;
    // An owner the collector never caches (events are not watched): it exists, so its
    // dependent must stay however long it is unseen.
    let event = gc
        .env
        .client()
        .namespaced_api::<Event>(NS)
        .create(
            &PostParams::default(),
            &Event {
                metadata: ObjectMeta {
                    name: Some("unwatched-owner".into()),
                    ..ObjectMeta::default()
                },
                involved_object: ObjectReference::default(),
                ..Event::default()
            },
        )
        .await
        .expect("event created");
    gc.configmap(NS, "child-of-event", vec![owned_by(&event)])
        .await;
    gc.fence("fence-1").await;
    sleep(Duration::from_millis(500)).await;
    gc.fence("fence-2").await;
    assert!(gc.exists(NS, "child").await.is_some(), "child kept");
    assert!(
        gc.exists(NS, "child-of-event").await.is_some(),
        "child of an uncached owner kept"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_scoped_owner_should_own_namespaced_dependents() {
    let gc = Gc::start().await;
    let nodes = gc.env.client().api::<Node>();
    let node = nodes
        .create(
            &PostParams::default(),
            &Node {
                metadata: ObjectMeta {
                    name: Some("node-1".into()),
                    ..ObjectMeta::default()
                },
                ..Node::default()
            },
        )
        .await
        .expect("node created");
    let namespace = gc
        .env
        .client()
        .api::<Namespace>()
        .get("kube-system")
        .await
        .expect("kube-system exists");
    gc.configmap(NS, "of-node", vec![owned_by(&node)]).await;
    gc.configmap(NS, "of-namespace", vec![owned_by(&namespace)])
        .await;
    gc.configmap(
        NS,
        "of-missing-node",
        vec![reference_to("Node", "v1", "node-2", "0000-no-such-node")],
    )
    .await;
    gc.until_gone(NS, "of-missing-node").await;
    assert!(gc.exists(NS, "of-node").await.is_some());
    assert!(gc.exists(NS, "of-namespace").await.is_some());

    nodes
        .delete("node-1", &DeleteParams::default())
        .await
        .expect("node deleted");
    gc.until_gone(NS, "of-node").await;
    gc.fence("fence").await;
    assert!(gc.exists(NS, "of-namespace").await.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespaced_owner_should_not_own_objects_in_another_namespace() {
    let gc = Gc::start().await;
    let owner = gc.configmap(NS, "owner", vec![]).await;
    // The reference names an owner that exists, but in another namespace than the dependent's.
    gc.configmap("kube-public", "elsewhere", vec![owned_by(&owner)])
        .await;
    gc.until_gone("kube-public", "elsewhere").await;
    assert!(gc.exists(NS, "owner").await.is_some());
}

/// A custom kind defined after the collector started, owning a config map: the collector
/// rediscovers when a CRD changes, so it watches the new kind at once and collects the config
/// map after its owner is deleted. Before the CRD watch this waited for the periodic
/// rediscovery (30 s) plus the backoff of the owner's failed lookups; the deadline here is
/// half the rediscovery period, so it fails if only the periodic rediscovery found the kind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_kind_defined_after_start_should_own_dependents() {
    let gc = Gc::start().await;
    // The collector is running and has its initial graph once it collects a dangling object.
    gc.configmap(
        NS,
        "dangling",
        vec![reference_to("ConfigMap", "v1", "ghost", "0000-no-such-uid")],
    )
    .await;
    gc.until_gone(NS, "dangling").await;

    let crd = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.gc.setpoint.dev"},
        "spec": {
            "group": "gc.setpoint.dev",
            "scope": "Namespaced",
            "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}}
            }]
        }
    }))
    .expect("CRD");
    setpoint_runtime::install_crd(&gc.env.client(), &crd, Duration::from_secs(30))
        .await
        .expect("CRD established");
    let resource = kube::api::ApiResource {
        group: "gc.setpoint.dev".into(),
        version: "v1".into(),
        api_version: "gc.setpoint.dev/v1".into(),
        kind: "Gadget".into(),
        plural: "gadgets".into(),
    };
    let gadgets = gc.env.client().dynamic_api(&resource, Some(NS));
    let gadget = gadgets
        .create(
            &PostParams::default(),
            &kube::api::DynamicObject::new("g1", &resource),
        )
        .await
        .expect("gadget created");
    let uid = gadget.metadata.uid.clone().expect("uid");
    gc.configmap(
        NS,
        "gadget-part",
        vec![reference_to("Gadget", "gc.setpoint.dev/v1", "g1", &uid)],
    )
    .await;
    gadgets
        .delete("g1", &DeleteParams::default())
        .await
        .expect("gadget deleted");
    let deadline = Instant::now() + Duration::from_secs(15);
    while gc.exists(NS, "gadget-part").await.is_some() {
        assert!(
            Instant::now() < deadline,
            "the Gadget's config map was not collected within half the rediscovery period"
        );
        sleep(Duration::from_millis(20)).await;
    }
}

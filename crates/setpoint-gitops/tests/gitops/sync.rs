//! Sync: apply, prune, drift, health, dependencies (tests owned by the sync loop).
//!
//! The sync loop runs against an in-process API server; each test plays the source loop
//! itself: it writes an artifact directory into the artifact store and sets the
//! GitRepository's `status.artifact` (as contracts.md says the source loop does). Real time,
//! polling with generous deadlines; no assertion on how long anything took.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::api::events::v1::Event;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{CustomResourceExt, ResourceExt};
use serde_json::{json, Value};
use setpoint_gitops::kinds::{GitRepository, Sync, RECONCILE_REQUESTED_AT, SYNC_NAME_LABEL};
use setpoint_gitops::{ArtifactStore, GitopsContext};
use setpoint_runtime::{install_crd, Client, ControllerError, InformerFactory, Metrics};
use setpoint_testenv::{eventually, Running, TestEnv};

const NS: &str = "default";

/// The sync loop over a fresh API server, and a fake source loop.
struct Harness {
    _env: TestEnv,
    client: Client,
    store: ArtifactStore,
    _root: tempfile::TempDir,
    running: Running<ControllerError>,
    commits: AtomicUsize,
}

impl Harness {
    async fn start() -> Harness {
        let env = TestEnv::start().await.expect("test env");
        let client = env.client();
        for crd in [GitRepository::crd(), Sync::crd()] {
            install_crd(&client, &crd, Duration::from_secs(30))
                .await
                .expect("CRD established");
        }
        let root = tempfile::tempdir().expect("temp dir");
        let store = ArtifactStore::new(root.path());
        let ctx = GitopsContext {
            client: client.clone(),
            factory: InformerFactory::new(client.clone()),
            metrics: Metrics::new(),
            artifacts: store.clone(),
        };
        let running = Running::spawn(move |token| setpoint_gitops::sync::run(ctx, token));
        Harness {
            _env: env,
            client,
            store,
            _root: root,
            running,
            commits: AtomicUsize::new(0),
        }
    }

    async fn stop(self) {
        self.running.stop().await;
    }

    /// Creates the GitRepository `name` (nothing fetches it: `publish` plays the source).
    async fn repository(&self, name: &str) {
        let repo: GitRepository = serde_json::from_value(json!({
            "apiVersion": "gitops.setpoint.dev/v1", "kind": "GitRepository",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"url": format!("file:///nowhere/{name}"), "interval": "1h"}
        }))
        .expect("repository");
        kube::Api::<GitRepository>::namespaced(self.client.kube().clone(), NS)
            .create(&PostParams::default(), &repo)
            .await
            .expect("create repository");
    }

    /// Writes `files` as a new artifact of `repo` and points its status at it, as the source
    /// loop would; returns the revision.
    async fn publish(&self, repo: &str, files: &[(&str, &str)]) -> String {
        let n = self.commits.fetch_add(1, Ordering::Relaxed);
        let sha = format!("{n:040x}");
        let path = ArtifactStore::relative_path(NS, repo, &sha);
        let dir = self.store.root().join(&path);
        for (file, text) in files {
            let file = dir.join(file);
            std::fs::create_dir_all(file.parent().expect("parent")).expect("mkdir");
            std::fs::write(file, text).expect("write");
        }
        std::fs::create_dir_all(&dir).expect("mkdir");
        let revision = format!("main@sha1:{sha}");
        kube::Api::<GitRepository>::namespaced(self.client.kube().clone(), NS)
            .patch_status(
                repo,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {
                    "artifact": {"path": path, "revision": revision,
                        "digest": format!("sha256:{sha}"), "lastUpdateTime": "2026-01-01T00:00:00Z"},
                    "conditions": [{"type": "Ready", "status": "True", "reason": "Succeeded",
                        "message": format!("stored artifact for revision '{revision}'"),
                        "lastTransitionTime": "2026-01-01T00:00:00Z"}]
                }})),
            )
            .await
            .expect("repository status");
        revision
    }

    /// The artifact directory of a revision `publish` returned.
    fn artifact_dir(&self, repo: &str, revision: &str) -> std::path::PathBuf {
        let sha = revision
            .rsplit_once("sha1:")
            .map(|(_, sha)| sha)
            .unwrap_or_default();
        self.store
            .root()
            .join(ArtifactStore::relative_path(NS, repo, sha))
    }

    /// Creates a Sync of `repo` with `spec` merged over the defaults (interval 1h, prune).
    async fn sync(&self, name: &str, repo: &str, spec: Value) {
        let mut base = json!({"sourceRef": {"kind": "GitRepository", "name": repo},
            "interval": "1h", "prune": true});
        if let (Some(base), Some(extra)) = (base.as_object_mut(), spec.as_object()) {
            base.extend(extra.clone());
        }
        let sync: Sync = serde_json::from_value(json!({
            "apiVersion": "gitops.setpoint.dev/v1", "kind": "Sync",
            "metadata": {"name": name, "namespace": NS}, "spec": base
        }))
        .expect("sync");
        self.syncs()
            .create(&PostParams::default(), &sync)
            .await
            .expect("create sync");
    }

    fn syncs(&self) -> kube::Api<Sync> {
        kube::Api::namespaced(self.client.kube().clone(), NS)
    }

    fn configmaps(&self, namespace: &str) -> kube::Api<ConfigMap> {
        kube::Api::namespaced(self.client.kube().clone(), namespace)
    }

    /// Waits until the Sync's `Ready` has `status` and `reason` (and `lastAttemptedRevision`
    /// is `revision`, if given); returns the Sync.
    async fn until_ready(
        &self,
        name: &str,
        status: &str,
        reason: &str,
        revision: Option<&str>,
    ) -> Sync {
        let api = self.syncs();
        eventually(&format!("Sync {name} Ready={status} ({reason})"), || {
            let api = api.clone();
            async move {
                let sync = api.get(name).await.map_err(|e| e.to_string())?;
                let st = sync.status.clone().unwrap_or_default();
                let ready = st.conditions.iter().find(|c| c.type_ == "Ready");
                let seen = format!("{ready:?}, attempted {:?}", st.last_attempted_revision);
                match ready {
                    Some(c)
                        if c.status == status
                            && c.reason == reason
                            && revision.is_none_or(|r| {
                                st.last_attempted_revision.as_deref() == Some(r)
                            }) =>
                    {
                        Ok(sync)
                    }
                    _ => Err(seen),
                }
            }
        })
        .await
    }

    /// Sets the reconcile-request annotation and waits until it is handled.
    async fn reconcile_now(&self, name: &str, value: &str) -> Sync {
        self.syncs()
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(
                    json!({"metadata": {"annotations": {RECONCILE_REQUESTED_AT: value}}}),
                ),
            )
            .await
            .expect("annotate");
        let api = self.syncs();
        eventually(&format!("Sync {name} handled request {value}"), || {
            let api = api.clone();
            async move {
                let sync = api.get(name).await.ok()?;
                (sync.status.as_ref()?.last_handled_reconcile_at.as_deref() == Some(value))
                    .then_some(sync)
            }
        })
        .await
    }
}

fn configmap(name: &str, data: &str) -> String {
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  key: {data}\n")
}

fn ready_message(sync: &Sync) -> String {
    let status = sync.status.as_ref().expect("status");
    let ready = status
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .expect("Ready");
    ready.message.clone()
}

fn inventory_ids(sync: &Sync) -> Vec<String> {
    let status = sync.status.as_ref().expect("status");
    status
        .inventory
        .as_ref()
        .map(|i| i.entries.iter().map(|e| e.id.clone()).collect())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sync_should_apply_label_inventory_prune_and_then_write_nothing() {
    let h = Harness::start().await;
    h.repository("repo").await;
    let first = h
        .publish(
            "repo",
            &[
                ("ns.yaml", "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: apps\n"),
                ("apps/a.yaml", &format!("{}---\n{}", configmap("a", "one"), configmap("b", "one"))),
                (
                    "apps/kept.yaml",
                    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kept\n  annotations:\n    gitops.setpoint.dev/prune: disabled\n",
                ),
            ],
        )
        .await;
    h.sync("apps", "repo", json!({"targetNamespace": "apps"}))
        .await;
    let sync = h
        .until_ready("apps", "True", "ReconciliationSucceeded", Some(&first))
        .await;
    assert_eq!(ready_message(&sync), format!("Applied revision: {first}"));
    assert_eq!(
        sync.status
            .as_ref()
            .and_then(|s| s.last_applied_revision.clone())
            .as_deref(),
        Some(first.as_str())
    );
    assert_eq!(
        inventory_ids(&sync),
        [
            "_apps__Namespace",
            "apps_a__ConfigMap",
            "apps_b__ConfigMap",
            "apps_kept__ConfigMap"
        ]
    );
    let a = h.configmaps("apps").get("a").await.expect("a applied");
    assert_eq!(
        a.labels().get(SYNC_NAME_LABEL).map(String::as_str),
        Some("apps")
    );
    assert_eq!(
        a.data
            .as_ref()
            .and_then(|d| d.get("key"))
            .map(String::as_str),
        Some("one")
    );
    let ns = kube::Api::<Namespace>::all(h.client.kube().clone())
        .get("apps")
        .await
        .expect("ns");
    assert!(ns.labels().contains_key(SYNC_NAME_LABEL));

    // A reconcile of the same revision over the same objects writes nothing.
    let versions = |list: Vec<ConfigMap>| -> BTreeMap<String, String> {
        list.into_iter()
            .map(|c| (c.name_any(), c.resource_version().unwrap_or_default()))
            .collect()
    };
    let diffs = setpoint_gitops::sync::diff(&h.client, &sync, &h.artifact_dir("repo", &first))
        .await
        .expect("diff");
    assert!(diffs.is_empty(), "in sync, yet: {diffs:?}");
    let before = versions(
        h.configmaps("apps")
            .list(&ListParams::default())
            .await
            .expect("list")
            .items,
    );
    let sync_before = h.syncs().get("apps").await.expect("sync");
    let after_request = h.reconcile_now("apps", "first").await;
    let after = versions(
        h.configmaps("apps")
            .list(&ListParams::default())
            .await
            .expect("list")
            .items,
    );
    assert_eq!(before, after, "a no-op reconcile wrote objects");
    assert_eq!(
        sync_before.status.as_ref().map(|s| &s.conditions),
        after_request.status.as_ref().map(|s| &s.conditions),
        "a no-op reconcile changed the conditions"
    );

    // The next commit changes a, drops b (pruned) and kept (annotated: left alone).
    let second = h
        .publish(
            "repo",
            &[
                (
                    "ns.yaml",
                    "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: apps\n",
                ),
                ("a.yaml", &configmap("a", "two")),
            ],
        )
        .await;
    let sync = h
        .until_ready("apps", "True", "ReconciliationSucceeded", Some(&second))
        .await;
    assert_eq!(
        inventory_ids(&sync),
        ["_apps__Namespace", "apps_a__ConfigMap"]
    );
    let a = h.configmaps("apps").get("a").await.expect("a");
    assert_eq!(
        a.data
            .as_ref()
            .and_then(|d| d.get("key"))
            .map(String::as_str),
        Some("two")
    );
    assert!(
        h.configmaps("apps")
            .get_opt("b")
            .await
            .expect("get b")
            .is_none(),
        "b was not pruned"
    );
    assert!(
        h.configmaps("apps")
            .get_opt("kept")
            .await
            .expect("get kept")
            .is_some(),
        "kept was pruned"
    );

    // Events: what changed, by object.
    let events = kube::Api::<Event>::namespaced(h.client.kube().clone(), NS);
    let notes = eventually("a Progressing event naming the pruned ConfigMap", || {
        let events = events.clone();
        async move {
            let list = events.list(&ListParams::default()).await.ok()?;
            let notes: Vec<String> = list
                .items
                .into_iter()
                .filter(|e| e.reason.as_deref() == Some("Progressing"))
                .filter_map(|e| e.note)
                .collect();
            notes
                .iter()
                .any(|n| n.contains("ConfigMap/apps/b deleted"))
                .then_some(notes)
        }
    })
    .await;
    assert!(
        notes
            .iter()
            .any(|n| n.contains("ConfigMap/apps/a configured")),
        "{notes:?}"
    );
    assert!(
        notes.iter().any(|n| n.contains("Namespace/apps created")),
        "{notes:?}"
    );

    // An empty source does not prune everything.
    let third = h.publish("repo", &[("README.md", "nothing here")]).await;
    let sync = h
        .until_ready("apps", "False", "PruneRefused", Some(&third))
        .await;
    assert!(
        ready_message(&sync).contains("allowEmptyPrune"),
        "{}",
        ready_message(&sync)
    );
    assert!(h
        .configmaps("apps")
        .get_opt("a")
        .await
        .expect("get a")
        .is_some());
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drift_should_be_corrected_by_the_watch_unless_suspended() {
    let h = Harness::start().await;
    h.repository("repo").await;
    let revision = h
        .publish("repo", &[("cm.yaml", &configmap("drifty", "git"))])
        .await;
    h.sync("drift", "repo", json!({})).await;
    h.until_ready("drift", "True", "ReconciliationSucceeded", Some(&revision))
        .await;
    let cms = h.configmaps(NS);
    let value = |cm: ConfigMap| cm.data.and_then(|d| d.get("key").cloned());

    // Changed by hand: put back at once (the interval is an hour: only the watch explains it).
    cms.patch(
        "drifty",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"key": "by-hand"}})),
    )
    .await
    .expect("edit");
    eventually("the hand edit is reverted", || {
        let cms = cms.clone();
        async move { cms.get("drifty").await.ok().and_then(value) == Some("git".to_owned()) }
    })
    .await;
    // Deleted by hand: recreated.
    cms.delete("drifty", &DeleteParams::default())
        .await
        .expect("delete");
    eventually("the deleted ConfigMap is recreated", || {
        let cms = cms.clone();
        async move { cms.get("drifty").await.ok().and_then(value) == Some("git".to_owned()) }
    })
    .await;

    // Suspended: a hand edit stays, even through a reconcile request.
    h.syncs()
        .patch(
            "drift",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"suspend": true}})),
        )
        .await
        .expect("suspend");
    h.reconcile_now("drift", "while-suspended").await;
    cms.patch(
        "drifty",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"key": "by-hand"}})),
    )
    .await
    .expect("edit");
    h.reconcile_now("drift", "still-suspended").await;
    assert_eq!(
        cms.get("drifty").await.ok().and_then(value).as_deref(),
        Some("by-hand")
    );
    // What a reconcile would change: the hand edit, as a unified diff.
    let sync = h.syncs().get("drift").await.expect("sync");
    let diffs = setpoint_gitops::sync::diff(&h.client, &sync, &h.artifact_dir("repo", &revision))
        .await
        .expect("diff");
    assert_eq!(diffs.len(), 1, "{diffs:?}");
    assert_eq!(diffs[0].object, "ConfigMap/default/drifty");
    assert_eq!(diffs[0].pending, setpoint_gitops::sync::Pending::Configure);
    assert!(
        diffs[0].diff.contains("-  key: by-hand\n+  key: git\n"),
        "{}",
        diffs[0].diff
    );
    // Resumed: corrected.
    h.syncs()
        .patch(
            "drift",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"suspend": false}})),
        )
        .await
        .expect("resume");
    eventually("the edit is reverted once resumed", || {
        let cms = cms.clone();
        async move { cms.get("drifty").await.ok().and_then(value) == Some("git".to_owned()) }
    })
    .await;
    h.stop().await;
}

const DEPLOYMENT: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 2\n  selector:\n    matchLabels:\n      app: web\n  template:\n    metadata:\n      labels:\n        app: web\n    spec:\n      containers:\n      - name: web\n        image: nginx:1.25\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignored_fields_should_be_left_to_their_other_manager() {
    let h = Harness::start().await;
    h.repository("repo").await;
    let revision = h.publish("repo", &[("web.yaml", DEPLOYMENT)]).await;
    h.sync(
        "web",
        "repo",
        json!({"ignoreDifferences": [{"group": "apps", "kind": "Deployment", "jsonPointers": ["/spec/replicas"]}]}),
    )
    .await;
    h.until_ready("web", "True", "ReconciliationSucceeded", Some(&revision))
        .await;
    let deployments = kube::Api::<Deployment>::namespaced(h.client.kube().clone(), NS);
    // An autoscaler sets replicas with its own field manager.
    deployments
        .patch(
            "web",
            &PatchParams::apply("autoscaler").force(),
            &Patch::Apply(json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "web"}, "spec": {"replicas": 5}})),
        )
        .await
        .expect("scale");
    // An image change is drift and is reverted; replicas stay the autoscaler's.
    deployments
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"template": {"spec": {"containers": [{"name": "web", "image": "nginx:hand"}]}}}})),
        )
        .await
        .expect("edit image");
    let image = |d: &Deployment| {
        d.spec
            .as_ref()
            .and_then(|s| s.template.spec.as_ref())
            .map(|s| s.containers[0].image.clone())
    };
    eventually("the image edit is reverted", || {
        let deployments = deployments.clone();
        async move {
            deployments.get("web").await.ok().and_then(|d| image(&d))
                == Some(Some("nginx:1.25".to_owned()))
        }
    })
    .await;
    h.reconcile_now("web", "check").await;
    let web = deployments.get("web").await.expect("web");
    assert_eq!(web.spec.and_then(|s| s.replicas), Some(5));
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_should_name_the_file_or_object_and_apply_nothing_of_the_stage() {
    let h = Harness::start().await;
    h.repository("repo").await;
    // Bad YAML: BuildFailed naming the file.
    let bad_yaml = h
        .publish(
            "repo",
            &[
                ("good.yaml", &configmap("good", "x")),
                ("sub/bad.yaml", "kind: [oops\n"),
            ],
        )
        .await;
    h.sync("broken", "repo", json!({})).await;
    let sync = h
        .until_ready("broken", "False", "BuildFailed", Some(&bad_yaml))
        .await;
    assert!(
        ready_message(&sync).starts_with("sub/bad.yaml: invalid YAML"),
        "{}",
        ready_message(&sync)
    );
    let stalled = sync
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Stalled").cloned());
    assert_eq!(stalled.map(|c| c.status).as_deref(), Some("True"));

    // An unsupported kustomization field: refused by name.
    let unsupported = h
        .publish(
            "repo",
            &[("kustomization.yaml", "resources: []\nhelmCharts: []\n")],
        )
        .await;
    let sync = h
        .until_ready("broken", "False", "BuildFailed", Some(&unsupported))
        .await;
    assert!(
        ready_message(&sync).contains("`helmCharts` is not supported"),
        "{}",
        ready_message(&sync)
    );

    // An object the API refuses: nothing of its stage is applied.
    let invalid = h
        .publish(
            "repo",
            &[
                ("good.yaml", &configmap("good", "x")),
                ("bad.yaml", "apiVersion: v1\nkind: Service\nmetadata:\n  name: bad\nspec:\n  ports:\n  - port: 99999\n"),
            ],
        )
        .await;
    let sync = h
        .until_ready("broken", "False", "ReconciliationFailed", Some(&invalid))
        .await;
    let message = ready_message(&sync);
    assert!(
        message.contains("Service/default/bad dry-run failed"),
        "{message}"
    );
    assert!(
        h.configmaps(NS)
            .get_opt("good")
            .await
            .expect("get")
            .is_none(),
        "half of the stage was applied"
    );

    // Fixed: applied.
    let fixed = h
        .publish("repo", &[("good.yaml", &configmap("good", "x"))])
        .await;
    h.until_ready("broken", "True", "ReconciliationSucceeded", Some(&fixed))
        .await;
    assert!(h
        .configmaps(NS)
        .get_opt("good")
        .await
        .expect("get")
        .is_some());

    // serviceAccountName: applied as the ServiceAccount (impersonated, in-process too), so
    // what it may not do is refused — never applied with the loop's own rights…
    h.syncs()
        .patch(
            "broken",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {
                "serviceAccountName": "deployer", "retryInterval": "1s"}})),
        )
        .await
        .expect("service account");
    let as_deployer = h
        .publish(
            "repo",
            &[
                ("good.yaml", &configmap("good", "x")),
                ("more.yaml", &configmap("more", "y")),
            ],
        )
        .await;
    let sync = h
        .until_ready(
            "broken",
            "False",
            "ReconciliationFailed",
            Some(&as_deployer),
        )
        .await;
    assert!(
        ready_message(&sync).contains("system:serviceaccount:default:deployer"),
        "{}",
        ready_message(&sync)
    );
    assert!(h
        .configmaps(NS)
        .get_opt("more")
        .await
        .expect("get")
        .is_none());
    // …and once RBAC lets it edit the namespace, applied.
    h.client
        .namespaced_api::<k8s_openapi::api::rbac::v1::RoleBinding>(NS)
        .create(
            &kube::api::PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "deployer-edit"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
                "subjects": [{"kind": "ServiceAccount", "name": "deployer", "namespace": NS}]
            }))
            .expect("binding"),
        )
        .await
        .expect("bind the deployer");
    h.until_ready(
        "broken",
        "True",
        "ReconciliationSucceeded",
        Some(&as_deployer),
    )
    .await;
    assert!(h
        .configmaps(NS)
        .get_opt("more")
        .await
        .expect("get")
        .is_some());
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dependencies_health_and_crds_should_be_waited_for() {
    let h = Harness::start().await;
    h.repository("base").await;
    h.repository("app").await;
    // `app` depends on `base`, whose source has no artifact yet.
    let app_revision = h
        .publish("app", &[("cm.yaml", &configmap("app-config", "x"))])
        .await;
    h.sync(
        "app",
        "app",
        json!({"dependsOn": [{"name": "base"}], "retryInterval": "1s"}),
    )
    .await;
    h.sync("base", "base", json!({})).await;
    let sync = h
        .until_ready("app", "False", "DependencyNotReady", None)
        .await;
    assert!(
        ready_message(&sync).contains("dependency 'default/base'"),
        "{}",
        ready_message(&sync)
    );
    assert!(h
        .configmaps(NS)
        .get_opt("app-config")
        .await
        .expect("get")
        .is_none());

    // The base brings a CRD and an object of it in one commit.
    let crd = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: widgets.example.com\nspec:\n  group: example.com\n  scope: Namespaced\n  names:\n    plural: widgets\n    singular: widget\n    kind: Widget\n    listKind: WidgetList\n  versions:\n  - name: v1\n    served: true\n    storage: true\n    schema:\n      openAPIV3Schema:\n        type: object\n        x-kubernetes-preserve-unknown-fields: true\n";
    let widget =
        "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w1\nspec:\n  size: 3\n";
    let base_revision = h
        .publish("base", &[("crd.yaml", crd), ("widget.yaml", widget)])
        .await;
    h.until_ready(
        "base",
        "True",
        "ReconciliationSucceeded",
        Some(&base_revision),
    )
    .await;
    let widgets = kube::Api::<kube::api::DynamicObject>::namespaced_with(
        h.client.kube().clone(),
        NS,
        &kube::api::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
            "example.com",
            "v1",
            "Widget",
        )),
    );
    assert!(widgets.get_opt("w1").await.expect("get widget").is_some());
    h.until_ready(
        "app",
        "True",
        "ReconciliationSucceeded",
        Some(&app_revision),
    )
    .await;

    // wait: a Job nobody runs never completes: HealthCheckFailed naming it, Stalled.
    let job = "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: never\nspec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n      - name: c\n        image: busybox\n";
    let job_revision = h.publish("app", &[("job.yaml", job)]).await;
    h.syncs()
        .patch(
            "app",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"wait": true, "timeout": "2s"}})),
        )
        .await
        .expect("wait");
    let sync = h
        .until_ready("app", "False", "HealthCheckFailed", Some(&job_revision))
        .await;
    assert!(
        ready_message(&sync).contains("Job/default/never"),
        "{}",
        ready_message(&sync)
    );
    // The failed health check's status: Stalled and not Healthy. A retry starting meanwhile
    // marks the Sync Reconciling and clears Stalled, so look until a read shows the outcome.
    let api = h.syncs();
    eventually("Sync app Stalled and not Healthy", || {
        let api = api.clone();
        async move {
            let sync = api.get("app").await.map_err(|e| e.to_string())?;
            let conditions = sync.status.unwrap_or_default().conditions;
            let has = |type_: &str, status: &str| {
                conditions
                    .iter()
                    .any(|c| c.type_ == type_ && c.status == status)
            };
            if has("Ready", "False") && has("Stalled", "True") && has("Healthy", "False") {
                Ok(())
            } else {
                Err(format!("{conditions:?}"))
            }
        }
    })
    .await;
    // Completed by hand: healthy.
    let jobs = kube::Api::<Job>::namespaced(h.client.kube().clone(), NS);
    jobs.patch_status(
        "never",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"conditions": [{"type": "Complete", "status": "True"}],
            "startTime": "2026-01-01T00:00:00Z", "completionTime": "2026-01-01T00:00:01Z", "succeeded": 1}})),
    )
    .await
    .expect("complete the job");
    h.reconcile_now("app", "after-complete").await;
    h.until_ready(
        "app",
        "True",
        "ReconciliationSucceeded",
        Some(&job_revision),
    )
    .await;
    h.stop().await;
}

//! Pattern 1 end to end: a `setpoint server` process (every loop on, real process pods on its
//! agent), a git repository the test makes with `git`, GitRepository and Sync objects created
//! with `kubectl`, and `setpoint gitops diff|reconcile` — issue 20's proof list, on one
//! server: a committed Deployment applied and rolled out; `kubectl scale` by hand reverted by
//! the watch (the Sync's interval is an hour); an HPA's replicas left alone when ignored; a
//! deleted file pruned; a suspended Sync leaving drift; a bad manifest reported with nothing of
//! its stage applied; a Sync waiting for the one it depends on; a CRD and its objects in one
//! commit.
//!
//! The GitRepository's interval is an hour too: the source loop sees commits to a local
//! repository by watching it. Real time, polling with generous deadlines.

#![allow(clippy::unwrap_used)] // test helpers: a failure should panic with the error

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::processes::Cleanup;
use common::Server;
use setpoint_testenv::eventually_blocking;

/// The test's git repository.
struct Repo {
    dir: PathBuf,
}

impl Repo {
    fn new(dir: &Path) -> Repo {
        std::fs::create_dir_all(dir).unwrap();
        let repo = Repo {
            dir: dir.to_owned(),
        };
        repo.git(&["init", "-q", "-b", "main"]);
        repo
    }

    fn git(&self, args: &[&str]) {
        let out = Command::new("git")
            .arg("-C")
            .arg(&self.dir)
            .args([
                "-c",
                "user.name=test",
                "-c",
                "user.email=test@setpoint.invalid",
            ])
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn write(&self, path: &str, text: &str) {
        let file = self.dir.join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, text).unwrap();
    }

    fn remove(&self, path: &str) {
        std::fs::remove_file(self.dir.join(path)).unwrap();
    }

    /// Commits everything; the new commit's SHA.
    fn commit(&self, message: &str) -> String {
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "-m", message]);
        let out = Command::new("git")
            .arg("-C")
            .arg(&self.dir)
            .args(["rev-parse", "HEAD"])
            .output()
            .unwrap();
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    }
}

/// A Deployment whose pods sleep (their command line carries `marker`, for the cleanup).
fn deployment(name: &str, replicas: u32, marker: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\nspec:\n  replicas: {replicas}\n  \
         selector:\n    matchLabels:\n      app: {name}\n  template:\n    metadata:\n      labels:\n        \
         app: {name}\n    spec:\n      terminationGracePeriodSeconds: 1\n      containers:\n      - name: main\n        \
         image: sleeper:1\n        command: [sh, -c, \"sleep 3600 # {marker}\"]\n"
    )
}

fn configmap(name: &str, value: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  value: \"{value}\"\n"
    )
}

/// A Sync of the repository's `path`, with more spec fields (`key: value` lines, 2-space
/// indented).
fn sync(name: &str, path: &str, extra: &str) -> String {
    format!(
        "apiVersion: gitops.setpoint.dev/v1\nkind: Sync\nmetadata:\n  name: {name}\n  namespace: default\n\
         spec:\n  sourceRef:\n    kind: GitRepository\n    name: config\n  path: {path}\n  interval: 1h\n  \
         retryInterval: 2s\n  timeout: 2m\n  prune: true\n{extra}"
    )
}

fn apply(s: &Server, manifest: &str) {
    let out = s.kubectl_stdin(&["apply", "-f", "-"], manifest);
    assert!(
        out.status.success(),
        "kubectl apply: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `Ready` of a Sync as `status reason message`, and its `lastAttemptedRevision`.
fn ready(s: &Server, name: &str) -> (String, String) {
    let out = s.kubectl(&[
        "get",
        "sync",
        name,
        "-o",
        "jsonpath={.status.conditions[?(@.type==\"Ready\")].status} {.status.conditions[?(@.type==\"Ready\")].reason} {.status.conditions[?(@.type==\"Ready\")].message}|{.status.lastAttemptedRevision}",
    ]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (ready, revision) = text.split_once('|').unwrap_or((&text, ""));
    (ready.to_owned(), revision.to_owned())
}

/// Waits until the Sync's `Ready` starts with `prefix` (`True ReconciliationSucceeded`, …) at
/// a revision of commit `sha`; its whole `Ready` text.
fn until_ready(s: &Server, name: &str, prefix: &str, sha: &str) -> String {
    eventually_blocking(&format!("Sync {name}: {prefix} at {sha}"), || {
        let (ready, revision) = ready(s, name);
        if ready.starts_with(prefix) && revision.ends_with(sha) {
            Ok(ready)
        } else {
            Err(format!("{ready} at {revision}"))
        }
    })
}

fn jsonpath(s: &Server, args: &[&str], path: &str) -> String {
    let mut all = args.to_vec();
    let path = format!("jsonpath={path}");
    all.extend(["-o", &path]);
    let out = s.kubectl(&all);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn setpoint(s: &Server, args: &[&str]) -> Output {
    Command::new(setpoint_testenv::process::setpoint_binary())
        .args(args)
        .arg("--kubeconfig")
        .arg(s.kubeconfig())
        .output()
        .unwrap()
}

#[test]
fn gitops_should_apply_prune_and_correct_drift_from_a_git_repository() {
    // The git repository's directory; the server owns a fresh data directory of its own, so
    // that dropping it (before this) also stops what its pods still run.
    let tmp = tempfile::tempdir().unwrap();
    let s = Server::start_fresh_with(&["--hpa-sync-period", "1s"]);
    let marker = format!("setpoint-gitops-kubectl-{}", std::process::id());
    let _cleanup = Cleanup {
        marker: marker.clone(),
        agent_root: s.dir.join("agent").display().to_string(),
    };
    let repo = Repo::new(&tmp.path().join("repo"));
    repo.write("apps/web.yaml", &deployment("web", 2, &marker));
    repo.write("apps/extra.yaml", &configmap("extra", "1"));
    let first = repo.commit("web");

    // The loops install their CRDs at start.
    eventually_blocking("the GitOps kinds are served", || {
        s.kubectl(&["get", "gitrepositories,syncs"])
            .status
            .success()
    });
    apply(
        &s,
        &format!(
            "apiVersion: gitops.setpoint.dev/v1\nkind: GitRepository\nmetadata:\n  name: config\n  namespace: default\n\
             spec:\n  url: {}\n  interval: 1h\n  ref:\n    branch: main\n",
            repo.dir.display()
        ),
    );
    apply(&s, &sync("apps", "./apps", "  wait: true\n"));

    // Applied and rolled out: `wait` makes Ready mean healthy.
    let message = until_ready(&s, "apps", "True ReconciliationSucceeded", &first);
    assert!(
        message.contains(&format!("Applied revision: main@sha1:{first}")),
        "{message}"
    );
    let rolled = jsonpath(
        &s,
        &["get", "deploy", "web"],
        "{.status.readyReplicas}/{.status.updatedReplicas}",
    );
    assert_eq!(rolled, "2/2");
    let labels = jsonpath(&s, &["get", "deploy", "web"], "{.metadata.labels}");
    assert!(labels.contains("gitops.setpoint.dev/sync-name"), "{labels}");
    assert_eq!(
        setpoint(&s, &["gitops", "diff", "apps"]).status.code(),
        Some(0)
    );

    // Scaled by hand: put back by the watch (the interval is an hour).
    s.ok(&["scale", "deploy/web", "--replicas=4"]);
    eventually_blocking("kubectl scale is reverted", || {
        jsonpath(&s, &["get", "deploy", "web"], "{.spec.replicas}") == "2"
    });

    // Suspended: drift stays, `setpoint gitops diff` shows it (exit 1), a reconcile request
    // is handled without applying anything.
    s.ok(&[
        "patch",
        "sync",
        "apps",
        "--type=merge",
        "-p",
        r#"{"spec":{"suspend":true}}"#,
    ]);
    s.ok(&["scale", "deploy/web", "--replicas=3"]);
    let reconciled = setpoint(&s, &["gitops", "reconcile", "apps", "--timeout", "60s"]);
    assert!(
        reconciled.status.success(),
        "{}",
        String::from_utf8_lossy(&reconciled.stderr)
    );
    assert_eq!(
        jsonpath(&s, &["get", "deploy", "web"], "{.spec.replicas}"),
        "3"
    );
    let diff = setpoint(&s, &["gitops", "diff", "apps"]);
    let text = String::from_utf8_lossy(&diff.stdout);
    assert_eq!(
        diff.status.code(),
        Some(1),
        "{text}{}",
        String::from_utf8_lossy(&diff.stderr)
    );
    assert!(
        text.contains("# Deployment/default/web would be configured"),
        "{text}"
    );
    assert!(text.contains("-  replicas: 3\n+  replicas: 2\n"), "{text}");
    s.ok(&[
        "patch",
        "sync",
        "apps",
        "--type=merge",
        "-p",
        r#"{"spec":{"suspend":false}}"#,
    ]);
    eventually_blocking("the drift is corrected once resumed", || {
        jsonpath(&s, &["get", "deploy", "web"], "{.spec.replicas}") == "2"
    });

    // A file deleted in git: its object is pruned.
    repo.remove("apps/extra.yaml");
    let pruned = repo.commit("no extra");
    until_ready(&s, "apps", "True ReconciliationSucceeded", &pruned);
    eventually_blocking("the ConfigMap is pruned", || {
        !s.kubectl(&["get", "configmap", "extra"]).status.success()
    });
    let events = s.ok(&[
        "get",
        "events",
        "--field-selector",
        "involvedObject.kind=Sync",
        "-o",
        "jsonpath={.items[*].message}",
    ]);
    assert!(
        events.contains("ConfigMap/default/extra deleted"),
        "{events}"
    );

    // A bad manifest: the stage's other object is not applied either.
    repo.write("apps/new.yaml", &configmap("new", "1"));
    repo.write(
        "apps/bad.yaml",
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: bad\nspec:\n  ports:\n  - port: 99999\n",
    );
    let bad = repo.commit("bad");
    let message = until_ready(&s, "apps", "False ReconciliationFailed", &bad);
    assert!(
        message.contains("Service/default/bad dry-run failed"),
        "{message}"
    );
    assert!(
        !s.kubectl(&["get", "configmap", "new"]).status.success(),
        "half a stage was applied"
    );
    repo.remove("apps/bad.yaml");
    let fixed = repo.commit("fixed");
    until_ready(&s, "apps", "True ReconciliationSucceeded", &fixed);
    s.ok(&["get", "configmap", "new"]);

    // An HPA owns the replicas of `api`: ignored by its Sync, they stay the HPA's.
    repo.write("scaled/api.yaml", &deployment("api", 1, &marker));
    repo.write(
        "scaled/hpa.yaml",
        "apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata:\n  name: api\nspec:\n  \
         scaleTargetRef:\n    apiVersion: apps/v1\n    kind: Deployment\n    name: api\n  minReplicas: 2\n  maxReplicas: 2\n  \
         metrics:\n  - type: Resource\n    resource:\n      name: cpu\n      target:\n        type: Utilization\n        averageUtilization: 50\n",
    );
    // A CRD and an object of it in one commit; a Sync waiting for another.
    repo.write(
        "crds/crd.yaml",
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: widgets.example.com\n\
         spec:\n  group: example.com\n  scope: Namespaced\n  names:\n    plural: widgets\n    singular: widget\n    kind: Widget\n    \
         listKind: WidgetList\n  versions:\n  - name: v1\n    served: true\n    storage: true\n    schema:\n      openAPIV3Schema:\n        \
         type: object\n        x-kubernetes-preserve-unknown-fields: true\n",
    );
    repo.write(
        "crds/widget.yaml",
        "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w1\nspec:\n  size: 3\n",
    );
    repo.write("late/cm.yaml", &configmap("late", "1"));
    let more = repo.commit("scaled, crds, late");
    apply(
        &s,
        &sync(
            "scaled",
            "./scaled",
            "  ignoreDifferences:\n  - group: apps\n    kind: Deployment\n    name: api\n    jsonPointers: [/spec/replicas]\n",
        ),
    );
    apply(&s, &sync("gate", "./gate", ""));
    apply(
        &s,
        &sync("late", "./late", "  dependsOn:\n  - name: gate\n"),
    );
    apply(&s, &sync("crds", "./crds", ""));

    until_ready(&s, "crds", "True ReconciliationSucceeded", &more);
    assert_eq!(jsonpath(&s, &["get", "widgets", "w1"], "{.spec.size}"), "3");

    until_ready(&s, "scaled", "True ReconciliationSucceeded", &more);
    eventually_blocking("the HPA scales api to its minimum", || {
        jsonpath(&s, &["get", "deploy", "api"], "{.spec.replicas}") == "2"
    });
    let reconciled = setpoint(&s, &["gitops", "reconcile", "scaled", "--timeout", "60s"]);
    assert!(
        reconciled.status.success(),
        "{}",
        String::from_utf8_lossy(&reconciled.stdout)
    );
    assert_eq!(
        jsonpath(&s, &["get", "deploy", "api"], "{.spec.replicas}"),
        "2"
    );

    // `gate`'s path does not exist yet: `late` waits for it.
    until_ready(&s, "gate", "False BuildFailed", &more);
    let message = until_ready(&s, "late", "False DependencyNotReady", "");
    assert!(message.contains("dependency 'default/gate'"), "{message}");
    assert!(!s.kubectl(&["get", "configmap", "late"]).status.success());
    repo.write("gate/cm.yaml", &configmap("gate", "1"));
    let opened = repo.commit("gate");
    until_ready(&s, "gate", "True ReconciliationSucceeded", &opened);
    until_ready(&s, "late", "True ReconciliationSucceeded", &opened);
    s.ok(&["get", "configmap", "late"]);

    // Deleted Deployments' pods go; the cleanup kills what a failure leaves.
    s.ok(&["delete", "sync", "apps", "scaled", "crds", "gate", "late"]);
    s.ok(&["delete", "deploy", "web", "api", "--wait=false"]);
}

//! GitRepository: refs resolved to commits, artifacts made, kept and collected, conditions —
//! the source loop (`setpoint_gitops::source::run`) against an in-process API server, on
//! repositories the tests make with `git` in temporary directories. Real time, polling with
//! generous deadlines; nothing asserts how long anything took.

use std::path::{Path, PathBuf};
use std::process::Command;

use k8s_openapi::api::core::v1::Secret;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;
use setpoint_gitops::kinds::{
    GitRepositoryRef, GitRepositorySpec, GitRepositoryStatus, LocalObjectReference,
};
use setpoint_gitops::{ArtifactStore, GitRepository, GitopsContext};
use setpoint_runtime::{Client, InformerFactory, Metrics};
use setpoint_testenv::{eventually, TestEnv};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

const NS: &str = "default";

/// A git repository (`<temporary directory>/repo`), with a branch `main`.
struct Repo {
    dir: tempfile::TempDir,
    path: PathBuf,
}

impl Repo {
    fn new() -> Repo {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("repo");
        std::fs::create_dir(&path).expect("mkdir repo");
        let repo = Repo { dir, path };
        repo.git(&["init", "--quiet", "--initial-branch=main"]);
        repo
    }

    fn path(&self) -> &Path {
        &self.path
    }

    fn url(&self) -> String {
        self.path().display().to_string()
    }

    fn git(&self, args: &[&str]) -> String {
        let out = Command::new("git")
            .arg("-C")
            .arg(self.path())
            .args(["-c", "user.name=Test", "-c", "user.email=test@example.com"])
            .args(["-c", "commit.gpgsign=false", "-c", "tag.gpgsign=false"])
            .args(args)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .output()
            .expect("run git");
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// Writes (or, for `None`, deletes) files and commits them; returns the commit.
    fn commit(&self, files: &[(&str, Option<&str>)]) -> String {
        for (name, content) in files {
            let path = self.path().join(name);
            match content {
                Some(text) => {
                    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
                    std::fs::write(&path, text).expect("write");
                }
                None => std::fs::remove_file(&path).expect("remove"),
            }
        }
        self.git(&["add", "--all"]);
        self.git(&["commit", "--quiet", "--allow-empty", "-m", "change"]);
        self.git(&["rev-parse", "HEAD"])
    }
}

/// The source loop running against a fresh API server, its artifacts in a temporary directory.
struct Loop {
    env: TestEnv,
    root: tempfile::TempDir,
    stop: CancellationToken,
    task: JoinHandle<()>,
}

impl Loop {
    async fn start() -> Loop {
        let env = TestEnv::start().await.expect("test env");
        let root = tempfile::tempdir().expect("artifact root");
        let client = env.client();
        let ctx = GitopsContext {
            factory: InformerFactory::new(client.clone()),
            client,
            metrics: Metrics::new(),
            artifacts: ArtifactStore::new(root.path()),
        };
        let stop = CancellationToken::new();
        let token = stop.clone();
        let task = tokio::spawn(async move {
            setpoint_gitops::source::run(ctx, token)
                .await
                .expect("source loop");
        });
        Loop {
            env,
            root,
            stop,
            task,
        }
    }

    fn client(&self) -> Client {
        self.env.client()
    }

    fn store(&self) -> ArtifactStore {
        ArtifactStore::new(self.root.path())
    }

    async fn stop(self) {
        self.stop.cancel();
        self.task.await.expect("loop task");
    }

    /// Creates a GitRepository (retrying until its CRD is served).
    async fn create(&self, name: &str, url: &str, reference: Option<GitRepositoryRef>) {
        self.create_with(name, url, |spec| spec.reference = reference.clone())
            .await;
    }

    async fn create_with(&self, name: &str, url: &str, edit: impl Fn(&mut GitRepositorySpec)) {
        let mut spec = GitRepositorySpec {
            url: url.to_owned(),
            reference: None,
            interval: "1h".to_owned(),
            timeout: Some("20s".to_owned()),
            secret_ref: None,
            ignore: None,
            suspend: false,
        };
        edit(&mut spec);
        let mut repo = GitRepository::new(name, spec);
        repo.metadata.namespace = Some(NS.to_owned());
        let api = self.client().namespaced_api::<GitRepository>(NS);
        eventually(&format!("GitRepository {name} is created"), || async {
            api.create(&PostParams::default(), &repo).await.ok()
        })
        .await;
    }

    async fn status(&self, name: &str) -> Option<GitRepositoryStatus> {
        self.client()
            .namespaced_api::<GitRepository>(NS)
            .get(name)
            .await
            .ok()?
            .status
    }

    /// Waits until `name` serves an artifact of `revision`; returns its status.
    async fn wait_for_revision(&self, name: &str, revision: &str) -> GitRepositoryStatus {
        eventually(
            &format!("GitRepository {name} serves revision {revision}"),
            || async {
                let status = self.status(name).await.ok_or("no status".to_owned())?;
                let artifact = status.artifact.as_ref().ok_or(format!("{status:?}"))?;
                if artifact.revision == revision && ready(&status) == Some("True") {
                    Ok(status)
                } else {
                    Err(format!("{status:?}"))
                }
            },
        )
        .await
    }

    /// The directory of `name`'s current artifact.
    async fn artifact_dir(&self, name: &str) -> PathBuf {
        let status = self.status(name).await.expect("status");
        let artifact = status.artifact.expect("artifact");
        self.store().dir(&artifact.path).expect("artifact dir")
    }
}

fn ready(status: &GitRepositoryStatus) -> Option<&str> {
    condition(status, "Ready").map(|(s, _, _)| s)
}

/// A condition's status, reason and message.
fn condition<'s>(
    status: &'s GitRepositoryStatus,
    type_: &str,
) -> Option<(&'s str, &'s str, &'s str)> {
    status
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.as_str(), c.reason.as_str(), c.message.as_str()))
}

fn reference(f: impl FnOnce(&mut GitRepositoryRef)) -> Option<GitRepositoryRef> {
    let mut r = GitRepositoryRef::default();
    f(&mut r);
    Some(r)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refs_should_resolve_and_local_commits_should_be_picked_up_at_once() {
    let lp = Loop::start().await;
    let repo = Repo::new();
    let first = repo.commit(&[("app/config.yaml", Some("v: 1\n"))]);
    repo.git(&["tag", "v1.1.0"]);
    let second = repo.commit(&[("app/config.yaml", Some("v: 2\n"))]);
    repo.git(&["tag", "-a", "-m", "release", "v1.2.0"]);
    let third = repo.commit(&[("app/config.yaml", Some("v: 3\n"))]);
    repo.git(&["tag", "v2.0.0"]);
    repo.git(&["tag", "not-a-version"]);
    repo.git(&["branch", "other", &first]);

    // The default branch (the remote's HEAD: main), a tag, a semver range, commit pins.
    lp.create("head", &repo.url(), None).await;
    lp.create(
        "tag",
        &format!("file://{}", repo.url()),
        reference(|r| r.tag = Some("v1.2.0".into())),
    )
    .await;
    lp.create(
        "semver",
        &repo.url(),
        reference(|r| r.semver = Some(">=1.0.0 <2.0.0".into())),
    )
    .await;
    lp.create(
        "pin",
        &repo.url(),
        reference(|r| r.commit = Some(first.clone())),
    )
    .await;
    lp.create(
        "pin-on-branch",
        &repo.url(),
        reference(|r| {
            r.branch = Some("other".into());
            r.commit = Some(first.clone());
        }),
    )
    .await;
    lp.create(
        "pin-off-branch",
        &repo.url(),
        reference(|r| {
            r.branch = Some("other".into());
            r.commit = Some(third.clone());
        }),
    )
    .await;

    let head = lp
        .wait_for_revision("head", &format!("main@sha1:{third}"))
        .await;
    let artifact = head.artifact.clone().expect("artifact");
    assert_eq!(artifact.path, format!("gitrepository/{NS}/head/{third}"));
    assert!(artifact.digest.starts_with("sha256:"), "{artifact:?}");
    let (_, reason, message) = condition(&head, "Ready").expect("Ready");
    assert_eq!(reason, "Succeeded");
    assert_eq!(
        message,
        format!("stored artifact for revision 'main@sha1:{third}'")
    );
    assert_eq!(
        std::fs::read_to_string(lp.artifact_dir("head").await.join("app/config.yaml"))
            .expect("file"),
        "v: 3\n"
    );
    assert!(!lp.artifact_dir("head").await.join(".git").exists());

    lp.wait_for_revision("tag", &format!("v1.2.0@sha1:{second}"))
        .await;
    lp.wait_for_revision("semver", &format!("v1.2.0@sha1:{second}"))
        .await;
    lp.wait_for_revision("pin", &format!("sha1:{first}")).await;
    lp.wait_for_revision("pin-on-branch", &format!("other@sha1:{first}"))
        .await;
    let off = eventually("a commit off its branch is refused", || async {
        let status = lp.status("pin-off-branch").await?;
        (ready(&status) == Some("False")).then_some(status)
    })
    .await;
    let (_, reason, message) = condition(&off, "FetchFailed").expect("FetchFailed");
    assert_eq!(reason, "GitOperationFailed");
    assert!(message.contains("is not on branch 'other'"), "{message}");

    // A suspended GitRepository of the same repository fetches nothing.
    lp.create_with("suspended", &repo.url(), |spec| spec.suspend = true)
        .await;
    let api = lp.client().namespaced_api::<GitRepository>(NS);
    let suspend = |on: bool| Patch::Merge(json!({"spec": {"suspend": on}}));

    // A new commit is fetched at once (the local watch), although the interval is an hour;
    // a new tag moves the semver GitRepository.
    let fourth = repo.commit(&[("app/config.yaml", Some("v: 4\n"))]);
    lp.wait_for_revision("head", &format!("main@sha1:{fourth}"))
        .await;
    assert_eq!(
        lp.status("suspended").await,
        None,
        "a suspended GitRepository is not fetched"
    );
    api.patch("suspended", &PatchParams::default(), &suspend(false))
        .await
        .expect("resume");
    lp.wait_for_revision("suspended", &format!("main@sha1:{fourth}"))
        .await;
    assert_eq!(
        std::fs::read_to_string(lp.artifact_dir("head").await.join("app/config.yaml"))
            .expect("file"),
        "v: 4\n"
    );
    repo.git(&["tag", "1.3.0", &fourth]);
    lp.wait_for_revision("semver", &format!("1.3.0@sha1:{fourth}"))
        .await;

    // The reconcile-now annotation is handled and recorded.
    api.patch(
        "tag",
        &PatchParams::default(),
        &Patch::Merge(
            json!({"metadata": {"annotations": {"reconcile.setpoint.dev/requestedAt": "now-1"}}}),
        ),
    )
    .await
    .expect("annotate");
    eventually("the reconcile request is handled", || async {
        lp.status("tag")
            .await?
            .last_handled_reconcile_at
            .filter(|v| v == "now-1")
    })
    .await;

    // Deleting a GitRepository deletes its artifacts and mirror.
    let dir = lp.store().repository_dir(NS, "pin");
    assert!(dir.is_dir());
    api.delete("pin", &DeleteParams::default())
        .await
        .expect("delete");
    eventually("the deleted GitRepository's artifacts are gone", || async {
        !dir.exists() && !lp.root.path().join("mirrors/default/pin.git").exists()
    })
    .await;
    lp.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignore_rules_digests_and_artifact_gc() {
    let lp = Loop::start().await;
    let repo = Repo::new();
    repo.commit(&[
        ("deploy/app.yaml", Some("kind: A\n")),
        ("deploy/notes.md", Some("notes\n")),
        ("deploy/.sourceignore", Some("*.txt\n")),
        ("deploy/scratch.txt", Some("scratch\n")),
        (
            "scratch.txt",
            Some("kept: the .sourceignore is in deploy/\n"),
        ),
        ("secrets/key", Some("k\n")),
    ]);
    lp.create_with("ignoring", &repo.url(), |spec| {
        spec.ignore = Some("*.md\n/secrets/\n".to_owned());
    })
    .await;
    let head = repo.git(&["rev-parse", "HEAD"]);
    let first = lp
        .wait_for_revision("ignoring", &format!("main@sha1:{head}"))
        .await;
    let dir = lp.artifact_dir("ignoring").await;
    assert!(dir.join("deploy/app.yaml").is_file());
    assert!(dir.join("scratch.txt").is_file());
    for gone in ["deploy/notes.md", "deploy/scratch.txt", "secrets"] {
        assert!(!dir.join(gone).exists(), "{gone} should be ignored");
    }
    let first_digest = first.artifact.expect("artifact").digest;

    // A commit touching only ignored files: a new revision, the same digest.
    let ignored_only = repo.commit(&[("deploy/notes.md", Some("more notes\n"))]);
    let second = lp
        .wait_for_revision("ignoring", &format!("main@sha1:{ignored_only}"))
        .await;
    assert_eq!(second.artifact.expect("artifact").digest, first_digest);

    // A commit changing an exported file: a new digest.
    let changed = repo.commit(&[("deploy/app.yaml", Some("kind: B\n"))]);
    let third = lp
        .wait_for_revision("ignoring", &format!("main@sha1:{changed}"))
        .await;
    let third_digest = third.artifact.expect("artifact").digest;
    assert_ne!(third_digest, first_digest);

    // Changing spec.ignore re-exports the same commit: the digest follows the content.
    let api = lp.client().namespaced_api::<GitRepository>(NS);
    api.patch(
        "ignoring",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"ignore": "*.md\n"}})),
    )
    .await
    .expect("patch ignore");
    eventually("the secrets come back when no longer ignored", || async {
        let status = lp.status("ignoring").await?;
        let artifact = status.artifact?;
        (artifact.digest != third_digest && status.observed_generation == Some(2)).then_some(())
    })
    .await;
    assert!(lp
        .artifact_dir("ignoring")
        .await
        .join("secrets/key")
        .is_file());

    // Artifact GC: after more commits, the three most recent artifacts are kept.
    let mut last = changed;
    for i in 0..3 {
        last = repo.commit(&[("deploy/app.yaml", Some(&format!("kind: C{i}\n")))]);
        lp.wait_for_revision("ignoring", &format!("main@sha1:{last}"))
            .await;
    }
    let repo_dir = lp.store().repository_dir(NS, "ignoring");
    eventually("only three artifacts are kept", || async {
        let artifacts: Vec<String> = std::fs::read_dir(&repo_dir)
            .ok()?
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| !n.starts_with('.'))
            .collect();
        (artifacts.len() == 3 && artifacts.contains(&last)).then_some(())
    })
    .await;
    lp.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_should_be_reported_and_the_previous_artifact_kept() {
    let lp = Loop::start().await;
    let repo = Repo::new();
    let head = repo.commit(&[("a.yaml", Some("a: 1\n"))]);
    // A repository that moves away: its artifact must survive the failed fetches.
    lp.create("moving", &repo.url(), None).await;
    let served = lp
        .wait_for_revision("moving", &format!("main@sha1:{head}"))
        .await;
    std::fs::rename(repo.path(), repo.dir.path().join("gone")).expect("move away");
    let api = lp.client().namespaced_api::<GitRepository>(NS);
    api.patch(
        "moving",
        &PatchParams::default(),
        &Patch::Merge(
            json!({"metadata": {"annotations": {"reconcile.setpoint.dev/requestedAt": "1"}}}),
        ),
    )
    .await
    .expect("annotate");
    let failed = eventually("the fetch of a missing repository fails", || async {
        let status = lp.status("moving").await?;
        (ready(&status) == Some("False")).then_some(status)
    })
    .await;
    let (fetch_failed, reason, message) = condition(&failed, "FetchFailed").expect("FetchFailed");
    assert_eq!((fetch_failed, reason), ("True", "GitOperationFailed"));
    assert!(message.contains("git fetch failed"), "{message}");
    assert_eq!(
        condition(&failed, "Ready").map(|c| c.1),
        Some("GitOperationFailed")
    );
    assert_eq!(
        failed.artifact, served.artifact,
        "the previous artifact stays"
    );
    assert!(lp
        .store()
        .dir(&served.artifact.expect("artifact").path)
        .is_ok());

    // Only a spec change fixes an invalid URL or ref: Stalled.
    lp.create("bad-url", "ext::sh", None).await;
    lp.create(
        "bad-semver",
        "/nonexistent",
        reference(|r| r.semver = Some("banana".into())),
    )
    .await;
    for (name, why) in [("bad-url", "URLInvalid"), ("bad-semver", "InvalidRef")] {
        let status = eventually(&format!("{name} is stalled"), || async {
            let status = lp.status(name).await?;
            (condition(&status, "Stalled")?.0 == "True").then_some(status)
        })
        .await;
        assert_eq!(
            condition(&status, "Ready").map(|c| (c.0, c.1)),
            Some(("False", why))
        );
        assert_eq!(status.observed_generation, Some(1));
    }

    // A missing Secret: AuthenticationFailed; once it exists (with credentials the local
    // transport ignores), the fetch succeeds.
    let other = Repo::new();
    let other_head = other.commit(&[("b.yaml", Some("b: 1\n"))]);
    lp.create_with("auth", &other.url(), |spec| {
        spec.secret_ref = Some(LocalObjectReference {
            name: "git-creds".to_owned(),
        });
    })
    .await;
    let status = eventually("a missing Secret fails authentication", || async {
        let status = lp.status("auth").await?;
        (condition(&status, "Ready")?.1 == "AuthenticationFailed").then_some(status)
    })
    .await;
    let (_, _, message) = condition(&status, "Ready").expect("Ready");
    assert!(
        message.contains("secret 'default/git-creds' not found"),
        "{message}"
    );
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "git-creds", "namespace": NS},
        "stringData": {"username": "u", "password": "p"},
    }))
    .expect("secret");
    lp.client()
        .namespaced_api::<Secret>(NS)
        .create(&PostParams::default(), &secret)
        .await
        .expect("create secret");
    lp.wait_for_revision("auth", &format!("main@sha1:{other_head}"))
        .await;
    lp.stop().await;
}

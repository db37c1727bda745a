//! One reconcile of a GitRepository: check the spec (what no fetch fixes stalls it), get the
//! credentials, fetch the mirror, resolve the ref to a commit, make (or reuse) its artifact,
//! delete old artifacts, and write status — `Ready=True` with `status.artifact` only once the
//! artifact's directory exists. Failures leave the previous artifact in status and are retried
//! with backoff; success requeues after `spec.interval`.

use std::sync::Arc;
use std::time::Duration;

use kube::ResourceExt as _;
use setpoint_runtime::{update_status, Action, Client, EventDetails, EventRecorder, StatusError};

use super::conditions::{self, AUTHENTICATION_FAILED, GIT_OPERATION_FAILED, INVALID_DURATION};
use super::conditions::{INVALID_REF, STORAGE_OPERATION_FAILED, URL_INVALID};
use super::export::{self, Exported};
use super::git::Git;
use super::mirror::{self, mirror_dir};
use super::resolve::{check_ref, resolve, Resolved};
use super::{auth, DEFAULT_TIMEOUT};
use crate::error_chain;
use crate::kinds::{Artifact, GitRepository, GitRepositoryStatus, RECONCILE_REQUESTED_AT};
use crate::{duration, ArtifactStore};

/// What the reconciles share.
pub(crate) struct Source {
    /// Reads Secrets, writes status.
    pub(crate) client: Client,
    /// Where mirrors and artifacts go.
    pub(crate) artifacts: ArtifactStore,
    /// `NewArtifact` and `GitOperationFailed` Events.
    pub(crate) recorder: EventRecorder,
}

/// Why a reconcile failed (retried with backoff; already reported in status when it is about
/// the repository).
#[derive(Debug, thiserror::Error)]
pub(crate) enum SourceError {
    /// The status could not be written.
    #[error(transparent)]
    Status(#[from] StatusError),
    /// Fetching, resolving or exporting failed (the message is in `Ready`).
    #[error("GitRepository {key}: {message}")]
    Failed {
        /// `namespace/name`.
        key: String,
        /// What failed.
        message: String,
    },
}

/// Reconciles one GitRepository.
pub(crate) async fn reconcile(
    repo: Arc<GitRepository>,
    ctx: Arc<Source>,
) -> Result<Action, SourceError> {
    let namespace = repo.namespace().unwrap_or_default();
    let name = repo.name_any();
    if repo.spec.suspend {
        tracing::info!(gitrepository = %format!("{namespace}/{name}"), "suspended: not fetching");
        return Ok(Action::await_change());
    }
    let run = Run {
        ctx: &ctx,
        repo: &repo,
        namespace: &namespace,
        name: &name,
    };
    let interval = match duration::parse(&repo.spec.interval) {
        Ok(d) if d > Duration::ZERO => d,
        Ok(_) => {
            return run
                .stall(INVALID_DURATION, "spec.interval must be above zero")
                .await
        }
        Err(e) => {
            return run
                .stall(INVALID_DURATION, &format!("spec.interval: {e}"))
                .await
        }
    };
    let timeout = match repo.spec.timeout.as_deref().map(duration::parse) {
        None => DEFAULT_TIMEOUT,
        Some(Ok(d)) if d > Duration::ZERO => d,
        Some(Ok(_)) => {
            return run
                .stall(INVALID_DURATION, "spec.timeout must be above zero")
                .await
        }
        Some(Err(e)) => {
            return run
                .stall(INVALID_DURATION, &format!("spec.timeout: {e}"))
                .await
        }
    };
    if let Err(message) = check_url(&repo.spec.url) {
        return run.stall(URL_INVALID, &message).await;
    }
    let reference = repo.spec.reference.as_ref();
    let range = match check_ref(reference) {
        Ok(range) => range,
        Err(e) => return run.stall(INVALID_REF, &e.to_string()).await,
    };

    let secret = repo.spec.secret_ref.as_ref().map(|s| s.name.as_str());
    let credentials = match auth::credentials(&ctx.client, &namespace, secret).await {
        Ok(c) => c,
        Err(e) => return run.fail(AUTHENTICATION_FAILED, &e.to_string()).await,
    };
    let git = Git::new(timeout).with_envs(&credentials.env);
    let mirror = mirror_dir(ctx.artifacts.root(), &namespace, &name);
    let url = &repo.spec.url;
    if let Err(e) = mirror::fetch(&git, &mirror, url).await {
        return run.fail(GIT_OPERATION_FAILED, &error_chain(&e)).await;
    }
    let names_nothing = reference.is_none_or(|r| {
        r.branch.is_none() && r.tag.is_none() && r.semver.is_none() && r.commit.is_none()
    });
    let remote_head = if names_nothing {
        match mirror::remote_head(&git, url).await {
            Ok(head) => head,
            Err(e) => return run.fail(GIT_OPERATION_FAILED, &error_chain(&e)).await,
        }
    } else {
        None
    };
    drop(credentials);
    let in_mirror = git.in_repo(&mirror);
    let resolved = match resolve(&in_mirror, reference, range.as_ref(), remote_head).await {
        Ok(r) => r,
        Err(e) => return run.fail(GIT_OPERATION_FAILED, &error_chain(&e)).await,
    };

    let ignore = repo.spec.ignore.as_deref();
    let previous = repo.status.as_ref().and_then(|s| s.artifact.clone());
    let path = ArtifactStore::relative_path(&namespace, &name, &resolved.sha);
    let up_to_date = previous
        .as_ref()
        .is_some_and(|a| a.path == path && a.revision == resolved.revision)
        && export::is_current(&ctx.artifacts, &namespace, &name, &resolved.sha, ignore).await;
    if !up_to_date {
        run.progressing(&resolved).await?;
    }
    let exported = match export::export(
        &in_mirror,
        &ctx.artifacts,
        &namespace,
        &name,
        &resolved.sha,
        ignore,
    )
    .await
    {
        Ok(e) => e,
        Err(e) => return run.fail(STORAGE_OPERATION_FAILED, &error_chain(&e)).await,
    };
    export::gc(&ctx.artifacts, &namespace, &name, &resolved.sha).await;
    run.stored(&resolved, path, &exported).await?;
    Ok(Action::requeue(interval))
}

/// Whether `url` is something git can fetch (without running git): an absolute path, a URL of
/// a transport git speaks, or scp-like `user@host:path`. `ext::` and options are refused.
pub(crate) fn check_url(url: &str) -> Result<(), String> {
    let bad = |why: &str| Err(format!("spec.url {url:?} {why}"));
    if url.is_empty() {
        return bad("is empty");
    }
    if url.starts_with('-') || url.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return bad("contains a leading '-', whitespace or control characters");
    }
    if url.starts_with('/') {
        return Ok(());
    }
    if let Some((scheme, rest)) = url.split_once("://") {
        const SCHEMES: &[&str] = &["http", "https", "ssh", "git", "file", "git+ssh", "ssh+git"];
        if !SCHEMES.contains(&scheme) {
            return bad(&format!(
                "has the unsupported scheme '{scheme}' (use one of {})",
                SCHEMES.join(", ")
            ));
        }
        if rest.is_empty() || (scheme == "file" && super::watch::local_path(url).is_none()) {
            return bad("names no repository");
        }
        return Ok(());
    }
    match url.split_once(':') {
        Some((host, path)) if !host.is_empty() && !host.contains('/') && !path.is_empty() => {
            if host.contains("::") || path.starts_with(':') {
                return bad("uses a remote helper (`<transport>::`), which is not allowed");
            }
            Ok(())
        }
        _ => bad(
            "is not an absolute path, a URL (https://, ssh://, git://, file://) or user@host:path",
        ),
    }
}

/// One reconcile's object and where it reports.
struct Run<'a> {
    ctx: &'a Source,
    repo: &'a GitRepository,
    namespace: &'a str,
    name: &'a str,
}

impl Run<'_> {
    fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    fn generation(&self) -> Option<i64> {
        self.repo.metadata.generation
    }

    /// The reconcile-request annotation's value now.
    fn requested(&self) -> Option<String> {
        self.repo.annotations().get(RECONCILE_REQUESTED_AT).cloned()
    }

    async fn write(
        &self,
        mut change: impl FnMut(&mut GitRepositoryStatus),
    ) -> Result<(), StatusError> {
        let api = self
            .ctx
            .client
            .namespaced_api::<GitRepository>(self.namespace);
        update_status(&api, self.name, |r: &mut GitRepository| {
            change(r.status.get_or_insert_with(GitRepositoryStatus::default));
        })
        .await?;
        Ok(())
    }

    /// Only a spec change fixes this: report it, and wait for that change.
    async fn stall(&self, reason: &str, message: &str) -> Result<Action, SourceError> {
        tracing::warn!(gitrepository = %self.key(), reason, message, "stalled");
        let (generation, requested) = (self.generation(), self.requested());
        self.write(|s| {
            conditions::stalled(s, reason, message, generation);
            s.observed_generation = generation;
            if requested.is_some() {
                s.last_handled_reconcile_at.clone_from(&requested);
            }
        })
        .await?;
        Ok(Action::await_change())
    }

    /// A failure a retry may fix: report it, keep the artifact, and back off.
    async fn fail(&self, reason: &str, message: &str) -> Result<Action, SourceError> {
        let generation = self.generation();
        let requested = self.requested();
        self.write(|s| {
            conditions::failed(s, reason, message, generation);
            if requested.is_some() {
                s.last_handled_reconcile_at.clone_from(&requested);
            }
        })
        .await?;
        self.ctx.recorder.publish_for(
            self.repo,
            EventDetails::warning(reason, "Fetch").with_note(message.to_owned()),
        );
        Err(SourceError::Failed {
            key: self.key(),
            message: message.to_owned(),
        })
    }

    /// A new revision is being exported.
    async fn progressing(&self, resolved: &Resolved) -> Result<(), SourceError> {
        let generation = self.generation();
        self.write(|s| conditions::progressing(s, &resolved.revision, generation))
            .await?;
        Ok(())
    }

    /// The artifact is in place: serve it. Whether it is new is decided against the status as
    /// written last (the cached object may not have caught up with this loop's own writes).
    async fn stored(
        &self,
        resolved: &Resolved,
        path: String,
        exported: &Exported,
    ) -> Result<(), SourceError> {
        let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let generation = self.generation();
        let requested = self.requested();
        let mut new = false;
        self.write(|s| {
            let kept_time = s
                .artifact
                .as_ref()
                .filter(|a| {
                    a.path == path && a.revision == resolved.revision && a.digest == exported.digest
                })
                .map(|a| a.last_update_time.clone());
            new = kept_time.is_none();
            s.artifact = Some(Artifact {
                path: path.clone(),
                revision: resolved.revision.clone(),
                digest: exported.digest.clone(),
                last_update_time: kept_time.unwrap_or_else(|| now.clone()),
            });
            conditions::stored(s, &resolved.revision, generation);
            s.observed_generation = generation;
            if requested.is_some() {
                s.last_handled_reconcile_at.clone_from(&requested);
            }
        })
        .await?;
        if new {
            let message = format!("stored artifact for revision '{}'", resolved.revision);
            tracing::info!(gitrepository = %self.key(), revision = %resolved.revision, digest = %exported.digest, reused = exported.reused, "new artifact");
            self.ctx.recorder.publish_for(
                self.repo,
                EventDetails::normal("NewArtifact", "Fetch").with_note(message),
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_git_cannot_fetch_should_be_refused_before_git() {
        for good in [
            "/srv/git/app",
            "file:///srv/git/app",
            "https://example.com/org/app.git",
            "ssh://git@example.com:22/org/app.git",
            "git@example.com:org/app.git",
        ] {
            assert_eq!(check_url(good), Ok(()), "{good}");
        }
        for bad in [
            "",
            "-uhoh",
            "relative/path",
            "ext::sh -c touch% /tmp/x",
            "fd::17",
            "ftp://example.com/x",
            "https://",
            "file://host/x",
            "/with space",
        ] {
            assert!(check_url(bad).is_err(), "{bad}");
        }
    }
}

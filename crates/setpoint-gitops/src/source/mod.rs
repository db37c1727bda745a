//! The source loop: each GitRepository is resolved to a commit of its repository, whose files
//! become an artifact the sync loop reads (Flux's source-controller, for git).
//!
//! [`run`] installs the GitRepository CRD, then reconciles every GitRepository
//! (`reconcile.rs`) when its spec or annotations change, every `spec.interval`, and — for a
//! local repository — as soon as its refs change (`watch.rs`). Git is the `git` binary
//! (`git.rs`), run against a bare mirror per GitRepository (`mirror.rs`); refs are resolved in
//! `resolve.rs` (semver ranges in `semver.rs`), artifacts are exported and kept in `export.rs`
//! with the ignore rules of `ignore.rs`, credentials come from `auth.rs`, and conditions are
//! written as `conditions.rs` says.

mod auth;
mod conditions;
mod export;
mod git;
mod ignore;
mod mirror;
mod reconcile;
mod resolve;
mod semver;
mod watch;

use std::sync::Arc;
use std::time::Duration;

use kube::CustomResourceExt as _;
use setpoint_runtime::{
    install_crd, Backoff, Controller, ControllerError, EventRecorder, InformerOptions, Predicate,
    RateLimit, Reporter,
};
use tokio_util::sync::CancellationToken;

use crate::{GitRepository, GitopsContext};
use reconcile::Source;

/// The loop's name (controller, metrics, Events' reporter).
pub const NAME: &str = "gitops-source";
/// How long a fetch may take when `spec.timeout` is not set.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// GitRepositories reconciled at once.
const CONCURRENCY: usize = 4;
/// How long installing the CRD may take.
const CRD_TIMEOUT: Duration = Duration::from_secs(60);

/// Installs the GitRepository CRD, then runs the source loop until `shutdown` is cancelled.
/// If the CRD cannot be installed the loop logs why and waits for `shutdown` (the other
/// loops of the process keep running).
pub async fn run(ctx: GitopsContext, shutdown: CancellationToken) -> Result<(), ControllerError> {
    if let Err(e) = install_crd(&ctx.client, &GitRepository::crd(), CRD_TIMEOUT).await {
        tracing::error!(error = %e, "installing the GitRepository CRD; the source loop does not run");
        shutdown.cancelled().await;
        return Ok(());
    }
    tracing::info!(root = %ctx.artifacts.root().display(), "GitRepository artifacts and mirrors");
    let source = Arc::new(Source {
        client: ctx.client.clone(),
        artifacts: ctx.artifacts.clone(),
        recorder: EventRecorder::new(ctx.client.clone(), Reporter::new(NAME, "setpoint")),
    });
    let artifacts = ctx.artifacts.clone();
    let pollers = shutdown.child_token();
    let stop_pollers = pollers.clone();
    let result = Controller::<GitRepository>::new(&ctx.factory)
        .named(NAME)
        .registered_in(&ctx.metrics)
        .concurrency(CONCURRENCY)
        // Failures retry from a second, doubling to ten minutes (Flux retries from 750 ms
        // to 15 minutes), not from client-go's 5 ms: each retry runs git.
        .rate_limit(RateLimit {
            backoff: Backoff::new(Duration::from_secs(1), Duration::from_secs(600)),
            bucket: None,
        })
        .predicate(Predicate::generation_changed().or(Predicate::annotations_changed()))
        .watches_handler(InformerOptions::default(), move |enqueuer| {
            watch::LocalRepos::new(enqueuer, artifacts, pollers)
        })
        .run(reconcile::reconcile, source, shutdown.cancelled_owned())
        .await;
    stop_pollers.cancel();
    result
}

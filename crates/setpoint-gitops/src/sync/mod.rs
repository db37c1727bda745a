//! The sync loop: applies one path of a source's artifact with server-side apply, keeps an
//! inventory of what it applied, prunes what left the source, checks health, and corrects
//! drift at once (Flux's kustomize-controller semantics; docs/gitops.md).
//!
//! A Sync is reconciled when its spec or annotations change (the reconcile-request
//! annotation), when its source's artifact changes, when a Sync it depends on changes, when a
//! managed object drifts (`drift.rs`: watches of every applied kind), and every `interval`
//! (`retryInterval` after a failure). Layout: `reconcile` (one reconcile, start to end),
//! `source` (artifact and dependencies), `prepare` (namespaces, labels, ignored fields),
//! `apply` (staged server-side apply writing only what differs), `prune`, `health` (one object) and `checks` (waiting for all),
//! `status`, `drift`, `discovery`, `impersonate`, `diff` (what a reconcile would change).

mod apply;
mod checks;
mod diff;
mod discovery;
mod drift;
mod health;
mod impersonate;
mod memo;
mod prepare;
mod prune;
mod reconcile;
mod source;
mod status;
mod unified;

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use kube::CustomResourceExt;
use setpoint_runtime::{
    install_crd, Controller, ControllerError, Deleted, Enqueuer, EventHandler, EventRecorder,
    InformerOptions, ObjectCache, ObjectKey, Predicate, Reporter,
};
use tokio_util::sync::CancellationToken;

pub use diff::{diff, DiffError, ObjectDiff, Pending};

use crate::kinds::{GitRepository, Sync};
use crate::{ArtifactStore, GitopsContext};
use discovery::Discovery;
use drift::DriftWatches;

/// The loop's name (logs, metrics, Events' reporting controller).
pub const NAME: &str = "gitops-sync";
/// Syncs reconciled at once.
const CONCURRENCY: usize = 4;
/// How long installing the CRDs may take.
const CRD_TIMEOUT: Duration = Duration::from_secs(60);

/// Why a reconcile must be retried (with backoff): the status could not be written.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    /// Writing a Sync's status failed.
    #[error("writing the status of Sync {0}")]
    Status(String, #[source] setpoint_runtime::StatusError),
    /// Reading a Sync failed.
    #[error("reading Sync {0}")]
    Read(String, #[source] kube::Error),
}

/// What every reconcile shares.
pub(crate) struct Context {
    /// The loop's client (its identity).
    client: setpoint_runtime::Client,
    /// Where the source loop puts artifacts.
    artifacts: ArtifactStore,
    /// Every Sync (for dependencies).
    syncs: ObjectCache<Sync>,
    /// Every GitRepository (for sources).
    repositories: ObjectCache<GitRepository>,
    /// Kinds resolved so far.
    discovery: Discovery,
    /// The drift watches.
    drift: DriftWatches,
    /// Events about Syncs.
    recorder: EventRecorder,
    /// What each Sync last verified.
    memos: memo::Memos,
    /// Each Sync's last build: from which artifact and path, and its objects.
    #[allow(clippy::type_complexity)] // a plain map; a type for it would add nothing
    builds: parking_lot::Mutex<HashMap<ObjectKey, ((String, String), Arc<Vec<serde_json::Value>>)>>,
}

/// Installs the Sync CRD (and the GitRepository CRD, which it reads; installing is
/// idempotent), then runs the loop until `shutdown` is cancelled (stop it that way: dropping
/// the future abandons reconciles mid-apply, which the next run finishes, being idempotent).
pub async fn run(ctx: GitopsContext, shutdown: CancellationToken) -> Result<(), ControllerError> {
    for crd in [Sync::crd(), GitRepository::crd()] {
        if let Err(e) = install_crd(&ctx.client, &crd, CRD_TIMEOUT).await {
            tracing::error!(error = %e, "installing the GitOps CRDs; the sync loop does not run");
            shutdown.cancelled().await;
            return Ok(());
        }
    }
    let enqueuer: Arc<OnceLock<Enqueuer<ObjectKey>>> = Arc::new(OnceLock::new());
    let syncs = ctx.factory.informer::<Sync>().store();
    let repositories = ctx.factory.informer::<GitRepository>().store();
    let context = Arc::new(Context {
        client: ctx.client.clone(),
        artifacts: ctx.artifacts.clone(),
        syncs: syncs.clone(),
        repositories,
        discovery: Discovery::default(),
        drift: DriftWatches::new(ctx.factory.clone(), enqueuer.clone()),
        recorder: EventRecorder::new(ctx.client.clone(), Reporter::new(NAME, NAME)),
        memos: memo::Memos::default(),
        builds: parking_lot::Mutex::new(HashMap::new()),
    });
    let for_sources = syncs.clone();
    let for_dependents = syncs;
    Controller::<Sync>::new(&ctx.factory)
        .named(NAME)
        .registered_in(&ctx.metrics)
        .concurrency(CONCURRENCY)
        .reconcile_timeout(Duration::MAX)
        .predicate(Predicate::generation_changed().or(Predicate::annotations_changed()))
        .watches_handler::<GitRepository, _>(InformerOptions::default(), move |queue| {
            let _ = enqueuer.set(queue.clone());
            SourceChanged {
                queue,
                syncs: for_sources,
            }
        })
        .watches::<Sync, _>(move |changed: &Sync| dependents(changed, &for_dependents))
        .run(reconcile::reconcile, context, shutdown.cancelled_owned())
        .await
}

/// The Syncs that depend on `changed`.
fn dependents(changed: &Sync, syncs: &ObjectCache<Sync>) -> Vec<ObjectKey> {
    let name = changed.metadata.name.as_deref().unwrap_or_default();
    let namespace = changed.metadata.namespace.as_deref().unwrap_or_default();
    syncs
        .list()
        .into_iter()
        .filter(|s| {
            let own = s.metadata.namespace.as_deref().unwrap_or_default();
            s.spec
                .depends_on
                .iter()
                .any(|d| d.name == name && d.namespace.as_deref().unwrap_or(own) == namespace)
        })
        .map(|s| ObjectKey::of(&*s))
        .collect()
}

/// Enqueues the Syncs reading a GitRepository when its artifact or readiness changes.
struct SourceChanged {
    queue: Enqueuer<ObjectKey>,
    syncs: ObjectCache<Sync>,
}

impl SourceChanged {
    fn enqueue_readers(&self, repository: &GitRepository) {
        let name = repository.metadata.name.as_deref().unwrap_or_default();
        let namespace = repository.metadata.namespace.as_deref().unwrap_or_default();
        for sync in self.syncs.list() {
            let reference = &sync.spec.source_ref;
            let own = sync.metadata.namespace.as_deref().unwrap_or_default();
            if reference.kind == "GitRepository"
                && reference.name == name
                && reference.namespace.as_deref().unwrap_or(own) == namespace
            {
                self.queue.add(ObjectKey::of(&*sync));
            }
        }
    }
}

/// What of a GitRepository a Sync reads.
fn source_view(repository: &GitRepository) -> impl PartialEq + '_ {
    repository.status.as_ref().map(|s| {
        (
            &s.artifact,
            s.conditions
                .iter()
                .find(|c| c.type_ == crate::kinds::condition::READY)
                .map(|c| &c.status),
        )
    })
}

impl EventHandler<GitRepository> for SourceChanged {
    fn on_add(&self, object: &Arc<GitRepository>, _in_initial_list: bool) {
        self.enqueue_readers(object);
    }

    fn on_update(&self, old: &Arc<GitRepository>, new: &Arc<GitRepository>) {
        if source_view(old) != source_view(new) {
            self.enqueue_readers(new);
        }
    }

    fn on_delete(&self, deleted: &Deleted<GitRepository>) {
        self.enqueue_readers(deleted.object());
    }
}

//! The two custom resources of `gitops.setpoint.dev/v1`: `GitRepository` (where the desired
//! state lives and which commit of it is current) and `Sync` (which path of which source to
//! apply, how, and what was applied). Field names are Flux's (`source.toolkit.fluxcd.io/v1`
//! GitRepository, `kustomize.toolkit.fluxcd.io/v1` Kustomization) wherever the feature is the
//! same, so a Flux user reads them without a manual; `ignoreDifferences` is Argo CD's.
//!
//! Durations are Go duration strings (`30s`, `5m`, `1h30m`), as Flux's are; `duration.rs`
//! parses them.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The API group of both kinds.
pub const GROUP: &str = "gitops.setpoint.dev";
/// Their version.
pub const VERSION: &str = "v1";
/// Annotation that asks for a reconcile now: any new value (conventionally the time) makes the
/// loop reconcile at once and record the value in `status.lastHandledReconcileAt`.
pub const RECONCILE_REQUESTED_AT: &str = "reconcile.setpoint.dev/requestedAt";
/// Label on every object a Sync applied: the Sync's name.
pub const SYNC_NAME_LABEL: &str = "gitops.setpoint.dev/sync-name";
/// Label on every object a Sync applied: the Sync's namespace.
pub const SYNC_NAMESPACE_LABEL: &str = "gitops.setpoint.dev/sync-namespace";
/// Annotation on an object in git: `disabled` keeps it when it leaves git (never pruned).
pub const PRUNE_ANNOTATION: &str = "gitops.setpoint.dev/prune";
/// The field manager of every server-side apply a Sync makes.
pub const FIELD_MANAGER: &str = "setpoint-gitops";

/// Condition types (the status conventions Flux's kstatus reads).
pub mod condition {
    /// The object is reconciled: the artifact is current / the revision is applied and healthy.
    pub const READY: &str = "Ready";
    /// Work in progress (reason says what).
    pub const RECONCILING: &str = "Reconciling";
    /// No progress without a change to the object or its source (reason and message say why).
    pub const STALLED: &str = "Stalled";
    /// GitRepository: the last fetch failed (the previous artifact, if any, is still served).
    pub const FETCH_FAILED: &str = "FetchFailed";
    /// Sync: the applied objects are healthy (`wait` / `healthChecks`).
    pub const HEALTHY: &str = "Healthy";
}

/// A git repository to follow, resolved to one commit whose files become an artifact.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "gitops.setpoint.dev",
    version = "v1",
    kind = "GitRepository",
    plural = "gitrepositories",
    namespaced,
    status = "GitRepositoryStatus",
    shortname = "gitrepo",
    printcolumn = r#"{"name":"URL","type":"string","jsonPath":".spec.url"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Status","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].message"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct GitRepositorySpec {
    /// Where the repository is: a local path, `file://…`, or any URL `git` can fetch
    /// (`https://…`, `ssh://…`, `user@host:path`).
    pub url: String,
    /// Which commit: a branch (default: the remote's HEAD branch), a tag, a semver range over
    /// tags, or a commit (on `branch` when both are given).
    #[serde(default, rename = "ref", skip_serializing_if = "Option::is_none")]
    pub reference: Option<GitRepositoryRef>,
    /// How often the remote is fetched (Go duration, e.g. `1m`). A local repository is also
    /// watched, so its new commits are seen at once.
    pub interval: String,
    /// How long a fetch may take (default `60s`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    /// A Secret in the same namespace with credentials: `username` and `password` (HTTPS basic
    /// auth), or `identity` (an SSH private key) and optionally `known_hosts`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<LocalObjectReference>,
    /// Paths left out of the artifact, in `.gitignore` format (one pattern a line); added to
    /// the default (`.git/`, and any `.sourceignore` files of the repository).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ignore: Option<String>,
    /// Stops fetching; the last artifact stays.
    #[serde(default)]
    pub suspend: bool,
}

/// The ref a GitRepository follows (at most one of `tag`, `semver`; `commit` may pin a
/// commit on `branch`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GitRepositoryRef {
    /// A branch name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// A tag name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
    /// A semver range (`>=1.0.0 <2.0.0`, `^1.2`, `~1.2.3`, `1.x`): the highest tag in it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub semver: Option<String>,
    /// A full commit SHA-1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
}

/// A reference to an object in the same namespace.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct LocalObjectReference {
    /// Its name.
    pub name: String,
}

/// What the source loop observed and made.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GitRepositoryStatus {
    /// The generation this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready`, `Reconciling`, `Stalled`, `FetchFailed`.
    #[serde(default)]
    pub conditions: Vec<Condition>,
    /// The current artifact: the files of the resolved commit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact: Option<Artifact>,
    /// The last value of the reconcile-request annotation that was handled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_handled_reconcile_at: Option<String>,
}

/// The files of one commit, exported for Syncs to read.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Artifact {
    /// Where the files are, relative to the artifact store's root
    /// (`gitrepository/<namespace>/<name>/<sha>`; see `artifact.rs`).
    pub path: String,
    /// `<branch>@sha1:<sha>`, `<tag>@sha1:<sha>`, or `sha1:<sha>` for a bare commit.
    pub revision: String,
    /// `sha256:<hex>` over the exported files (paths and contents), so Syncs see whether what
    /// they read changed even when the commit did not touch their path.
    pub digest: String,
    /// When this artifact was made (RFC 3339).
    pub last_update_time: String,
}

/// Applies one path of a source's artifact to the cluster, prunes what left it, and corrects
/// drift (Flux's Kustomization, Argo CD's Application).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "gitops.setpoint.dev",
    version = "v1",
    kind = "Sync",
    plural = "syncs",
    namespaced,
    status = "SyncStatus",
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Status","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].message"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct SyncSpec {
    /// The source (a `GitRepository`; namespace defaults to the Sync's).
    pub source_ref: SourceReference,
    /// The directory in the artifact to apply (default: its root). Holds plain YAML
    /// (multi-document, `List` kinds), or a `kustomization.yaml` (a subset: see `docs/gitops.md`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// How often the whole path is re-applied and drift corrected even without any event
    /// (Go duration). Changes to managed objects are corrected at once, not at this interval.
    pub interval: String,
    /// How soon a failed reconcile is retried (default: `interval`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_interval: Option<String>,
    /// How long applying, and waiting for health, may take (default: `interval`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    /// Deletes the objects that were applied before and are no longer in the source.
    pub prune: bool,
    /// Waits until every applied object is healthy before reporting `Ready`.
    #[serde(default)]
    pub wait: bool,
    /// Objects whose health decides `Ready` (besides all applied ones when `wait`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub health_checks: Vec<ObjectReference>,
    /// Syncs that must be `Ready` (at their current source revision) before this one applies.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub depends_on: Vec<DependencyReference>,
    /// Stops applying and correcting drift; nothing is pruned while suspended.
    #[serde(default)]
    pub suspend: bool,
    /// Sets (or overrides) the namespace of every namespaced object applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_namespace: Option<String>,
    /// Applies as this ServiceAccount of the Sync's namespace (impersonation), so RBAC limits
    /// what the source may change; unset, the loop's own identity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_name: Option<String>,
    /// Fields left to others (Argo CD's `ignoreDifferences`): removed from what is applied, so
    /// this Sync neither sets them nor reverts another manager's changes to them (e.g. an
    /// autoscaler's `/spec/replicas`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ignore_differences: Vec<IgnoreDifference>,
    /// Lets a prune delete everything when the source suddenly yields no objects (refused by
    /// default: an empty path is more often a mistake than an intent).
    #[serde(default)]
    pub allow_empty_prune: bool,
}

impl Sync {
    /// The namespace of the Sync's source (`sourceRef.namespace`, else the Sync's own).
    pub fn source_namespace(&self) -> String {
        self.spec
            .source_ref
            .namespace
            .clone()
            .or_else(|| self.metadata.namespace.clone())
            .unwrap_or_default()
    }
}

/// The source a Sync reads.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SourceReference {
    /// `GitRepository` (the only kind).
    pub kind: String,
    /// Its name.
    pub name: String,
    /// Its namespace (default: the Sync's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// An object whose health a Sync checks.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObjectReference {
    /// `group/version` or `version`.
    pub api_version: String,
    /// Its kind.
    pub kind: String,
    /// Its name.
    pub name: String,
    /// Its namespace (namespaced kinds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// Another Sync this one waits for.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct DependencyReference {
    /// Its name.
    pub name: String,
    /// Its namespace (default: the dependant's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// Fields of matching objects that a Sync leaves to others.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IgnoreDifference {
    /// The objects' API group (`""` or absent: the core group; `apps` for Deployments).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// Their kind.
    pub kind: String,
    /// Only the object of this name (default: every one of the kind).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Only objects in this namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// JSON pointers (RFC 6901) of the fields, e.g. `/spec/replicas`.
    #[serde(default)]
    pub json_pointers: Vec<String>,
}

/// What the sync loop applied and observed.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SyncStatus {
    /// The generation this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready`, `Reconciling`, `Stalled`, `Healthy`.
    #[serde(default)]
    pub conditions: Vec<Condition>,
    /// The source revision last applied whole (and found healthy when waiting).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_applied_revision: Option<String>,
    /// The source revision last tried.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_attempted_revision: Option<String>,
    /// The objects the last successful apply made or kept: what the next prune compares with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inventory: Option<Inventory>,
    /// The last value of the reconcile-request annotation that was handled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_handled_reconcile_at: Option<String>,
}

/// The objects a Sync manages (Flux's inventory format).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct Inventory {
    /// One per object, sorted by `id`.
    #[serde(default)]
    pub entries: Vec<InventoryEntry>,
}

/// One managed object.
#[derive(
    Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, JsonSchema,
)]
pub struct InventoryEntry {
    /// `<namespace>_<name>_<group>_<kind>` (namespace empty for cluster-scoped objects, group
    /// empty for the core group).
    pub id: String,
    /// The version it was applied at (`v1`, `v1beta1`, …).
    pub v: String,
}

//! What a reconcile of a Sync would change, without changing anything: each object of its
//! path dry-run applied (as the loop would apply it) and compared with the live object, shown
//! as a unified diff of their YAML (as `kubectl diff` shows it), plus the objects a prune
//! would delete. `setpoint gitops diff` prints it.

use std::path::Path;

use serde_json::Value;
use setpoint_runtime::Client;
use tokio::time::Instant;

use super::apply::{comparable, dynamic_api, Applier, Change};
use super::discovery::Discovery;
use super::impersonate;
use super::prepare::{prepare, Desired};
use super::prune;
use super::unified::unified;
use crate::kinds::{Inventory, Sync};
use crate::manifests::{self, BuildError, ObjectId};

/// Why no diff could be made.
#[derive(Debug, thiserror::Error)]
pub enum DiffError {
    /// The path did not build.
    #[error("building the manifests")]
    Build(#[source] BuildError),
    /// The Sync's ServiceAccount cannot be impersonated.
    #[error("{0}")]
    Impersonation(String),
}

/// What a reconcile would do to one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pending {
    /// Create it.
    Create,
    /// Change it.
    Configure,
    /// Delete it (prune).
    Prune,
    /// The API refuses it (the message): the reconcile would fail.
    Refused(String),
}

/// One object that would change.
#[derive(Debug, Clone)]
pub struct ObjectDiff {
    /// The object (`Kind/namespace/name`).
    pub object: String,
    /// What would happen.
    pub pending: Pending,
    /// The unified diff, live → merged (empty for a refused object).
    pub diff: String,
}

/// The objects that a reconcile of `sync` from the files at `root` would change, in apply
/// order, then those it would prune. Unchanged objects are left out, so an empty answer
/// means "in sync". Cancel-safe: it only reads and dry-runs.
pub async fn diff(client: &Client, sync: &Sync, root: &Path) -> Result<Vec<ObjectDiff>, DiffError> {
    let path = sync.spec.path.clone().unwrap_or_default();
    let objects = manifests::build(root, &path).map_err(DiffError::Build)?;
    let namespace = sync.metadata.namespace.clone().unwrap_or_default();
    let kube = impersonate::client_for(
        client,
        &namespace,
        sync.spec.service_account_name.as_deref(),
    )
    .map_err(|e| DiffError::Impersonation(e.to_string()))?;
    let discovery = Discovery::default();
    let desired = prepare(sync, objects, &kube, &discovery)
        .await
        .map_err(DiffError::Build)?;
    let applier = Applier {
        client: &kube,
        discovery: &discovery,
        deadline: Instant::now(),
    };
    let mut diffs = Vec::new();
    for stage in super::apply::stages(&desired) {
        for d in stage {
            if let Some(diff) = one(&applier, &discovery, &kube, d).await {
                diffs.push(diff);
            }
        }
    }
    if sync.spec.prune {
        let mut entries: Vec<_> = desired.iter().map(Desired::inventory_entry).collect();
        entries.sort();
        let old = sync
            .status
            .as_ref()
            .and_then(|s| s.inventory.clone())
            .unwrap_or_default();
        let name = sync.metadata.name.clone().unwrap_or_default();
        for (id, version) in prune::stale(&old, &Inventory { entries }) {
            if let Some(live) = live(&discovery, &kube, &id, &version).await {
                if prune::prunable(&live, &name, &namespace) {
                    diffs.push(ObjectDiff {
                        diff: unified(
                            &label("live", &id, &version),
                            &label("merged", &id, &version),
                            &yaml(&live),
                            "",
                        ),
                        object: id.to_string(),
                        pending: Pending::Prune,
                    });
                }
            }
        }
    }
    Ok(diffs)
}

/// The diff of one object, `None` when unchanged.
async fn one(
    applier: &Applier<'_>,
    discovery: &Discovery,
    kube: &kube::Client,
    d: Desired,
) -> Option<ObjectDiff> {
    let object = d.id.to_string();
    let (live_name, merged_name) = (
        label("live", &d.id, &d.version),
        label("merged", &d.id, &d.version),
    );
    if discovery
        .resolve(kube, &d.id.group, &d.version, &d.id.kind)
        .await
        .is_err()
    {
        // Its kind is not served yet (its CRD comes with it): it would be created.
        return Some(ObjectDiff {
            diff: unified(&live_name, &merged_name, "", &yaml(&d.object)),
            object,
            pending: Pending::Create,
        });
    }
    match applier.plan_one(d).await {
        Err(message) => Some(ObjectDiff {
            object,
            pending: Pending::Refused(message),
            diff: String::new(),
        }),
        Ok(planned) => {
            let pending = match planned.change() {
                Change::Unchanged => return None,
                Change::Created => Pending::Create,
                Change::Configured => Pending::Configure,
            };
            let live = planned
                .live
                .as_ref()
                .map(|l| yaml(&comparable(l)))
                .unwrap_or_default();
            Some(ObjectDiff {
                diff: unified(
                    &live_name,
                    &merged_name,
                    &live,
                    &yaml(&comparable(&planned.dry_run)),
                ),
                object,
                pending,
            })
        }
    }
}

/// The live object, if it exists and its kind is served.
async fn live(
    discovery: &Discovery,
    kube: &kube::Client,
    id: &ObjectId,
    version: &str,
) -> Option<Value> {
    let served = discovery
        .resolve(kube, &id.group, version, &id.kind)
        .await
        .ok()?;
    let api = dynamic_api(
        kube,
        &served.resource,
        served.namespaced.then_some(id.namespace.as_str()),
    );
    let live = api.get_opt(&id.name).await.ok()??;
    Some(comparable(&serde_json::to_value(live).ok()?))
}

/// kubectl diff's file name for an object: `<side>/<group>.<version>.<Kind>.<namespace>.<name>`.
fn label(side: &str, id: &ObjectId, version: &str) -> String {
    let group = if id.group.is_empty() {
        "core"
    } else {
        &id.group
    };
    let mut name = format!("{side}/{group}.{version}.{}", id.kind);
    if !id.namespace.is_empty() {
        name.push('.');
        name.push_str(&id.namespace);
    }
    name.push('.');
    name.push_str(&id.name);
    name
}

fn yaml(value: &Value) -> String {
    serde_yaml_ng::to_string(value).unwrap_or_default()
}

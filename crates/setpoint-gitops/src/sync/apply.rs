//! Staged server-side apply that writes only what differs.
//!
//! Objects go in three stages: definitions (CustomResourceDefinitions and Namespaces), then
//! cluster-scoped `*Class` kinds, then everything else; within a stage in a stable kind order
//! (RBAC, ServiceAccounts, ConfigMaps and Secrets before workloads, unknown kinds — custom
//! resources — last; cluster-scoped before namespaced; then by namespace and name). After the
//! definitions stage the loop waits until the CRDs are `Established` and the Namespaces
//! `Active`, so the next stages' kinds and namespaces exist.
//!
//! Each stage first asks the API for a server-side dry-run apply of every object (field
//! manager [`FIELD_MANAGER`], forced) and reads the live object: one refusal and nothing of the
//! stage is written. Then only the objects whose dry-run result differs from the live object
//! (managedFields, resourceVersion, generation, timestamps and status left out of the
//! comparison: [`comparable`]) are applied for real. A reconcile of an unchanged source over
//! unchanged objects therefore writes nothing.

use std::collections::HashSet;
use std::fmt;
use std::time::Duration;

use futures::{stream, StreamExt};
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::Value;
use tokio::time::{sleep, Instant};

use super::discovery::Discovery;
use super::prepare::Desired;
use crate::kinds::FIELD_MANAGER;
use crate::manifests::ObjectId;

/// Requests in flight at once within a stage.
const CONCURRENCY: usize = 16;
/// How often the definitions stage looks at its CRDs and Namespaces while waiting.
const POLL: Duration = Duration::from_millis(100);

/// What an apply did to one object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Change {
    /// It did not exist.
    Created,
    /// It differed.
    Configured,
    /// It was as wanted: nothing written.
    Unchanged,
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Change::Created => "created",
            Change::Configured => "configured",
            Change::Unchanged => "unchanged",
        })
    }
}

/// What applying did to one object.
#[derive(Debug, Clone)]
pub(crate) struct Applied {
    /// The object.
    pub(crate) id: ObjectId,
    /// What was done.
    pub(crate) change: Change,
    /// Its resource version after this apply (`None`: not looked at, it was known unchanged).
    pub(crate) resource_version: Option<String>,
}

fn resource_version_of(object: &Value) -> Option<String> {
    object
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .map(str::to_owned)
}

/// Why a stage was not applied (or not completely).
#[derive(Debug, thiserror::Error)]
pub(crate) enum ApplyError {
    /// Objects the API refused in the dry run (nothing of their stage was written).
    #[error("{}", .0.iter().map(|(id, m)| format!("{id} dry-run failed: {m}")).collect::<Vec<_>>().join("; "))]
    DryRun(Vec<(ObjectId, String)>),
    /// An object the API refused when applied for real (after its dry run passed).
    #[error("{0} apply failed: {1}")]
    Apply(ObjectId, String),
    /// A CRD or Namespace of the definitions stage did not become ready in time.
    #[error("{0} is not {1} after waiting; the objects that need it were not applied")]
    NotReady(ObjectId, &'static str),
}

/// One object's dry-run against the live state.
#[derive(Debug)]
pub(crate) struct Planned {
    /// The object.
    pub(crate) desired: Desired,
    /// The live object, if it exists.
    pub(crate) live: Option<Value>,
    /// What the API would make of it.
    pub(crate) dry_run: Value,
}

impl Planned {
    /// What applying would do.
    pub(crate) fn change(&self) -> Change {
        match &self.live {
            None => Change::Created,
            Some(live) if comparable(live) == comparable(&self.dry_run) => Change::Unchanged,
            Some(_) => Change::Configured,
        }
    }
}

/// Applies objects for one reconcile.
pub(crate) struct Applier<'a> {
    /// Who writes (the loop, or the impersonated ServiceAccount).
    pub(crate) client: &'a kube::Client,
    /// Where kinds are resolved.
    pub(crate) discovery: &'a Discovery,
    /// When the definitions stage stops waiting.
    pub(crate) deadline: Instant,
}

impl Applier<'_> {
    /// Applies every stage in turn; what each object's apply did, in apply order. Objects in
    /// `verified` (known equal to their live state: see `reconcile`'s memo) are neither dry-run
    /// nor applied, and reported unchanged without a resource version.
    pub(crate) async fn apply_all(
        &self,
        desired: &[Desired],
        verified: &HashSet<ObjectId>,
    ) -> Result<Vec<Applied>, ApplyError> {
        let mut changes = Vec::with_capacity(desired.len());
        for mut stage in stages(desired) {
            stage.retain(|d| {
                let known = verified.contains(&d.id);
                if known {
                    changes.push(Applied {
                        id: d.id.clone(),
                        change: Change::Unchanged,
                        resource_version: None,
                    });
                }
                !known
            });
            let planned = self.plan(stage).await?;
            let definitions_changed = planned
                .iter()
                .any(|p| p.desired.id.is_crd() && p.change() != Change::Unchanged);
            // The objects of a stage are independent: written concurrently, reported in order.
            let writes: Vec<_> = planned.iter().map(|p| self.write(p)).collect();
            let applied: Vec<Result<Applied, ApplyError>> =
                stream::iter(writes).buffered(CONCURRENCY).collect().await;
            for a in applied {
                changes.push(a?);
            }
            if definitions_changed {
                self.discovery.forget();
            }
            for p in &planned {
                if p.desired.id.is_crd() || p.desired.id.is_namespace() {
                    self.wait_ready(&p.desired.id).await?;
                }
            }
        }
        Ok(changes)
    }

    /// The dry run of every object of one stage (in its order), or every refusal.
    pub(crate) async fn plan(&self, stage: Vec<Desired>) -> Result<Vec<Planned>, ApplyError> {
        let results: Vec<Result<Planned, (ObjectId, String)>> = stream::iter(stage)
            .map(|desired| async move {
                let id = desired.id.clone();
                self.plan_one(desired).await.map_err(|m| (id, m))
            })
            .buffered(CONCURRENCY)
            .collect()
            .await;
        let mut planned = Vec::with_capacity(results.len());
        let mut refused = Vec::new();
        for result in results {
            match result {
                Ok(p) => planned.push(p),
                Err(e) => refused.push(e),
            }
        }
        if refused.is_empty() {
            Ok(planned)
        } else {
            Err(ApplyError::DryRun(refused))
        }
    }

    /// Writes one planned object if it differs.
    async fn write(&self, p: &Planned) -> Result<Applied, ApplyError> {
        let change = p.change();
        let mut resource_version = p.live.as_ref().and_then(resource_version_of);
        if change != Change::Unchanged {
            let applied = self
                .apply_one(&p.desired, false)
                .await
                .map_err(|m| ApplyError::Apply(p.desired.id.clone(), m))?;
            resource_version = resource_version_of(&applied);
        }
        Ok(Applied {
            id: p.desired.id.clone(),
            change,
            resource_version,
        })
    }

    /// The live object and the dry run of one object (the API's message if refused).
    pub(crate) async fn plan_one(&self, desired: Desired) -> Result<Planned, String> {
        let live = self.get(&desired).await?;
        let dry_run = self.apply_one(&desired, true).await?;
        Ok(Planned {
            desired,
            live,
            dry_run,
        })
    }

    /// The dynamic API of an object's kind, in its namespace.
    async fn api(&self, desired: &Desired) -> Result<kube::Api<kube::api::DynamicObject>, String> {
        let served = self
            .discovery
            .resolve(
                self.client,
                &desired.id.group,
                &desired.version,
                &desired.id.kind,
            )
            .await
            .map_err(|e| e.to_string())?;
        let namespace = (served.namespaced).then_some(desired.id.namespace.as_str());
        Ok(dynamic_api(self.client, &served.resource, namespace))
    }

    /// The live object, if any.
    async fn get(&self, desired: &Desired) -> Result<Option<Value>, String> {
        let api = self.api(desired).await?;
        match api.get_opt(&desired.id.name).await {
            Ok(live) => Ok(live.map(|o| serde_json::to_value(o).unwrap_or(Value::Null))),
            Err(e) => Err(api_message(&e)),
        }
    }

    /// A forced server-side apply (dry run or not); the object the API returned.
    async fn apply_one(&self, desired: &Desired, dry_run: bool) -> Result<Value, String> {
        let api = self.api(desired).await?;
        let mut params = PatchParams::apply(FIELD_MANAGER).force();
        if dry_run {
            params = params.dry_run();
        }
        let applied = api
            .patch(&desired.id.name, &params, &Patch::Apply(&desired.object))
            .await
            .map_err(|e| api_message(&e))?;
        Ok(serde_json::to_value(applied).unwrap_or(Value::Null))
    }

    /// Waits until a CRD is `Established` or a Namespace `Active`.
    async fn wait_ready(&self, id: &ObjectId) -> Result<(), ApplyError> {
        let (what, check): (&'static str, fn(&Value) -> bool) = if id.is_crd() {
            ("Established", crd_established)
        } else {
            ("Active", |ns| {
                ns.pointer("/status/phase").and_then(Value::as_str) == Some("Active")
            })
        };
        let resource = if id.is_crd() {
            kube::api::ApiResource::erase::<
                k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
            >(&())
        } else {
            kube::api::ApiResource::erase::<k8s_openapi::api::core::v1::Namespace>(&())
        };
        let api = dynamic_api(self.client, &resource, None);
        loop {
            if let Ok(Some(object)) = api.get_opt(&id.name).await {
                let value = serde_json::to_value(object).unwrap_or(Value::Null);
                if check(&value) {
                    return Ok(());
                }
            }
            if Instant::now() >= self.deadline {
                return Err(ApplyError::NotReady(id.clone(), what));
            }
            sleep(POLL).await;
        }
    }
}

/// Deletes one object (background propagation); `Ok(false)` if it was already gone.
pub(crate) async fn delete(
    client: &kube::Client,
    discovery: &Discovery,
    id: &ObjectId,
    version: &str,
) -> Result<bool, String> {
    let served = discovery
        .resolve(client, &id.group, version, &id.kind)
        .await
        .map_err(|e| e.to_string())?;
    let api = dynamic_api(
        client,
        &served.resource,
        served.namespaced.then_some(id.namespace.as_str()),
    );
    match api.delete(&id.name, &DeleteParams::background()).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(false),
        Err(e) => Err(api_message(&e)),
    }
}

/// The dynamic API of `resource`, in `namespace` or cluster-wide.
pub(crate) fn dynamic_api(
    client: &kube::Client,
    resource: &kube::api::ApiResource,
    namespace: Option<&str>,
) -> kube::Api<kube::api::DynamicObject> {
    match namespace {
        Some(ns) => kube::Api::namespaced_with(client.clone(), ns, resource),
        None => kube::Api::all_with(client.clone(), resource),
    }
}

fn crd_established(crd: &Value) -> bool {
    crd.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|conditions| {
            conditions.iter().any(|c| {
                c.get("type").and_then(Value::as_str) == Some("Established")
                    && c.get("status").and_then(Value::as_str) == Some("True")
            })
        })
}

/// The API's own message for a failed request (the `Status` message), else the error.
pub(crate) fn api_message(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) if !status.message.is_empty() => status.message.clone(),
        other => other.to_string(),
    }
}

/// An object without what every write changes or the server owns: `metadata.managedFields`,
/// `resourceVersion`, `generation`, `creationTimestamp`, `uid`, `selfLink`, and `status`.
pub(crate) fn comparable(object: &Value) -> Value {
    let mut object = object.clone();
    if let Some(map) = object.as_object_mut() {
        map.remove("status");
        if let Some(meta) = map.get_mut("metadata").and_then(Value::as_object_mut) {
            for field in [
                "managedFields",
                "resourceVersion",
                "generation",
                "creationTimestamp",
                "uid",
                "selfLink",
            ] {
                meta.remove(field);
            }
        }
    }
    object
}

/// The rank of a kind within a stage (lower first); kinds not listed (custom resources) last.
fn kind_rank(kind: &str) -> usize {
    const ORDER: &[&str] = &[
        "Namespace",
        "CustomResourceDefinition",
        "NetworkPolicy",
        "ResourceQuota",
        "LimitRange",
        "PodDisruptionBudget",
        "ServiceAccount",
        "Secret",
        "ConfigMap",
        "StorageClass",
        "PersistentVolume",
        "PersistentVolumeClaim",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "Service",
        "DaemonSet",
        "Pod",
        "ReplicationController",
        "ReplicaSet",
        "Deployment",
        "HorizontalPodAutoscaler",
        "StatefulSet",
        "Job",
        "CronJob",
        "IngressClass",
        "Ingress",
        "APIService",
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    ];
    ORDER.iter().position(|k| *k == kind).unwrap_or(ORDER.len())
}

/// Which stage an object is applied in.
fn stage_of(desired: &Desired) -> usize {
    if desired.id.is_crd() || desired.id.is_namespace() {
        0
    } else if desired.id.namespace.is_empty() && desired.id.kind.ends_with("Class") {
        1
    } else {
        2
    }
}

/// The non-empty stages, each in apply order.
pub(crate) fn stages(desired: &[Desired]) -> Vec<Vec<Desired>> {
    let mut stages: Vec<Vec<Desired>> = vec![Vec::new(), Vec::new(), Vec::new()];
    for d in desired {
        stages[stage_of(d)].push(d.clone());
    }
    for stage in &mut stages {
        stage.sort_by(|a, b| {
            let key = |d: &Desired| (kind_rank(&d.id.kind), !d.id.namespace.is_empty());
            key(a).cmp(&key(b)).then_with(|| a.id.cmp(&b.id))
        });
    }
    stages.retain(|s| !s.is_empty());
    stages
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn desired(api_version: &str, kind: &str, namespace: &str, name: &str) -> Desired {
        let object = json!({"apiVersion": api_version, "kind": kind,
            "metadata": {"name": name, "namespace": namespace}});
        let mut id = ObjectId::of(&object).expect("id");
        id.namespace = namespace.to_owned();
        Desired {
            id,
            version: "v1".to_owned(),
            object,
        }
    }

    #[test]
    fn stages_should_put_definitions_first_and_workloads_after_their_config() {
        let all = vec![
            desired("example.com/v1", "Widget", "a", "w"),
            desired("apps/v1", "Deployment", "a", "web"),
            desired("v1", "ConfigMap", "a", "conf"),
            desired("v1", "Namespace", "", "a"),
            desired(
                "apiextensions.k8s.io/v1",
                "CustomResourceDefinition",
                "",
                "widgets.example.com",
            ),
            desired("storage.k8s.io/v1", "StorageClass", "", "fast"),
            desired("rbac.authorization.k8s.io/v1", "ClusterRole", "", "r"),
            desired("v1", "ServiceAccount", "a", "sa"),
        ];
        let order: Vec<Vec<String>> = stages(&all)
            .iter()
            .map(|s| s.iter().map(|d| d.id.kind.clone()).collect())
            .collect();
        assert_eq!(
            order,
            vec![
                vec!["Namespace", "CustomResourceDefinition"],
                vec!["StorageClass"],
                vec![
                    "ServiceAccount",
                    "ConfigMap",
                    "ClusterRole",
                    "Deployment",
                    "Widget"
                ],
            ]
        );
    }

    #[test]
    fn comparison_should_ignore_server_bookkeeping() {
        let live = json!({"metadata": {"name": "a", "resourceVersion": "5", "generation": 2,
            "managedFields": [{"manager": "x"}]}, "spec": {"replicas": 1}, "status": {"x": 1}});
        let dry = json!({"metadata": {"name": "a", "resourceVersion": "6", "generation": 3},
            "spec": {"replicas": 1}});
        assert_eq!(comparable(&live), comparable(&dry));
        let changed = json!({"metadata": {"name": "a"}, "spec": {"replicas": 2}});
        assert_ne!(comparable(&live), comparable(&changed));
    }
}

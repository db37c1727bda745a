//! The sample operator's controller: for every `Foo`, a Deployment named by
//! `spec.deploymentName` with `spec.replicas` pods, owned by the Foo (ownerReference with
//! `controller: true`, so the garbage collector deletes it after the Foo); drift is put back (a
//! Deployment scaled or deleted by hand), `status.availableReplicas` and a `Ready` condition
//! follow the Deployment, Events record what was done, and a finalizer removes the Foo's state
//! file (`<state-dir>/<namespace>_<name>.json`, something outside the API) before the Foo goes.
//!
//! Kubernetes' sample-controller, on Setpoint's SDK. [`run`] takes any [`Client`]: in-process
//! (a test env, or an API server in the same process) or remote (a kubeconfig).

// The kind is sample-controller's `Foo`, so a Foo object is called `foo`.
#![allow(clippy::disallowed_names)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Resource, ResourceExt};
use serde_json::json;
use setpoint_runtime::owner;
use setpoint_runtime::{
    finalizer, update_status, Action, Client, Controller, ControllerError, EventDetails,
    EventRecorder, FinalizerError, FinalizerEvent, InformerFactory, Reporter, StatusError,
    StatusUpdate,
};

use super::foo::{Foo, FooCondition, FooStatus};

/// The finalizer that guards the state file.
pub(crate) const FINALIZER: &str = "samplecontroller.setpoint.dev/state-file";
/// The controller's name, in logs, metrics and Events.
pub(crate) const CONTROLLER_NAME: &str = "sample-controller";

/// What a reconcile can fail with; each is retried with backoff.
#[derive(Debug, thiserror::Error)]
pub(crate) enum OperatorError {
    /// A request to the API failed.
    #[error("{action}: {source}")]
    Api {
        /// What was being done.
        action: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// A Deployment of that name exists and another controller (or nobody) owns it.
    #[error("Resource {0:?} already exists and is not managed by Foo")]
    NotOurs(String),
    /// The state file could not be written or removed.
    #[error("state file {path}: {source}")]
    StateFile {
        /// The file.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// Adding or removing the finalizer failed.
    #[error("finalizer: {0}")]
    Finalizer(#[source] Box<FinalizerError<OperatorError>>),
    /// Writing the status failed.
    #[error(transparent)]
    Status(#[from] StatusError),
    /// The Foo has no namespace or uid (not read from the API).
    #[error("the Foo has no {0}")]
    Incomplete(&'static str),
}

/// What every reconcile shares.
pub(crate) struct Operator {
    client: Client,
    recorder: EventRecorder,
    state_dir: PathBuf,
}

/// Runs the operator on `client` until `shutdown` resolves, writing state files under
/// `state_dir`. Expects the Foo CRD to be installed (`setpoint_runtime::install_crd`).
pub(crate) async fn run(
    client: Client,
    state_dir: PathBuf,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<(), ControllerError> {
    let factory = InformerFactory::new(client.clone());
    let controller = Controller::<Foo>::new(&factory)
        .named(CONTROLLER_NAME)
        .owns::<Deployment>();
    let recorder = EventRecorder::new(client.clone(), Reporter::new(CONTROLLER_NAME, "sample-0"));
    let ctx = Arc::new(Operator {
        client,
        recorder: recorder.clone(),
        state_dir,
    });
    let result = controller.run(reconcile, ctx, shutdown).await;
    recorder.flush().await;
    factory.shut_down();
    result
}

/// The state file of the Foo `namespace/name` under `dir`.
pub(crate) fn state_file(dir: &Path, namespace: &str, name: &str) -> PathBuf {
    dir.join(format!("{namespace}_{name}.json"))
}

fn api_error(action: impl Into<String>) -> impl FnOnce(kube::Error) -> OperatorError {
    let action = action.into();
    move |source| OperatorError::Api { action, source }
}

/// Reconciles one Foo, under the state-file finalizer.
async fn reconcile(foo: Arc<Foo>, ctx: Arc<Operator>) -> Result<Action, OperatorError> {
    let ns = foo
        .namespace()
        .ok_or(OperatorError::Incomplete("namespace"))?;
    let foos = ctx.client.namespaced_api::<Foo>(&ns);
    let done = finalizer(&foos, FINALIZER, foo, |event| async {
        match event {
            FinalizerEvent::Apply(foo) => apply(&foo, &ns, &ctx).await,
            FinalizerEvent::Cleanup(foo) => cleanup(&foo, &ns, &ctx).await,
        }
    })
    .await;
    match done {
        Ok(done) => Ok(done.action()),
        Err(FinalizerError::ApplyFailed(e) | FinalizerError::CleanupFailed(e)) => Err(e),
        Err(e) => Err(OperatorError::Finalizer(Box::new(e))),
    }
}

/// Makes the world match a live Foo: the Deployment, the state file, the status.
async fn apply(foo: &Foo, ns: &str, ctx: &Operator) -> Result<Action, OperatorError> {
    let deployment_name = foo.spec.deployment_name.clone();
    if deployment_name.is_empty() {
        // The spec cannot work until someone edits it: say so, don't retry.
        ctx.recorder.publish_for(
            foo,
            EventDetails::warning("InvalidSpec", "Reconcile")
                .with_note("spec.deploymentName must be specified"),
        );
        set_status(
            ctx,
            foo,
            ns,
            0,
            ready(false, "InvalidSpec", "spec.deploymentName is empty"),
        )
        .await?;
        return Ok(Action::await_change());
    }
    let deployments = ctx.client.namespaced_api::<Deployment>(ns);
    let desired = foo.spec.desired_replicas();
    let live = deployments
        .get_opt(&deployment_name)
        .await
        .map_err(api_error(format!("reading deployment {deployment_name}")))?;
    let deployment = match live {
        None => {
            let created = deployments
                .create(&PostParams::default(), &new_deployment(foo)?)
                .await
                .map_err(api_error(format!("creating deployment {deployment_name}")))?;
            ctx.recorder.publish_for(
                foo,
                EventDetails::normal("DeploymentCreated", "Create")
                    .with_note(format!("Created Deployment {deployment_name}")),
            );
            created
        }
        Some(d) if !owner::is_controlled_by(d.meta(), foo.meta()) => {
            let error = OperatorError::NotOurs(deployment_name);
            ctx.recorder.publish_for(
                foo,
                EventDetails::warning("ErrResourceExists", "Reconcile")
                    .with_note(error.to_string()),
            );
            return Err(error);
        }
        Some(d) if d.spec.as_ref().and_then(|s| s.replicas) != Some(desired) => {
            let scaled = deployments
                .patch(
                    &deployment_name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"spec": {"replicas": desired}})),
                )
                .await
                .map_err(api_error(format!("scaling deployment {deployment_name}")))?;
            ctx.recorder.publish_for(
                foo,
                EventDetails::normal("DeploymentScaled", "Scale")
                    .with_note(format!("Scaled Deployment {deployment_name} to {desired}")),
            );
            scaled
        }
        Some(d) => d,
    };
    write_state_file(ctx, foo, ns)?;
    let available = deployment
        .status
        .as_ref()
        .and_then(|s| s.available_replicas)
        .unwrap_or(0);
    let condition = if available >= desired {
        ready(
            true,
            "AllReplicasAvailable",
            &format!("{available}/{desired} replicas available"),
        )
    } else {
        ready(
            false,
            "ReplicasUnavailable",
            &format!("{available}/{desired} replicas available"),
        )
    };
    let changed = set_status(ctx, foo, ns, available, condition).await?;
    if changed {
        ctx.recorder.publish_for(
            foo,
            EventDetails::normal("Synced", "Reconcile").with_note("Foo synced successfully"),
        );
    }
    Ok(Action::await_change())
}

/// Removes what lives outside the API; the Deployment goes by garbage collection.
async fn cleanup(foo: &Foo, ns: &str, ctx: &Operator) -> Result<Action, OperatorError> {
    let path = state_file(&ctx.state_dir, ns, &foo.name_any());
    match std::fs::remove_file(&path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(source) => {
            return Err(OperatorError::StateFile {
                path: path.display().to_string(),
                source,
            })
        }
    }
    ctx.recorder.publish_for(
        foo,
        EventDetails::normal("StateRemoved", "Cleanup")
            .with_note(format!("Removed {}", path.display())),
    );
    Ok(Action::await_change())
}

/// Writes the Foo's state file, only when its content changes.
fn write_state_file(ctx: &Operator, foo: &Foo, ns: &str) -> Result<(), OperatorError> {
    let path = state_file(&ctx.state_dir, ns, &foo.name_any());
    let content = json!({
        "uid": foo.meta().uid,
        "deploymentName": foo.spec.deployment_name,
        "replicas": foo.spec.desired_replicas(),
    })
    .to_string();
    let io = |source| OperatorError::StateFile {
        path: path.display().to_string(),
        source,
    };
    if std::fs::read_to_string(&path).ok().as_deref() == Some(content.as_str()) {
        return Ok(());
    }
    std::fs::create_dir_all(&ctx.state_dir).map_err(io)?;
    // Written beside, then renamed: a reader never sees half a file.
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, &content).map_err(io)?;
    std::fs::rename(&tmp, &path).map_err(io)
}

/// The Deployment a Foo asks for, owned by it (sample-controller's `newDeployment`).
fn new_deployment(foo: &Foo) -> Result<Deployment, OperatorError> {
    let owner = foo
        .controller_owner_ref(&())
        .ok_or(OperatorError::Incomplete("uid"))?;
    let labels: std::collections::BTreeMap<String, String> = [
        ("app".to_owned(), "nginx".to_owned()),
        ("controller".to_owned(), foo.name_any()),
    ]
    .into();
    Ok(Deployment {
        metadata: ObjectMeta {
            name: Some(foo.spec.deployment_name.clone()),
            namespace: foo.namespace(),
            owner_references: Some(vec![owner]),
            ..Default::default()
        },
        spec: Some(DeploymentSpec {
            replicas: Some(foo.spec.desired_replicas()),
            selector: LabelSelector {
                match_labels: Some(labels.clone()),
                ..Default::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "nginx".into(),
                        image: Some("nginx:latest".into()),
                        // Pods are processes on Setpoint's node agent: something that runs.
                        command: Some(vec!["sleep".into(), "3600".into()]),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
            },
            ..Default::default()
        }),
        ..Default::default()
    })
}

/// The `Ready` condition (its transition time is set by [`set_status`]).
fn ready(ok: bool, reason: &str, message: &str) -> FooCondition {
    FooCondition {
        type_: "Ready".into(),
        status: if ok { "True" } else { "False" }.into(),
        reason: reason.into(),
        message: message.into(),
        last_transition_time: String::new(),
    }
}

/// Writes `availableReplicas` and the condition (keeping the transition time when the
/// condition's status did not change); `true` if anything was written.
async fn set_status(
    ctx: &Operator,
    foo: &Foo,
    ns: &str,
    available: i32,
    mut condition: FooCondition,
) -> Result<bool, OperatorError> {
    let foos = ctx.client.namespaced_api::<Foo>(ns);
    let now = k8s_openapi::jiff::Timestamp::now();
    let now = k8s_openapi::jiff::Timestamp::from_second(now.as_second()).unwrap_or(now);
    let written = update_status(&foos, &foo.name_any(), |foo| {
        let status = foo.status.get_or_insert_with(FooStatus::default);
        status.available_replicas = available;
        let previous = status
            .conditions
            .iter()
            .find(|c| c.type_ == condition.type_);
        condition.last_transition_time = match previous {
            Some(p) if p.status == condition.status => p.last_transition_time.clone(),
            _ => now.to_string(),
        };
        status.conditions.retain(|c| c.type_ != condition.type_);
        status.conditions.push(condition.clone());
    })
    .await?;
    Ok(matches!(written, StatusUpdate::Updated(_)))
}

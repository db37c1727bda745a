//! The sample operator (`examples/sample-operator`) in-process, against a test env
//! (`setpoint-testenv`: the real API server, no other controller): the Foo CRD from the derived
//! types, the owned Deployment, drift correction (scaled by hand → scaled back; deleted →
//! recreated), status from the Deployment's status (written here, standing in for the
//! Deployment controller), Events, a Deployment that is not ours, and deletion through the
//! finalizer (the state file is removed, then the Foo goes).
//!
//! No garbage collector runs in a test env: the Deployment's removal after its Foo is deleted
//! is tested against `setpoint server` in `operator_kubectl.rs`.

#![allow(dead_code, unreachable_pub)] // the example's modules, included here
#![allow(clippy::disallowed_names)] // sample-controller's kind is `Foo`, its objects `foo`

#[path = "../examples/sample-operator/foo.rs"]
mod foo;
#[path = "../examples/sample-operator/operator.rs"]
mod operator;

use std::time::Duration;

use foo::{Foo, FooSpec};
use k8s_openapi::api::apps::v1::{Deployment, DeploymentStatus};
use k8s_openapi::api::events::v1::Event;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{CustomResourceExt, Resource, ResourceExt};
use serde_json::json;
use setpoint_runtime::{install_crd, Client};
use setpoint_testenv::TestEnv;
use setpoint_testenv::{eventually, Running};

const NS: &str = "default";

/// A test env with the CRD installed and the operator running on it.
struct Operator {
    env: TestEnv,
    state: tempfile::TempDir,
    running: Running<setpoint_runtime::ControllerError>,
}

impl Operator {
    async fn start() -> Operator {
        let env = TestEnv::start().await.expect("test env");
        install_crd(&env.client(), &Foo::crd(), Duration::from_secs(30))
            .await
            .expect("Foo CRD established");
        let state = tempfile::tempdir().expect("state dir");
        let (client, state_dir) = (env.client(), state.path().to_owned());
        let running = Running::spawn(move |shutdown| {
            operator::run(client, state_dir, shutdown.cancelled_owned())
        });
        Operator {
            env,
            state,
            running,
        }
    }

    fn client(&self) -> Client {
        self.env.client()
    }

    async fn stop(self) {
        self.running.stop().await;
    }
}

async fn create_foo(client: &Client, name: &str, deployment: &str, replicas: i32) -> Foo {
    let mut foo = Foo::new(
        name,
        FooSpec {
            deployment_name: deployment.into(),
            replicas: Some(replicas),
        },
    );
    foo.metadata.namespace = Some(NS.into());
    client
        .namespaced_api::<Foo>(NS)
        .create(&PostParams::default(), &foo)
        .await
        .expect("create foo")
}

async fn deployment(client: &Client, name: &str) -> Option<Deployment> {
    client
        .namespaced_api::<Deployment>(NS)
        .get_opt(name)
        .await
        .expect("get deployment")
}

fn replicas(d: &Deployment) -> Option<i32> {
    d.spec.as_ref().and_then(|s| s.replicas)
}

async fn has_event(client: &Client, reason: &str) -> bool {
    let events = client
        .namespaced_api::<Event>(NS)
        .list(&ListParams::default())
        .await
        .expect("list events");
    events.items.iter().any(|e| {
        e.reason.as_deref() == Some(reason)
            && e.regarding.as_ref().and_then(|r| r.kind.as_deref()) == Some("Foo")
    })
}

#[tokio::test]
async fn operator_should_own_correct_report_and_finalize() {
    let running = Operator::start().await;
    let client = running.client();
    let foos = client.namespaced_api::<Foo>(NS);
    let deployments = client.namespaced_api::<Deployment>(NS);
    let foo = create_foo(&client, "example-foo", "example-deploy", 2).await;
    let uid = foo.meta().uid.clone().expect("uid");

    // Created and owned.
    let d = eventually("the Deployment exists", || async {
        deployment(&client, "example-deploy").await
    })
    .await;
    assert_eq!(replicas(&d), Some(2));
    let owner = d
        .owner_references()
        .iter()
        .find(|r| r.controller == Some(true))
        .expect("a controller reference");
    assert_eq!((owner.kind.as_str(), &owner.uid), ("Foo", &uid));
    assert_eq!(owner.api_version, "samplecontroller.setpoint.dev/v1alpha1");

    // The state file and the finalizer.
    let file = operator::state_file(running.state.path(), NS, "example-foo");
    let content = eventually("the state file is written", || async {
        std::fs::read_to_string(&file).ok()
    })
    .await;
    let state: serde_json::Value = serde_json::from_str(&content).expect("JSON state");
    assert_eq!(state["deploymentName"], "example-deploy");
    assert_eq!(state["uid"], uid.as_str());
    let foo = foos.get("example-foo").await.expect("foo");
    assert_eq!(foo.finalizers(), [operator::FINALIZER.to_owned()]);

    // Nothing available yet: Ready=False.
    let foo = eventually("the status says 0 available", || async {
        let foo = foos.get("example-foo").await.ok()?;
        let status = foo.status.clone()?;
        (status.available_replicas == 0 && !status.conditions.is_empty()).then_some(foo)
    })
    .await;
    let ready = &foo.status.as_ref().expect("status").conditions[0];
    assert_eq!(
        (ready.type_.as_str(), ready.status.as_str()),
        ("Ready", "False")
    );

    // The Deployment reports 2 available (as its controller would): the Foo follows.
    let mut d = deployment(&client, "example-deploy")
        .await
        .expect("deployment");
    d.status = Some(DeploymentStatus {
        replicas: Some(2),
        ready_replicas: Some(2),
        available_replicas: Some(2),
        ..Default::default()
    });
    deployments
        .replace_status("example-deploy", &PostParams::default(), &d)
        .await
        .expect("write deployment status");
    eventually("the Foo reports 2 available and Ready", || async {
        let status = foos.get("example-foo").await.ok()?.status?;
        let ready = status.conditions.iter().find(|c| c.type_ == "Ready")?;
        (status.available_replicas == 2 && ready.status == "True").then_some(())
    })
    .await;

    // Drift: scaled by hand → scaled back.
    deployments
        .patch(
            "example-deploy",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 5}})),
        )
        .await
        .expect("scale by hand");
    eventually("the Deployment is scaled back to 2", || async {
        let d = deployment(&client, "example-deploy").await?;
        (replicas(&d) == Some(2)).then_some(())
    })
    .await;
    // Spec change → followed.
    foos.patch(
        "example-foo",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 3}})),
    )
    .await
    .expect("scale the foo");
    eventually("the Deployment follows the Foo to 3", || async {
        let d = deployment(&client, "example-deploy").await?;
        (replicas(&d) == Some(3)).then_some(())
    })
    .await;
    // Drift: deleted by hand → recreated.
    let old_uid = deployment(&client, "example-deploy")
        .await
        .and_then(|d| d.metadata.uid)
        .expect("uid");
    deployments
        .delete("example-deploy", &DeleteParams::default())
        .await
        .expect("delete by hand");
    eventually("the Deployment is recreated", || async {
        let d = deployment(&client, "example-deploy").await?;
        (d.metadata.uid.as_ref() != Some(&old_uid)).then_some(())
    })
    .await;

    for reason in ["DeploymentCreated", "DeploymentScaled", "Synced"] {
        eventually(&format!("a {reason} event about the Foo"), || async {
            has_event(&client, reason).await.then_some(())
        })
        .await;
    }

    // Deletion: the finalizer removes the state file, then the Foo goes.
    foos.delete("example-foo", &DeleteParams::default())
        .await
        .expect("delete foo");
    eventually("the Foo is gone", || async {
        foos.get_opt("example-foo")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
    assert!(!file.exists(), "{} still exists", file.display());
    running.stop().await;
}

#[tokio::test]
async fn operator_should_refuse_a_deployment_it_does_not_own() {
    let running = Operator::start().await;
    let client = running.client();
    let theirs: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "theirs", "namespace": NS},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "theirs"}},
            "template": {
                "metadata": {"labels": {"app": "theirs"}},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]}
            }
        }
    }))
    .expect("deployment");
    client
        .namespaced_api::<Deployment>(NS)
        .create(&PostParams::default(), &theirs)
        .await
        .expect("create theirs");
    create_foo(&client, "grabby", "theirs", 4).await;
    eventually("an ErrResourceExists warning about the Foo", || async {
        has_event(&client, "ErrResourceExists").await.then_some(())
    })
    .await;
    let d = deployment(&client, "theirs").await.expect("theirs");
    assert_eq!(replicas(&d), Some(1), "a Deployment not ours is left alone");
    assert!(d.owner_references().is_empty());
    running.stop().await;
}

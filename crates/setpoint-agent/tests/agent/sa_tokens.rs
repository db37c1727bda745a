//! Projected `serviceAccountToken` volumes on the agent: the token file is a TokenRequest bound
//! to the pod (audience and lifetime of the source), written atomically (`..data`) with the
//! volume's mode, accepted by the API's TokenReview while the pod exists and refused once it is
//! deleted; a pod whose ServiceAccount does not exist waits with `FailedMount`. (Refreshes are
//! checked with an injected clock next to the token manager, `src/volumes/token.rs`.)

use std::os::unix::fs::PermissionsExt as _;

use k8s_openapi::api::authentication::v1::TokenReview;
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::events::v1::Event;
use kube::api::ListParams;
use setpoint_agent::MountMode;

use super::*;

/// The pod's directory under the agent's root.
fn pod_dir(root: &Path, name: &str) -> Option<PathBuf> {
    std::fs::read_dir(root.join("pods"))
        .ok()?
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(&format!("{NS}_{name}_")))
        })
}

/// The TokenReview of `token` for `audience`: the user it names, if authenticated.
async fn review(h: &Harness, token: &str, audience: &str) -> Option<serde_json::Value> {
    let review: TokenReview = serde_json::from_value(json!({
        "spec": {"token": token, "audiences": [audience]}
    }))
    .expect("a review");
    let answer = h
        .client
        .api::<TokenReview>()
        .create(&PostParams::default(), &review)
        .await
        .expect("token reviewed");
    let status = serde_json::to_value(answer.status).expect("json");
    (status["authenticated"] == true).then(|| status["user"].clone())
}

async fn wait_for<T>(what: &str, mut f: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn projected_token_should_be_written_bound_to_the_pod_and_die_with_it() {
    let h = Harness::start_with(ContainerTracking::Auto, MountMode::Emulated).await;
    let sa: ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": "robot"}})).expect("an SA");
    h.client
        .namespaced_api::<ServiceAccount>(NS)
        .create(&PostParams::default(), &sa)
        .await
        .expect("SA created");
    let volume = |mode: Option<i32>| {
        let mut projected = json!({"sources": [{"serviceAccountToken": {
            "path": "token", "audience": "vault", "expirationSeconds": 600}}]});
        if let Some(m) = mode {
            projected["defaultMode"] = json!(m);
        }
        json!([{"name": "tok", "projected": projected}])
    };
    h.create_pod(
        "tokened",
        json!({
            "serviceAccountName": "robot",
            "volumes": volume(Some(0o600)),
            "containers": [{"name": "app", "command": ["sleep", "1000"],
                "volumeMounts": [{"name": "tok", "mountPath": "/var/run/secrets/tokens"}]}]
        }),
    )
    .await;
    h.create_pod(
        "ghost",
        json!({
            "serviceAccountName": "ghost",
            "volumes": volume(None),
            "containers": [{"name": "app", "command": ["sleep", "1000"]}]
        }),
    )
    .await;

    let root = h.root.path().to_owned();
    let file = wait_for("the token file", async || {
        let file = pod_dir(&root, "tokened")?.join("volumes/tok/token");
        file.exists().then_some(file)
    })
    .await;
    let token = std::fs::read_to_string(&file).expect("the token");
    assert_eq!(token.split('.').count(), 3, "a JWT: {token}");
    let volume_dir = file.parent().expect("the volume");
    assert!(
        std::fs::symlink_metadata(volume_dir.join("..data"))
            .expect("..data")
            .file_type()
            .is_symlink(),
        "written by the atomic writer"
    );
    let mode = std::fs::metadata(&file)
        .expect("metadata")
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600);
    h.wait_pod("tokened", "running", |p| phase(p) == "Running")
        .await;

    let user = review(&h, &token, "vault")
        .await
        .expect("the projected token is accepted while its pod exists");
    assert_eq!(user["username"], "system:serviceaccount:default:robot");
    assert_eq!(
        user["extra"]["authentication.kubernetes.io/pod-name"],
        json!(["tokened"])
    );
    assert!(
        review(&h, &token, "elsewhere").await.is_none(),
        "bound to the source's audience"
    );

    // The pod without its ServiceAccount waits, with an event saying why.
    wait_for(
        "a FailedMount event for the missing ServiceAccount",
        async || {
            let events = h
                .client
                .namespaced_api::<Event>(NS)
                .list(&ListParams::default())
                .await
                .expect("events");
            events
                .items
                .iter()
                .any(|e| {
                    e.reason.as_deref() == Some("FailedMount")
                        && e.note
                            .as_deref()
                            .is_some_and(|n| n.contains("serviceaccount default/ghost"))
                })
                .then_some(())
        },
    )
    .await;
    assert_eq!(phase(&h.pods().get("ghost").await.expect("pod")), "Pending");

    h.delete_pod("tokened").await;
    h.wait_gone("tokened").await;
    wait_for(
        "the token to be refused after its pod is gone",
        async || review(&h, &token, "vault").await.is_none().then_some(()),
    )
    .await;
}

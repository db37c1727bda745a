//! Subresources and partial reads: status, scale, and metadata-only objects.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patch_status_should_change_status_but_not_spec_nor_generation() {
    let server = Server::start_api_only();
    let client = server.kube_client().await;
    let deploys: Api<Deployment> = Api::namespaced(client, "default");
    deploys
        .create(&PostParams::default(), &deployment("web"))
        .await
        .expect("create");

    let patched = deploys
        .patch_status(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({
                "spec": {"replicas": 9},
                "status": {"replicas": 2, "readyReplicas": 1, "observedGeneration": 1}
            })),
        )
        .await
        .expect("patch_status");
    let status = serde_json::to_value(&patched.status).expect("status");
    assert_eq!(status["replicas"], 2, "{status}");
    assert_eq!(status["readyReplicas"], 1, "{status}");
    assert_eq!(status["observedGeneration"], 1, "{status}");
    assert_eq!(
        spec(&patched)["replicas"],
        2,
        "the status write left spec alone"
    );
    assert_eq!(patched.metadata.generation, Some(1));
    let read = deploys.get_status("web").await.expect("get_status");
    assert_eq!(serde_json::to_value(&read.status).expect("status"), status);

    // The other way round: a write of the main resource changes spec (and generation), and
    // ignores status.
    let main = deploys
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 4}, "status": {"replicas": 7}})),
        )
        .await
        .expect("patch");
    assert_eq!(spec(&main)["replicas"], 4);
    assert_eq!(main.metadata.generation, Some(2));
    assert_eq!(
        serde_json::to_value(&main.status).expect("status")["replicas"],
        2,
        "the main resource's write left status alone"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scale_subresource_should_read_and_set_the_replicas() {
    let server = Server::start_api_only();
    let client = server.kube_client().await;
    let deploys: Api<Deployment> = Api::namespaced(client, "default");
    deploys
        .create(&PostParams::default(), &deployment("web"))
        .await
        .expect("create");

    let scale = deploys.get_scale("web").await.expect("get_scale");
    assert_eq!(scale.metadata.name.as_deref(), Some("web"));
    assert_eq!(scale.spec.as_ref().and_then(|s| s.replicas), Some(2));
    let status = scale.status.expect("scale status");
    assert_eq!(status.selector.as_deref(), Some("app=web"));

    let scaled = deploys
        .patch_scale(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 5}})),
        )
        .await
        .expect("patch_scale");
    assert_eq!(scaled.spec.and_then(|s| s.replicas), Some(5));
    let d = deploys.get("web").await.expect("get");
    assert_eq!(spec(&d)["replicas"], 5);
    assert_eq!(d.metadata.generation, Some(2), "scaling changes spec");
    assert_eq!(
        d.metadata.resource_version, scaled.metadata.resource_version,
        "the scale answer carries the deployment's new resourceVersion"
    );
    let stale = api_error(
        deploys
            .patch_scale(
                "web",
                &PatchParams::default(),
                &Patch::Merge(
                    json!({"metadata": {"resourceVersion": "1"}, "spec": {"replicas": 6}}),
                ),
            )
            .await,
    );
    assert_eq!((stale.code, stale.reason.as_str()), (409, "Conflict"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_only_reads_should_return_partial_object_metadata() {
    let server = Server::start_api_only();
    let client = server.kube_client().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let created = cms
        .create(
            &PostParams::default(),
            &configmap("m", &[("app", "a")], &[("a", "1")]),
        )
        .await
        .expect("create");
    let meta = cms.get_metadata("m").await.expect("get_metadata");
    assert_eq!(
        meta.types.as_ref().map(|t| t.kind.as_str()),
        Some("PartialObjectMetadata")
    );
    assert_eq!(meta.metadata.uid, created.metadata.uid);
    assert_eq!(meta.metadata.labels, created.metadata.labels);
    let list = cms
        .list_metadata(&ListParams::default().labels("app=a"))
        .await
        .expect("list_metadata");
    let names: Vec<_> = list
        .items
        .iter()
        .filter_map(|m| m.metadata.name.as_deref())
        .collect();
    assert_eq!(names, ["m"]);
}

//! Reads and writes through `kube::Api`: create, get, list by label and in pages, the three
//! patch types, conflicts on a stale resource version, server-side apply (also through
//! `scale`), and what a delete answers.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configmaps_should_be_created_read_and_listed_by_label_and_in_pages() {
    let server = Server::start_api_only();
    let client = server.kube_client().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let pp = PostParams::default();
    for i in 0..7 {
        let app = if i < 4 { "a" } else { "b" };
        let created = cms
            .create(
                &pp,
                &configmap(&format!("cm{i}"), &[("app", app)], &[("i", &i.to_string())]),
            )
            .await
            .expect("create");
        assert_eq!(created.metadata.name.as_deref(), Some(&*format!("cm{i}")));
        assert!(created.metadata.uid.is_some_and(|u| !u.is_empty()));
        assert!(created.metadata.creation_timestamp.is_some());
    }

    let got = cms.get("cm5").await.expect("get");
    assert_eq!(got.data, Some(data(&[("i", "5")])));
    assert_eq!(got.metadata.labels, Some(data(&[("app", "b")])));
    assert!(cms.get_opt("nope").await.expect("get_opt").is_none());
    let missing = api_error(cms.get("nope").await);
    assert_eq!((missing.code, missing.reason.as_str()), (404, "NotFound"));
    let dup = api_error(cms.create(&pp, &configmap("cm0", &[], &[("x", "y")])).await);
    assert_eq!((dup.code, dup.reason.as_str()), (409, "AlreadyExists"));

    let names = |list: kube::core::ObjectList<ConfigMap>| -> Vec<String> {
        list.items
            .into_iter()
            .filter_map(|c| c.metadata.name)
            .filter(|n| n.starts_with("cm"))
            .collect()
    };
    let a = cms
        .list(&ListParams::default().labels("app=a"))
        .await
        .expect("list app=a");
    assert_eq!(names(a), ["cm0", "cm1", "cm2", "cm3"]);
    let not_a = cms
        .list(&ListParams::default().labels("app!=a,app"))
        .await
        .expect("list app!=a");
    assert_eq!(names(not_a), ["cm4", "cm5", "cm6"]);
    let both = cms
        .list(&ListParams::default().labels("app in (a,b)"))
        .await
        .expect("list app in (a,b)");
    assert_eq!(names(both).len(), 7);
    let bad = api_error(cms.list(&ListParams::default().labels("app in (")).await);
    assert_eq!(bad.code, 400, "{bad:?}");

    // Pages of 3 with continue tokens, all at the first page's resourceVersion.
    let mut paged = Vec::new();
    let mut token: Option<String> = None;
    let mut first_rv = None;
    let mut pages = 0;
    loop {
        let mut lp = ListParams::default().labels("app").limit(3);
        if let Some(t) = &token {
            lp = lp.continue_token(t);
        }
        let page = cms.list(&lp).await.expect("a page");
        pages += 1;
        assert!(
            page.items.len() <= 3,
            "{} items in a page of 3",
            page.items.len()
        );
        let rv = page.metadata.resource_version.clone();
        assert!(rv.is_some(), "a page without a resourceVersion");
        if first_rv.is_none() {
            first_rv = rv.clone();
            // A write between pages must not show up in later pages.
            cms.create(&pp, &configmap("cm9", &[("app", "c")], &[]))
                .await
                .expect("create between pages");
        }
        assert_eq!(rv, first_rv, "pages of one list are one snapshot");
        token = page.metadata.continue_.clone().filter(|t| !t.is_empty());
        if token.is_some() {
            assert_eq!(page.items.len(), 3, "a page before the last is full");
        }
        paged.extend(names(page));
        if token.is_none() {
            break;
        }
        assert!(pages < 10, "paging does not end");
    }
    assert_eq!(pages, 3);
    assert_eq!(
        paged,
        ["cm0", "cm1", "cm2", "cm3", "cm4", "cm5", "cm6"],
        "pages in name order, each object once"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deployments_should_take_merge_json_and_strategic_merge_patches() {
    let server = Server::start_api_only();
    let client = server.kube_client().await;
    let deploys: Api<Deployment> = Api::namespaced(client, "default");
    let created = deploys
        .create(&PostParams::default(), &deployment("web"))
        .await
        .expect("create");
    assert_eq!(created.metadata.generation, Some(1));
    let pp = PatchParams::default();

    let merged = deploys
        .patch(
            "web",
            &pp,
            &Patch::Merge(
                json!({"metadata": {"labels": {"tier": "front"}}, "spec": {"replicas": 3}}),
            ),
        )
        .await
        .expect("merge patch");
    assert_eq!(spec(&merged)["replicas"], 3);
    assert_eq!(
        merged.metadata.labels.as_ref().and_then(|l| l.get("tier")),
        Some(&"front".to_owned())
    );
    assert_eq!(merged.metadata.generation, Some(2));

    let json_patch = |ops: Value| Patch::Json::<()>(serde_json::from_value(ops).expect("ops"));
    let patched = deploys
        .patch(
            "web",
            &pp,
            &json_patch(json!([
                {"op": "test", "path": "/spec/replicas", "value": 3},
                {"op": "replace", "path": "/spec/replicas", "value": 4},
                {"op": "add", "path": "/metadata/annotations", "value": {"note": "json"}},
            ])),
        )
        .await
        .expect("json patch");
    assert_eq!(spec(&patched)["replicas"], 4);
    assert_eq!(
        patched
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("note")),
        Some(&"json".to_owned())
    );

    let failed_test = api_error(
        deploys
            .patch(
                "web",
                &pp,
                &json_patch(json!([
                    {"op": "test", "path": "/spec/replicas", "value": 99},
                    {"op": "replace", "path": "/spec/replicas", "value": 7},
                ])),
            )
            .await,
    );
    assert_eq!(failed_test.code, 422, "{failed_test:?}");
    assert_eq!(failed_test.reason, "Invalid", "{failed_test:?}");
    assert_eq!(
        spec(&deploys.get("web").await.expect("get"))["replicas"],
        4,
        "a failed test op applies nothing"
    );

    // Strategic merge: containers merge by name, env by name; the sidecar is kept.
    let strategic = deploys
        .patch(
            "web",
            &pp,
            &Patch::Strategic(json!({"spec": {"template": {"spec": {"containers": [
                {"name": "c", "image": "nginx:1.26", "env": [{"name": "B", "value": "2"}]}
            ]}}}})),
        )
        .await
        .expect("strategic merge patch");
    let containers = spec(&strategic)["template"]["spec"]["containers"].clone();
    assert_eq!(containers.as_array().map(Vec::len), Some(2), "{containers}");
    assert_eq!(containers[0]["name"], "c");
    assert_eq!(containers[0]["image"], "nginx:1.26");
    assert_eq!(
        containers[0]["env"],
        json!([{"name": "B", "value": "2"}, {"name": "A", "value": "1"}]),
        "env entries merged by name"
    );
    assert_eq!(containers[1]["name"], "sidecar");
    assert_eq!(containers[1]["image"], "busybox:1.36");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replace_with_a_stale_resource_version_should_conflict() {
    let server = Server::start_api_only();
    let client = server.kube_client().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let pp = PostParams::default();
    let first = cms
        .create(&pp, &configmap("c", &[], &[("v", "1")]))
        .await
        .expect("create");

    let mut next = first.clone();
    next.data = Some(data(&[("v", "2")]));
    let replaced = cms.replace("c", &pp, &next).await.expect("replace");
    assert_eq!(replaced.data, Some(data(&[("v", "2")])));
    assert_ne!(
        replaced.metadata.resource_version,
        first.metadata.resource_version
    );

    let mut stale = first.clone();
    stale.data = Some(data(&[("v", "3")]));
    let conflict = api_error(cms.replace("c", &pp, &stale).await);
    assert_eq!(conflict.code, 409, "{conflict:?}");
    assert_eq!(conflict.reason, "Conflict", "{conflict:?}");
    assert!(
        conflict.message.contains("modified"),
        "the message says the object was modified: {conflict:?}"
    );
    let details = conflict.details.expect("conflict details");
    assert_eq!(details.name, "c");
    assert_eq!(details.kind, "configmaps");
    assert_eq!(
        cms.get("c").await.expect("get").data,
        Some(data(&[("v", "2")])),
        "the stale replace changed nothing"
    );

    // The deployment's replace conflicts the same way.
    let deploys: Api<Deployment> = Api::namespaced(cms.clone().into_client(), "default");
    let d = deploys
        .create(&pp, &deployment("web"))
        .await
        .expect("create");
    deploys
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 5}})),
        )
        .await
        .expect("patch");
    let conflict = api_error(deploys.replace("web", &pp, &d).await);
    assert_eq!((conflict.code, conflict.reason.as_str()), (409, "Conflict"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patch_apply_should_create_update_conflict_and_force() {
    let server = Server::start_api_only();
    let client = server.kube_client().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let config = |a: &str| {
        Patch::Apply(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "ssa"}, "data": {"a": a}
        }))
    };
    let created = cms
        .patch("ssa", &PatchParams::apply("kube-client-test"), &config("1"))
        .await
        .expect("an apply creates");
    assert_eq!(created.data.unwrap()["a"], "1");
    let managed = created.metadata.managed_fields.expect("managed fields");
    assert_eq!(managed.len(), 1);
    assert_eq!(managed[0].manager.as_deref(), Some("kube-client-test"));
    assert_eq!(managed[0].operation.as_deref(), Some("Apply"));
    // Another manager's different value is a conflict...
    let refused = api_error(
        cms.patch("ssa", &PatchParams::apply("other"), &config("2"))
            .await,
    );
    assert_eq!(
        (refused.code, refused.reason.as_str()),
        (409, "Conflict"),
        "{refused:?}"
    );
    assert!(refused.message.contains("kube-client-test"), "{refused:?}");
    // ...which `force` takes over.
    let forced = cms
        .patch("ssa", &PatchParams::apply("other").force(), &config("2"))
        .await
        .expect("a forced apply");
    assert_eq!(forced.data.unwrap()["a"], "2");
    let managers: Vec<String> = forced
        .metadata
        .managed_fields
        .unwrap()
        .into_iter()
        .filter_map(|m| m.manager)
        .collect();
    assert_eq!(managers, ["other"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_should_answer_with_the_pod_and_with_a_status_for_a_configmap() {
    let server = Server::start_api_only();
    let client = server.kube_client().await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}
    }))
    .expect("a pod");
    let created = pods
        .create(&PostParams::default(), &pod)
        .await
        .expect("create pod");
    let uid = created.metadata.uid.clone();
    // Either side will do: the Pod itself, or a Status naming it.
    pods.delete("p", &DeleteParams::default())
        .await
        .expect("delete pod")
        .either(
            |deleted| {
                eprintln!("delete pod: answered with the Pod");
                assert_eq!(deleted.metadata.name.as_deref(), Some("p"));
                assert_eq!(deleted.metadata.uid, uid);
            },
            |status| {
                eprintln!("delete pod: answered with a Status");
                assert_success(&status);
                assert_eq!(status.details.map(|d| d.name), Some("p".to_owned()));
            },
        );

    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    cms.create(&PostParams::default(), &configmap("c", &[], &[("a", "1")]))
        .await
        .expect("create configmap");
    let status = cms
        .delete("c", &DeleteParams::default())
        .await
        .expect("delete configmap")
        .either(
            |cm| panic!("deleting a ConfigMap answered with the object: {cm:?}"),
            |status| status,
        );
    assert_success(&status);
    let details = status.details.expect("status details");
    assert_eq!(details.name, "c");
    assert_eq!(details.kind, "configmaps");
    assert!(cms.get_opt("c").await.expect("get").is_none());
    let gone = api_error(cms.delete("c", &DeleteParams::default()).await);
    assert_eq!((gone.code, gone.reason.as_str()), (404, "NotFound"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_apply_through_scale_should_own_the_replicas_and_conflict_with_their_owner() {
    let server = Server::start_api_only();
    let client = server.kube_client().await;
    let deploys: Api<Deployment> = Api::namespaced(client, "default");
    let deployment = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "example.invalid/web:1"}]}
            }
        }
    });
    deploys
        .patch(
            "web",
            &PatchParams::apply("owner"),
            &Patch::Apply(deployment),
        )
        .await
        .expect("the deployment applied");
    let scale = |n: i64| {
        Patch::Apply(json!({
            "apiVersion": "autoscaling/v1", "kind": "Scale",
            "metadata": {"name": "web"}, "spec": {"replicas": n}
        }))
    };
    // The replicas are the applier's: another manager's scale conflicts...
    let refused = api_error(
        deploys
            .patch_scale("web", &PatchParams::apply("autoscaler"), &scale(3))
            .await,
    );
    assert_eq!(
        (refused.code, refused.reason.as_str()),
        (409, "Conflict"),
        "{refused:?}"
    );
    assert!(
        refused.message.contains(r#"conflict with "owner""#)
            && refused.message.contains(".spec.replicas"),
        "{refused:?}"
    );
    // ...unless forced: then it owns them through `scale`, and the applier keeps the rest.
    let scaled = deploys
        .patch_scale("web", &PatchParams::apply("autoscaler").force(), &scale(3))
        .await
        .expect("a forced scale");
    assert_eq!(scaled.spec.and_then(|s| s.replicas), Some(3));
    let d = deploys.get("web").await.expect("get");
    assert_eq!(d.spec.as_ref().and_then(|s| s.replicas), Some(3));
    let entries = d.metadata.managed_fields.expect("managed fields");
    let fields_of = |manager: &str| {
        let e = entries
            .iter()
            .find(|e| e.manager.as_deref() == Some(manager))
            .unwrap_or_else(|| panic!("no entry of {manager}: {entries:?}"));
        (
            e.subresource.clone(),
            e.operation.clone(),
            serde_json::to_value(&e.fields_v1).unwrap(),
        )
    };
    let (sub, op, fields) = fields_of("autoscaler");
    assert_eq!(
        (sub.as_deref(), op.as_deref()),
        (Some("scale"), Some("Apply"))
    );
    assert_eq!(fields, json!({"f:spec": {"f:replicas": {}}}));
    let (_, _, fields) = fields_of("owner");
    assert!(fields["f:spec"]["f:replicas"].is_null(), "{fields}");
    assert!(fields["f:spec"]["f:template"].is_object(), "{fields}");
    // Now the owner's scale is the one that conflicts.
    let again = api_error(
        deploys
            .patch_scale("web", &PatchParams::apply("owner"), &scale(2))
            .await,
    );
    assert!(
        again.message.contains(r#"conflict with "autoscaler""#),
        "{again:?}"
    );
}

//! What a pod spec asks of the processes: environment references and expansion, init
//! containers in order, probes gating readiness and restarting a failing container.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn environment_should_resolve_references_and_expand_variables() {
    let h = Harness::start().await;
    let work = tempfile::tempdir().expect("a working directory");
    let config_maps = h.client.namespaced_api::<ConfigMap>(NS);
    config_maps
        .create(
            &PostParams::default(),
            &serde_json::from_value(
                json!({"metadata": {"name": "settings"}, "data": {"mode": "fast", "level": "3"}}),
            )
            .expect("a configmap"),
        )
        .await
        .expect("configmap created");
    h.client
        .namespaced_api::<Secret>(NS)
        .create(
            &PostParams::default(),
            &serde_json::from_value(
                json!({"metadata": {"name": "creds"}, "stringData": {"token": "s3cret"}}),
            )
            .expect("a secret"),
        )
        .await
        .expect("secret created");
    h.create_pod(
        "envy",
        json!({"containers": [{
            "name": "app",
            "command": ["sh", "-c", "env > env.txt; echo $(GREETING) > args.txt; sleep 1000"],
            "workingDir": work.path(),
            "envFrom": [{"configMapRef": {"name": "settings"}, "prefix": "CFG_"}],
            "env": [
                {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                {"name": "POD_NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                {"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "mode"}}},
                {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "token"}}},
                {"name": "MISSING", "valueFrom": {"secretKeyRef": {"name": "nope", "key": "x", "optional": true}}},
                {"name": "GREETING", "value": "hello-$(POD_NAME)"},
                {"name": "ESCAPED", "value": "$$(POD_NAME)"}
            ]
        }]}),
    )
    .await;
    h.wait_pod("envy", "Running", |p| {
        first_container(p).is_some_and(running)
    })
    .await;
    let deadline = Instant::now() + Duration::from_secs(30);
    let (env, args) = loop {
        let env = std::fs::read_to_string(work.path().join("env.txt")).unwrap_or_default();
        let args = std::fs::read_to_string(work.path().join("args.txt")).unwrap_or_default();
        if !args.is_empty() {
            break (env, args);
        }
        assert!(Instant::now() < deadline, "the container wrote nothing");
        sleep(Duration::from_millis(50)).await;
    };
    let env: BTreeMap<&str, &str> = env.lines().filter_map(|l| l.split_once('=')).collect();
    assert_eq!(env.get("POD_NAME"), Some(&"envy"));
    assert_eq!(env.get("POD_NS"), Some(&"default"));
    assert_eq!(env.get("NODE"), Some(&NODE));
    assert_eq!(env.get("MODE"), Some(&"fast"));
    assert_eq!(env.get("CFG_level"), Some(&"3"));
    assert_eq!(env.get("TOKEN"), Some(&"s3cret"));
    assert_eq!(env.get("MISSING"), None);
    assert_eq!(env.get("GREETING"), Some(&"hello-envy"));
    assert_eq!(env.get("ESCAPED"), Some(&"$(POD_NAME)"));
    assert_eq!(env.get("HOSTNAME"), Some(&"envy"));
    assert_eq!(
        env.get("MIMALLOC_ALLOW_THP"),
        None,
        "the shim's allocator setting stays with the shim"
    );
    assert_eq!(args.trim(), "hello-envy", "$(VAR) in command is expanded");

    // A missing (non-optional) ConfigMap keeps the container waiting, with the reason.
    h.create_pod(
        "unconfigured",
        json!({"containers": [{"name": "app", "command": ["true"],
               "env": [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "absent", "key": "k"}}}]}]}),
    )
    .await;
    let pod = h
        .wait_pod("unconfigured", "CreateContainerConfigError", |p| {
            first_container(p).is_some_and(|c| {
                c.state
                    .as_ref()
                    .and_then(|s| s.waiting.as_ref())
                    .is_some_and(|w| w.reason.as_deref() == Some("CreateContainerConfigError"))
            })
        })
        .await;
    let waiting = first_container(&pod)
        .and_then(|c| c.state.as_ref()?.waiting.clone())
        .expect("waiting");
    assert_eq!(
        waiting.message.as_deref(),
        Some("configmap \"absent\" not found")
    );
    assert_eq!(phase(&pod), "Pending");
    for name in ["envy", "unconfigured"] {
        h.delete_pod(name).await;
    }
    for name in ["envy", "unconfigured"] {
        h.wait_gone(name).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_containers_should_run_in_order_each_to_success_before_the_containers() {
    let h = Harness::start().await;
    let work = tempfile::tempdir().expect("a working directory");
    h.create_pod(
        "initialized",
        json!({
            "initContainers": [
                {"name": "first", "command": ["sh", "-c", "sleep 0.3; echo first >> order"], "workingDir": work.path()},
                {"name": "second", "command": ["sh", "-c", "echo second >> order"], "workingDir": work.path()}
            ],
            "containers": [
                {"name": "main", "command": ["sh", "-c", "echo main >> order; sleep 1000"], "workingDir": work.path()}
            ]
        }),
    )
    .await;
    let pod = h
        .wait_pod("initialized", "Running", |p| {
            phase(p) == "Running" && first_container(p).is_some_and(running)
        })
        .await;
    let order = std::fs::read_to_string(work.path().join("order")).expect("the order file");
    assert_eq!(order, "first\nsecond\nmain\n");
    let inits = pod
        .status
        .as_ref()
        .and_then(|s| s.init_container_statuses.clone())
        .expect("init container statuses");
    for init in &inits {
        let terminated = init
            .state
            .as_ref()
            .and_then(|s| s.terminated.as_ref())
            .expect("terminated");
        assert_eq!(
            terminated.reason.as_deref(),
            Some("Completed"),
            "{}",
            init.name
        );
    }
    h.delete_pod("initialized").await;
    h.wait_gone("initialized").await;

    // A failing init container with restartPolicy Never fails the pod; the containers never run.
    h.create_pod(
        "bad-init",
        json!({
            "restartPolicy": "Never",
            "initContainers": [{"name": "init", "command": ["false"]}],
            "containers": [{"name": "main", "command": ["sh", "-c", "echo ran > ran"], "workingDir": work.path()}]
        }),
    )
    .await;
    let pod = h
        .wait_pod("bad-init", "Failed", |p| phase(p) == "Failed")
        .await;
    assert!(!work.path().join("ran").exists());
    let main = first_container(&pod).expect("status");
    assert!(
        main.state.as_ref().is_some_and(|s| s.waiting.is_some()),
        "{main:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_should_gate_readiness_and_restart_a_container_failing_liveness() {
    let h = Harness::start().await;
    let work = tempfile::tempdir().expect("a working directory");
    h.create_pod(
        "probed",
        json!({"containers": [{
            "name": "app", "workingDir": work.path(),
            "command": ["sh", "-c", "sleep 1; touch ready; exec sleep 1000"],
            "readinessProbe": {"exec": {"command": ["test", "-f", "ready"]}, "periodSeconds": 1},
            "livenessProbe": {"exec": {"command": ["sh", "-c", "test ! -f dead"]}, "periodSeconds": 1, "failureThreshold": 1}
        }]}),
    )
    .await;
    let pod = h
        .wait_pod("probed", "ready", |p| {
            first_container(p).is_some_and(|c| c.ready)
        })
        .await;
    let ready = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
        .map(|c| c.status.clone());
    assert_eq!(ready.as_deref(), Some("True"));

    std::fs::write(work.path().join("dead"), "").expect("mark dead");
    let pod = h
        .wait_pod("probed", "restarted for its liveness probe", |p| {
            first_container(p).is_some_and(|c| c.restart_count >= 1)
        })
        .await;
    std::fs::remove_file(work.path().join("dead")).expect("alive again");
    let last = first_container(&pod)
        .and_then(|c| c.last_state.as_ref()?.terminated.clone())
        .expect("lastState.terminated");
    let message = last.message.unwrap_or_default();
    assert!(message.starts_with("Liveness probe failed"), "{message}");
    h.delete_pod("probed").await;
    h.wait_gone("probed").await;
}

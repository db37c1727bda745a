//! A killed leader of the built-in loops is replaced, and the Deployment keeps converging.

use super::*;

#[test]
fn a_killed_leader_should_be_replaced_and_the_deployment_keep_converging() {
    let etcd = start_etcd();
    let tmp = tempfile::tempdir().unwrap();
    let (dir_a, dir_b) = (tmp.path().join("a"), tmp.path().join("b"));
    let mut flags = vec!["--roles", "apiserver,controllers,scheduler"];
    flags.extend_from_slice(LEADER_FLAGS);
    let a = start_server(&dir_a, &etcd, &flags);
    // A leads before B starts.
    let a_pid = a.pid().unwrap();
    for lease in ["setpoint-controller-manager", "setpoint-scheduler"] {
        let identity = eventually_blocking(&format!("A to hold {lease}"), || holder(&a, lease));
        assert!(is_process(&identity, a_pid), "{lease} held by {identity}");
    }
    copy_pki(&dir_a, &dir_b);
    let b = start_server(&dir_b, &etcd, &flags);
    let b_pid = b.pid().unwrap();

    // Nodes from a process with the agent role alone, talking to B (which survives).
    let agent = Process(
        Command::new(env!("CARGO_BIN_EXE_setpoint"))
            .args(["server", "--roles", "agent", "--no-agent"])
            .args(["--simulated-nodes", "2", "--kubeconfig"])
            .arg(b.kubeconfig())
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap(),
    );

    b.ok(&[
        "create",
        "deployment",
        "web",
        "--image=example.invalid/web:1",
        "--replicas=3",
    ]);
    converged(&b, 3);
    // B stands by: the Leases still name A.
    for lease in ["setpoint-controller-manager", "setpoint-scheduler"] {
        let identity = holder(&b, lease).expect("a holder");
        assert!(is_process(&identity, a_pid), "{lease} held by {identity}");
    }

    // The leader dies without releasing its Leases; B takes both over.
    let mut a = a;
    a.kill();
    for lease in ["setpoint-controller-manager", "setpoint-scheduler"] {
        let identity = eventually_blocking(&format!("B to take {lease} over"), || {
            holder(&b, lease).filter(|h| is_process(h, b_pid))
        });
        assert!(!is_process(&identity, a_pid));
    }

    // Work continues under the new leader, without duplicates.
    b.ok(&["scale", "deployment", "web", "--replicas=5"]);
    converged(&b, 5);
    b.ok(&[
        "set",
        "image",
        "deployment/web",
        "web=example.invalid/web:2",
    ]);
    eventually_blocking("the rollout to web:2", || {
        let out = b.ok(&[
            "get",
            "deploy",
            "web",
            "-o",
            "jsonpath={.status.updatedReplicas} {.status.readyReplicas} {.status.replicas}",
        ]);
        (out.trim() == "5 5 5").then_some(())
    });
    let rs = b.ok(&["get", "rs", "-l", "app=web", "-o", "name"]);
    assert_eq!(rs.lines().count(), 2, "ReplicaSets: {rs}");
    drop(agent);
}

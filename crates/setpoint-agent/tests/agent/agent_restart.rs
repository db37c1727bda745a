//! An agent that restarts: it adopts running containers, reports and restarts the ones lost
//! while it was away, and kills the processes of pods deleted meanwhile.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarted_agent_should_adopt_running_containers_without_duplicates() {
    let mut h = Harness::start().await;
    let marker = marker("adopt");
    h.create_pod("steady", sleeper(&marker)).await;
    let pod = h
        .wait_pod("steady", "Running", |p| {
            first_container(p).is_some_and(running)
        })
        .await;
    let pid = container_pid(first_container(&pod).expect("status")).expect("pid");

    h.stop_agent().await;
    assert!(alive(pid), "stopping the agent must not stop containers");
    h.start_agent();
    // Give the new agent time to sync; it must not start a second copy.
    sleep(Duration::from_secs(2)).await;
    let pod = h
        .wait_pod("steady", "Running", |p| {
            first_container(p).is_some_and(running)
        })
        .await;
    let container = first_container(&pod).expect("status");
    assert_eq!(container_pid(container), Some(pid), "the same process");
    assert_eq!(container.restart_count, 0);
    assert_eq!(marked(&marker), vec![pid], "no duplicate process");

    // The adopted container is watched: killing it restarts it.
    std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .expect("kill");
    let pod = h
        .wait_pod("steady", "restarted", |p| {
            first_container(p).is_some_and(|c| running(c) && c.restart_count == 1)
        })
        .await;
    let new_pid = container_pid(first_container(&pod).expect("status")).expect("pid");
    assert_eq!(marked(&marker), vec![new_pid]);
    h.delete_pod("steady").await;
    h.wait_gone("steady").await;
    assert!(marked(&marker).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn container_lost_while_the_agent_was_away_should_be_reported_and_restarted() {
    let mut h = Harness::start().await;
    let marker = marker("lost");
    h.create_pod("lost", sleeper(&marker)).await;
    let pod = h
        .wait_pod("lost", "Running", |p| {
            first_container(p).is_some_and(running)
        })
        .await;
    let pid = container_pid(first_container(&pod).expect("status")).expect("pid");
    h.stop_agent().await;
    // The shim and the container both vanish without an exit record (as in a node reboot).
    kill_everything_under(h.root.path());
    let deadline = Instant::now() + Duration::from_secs(30);
    while alive(pid) {
        assert!(Instant::now() < deadline);
        sleep(Duration::from_millis(20)).await;
    }
    h.start_agent();
    let pod = h
        .wait_pod("lost", "restarted after the loss", |p| {
            first_container(p).is_some_and(|c| running(c) && c.restart_count == 1)
        })
        .await;
    let last = first_container(&pod)
        .and_then(|c| c.last_state.as_ref()?.terminated.clone())
        .expect("lastState.terminated");
    assert_eq!(last.reason.as_deref(), Some("Unknown"));
    assert_eq!(last.exit_code, 137);
    h.delete_pod("lost").await;
    h.wait_gone("lost").await;
    assert!(marked(&marker).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_deleted_while_the_agent_was_away_should_have_its_processes_killed() {
    let mut h = Harness::start().await;
    let marker = marker("orphan");
    h.create_pod("orphan", sleeper(&marker)).await;
    let pod = h
        .wait_pod("orphan", "Running", |p| {
            first_container(p).is_some_and(running)
        })
        .await;
    let pid = container_pid(first_container(&pod).expect("status")).expect("pid");
    h.stop_agent().await;
    // Force deletion: gone from the API at once, processes still running.
    h.pods()
        .delete(
            "orphan",
            &DeleteParams {
                grace_period_seconds: Some(0),
                ..DeleteParams::default()
            },
        )
        .await
        .expect("force delete");
    h.wait_gone("orphan").await;
    assert!(alive(pid));
    h.start_agent();
    let deadline = Instant::now() + Duration::from_secs(60);
    while alive(pid) {
        assert!(
            Instant::now() < deadline,
            "the orphan's process {pid} still runs"
        );
        sleep(Duration::from_millis(50)).await;
    }
    assert!(marked(&marker).is_empty());
}

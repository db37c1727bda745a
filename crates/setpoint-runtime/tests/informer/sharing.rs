//! One watch shared between callers, late handlers given synthetic adds, slow handlers that
//! do not delay fast ones.

use super::*;

#[tokio::test]
async fn factory_should_share_one_watch_between_callers() {
    let env = TestEnv::start().await.expect("test env");
    let gate = Gate::new();
    let client = gate.client(&env);
    let factory = InformerFactory::new(client.clone());
    let api = namespace(&client, "shared").await;
    create(&api, "a", &[]).await;
    let first = factory.informer::<ConfigMap>();
    let second = factory.informer::<ConfigMap>();
    let (recorder, mut rx) = recorder();
    second.add_handler(recorder);
    factory.start();
    factory.wait_for_sync().await;
    assert_eq!(factory.metrics().len(), 1, "one informer for both callers");
    create(&api, "b", &[]).await;
    assert!(take(&mut rx, 2).await.contains(&"add shared/b".to_string()));
    assert!(first
        .store()
        .get(&ObjectKey::namespaced("shared", "b"))
        .is_some());
    let metrics = first.metrics();
    assert_eq!(metrics, second.metrics());
    assert_eq!(metrics.lists_total, 1);
    // One list-and-watch on the wire for the pair: at most one streaming list, one paged list
    // and one watch (the paged list and watch when the streaming list was refused).
    let requests: Vec<_> = gate
        .requests()
        .into_iter()
        .filter(|r| r.starts_with("GET /api/v1/configmaps?"))
        .collect();
    let count = |f: fn(&String) -> bool| requests.iter().filter(|r| f(r)).count();
    let streams = count(|r| r.contains("sendInitialEvents=true"));
    let lists = count(|r| !r.contains("watch=true"));
    let watches = count(|r| r.contains("watch=true") && !r.contains("sendInitialEvents"));
    assert!(streams <= 1 && lists <= 1 && watches <= 1, "{requests:?}");

    // Another namespace or selector is another informer (started at once: the factory runs).
    let scoped = factory.informer_with::<ConfigMap>(InformerOptions {
        namespace: Some("shared".into()),
        ..Default::default()
    });
    synced(&scoped).await;
    let labels: Vec<_> = factory
        .metrics()
        .into_iter()
        .map(|(label, _)| label)
        .collect();
    assert_eq!(labels, ["configmaps", "configmaps{namespace=shared}"]);
    factory.shut_down();
}

#[tokio::test]
async fn informer_should_give_a_late_handler_synthetic_adds_then_changes() {
    let env = TestEnv::start().await.expect("test env");
    let factory = InformerFactory::new(env.client());
    let api = namespace(&env.client(), "late").await;
    for name in ["a", "b", "c"] {
        create(&api, name, &[]).await;
    }
    let informer = factory.informer::<ConfigMap>();
    factory.start();
    synced(&informer).await;
    let (recorder, mut rx) = recorder();
    let registration = informer.add_handler(recorder);
    let mut adds = take(&mut rx, 3).await;
    adds.sort();
    assert_eq!(
        adds,
        [
            "add late/a initial",
            "add late/b initial",
            "add late/c initial"
        ]
    );
    until("the handler has synced", || registration.has_synced()).await;
    create(&api, "d", &[]).await;
    assert_eq!(take(&mut rx, 1).await, ["add late/d"]);
    api.delete("a", &DeleteParams::default())
        .await
        .expect("delete a");
    assert_eq!(take(&mut rx, 1).await, ["delete late/a final"]);
}

/// Blocks in its first call until released.
struct Slow {
    release: Mutex<Option<std::sync::mpsc::Receiver<()>>>,
    seen: Recorder,
}

impl EventHandler<ConfigMap> for Slow {
    fn on_add(&self, object: &Arc<ConfigMap>, in_initial_list: bool) {
        if let Some(release) = self.release.lock().take() {
            let _ = release.recv();
        }
        EventHandler::<ConfigMap>::on_add(&self.seen, object, in_initial_list);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn informer_should_not_let_a_slow_handler_delay_a_fast_one() {
    let env = TestEnv::start().await.expect("test env");
    let factory = InformerFactory::new(env.client());
    let api = namespace(&env.client(), "slow").await;
    let informer = factory.informer::<ConfigMap>();
    let (release, released) = std::sync::mpsc::channel();
    let (slow_seen, mut slow_rx) = recorder();
    informer.add_handler(Slow {
        release: Mutex::new(Some(released)),
        seen: slow_seen,
    });
    let (fast, mut fast_rx) = recorder();
    informer.add_handler(fast);
    factory.start();
    synced(&informer).await;
    for i in 0..10 {
        create(&api, &format!("cm{i}"), &[]).await;
    }
    // The fast handler gets all ten while the slow one is stuck in its first call.
    assert_eq!(take(&mut fast_rx, 10).await.len(), 10);
    assert!(
        slow_rx.try_recv().is_err(),
        "the slow handler is still blocked"
    );
    release.send(()).expect("the slow handler waits");
    assert_eq!(take(&mut slow_rx, 10).await.len(), 10);
}

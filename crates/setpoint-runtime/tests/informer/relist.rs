//! Falling behind, renewing and failing: relists with tombstones, watches renewed without a
//! relist, list errors reported until a list succeeds.

use super::*;

#[tokio::test]
async fn informer_should_relist_and_emit_tombstones_after_falling_behind() {
    relist_and_emit_tombstones_after_falling_behind(InformerOptions::default()).await;
}

#[tokio::test]
async fn compact_informer_should_relist_and_emit_tombstones_after_falling_behind() {
    relist_and_emit_tombstones_after_falling_behind(InformerOptions::default().compact()).await;
}

async fn relist_and_emit_tombstones_after_falling_behind(options: InformerOptions<ConfigMap>) {
    let env = TestEnv::start_with_watch_window(20)
        .await
        .expect("test env");
    let gate = Gate::new();
    let client = gate.client(&env);
    let api = namespace(&client, "behind").await;
    for name in ["keep", "gone1", "gone2", "changed"] {
        create(&api, name, &[]).await;
    }
    let factory = InformerFactory::new(client.clone());
    let informer = factory.informer_with::<ConfigMap>(options);
    let (handler, mut rx) = recorder();
    informer.add_handler(handler);
    factory.start();
    synced(&informer).await;
    assert_eq!(take(&mut rx, 4).await.len(), 4);

    // The informer stops reading its watch while more than the server's window happens.
    gate.stall_streams(true);
    api.delete("gone1", &DeleteParams::default())
        .await
        .expect("delete");
    api.delete("gone2", &DeleteParams::default())
        .await
        .expect("delete");
    let mut changed = api.get("changed").await.expect("get");
    changed.data = Some(BTreeMap::from([("k".to_string(), "new".to_string())]));
    api.replace("changed", &PostParams::default(), &changed)
        .await
        .expect("replace");
    for i in 0..25 {
        create(&api, &format!("new{i}"), &[]).await;
    }
    gate.stall_streams(false);

    let server: BTreeSet<String> = api
        .list(&ListParams::default())
        .await
        .expect("list")
        .items
        .iter()
        .map(|cm| format!("behind/{}", cm.name_any()))
        .collect();
    let store = informer.store();
    until("the cache matches the server", || {
        keys(&store.list()).into_iter().collect::<BTreeSet<_>>() == server
    })
    .await;
    let metrics = informer.metrics();
    assert!(metrics.relists_total >= 1, "{metrics:?}");
    // The deletes happened while the informer was behind: tombstones, with the last state.
    let mut lines = Vec::new();
    while let Ok(line) = rx.try_recv() {
        lines.push(line);
    }
    for gone in ["gone1", "gone2"] {
        assert!(
            lines.contains(&format!("delete behind/{gone} unknown")),
            "{gone}: a tombstone: {lines:?}"
        );
    }
    let cached = store
        .get(&ObjectKey::namespaced("behind", "changed"))
        .expect("cached");
    assert_eq!(
        cached
            .data
            .as_ref()
            .and_then(|d| d.get("k"))
            .map(String::as_str),
        Some("new")
    );
}

#[tokio::test]
async fn informer_should_renew_watches_without_relisting() {
    let env = TestEnv::start().await.expect("test env");
    let factory = InformerFactory::new(env.client())
        .with_watch_timeout(Duration::from_secs(1), Duration::from_secs(1));
    let api = namespace(&env.client(), "renewed").await;
    let informer = factory.informer::<ConfigMap>();
    let (handler, mut rx) = recorder();
    informer.add_handler(handler);
    factory.start();
    synced(&informer).await;
    until("the watch was renewed twice", || {
        informer.metrics().watch_restarts_total >= 2
    })
    .await;
    create(&api, "a", &[]).await;
    assert_eq!(take(&mut rx, 1).await, ["add renewed/a"]);
    let metrics = informer.metrics();
    assert_eq!(
        (metrics.lists_total, metrics.relists_total),
        (1, 0),
        "{metrics:?}"
    );
    assert_eq!(metrics.watch_errors_total, 0, "{metrics:?}");
    assert!(metrics.events_total >= 1, "{metrics:?}");
}

#[tokio::test]
async fn informer_should_report_list_errors_until_a_list_succeeds() {
    let env = TestEnv::start().await.expect("test env");
    let gate = Gate::new();
    let factory = InformerFactory::new(gate.client(&env)).with_backoff(WatchBackoff {
        initial: Duration::from_millis(20),
        max: Duration::from_millis(50),
        ..WatchBackoff::default()
    });
    gate.refuse(Some(403));
    let informer = factory.informer::<ConfigMap>();
    factory.start();
    until("an error is reported", || informer.last_error().is_some()).await;
    let error = informer.last_error().unwrap_or_default();
    assert!(
        error.contains("403") && error.contains("configmaps"),
        "{error}"
    );
    let metrics = informer.metrics();
    assert!(
        metrics.watch_errors_total >= 1 && !metrics.synced,
        "{metrics:?}"
    );

    gate.refuse(None);
    synced(&informer).await;
    assert_eq!(
        informer.last_error(),
        None,
        "cleared by the successful list"
    );
}

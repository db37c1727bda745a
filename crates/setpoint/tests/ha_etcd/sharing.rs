//! Two servers on one etcd share their trust (one PKI), their objects and their watches.

use super::*;

#[test]
fn two_servers_on_one_etcd_should_share_trust_and_objects_and_watches() {
    let etcd = start_etcd();
    let tmp = tempfile::tempdir().unwrap();
    let (dir_a, dir_b) = (tmp.path().join("a"), tmp.path().join("b"));
    let api_only = ["--no-agent", "--controllers="];
    let a = start_server(&dir_a, &etcd, &api_only);
    copy_pki(&dir_a, &dir_b);
    let b = start_server(&dir_b, &etcd, &api_only);

    // One CA, one admin: A's kubeconfig works against B's address.
    assert_eq!(
        std::fs::read(dir_a.join("pki/ca.crt")).unwrap(),
        std::fs::read(dir_b.join("pki/ca.crt")).unwrap()
    );
    let via_b = a.ok(&[
        "--server",
        &b.url(),
        "get",
        "ns",
        "kube-system",
        "-o",
        "name",
    ]);
    assert_eq!(via_b.trim(), "namespace/kube-system");

    // A watch through B, from the start.
    let mut watch = Process(
        b.kubectl_command()
            .args([
                "get",
                "cm",
                "-w",
                "--output-watch-events",
                "--request-timeout=60s",
                "-o",
                "json",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    // `{"type": …, "object": …}` documents, one per event.
    let mut events =
        serde_json::Deserializer::from_reader(BufReader::new(watch.0.stdout.take().unwrap()))
            .into_iter::<serde_json::Value>();
    // The watch is established once the marker written through B shows up.
    b.ok(&["create", "configmap", "marker"]);
    let mut next_event = move || {
        let event = events.next().expect("watch output ended early").unwrap();
        let object = &event["object"]["metadata"];
        (
            event["type"].as_str().unwrap_or_default().to_owned(),
            object["name"].as_str().unwrap_or_default().to_owned(),
            object["resourceVersion"]
                .as_str()
                .unwrap_or_default()
                .parse::<u64>()
                .unwrap(),
        )
    };
    assert_eq!(next_event().1, "marker");

    // Writes through A, each answered with its resourceVersion.
    let rv_of = |out: &str| -> u64 {
        let v: serde_json::Value = serde_json::from_str(out).unwrap();
        v["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap()
    };
    let mut written = Vec::new();
    for i in 0..5 {
        let name = format!("c{i}");
        let out = a.ok(&[
            "create",
            "configmap",
            &name,
            "--from-literal=i=x",
            "-o",
            "json",
        ]);
        written.push(("ADDED".to_owned(), name.clone(), rv_of(&out)));
        let patch = r#"{"metadata":{"labels":{"step":"2"}}}"#;
        let out = a.ok(&[
            "patch",
            "cm",
            &name,
            "--type=merge",
            "-p",
            patch,
            "-o",
            "json",
        ]);
        written.push(("MODIFIED".to_owned(), name, rv_of(&out)));
    }
    a.ok(&["delete", "cm", "c0"]);
    written.push(("DELETED".to_owned(), "c0".to_owned(), 0));

    let mut seen = Vec::new();
    while seen.len() < written.len() {
        seen.push(next_event());
    }
    drop(watch);
    // Same events, same order, same resourceVersions (a delete's is the deletion's own).
    for (saw, wrote) in seen.iter().zip(&written) {
        assert_eq!((&saw.0, &saw.1), (&wrote.0, &wrote.1), "{seen:?}");
        if wrote.2 != 0 {
            assert_eq!(saw.2, wrote.2, "{seen:?}");
        }
    }
    assert!(
        seen.windows(2).all(|w| w[0].2 < w[1].2),
        "resourceVersions not increasing: {seen:?}"
    );

    // A read through B is as fresh as the write through A.
    let patch = r#"{"metadata":{"annotations":{"fresh":"yes"}}}"#;
    let out = a.ok(&[
        "patch",
        "cm",
        "c1",
        "--type=merge",
        "-p",
        patch,
        "-o",
        "json",
    ]);
    let through_b = b.ok(&["get", "cm", "c1", "-o", "json"]);
    assert_eq!(rv_of(&through_b), rv_of(&out));
}

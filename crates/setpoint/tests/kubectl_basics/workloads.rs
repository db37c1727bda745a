//! Pods, services and namespaces as kubectl shows and deletes them: columns, grace periods,
//! cluster IPs, `kubectl debug`, and a terminating namespace.

use super::*;

#[test]
fn pods_should_print_kubectl_columns_and_delete_at_once_when_unscheduled() {
    // No node agent and no scheduler: the pod stays unscheduled and Pending.
    let tmp = tempfile::tempdir().unwrap();
    let s = Server::start_with(
        &tmp.path().join("data"),
        "127.0.0.1:0",
        &["--no-agent", "--controllers=*,-scheduler"],
    );
    let pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: p1}\nspec:\n  containers: [{name: c, image: busybox, command: [sleep, '100']}]\n";
    let out = s.kubectl_stdin(&["create", "-f", "-", "--validate=false"], pod);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table = s.ok(&["get", "pods"]);
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]);
    assert!(
        table.contains("0/1") && table.contains("Pending"),
        "{table}"
    );
    let wide = s.ok(&["get", "pods", "-o", "wide"]);
    assert!(
        wide.lines().next().unwrap().contains("NOMINATED NODE"),
        "{wide}"
    );
    let json = s.ok(&["get", "pod", "p1", "-o", "json"]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["spec"]["restartPolicy"], "Always", "defaults applied");
    assert_eq!(v["spec"]["containers"][0]["imagePullPolicy"], "Always");
    assert_eq!(v["status"]["qosClass"], "BestEffort");
    assert_eq!(
        s.ok(&[
            "get",
            "pods",
            "--field-selector",
            "status.phase=Pending",
            "-o",
            "name"
        ])
        .trim(),
        "pod/p1"
    );
    s.ok(&["delete", "pod", "p1", "--wait"]);
    assert_eq!(s.ok(&["get", "pods", "-o", "name"]).trim(), "");
}

#[test]
fn a_pod_with_the_largest_grace_period_should_be_deleted_by_kubectl() {
    // Regression (issue 14.2): such a pod was accepted, then `kubectl delete pod` got a 500
    // (the server panicked computing its deletionTimestamp), and a node agent stopping it
    // would have overflowed its deadline.
    let s = Server::start();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let marker = format!("setpoint-grace-{}-{nanos:x}", std::process::id());
    let _cleanup = common::processes::Cleanup {
        marker: marker.clone(),
        agent_root: s.dir.join("agent").display().to_string(),
    };
    let pod = format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: patient}}\nspec:\n  nodeName: local\n  terminationGracePeriodSeconds: 9223372036854775807\n  containers:\n  - {{name: c, image: busybox, command: [sh, -c, 'sleep 3600 # {marker}']}}\n"
    );
    let out = s.kubectl_stdin(&["create", "-f", "-"], &pod);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    s.ok(&[
        "wait",
        "--for=condition=Ready",
        "pod/patient",
        "--timeout=60s",
    ]);
    // SIGTERM stops `sh`: the agent does not wait out the grace period.
    let out = s.ok(&["delete", "pod", "patient", "--timeout=60s"]);
    assert!(out.contains("pod \"patient\" deleted"), "{out}");
    let err = s.fails(&["get", "pod", "patient"]);
    assert!(err.contains("NotFound"), "{err}");
}

#[test]
fn a_deleted_namespace_should_stay_terminating_while_content_is_held_and_refuse_new_content() {
    let s = Server::start();
    let ns = "apiVersion: v1\nkind: Namespace\nmetadata: {name: doomed}\n";
    assert!(s
        .kubectl_stdin(&["create", "-f", "-", "--validate=false"], ns)
        .status
        .success());
    // A finalizer nobody removes keeps the namespace controller from finishing.
    let held =
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: held, finalizers: [example.com/hold]}\n";
    assert!(s
        .kubectl_stdin(
            &["create", "-n", "doomed", "-f", "-", "--validate=false"],
            held
        )
        .status
        .success());
    s.ok(&["delete", "namespace", "doomed", "--wait=false"]);
    assert_eq!(
        s.ok(&["get", "ns", "doomed", "-o", "jsonpath={.status.phase}"]),
        "Terminating"
    );
    let other = CONFIGMAP.replace("name: c1", "name: c2");
    let out = s.kubectl_stdin(
        &["create", "-n", "doomed", "-f", "-", "--validate=false"],
        &other,
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("Forbidden") && err.contains("because it is being terminated"),
        "{err}"
    );
    // Released, the content goes and the namespace with it.
    s.ok(&[
        "patch",
        "cm",
        "held",
        "-n",
        "doomed",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":null}}"#,
    ]);
    s.ok(&["wait", "--for=delete", "namespace/doomed", "--timeout=60s"]);
    let err = s.fails(&["get", "ns", "doomed"]);
    assert!(
        err.contains("NotFound") || err.contains("not found"),
        "{err}"
    );
}

#[test]
fn services_should_get_a_cluster_ip_that_stays() {
    let s = Server::start();
    let svc = "apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec:\n  selector: {app: web}\n  ports: [{port: 80, targetPort: 8080}]\n";
    assert!(s
        .kubectl_stdin(&["create", "-f", "-"], svc)
        .status
        .success());
    let ip = s.ok(&["get", "svc", "web", "-o", "jsonpath={.spec.clusterIP}"]);
    let octets: Vec<u8> = ip.split('.').map(|o| o.parse().unwrap()).collect();
    assert!(
        octets[0] == 10 && (96..112).contains(&octets[1]),
        "{ip} is outside 10.96.0.0/12"
    );
    let table = s.ok(&["get", "svc", "web"]);
    assert!(table.contains(&ip) && table.contains("80/TCP"), "{table}");
    // Replacing with the original manifest (no clusterIP) keeps the address.
    let out = s.kubectl_stdin(&["replace", "-f", "-"], svc);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        s.ok(&["get", "svc", "web", "-o", "jsonpath={.spec.clusterIP}"]),
        ip
    );
    let taken = format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{name: other}}\nspec:\n  clusterIP: {ip}\n  ports: [{{port: 80}}]\n"
    );
    let out = s.kubectl_stdin(&["create", "-f", "-"], &taken);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("already allocated"), "{err}");
}

#[test]
fn kubectl_debug_should_fail_cleanly_without_ephemeral_containers() {
    // Regression (issue 14.7): `kubectl debug POD -it --image=busybox` made kubectl itself
    // panic: the 404 for the unsupported pods/ephemeralcontainers subresource had no
    // `details`, and kubectl reads `Details.Name` to tell it from a missing pod.
    let s = Server::start_api_only();
    let pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: p1}\nspec:\n  containers: [{name: c, image: busybox, command: [sleep, '100']}]\n";
    let out = s.kubectl_stdin(&["create", "-f", "-", "--validate=false"], pod);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = s.kubectl(&["debug", "p1", "-it", "--image=busybox"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        !stderr.contains("panic") && !stderr.contains("goroutine"),
        "kubectl panicked:\n{stderr}"
    );
    assert!(
        stderr.contains("ephemeral containers are disabled for this cluster"),
        "{stderr}"
    );
}

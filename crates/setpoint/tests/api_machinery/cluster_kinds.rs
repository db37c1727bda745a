//! The kinds that describe the cluster itself, through `kubectl` and the `kube` client:
//! TokenReview answered by the server's own authenticator, ComponentStatus from real health
//! (with its deprecation warning), the default ServiceCIDR, the validation of ServiceCIDRs and
//! IPAddresses, and the IPAddress kept for every cluster IP.

use serde_json::Value;
use setpoint_testenv::process::Server;

/// The admin bearer token of the server's kubeconfig.
fn admin_token(s: &Server) -> String {
    let text = std::fs::read_to_string(s.kubeconfig()).unwrap();
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("token:"))
        .expect("a token line in the admin kubeconfig");
    line.trim_start()["token:".len()..]
        .trim()
        .trim_matches('"')
        .to_owned()
}

/// `kubectl create -f - -o json` of `manifest`: the answer, or kubectl's error.
fn create(s: &Server, manifest: &str) -> Result<Value, String> {
    let out = s.kubectl_stdin(&["create", "-f", "-", "-o", "json"], manifest);
    if out.status.success() {
        Ok(serde_json::from_slice(&out.stdout).unwrap())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

#[test]
fn token_reviews_should_answer_with_the_servers_authenticator() {
    let s = Server::start_api_only();
    let review = |token: &str, audiences: &str| {
        create(
            &s,
            &format!("apiVersion: authentication.k8s.io/v1\nkind: TokenReview\nspec:\n  token: {token:?}\n{audiences}"),
        )
    };
    let admin = review(&admin_token(&s), "").unwrap();
    let status = &admin["status"];
    assert_eq!(status["authenticated"], true, "{admin}");
    assert_eq!(status["user"]["username"], "setpoint-admin", "{admin}");
    let groups = status["user"]["groups"].as_array().unwrap();
    assert!(
        groups.contains(&"system:masters".into())
            && groups.contains(&"system:authenticated".into()),
        "{admin}"
    );
    assert_eq!(
        status["audiences"],
        serde_json::json!(["https://kubernetes.default.svc.cluster.local"])
    );

    let bad = review("not-a-token-this-server-issued", "").unwrap();
    assert_eq!(bad["status"]["authenticated"], Value::Null, "{bad}");
    assert_eq!(bad["status"]["error"], "invalid bearer token", "{bad}");
    // Another audience than the server's: the admin token is not good for it.
    let elsewhere = review(
        &admin_token(&s),
        "  audiences: [https://vault.example.com]\n",
    )
    .unwrap();
    assert_eq!(
        elsewhere["status"]["error"], "invalid bearer token",
        "{elsewhere}"
    );

    let err = create(
        &s,
        "apiVersion: authentication.k8s.io/v1\nkind: TokenReview\nspec: {}\n",
    )
    .unwrap_err();
    assert!(
        err.contains("token is required for TokenReview in authentication"),
        "{err}"
    );
    // Nothing is stored.
    let err = s.fails(&["get", "tokenreviews"]);
    assert!(
        err.contains("MethodNotAllowed") || err.contains("the server does not allow this method"),
        "{err}"
    );
}

#[test]
fn token_reviews_should_work_from_the_kube_client() {
    use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
    let s = Server::start_api_only();
    let token = admin_token(&s);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let api: kube::Api<TokenReview> = kube::Api::all(s.kube_client().await);
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token),
                audiences: None,
            },
            ..TokenReview::default()
        };
        let answer = api.create(&Default::default(), &review).await.unwrap();
        let status = answer.status.unwrap();
        assert_eq!(status.authenticated, Some(true));
        assert_eq!(
            status.user.unwrap().username.as_deref(),
            Some("setpoint-admin")
        );
    });
}

#[test]
fn component_statuses_should_report_real_health_with_a_warning() {
    let s = Server::start();
    let out = s.kubectl(&["get", "componentstatuses"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("Warning: v1 ComponentStatus is deprecated in v1.19+"),
        "{stderr}"
    );
    let rows: Vec<Vec<&str>> = stdout
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows[0], ["NAME", "STATUS", "MESSAGE", "ERROR"], "{stdout}");
    for name in ["scheduler", "controller-manager", "etcd-0"] {
        assert!(
            rows.iter().any(|r| *r == [name, "Healthy", "ok"]),
            "{name}:\n{stdout}"
        );
    }
    let etcd: Value = serde_json::from_str(&s.ok(&["get", "cs", "etcd-0", "-o", "json"])).unwrap();
    assert_eq!(etcd["conditions"][0]["type"], "Healthy");
    assert_eq!(etcd["conditions"][0]["status"], "True");
    let err = s.fails(&["get", "cs", "kubelet"]);
    assert!(
        err.contains("NotFound") || err.contains("not found"),
        "{err}"
    );
    let err = s.fails(&["delete", "cs", "scheduler"]);
    assert!(
        err.contains("MethodNotAllowed") || err.contains("does not allow"),
        "{err}"
    );

    // Without the loops, and with no Lease showing them elsewhere, they are unhealthy; the
    // store still answers.
    let api_only = Server::start_api_only();
    let list: Value = serde_json::from_str(&api_only.ok(&["get", "cs", "-o", "json"])).unwrap();
    let status = |name: &str| {
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["metadata"]["name"] == name)
            .map(|i| i["conditions"][0].clone())
            .unwrap_or_else(|| panic!("no {name} in {list}"))
    };
    assert_eq!(status("etcd-0")["status"], "True", "{list}");
    assert_eq!(status("scheduler")["status"], "False", "{list}");
    assert!(
        status("scheduler")["error"]
            .as_str()
            .unwrap()
            .contains("setpoint-scheduler"),
        "{list}"
    );
    assert_eq!(status("controller-manager")["status"], "False", "{list}");
}

#[test]
fn the_default_service_cidr_should_hold_the_service_range_and_be_ready() {
    let s = Server::start_api_only();
    let cidr: Value =
        serde_json::from_str(&s.ok(&["get", "servicecidr", "kubernetes", "-o", "json"])).unwrap();
    assert_eq!(
        cidr["spec"]["cidrs"],
        serde_json::json!(["10.96.0.0/12"]),
        "{cidr}"
    );
    let ready = &cidr["status"]["conditions"][0];
    assert_eq!(
        (ready["type"].as_str(), ready["status"].as_str()),
        (Some("Ready"), Some("True")),
        "{cidr}"
    );
    let table = s.ok(&["get", "servicecidrs"]);
    let rows: Vec<Vec<&str>> = table
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows[0], ["NAME", "CIDRS", "AGE"], "{table}");
    assert_eq!(rows[1][..2], ["kubernetes", "10.96.0.0/12"], "{table}");
    // The spec never changes; the status is written through its subresource.
    let err = s.fails(&[
        "patch",
        "servicecidr",
        "kubernetes",
        "--type=merge",
        "-p",
        r#"{"spec":{"cidrs":["10.0.0.0/16"]}}"#,
    ]);
    assert!(
        err.contains("spec.cidrs: Invalid value") && err.contains("field is immutable"),
        "{err}"
    );
    let err = create(&s, "apiVersion: networking.k8s.io/v1\nkind: ServiceCIDR\nmetadata: {name: twice}\nspec:\n  cidrs: [10.0.0.0/24, 10.1.0.0/24]\n").unwrap_err();
    assert!(
        err.contains("may specify no more than one IP for each IP family"),
        "{err}"
    );
    let err = create(&s, "apiVersion: networking.k8s.io/v1\nkind: ServiceCIDR\nmetadata: {name: bad}\nspec:\n  cidrs: [10.0.0.0/40]\n").unwrap_err();
    assert!(
        err.contains("spec.cidrs[0]: Invalid value: \"10.0.0.0/40\""),
        "{err}"
    );
}

#[test]
fn ip_addresses_should_be_named_by_canonical_addresses_with_a_parent() {
    let s = Server::start_api_only();
    let ip = |name: &str, parent: &str| {
        create(&s, &format!("apiVersion: networking.k8s.io/v1\nkind: IPAddress\nmetadata:\n  name: {name:?}\nspec:\n{parent}"))
    };
    let web = "  parentRef: {resource: services, namespace: default, name: web}\n";
    ip("10.96.0.42", web).unwrap();
    let table = s.ok(&["get", "ip"]);
    let rows: Vec<Vec<&str>> = table
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows[0], ["NAME", "PARENTREF"], "{table}");
    assert!(
        rows.contains(&vec!["10.96.0.42", "services/default/web"]),
        "{table}"
    );
    let err = ip("2001:DB8::1", web).unwrap_err();
    assert!(
        err.contains("metadata.name: Invalid value: \"2001:DB8::1\": must be in canonical form"),
        "{err}"
    );
    let err = ip("10.96.0.43", "  {}\n").unwrap_err();
    assert!(err.contains("spec.parentRef: Required value"), "{err}");
    let err = s.fails(&[
        "patch",
        "ip",
        "10.96.0.42",
        "--type=merge",
        "-p",
        r#"{"spec":{"parentRef":{"name":"other"}}}"#,
    ]);
    assert!(
        err.contains("spec.parentRef: Invalid value") && err.contains("field is immutable"),
        "{err}"
    );
}

#[test]
fn every_cluster_ip_should_have_an_ip_address_until_its_service_goes() {
    let s = Server::start_api_only();
    s.ok(&["create", "service", "clusterip", "shop", "--tcp=80:8080"]);
    let service: Value =
        serde_json::from_str(&s.ok(&["get", "service", "shop", "-o", "json"])).unwrap();
    let ip = service["spec"]["clusterIP"].as_str().unwrap().to_owned();
    let address = setpoint_testenv::eventually_blocking(&format!("the IPAddress {ip}"), || {
        let out = s.kubectl(&["get", "ipaddress", &ip, "-o", "json"]);
        out.status
            .success()
            .then(|| serde_json::from_slice::<Value>(&out.stdout).unwrap())
    });
    assert_eq!(
        address["spec"]["parentRef"],
        serde_json::json!({"resource": "services", "namespace": "default", "name": "shop"}),
        "{address}"
    );
    let labels = &address["metadata"]["labels"];
    assert_eq!(
        labels["ipaddress.kubernetes.io/managed-by"], "ipallocator.k8s.io",
        "{address}"
    );
    assert_eq!(
        labels["ipaddress.kubernetes.io/ip-family"], "IPv4",
        "{address}"
    );
    // A headless service holds no address; a deleted one gives its address back.
    s.ok(&[
        "create",
        "service",
        "clusterip",
        "headless",
        "--clusterip=None",
    ]);
    s.ok(&["delete", "service", "shop"]);
    setpoint_testenv::eventually_blocking(&format!("the IPAddress {ip} gone"), || {
        let out = s.kubectl(&["get", "ipaddress", &ip]);
        (!out.status.success()).then_some(())
    });
    // What is left belongs to the `kubernetes` Service the API server keeps.
    let left: Value = serde_json::from_str(&s.ok(&["get", "ipaddresses", "-o", "json"])).unwrap();
    for address in left["items"].as_array().unwrap() {
        assert_eq!(address["spec"]["parentRef"]["name"], "kubernetes", "{left}");
    }
}

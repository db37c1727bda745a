//! The audit log: every write recorded with who made it (two users: the admin token and a
//! certificate issued here), its verb, object and answer; the transport's 401s; watches'
//! two stages; `Audit-Id`; bodies only where the policy asks (never a Secret's under the
//! default policy); rotation by size keeping `max_backups` files.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::BodyExt as _;
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use serde_json::Value;
use setpoint_apiserver::{
    full_body, serve, Api, AuditConfig, AuditLog, AuditPolicy, Handler, RunningServer,
    TransportConfig, User,
};
use setpoint_store::{EmbeddedConfig, EmbeddedStore};
use setpoint_testenv::eventually;
use tokio_util::sync::CancellationToken;

/// An API with an audit log in a temporary directory.
struct Audited {
    api: Arc<Api>,
    log: PathBuf,
    dir: tempfile::TempDir,
}

async fn audited(policy: AuditPolicy, configure: impl FnOnce(&mut AuditConfig)) -> Audited {
    let store = EmbeddedStore::open(EmbeddedConfig::in_memory().without_auto_compaction()).unwrap();
    let api = Api::new(Arc::new(store)).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit").join("audit.log");
    let mut config = AuditConfig::new(policy, AuditLog::File(log.clone()));
    configure(&mut config);
    api.enable_audit(config).unwrap();
    Audited { api, log, dir }
}

/// The events in `log`.
fn events_in(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// Waits until the log holds an event `wanted` accepts, and returns it.
async fn event(log: &Path, what: &str, wanted: impl Fn(&Value) -> bool) -> Value {
    eventually(what, || async {
        events_in(log).into_iter().find(|e| wanted(e))
    })
    .await
}

fn is(event: &Value, verb: &str, name: &str, stage: &str) -> bool {
    event["verb"] == verb && event["objectRef"]["name"] == name && event["stage"] == stage
}

/// A TLS client of a served API.
struct Client {
    addr: SocketAddr,
    config: Arc<rustls::ClientConfig>,
}

struct Answer {
    status: StatusCode,
    headers: http::HeaderMap,
    body: String,
}

impl Client {
    fn new(server: &RunningServer, identity: Option<(&str, &str)>) -> Client {
        let config = setpoint_testenv::tls::client_config(
            server.pki().ca_certificate_pem(),
            identity,
            &[b"http/1.1"],
            &[&rustls::version::TLS13],
        );
        Client {
            addr: server.local_addr(),
            config,
        }
    }

    async fn send(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        headers: &[(&str, &str)],
        body: &str,
    ) -> Answer {
        let tcp = tokio::net::TcpStream::connect(self.addr).await.unwrap();
        let tls = tokio_rustls::TlsConnector::from(self.config.clone())
            .connect(ServerName::IpAddress(self.addr.ip().into()), tcp)
            .await
            .unwrap();
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .unwrap();
        tokio::spawn(connection);
        let mut builder = Request::builder()
            .method(method)
            .uri(path)
            .header("host", "127.0.0.1")
            .header("content-type", "application/json")
            .header("user-agent", "audit-test/1.0");
        if let Some(token) = token {
            builder = builder.header("authorization", format!("Bearer {token}"));
        }
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        let response = sender
            .send_request(builder.body(full_body(body.to_owned())).unwrap())
            .await
            .unwrap();
        let (parts, body) = response.into_parts();
        let body = body.collect().await.unwrap().to_bytes();
        Answer {
            status: parts.status,
            headers: parts.headers,
            body: String::from_utf8_lossy(&body).into_owned(),
        }
    }
}

/// A client certificate for `name` in `group`, issued by the server's CA.
fn user_certificate(
    server: &RunningServer,
    data_dir: &Path,
    name: &str,
    group: &str,
) -> (String, String) {
    let ca_key = std::fs::read_to_string(data_dir.join("pki").join("ca.key")).unwrap();
    let issuer = rcgen::Issuer::from_ca_cert_pem(
        server.pki().ca_certificate_pem(),
        rcgen::KeyPair::from_pem(&ca_key).unwrap(),
    )
    .unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, name);
    params
        .distinguished_name
        .push(rcgen::DnType::OrganizationName, group);
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
    let key = rcgen::KeyPair::generate().unwrap();
    let certificate = params.signed_by(&key, &issuer).unwrap();
    (certificate.pem(), key.serialize_pem())
}

const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";

fn configmap(name: &str) -> String {
    format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}"}},"data":{{"a":"b"}}}}"#
    )
}

#[tokio::test]
async fn every_write_should_be_recorded_with_its_user_object_and_code() {
    let audited = audited(AuditPolicy::default_policy(), |_| {}).await;
    let data_dir = audited.dir.path().join("data");
    let handler: Arc<dyn Handler> = audited.api.clone();
    let server = serve(
        TransportConfig::new(&data_dir, "127.0.0.1:0".parse().unwrap()),
        handler,
        CancellationToken::new(),
    )
    .await
    .unwrap();
    let token = server.pki().admin_token().to_owned();
    let admin = Client::new(&server, None);
    let (cert, key) = user_certificate(&server, &data_dir, "alice", "dev");
    let alice = Client::new(&server, Some((&cert, &key)));
    let log = &audited.log;
    let_dev_edit(&audited.api).await;

    // The admin (token) creates; alice (certificate) creates, collides, deletes.
    let created = admin
        .send(
            "POST",
            CONFIGMAPS,
            Some(&token),
            &[],
            &configmap("by-admin"),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let audit_id = created.headers["audit-id"].to_str().unwrap().to_owned();
    let sent_id = [("Audit-ID", "chosen-by-the-client")];
    let by_alice = alice
        .send("POST", CONFIGMAPS, None, &sent_id, &configmap("by-alice"))
        .await;
    assert_eq!(by_alice.status, StatusCode::CREATED, "{}", by_alice.body);
    assert_eq!(by_alice.headers["audit-id"], "chosen-by-the-client");
    let again = alice
        .send("POST", CONFIGMAPS, None, &[], &configmap("by-alice"))
        .await;
    assert_eq!(again.status, StatusCode::CONFLICT);
    let path = format!("{CONFIGMAPS}/by-alice");
    let deleted = alice.send("DELETE", &path, None, &[], "").await;
    assert_eq!(deleted.status, StatusCode::OK, "{}", deleted.body);

    let e = event(log, "the admin's create", |e| {
        is(e, "create", "by-admin", "ResponseComplete")
    })
    .await;
    assert_eq!(e["kind"], "Event");
    assert_eq!(e["apiVersion"], "audit.k8s.io/v1");
    assert_eq!(e["level"], "Metadata");
    assert_eq!(e["auditID"], audit_id);
    assert_eq!(e["requestURI"], CONFIGMAPS);
    assert_eq!(e["user"]["username"], "setpoint-admin");
    assert_eq!(
        e["user"]["groups"],
        serde_json::json!(["system:masters", "system:authenticated"])
    );
    assert_eq!(e["sourceIPs"], serde_json::json!(["127.0.0.1"]));
    assert_eq!(e["userAgent"], "audit-test/1.0");
    assert_eq!(
        e["objectRef"],
        serde_json::json!({"resource": "configmaps", "namespace": "default", "name": "by-admin", "apiVersion": "v1"})
    );
    assert_eq!(
        e["responseStatus"],
        serde_json::json!({"metadata": {}, "code": 201})
    );
    assert!(
        e.get("requestObject").is_none() && e.get("responseObject").is_none(),
        "{e}"
    );
    assert!(e["requestReceivedTimestamp"]
        .as_str()
        .unwrap()
        .ends_with('Z'));

    let e = event(log, "alice's create", |e| {
        e["auditID"] == "chosen-by-the-client"
    })
    .await;
    assert!(is(&e, "create", "by-alice", "ResponseComplete"), "{e}");
    assert_eq!(e["user"]["username"], "alice");
    assert_eq!(
        e["user"]["groups"],
        serde_json::json!(["dev", "system:authenticated"])
    );
    let e = event(log, "alice's failed create", |e| {
        is(e, "create", "by-alice", "ResponseComplete") && e["responseStatus"]["code"] == 409
    })
    .await;
    assert_eq!(e["responseStatus"]["reason"], "AlreadyExists");
    assert_eq!(e["responseStatus"]["status"], "Failure");
    let e = event(log, "alice's delete", |e| {
        is(e, "delete", "by-alice", "ResponseComplete")
    })
    .await;
    assert_eq!(e["user"]["username"], "alice");
    assert_eq!(e["responseStatus"]["code"], 200);
    assert_eq!(e["requestURI"], path);

    // A request without credentials: its 401, with no user, as kube records it.
    let anonymous = admin.send("GET", "/api/v1/namespaces", None, &[], "").await;
    assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED);
    let anonymous_id = anonymous.headers["audit-id"].to_str().unwrap().to_owned();
    let e = event(log, "the 401", |e| e["auditID"] == anonymous_id.as_str()).await;
    assert_eq!(e["stage"], "ResponseStarted");
    assert_eq!(e["verb"], "list");
    assert_eq!(e["user"], serde_json::json!({}));
    assert_eq!(e["responseStatus"]["code"], 401);
    assert_eq!(
        e["responseStatus"]["message"],
        "Authentication failed, no credentials provided"
    );

    // A watch: ResponseStarted when it begins, ResponseComplete when it ends.
    let watch = admin
        .send(
            "GET",
            &format!("{CONFIGMAPS}?watch=1&timeoutSeconds=1"),
            Some(&token),
            &[],
            "",
        )
        .await;
    assert_eq!(watch.status, StatusCode::OK);
    let watch_id = watch.headers["audit-id"].to_str().unwrap().to_owned();
    eventually("the watch's two events", || async {
        let stages: Vec<Value> = events_in(log)
            .into_iter()
            .filter(|e| e["auditID"] == watch_id.as_str())
            .map(|e| e["stage"].clone())
            .collect();
        stages == ["ResponseStarted", "ResponseComplete"]
    })
    .await;

    // A Secret's value never reaches the log under the default policy; health checks and
    // discovery are not recorded.
    let secret = r#"{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"},"data":{"k":"dG9wLXNlY3JldC12YWx1ZQ=="}}"#;
    let answer = admin
        .send(
            "POST",
            "/api/v1/namespaces/default/secrets",
            Some(&token),
            &[],
            secret,
        )
        .await;
    assert_eq!(answer.status, StatusCode::CREATED);
    let healthz = admin.send("GET", "/healthz", None, &[], "").await;
    assert!(healthz.headers.contains_key("audit-id"));
    admin.send("GET", "/apis", Some(&token), &[], "").await;
    event(log, "the secret's create", |e| {
        is(e, "create", "s", "ResponseComplete")
    })
    .await;
    let text = std::fs::read_to_string(log).unwrap();
    assert!(
        !text.contains("dG9wLXNlY3JldC12YWx1ZQ"),
        "a secret value in the log"
    );
    assert!(!text.contains(r#""requestURI":"/apis""#) && !text.contains("/healthz"));
    assert!(!text.contains("RequestReceived"));

    let figures = audited.api.audit_figures().unwrap();
    assert!(figures.events >= 8, "{figures:?}");
    assert_eq!(figures.errors, 0);
    use std::os::unix::fs::PermissionsExt as _;
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(log), 0o600);
    assert_eq!(mode(log.parent().unwrap()), 0o700);
    server.shutdown().await.unwrap();
}

/// Sends `method path` with `body` straight to the API as `user` (no transport).
async fn call(api: &Api, user: &User, method: &str, path: &str, body: &str) -> (StatusCode, Value) {
    let request = Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json")
        .body(Bytes::from(body.to_owned()))
        .unwrap();
    let response = Handler::handle(api, request, user.clone()).await;
    let status = response.status();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

/// A RoleBinding letting the group `dev` edit namespace `default` (RBAC refuses the test users
/// everything else), created as the admin; returns once the authorizer follows it.
async fn let_dev_edit(api: &Api) {
    let admin = User::new("setpoint-admin", ["system:masters".to_owned()]);
    let binding = serde_json::json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "dev-edit", "namespace": "default"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "dev"}]
    });
    let path = "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings";
    let (code, body) = call(api, &admin, "POST", path, &binding.to_string()).await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    // Polled as `quiet`, whom the policies of these tests do not record.
    let dev = User::new("quiet", ["dev".to_owned()]);
    setpoint_testenv::eventually("the binding is followed", || async {
        call(api, &dev, "GET", CONFIGMAPS, "").await.0 == StatusCode::OK
    })
    .await;
}

#[tokio::test]
async fn the_policy_should_decide_levels_bodies_and_stages() {
    let policy = AuditPolicy::parse(
        r#"
apiVersion: audit.k8s.io/v1
kind: Policy
rules:
  - level: None
    users: [quiet]
  - level: RequestResponse
    omitManagedFields: true
    resources: [{group: "", resources: [configmaps]}]
  - level: Request
    omitStages: [RequestReceived]
    resources: [{group: "", resources: [secrets]}]
"#,
    )
    .unwrap();
    let audited = audited(policy, |_| {}).await;
    let api = &audited.api;
    let log = &audited.log;
    let_dev_edit(api).await;
    let bob = User::new("bob", ["dev".to_owned()]);
    let (code, _) = call(api, &bob, "POST", CONFIGMAPS, &configmap("full")).await;
    assert_eq!(code, StatusCode::CREATED);
    let (code, _) = call(
        api,
        &bob,
        "POST",
        "/api/v1/namespaces/default/secrets",
        r#"{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"},"stringData":{"k":"v"}}"#,
    )
    .await;
    assert_eq!(code, StatusCode::CREATED);
    let quiet = User::new("quiet", []);
    call(api, &quiet, "POST", CONFIGMAPS, &configmap("unrecorded")).await;
    // Not matched by any rule: not recorded.
    call(api, &bob, "GET", "/api/v1/namespaces/default/pods", "").await;

    let received = event(log, "the create's RequestReceived", |e| {
        is(e, "create", "full", "RequestReceived")
    })
    .await;
    assert_eq!(received["level"], "RequestResponse");
    assert_eq!(received["requestObject"]["data"]["a"], "b");
    assert!(received.get("responseStatus").is_none());
    assert_eq!(
        received["stageTimestamp"],
        received["requestReceivedTimestamp"]
    );
    let complete = event(log, "the create's ResponseComplete", |e| {
        is(e, "create", "full", "ResponseComplete")
    })
    .await;
    assert_eq!(complete["auditID"], received["auditID"]);
    assert_eq!(complete["responseObject"]["metadata"]["name"], "full");
    assert!(complete["responseObject"]["metadata"]["uid"].is_string());
    assert!(
        complete["responseObject"]["metadata"]
            .get("managedFields")
            .is_none(),
        "{complete}"
    );
    assert_eq!(complete["objectRef"]["name"], "full");

    let secret = event(log, "the secret's create", |e| {
        is(e, "create", "s", "ResponseComplete")
    })
    .await;
    assert_eq!(secret["level"], "Request");
    assert_eq!(secret["requestObject"]["stringData"]["k"], "v");
    assert!(secret.get("responseObject").is_none());
    let events = events_in(log);
    assert!(!events
        .iter()
        .any(|e| is(e, "create", "s", "RequestReceived")));
    assert!(!events.iter().any(|e| e["user"]["username"] == "quiet"));
    assert!(!events.iter().any(|e| e["verb"] == "list"));
}

#[tokio::test]
async fn a_full_log_should_be_rotated_keeping_max_backups_files() {
    let audited = audited(AuditPolicy::default_policy(), |config| {
        config.max_size_bytes = 4096;
        config.max_backups = 2;
    })
    .await;
    let admin = User::new("setpoint-admin", ["system:masters".to_owned()]);
    for i in 0..40 {
        let (code, _) = call(
            &audited.api,
            &admin,
            "POST",
            CONFIGMAPS,
            &configmap(&format!("cm-{i}")),
        )
        .await;
        assert_eq!(code, StatusCode::CREATED);
    }
    let dir = audited.log.parent().unwrap().to_owned();
    let files = eventually("the last create logged and two backups kept", || async {
        let logged = events_in(&audited.log)
            .iter()
            .any(|e| e["objectRef"]["name"] == "cm-39");
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        (logged && names.len() == 3).then_some(names)
    })
    .await;
    assert_eq!(files[2], "audit.log", "{files:?}");
    for name in &files[..2] {
        assert!(
            name.starts_with("audit-") && name.ends_with(".log"),
            "{name}"
        );
        let path = dir.join(name);
        assert!(std::fs::metadata(&path).unwrap().len() <= 4096);
        assert!(!events_in(&path).is_empty());
    }
    // The oldest events were rotated away: only the newest files remain.
    let kept: usize = files.iter().map(|n| events_in(&dir.join(n)).len()).sum();
    assert!(kept < 40, "{kept} events kept of 40");
}

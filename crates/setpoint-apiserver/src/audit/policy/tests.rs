//! The policy's parsing, validation and rule matching.

use super::*;
use crate::request_info::Verb;

fn resource(
    group: &str,
    resource: &str,
    sub: Option<&str>,
    namespace: Option<&str>,
    name: Option<&str>,
) -> ResourceRequest {
    ResourceRequest {
        group: group.to_owned(),
        version: "v1".to_owned(),
        namespace: namespace.map(str::to_owned),
        resource: resource.to_owned(),
        name: name.map(str::to_owned),
        subresource: sub.map(str::to_owned),
        verb: Verb::Get,
    }
}

fn level(
    policy: &Policy,
    user: Option<&User>,
    verb: &str,
    r: Option<&ResourceRequest>,
    path: &str,
) -> Level {
    policy
        .decide(&Facts {
            user,
            verb,
            resource: r,
            path,
        })
        .level
}

#[test]
fn the_first_matching_rule_should_decide_and_no_match_should_record_nothing() {
    let policy = Policy::parse(
        r#"
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: RequestResponse
    users: [alice]
    resources: [{group: "", resources: [configmaps]}]
  - level: Request
    userGroups: [dev]
    verbs: [create]
    omitStages: [ResponseStarted]
    omitManagedFields: true
  - level: Metadata
    namespaces: [prod]
"#,
    )
    .unwrap();
    let alice = User::new("alice", ["dev".to_owned()]);
    let bob = User::new("bob", ["dev".to_owned()]);
    let cm = resource("", "configmaps", None, Some("default"), Some("a"));
    let prod = resource("apps", "deployments", None, Some("prod"), None);
    assert_eq!(
        level(&policy, Some(&alice), "get", Some(&cm), ""),
        Level::RequestResponse
    );
    assert_eq!(
        level(&policy, Some(&bob), "get", Some(&cm), ""),
        Level::None
    );
    assert_eq!(
        level(&policy, Some(&bob), "create", Some(&cm), ""),
        Level::Request
    );
    assert_eq!(
        level(&policy, Some(&bob), "get", Some(&prod), ""),
        Level::Metadata
    );
    assert_eq!(level(&policy, None, "get", None, "/version"), Level::None);
    let decision = policy.decide(&Facts {
        user: Some(&bob),
        verb: "create",
        resource: Some(&cm),
        path: "",
    });
    assert!(decision.omit_stages.contains(Stage::RequestReceived));
    assert!(decision.omit_stages.contains(Stage::ResponseStarted));
    assert!(!decision.omit_stages.contains(Stage::ResponseComplete));
    assert!(decision.omit_managed_fields);
}

#[test]
fn resource_patterns_should_match_as_kube_matches_them() {
    assert!(resource_matches("pods", "pods", ""));
    assert!(!resource_matches("pods", "pods", "log"));
    assert!(resource_matches("pods/log", "pods", "log"));
    assert!(resource_matches("pods/*", "pods", "log"));
    assert!(resource_matches("pods/*", "pods", ""));
    assert!(resource_matches("*/status", "deployments", "status"));
    assert!(!resource_matches("*/status", "deployments", ""));
    assert!(resource_matches("*", "anything", "sub"));
    assert!(!resource_matches("pods", "secrets", ""));
}

#[test]
fn resource_names_groups_and_namespaces_should_narrow_a_rule() {
    let policy = Policy::parse(
        r#"
apiVersion: audit.k8s.io/v1
kind: Policy
rules:
  - level: Request
    namespaces: [""]
  - level: RequestResponse
    resources: [{group: apps, resources: [deployments], resourceNames: [web]}]
  - level: Metadata
    resources: [{group: batch}]
"#,
    )
    .unwrap();
    let user = User::new("u", []);
    let node = resource("", "nodes", None, None, Some("n1"));
    let web = resource("apps", "deployments", None, Some("d"), Some("web"));
    let api = resource("apps", "deployments", None, Some("d"), Some("api"));
    let job = resource("batch", "jobs", Some("status"), Some("d"), Some("j"));
    assert_eq!(
        level(&policy, Some(&user), "get", Some(&node), ""),
        Level::Request
    );
    assert_eq!(
        level(&policy, Some(&user), "get", Some(&web), ""),
        Level::RequestResponse
    );
    assert_eq!(
        level(&policy, Some(&user), "get", Some(&api), ""),
        Level::None
    );
    assert_eq!(
        level(&policy, Some(&user), "get", Some(&job), ""),
        Level::Metadata
    );
    // A resource rule never matches a non-resource request.
    assert_eq!(
        level(&policy, Some(&user), "get", None, "/apis/batch"),
        Level::None
    );
}

#[test]
fn non_resource_urls_should_match_exactly_or_by_prefix() {
    let policy = Policy::parse(
        r#"
apiVersion: audit.k8s.io/v1
kind: Policy
rules:
  - level: None
    nonResourceURLs: ["/healthz*", /version]
  - level: Metadata
"#,
    )
    .unwrap();
    let user = User::new("u", []);
    assert_eq!(
        level(&policy, Some(&user), "get", None, "/healthz/etcd"),
        Level::None
    );
    assert_eq!(
        level(&policy, Some(&user), "get", None, "/version"),
        Level::None
    );
    assert_eq!(
        level(&policy, Some(&user), "get", None, "/versions"),
        Level::Metadata
    );
    let pod = resource("", "pods", None, Some("d"), None);
    assert_eq!(
        level(&policy, Some(&user), "get", Some(&pod), "/version"),
        Level::Metadata
    );
}

#[test]
fn bad_policies_should_be_refused_with_what_is_wrong() {
    let cases = [
        ("apiVersion: audit.k8s.io/v1beta1\nkind: Policy\nrules: [{level: None}]", "audit.k8s.io/v1"),
        ("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: []", "no rules"),
        ("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{level: Loud}]", "Loud"),
        ("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{level: None, namespace: [a]}]", "namespace"),
        ("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{level: None, omitStages: [Later]}]", "Later"),
        ("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{level: None, nonResourceURLs: [/a], namespaces: [b]}]", "both"),
        ("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{level: None, nonResourceURLs: [\"/a*b\"]}]", "wildcard"),
        ("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{level: None, nonResourceURLs: [healthz]}]", "begin"),
        ("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{level: None, resources: [{resourceNames: [x]}]}]", "resourceNames"),
        ("rules: [", ""),
    ];
    for (text, expected) in cases {
        let problem = Policy::parse(text).unwrap_err();
        assert!(problem.contains(expected), "{text}: {problem}");
    }
}

#[test]
fn the_default_policy_should_skip_noise_and_record_writes_and_secrets_at_metadata() {
    let policy = Policy::parse(DEFAULT_POLICY).unwrap();
    let admin = User::new("setpoint-admin", ["system:masters".to_owned()]);
    let controller = User::new(
        "system:serviceaccount:kube-system:replicaset-controller",
        [
            "system:serviceaccounts".to_owned(),
            "system:serviceaccounts:kube-system".to_owned(),
        ],
    );
    let node = User::new("system:node:n1", ["system:nodes".to_owned()]);
    let secret = resource("", "secrets", None, Some("default"), Some("s"));
    let pods = resource("", "pods", None, Some("default"), None);
    let lease = resource(
        "coordination.k8s.io",
        "leases",
        None,
        Some("kube-node-lease"),
        Some("n1"),
    );
    let events = resource("", "events", None, Some("default"), None);
    let token = resource(
        "",
        "serviceaccounts",
        Some("token"),
        Some("default"),
        Some("sa"),
    );
    let review = resource("authentication.k8s.io", "tokenreviews", None, None, None);
    for (who, verb, r, expected) in [
        (&admin, "get", &secret, Level::Metadata),
        (&admin, "create", &secret, Level::Metadata),
        (&admin, "create", &token, Level::Metadata),
        (&admin, "create", &review, Level::Metadata),
        (&admin, "list", &pods, Level::Metadata),
        (&admin, "create", &events, Level::None),
        (&controller, "watch", &pods, Level::None),
        (&controller, "create", &pods, Level::Metadata),
        (&node, "update", &lease, Level::None),
        (&node, "get", &secret, Level::None),
        (&node, "patch", &pods, Level::Metadata),
        (&admin, "update", &lease, Level::Metadata),
    ] {
        assert_eq!(
            level(&policy, Some(who), verb, Some(r), ""),
            expected,
            "{} {verb} {r:?}",
            who.name
        );
    }
    for path in [
        "/healthz",
        "/readyz/etcd",
        "/livez",
        "/version",
        "/metrics",
        "/apis",
        "/api/v1",
        "/openapi/v2",
    ] {
        assert_eq!(
            level(&policy, Some(&admin), "get", None, path),
            Level::None,
            "{path}"
        );
    }
    assert_eq!(level(&policy, None, "get", None, "/logs"), Level::Metadata);
    let decision = policy.decide(&Facts {
        user: Some(&admin),
        verb: "create",
        resource: Some(&pods),
        path: "",
    });
    assert!(decision.omit_stages.contains(Stage::RequestReceived));
    assert!(!decision.omit_stages.contains(Stage::ResponseStarted));
    assert_eq!(Policy::default_policy().rules.len(), policy.rules.len());
}

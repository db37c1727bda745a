//! Every built-in kind: `kubectl api-resources` lists what kube-apiserver 1.33 serves by default
//! (`api-resources-1.33.txt`, less the [`NOT_YET_SERVED`] lines); `every-kind.yaml` holds one
//! object of each served kind, applied with `kubectl apply` and read back with a field as
//! written and a field the server defaulted; `kubectl get` prints kube-apiserver's columns;
//! invalid and immutable fields are refused with kube-apiserver's field paths; kubectl's
//! `create` generators (which send protobuf) work for the new kinds.

use std::collections::BTreeSet;

use serde_json::{json, Value};
use setpoint_testenv::process::Server;

const API_RESOURCES: &str = include_str!("api-resources-1.33.txt");
const EVERY_KIND: &str = include_str!("every-kind.yaml");

/// The resources of `api-resources-1.33.txt` Setpoint does not serve yet, by name and API
/// version. This list only shrinks: a kind that lands leaves it (and the test fails while it
/// is still here, so the list stays true).
const NOT_YET_SERVED: &[(&str, &str)] = &[];

/// A field of an object and its expected value: `(JSON pointer, JSON)`.
type Check = (&'static str, &'static str);

/// Each object of `every-kind.yaml` as `kubectl get` names it, with fields to check: one as
/// written and (where the kind has any) one the server defaulted.
const OBJECTS: &[(&str, &str, &[Check])] = &[
    ("namespace", "kinds", &[("/status/phase", r#""Active""#)]),
    ("configmap", "cfg", &[("/data/color", r#""blue""#)]),
    (
        "secret",
        "creds",
        &[("/data/user", r#""YWRtaW4=""#), ("/type", r#""Opaque""#)],
    ),
    (
        "serviceaccount",
        "robot",
        &[("/metadata/name", r#""robot""#)],
    ),
    (
        "service",
        "web",
        &[
            ("/spec/ports/0/port", "80"),
            ("/spec/ports/0/protocol", r#""TCP""#),
        ],
    ),
    (
        "pod",
        "solo",
        &[
            ("/spec/containers/0/image", r#""nginx:1.25""#),
            ("/spec/restartPolicy", r#""Always""#),
        ],
    ),
    (
        "podtemplate",
        "tmpl",
        &[
            ("/template/metadata/labels/app", r#""tmpl""#),
            ("/template/spec/dnsPolicy", r#""ClusterFirst""#),
        ],
    ),
    (
        "replicationcontroller",
        "old-web",
        &[
            ("/spec/replicas", "2"),
            ("/spec/selector", r#"{"app":"old-web"}"#),
        ],
    ),
    ("resourcequota", "quota", &[("/spec/hard/pods", r#""10""#)]),
    (
        "limitrange",
        "limits",
        &[("/spec/limits/0/type", r#""Container""#)],
    ),
    (
        "persistentvolume",
        "disk",
        &[
            ("/spec/capacity/storage", r#""1Gi""#),
            ("/spec/persistentVolumeReclaimPolicy", r#""Retain""#),
            ("/status/phase", r#""Pending""#),
        ],
    ),
    (
        "persistentvolumeclaim",
        "claim",
        &[
            ("/spec/resources/requests/storage", r#""1Gi""#),
            ("/spec/volumeMode", r#""Filesystem""#),
            ("/status/phase", r#""Pending""#),
        ],
    ),
    (
        "endpoints",
        "web",
        &[
            ("/subsets/0/addresses/1/ip", r#""10.1.0.2""#),
            ("/subsets/0/ports/0/protocol", r#""TCP""#),
        ],
    ),
    ("event", "note", &[("/reason", r#""Noticed""#)]),
    (
        "deployment",
        "web",
        &[
            ("/spec/template/spec/containers/0/name", r#""c""#),
            ("/spec/strategy/rollingUpdate/maxSurge", r#""25%""#),
        ],
    ),
    (
        "replicaset",
        "rs",
        &[
            ("/spec/selector/matchLabels/app", r#""rs""#),
            ("/spec/replicas", "1"),
        ],
    ),
    (
        "statefulset",
        "db",
        &[
            ("/spec/serviceName", r#""db""#),
            ("/spec/podManagementPolicy", r#""OrderedReady""#),
            ("/spec/updateStrategy/rollingUpdate/partition", "0"),
            (
                "/spec/persistentVolumeClaimRetentionPolicy/whenScaled",
                r#""Retain""#,
            ),
        ],
    ),
    (
        "daemonset",
        "agent",
        &[
            ("/spec/template/spec/nodeSelector/disk", r#""ssd""#),
            ("/spec/updateStrategy/rollingUpdate/maxUnavailable", "1"),
        ],
    ),
    ("controllerrevision", "db-1", &[("/revision", "1")]),
    (
        "job",
        "pi",
        &[
            ("/spec/template/spec/restartPolicy", r#""Never""#),
            ("/spec/backoffLimit", "6"),
            ("/spec/completionMode", r#""NonIndexed""#),
            ("/spec/podReplacementPolicy", r#""TerminatingOrFailed""#),
        ],
    ),
    (
        "cronjob",
        "nightly",
        &[
            ("/spec/schedule", r#""0 3 * * *""#),
            ("/spec/concurrencyPolicy", r#""Allow""#),
            ("/spec/successfulJobsHistoryLimit", "3"),
            ("/spec/failedJobsHistoryLimit", "1"),
        ],
    ),
    (
        "horizontalpodautoscaler",
        "web",
        &[("/spec/maxReplicas", "5"), ("/spec/minReplicas", "1")],
    ),
    ("poddisruptionbudget", "web", &[("/spec/minAvailable", "1")]),
    ("lease", "lock", &[("/spec/holderIdentity", r#""me""#)]),
    (
        "endpointslice",
        "web-abc",
        &[
            ("/endpoints/0/addresses/0", r#""10.1.0.1""#),
            ("/ports/0/protocol", r#""TCP""#),
        ],
    ),
    (
        "ingressclass",
        "nginx",
        &[("/spec/controller", r#""example.com/ingress-nginx""#)],
    ),
    (
        "ingress",
        "web",
        &[("/spec/rules/0/host", r#""web.example.com""#)],
    ),
    (
        "servicecidr",
        "extra-services",
        &[("/spec/cidrs/1", r#""fd00:10:200::/112""#)],
    ),
    (
        "ipaddress",
        "10.200.0.10",
        &[("/spec/parentRef/name", r#""web""#)],
    ),
    (
        "networkpolicy",
        "deny",
        &[
            ("/spec/podSelector/matchLabels/app", r#""web""#),
            ("/spec/policyTypes", r#"["Ingress"]"#),
            ("/spec/ingress/0/ports/0/protocol", r#""TCP""#),
        ],
    ),
    (
        "priorityclass",
        "high",
        &[
            ("/value", "1000000"),
            ("/preemptionPolicy", r#""PreemptLowerPriority""#),
        ],
    ),
    (
        "storageclass",
        "fast",
        &[
            ("/provisioner", r#""disk.example.com""#),
            ("/reclaimPolicy", r#""Delete""#),
            ("/volumeBindingMode", r#""Immediate""#),
        ],
    ),
    (
        "csidriver",
        "disk.example.com",
        &[
            ("/spec/podInfoOnMount", "true"),
            ("/spec/attachRequired", "true"),
            ("/spec/volumeLifecycleModes", r#"["Persistent"]"#),
        ],
    ),
    (
        "csinode",
        "node-1",
        &[("/spec/drivers/0/nodeID", r#""node-1""#)],
    ),
    (
        "csistoragecapacity",
        "fast-zone-a",
        &[("/capacity", r#""100Gi""#)],
    ),
    (
        "volumeattachment",
        "disk-on-node-1",
        &[
            ("/spec/nodeName", r#""node-1""#),
            ("/status/attached", "false"),
        ],
    ),
    ("runtimeclass", "sandboxed", &[("/handler", r#""runsc""#)]),
    (
        "role",
        "pod-reader",
        &[("/rules/0/verbs", r#"["get","list","watch"]"#)],
    ),
    (
        "clusterrole",
        "example:health",
        &[("/rules/0/nonResourceURLs", r#"["/healthz"]"#)],
    ),
    (
        "rolebinding",
        "read-pods",
        &[
            ("/subjects/1/namespace", r#""kinds""#),
            ("/roleRef/apiGroup", r#""rbac.authorization.k8s.io""#),
            ("/subjects/0/apiGroup", r#""rbac.authorization.k8s.io""#),
        ],
    ),
    (
        "clusterrolebinding",
        "health-for-all",
        &[
            ("/subjects/0/name", r#""system:authenticated""#),
            ("/subjects/0/apiGroup", r#""rbac.authorization.k8s.io""#),
        ],
    ),
    (
        "prioritylevelconfiguration",
        "batch-jobs",
        &[
            ("/spec/limited/limitResponse/queuing/queues", "16"),
            ("/spec/limited/nominalConcurrencyShares", "30"),
            ("/spec/limited/limitResponse/queuing/handSize", "8"),
        ],
    ),
    (
        "flowschema",
        "batch-users",
        &[
            ("/spec/distinguisherMethod/type", r#""ByUser""#),
            ("/spec/matchingPrecedence", "1000"),
        ],
    ),
    (
        "certificatesigningrequest",
        "alice",
        &[("/spec/expirationSeconds", "86400")],
    ),
    (
        "apiservice",
        "v1beta1.metrics.example.com",
        &[("/spec/service/port", "443")],
    ),
];

/// The rows of a `kubectl api-resources` listing as `(name, shortnames, apiVersion,
/// namespaced, kind)`, cut at the header's column offsets (the widths depend on the rows).
fn rows(listing: &str) -> BTreeSet<[String; 5]> {
    let mut lines = listing.lines();
    let header = lines.next().expect("a header line");
    let starts: Vec<usize> = ["NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND"]
        .iter()
        .map(|h| {
            header
                .find(h)
                .unwrap_or_else(|| panic!("no {h} in {header}"))
        })
        .collect();
    lines
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            std::array::from_fn(|i| {
                let end = starts
                    .get(i + 1)
                    .copied()
                    .unwrap_or(line.len())
                    .min(line.len());
                line.get(starts[i]..end)
                    .unwrap_or_default()
                    .trim()
                    .to_owned()
            })
        })
        .collect()
}

#[test]
fn api_resources_should_list_what_kube_apiserver_1_33_serves() {
    let s = Server::start_api_only();
    let served = rows(&s.ok(&["api-resources"]));
    let expected = rows(API_RESOURCES);
    assert_eq!(expected.len(), 60, "the file's rows");
    let mut missing = Vec::new();
    let mut listed_but_served = Vec::new();
    for row in &expected {
        let waived = NOT_YET_SERVED.contains(&(row[0].as_str(), row[2].as_str()));
        match (served.contains(row), waived) {
            (false, false) => missing.push(row.join(" ")),
            (true, true) => listed_but_served.push(row.join(" ")),
            _ => {}
        }
    }
    assert!(
        missing.is_empty(),
        "served differently or not at all:\n{}\nserved:\n{served:#?}",
        missing.join("\n")
    );
    assert!(
        listed_but_served.is_empty(),
        "served now; take them off NOT_YET_SERVED:\n{}",
        listed_but_served.join("\n")
    );
}

fn get_json(s: &Server, kind: &str, name: &str) -> Value {
    let out = s.ok(&["get", kind, name, "-n", "kinds", "-o", "json"]);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{kind}/{name}: {e}: {out}"))
}

#[test]
fn every_kind_should_apply_and_read_back_with_its_defaults() {
    let s = Server::start_api_only();
    let out = s.kubectl_stdin(&["apply", "-f", "-"], EVERY_KIND);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let applied = String::from_utf8_lossy(&out.stdout).lines().count();
    assert_eq!(
        applied,
        EVERY_KIND.matches("\nkind: ").count(),
        "one line per object"
    );
    for (kind, name, checks) in OBJECTS {
        let object = get_json(&s, kind, name);
        for (pointer, want) in *checks {
            let want: Value = serde_json::from_str(want).expect("expected values are JSON");
            assert_eq!(
                object.pointer(pointer),
                Some(&want),
                "{kind}/{name} {pointer}: {object:#}"
            );
        }
    }
    // Categories: `all` holds the workloads, `api-extensions` the API registrations.
    let all = s.ok(&["get", "all", "-n", "kinds", "-o", "name"]);
    for object in [
        "statefulset.apps/db",
        "daemonset.apps/agent",
        "job.batch/pi",
        "cronjob.batch/nightly",
        "replicationcontroller/old-web",
    ] {
        assert!(all.lines().any(|l| l == object), "{object} not in:\n{all}");
    }
    let extensions = s.ok(&["get", "api-extensions", "-o", "name"]);
    assert!(
        extensions
            .lines()
            .any(|l| l == "apiservice.apiregistration.k8s.io/v1beta1.metrics.example.com"),
        "{extensions}"
    );
    // Applying the same manifest again succeeds (a list without a merge key whose items got
    // defaults, such as a StatefulSet's claim templates, is sent again, as kubectl does against
    // kube-apiserver) and leaves the others as they are.
    let out = s.kubectl_stdin(&["apply", "-f", "-"], EVERY_KIND);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let again = String::from_utf8_lossy(&out.stdout);
    for object in [
        "deployment.apps/web",
        "job.batch/pi",
        "priorityclass.scheduling.k8s.io/high",
    ] {
        assert!(again.contains(&format!("{object} unchanged")), "{again}");
    }
}

/// `kubectl get <kind>` header and first row, split on runs of spaces.
fn table(s: &Server, args: &[&str]) -> (String, String) {
    let mut all = vec!["get"];
    all.extend_from_slice(args);
    let out = s.ok(&all);
    let mut lines = out
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "));
    (
        lines.next().unwrap_or_default(),
        lines.next().unwrap_or_default(),
    )
}

#[test]
fn tables_should_print_kube_apiserver_columns() {
    let s = Server::start_api_only();
    let out = s.kubectl_stdin(&["apply", "-f", "-"], EVERY_KIND);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ns = ["-n", "kinds"];
    for (kind, header, row_start) in [
        ("statefulset", "NAME READY AGE", "db 0/1 "),
        ("daemonset", "NAME DESIRED CURRENT READY UP-TO-DATE AVAILABLE NODE SELECTOR AGE", "agent 0 0 0 0 0 disk=ssd "),
        ("job", "NAME STATUS COMPLETIONS DURATION AGE", "pi Running 0/1 "),
        ("cronjob", "NAME SCHEDULE TIMEZONE SUSPEND ACTIVE LAST SCHEDULE AGE", "nightly 0 3 * * * <none> False 0 <none> "),
        ("replicationcontroller", "NAME DESIRED CURRENT READY AGE", "old-web 2 0 0 "),
        ("podtemplate", "NAME CONTAINERS IMAGES POD LABELS", "tmpl c nginx:1.25 app=tmpl"),
        ("persistentvolume", "NAME CAPACITY ACCESS MODES RECLAIM POLICY STATUS CLAIM STORAGECLASS VOLUMEATTRIBUTESCLASS REASON AGE", "disk 1Gi RWO Retain Pending <unset> "),
        ("persistentvolumeclaim", "NAME STATUS VOLUME CAPACITY ACCESS MODES STORAGECLASS VOLUMEATTRIBUTESCLASS AGE", "claim Pending <unset> "),
        ("endpoints", "NAME ENDPOINTS AGE", "web 10.1.0.1:8080,10.1.0.2:8080 "),
        ("endpointslice", "NAME ADDRESSTYPE PORTS ENDPOINTS AGE", "web-abc IPv4 8080 10.1.0.1 "),
        ("ingress", "NAME CLASS HOSTS ADDRESS PORTS AGE", "web nginx web.example.com 80 "),
        ("ingressclass", "NAME CONTROLLER PARAMETERS AGE", "nginx example.com/ingress-nginx <none> "),
        ("networkpolicy", "NAME POD-SELECTOR AGE", "deny app=web "),
        ("resourcequota", "NAME AGE REQUEST LIMIT", "quota "),
        ("flowschema", "NAME PRIORITYLEVEL MATCHINGPRECEDENCE DISTINGUISHERMETHOD AGE MISSINGPL", "batch-users batch-jobs 1000 ByUser "),
        ("prioritylevelconfiguration", "NAME TYPE NOMINALCONCURRENCYSHARES QUEUES HANDSIZE QUEUELENGTHLIMIT AGE", "batch-jobs Limited 30 16 8 50 "),
        ("certificatesigningrequest", "NAME AGE SIGNERNAME REQUESTOR REQUESTEDDURATION CONDITION", "alice "),
        // Named: the local APIServices list first. Its availability is checked at once (the
        // Service is missing: `False (ServiceNotFound)`).
        ("apiservice/v1beta1.metrics.example.com", "NAME SERVICE AVAILABLE AGE", "v1beta1.metrics.example.com kinds/metrics "),
        ("storageclass", "NAME PROVISIONER RECLAIMPOLICY VOLUMEBINDINGMODE ALLOWVOLUMEEXPANSION AGE", "fast (default) disk.example.com Delete Immediate false "),
        ("csidriver", "NAME ATTACHREQUIRED PODINFOONMOUNT STORAGECAPACITY TOKENREQUESTS REQUIRESREPUBLISH MODES AGE", "disk.example.com true true false <unset> false Persistent "),
        ("csinode", "NAME DRIVERS AGE", "node-1 1 "),
        ("csistoragecapacity", "NAME STORAGECLASSNAME CAPACITY AGE", "fast-zone-a fast 100Gi "),
        ("volumeattachment", "NAME ATTACHER PV NODE ATTACHED AGE", "disk-on-node-1 disk.example.com disk node-1 false "),
        ("runtimeclass", "NAME HANDLER AGE", "sandboxed runsc "),
        ("role", "NAME CREATED AT", "pod-reader 20"),
        ("rolebinding", "NAME ROLE AGE", "read-pods Role/pod-reader "),
        // Named: the default policy's bindings list too.
        ("clusterrolebinding/health-for-all", "NAME ROLE AGE", "health-for-all ClusterRole/example:health "),
    ] {
        let mut args = vec![kind];
        args.extend_from_slice(&ns);
        let (h, r) = table(&s, &args);
        assert_eq!(h, header, "{kind}");
        assert!(r.starts_with(row_start), "{kind}: {r:?} does not start with {row_start:?}");
    }
    // The built-in priority classes exist from the start, before the one applied.
    let out = s.ok(&["get", "priorityclasses"]);
    let lines: Vec<String> = out
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    assert_eq!(lines[0], "NAME VALUE GLOBAL-DEFAULT AGE PREEMPTIONPOLICY");
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("high 1000000 false ") && l.ends_with(" PreemptLowerPriority")),
        "{out}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("system-cluster-critical 2000000000 false ")),
        "{out}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("system-node-critical 2000001000 false ")),
        "{out}"
    );
}

#[test]
fn invalid_and_immutable_fields_should_be_refused_with_kube_field_paths() {
    let s = Server::start_api_only();
    s.ok(&["create", "namespace", "kinds"]);
    let always = "apiVersion: batch/v1\nkind: Job\nmetadata: {name: bad, namespace: kinds}\nspec:\n  template:\n    spec:\n      containers: [{name: c, image: busybox}]\n";
    let out = s.kubectl_stdin(&["create", "-f", "-"], always);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains(r#"The Job "bad" is invalid: spec.template.spec.restartPolicy: Unsupported value: "Always""#),
        "{err}"
    );

    let out = s.kubectl_stdin(&["apply", "-f", "-"], EVERY_KIND);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let err = s.fails(&[
        "patch",
        "statefulset",
        "db",
        "-n",
        "kinds",
        "--type=merge",
        "-p",
        r#"{"spec":{"serviceName":"other"}}"#,
    ]);
    assert!(
        err.contains("spec: Forbidden: updates to statefulset spec for fields other than"),
        "{err}"
    );
    let err = s.fails(&[
        "patch",
        "priorityclass",
        "high",
        "--type=merge",
        "-p",
        r#"{"value":7}"#,
    ]);
    assert!(
        err.contains("value: Forbidden: may not be changed in an update"),
        "{err}"
    );
    let err = s.fails(&[
        "patch",
        "ingressclass",
        "nginx",
        "--type=merge",
        "-p",
        r#"{"spec":{"controller":"x/y"}}"#,
    ]);
    assert!(
        err.contains("spec.controller: Invalid value: \"x/y\": field is immutable"),
        "{err}"
    );
    let err = s.fails(&[
        "patch",
        "pvc",
        "claim",
        "-n",
        "kinds",
        "--type=merge",
        "-p",
        r#"{"spec":{"accessModes":["ReadWriteMany"]}}"#,
    ]);
    assert!(
        err.contains("spec: Forbidden: spec is immutable after creation"),
        "{err}"
    );
    let err = s.fails(&[
        "patch",
        "rolebinding",
        "read-pods",
        "-n",
        "kinds",
        "--type=merge",
        "-p",
        r#"{"roleRef":{"name":"other"}}"#,
    ]);
    assert!(
        err.contains("roleRef: Invalid value: ") && err.contains("cannot change roleRef"),
        "{err}"
    );
    let err = s.fails(&[
        "patch",
        "storageclass",
        "fast",
        "--type=merge",
        "-p",
        r#"{"provisioner":"x.example.com"}"#,
    ]);
    assert!(
        err.contains("provisioner: Forbidden: updates to provisioner are forbidden."),
        "{err}"
    );
    let err = s.fails(&["create", "priorityclass", "system-mine", "--value=5"]);
    assert!(
        err.contains(
            "metadata.name: Forbidden: priority class names with 'system-' prefix are reserved"
        ),
        "{err}"
    );
}

#[test]
fn scale_should_work_on_statefulsets_and_replication_controllers() {
    let s = Server::start_api_only();
    let out = s.kubectl_stdin(&["apply", "-f", "-"], EVERY_KIND);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for (kind, name) in [("statefulset", "db"), ("replicationcontroller", "old-web")] {
        s.ok(&["scale", kind, name, "-n", "kinds", "--replicas=4"]);
        let object = get_json(&s, kind, name);
        assert_eq!(object["spec"]["replicas"], json!(4), "{kind}");
    }
}

#[test]
fn create_generators_should_make_the_new_kinds() {
    let s = Server::start_api_only();
    s.ok(&["create", "namespace", "kinds"]);
    let ns = ["-n", "kinds"];
    // The namespace goes first: a job's command follows `--`.
    let run = |args: &[&str]| {
        let mut all = ns.to_vec();
        all.extend_from_slice(args);
        s.ok(&all)
    };
    run(&[
        "create",
        "job",
        "once",
        "--image=busybox:1.36",
        "--",
        "true",
    ]);
    let job = get_json(&s, "job", "once");
    assert_eq!(job["spec"]["template"]["spec"]["restartPolicy"], "Never");
    let uid = job["metadata"]["uid"].as_str().expect("a uid");
    assert_eq!(
        job["spec"]["selector"]["matchLabels"]["batch.kubernetes.io/controller-uid"],
        uid
    );
    assert_eq!(
        job["spec"]["template"]["metadata"]["labels"]["job-name"],
        "once"
    );

    run(&[
        "create",
        "cronjob",
        "tick",
        "--image=busybox:1.36",
        "--schedule=*/5 * * * *",
    ]);
    assert_eq!(get_json(&s, "cronjob", "tick")["spec"]["suspend"], false);
    run(&["create", "job", "from-cron", "--from=cronjob/tick"]);
    assert_eq!(
        get_json(&s, "job", "from-cron")["metadata"]["ownerReferences"][0]["name"],
        "tick"
    );

    run(&[
        "create",
        "role",
        "reader",
        "--verb=get,list",
        "--resource=pods,deployments.apps",
    ]);
    let role = get_json(&s, "role", "reader");
    assert_eq!(role["rules"][1]["apiGroups"], json!(["apps"]));
    run(&[
        "create",
        "rolebinding",
        "readers",
        "--role=reader",
        "--user=alice",
        "--serviceaccount=kinds:robot",
    ]);
    let binding = get_json(&s, "rolebinding", "readers");
    assert_eq!(binding["roleRef"]["kind"], "Role");
    assert_eq!(binding["subjects"][1]["kind"], "ServiceAccount");
    s.ok(&[
        "create",
        "clusterrole",
        "watcher",
        "--verb=watch",
        "--resource=nodes",
    ]);
    s.ok(&[
        "create",
        "clusterrolebinding",
        "watchers",
        "--clusterrole=watcher",
        "--group=ops",
    ]);
    assert_eq!(
        get_json(&s, "clusterrolebinding", "watchers")["subjects"][0]["apiGroup"],
        "rbac.authorization.k8s.io"
    );

    run(&["create", "quota", "q", "--hard=pods=3,services=2"]);
    assert_eq!(
        get_json(&s, "resourcequota", "q")["spec"]["hard"]["pods"],
        "3"
    );
    run(&[
        "create",
        "ingress",
        "site",
        "--class=nginx",
        "--rule=site.example.com/=web:80",
    ]);
    assert_eq!(
        get_json(&s, "ingress", "site")["spec"]["rules"][0]["http"]["paths"][0]["pathType"],
        "Exact"
    );
    s.ok(&[
        "create",
        "priorityclass",
        "batch",
        "--value=1000",
        "--preemption-policy=Never",
    ]);
    assert_eq!(
        get_json(&s, "priorityclass", "batch")["preemptionPolicy"],
        "Never"
    );
}

#[test]
fn certificate_approval_should_write_the_approved_condition() {
    let s = Server::start_api_only();
    let out = s.kubectl_stdin(&["apply", "-f", "-"], EVERY_KIND);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    s.ok(&["certificate", "approve", "alice"]);
    let csr = get_json(&s, "csr", "alice");
    assert_eq!(csr["status"]["conditions"][0]["type"], "Approved");
    assert_eq!(csr["status"]["conditions"][0]["status"], "True");
    let (_, row) = table(&s, &["csr", "alice"]);
    assert!(
        // The requester is recorded from who created it (the admin), as kube-apiserver does.
        row.ends_with(" kubernetes.io/kube-apiserver-client setpoint-admin 24h Approved"),
        "{row}"
    );
    // kubectl refuses to deny an approved request itself; the server does too (through
    // `approval`: through `status` the approval conditions are kept as they were, as in kube).
    let deny =
        r#"[{"op":"add","path":"/status/conditions/-","value":{"type":"Denied","status":"True"}}]"#;
    let err = s.fails(&[
        "patch",
        "csr",
        "alice",
        "--subresource=approval",
        "--type=json",
        "-p",
        deny,
    ]);
    assert!(
        err.contains("Approved and Denied conditions are mutually exclusive"),
        "{err}"
    );
}

#[test]
fn reviews_should_answer_for_the_caller_from_setpoints_own_rules() {
    let s = Server::start_api_only();
    let who: Value = serde_json::from_str(&s.ok(&["auth", "whoami", "-o", "json"])).expect("JSON");
    assert_eq!(who["kind"], "SelfSubjectReview");
    let groups = &who["status"]["userInfo"]["groups"];
    assert!(
        groups
            .as_array()
            .is_some_and(|g| g.contains(&json!("system:authenticated"))),
        "{who}"
    );
    assert!(
        who["status"]["userInfo"]["username"]
            .as_str()
            .is_some_and(|u| !u.is_empty()),
        "{who}"
    );

    assert_eq!(
        s.ok(&["auth", "can-i", "create", "deployments.apps"])
            .trim(),
        "yes"
    );
    assert_eq!(s.ok(&["auth", "can-i", "get", "/healthz"]).trim(), "yes");
    let rules = s.ok(&["auth", "can-i", "--list"]);
    assert!(
        rules
            .lines()
            .any(|l| l.split_whitespace().next() == Some("*.*")),
        "{rules}"
    );

    let review = |body: &str| -> Value {
        let out = s.kubectl_stdin(&["create", "-f", "-", "-o", "json"], body);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("JSON")
    };
    let anonymous = review("apiVersion: authorization.k8s.io/v1\nkind: SubjectAccessReview\nspec:\n  user: system:anonymous\n  resourceAttributes: {verb: get, resource: pods}\n");
    assert_eq!(anonymous["status"]["allowed"], false);
    // RBAC answers: bob has no binding; bob in system:masters may do anything.
    let local = review("apiVersion: authorization.k8s.io/v1\nkind: LocalSubjectAccessReview\nmetadata: {namespace: default}\nspec:\n  user: bob\n  resourceAttributes: {namespace: default, verb: list, resource: secrets}\n");
    assert_eq!(local["status"]["allowed"], false, "{local}");
    assert_eq!(local["metadata"]["namespace"], "default");
    let master = review("apiVersion: authorization.k8s.io/v1\nkind: LocalSubjectAccessReview\nmetadata: {namespace: default}\nspec:\n  user: bob\n  groups: [system:masters]\n  resourceAttributes: {namespace: default, verb: list, resource: secrets}\n");
    assert_eq!(master["status"]["allowed"], true, "{master}");
    // Nothing is stored: a review has no name to read back, and no list.
    let err = s.fails(&["get", "subjectaccessreviews"]);
    assert!(
        err.contains("MethodNotAllowed") || err.contains("the server does not allow this method"),
        "{err}"
    );
    let out = s.kubectl_stdin(
        &["create", "-f", "-"],
        "apiVersion: authorization.k8s.io/v1\nkind: SelfSubjectAccessReview\nspec: {}\n",
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success()
            && err.contains("spec.resourceAttributes: Invalid value: null: exactly one of nonResourceAttributes or resourceAttributes must be specified"),
        "{err}"
    );
}

#[test]
fn a_binding_posted_to_bindings_should_assign_its_pod() {
    let s = Server::start_api_only();
    s.ok(&["create", "namespace", "kinds"]);
    s.ok(&["run", "solo", "-n", "kinds", "--image=nginx:1.25"]);
    let binding = "apiVersion: v1\nkind: Binding\nmetadata: {name: solo}\ntarget: {kind: Node, name: node-1}\n";
    let out = s.kubectl_stdin(&["create", "-n", "kinds", "-f", "-"], binding);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pod = get_json(&s, "pod", "solo");
    assert_eq!(pod["spec"]["nodeName"], "node-1");
    // Once bound, a pod stays where it is.
    let out = s.kubectl_stdin(
        &["create", "-n", "kinds", "-f", "-"],
        &binding.replace("node-1", "node-2"),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("is already assigned to node"),
        "{err}"
    );
}

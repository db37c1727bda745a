//! Protobuf bodies built by hand, field by field as client-go's generated marshalling writes
//! them (every non-pointer scalar present, even when empty), decoded and compared with the
//! JSON kubectl would have sent.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use setpoint_core::ApiError;

use super::decode::decode_message;
use super::schema::{field, kept, list, map, Kind, Message};
use super::{decode, ProtobufError};
use crate::protobuf::wire::WireError;

/// A tiny protobuf encoder: a message under construction.
#[derive(Clone, Default)]
struct Enc(Vec<u8>);

impl Enc {
    fn new() -> Self {
        Enc::default()
    }

    fn key(&mut self, number: u32, wire_type: u8) {
        put_varint(&mut self.0, (u64::from(number) << 3) | u64::from(wire_type));
    }

    /// A varint field (int32, int64, bool); negative numbers are sign-extended to 10 bytes.
    fn int(mut self, number: u32, v: i64) -> Self {
        self.key(number, 0);
        put_varint(&mut self.0, v as u64);
        self
    }

    fn bytes(mut self, number: u32, b: &[u8]) -> Self {
        self.key(number, 2);
        put_varint(&mut self.0, b.len() as u64);
        self.0.extend_from_slice(b);
        self
    }

    fn str(self, number: u32, s: &str) -> Self {
        self.bytes(number, s.as_bytes())
    }

    fn msg(self, number: u32, m: Enc) -> Self {
        self.bytes(number, &m.0)
    }

    /// A `map<string, string>` entry.
    fn entry(self, number: u32, k: &str, v: &str) -> Self {
        self.msg(number, Enc::new().str(1, k).str(2, v))
    }

    /// A `map<string, bytes>` entry.
    fn bytes_entry(self, number: u32, k: &str, v: &[u8]) -> Self {
        self.msg(number, Enc::new().str(1, k).bytes(2, v))
    }
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// The whole body: magic, then `runtime.Unknown` around `raw`.
fn body(api_version: &str, kind: &str, raw: Enc) -> Vec<u8> {
    let unknown = Enc::new()
        .msg(1, Enc::new().str(1, api_version).str(2, kind))
        .msg(2, raw)
        .str(3, "")
        .str(4, "");
    let mut out = b"k8s\0".to_vec();
    out.extend(unknown.0);
    out
}

/// `ObjectMeta` as Go writes it for a new object: every string, `generation` and an empty
/// `creationTimestamp`, then the maps.
fn object_meta(name: &str, labels: &[(&str, &str)]) -> Enc {
    let mut m = Enc::new()
        .str(1, name)
        .str(2, "")
        .str(3, "")
        .str(4, "")
        .str(5, "")
        .str(6, "")
        .int(7, 0)
        .msg(8, Enc::new());
    for (k, v) in labels {
        m = m.entry(11, k, v);
    }
    m
}

/// A container as `kubectl create deployment`/`run` build it.
fn container(name: &str, image: &str) -> Enc {
    Enc::new()
        .str(1, name)
        .str(2, image)
        .str(5, "")
        .msg(8, Enc::new())
        .str(13, "")
        .str(14, "")
        .int(16, 0)
        .int(17, 0)
        .int(18, 0)
        .str(20, "")
}

fn decoded(b: &[u8]) -> Value {
    match decode(b) {
        Ok(v) => v,
        Err(e) => panic!("decode failed: {e}"),
    }
}

fn decode_err(b: &[u8]) -> ProtobufError {
    match decode(b) {
        Ok(v) => panic!("decode succeeded: {v}"),
        Err(e) => e,
    }
}

#[test]
fn namespace_should_decode_to_name_with_empty_spec_and_status() {
    let raw = Enc::new()
        .msg(1, object_meta("team-a", &[]))
        .msg(2, Enc::new())
        .msg(3, Enc::new().str(1, ""));
    assert_eq!(
        decoded(&body("v1", "Namespace", raw)),
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"},
               "spec": {}, "status": {}})
    );
}

#[test]
fn configmap_should_keep_empty_values_and_base64_binary_data() {
    let raw = Enc::new()
        .msg(1, object_meta("cfg", &[]))
        .entry(2, "a", "1")
        .entry(2, "empty", "")
        .entry(2, "file.txt", "line 1\nline 2\n")
        .bytes_entry(3, "bin", &[0, 1, 2, 255]);
    assert_eq!(
        decoded(&body("v1", "ConfigMap", raw)),
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"},
               "data": {"a": "1", "empty": "", "file.txt": "line 1\nline 2\n"},
               "binaryData": {"bin": "AAEC/w=="}})
    );
}

#[test]
fn secret_should_base64_its_data_and_keep_its_type() {
    let raw = Enc::new()
        .msg(1, object_meta("tls", &[]))
        .bytes_entry(2, "tls.crt", b"CERT")
        .bytes_entry(2, "tls.key", b"KEY")
        .str(3, "kubernetes.io/tls");
    assert_eq!(
        decoded(&body("v1", "Secret", raw)),
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "tls"},
               "data": {"tls.crt": "Q0VSVA==", "tls.key": "S0VZ"},
               "type": "kubernetes.io/tls"})
    );
}

#[test]
fn secret_should_keep_an_explicit_false_immutable() {
    let raw = Enc::new()
        .msg(1, object_meta("s", &[]))
        .str(3, "")
        .int(5, 0);
    assert_eq!(
        decoded(&body("v1", "Secret", raw)),
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
               "immutable": false})
    );
}

#[test]
fn serviceaccount_should_decode_references() {
    let raw = Enc::new()
        .msg(1, object_meta("robot", &[]))
        .msg(2, Enc::new().str(1, "Secret").str(2, "").str(3, "tok"))
        .msg(3, Enc::new().str(1, "regcred"))
        .int(4, 1);
    assert_eq!(
        decoded(&body("v1", "ServiceAccount", raw)),
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "robot"},
               "secrets": [{"kind": "Secret", "name": "tok"}],
               "imagePullSecrets": [{"name": "regcred"}],
               "automountServiceAccountToken": true})
    );
}

#[test]
fn deployment_should_decode_replicas_selector_template_and_empty_strategy() {
    let template = Enc::new().msg(1, object_meta("", &[("app", "web")])).msg(
        2,
        Enc::new()
            .msg(
                2,
                container("nginx", "nginx:1.27").msg(
                    6,
                    Enc::new()
                        .str(1, "")
                        .int(2, 0)
                        .int(3, 80)
                        .str(4, "")
                        .str(5, ""),
                ),
            )
            .str(3, "")
            .str(6, "")
            .str(8, ""),
    );
    let raw = Enc::new()
        .msg(1, object_meta("web", &[("app", "web")]))
        .msg(
            2,
            Enc::new()
                .int(1, 3)
                .msg(2, Enc::new().entry(1, "app", "web"))
                .msg(3, template)
                .msg(4, Enc::new().str(1, ""))
                .int(5, 0)
                .int(7, 0),
        )
        .msg(
            3,
            Enc::new()
                .int(1, 0)
                .int(2, 0)
                .int(3, 0)
                .int(4, 0)
                .int(5, 0)
                .int(7, 0),
        );
    assert_eq!(
        decoded(&body("apps/v1", "Deployment", raw)),
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {
                "replicas": 3,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{
                        "name": "nginx", "image": "nginx:1.27", "resources": {},
                        "ports": [{"containerPort": 80}]
                    }]}
                },
                "strategy": {}
            },
            "status": {}
        })
    );
}

#[test]
fn deployment_should_keep_zero_replicas_and_decode_int_or_string_surge() {
    let raw = Enc::new().msg(
        2,
        Enc::new().int(1, 0).msg(
            4,
            Enc::new().str(1, "RollingUpdate").msg(
                2,
                Enc::new()
                    .msg(1, Enc::new().int(1, 1).int(2, 0).str(3, "25%"))
                    .msg(2, Enc::new().int(1, 0).int(2, 2).str(3, "")),
            ),
        ),
    );
    assert_eq!(
        decoded(&body("apps/v1", "Deployment", raw))["spec"],
        json!({"replicas": 0, "strategy": {"type": "RollingUpdate",
               "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": 2}}})
    );
}

#[test]
fn service_should_decode_ports_with_target_port_and_selector() {
    let port = Enc::new()
        .str(1, "80-8080")
        .str(2, "TCP")
        .int(3, 80)
        .msg(4, Enc::new().int(1, 0).int(2, 8080).str(3, ""))
        .int(5, 0);
    let raw = Enc::new()
        .msg(1, object_meta("web", &[("app", "web")]))
        .msg(
            2,
            Enc::new()
                .msg(1, port)
                .entry(2, "app", "web")
                .str(3, "")
                .str(4, "ClusterIP")
                .str(7, "")
                .int(12, 0)
                .int(13, 0),
        )
        .msg(3, Enc::new().msg(1, Enc::new()));
    assert_eq!(
        decoded(&body("v1", "Service", raw)),
        json!({"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": "web", "labels": {"app": "web"}},
               "spec": {"ports": [{"name": "80-8080", "protocol": "TCP", "port": 80,
                                   "targetPort": 8080}],
                        "selector": {"app": "web"}, "type": "ClusterIP"},
               "status": {"loadBalancer": {}}})
    );
}

#[test]
fn pod_should_decode_a_kubectl_run_pod() {
    let c = container("box", "busybox")
        .str(4, "sleep")
        .str(4, "3600")
        .msg(7, Enc::new().str(1, "MODE").str(2, "test"))
        .msg(
            9,
            Enc::new()
                .str(1, "data")
                .int(2, 1)
                .str(3, "/data")
                .str(4, "")
                .str(6, ""),
        )
        .msg(15, Enc::new().int(2, 1))
        .int(16, 1)
        .int(18, 1);
    let raw = Enc::new()
        .msg(1, object_meta("box", &[("run", "box")]))
        .msg(
            2,
            Enc::new()
                .msg(2, c)
                .str(3, "Never")
                .str(6, "ClusterFirst")
                .str(8, "")
                .int(11, 0)
                .str(16, ""),
        )
        .msg(
            3,
            Enc::new()
                .str(1, "")
                .str(3, "")
                .str(4, "")
                .msg(7, Enc::new()),
        );
    assert_eq!(
        decoded(&body("v1", "Pod", raw)),
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "box", "labels": {"run": "box"}},
               "spec": {"containers": [{
                   "name": "box", "image": "busybox", "args": ["sleep", "3600"],
                   "env": [{"name": "MODE", "value": "test"}],
                   "volumeMounts": [{"name": "data", "readOnly": true, "mountPath": "/data"}],
                   "securityContext": {"privileged": true},
                   "resources": {}, "stdin": true, "tty": true
               }], "restartPolicy": "Never", "dnsPolicy": "ClusterFirst"},
               "status": {}})
    );
}

#[test]
fn time_should_be_rfc3339_in_utc_and_zero_time_should_be_left_out() {
    let meta = Enc::new()
        .str(1, "n")
        .msg(8, Enc::new().int(1, 1_700_000_000).int(2, 500))
        .msg(9, Enc::new().int(1, -62_135_596_800).int(2, 0));
    let v = decoded(&body("v1", "Namespace", Enc::new().msg(1, meta)));
    assert_eq!(
        v["metadata"],
        json!({"name": "n", "creationTimestamp": "2023-11-14T22:13:20Z"})
    );
}

#[test]
fn quantities_should_decode_as_strings() {
    let resources = Enc::new()
        .msg(
            1,
            Enc::new().str(1, "cpu").msg(2, Enc::new().str(1, "500m")),
        )
        .msg(
            2,
            Enc::new()
                .str(1, "memory")
                .msg(2, Enc::new().str(1, "64Mi")),
        );
    let raw = Enc::new().msg(
        2,
        Enc::new().msg(2, Enc::new().str(1, "c").msg(8, resources)),
    );
    assert_eq!(
        decoded(&body("v1", "Pod", raw))["spec"]["containers"][0]["resources"],
        json!({"limits": {"cpu": "500m"}, "requests": {"memory": "64Mi"}})
    );
}

#[test]
fn a_repeated_message_field_should_merge_and_a_repeated_scalar_should_replace() {
    let raw = Enc::new()
        .msg(1, Enc::new().str(1, "first").entry(11, "a", "1"))
        .msg(1, Enc::new().str(1, "second").entry(11, "b", "2"));
    assert_eq!(
        decoded(&body("v1", "ConfigMap", raw))["metadata"],
        json!({"name": "second", "labels": {"a": "1", "b": "2"}})
    );
}

#[test]
fn an_unknown_field_should_be_an_error_naming_field_and_message() {
    // EnvVar has fields 1 to 3 only.
    let c = Enc::new()
        .str(1, "c")
        .msg(7, Enc::new().str(1, "X").msg(9, Enc::new()));
    let raw = Enc::new().msg(2, Enc::new().msg(2, c));
    let err = decode_err(&body("v1", "Pod", raw));
    assert_eq!(
        err,
        ProtobufError::UnsupportedField {
            message: "EnvVar",
            number: 9
        }
    );
    let api = ApiError::from(err);
    assert_eq!(api.code(), 400);
    assert!(
        api.message
            .contains("unsupported field 9 in protobuf message EnvVar; send JSON instead"),
        "{}",
        api.message
    );
}

#[test]
fn managed_fields_should_decode_with_their_fields_as_json() {
    let entry = Enc::new()
        .str(1, "kubectl")
        .str(2, "Update")
        .str(3, "v1")
        .msg(4, Enc::new().int(1, 1_700_000_000))
        .str(6, "FieldsV1")
        .msg(7, Enc::new().str(1, r#"{"f:data":{".":{}}}"#));
    let raw = Enc::new().msg(1, Enc::new().str(1, "n").msg(17, entry));
    assert_eq!(
        decoded(&body("v1", "ConfigMap", raw))["metadata"]["managedFields"],
        json!([{
            "manager": "kubectl",
            "operation": "Update",
            "apiVersion": "v1",
            "time": "2023-11-14T22:13:20Z",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:data": {".": {}}}
        }])
    );
}

#[test]
fn a_kind_without_tables_should_be_unsupported_media_type() {
    let err = decode_err(&body("batch/v1", "Job", Enc::new()));
    assert!(matches!(err, ProtobufError::UnsupportedKind { .. }));
    let api = ApiError::from(err);
    assert_eq!(api.code(), 415);
    assert!(api.message.contains("send JSON"), "{}", api.message);
}

#[test]
fn a_compressed_raw_should_be_unsupported_media_type() {
    let unknown = Enc::new()
        .msg(1, Enc::new().str(1, "v1").str(2, "ConfigMap"))
        .msg(2, Enc::new())
        .str(3, "gzip");
    let mut b = b"k8s\0".to_vec();
    b.extend(unknown.0);
    assert_eq!(ApiError::from(decode_err(&b)).code(), 415);
}

#[test]
fn a_body_without_the_magic_prefix_should_be_a_bad_request() {
    assert_eq!(
        decode_err(b"{\"kind\":\"Pod\"}"),
        ProtobufError::MissingMagic
    );
    assert_eq!(ApiError::from(ProtobufError::MissingMagic).code(), 400);
}

#[test]
fn a_field_with_the_wrong_wire_type_should_be_an_error() {
    // ObjectMeta.name as a varint.
    let raw = Enc::new().msg(1, Enc::new().int(1, 5));
    assert_eq!(
        decode_err(&body("v1", "ConfigMap", raw)),
        ProtobufError::WrongWireType {
            message: "ObjectMeta",
            number: 1,
            got: "varint"
        }
    );
}

#[test]
fn a_truncated_body_should_be_malformed() {
    let full = body(
        "v1",
        "ConfigMap",
        Enc::new().msg(1, object_meta("cfg", &[])),
    );
    let err = decode_err(&full[..full.len() - 3]);
    assert!(
        matches!(
            err,
            ProtobufError::Malformed {
                problem: WireError::Truncated,
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn invalid_utf8_in_a_string_should_be_an_error() {
    let raw = Enc::new().msg(1, Enc::new().bytes(1, &[0xff, 0xfe]));
    assert_eq!(
        decode_err(&body("v1", "ConfigMap", raw)),
        ProtobufError::InvalidUtf8 {
            message: "ObjectMeta",
            number: 1
        }
    );
}

/// A table with every kind and shape, for what the Kubernetes tables do not exercise.
static EVERYTHING: Message = Message {
    name: "Everything",
    fields: &[
        field(1, "i32", Kind::Int32),
        kept(2, "i64", Kind::Int64),
        list(3, "ints", Kind::Int32),
        list(4, "flags", Kind::Bool),
        map(5, "quantities", Kind::Quantity),
        field(6, "bytes", Kind::Bytes),
        field(7, "ios", Kind::IntOrString),
    ],
};

#[test]
fn repeated_scalars_should_decode_packed_and_unpacked_and_negative_int32() {
    let mut packed = Vec::new();
    put_varint(&mut packed, 1);
    put_varint(&mut packed, (-2i64) as u64);
    let m = Enc::new()
        .int(1, -7)
        .int(2, 0)
        .int(3, 5)
        .bytes(3, &packed)
        .bytes(4, &[1, 0])
        .int(4, 1)
        .msg(5, Enc::new().str(1, "empty"))
        .bytes(6, b"")
        .msg(7, Enc::new().int(1, 0).int(2, -3));
    assert_eq!(
        Value::Object(decode_message(&m.0, &EVERYTHING).unwrap()),
        json!({"i32": -7, "i64": 0, "ints": [5, 1, -2], "flags": [true, false, true],
               "quantities": {"empty": "0"}, "ios": -3})
    );
}

#[test]
fn an_int_or_string_of_an_unknown_type_should_be_an_error() {
    let m = Enc::new().msg(7, Enc::new().int(1, 2));
    assert!(matches!(
        decode_message(&m.0, &EVERYTHING),
        Err(ProtobufError::InvalidValue {
            message: "IntOrString",
            ..
        })
    ));
}

#[test]
fn random_and_mutated_bodies_should_never_panic() {
    let seed: u64 = rand::random();
    println!("seed {seed}");
    let mut rng = SmallRng::seed_from_u64(seed);
    let valid = [
        body(
            "v1",
            "Pod",
            Enc::new()
                .msg(1, object_meta("p", &[("a", "b")]))
                .msg(2, Enc::new().msg(2, container("c", "i"))),
        ),
        body(
            "apps/v1",
            "Deployment",
            Enc::new().msg(
                2,
                Enc::new().int(1, 2).msg(
                    4,
                    Enc::new().msg(2, Enc::new().msg(1, Enc::new().int(1, 1).str(3, "1"))),
                ),
            ),
        ),
        body(
            "v1",
            "Secret",
            Enc::new().bytes_entry(2, "k", b"v").str(3, "Opaque"),
        ),
    ];
    for _ in 0..20_000 {
        let mut b = valid[rng.gen_range(0..valid.len())].clone();
        match rng.gen_range(0..4) {
            0 => {
                let len = rng.gen_range(0..64);
                b.truncate(4);
                b.extend((0..len).map(|_| rng.gen::<u8>()));
            }
            1 => {
                for _ in 0..rng.gen_range(1..4) {
                    let i = rng.gen_range(4..b.len());
                    b[i] ^= 1 << rng.gen_range(0..8);
                }
            }
            2 => {
                let at = rng.gen_range(4..b.len());
                b.truncate(at);
            }
            _ => {
                let i = rng.gen_range(4..b.len());
                b[i] = rng.gen();
            }
        }
        let _ = decode(&b);
    }
}

/// The body `kubectl debug rich --copy-to=rich-copy --image=busybox --attach=false` (kubectl
/// 1.33) POSTed, captured from its `-v=10` log: a copy of a pod that sets volumes (emptyDir,
/// configMap, secret, projected), pod and container security contexts, affinity and
/// anti-affinity, tolerations, topology spread, DNS config, host aliases, readiness gates, a
/// sidecar init container, env `valueFrom` and `envFrom`, probes of every handler, lifecycle
/// hooks, resize policy and resources, plus kubectl's debugger container.
const KUBECTL_DEBUG_COPY: &[u8] = include_bytes!("testdata/kubectl-1.33-debug-copy-to.pb");

#[test]
fn a_pod_copied_by_kubectl_debug_should_decode_every_field() {
    // Regression (issue 14.8): `kubectl debug --copy-to` failed with `unsupported field 14 in
    // protobuf message PodSpec` (the pod security context, and most of PodSpec, had no table).
    let pod = decoded(KUBECTL_DEBUG_COPY);
    assert_eq!(
        pod["metadata"],
        json!({"name": "rich-copy", "namespace": "default", "annotations": {"a": "b"}})
    );
    // The copy is the source pod's spec as the server returned it, without `nodeName` (kubectl
    // clears it), plus the debugger container.
    let mut spec = pod["spec"].clone();
    let debugger = spec["containers"]
        .as_array_mut()
        .and_then(Vec::pop)
        .expect("containers");
    assert_eq!(debugger["image"], "busybox");
    assert!(debugger["name"]
        .as_str()
        .is_some_and(|n| n.starts_with("debugger-")));
    let mut source: Value = serde_json::from_str(include_str!(
        "testdata/kubectl-1.33-debug-copy-to.source-spec.json"
    ))
    .expect("JSON");
    source.as_object_mut().expect("object").remove("nodeName");
    assert_eq!(spec, source);
}

#[test]
fn delete_options_sent_by_kubectl_drain_should_decode() {
    // Regression (issue 14.8): `kubectl drain` failed: the DELETE of each pod carried this
    // protobuf body (kubectl 1.33, `-v=10`), which was parsed as JSON.
    let plain = b"k8s\0\x0a\x13\x0a\x02v1\x12\x0dDeleteOptions\x12\x00\x1a\x00\x22\x00";
    assert_eq!(
        decoded(plain),
        json!({"apiVersion": "v1", "kind": "DeleteOptions"})
    );
    // `--grace-period=7`.
    let grace = b"k8s\0\x0a\x13\x0a\x02v1\x12\x0dDeleteOptions\x12\x02\x08\x07\x1a\x00\x22\x00";
    assert_eq!(
        decoded(grace),
        json!({"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 7})
    );
}

#[test]
fn delete_options_should_decode_every_field_under_any_api_version() {
    let raw = Enc::new()
        .int(1, 0)
        .msg(2, Enc::new().str(1, "uid-1").str(2, "42"))
        .int(3, 1)
        .str(4, "Foreground")
        .str(5, "All")
        .int(6, 0);
    assert_eq!(
        decoded(&body("meta.k8s.io/v1", "DeleteOptions", raw)),
        json!({
            "apiVersion": "meta.k8s.io/v1",
            "kind": "DeleteOptions",
            "gracePeriodSeconds": 0,
            "preconditions": {"uid": "uid-1", "resourceVersion": "42"},
            "orphanDependents": true,
            "propagationPolicy": "Foreground",
            "dryRun": ["All"],
            "ignoreStoreReadErrorWithClusterBreakingPotential": false
        })
    );
}

#[test]
fn an_eviction_should_decode_with_its_delete_options() {
    // policy/v1 Eviction {metadata = 1, deleteOptions = 2}, as client-go's `Evict` writes it.
    for api_version in ["policy/v1", "policy/v1beta1"] {
        let raw = Enc::new()
            .msg(1, Enc::new().str(1, "web-0").str(3, "default"))
            .msg(2, Enc::new().int(1, 30).str(5, "All"));
        assert_eq!(
            decoded(&body(api_version, "Eviction", raw)),
            json!({
                "apiVersion": api_version,
                "kind": "Eviction",
                "metadata": {"name": "web-0", "namespace": "default"},
                "deleteOptions": {"gracePeriodSeconds": 30, "dryRun": ["All"]}
            })
        );
    }
}

#[test]
fn an_inlined_volume_source_should_land_in_the_volume() {
    // Volume {name = 1, volumeSource = 2 (inlined)}; VolumeSource.hostPath = 1.
    let volume = Enc::new()
        .str(1, "host")
        .msg(2, Enc::new().msg(1, Enc::new().str(1, "/tmp")));
    let raw = Enc::new().msg(2, Enc::new().msg(1, volume));
    assert_eq!(
        decoded(&body("v1", "Pod", raw))["spec"]["volumes"],
        json!([{"name": "host", "hostPath": {"path": "/tmp"}}])
    );
}

#[test]
fn a_micro_time_should_keep_its_microseconds() {
    // Lease {spec = 2 {holderIdentity = 1, renewTime = 4}}.
    let spec = Enc::new()
        .str(1, "me")
        .msg(4, Enc::new().int(1, 1_700_000_000).int(2, 123_456_000));
    let raw = Enc::new().msg(2, spec);
    assert_eq!(
        decoded(&body("coordination.k8s.io/v1", "Lease", raw))["spec"],
        json!({"holderIdentity": "me", "renewTime": "2023-11-14T22:13:20.123456Z"})
    );
}

#[test]
fn every_built_in_kind_served_should_have_a_table() {
    for (api_version, kind) in [
        ("v1", "Namespace"),
        ("v1", "Pod"),
        ("v1", "Node"),
        ("v1", "ConfigMap"),
        ("v1", "Secret"),
        ("v1", "ServiceAccount"),
        ("v1", "Service"),
        ("v1", "Event"),
        ("v1", "Binding"),
        ("events.k8s.io/v1", "Event"),
        ("coordination.k8s.io/v1", "Lease"),
        ("apps/v1", "Deployment"),
        ("apps/v1", "ReplicaSet"),
        ("autoscaling/v1", "HorizontalPodAutoscaler"),
        ("autoscaling/v1", "Scale"),
        ("autoscaling/v2", "HorizontalPodAutoscaler"),
        ("policy/v1", "Eviction"),
    ] {
        assert_eq!(
            decoded(&body(api_version, kind, Enc::new())),
            json!({"apiVersion": api_version, "kind": kind}),
            "{api_version} {kind}"
        );
    }
}

#[test]
fn fields_whose_go_tags_omit_opt_should_decode() {
    // Regression (issue 14.8): Go tags like `protobuf:"bytes,1,name=name"` (no `opt`) mark
    // many fields (an autoscaling/v2 resource metric's `name` and `type`, a deployment
    // condition's `type`); the tables must have them. The generator checks its field numbers
    // against `generated.proto`.
    let target = Enc::new().str(1, "Utilization").int(4, 50);
    let metric = Enc::new()
        .str(1, "Resource")
        .msg(4, Enc::new().str(1, "cpu").msg(2, target));
    let spec = Enc::new()
        .msg(
            1,
            Enc::new()
                .str(1, "Deployment")
                .str(2, "web")
                .str(3, "apps/v1"),
        )
        .int(2, 1)
        .int(3, 5)
        .msg(4, metric);
    let raw = Enc::new().msg(1, object_meta("web", &[])).msg(2, spec);
    assert_eq!(
        decoded(&body("autoscaling/v2", "HorizontalPodAutoscaler", raw))["spec"],
        json!({
            "scaleTargetRef": {"kind": "Deployment", "name": "web", "apiVersion": "apps/v1"},
            "minReplicas": 1,
            "maxReplicas": 5,
            "metrics": [{
                "type": "Resource",
                "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}
            }]
        })
    );
}

//! Values of every shape: times, quantities, repeated fields (merged, replaced, packed),
//! managed fields, micro times, and fields whose Go tags omit `opt`.

use super::*;

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

//! Bodies the decoder must refuse with a clear error, and random or mutated bodies that must
//! never make it panic.

use super::*;

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
fn a_kind_without_tables_should_be_unsupported_media_type() {
    let err = decode_err(&body(
        "resource.k8s.io/v1beta1",
        "ResourceClaim",
        Enc::new(),
    ));
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

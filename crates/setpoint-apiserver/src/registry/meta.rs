//! Object metadata the server owns: names generated from `generateName`, UIDs, timestamps,
//! resource versions.

use chrono::{SecondsFormat, Utc};
use rand::Rng;
use serde_json::{Map, Value};

/// Now, as Kubernetes writes timestamps (RFC 3339, seconds, `Z`).
pub(crate) fn now() -> String {
    Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// A new random UID (UUID version 4).
pub(crate) use crate::ids::new_uid;

/// `generateName` plus five random characters from the alphabet Kubernetes uses (no vowels,
/// no easily confused characters).
pub(crate) fn generate_name(base: &str) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let base = if base.len() > 58 { &base[..58] } else { base };
    let mut rng = rand::thread_rng();
    let suffix: String = (0..5)
        .map(|_| ALPHABET[rng.gen_range(0..ALPHABET.len())] as char)
        .collect();
    format!("{base}{suffix}")
}

/// `metadata` of an object, created if missing.
pub(crate) fn metadata(object: &mut Value) -> &mut Map<String, Value> {
    if !object.get("metadata").is_some_and(Value::is_object) {
        object["metadata"] = Value::Object(Map::new());
    }
    object["metadata"]
        .as_object_mut()
        .expect("just made an object")
}

/// A metadata string field.
pub(crate) fn meta_str<'a>(object: &'a Value, field: &str) -> Option<&'a str> {
    object["metadata"][field].as_str()
}

/// The object's finalizers.
pub(crate) fn finalizers(object: &Value) -> Vec<String> {
    object["metadata"]["finalizers"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// Copies the fields clients may not change on update from the stored object. The server's
/// own changes (`server_change`) may set the deletion fields.
pub(crate) fn keep_system_fields(new: &mut Value, old: &Value, server_change: bool) {
    let old_meta = &old["metadata"];
    let meta = metadata(new);
    let mut fields = vec!["uid", "creationTimestamp", "generation"];
    if !server_change {
        fields.extend(["deletionTimestamp", "deletionGracePeriodSeconds"]);
    }
    for field in fields {
        match old_meta.get(field) {
            Some(v) if !v.is_null() => {
                meta.insert(field.into(), v.clone());
            }
            _ => {
                meta.remove(field);
            }
        }
    }
    meta.remove("resourceVersion");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uids_should_be_version_4_uuids() {
        let u = new_uid();
        assert_eq!(u.len(), 36);
        assert_eq!(&u[14..15], "4");
        assert_ne!(u, new_uid());
    }

    #[test]
    fn generated_names_should_append_five_safe_characters() {
        let n = generate_name("web-");
        assert!(n.starts_with("web-") && n.len() == 9);
        assert!(n[4..]
            .bytes()
            .all(|b| b"bcdfghjklmnpqrstvwxz2456789".contains(&b)));
    }
}

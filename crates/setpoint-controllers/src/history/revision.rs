//! One revision of a template: the `data` a ControllerRevision stores (a strategic merge patch
//! that replaces the owner's `spec.template` wholesale), the hash that names it, and equality.
//! The hash is FNV-1a (32 bits) of the serialized data, then of the decimal collision count,
//! written in the vowel-free alphabet so it never spells a word; equal data under equal counts
//! hash equal in every process.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use serde_json::{json, Value};

/// The label holding a revision's hash, on the revision (and, for DaemonSets, on their pods as
/// `controller-revision-hash`).
pub(crate) const REVISION_HASH_LABEL: &str = "controller.kubernetes.io/hash";

/// The pod label naming the revision a pod was made from.
pub(crate) const CONTROLLER_REVISION_HASH: &str = "controller-revision-hash";

/// The alphabet hashes are written in (no vowels, no look-alikes).
const SAFE_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

const FNV_OFFSET: u32 = 0x811c_9dc5;
const FNV_PRIME: u32 = 0x0100_0193;

fn fnv1a_32(mut hash: u32, bytes: &[u8]) -> u32 {
    for b in bytes {
        hash ^= u32::from(*b);
        hash = hash.wrapping_mul(FNV_PRIME);
    }
    hash
}

/// A template's revision before it is stored: its data and hash.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Revision {
    /// `{"spec":{"template":{…,"$patch":"replace"}}}`.
    pub(crate) data: Value,
    /// The hash of `data` under the owner's collision count.
    pub(crate) hash: String,
}

impl Revision {
    /// The revision of `template` for an owner whose `collisionCount` is `collision_count`.
    pub(crate) fn of(template: &PodTemplateSpec, collision_count: Option<i32>) -> Revision {
        let data = patch_of(template);
        let hash = hash_of(&data, collision_count);
        Revision { data, hash }
    }

    /// The name of this revision under owner `owner` (`OWNER-HASH`).
    pub(crate) fn name(&self, owner: &str) -> String {
        format!("{owner}-{}", self.hash)
    }

    /// The ControllerRevision to create: named for `owner`, labelled with the template's
    /// labels and the hash, numbered `number`. The caller adds the owner reference.
    pub(crate) fn to_object(
        &self,
        owner: &str,
        namespace: Option<&str>,
        template_labels: Option<&BTreeMap<String, String>>,
        number: i64,
    ) -> ControllerRevision {
        let mut labels = template_labels.cloned().unwrap_or_default();
        labels.insert(REVISION_HASH_LABEL.to_owned(), self.hash.clone());
        ControllerRevision {
            metadata: ObjectMeta {
                name: Some(self.name(owner)),
                namespace: namespace.map(str::to_owned),
                labels: Some(labels),
                ..Default::default()
            },
            data: Some(RawExtension(self.data.clone())),
            revision: number,
        }
    }

    /// Whether the stored revision `stored` holds this revision's data.
    pub(crate) fn equals(&self, stored: &ControllerRevision) -> bool {
        stored
            .data
            .as_ref()
            .is_some_and(|d| normalized(&d.0) == normalized(&self.data))
    }
}

/// The data stored for `template`: a strategic merge patch replacing `spec.template`.
fn patch_of(template: &PodTemplateSpec) -> Value {
    let mut template = serde_json::to_value(template).unwrap_or(Value::Null);
    crate::semantic::drop_empty(&mut template);
    if let Some(map) = template.as_object_mut() {
        map.insert("$patch".to_owned(), json!("replace"));
    }
    json!({"spec": {"template": template}})
}

/// The hash of `data` under `collision_count`.
fn hash_of(data: &Value, collision_count: Option<i32>) -> String {
    let bytes = serde_json::to_vec(&normalized(data)).unwrap_or_default();
    let mut hash = fnv1a_32(FNV_OFFSET, &bytes);
    if let Some(count) = collision_count {
        hash = fnv1a_32(hash, count.to_string().as_bytes());
    }
    hash.to_string()
        .bytes()
        .map(|digit| char::from(SAFE_ALPHABET[usize::from(digit) % SAFE_ALPHABET.len()]))
        .collect()
}

/// `data` with nulls and empty maps and lists dropped (nil and empty are equal, as
/// Kubernetes' semantic equality has it).
fn normalized(data: &Value) -> Value {
    let mut data = data.clone();
    crate::semantic::drop_empty(&mut data);
    data
}

/// The template a stored revision holds (its data without the `$patch` directive); `None` if
/// the data is not a template patch.
pub(crate) fn template_of_revision(stored: &ControllerRevision) -> Option<PodTemplateSpec> {
    let mut template = stored.data.as_ref()?.0.pointer("/spec/template")?.clone();
    template.as_object_mut()?.remove("$patch");
    serde_json::from_value(template).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Container, PodSpec};

    fn template(image: &str) -> PodTemplateSpec {
        PodTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: Some([("app".to_owned(), "web".to_owned())].into()),
                annotations: Some(BTreeMap::new()),
                ..Default::default()
            }),
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "c".into(),
                    image: Some(image.into()),
                    ..Default::default()
                }],
                ..Default::default()
            }),
        }
    }

    #[test]
    fn data_should_replace_the_template_and_round_trip() {
        let r = Revision::of(&template("nginx:1"), None);
        assert_eq!(r.data["spec"]["template"]["$patch"], "replace");
        assert_eq!(
            r.data["spec"]["template"]["spec"]["containers"][0]["image"],
            "nginx:1"
        );
        let stored = r.to_object("web", Some("ns"), None, 3);
        assert_eq!(
            stored.metadata.name.as_deref(),
            Some(&*format!("web-{}", r.hash))
        );
        assert_eq!(stored.revision, 3);
        let back = template_of_revision(&stored).expect("a template");
        assert_eq!(Revision::of(&back, None), r);
        assert!(r.equals(&stored));
        assert!(!Revision::of(&template("nginx:2"), None).equals(&stored));
    }

    #[test]
    fn hash_should_depend_on_data_and_collision_count_only() {
        let a = Revision::of(&template("nginx:1"), None);
        assert_eq!(a.hash, Revision::of(&template("nginx:1"), None).hash);
        assert!(a.hash.bytes().all(|b| SAFE_ALPHABET.contains(&b)));
        assert_ne!(a.hash, Revision::of(&template("nginx:2"), None).hash);
        assert_ne!(a.hash, Revision::of(&template("nginx:1"), Some(1)).hash);
        assert_ne!(
            Revision::of(&template("nginx:1"), Some(1)).hash,
            Revision::of(&template("nginx:1"), Some(2)).hash
        );
    }
}

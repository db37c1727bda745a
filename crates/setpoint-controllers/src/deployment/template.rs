//! Pod templates: which ReplicaSet is a Deployment's new one (the oldest whose template equals
//! the Deployment's, ignoring the `pod-template-hash` label), and the `pod-template-hash` of a
//! template — a stable hash of the template and the Deployment's `collisionCount`, written with
//! the vowel-free alphabet Kubernetes uses so a hash never spells a word. Equal templates hash
//! equal in every process and every version of this code that keeps this function.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use serde_json::Value;

use super::replicasets::by_creation;

/// The label that ties a ReplicaSet, its selector and its pods to one template.
pub(super) const POD_TEMPLATE_HASH: &str = "pod-template-hash";

/// The alphabet hashes are written in (no vowels, no look-alikes).
const SAFE_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// The `pod-template-hash` of `template` under `collision_count`.
pub(super) fn template_hash(template: &PodTemplateSpec, collision_count: Option<i32>) -> String {
    // k8s-openapi serializes struct fields in a fixed order and maps in key order, so the
    // bytes depend only on the template's content.
    let bytes = serde_json::to_vec(&normalized(template)).unwrap_or_default();
    let mut hash = fnv1a_32(FNV_OFFSET, &bytes);
    if let Some(count) = collision_count {
        hash = fnv1a_32(hash, &count.to_le_bytes());
    }
    hash.to_string()
        .bytes()
        .map(|digit| char::from(SAFE_ALPHABET[usize::from(digit) % SAFE_ALPHABET.len()]))
        .collect()
}

const FNV_OFFSET: u32 = 0x811c_9dc5;
const FNV_PRIME: u32 = 0x0100_0193;

/// FNV-1a (32 bits) of `bytes`, continuing from `hash`.
fn fnv1a_32(mut hash: u32, bytes: &[u8]) -> u32 {
    for b in bytes {
        hash ^= u32::from(*b);
        hash = hash.wrapping_mul(FNV_PRIME);
    }
    hash
}

/// The template as JSON without its `pod-template-hash` label and with empty maps, empty
/// lists and nulls dropped (Kubernetes' semantic equality takes nil and empty as equal).
fn normalized(template: &PodTemplateSpec) -> Value {
    let mut value = serde_json::to_value(template).unwrap_or(Value::Null);
    if let Some(labels) = value
        .pointer_mut("/metadata/labels")
        .and_then(Value::as_object_mut)
    {
        labels.remove(POD_TEMPLATE_HASH);
    }
    crate::semantic::drop_empty(&mut value);
    value
}

/// Whether two templates are equal but for their `pod-template-hash` labels.
pub(super) fn equal_ignoring_hash(a: &PodTemplateSpec, b: &PodTemplateSpec) -> bool {
    normalized(a) == normalized(b)
}

/// The Deployment's template (an empty one if unset).
pub(super) fn template_of(d: &Deployment) -> PodTemplateSpec {
    d.spec
        .as_ref()
        .map(|s| s.template.clone())
        .unwrap_or_default()
}

/// The ReplicaSet's template (an empty one if unset).
pub(super) fn rs_template(rs: &ReplicaSet) -> Option<&PodTemplateSpec> {
    rs.spec.as_ref()?.template.as_ref()
}

/// The index of `d`'s new ReplicaSet in `rses`: the oldest whose template matches (there
/// should be one at most; should there be more, the oldest is taken so the choice is stable).
pub(super) fn find_new(d: &Deployment, rses: &[ReplicaSet]) -> Option<usize> {
    let template = template_of(d);
    let mut matching: Vec<usize> = rses
        .iter()
        .enumerate()
        .filter(|(_, rs)| rs_template(rs).is_some_and(|t| equal_ignoring_hash(t, &template)))
        .map(|(i, _)| i)
        .collect();
    matching.sort_by(|a, b| by_creation(&rses[*a], &rses[*b]));
    matching.first().copied()
}

/// `labels` plus `pod-template-hash=hash`.
pub(super) fn with_hash(
    labels: Option<&BTreeMap<String, String>>,
    hash: &str,
) -> BTreeMap<String, String> {
    let mut labels = labels.cloned().unwrap_or_default();
    labels.insert(POD_TEMPLATE_HASH.to_owned(), hash.to_owned());
    labels
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Container, PodSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn template(image: &str, labels: &[(&str, &str)]) -> PodTemplateSpec {
        PodTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                        .collect(),
                ),
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
    fn hash_should_be_stable_safe_and_change_with_template_and_collisions() {
        let t = template("nginx:1", &[("app", "web")]);
        let h = template_hash(&t, None);
        assert_eq!(h, template_hash(&t.clone(), None));
        assert!(h.bytes().all(|b| SAFE_ALPHABET.contains(&b)), "{h}");
        assert_ne!(
            h,
            template_hash(&template("nginx:2", &[("app", "web")]), None)
        );
        assert_ne!(h, template_hash(&t, Some(1)));
        assert_ne!(template_hash(&t, Some(1)), template_hash(&t, Some(2)));
    }

    #[test]
    fn equality_should_ignore_the_hash_label_and_empty_fields() {
        let a = template("nginx:1", &[("app", "web")]);
        let mut b = template("nginx:1", &[("app", "web"), (POD_TEMPLATE_HASH, "xyz")]);
        assert!(equal_ignoring_hash(&a, &b));
        if let Some(m) = b.metadata.as_mut() {
            m.annotations = Some(BTreeMap::new());
        }
        assert!(
            equal_ignoring_hash(&a, &b),
            "empty and absent maps are equal"
        );
        assert!(!equal_ignoring_hash(
            &a,
            &template("nginx:2", &[("app", "web")])
        ));
        assert_eq!(
            template_hash(&a, None),
            template_hash(&b, None),
            "the hash label does not feed the hash"
        );
    }
}

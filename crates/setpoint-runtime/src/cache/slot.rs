//! [`Slot`]: one cached object as a cache holds it — decoded (`Arc<K>`) or [`Packed`] (compact
//! bytes plus what reads filter on without decoding: labels and resource version).

use std::collections::BTreeMap;
use std::sync::Arc;

use kube::Resource;
use setpoint_core::LabelSelector;

/// One cached object. Cheap to clone (an `Arc` either way), so reads copy slots out under the
/// lock and decode after releasing it.
pub(crate) enum Slot<K> {
    Decoded(Arc<K>),
    Packed(Arc<Packed>),
}

impl<K> Clone for Slot<K> {
    fn clone(&self) -> Self {
        match self {
            Slot::Decoded(o) => Slot::Decoded(o.clone()),
            Slot::Packed(p) => Slot::Packed(p.clone()),
        }
    }
}

impl<K: Resource> Slot<K> {
    /// The cached version's `metadata.resourceVersion`.
    pub(crate) fn resource_version(&self) -> Option<&str> {
        match self {
            Slot::Decoded(o) => o.meta().resource_version.as_deref(),
            Slot::Packed(p) => p.resource_version.as_deref(),
        }
    }

    /// Whether the object's labels match `selector` (no decoding).
    pub(crate) fn matches(&self, selector: &LabelSelector) -> bool {
        match self {
            Slot::Decoded(o) => selector.matches(kube::ResourceExt::labels(o.as_ref())),
            Slot::Packed(p) => selector.matches_with(|key| p.labels.get(key)),
        }
    }
}

/// A compact object: the codec's bytes and the fields reads need without decoding.
pub(crate) struct Packed {
    /// Distinguishes this version of the object from every other version ever cached in the
    /// same store (the key of its decoded copy in the store's recent cache).
    pub(crate) stamp: u64,
    /// The encoded object.
    pub(crate) bytes: Box<[u8]>,
    pub(crate) labels: PackedLabels,
    pub(crate) resource_version: Option<Box<str>>,
}

impl Packed {
    /// Packs `object`'s `bytes` with its labels and resource version.
    pub(crate) fn new<K: Resource>(stamp: u64, object: &K, bytes: Box<[u8]>) -> Packed {
        Packed {
            stamp,
            bytes,
            labels: PackedLabels::new(kube::ResourceExt::labels(object)),
            resource_version: object.meta().resource_version.as_deref().map(Box::from),
        }
    }
}

/// Labels in two allocations: every key and value back to back, and where each ends.
#[derive(Debug, Default)]
pub(crate) struct PackedLabels {
    text: Box<str>,
    /// End offsets in `text`: key 0, value 0, key 1, value 1… Keys are in sorted order.
    ends: Box<[u32]>,
}

impl PackedLabels {
    /// Packs `labels`. Labels beyond 4 GiB of text (impossible through an API server, which
    /// caps an object at a few MiB) are cut at the first label that does not fit.
    fn new(labels: &BTreeMap<String, String>) -> PackedLabels {
        let mut text = String::new();
        let mut ends = Vec::with_capacity(labels.len() * 2);
        for (key, value) in labels {
            let (Ok(key_end), Ok(value_end)) = (
                u32::try_from(text.len() + key.len()),
                u32::try_from(text.len() + key.len() + value.len()),
            ) else {
                break;
            };
            text.push_str(key);
            text.push_str(value);
            ends.extend([key_end, value_end]);
        }
        PackedLabels {
            text: text.into_boxed_str(),
            ends: ends.into_boxed_slice(),
        }
    }

    /// The value of label `key`.
    pub(crate) fn get(&self, key: &str) -> Option<&str> {
        let mut start = 0;
        for pair in self.ends.chunks_exact(2) {
            let (key_end, value_end) = (pair[0] as usize, pair[1] as usize);
            if self.text.get(start..key_end) == Some(key) {
                return self.text.get(key_end..value_end);
            }
            start = value_end;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_labels_should_find_every_label_and_only_those() {
        let labels: BTreeMap<String, String> = [("app", "web"), ("a", ""), ("tier", "front")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let packed = PackedLabels::new(&labels);
        for (key, value) in &labels {
            assert_eq!(packed.get(key), Some(value.as_str()), "{key}");
        }
        assert_eq!(packed.get("ap"), None);
        assert_eq!(packed.get("appweb"), None);
        assert_eq!(PackedLabels::new(&BTreeMap::new()).get(""), None);
    }
}

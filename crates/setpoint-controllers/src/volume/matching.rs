//! Which PersistentVolume a claim binds to: among the volumes that are free (no `claimRef`)
//! or pre-bound to this claim, those whose class, volume mode, access modes, capacity and
//! labels (the claim's `selector`) fit; a pre-bound one first, else the smallest.

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use setpoint_core::quantity::scaled_value;

/// The volume `claim` should bind to, if any.
pub(crate) fn best<'a>(
    claim: &PersistentVolumeClaim,
    volumes: impl IntoIterator<Item = &'a PersistentVolume>,
) -> Option<&'a PersistentVolume> {
    let mut best: Option<(&PersistentVolume, bool, i128)> = None;
    for volume in volumes {
        let Some((prebound, size)) = fits(claim, volume) else {
            continue;
        };
        let better = match best {
            None => true,
            Some((_, best_prebound, best_size)) => {
                (prebound && !best_prebound) || (prebound == best_prebound && size < best_size)
            }
        };
        if better {
            best = Some((volume, prebound, size));
        }
    }
    best.map(|(v, _, _)| v)
}

/// Whether `volume` can take `claim`: `(pre-bound to it, capacity in bytes)`.
fn fits(claim: &PersistentVolumeClaim, volume: &PersistentVolume) -> Option<(bool, i128)> {
    if volume.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let phase = volume.status.as_ref().and_then(|s| s.phase.as_deref());
    if matches!(phase, Some("Released" | "Failed")) {
        return None;
    }
    let spec = volume.spec.as_ref()?;
    let claim_spec = claim.spec.as_ref()?;
    let prebound = match &spec.claim_ref {
        None => false,
        Some(r) => {
            let same = r.name.as_deref() == claim.metadata.name.as_deref()
                && r.namespace.as_deref() == claim.metadata.namespace.as_deref()
                && r.uid
                    .as_deref()
                    .is_none_or(|u| u.is_empty() || Some(u) == claim.metadata.uid.as_deref());
            if !same {
                return None;
            }
            true
        }
    };
    let class = |c: Option<&String>| c.cloned().unwrap_or_default();
    if class(spec.storage_class_name.as_ref()) != class(claim_spec.storage_class_name.as_ref()) {
        return None;
    }
    let mode = |m: Option<&String>| m.cloned().unwrap_or_else(|| "Filesystem".to_owned());
    if mode(spec.volume_mode.as_ref()) != mode(claim_spec.volume_mode.as_ref()) {
        return None;
    }
    let offered = spec.access_modes.as_deref().unwrap_or_default();
    if !claim_spec
        .access_modes
        .iter()
        .flatten()
        .all(|m| offered.contains(m))
    {
        return None;
    }
    let size = spec
        .capacity
        .as_ref()
        .and_then(|c| c.get("storage"))
        .and_then(|q| scaled_value(&q.0, 0))?;
    let wanted = super::requested(claim)
        .and_then(|q| scaled_value(&q, 0))
        .unwrap_or(0);
    if size < wanted {
        return None;
    }
    if let Some(selector) = &claim_spec.selector {
        let labels = volume.metadata.labels.clone().unwrap_or_default();
        if !selector_matches(selector, &labels) {
            return None;
        }
    }
    Some((prebound, size))
}

fn selector_matches(
    selector: &k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector,
    labels: &std::collections::BTreeMap<String, String>,
) -> bool {
    let labels_ok = selector
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    let expressions_ok = selector.match_expressions.iter().flatten().all(|r| {
        let values = r.values.as_deref().unwrap_or_default();
        let value = labels.get(&r.key);
        match r.operator.as_str() {
            "In" => value.is_some_and(|v| values.contains(v)),
            "NotIn" => value.is_none_or(|v| !values.contains(v)),
            "Exists" => value.is_some(),
            "DoesNotExist" => value.is_none(),
            _ => false,
        }
    });
    labels_ok && expressions_ok
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn claim(extra: serde_json::Value) -> PersistentVolumeClaim {
        let mut spec = json!({"accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}}, "storageClassName": "fast"});
        if let (Some(s), Some(e)) = (spec.as_object_mut(), extra.as_object()) {
            s.extend(e.clone());
        }
        serde_json::from_value(
            json!({"metadata": {"name": "c", "namespace": "ns", "uid": "u"},
            "spec": spec}),
        )
        .expect("claim")
    }

    fn volume(name: &str, size: &str, extra: serde_json::Value) -> PersistentVolume {
        let mut v = json!({"metadata": {"name": name, "labels": {"tier": "gold"}},
            "spec": {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce", "ReadOnlyMany"],
                     "storageClassName": "fast", "hostPath": {"path": "/x"}}});
        if let (Some(s), Some(e)) = (v["spec"].as_object_mut(), extra.as_object()) {
            s.extend(e.clone());
        }
        serde_json::from_value(v).expect("volume")
    }

    fn name(v: Option<&PersistentVolume>) -> Option<&str> {
        v.and_then(|v| v.metadata.name.as_deref())
    }

    #[test]
    fn best_should_pick_the_smallest_fitting_volume() {
        let vols = [
            volume("big", "10Gi", json!({})),
            volume("small", "2Gi", json!({})),
            volume("tiny", "512Mi", json!({})),
            volume("other-class", "1Gi", json!({"storageClassName": "slow"})),
            volume("rwx", "1Gi", json!({"accessModes": ["ReadWriteMany"]})),
            volume(
                "taken",
                "1Gi",
                json!({"claimRef": {"name": "x", "namespace": "ns"}}),
            ),
            volume("block", "1Gi", json!({"volumeMode": "Block"})),
        ];
        assert_eq!(name(best(&claim(json!({})), &vols)), Some("small"));
    }

    #[test]
    fn best_should_prefer_a_prebound_volume_and_honour_the_selector() {
        let vols = [
            volume("small", "1Gi", json!({})),
            volume(
                "pre",
                "5Gi",
                json!({"claimRef": {"name": "c", "namespace": "ns"}}),
            ),
        ];
        assert_eq!(name(best(&claim(json!({})), &vols)), Some("pre"));
        let silver = claim(json!({"selector": {"matchLabels": {"tier": "silver"}}}));
        assert_eq!(name(best(&silver, &vols)), None);
        let gold = claim(json!({"selector": {"matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["gold"]}]}}));
        assert_eq!(name(best(&gold, &vols[..1])), Some("small"));
    }
}

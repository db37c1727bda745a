//! What PersistentVolumes and PersistentVolumeClaims share: access modes as kubectl abbreviates
//! them (`RWO,ROX`), the volume modes, and a volume's initial status.

use chrono::{SecondsFormat, Utc};
use serde_json::{json, Value};

/// The values `volumeMode` may take.
pub(crate) const VOLUME_MODES: &[&str] = &["Block", "Filesystem"];

/// Access modes as kubectl prints them: each known mode once, abbreviated, in a fixed order.
pub(crate) fn access_modes_string(modes: &Value) -> String {
    let modes: Vec<&str> = modes
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    [
        ("ReadWriteOnce", "RWO"),
        ("ReadOnlyMany", "ROX"),
        ("ReadWriteMany", "RWX"),
        ("ReadWriteOncePod", "RWOP"),
    ]
    .iter()
    .filter(|(mode, _)| modes.contains(mode))
    .map(|(_, short)| *short)
    .collect::<Vec<_>>()
    .join(",")
}

/// The status a new volume starts with: `Pending` since now.
pub(crate) fn pending_volume_status() -> Value {
    json!({"phase": "Pending", "lastPhaseTransitionTime": Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true)})
}

/// The `VolumeAttributesClass` cell: the class, or `<unset>`.
pub(crate) fn attributes_class(spec: &Value) -> Value {
    json!(spec["volumeAttributesClassName"]
        .as_str()
        .unwrap_or("<unset>"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn access_modes_should_print_abbreviated_in_kubectl_order() {
        let modes = json!(["ReadWriteMany", "ReadWriteOnce", "ReadWriteOnce"]);
        assert_eq!(access_modes_string(&modes), "RWO,RWX");
        assert_eq!(access_modes_string(&Value::Null), "");
    }
}

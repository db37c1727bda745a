//! Strategic merge patch metadata of the built-in schemas: `x-kubernetes-patch-strategy` and
//! `x-kubernetes-patch-merge-key` on the fields that have them in Kubernetes' own documents.
//!
//! `k8s-openapi`'s schemas lack them, and `kubectl apply` needs them to compute a strategic
//! merge patch from OpenAPI v3 (1.29+) or v2 (1.27/1.28): without a merge key a list such as
//! `containers` would be replaced whole. The table covers every tagged field reachable from
//! the kinds in [`super::builtin`] (the same fields as `setpoint-core`'s strategic merge
//! table, which is keyed by path rather than by definition).

use std::collections::BTreeMap;

use serde_json::Value;

/// A field's strategy: `merge` (with a merge key for lists of objects, none for lists of
/// scalars, which merge as sets), `retainKeys`, or both.
struct Field {
    definition: &'static str,
    property: &'static str,
    strategy: &'static str,
    merge_key: Option<&'static str>,
}

const fn merge_by(definition: &'static str, property: &'static str, key: &'static str) -> Field {
    Field {
        definition,
        property,
        strategy: "merge",
        merge_key: Some(key),
    }
}

/// Definition names below are relative to `io.k8s.api.` unless they start with `io.`.
const FIELDS: &[Field] = &[
    Field {
        definition: "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
        property: "finalizers",
        strategy: "merge",
        merge_key: None,
    },
    merge_by(
        "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
        "ownerReferences",
        "uid",
    ),
    merge_by("core.v1.Container", "env", "name"),
    merge_by("core.v1.Container", "ports", "containerPort"),
    merge_by("core.v1.Container", "volumeMounts", "mountPath"),
    merge_by("core.v1.Container", "volumeDevices", "devicePath"),
    merge_by("core.v1.EphemeralContainer", "env", "name"),
    merge_by("core.v1.EphemeralContainer", "ports", "containerPort"),
    merge_by("core.v1.EphemeralContainer", "volumeMounts", "mountPath"),
    merge_by("core.v1.EphemeralContainer", "volumeDevices", "devicePath"),
    merge_by("core.v1.PodSpec", "containers", "name"),
    merge_by("core.v1.PodSpec", "initContainers", "name"),
    merge_by("core.v1.PodSpec", "ephemeralContainers", "name"),
    Field {
        definition: "core.v1.PodSpec",
        property: "volumes",
        strategy: "merge,retainKeys",
        merge_key: Some("name"),
    },
    merge_by("core.v1.PodSpec", "imagePullSecrets", "name"),
    merge_by("core.v1.PodSpec", "hostAliases", "ip"),
    merge_by(
        "core.v1.PodSpec",
        "topologySpreadConstraints",
        "topologyKey",
    ),
    merge_by("core.v1.PodSpec", "schedulingGates", "name"),
    Field {
        definition: "core.v1.PodSpec",
        property: "resourceClaims",
        strategy: "merge,retainKeys",
        merge_key: Some("name"),
    },
    merge_by("core.v1.ContainerStatus", "volumeMounts", "mountPath"),
    merge_by(
        "core.v1.ContainerStatus",
        "allocatedResourcesStatus",
        "name",
    ),
    merge_by("core.v1.PodStatus", "conditions", "type"),
    merge_by("core.v1.PodStatus", "podIPs", "ip"),
    merge_by("core.v1.PodStatus", "hostIPs", "ip"),
    Field {
        definition: "core.v1.PodStatus",
        property: "resourceClaimStatuses",
        strategy: "merge,retainKeys",
        merge_key: Some("name"),
    },
    merge_by("core.v1.NamespaceStatus", "conditions", "type"),
    Field {
        definition: "core.v1.NodeSpec",
        property: "podCIDRs",
        strategy: "merge",
        merge_key: None,
    },
    merge_by("core.v1.NodeStatus", "addresses", "type"),
    merge_by("core.v1.NodeStatus", "conditions", "type"),
    merge_by("core.v1.ServiceAccount", "secrets", "name"),
    merge_by("core.v1.ServiceSpec", "ports", "port"),
    merge_by("core.v1.ServiceStatus", "conditions", "type"),
    Field {
        definition: "apps.v1.DeploymentSpec",
        property: "strategy",
        strategy: "retainKeys",
        merge_key: None,
    },
    merge_by("apps.v1.DeploymentStatus", "conditions", "type"),
    merge_by("apps.v1.ReplicaSetStatus", "conditions", "type"),
    merge_by(
        "autoscaling.v2.HorizontalPodAutoscalerStatus",
        "conditions",
        "type",
    ),
];

fn definition_name(field: &Field) -> String {
    if field.definition.starts_with("io.") {
        field.definition.to_owned()
    } else {
        format!("io.k8s.api.{}", field.definition)
    }
}

/// Adds the patch extensions of [`FIELDS`] to the definitions that have the field.
pub(super) fn annotate(definitions: &mut BTreeMap<String, Value>) {
    for field in FIELDS {
        let Some(Value::Object(property)) = definitions
            .get_mut(&definition_name(field))
            .and_then(|d| d.get_mut("properties"))
            .and_then(|p| p.get_mut(field.property))
        else {
            continue;
        };
        property.insert("x-kubernetes-patch-strategy".into(), field.strategy.into());
        if let Some(key) = field.merge_key {
            property.insert("x-kubernetes-patch-merge-key".into(), key.into());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::builtin::builtin_definition;
    use super::*;

    const CORE: &str = "io.k8s.api.core.v1.";

    #[test]
    fn every_table_entry_should_name_an_existing_field() {
        // Guards against a k8s-openapi upgrade renaming or dropping a field silently.
        for field in FIELDS {
            let name = definition_name(field);
            let definition = builtin_definition(&name).expect(&name);
            assert!(
                definition["properties"][field.property].is_object(),
                "{name}.{}",
                field.property
            );
        }
    }

    #[test]
    fn pod_spec_lists_should_carry_their_merge_keys() {
        let spec = builtin_definition(&format!("{CORE}PodSpec")).expect("PodSpec");
        let containers = &spec["properties"]["containers"];
        assert_eq!(containers["x-kubernetes-patch-merge-key"], "name");
        assert_eq!(containers["x-kubernetes-patch-strategy"], "merge");
        assert_eq!(
            spec["properties"]["volumes"]["x-kubernetes-patch-strategy"],
            "merge,retainKeys"
        );
        assert!(spec["properties"]["tolerations"]
            .get("x-kubernetes-patch-strategy")
            .is_none());
        let container = builtin_definition(&format!("{CORE}Container")).expect("Container");
        assert_eq!(
            container["properties"]["ports"]["x-kubernetes-patch-merge-key"],
            "containerPort"
        );
        assert!(container["properties"]["envFrom"]
            .get("x-kubernetes-patch-merge-key")
            .is_none());
    }

    #[test]
    fn deployment_strategy_should_retain_keys_beside_its_reference() {
        let spec = builtin_definition("io.k8s.api.apps.v1.DeploymentSpec").expect("spec");
        let strategy = &spec["properties"]["strategy"];
        assert_eq!(strategy["x-kubernetes-patch-strategy"], "retainKeys");
        assert!(strategy["allOf"][0]["$ref"].is_string());
    }
}

//! What a pod bound to a node lets that node read: the Secrets, ConfigMaps,
//! PersistentVolumeClaims and ServiceAccount the pod names (kube's node-authorizer graph
//! edges `pod → node` and `secret|configmap|pvc|serviceaccount → pod`). Every place a pod can
//! name one counts: image pull secrets, the environment of every container (init and
//! ephemeral ones too), volumes (secret, configMap, projected sources, the secret references
//! of the network-storage sources, CSI's node-publish secret), claims and generic ephemeral
//! volumes (whose claim is named `<pod>-<volume>`).

use k8s_openapi::api::core::v1::{Container, EnvFromSource, EnvVar, Pod, Volume};

/// A kind of object a pod references.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum RefKind {
    /// A Secret.
    Secret,
    /// A ConfigMap.
    ConfigMap,
    /// A PersistentVolumeClaim.
    Claim,
    /// A ServiceAccount.
    ServiceAccount,
}

/// An object of the pod's namespace the pod references.
pub(crate) type Ref = (RefKind, String);

/// The node `pod` is bound to (`spec.nodeName`), if any, and every object it references
/// (deduplicated, in order).
pub(crate) fn pod_refs(pod: &Pod) -> (Option<String>, Vec<Ref>) {
    let Some(spec) = &pod.spec else {
        return (None, Vec::new());
    };
    let node = spec.node_name.clone().filter(|n| !n.is_empty());
    let mut refs = Vec::new();
    let mut add = |kind: RefKind, name: Option<&String>| {
        if let Some(name) = name.filter(|n| !n.is_empty()) {
            refs.push((kind, name.clone()));
        }
    };
    add(
        RefKind::ServiceAccount,
        spec.service_account_name
            .as_ref()
            .or(Some(&"default".to_owned())),
    );
    for secret in spec.image_pull_secrets.iter().flatten() {
        add(RefKind::Secret, Some(&secret.name));
    }
    let containers = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten());
    for container in containers {
        container_refs(container, &mut add);
    }
    for ephemeral in spec.ephemeral_containers.iter().flatten() {
        env_refs(
            ephemeral.env.iter().flatten(),
            ephemeral.env_from.iter().flatten(),
            &mut add,
        );
    }
    let pod_name = pod.metadata.name.clone().unwrap_or_default();
    for volume in spec.volumes.iter().flatten() {
        volume_refs(&pod_name, volume, &mut add);
    }
    refs.sort();
    refs.dedup();
    (node, refs)
}

fn container_refs(container: &Container, add: &mut impl FnMut(RefKind, Option<&String>)) {
    env_refs(
        container.env.iter().flatten(),
        container.env_from.iter().flatten(),
        add,
    );
}

fn env_refs<'a>(
    env: impl Iterator<Item = &'a EnvVar>,
    env_from: impl Iterator<Item = &'a EnvFromSource>,
    add: &mut impl FnMut(RefKind, Option<&String>),
) {
    for var in env {
        let Some(from) = &var.value_from else {
            continue;
        };
        add(
            RefKind::Secret,
            from.secret_key_ref.as_ref().map(|r| &r.name),
        );
        add(
            RefKind::ConfigMap,
            from.config_map_key_ref.as_ref().map(|r| &r.name),
        );
    }
    for from in env_from {
        add(RefKind::Secret, from.secret_ref.as_ref().map(|r| &r.name));
        add(
            RefKind::ConfigMap,
            from.config_map_ref.as_ref().map(|r| &r.name),
        );
    }
}

fn volume_refs(pod_name: &str, volume: &Volume, add: &mut impl FnMut(RefKind, Option<&String>)) {
    add(
        RefKind::Secret,
        volume.secret.as_ref().and_then(|s| s.secret_name.as_ref()),
    );
    add(
        RefKind::ConfigMap,
        volume.config_map.as_ref().map(|c| &c.name),
    );
    for source in volume
        .projected
        .iter()
        .flat_map(|p| p.sources.iter().flatten())
    {
        add(RefKind::Secret, source.secret.as_ref().map(|s| &s.name));
        add(
            RefKind::ConfigMap,
            source.config_map.as_ref().map(|c| &c.name),
        );
    }
    add(
        RefKind::Claim,
        volume
            .persistent_volume_claim
            .as_ref()
            .map(|c| &c.claim_name),
    );
    if volume.ephemeral.is_some() {
        add(RefKind::Claim, Some(&format!("{pod_name}-{}", volume.name)));
    }
    // The network-storage sources that name a Secret for their credentials.
    let secret_refs = [
        volume.azure_file.as_ref().map(|v| &v.secret_name),
        volume
            .cephfs
            .as_ref()
            .and_then(|v| v.secret_ref.as_ref())
            .map(|r| &r.name),
        volume
            .cinder
            .as_ref()
            .and_then(|v| v.secret_ref.as_ref())
            .map(|r| &r.name),
        volume
            .flex_volume
            .as_ref()
            .and_then(|v| v.secret_ref.as_ref())
            .map(|r| &r.name),
        volume
            .iscsi
            .as_ref()
            .and_then(|v| v.secret_ref.as_ref())
            .map(|r| &r.name),
        volume
            .rbd
            .as_ref()
            .and_then(|v| v.secret_ref.as_ref())
            .map(|r| &r.name),
        volume.scale_io.as_ref().map(|v| &v.secret_ref.name),
        volume
            .storageos
            .as_ref()
            .and_then(|v| v.secret_ref.as_ref())
            .map(|r| &r.name),
        volume
            .csi
            .as_ref()
            .and_then(|v| v.node_publish_secret_ref.as_ref())
            .map(|r| &r.name),
    ];
    for name in secret_refs {
        add(RefKind::Secret, name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pod_refs_should_find_every_kind_of_reference() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "ns"},
            "spec": {
                "nodeName": "n1",
                "serviceAccountName": "sa",
                "imagePullSecrets": [{"name": "pull"}],
                "initContainers": [{"name": "i", "env": [{"name": "A", "valueFrom": {"secretKeyRef": {"name": "init-env", "key": "k"}}}]}],
                "containers": [{"name": "c",
                    "env": [{"name": "B", "valueFrom": {"configMapKeyRef": {"name": "cm-env", "key": "k"}}}],
                    "envFrom": [{"secretRef": {"name": "env-from"}}]}],
                "volumes": [
                    {"name": "s", "secret": {"secretName": "vol-secret"}},
                    {"name": "c", "configMap": {"name": "vol-cm"}},
                    {"name": "p", "projected": {"sources": [{"configMap": {"name": "kube-root-ca.crt"}}, {"secret": {"name": "proj-secret"}}]}},
                    {"name": "d", "persistentVolumeClaim": {"claimName": "data"}},
                    {"name": "e", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
                    {"name": "x", "csi": {"driver": "d", "nodePublishSecretRef": {"name": "csi-secret"}}}
                ]
            }
        }))
        .expect("pod");
        let (node, refs) = pod_refs(&pod);
        assert_eq!(node.as_deref(), Some("n1"));
        let names = |kind: RefKind| -> Vec<&str> {
            refs.iter()
                .filter(|(k, _)| *k == kind)
                .map(|(_, n)| n.as_str())
                .collect()
        };
        assert_eq!(
            names(RefKind::Secret),
            [
                "csi-secret",
                "env-from",
                "init-env",
                "proj-secret",
                "pull",
                "vol-secret"
            ]
        );
        assert_eq!(
            names(RefKind::ConfigMap),
            ["cm-env", "kube-root-ca.crt", "vol-cm"]
        );
        assert_eq!(names(RefKind::Claim), ["data", "p-e"]);
        assert_eq!(names(RefKind::ServiceAccount), ["sa"]);
    }
}

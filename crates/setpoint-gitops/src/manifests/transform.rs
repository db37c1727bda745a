//! The kustomization transformers this loop builds, applied in kustomize's order after
//! `patches`: `namespace`, `namePrefix`/`nameSuffix`, `commonLabels`/`labels`, `images`.
//!
//! What each touches (a subset of kustomize's field specs, written down here):
//! - namespace: `metadata.namespace` of namespaced objects (a built-in list of cluster-scoped
//!   kinds, plus the cluster-scoped CRDs of the same build).
//! - prefix/suffix: `metadata.name` of every object but CustomResourceDefinitions and
//!   Namespaces; references to the renamed objects (a Deployment's ConfigMap volume, …) are
//!   NOT rewritten, unlike kustomize's name-reference transformer.
//! - labels: `metadata.labels`; with selectors (`commonLabels`, `includeSelectors`) also
//!   the selectors and pod-template labels of workloads and the selector of Services; with
//!   `includeTemplates`, the pod-template labels.
//! - images: `image` of every `containers`/`initContainers` entry anywhere in an object.

use std::collections::{BTreeMap, HashSet};

use serde_json::{Map, Value};

use super::ObjectId;

/// Built-in kinds that are cluster-scoped, by (group, kind).
const CLUSTER_SCOPED: &[(&str, &str)] = &[
    ("", "Namespace"),
    ("", "Node"),
    ("", "PersistentVolume"),
    ("", "ComponentStatus"),
    ("rbac.authorization.k8s.io", "ClusterRole"),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
    ("apiextensions.k8s.io", "CustomResourceDefinition"),
    ("apiregistration.k8s.io", "APIService"),
    ("storage.k8s.io", "StorageClass"),
    ("storage.k8s.io", "CSIDriver"),
    ("storage.k8s.io", "CSINode"),
    ("storage.k8s.io", "VolumeAttachment"),
    ("scheduling.k8s.io", "PriorityClass"),
    ("node.k8s.io", "RuntimeClass"),
    ("networking.k8s.io", "IngressClass"),
    (
        "admissionregistration.k8s.io",
        "MutatingWebhookConfiguration",
    ),
    (
        "admissionregistration.k8s.io",
        "ValidatingWebhookConfiguration",
    ),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"),
    (
        "admissionregistration.k8s.io",
        "ValidatingAdmissionPolicyBinding",
    ),
    ("certificates.k8s.io", "CertificateSigningRequest"),
    ("flowcontrol.apiserver.k8s.io", "FlowSchema"),
    ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration"),
];

/// Whether a built-in kind is cluster-scoped.
pub(crate) fn is_cluster_scoped_builtin(group: &str, kind: &str) -> bool {
    CLUSTER_SCOPED.contains(&(group, kind))
}

/// The (group, kind) of the cluster-scoped custom resources the CRDs among `objects` define.
fn cluster_scoped_crds(objects: &[Value]) -> HashSet<(String, String)> {
    objects
        .iter()
        .filter(|o| ObjectId::of(o).is_some_and(|id| id.is_crd()))
        .filter(|o| o.pointer("/spec/scope").and_then(Value::as_str) == Some("Cluster"))
        .filter_map(|o| {
            let group = o.pointer("/spec/group")?.as_str()?;
            let kind = o.pointer("/spec/names/kind")?.as_str()?;
            Some((group.to_owned(), kind.to_owned()))
        })
        .collect()
}

/// Sets `metadata.namespace` of an object.
pub(crate) fn set_namespace(object: &mut Value, namespace: &str) {
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("namespace".to_owned(), Value::String(namespace.to_owned()));
    }
}

/// kustomize's `namespace`.
pub(super) fn namespace(objects: &mut [Value], namespace: &str) {
    let crds = cluster_scoped_crds(objects);
    for object in objects.iter_mut() {
        let Some(id) = ObjectId::of(object) else {
            continue;
        };
        if is_cluster_scoped_builtin(&id.group, &id.kind) || crds.contains(&(id.group, id.kind)) {
            continue;
        }
        set_namespace(object, namespace);
    }
}

/// kustomize's `namePrefix` and `nameSuffix`.
pub(super) fn prefix_suffix(objects: &mut [Value], prefix: &str, suffix: &str) {
    for object in objects.iter_mut() {
        let Some(id) = ObjectId::of(object) else {
            continue;
        };
        if id.is_crd() || id.is_namespace() {
            continue;
        }
        if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.insert(
                "name".to_owned(),
                Value::String(format!("{prefix}{}{suffix}", id.name)),
            );
        }
    }
}

/// Where a label set goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum LabelReach {
    /// `metadata.labels` only.
    Metadata,
    /// And pod templates.
    Templates,
    /// And pod templates and selectors (`commonLabels`).
    Selectors,
}

/// Adds `labels` to every object, as far as `reach` says.
pub(super) fn labels(objects: &mut [Value], labels: &BTreeMap<String, String>, reach: LabelReach) {
    for object in objects.iter_mut() {
        let Some(id) = ObjectId::of(object) else {
            continue;
        };
        add_labels(object, "/metadata", "labels", labels);
        if reach == LabelReach::Metadata {
            continue;
        }
        let workload = matches!(
            (id.group.as_str(), id.kind.as_str()),
            (
                "apps",
                "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet"
            ) | ("batch", "Job")
                | ("", "ReplicationController")
        );
        if workload {
            add_labels(object, "/spec/template/metadata", "labels", labels);
        }
        if (id.group.as_str(), id.kind.as_str()) == ("batch", "CronJob") {
            add_labels(object, "/spec/jobTemplate/metadata", "labels", labels);
            add_labels(
                object,
                "/spec/jobTemplate/spec/template/metadata",
                "labels",
                labels,
            );
        }
        if reach != LabelReach::Selectors {
            continue;
        }
        match (id.group.as_str(), id.kind.as_str()) {
            ("apps", "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet") => {
                add_labels(object, "/spec/selector", "matchLabels", labels);
            }
            ("", "Service" | "ReplicationController") => {
                add_labels(object, "/spec", "selector", labels);
            }
            _ => {}
        }
    }
}

/// Adds `labels` to the map `key` of the object at `parent` (created, with its parents, when
/// missing; left alone when something in the way is not an object).
fn add_labels(object: &mut Value, parent: &str, key: &str, labels: &BTreeMap<String, String>) {
    let mut at = object;
    for part in parent.split('/').filter(|p| !p.is_empty()) {
        let Some(map) = at.as_object_mut() else {
            return;
        };
        at = map.entry(part).or_insert_with(|| Value::Object(Map::new()));
    }
    let Some(map) = at.as_object_mut() else {
        return;
    };
    let target = map.entry(key).or_insert_with(|| Value::Object(Map::new()));
    if target.is_null() {
        *target = Value::Object(Map::new());
    }
    let Some(target) = target.as_object_mut() else {
        return;
    };
    for (k, v) in labels {
        target.insert(k.clone(), Value::String(v.clone()));
    }
}

/// One `images` entry.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct Image {
    /// The image name to match (without tag or digest).
    pub(super) name: String,
    /// The name to use instead.
    #[serde(default)]
    pub(super) new_name: Option<String>,
    /// The tag to use instead.
    #[serde(default)]
    pub(super) new_tag: Option<String>,
    /// The digest to use instead (wins over `newTag`).
    #[serde(default)]
    pub(super) digest: Option<String>,
}

/// Rewrites the container images `images` name, anywhere in every object.
pub(super) fn images(objects: &mut [Value], images: &[Image]) {
    for object in objects.iter_mut() {
        rewrite_images(object, images);
    }
}

fn rewrite_images(value: &mut Value, images: &[Image]) {
    match value {
        Value::Object(map) => {
            for (key, child) in map.iter_mut() {
                if key == "containers" || key == "initContainers" {
                    if let Value::Array(containers) = child {
                        for container in containers.iter_mut() {
                            if let Some(Value::String(image)) = container.get_mut("image") {
                                if let Some(new) = rewrite(image, images) {
                                    *image = new;
                                }
                            }
                        }
                    }
                }
                rewrite_images(child, images);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| rewrite_images(v, images)),
        _ => {}
    }
}

/// The new reference for `image` (`name[:tag][@digest]`), if an entry names it.
fn rewrite(image: &str, images: &[Image]) -> Option<String> {
    let (rest, digest) = match image.split_once('@') {
        Some((rest, digest)) => (rest, Some(digest)),
        None => (image, None),
    };
    // A tag is after the last `:` that follows the last `/` (a registry's port is not a tag).
    let last_slash = rest.rfind('/').map_or(0, |i| i + 1);
    let (name, tag) = match rest[last_slash..].rfind(':') {
        Some(i) => (&rest[..last_slash + i], Some(&rest[last_slash + i + 1..])),
        None => (rest, None),
    };
    let entry = images.iter().find(|i| i.name == name)?;
    let name = entry.new_name.as_deref().unwrap_or(name);
    Some(match (&entry.digest, &entry.new_tag) {
        (Some(d), _) => format!("{name}@{d}"),
        (None, Some(t)) => format!("{name}:{t}"),
        (None, None) => match (tag, digest) {
            (_, Some(d)) => format!("{name}@{d}"),
            (Some(t), None) => format!("{name}:{t}"),
            (None, None) => name.to_owned(),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn image(name: &str, new_name: Option<&str>, tag: Option<&str>, digest: Option<&str>) -> Image {
        Image {
            name: name.to_owned(),
            new_name: new_name.map(str::to_owned),
            new_tag: tag.map(str::to_owned),
            digest: digest.map(str::to_owned),
        }
    }

    #[test]
    fn images_should_be_rewritten_by_name_only() {
        let images = [
            image("nginx", None, Some("1.27"), None),
            image("registry:5000/app", Some("mirror/app"), None, None),
            image("db", None, Some("x"), Some("sha256:abc")),
        ];
        assert_eq!(
            rewrite("nginx:1.25", &images).as_deref(),
            Some("nginx:1.27")
        );
        assert_eq!(rewrite("nginx", &images).as_deref(), Some("nginx:1.27"));
        assert_eq!(rewrite("nginxx:1", &images), None);
        assert_eq!(
            rewrite("registry:5000/app:2", &images).as_deref(),
            Some("mirror/app:2")
        );
        assert_eq!(rewrite("db:1", &images).as_deref(), Some("db@sha256:abc"));
        let mut objects = vec![json!({"apiVersion": "batch/v1", "kind": "CronJob",
            "metadata": {"name": "c"}, "spec": {"jobTemplate": {"spec": {"template": {"spec": {
                "initContainers": [{"name": "i", "image": "nginx"}],
                "containers": [{"name": "c", "image": "other:1"}]}}}}}})];
        super::images(&mut objects, &images);
        let spec = &objects[0]["spec"]["jobTemplate"]["spec"]["template"]["spec"];
        assert_eq!(spec["initContainers"][0]["image"], "nginx:1.27");
        assert_eq!(spec["containers"][0]["image"], "other:1");
    }

    #[test]
    fn namespace_should_skip_cluster_scoped_objects_and_crds_of_the_build() {
        let mut objects = vec![
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "r"}}),
            json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                "metadata": {"name": "things.example.com"},
                "spec": {"group": "example.com", "scope": "Cluster", "names": {"kind": "Thing"}}}),
            json!({"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "t"}}),
        ];
        namespace(&mut objects, "prod");
        assert_eq!(objects[0]["metadata"]["namespace"], "prod");
        assert!(objects[1]["metadata"].get("namespace").is_none());
        assert!(objects[2]["metadata"].get("namespace").is_none());
        assert!(objects[3]["metadata"].get("namespace").is_none());
    }

    #[test]
    fn common_labels_should_reach_selectors_and_templates() {
        let mut objects = vec![
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                "spec": {"selector": {"matchLabels": {"app": "d"}},
                    "template": {"metadata": {"labels": {"app": "d"}}}}}),
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {}}),
        ];
        let set = BTreeMap::from([("team".to_owned(), "a".to_owned())]);
        labels(&mut objects, &set, LabelReach::Selectors);
        assert_eq!(objects[0]["spec"]["selector"]["matchLabels"]["team"], "a");
        assert_eq!(
            objects[0]["spec"]["template"]["metadata"]["labels"]["team"],
            "a"
        );
        assert_eq!(objects[0]["metadata"]["labels"]["team"], "a");
        assert_eq!(objects[1]["spec"]["selector"]["team"], "a");
        let mut plain = vec![objects[1].clone()];
        let other = BTreeMap::from([("only".to_owned(), "meta".to_owned())]);
        labels(&mut plain, &other, LabelReach::Metadata);
        assert!(plain[0]["spec"]["selector"].get("only").is_none());
        assert_eq!(plain[0]["metadata"]["labels"]["only"], "meta");
    }

    #[test]
    fn prefix_and_suffix_should_leave_crds_and_namespaces() {
        let mut objects = vec![
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}),
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"}}),
        ];
        prefix_suffix(&mut objects, "pre-", "-suf");
        assert_eq!(objects[0]["metadata"]["name"], "pre-a-suf");
        assert_eq!(objects[1]["metadata"]["name"], "n");
    }
}

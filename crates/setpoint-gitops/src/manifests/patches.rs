//! A kustomization's `patches`: each entry's patch (inline `patch`, or the file `path`) is
//! either a JSON 6902 patch (a YAML/JSON list of operations), applied to every object its
//! `target` selects, or a strategic merge patch (an object), applied to the objects its
//! `target` selects or, without a target, to the one object named by its own
//! `apiVersion`/`kind`/`metadata.name`/`metadata.namespace`.
//!
//! A strategic merge patch is applied with setpoint-core's strategic merge engine and the
//! patch metadata of the built-in kind (lists merged by key: containers by `name`, …). Kinds
//! without such metadata (custom resources) get a JSON merge patch (RFC 7386), where a list in
//! the patch replaces the whole list; kustomize reads a CRD's OpenAPI for merge keys instead.
//!
//! `target` selects by `group`, `version`, `kind`, `name` and `namespace` (regular
//! expressions matched against the whole value, as kustomize's), `labelSelector` and
//! `annotationSelector`.

use std::collections::BTreeMap;

use regex::Regex;
use serde::Deserialize;
use serde_json::Value;
use setpoint_core::{apply_patch, LabelSelector, PatchSchema, PatchType};

use super::object::split_api_version;
use super::{BuildError, ObjectId};

/// One `patches` entry as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct PatchEntry {
    /// A file holding the patch, relative to the kustomization.
    #[serde(default)]
    pub(super) path: Option<String>,
    /// The patch itself.
    #[serde(default)]
    pub(super) patch: Option<String>,
    /// Which objects it applies to.
    #[serde(default)]
    pub(super) target: Option<Target>,
    /// kustomize's options (`allowNameChange`, `allowKindChange`): accepted only when false.
    #[serde(default)]
    pub(super) options: Option<BTreeMap<String, bool>>,
}

/// Selects the objects a patch applies to.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct Target {
    #[serde(default)]
    group: Option<String>,
    #[serde(default)]
    version: Option<String>,
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default)]
    label_selector: Option<String>,
    #[serde(default)]
    annotation_selector: Option<String>,
}

/// A target compiled.
struct Matcher {
    group: Option<Regex>,
    version: Option<Regex>,
    kind: Option<Regex>,
    name: Option<Regex>,
    namespace: Option<Regex>,
    labels: Option<LabelSelector>,
    annotations: Option<LabelSelector>,
}

impl Matcher {
    fn new(target: &Target) -> Result<Matcher, String> {
        let regex = |field: &str, value: &Option<String>| -> Result<Option<Regex>, String> {
            value
                .as_deref()
                .map(|v| {
                    Regex::new(&format!("^(?:{v})$")).map_err(|e| {
                        format!("target {field} {v:?} is not a regular expression: {e}")
                    })
                })
                .transpose()
        };
        let selector = |field: &str,
                        value: &Option<String>|
         -> Result<Option<LabelSelector>, String> {
            value
                .as_deref()
                .map(|v| LabelSelector::parse(v).map_err(|e| format!("target {field} {v:?}: {e}")))
                .transpose()
        };
        Ok(Matcher {
            group: regex("group", &target.group)?,
            version: regex("version", &target.version)?,
            kind: regex("kind", &target.kind)?,
            name: regex("name", &target.name)?,
            namespace: regex("namespace", &target.namespace)?,
            labels: selector("labelSelector", &target.label_selector)?,
            annotations: selector("annotationSelector", &target.annotation_selector)?,
        })
    }

    fn matches(&self, object: &Value) -> bool {
        let Some(id) = ObjectId::of(object) else {
            return false;
        };
        let version = object
            .get("apiVersion")
            .and_then(Value::as_str)
            .map_or("", |v| split_api_version(v).1);
        let is =
            |regex: &Option<Regex>, value: &str| regex.as_ref().is_none_or(|r| r.is_match(value));
        let map = |pointer: &str| object.pointer(pointer).and_then(Value::as_object);
        is(&self.group, &id.group)
            && is(&self.version, version)
            && is(&self.kind, &id.kind)
            && is(&self.name, &id.name)
            && is(&self.namespace, &id.namespace)
            && self
                .labels
                .as_ref()
                .is_none_or(|s| s.matches_object(object))
            && self.annotations.as_ref().is_none_or(|s| {
                let annotations = map("/metadata/annotations");
                s.matches_with(|k| annotations.and_then(|a| a.get(k)).and_then(Value::as_str))
            })
    }
}

/// Applies one `patches` entry of the kustomization `file` to `objects`; `read` reads the
/// file a `path` names (relative to the kustomization).
pub(super) fn apply(
    objects: &mut [Value],
    entry: &PatchEntry,
    file: &str,
    read: &dyn Fn(&str) -> Result<String, BuildError>,
) -> Result<(), BuildError> {
    let fail = |message: String| BuildError::Kustomization {
        file: file.to_owned(),
        message,
    };
    if entry
        .options
        .as_ref()
        .is_some_and(|o| o.values().any(|v| *v))
    {
        return Err(fail(
            "patch options (allowNameChange, allowKindChange) are not supported".to_owned(),
        ));
    }
    let text = match (&entry.path, &entry.patch) {
        (Some(path), None) => read(path)?,
        (None, Some(patch)) => patch.clone(),
        _ => {
            return Err(fail(
                "a patch needs exactly one of `path` and `patch`".to_owned(),
            ))
        }
    };
    let body: Value = serde_yaml_ng::from_str(&text)
        .map_err(|e| fail(format!("a patch is not valid YAML: {e}")))?;
    let matcher = entry
        .target
        .as_ref()
        .map(Matcher::new)
        .transpose()
        .map_err(fail)?;
    match body {
        Value::Array(_) => {
            let Some(matcher) = matcher else {
                return Err(fail("a JSON 6902 patch needs a `target`".to_owned()));
            };
            for object in objects.iter_mut().filter(|o| matcher.matches(o)) {
                let patched = apply_patch(PatchType::Json, "", "", object.clone(), body.clone())
                    .map_err(|e| fail(format!("patching {}: {e}", describe(object))))?;
                *object = patched;
            }
            Ok(())
        }
        Value::Object(_) => {
            let matched: Vec<usize> = match &matcher {
                Some(m) => (0..objects.len())
                    .filter(|i| m.matches(&objects[*i]))
                    .collect(),
                None => {
                    let Some(id) = ObjectId::of(&body) else {
                        return Err(fail(
                            "a patch without `target` needs apiVersion, kind and metadata.name"
                                .to_owned(),
                        ));
                    };
                    let found: Vec<usize> = (0..objects.len())
                        .filter(|i| {
                            ObjectId::of(&objects[*i]).is_some_and(|o| same_target(&o, &id))
                        })
                        .collect();
                    if found.is_empty() {
                        return Err(fail(format!(
                            "the patch's target {id} is not among the resources"
                        )));
                    }
                    found
                }
            };
            for index in matched {
                let object = &mut objects[index];
                *object = merge(object.clone(), &body)
                    .map_err(|e| fail(format!("patching {}: {e}", describe(object))))?;
            }
            Ok(())
        }
        _ => Err(fail(
            "a patch must be a list of operations or an object".to_owned(),
        )),
    }
}

/// Whether an object is the one a target-less patch names (a patch without a namespace
/// matches the name in any namespace).
fn same_target(object: &ObjectId, patch: &ObjectId) -> bool {
    object.kind == patch.kind
        && object.group == patch.group
        && object.name == patch.name
        && (patch.namespace.is_empty() || object.namespace == patch.namespace)
}

/// A strategic merge patch where the kind has patch metadata, else a JSON merge patch; the
/// patch's own identity fields are not applied (they select, they do not rename).
fn merge(object: Value, patch: &Value) -> Result<Value, String> {
    let mut patch = patch.clone();
    if let Some(map) = patch.as_object_mut() {
        map.remove("apiVersion");
        map.remove("kind");
        if let Some(meta) = map.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("name");
            meta.remove("namespace");
        }
    }
    let api_version = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let kind = object
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let patch_type = if PatchSchema::for_kind(&api_version, &kind).is_some() {
        PatchType::StrategicMerge
    } else {
        PatchType::Merge
    };
    apply_patch(patch_type, &api_version, &kind, object, patch).map_err(|e| e.to_string())
}

fn describe(object: &Value) -> String {
    ObjectId::of(object).map_or_else(|| "an object".to_owned(), |id| id.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deployment(name: &str) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "labels": {"tier": "web"}},
            "spec": {"replicas": 1, "template": {"spec": {"containers": [
                {"name": "app", "image": "app:1"}, {"name": "side", "image": "side:1"}]}}}})
    }

    fn entry(patch: &str, target: Option<Target>) -> PatchEntry {
        PatchEntry {
            path: None,
            patch: Some(patch.to_owned()),
            target,
            options: None,
        }
    }

    fn no_files(_: &str) -> Result<String, BuildError> {
        Err(BuildError::NotFound("x".to_owned()))
    }

    #[test]
    fn json6902_patches_should_apply_to_every_target() {
        let mut objects = vec![
            deployment("a"),
            deployment("b"),
            json!({"apiVersion": "v1",
            "kind": "ConfigMap", "metadata": {"name": "a"}}),
        ];
        let target = Target {
            kind: Some("Deployment".to_owned()),
            name: Some("a|b".to_owned()),
            ..Target::default()
        };
        let e = entry(
            "- op: replace\n  path: /spec/replicas\n  value: 3\n",
            Some(target),
        );
        apply(&mut objects, &e, "k.yaml", &no_files).expect("patch");
        assert_eq!(objects[0]["spec"]["replicas"], 3);
        assert_eq!(objects[1]["spec"]["replicas"], 3);
        assert!(objects[2].get("spec").is_none());
        let e = entry("- op: replace\n  path: /x\n  value: 3\n", None);
        assert!(apply(&mut objects, &e, "k.yaml", &no_files).is_err());
    }

    #[test]
    fn strategic_patches_should_merge_containers_by_name() {
        let mut objects = vec![deployment("web")];
        let e = entry(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  template:\n    spec:\n      containers:\n      - name: side\n        image: side:2\n",
            None,
        );
        apply(&mut objects, &e, "k.yaml", &no_files).expect("patch");
        let containers = &objects[0]["spec"]["template"]["spec"]["containers"];
        assert_eq!(containers[0]["image"], "app:1");
        assert_eq!(containers[1]["image"], "side:2");
        let e = entry(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: other\n",
            None,
        );
        let err = apply(&mut objects, &e, "k.yaml", &no_files).expect_err("no target");
        assert!(err.to_string().contains("Deployment/other"), "{err}");
    }

    #[test]
    fn targets_should_select_by_labels_and_anchor_names() {
        let mut objects = vec![deployment("web"), deployment("web2")];
        let target = Target {
            name: Some("web".to_owned()),
            label_selector: Some("tier=web".to_owned()),
            ..Target::default()
        };
        let e = entry(
            "metadata:\n  annotations:\n    patched: \"yes\"\n",
            Some(target),
        );
        apply(&mut objects, &e, "k.yaml", &no_files).expect("patch");
        assert_eq!(objects[0]["metadata"]["annotations"]["patched"], "yes");
        assert!(objects[1]["metadata"].get("annotations").is_none());
    }
}

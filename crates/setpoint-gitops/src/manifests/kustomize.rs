//! The kustomization subset: a directory's `kustomization.yaml` built as kustomize builds it,
//! for the fields [`SUPPORTED`] lists; any other field is refused by name.
//!
//! `resources` entries are files (their objects) or directories (built recursively, with their
//! own kustomization if they have one), relative to the kustomization and inside the artifact;
//! remote resources (URLs) are refused. Then, in kustomize's order: `patches` (`patches.rs`),
//! `namespace`, `namePrefix`/`nameSuffix`, `commonLabels` and `labels`, `images`
//! (`transform.rs`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::{Map, Value};

use super::patches::{self, PatchEntry};
use super::transform::{self, Image, LabelReach};
use super::{check_unique, BuildError, Reader};

/// The file names kustomize looks for, in its order.
const FILE_NAMES: &[&str] = &["kustomization.yaml", "kustomization.yml", "Kustomization"];

/// The kustomization fields this loop builds.
pub(super) const SUPPORTED: &str = "apiVersion, kind, resources, namespace, namePrefix, \
    nameSuffix, commonLabels, labels, patches, images";

/// The kustomization file of `dir`, if it has one.
pub(super) fn file_in(dir: &Path) -> Option<PathBuf> {
    FILE_NAMES.iter().map(|n| dir.join(n)).find(|p| p.is_file())
}

/// One `labels` entry.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct LabelsEntry {
    #[serde(default)]
    pairs: BTreeMap<String, String>,
    #[serde(default)]
    include_selectors: bool,
    #[serde(default)]
    include_templates: bool,
}

/// The fields of a kustomization this loop builds.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Kustomization {
    #[serde(default)]
    resources: Vec<String>,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default)]
    name_prefix: Option<String>,
    #[serde(default)]
    name_suffix: Option<String>,
    #[serde(default)]
    common_labels: BTreeMap<String, String>,
    #[serde(default)]
    labels: Vec<LabelsEntry>,
    #[serde(default)]
    patches: Vec<PatchEntry>,
    #[serde(default)]
    images: Vec<Image>,
}

/// Reads and checks the kustomization `file`.
fn read(reader: &Reader, file: &Path) -> Result<Kustomization, BuildError> {
    let display = reader.display(file);
    let text = std::fs::read_to_string(file).map_err(|source| BuildError::Read {
        path: display.clone(),
        source,
    })?;
    let value: Value = serde_yaml_ng::from_str(&text).map_err(|e| BuildError::Parse {
        file: display.clone(),
        message: e.to_string(),
    })?;
    let map = match value {
        Value::Object(map) => map,
        Value::Null => Map::new(),
        _ => {
            return Err(BuildError::Kustomization {
                file: display,
                message: "a kustomization must be an object".to_owned(),
            })
        }
    };
    let supported: Vec<&str> = SUPPORTED.split(',').map(str::trim).collect();
    if let Some(field) = map.keys().find(|k| !supported.contains(&k.as_str())) {
        return Err(BuildError::Unsupported {
            file: display,
            field: field.clone(),
            supported: SUPPORTED,
        });
    }
    if let Some(kind) = map.get("kind").and_then(Value::as_str) {
        if kind != "Kustomization" {
            return Err(BuildError::Kustomization {
                file: display,
                message: format!("kind {kind} is not supported (only Kustomization)"),
            });
        }
    }
    serde_json::from_value(Value::Object(map)).map_err(|e| BuildError::Kustomization {
        file: display,
        message: e.to_string(),
    })
}

/// The objects the kustomization `file` of `dir` makes.
pub(super) fn build(
    reader: &Reader,
    dir: &Path,
    file: &Path,
    depth: usize,
) -> Result<Vec<Value>, BuildError> {
    let display = reader.display(file);
    let kustomization = read(reader, file)?;
    let mut objects = Vec::new();
    for resource in &kustomization.resources {
        if resource.contains("://") || resource.starts_with("github.com/") {
            return Err(BuildError::Kustomization {
                file: display,
                message: format!("remote resource {resource:?} is not supported"),
            });
        }
        let path = reader.resolve(dir, resource)?;
        if path.is_dir() {
            objects.extend(reader.directory(&path, depth + 1)?);
        } else {
            objects.extend(reader.file(&path)?);
        }
    }
    check_unique(&objects)?;
    let read_patch = |path: &str| -> Result<String, BuildError> {
        let file = reader.resolve(dir, path)?;
        std::fs::read_to_string(&file).map_err(|source| BuildError::Read {
            path: reader.display(&file),
            source,
        })
    };
    for entry in &kustomization.patches {
        patches::apply(&mut objects, entry, &display, &read_patch)?;
    }
    if let Some(namespace) = &kustomization.namespace {
        transform::namespace(&mut objects, namespace);
    }
    let prefix = kustomization.name_prefix.as_deref().unwrap_or("");
    let suffix = kustomization.name_suffix.as_deref().unwrap_or("");
    if !prefix.is_empty() || !suffix.is_empty() {
        transform::prefix_suffix(&mut objects, prefix, suffix);
    }
    if !kustomization.common_labels.is_empty() {
        transform::labels(
            &mut objects,
            &kustomization.common_labels,
            LabelReach::Selectors,
        );
    }
    for entry in &kustomization.labels {
        let reach = if entry.include_selectors {
            LabelReach::Selectors
        } else if entry.include_templates {
            LabelReach::Templates
        } else {
            LabelReach::Metadata
        };
        transform::labels(&mut objects, &entry.pairs, reach);
    }
    if !kustomization.images.is_empty() {
        transform::images(&mut objects, &kustomization.images);
    }
    Ok(objects)
}

#[cfg(test)]
mod tests {
    use super::super::test_files::Files;
    use super::super::{build, BuildError};

    const DEPLOY: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n\
        spec:\n  replicas: 1\n  selector:\n    matchLabels:\n      app: web\n  template:\n    \
        metadata:\n      labels:\n        app: web\n    spec:\n      containers:\n      - name: web\n        \
        image: nginx:1.25\n";

    #[test]
    fn an_overlay_should_build_its_base_and_apply_its_fields() {
        let files = Files::new(&[
            ("base/kustomization.yaml", "resources:\n- deploy.yaml\n- config\n"),
            ("base/deploy.yaml", DEPLOY),
            ("base/config/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n"),
            (
                "prod/kustomization.yaml",
                "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n\
                 resources:\n- ../base\nnamespace: prod\nnamePrefix: p-\n\
                 commonLabels:\n  env: prod\nlabels:\n- pairs:\n    team: a\n\
                 images:\n- name: nginx\n  newTag: \"1.27\"\n\
                 patches:\n- path: replicas.yaml\n- target:\n    kind: ConfigMap\n  patch: |\n    \
                 - op: add\n      path: /data\n      value: {k: v}\n",
            ),
            (
                "prod/replicas.yaml",
                "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 3\n",
            ),
        ]);
        let objects = build(files.path(), "prod").expect("build");
        assert_eq!(objects.len(), 2);
        let deploy = &objects[0];
        assert_eq!(deploy["metadata"]["name"], "p-web");
        assert_eq!(deploy["metadata"]["namespace"], "prod");
        assert_eq!(deploy["spec"]["replicas"], 3);
        assert_eq!(deploy["spec"]["selector"]["matchLabels"]["env"], "prod");
        assert!(deploy["spec"]["selector"]["matchLabels"]
            .get("team")
            .is_none());
        assert_eq!(deploy["metadata"]["labels"]["team"], "a");
        assert_eq!(
            deploy["spec"]["template"]["spec"]["containers"][0]["image"],
            "nginx:1.27"
        );
        assert_eq!(objects[1]["metadata"]["name"], "p-settings");
        assert_eq!(objects[1]["data"]["k"], "v");
    }

    #[test]
    fn unsupported_fields_should_be_refused_by_name() {
        let files = Files::new(&[(
            "kustomization.yaml",
            "resources: []\nconfigMapGenerator:\n- name: x\n",
        )]);
        let err = build(files.path(), ".").expect_err("unsupported");
        assert!(
            matches!(&err, BuildError::Unsupported { field, .. } if field == "configMapGenerator")
        );
        assert!(
            err.to_string().starts_with(
                "kustomization.yaml: kustomization field `configMapGenerator` is not supported"
            ),
            "{err}"
        );
    }

    #[test]
    fn resources_outside_the_artifact_or_remote_should_be_refused() {
        let files = Files::new(&[("app/kustomization.yaml", "resources:\n- ../../elsewhere\n")]);
        assert!(matches!(
            build(&files.path().join("app"), "."),
            Err(BuildError::Escape(_) | BuildError::NotFound(_))
        ));
        let files = Files::new(&[(
            "kustomization.yaml",
            "resources:\n- https://github.com/x/y//z\n",
        )]);
        let err = build(files.path(), ".").expect_err("remote");
        assert!(err.to_string().contains("remote resource"), "{err}");
    }

    #[test]
    fn a_kustomization_cycle_should_fail() {
        let files = Files::new(&[
            ("a/kustomization.yaml", "resources:\n- ../b\n"),
            ("b/kustomization.yaml", "resources:\n- ../a\n"),
        ]);
        assert!(matches!(
            build(files.path(), "a"),
            Err(BuildError::TooDeep(_))
        ));
    }
}

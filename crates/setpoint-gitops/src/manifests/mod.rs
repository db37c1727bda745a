//! The objects a Sync's path holds, read from an artifact's files without any API call.
//!
//! A directory with a `kustomization.yaml` (or `.yml`, or `Kustomization`) is built as
//! kustomize builds it, for the subset of kustomization fields `kustomize.rs` lists; any other
//! field is refused by name. A directory without one contributes every `*.yaml`, `*.yml` and
//! `*.json` file under it, recursively, in path order (hidden entries skipped), and each
//! subdirectory that has a kustomization is built as one. Files may hold several documents;
//! `List` kinds are flattened; empty documents are skipped.
//!
//! Promises: no file outside the artifact is read (a path, a `resources` entry or a symlink that
//! leads out is refused); the same object (group, kind, namespace, name) twice is an error; the
//! result is in a stable order (the order of files and documents).

mod documents;
mod kustomize;
mod object;
mod patches;
mod transform;

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use serde_json::Value;

pub use object::{split_api_version, ObjectId};
pub(crate) use transform::{is_cluster_scoped_builtin, set_namespace};

/// How deep kustomizations may include directories with their own kustomization.
const MAX_DEPTH: usize = 32;

/// Why a path could not be built (the Sync's `BuildFailed` message).
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// A file or directory could not be read.
    #[error("reading {path}")]
    Read {
        /// The path, relative to the artifact.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A file is not valid YAML (or JSON).
    #[error("{file}: invalid YAML: {message}")]
    Parse {
        /// The file.
        file: String,
        /// The parser's error.
        message: String,
    },
    /// A document is YAML but not an object this loop can apply.
    #[error("{file}, document {document}: {message}")]
    Invalid {
        /// The file.
        file: String,
        /// The document's number in the file, from 1.
        document: usize,
        /// What is wrong.
        message: String,
    },
    /// A path leads out of the artifact's files.
    #[error("path {0:?} is outside the source's files")]
    Escape(String),
    /// A path names nothing.
    #[error("path {0:?} does not exist in the source")]
    NotFound(String),
    /// A kustomization uses a field this loop does not build.
    #[error("{file}: kustomization field `{field}` is not supported (supported: {supported})")]
    Unsupported {
        /// The kustomization file.
        file: String,
        /// The field.
        field: String,
        /// The fields that are.
        supported: &'static str,
    },
    /// A kustomization field has a value this loop cannot use.
    #[error("{file}: {message}")]
    Kustomization {
        /// The kustomization file.
        file: String,
        /// What is wrong.
        message: String,
    },
    /// The same object twice.
    #[error("object {0} is defined more than once")]
    Duplicate(ObjectId),
    /// Kustomizations include each other too deeply (a cycle).
    #[error("{0}: kustomizations nest more than 32 deep (a cycle?)")]
    TooDeep(String),
}

/// The objects of `path` (a Sync's `spec.path`; empty or `./` for the root) in the artifact
/// directory `root`.
pub fn build(root: &Path, path: &str) -> Result<Vec<Value>, BuildError> {
    let reader = Reader::new(root)?;
    let dir = reader.resolve(&reader.root, path)?;
    if !dir.is_dir() {
        return Err(BuildError::NotFound(path.to_owned()));
    }
    let objects = reader.directory(&dir, 0)?;
    check_unique(&objects)?;
    Ok(objects)
}

/// Fails on the first object that appears twice.
pub fn check_unique(objects: &[Value]) -> Result<(), BuildError> {
    let mut seen = HashSet::new();
    for object in objects {
        if let Some(id) = ObjectId::of(object) {
            if !seen.insert(id.clone()) {
                return Err(BuildError::Duplicate(id));
            }
        }
    }
    Ok(())
}

/// Reads inside one artifact.
struct Reader {
    /// The artifact directory, canonical.
    root: PathBuf,
}

impl Reader {
    fn new(root: &Path) -> Result<Reader, BuildError> {
        let root = root.canonicalize().map_err(|source| BuildError::Read {
            path: root.display().to_string(),
            source,
        })?;
        Ok(Reader { root })
    }

    /// `path` relative to the artifact, for messages.
    fn display(&self, path: &Path) -> String {
        match path.strip_prefix(&self.root) {
            Ok(p) if p.as_os_str().is_empty() => ".".to_owned(),
            Ok(p) => p.display().to_string(),
            Err(_) => path.display().to_string(),
        }
    }

    /// `relative` resolved against the directory `base`, canonical, and checked to stay in the
    /// artifact.
    fn resolve(&self, base: &Path, relative: &str) -> Result<PathBuf, BuildError> {
        if Path::new(relative).is_absolute() {
            return Err(BuildError::Escape(relative.to_owned()));
        }
        let joined = base.join(relative);
        let canonical = match joined.canonicalize() {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(BuildError::NotFound(self.display(&joined)));
            }
            Err(source) => {
                return Err(BuildError::Read {
                    path: self.display(&joined),
                    source,
                })
            }
        };
        if canonical.starts_with(&self.root) {
            Ok(canonical)
        } else {
            Err(BuildError::Escape(relative.to_owned()))
        }
    }

    /// The objects of a directory: its kustomization's build, or its manifest files.
    fn directory(&self, dir: &Path, depth: usize) -> Result<Vec<Value>, BuildError> {
        if depth > MAX_DEPTH {
            return Err(BuildError::TooDeep(self.display(dir)));
        }
        match kustomize::file_in(dir) {
            Some(file) => kustomize::build(self, dir, &file, depth),
            None => self.plain(dir, depth),
        }
    }

    /// Every manifest file under `dir`, recursively, in path order; a subdirectory with a
    /// kustomization is built as one.
    fn plain(&self, dir: &Path, depth: usize) -> Result<Vec<Value>, BuildError> {
        let mut entries = self.entries(dir)?;
        entries.sort();
        let mut objects = Vec::new();
        for entry in entries {
            let Some(name) = entry.file_name().and_then(|n| n.to_str()) else {
                continue;
            };
            if name.starts_with('.') {
                continue;
            }
            let canonical = self.resolve(dir, name)?;
            if canonical.is_dir() {
                objects.extend(self.directory(&canonical, depth + 1)?);
            } else if documents::is_manifest_file(name) {
                objects.extend(self.file(&canonical)?);
            }
        }
        Ok(objects)
    }

    /// The objects of one file (already resolved).
    fn file(&self, file: &Path) -> Result<Vec<Value>, BuildError> {
        documents::read_file(file, &self.display(file))
    }

    fn entries(&self, dir: &Path) -> Result<Vec<PathBuf>, BuildError> {
        let read_error = |source| BuildError::Read {
            path: self.display(dir),
            source,
        };
        let mut entries = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(read_error)? {
            entries.push(entry.map_err(read_error)?.path());
        }
        Ok(entries)
    }
}

#[cfg(test)]
pub(crate) mod test_files {
    //! A temporary directory of files, for the reader's tests.

    use std::path::{Path, PathBuf};

    /// A temporary directory removed on drop.
    pub(crate) struct Files(PathBuf);

    impl Files {
        pub(crate) fn new(files: &[(&str, &str)]) -> Files {
            use std::sync::atomic::{AtomicUsize, Ordering};
            static NEXT: AtomicUsize = AtomicUsize::new(0);
            let dir = std::env::temp_dir().join(format!(
                "setpoint-manifests-{}-{}",
                std::process::id(),
                NEXT.fetch_add(1, Ordering::Relaxed)
            ));
            let _ = std::fs::remove_dir_all(&dir);
            for (path, text) in files {
                let file = dir.join(path);
                std::fs::create_dir_all(file.parent().expect("parent")).expect("mkdir");
                std::fs::write(&file, text).expect("write");
            }
            std::fs::create_dir_all(&dir).expect("mkdir");
            Files(dir)
        }

        pub(crate) fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for Files {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::test_files::Files;
    use super::*;

    fn cm(name: &str) -> String {
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n")
    }

    fn names(objects: &[Value]) -> Vec<String> {
        objects
            .iter()
            .map(|o| {
                o["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned()
            })
            .collect()
    }

    #[test]
    fn a_plain_directory_should_yield_every_manifest_recursively_in_path_order() {
        let files = Files::new(&[
            ("apps/b.yaml", &cm("b")),
            ("apps/a.yml", &cm("a")),
            (
                "apps/sub/c.json",
                r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}}"#,
            ),
            ("apps/README.md", "not yaml: ["),
            ("apps/.hidden/d.yaml", &cm("d")),
        ]);
        let objects = build(files.path(), "./apps").expect("build");
        assert_eq!(names(&objects), ["a", "b", "c"]);
        let objects = build(files.path(), "").expect("build root");
        assert_eq!(names(&objects), ["a", "b", "c"]);
    }

    #[test]
    fn paths_out_of_the_artifact_should_be_refused() {
        let files = Files::new(&[("apps/a.yaml", &cm("a"))]);
        let inner = files.path().join("apps");
        for bad in ["..", "../", "./..", "/etc"] {
            let err = build(&inner, bad).expect_err(bad);
            assert!(matches!(err, BuildError::Escape(_)), "{bad}: {err}");
        }
        assert!(matches!(
            build(files.path(), "missing"),
            Err(BuildError::NotFound(_))
        ));
    }

    #[test]
    fn duplicates_should_fail_the_build() {
        let files = Files::new(&[("a.yaml", &cm("same")), ("b.yaml", &cm("same"))]);
        let err = build(files.path(), ".").expect_err("duplicate");
        assert_eq!(
            err.to_string(),
            "object ConfigMap/same is defined more than once"
        );
    }

    #[test]
    fn a_bad_file_should_name_itself() {
        let files = Files::new(&[("ok.yaml", &cm("a")), ("deep/bad.yaml", "kind: [\n")]);
        let err = build(files.path(), ".").expect_err("bad");
        assert!(
            err.to_string().starts_with("deep/bad.yaml: invalid YAML"),
            "{err}"
        );
    }
}

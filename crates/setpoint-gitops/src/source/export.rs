//! Making an artifact: the tree of one commit exported from the mirror into
//! `<root>/gitrepository/<ns>/<name>/<sha>/` (written as a hidden temporary directory beside
//! it, then renamed into place), with ignored paths removed (`ignore.rs`), symbolic links that
//! point outside the artifact removed, and a digest of what is left. Beside each artifact a
//! hidden record, `.<sha>.json`, holds its digest, the ignore rules it was made with and when
//! it was last made current: an artifact whose commit and `spec.ignore` did not change is
//! reused as it is, and the artifact GC keeps the [`KEEP`] most recently current ones.
//!
//! The digest is `sha256:<hex>` over every file and symbolic link left, in byte order of their
//! relative paths: for each, the path, NUL, `f` (file) or `l` (link), NUL, the length of the
//! content (a file's bytes, a link's target) in decimal, NUL, and the content.

use std::io;
use std::path::{Component, Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use ring::digest::{Context, SHA256};
use serde::{Deserialize, Serialize};

use super::git::{Git, GitError};
use super::ignore::Rules;
use crate::artifact::{ArtifactStore, KEEP};

/// The name of the ignore files read from the repository.
const SOURCEIGNORE: &str = ".sourceignore";
/// Bumped when the export's output changes for the same inputs (so old artifacts are remade).
const FORMAT: &str = "setpoint-export-1";

/// Why an artifact could not be made.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ExportError {
    /// Reading the commit's tree out of the mirror failed.
    #[error("exporting the commit's files")]
    Git(#[from] GitError),
    /// Writing the artifact directory failed.
    #[error("writing the artifact {path}")]
    Io {
        /// Where.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
}

/// What an artifact's record says.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
struct Record {
    /// A hash of the export format and `spec.ignore` it was made with.
    ignore: String,
    /// Its digest.
    digest: String,
    /// When it last became current (Unix nanoseconds): the GC keeps the latest.
    used_at: u128,
}

/// An artifact ready to be served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Exported {
    /// `sha256:<hex>`.
    pub(crate) digest: String,
    /// Whether an existing artifact was reused (nothing exported).
    pub(crate) reused: bool,
}

/// Whether the artifact of `sha` exists and was made with `spec_ignore` (then it is reused).
pub(crate) async fn is_current(
    store: &ArtifactStore,
    namespace: &str,
    name: &str,
    sha: &str,
    spec_ignore: Option<&str>,
) -> bool {
    let dir = store.repository_dir(namespace, name);
    dir.join(sha).is_dir()
        && read_record(&dir, sha)
            .await
            .is_some_and(|r| r.ignore == ignore_key(spec_ignore))
}

/// Makes (or reuses) the artifact of commit `sha` of the mirror `git` is in, and records it as
/// the repository's current one.
pub(crate) async fn export(
    git: &Git,
    store: &ArtifactStore,
    namespace: &str,
    name: &str,
    sha: &str,
    spec_ignore: Option<&str>,
) -> Result<Exported, ExportError> {
    let dir = store.repository_dir(namespace, name);
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| ExportError::Io { path, source }
    };
    let key = ignore_key(spec_ignore);
    let target = dir.join(sha);
    if target.is_dir() {
        if let Some(record) = read_record(&dir, sha).await.filter(|r| r.ignore == key) {
            let digest = record.digest.clone();
            write_record(
                &dir,
                sha,
                Record {
                    used_at: now(),
                    ..record
                },
            )
            .await
            .map_err(io(&dir))?;
            return Ok(Exported {
                digest,
                reused: true,
            });
        }
    }
    tokio::fs::create_dir_all(&dir).await.map_err(io(&dir))?;
    let stamp = now();
    let tmp = dir.join(format!(".tmp-{sha}-{stamp}"));
    let index = dir.join(format!(".tmp-{sha}-{stamp}.index"));
    tokio::fs::create_dir(&tmp).await.map_err(io(&tmp))?;
    let index_text = index.to_string_lossy().into_owned();
    let checkout = async {
        let git = git.clone().with_env("GIT_INDEX_FILE", &index_text);
        git.run(&["read-tree", sha]).await?;
        let mut work_tree = tmp.clone().into_os_string();
        work_tree.push("/");
        git.run(&[
            "--work-tree".as_ref(),
            work_tree.as_os_str(),
            "checkout-index".as_ref(),
            "--all".as_ref(),
            "--force".as_ref(),
        ])
        .await
    }
    .await;
    let _ = tokio::fs::remove_file(&index).await;
    if let Err(e) = checkout {
        let _ = tokio::fs::remove_dir_all(&tmp).await;
        return Err(e.into());
    }
    let tree = tmp.clone();
    let ignore = spec_ignore.map(str::to_owned);
    let digest = tokio::task::spawn_blocking(move || prune_and_digest(&tree, ignore.as_deref()))
        .await
        .map_err(|e| io::Error::other(e.to_string()))
        .and_then(|r| r);
    let digest = match digest {
        Ok(d) => d,
        Err(e) => {
            let _ = tokio::fs::remove_dir_all(&tmp).await;
            return Err(ExportError::Io {
                path: tmp,
                source: e,
            });
        }
    };
    // An artifact of the same commit made with other ignore rules is replaced: moved aside,
    // the new one renamed in, the old one removed.
    if tokio::fs::try_exists(&target).await.map_err(io(&target))? {
        let old = dir.join(format!(".old-{sha}-{stamp}"));
        tokio::fs::rename(&target, &old)
            .await
            .map_err(io(&target))?;
        let _ = tokio::fs::remove_dir_all(&old).await;
    }
    tokio::fs::rename(&tmp, &target)
        .await
        .map_err(io(&target))?;
    write_record(
        &dir,
        sha,
        Record {
            ignore: key,
            digest: digest.clone(),
            used_at: now(),
        },
    )
    .await
    .map_err(io(&dir))?;
    Ok(Exported {
        digest,
        reused: false,
    })
}

/// Deletes all but the [`KEEP`] most recently current artifacts of a repository (never
/// `current`), their records, and any temporary leftovers. Errors are logged, not returned:
/// a failed GC is retried at the next reconcile.
pub(crate) async fn gc(store: &ArtifactStore, namespace: &str, name: &str, current: &str) {
    let dir = store.repository_dir(namespace, name);
    let Ok(mut entries) = tokio::fs::read_dir(&dir).await else {
        return;
    };
    let mut artifacts: Vec<(u128, String)> = Vec::new();
    let mut leftovers = Vec::new();
    let mut records = Vec::new();
    while let Ok(Some(entry)) = entries.next_entry().await {
        let file_name = entry.file_name().to_string_lossy().into_owned();
        if file_name.starts_with(".tmp-") || file_name.starts_with(".old-") {
            leftovers.push(entry.path());
        } else if let Some(sha) = file_name
            .strip_prefix('.')
            .and_then(|n| n.strip_suffix(".json"))
        {
            records.push(sha.to_owned());
        } else if entry.file_type().await.is_ok_and(|t| t.is_dir()) {
            let used = read_record(&dir, &file_name).await.map_or(0, |r| r.used_at);
            artifacts.push((used, file_name));
        }
    }
    artifacts.sort_by(|a, b| b.cmp(a));
    let mut kept: Vec<&str> = vec![current];
    for (_, sha) in &artifacts {
        if kept.len() < KEEP && sha != current {
            kept.push(sha);
        }
    }
    for path in leftovers {
        remove_any(&path).await;
    }
    for (_, sha) in &artifacts {
        if !kept.contains(&sha.as_str()) {
            tracing::debug!(namespace, name, sha = %sha, "deleting an old artifact");
            remove_any(&dir.join(sha)).await;
            remove_any(&record_path(&dir, sha)).await;
        }
    }
    for sha in records {
        if !artifacts.iter().any(|(_, a)| *a == sha) {
            remove_any(&record_path(&dir, &sha)).await;
        }
    }
}

async fn remove_any(path: &Path) {
    let result = match tokio::fs::symlink_metadata(path).await {
        Ok(m) if m.is_dir() => tokio::fs::remove_dir_all(path).await,
        Ok(_) => tokio::fs::remove_file(path).await,
        Err(_) => return,
    };
    if let Err(e) = result {
        tracing::warn!(path = %path.display(), error = %e, "could not delete an old artifact");
    }
}

fn record_path(dir: &Path, sha: &str) -> PathBuf {
    dir.join(format!(".{sha}.json"))
}

async fn read_record(dir: &Path, sha: &str) -> Option<Record> {
    let bytes = tokio::fs::read(record_path(dir, sha)).await.ok()?;
    serde_json::from_slice(&bytes).ok()
}

async fn write_record(dir: &Path, sha: &str, record: Record) -> io::Result<()> {
    let bytes = serde_json::to_vec(&record).map_err(io::Error::other)?;
    let tmp = dir.join(format!(".tmp-record-{sha}"));
    tokio::fs::write(&tmp, bytes).await?;
    tokio::fs::rename(&tmp, record_path(dir, sha)).await
}

fn ignore_key(spec_ignore: Option<&str>) -> String {
    let mut ctx = Context::new(&SHA256);
    ctx.update(FORMAT.as_bytes());
    ctx.update(b"\0");
    if let Some(text) = spec_ignore {
        ctx.update(b"+");
        ctx.update(text.as_bytes());
    }
    hex(ctx.finish().as_ref())
}

fn now() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Removes from the exported tree at `root` what the ignore rules and the link rule leave out,
/// and returns the digest of the rest.
pub(crate) fn prune_and_digest(root: &Path, spec_ignore: Option<&str>) -> io::Result<String> {
    let mut rules = Rules::defaults();
    collect_sourceignores(root, "", &mut rules)?;
    if let Some(text) = spec_ignore {
        let mut spec = Rules::default();
        spec.add(text, "");
        rules.extend(spec);
    }
    let mut kept: Vec<(String, Entry)> = Vec::new();
    prune(root, "", &rules, &mut kept)?;
    kept.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    let mut ctx = Context::new(&SHA256);
    for (path, entry) in kept {
        let (kind, content) = match entry {
            Entry::File(p) => ("f", std::fs::read(p)?),
            Entry::Link(target) => ("l", target.into_bytes()),
        };
        ctx.update(path.as_bytes());
        ctx.update(b"\0");
        ctx.update(kind.as_bytes());
        ctx.update(b"\0");
        ctx.update(content.len().to_string().as_bytes());
        ctx.update(b"\0");
        ctx.update(&content);
    }
    Ok(format!("sha256:{}", hex(ctx.finish().as_ref())))
}

/// A kept file (its path on disk) or link (its target).
enum Entry {
    File(PathBuf),
    Link(String),
}

/// Sorted entries of a directory: (name, path, file type).
fn sorted_entries(dir: &Path) -> io::Result<Vec<(String, PathBuf, std::fs::FileType)>> {
    let mut entries = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        entries.push((
            entry.file_name().to_string_lossy().into_owned(),
            entry.path(),
            entry.file_type()?,
        ));
    }
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(entries)
}

fn join(parent: &str, name: &str) -> String {
    if parent.is_empty() {
        name.to_owned()
    } else {
        format!("{parent}/{name}")
    }
}

/// Adds the patterns of every `.sourceignore` below `dir` (`rel` from the root), parents first.
fn collect_sourceignores(dir: &Path, rel: &str, rules: &mut Rules) -> io::Result<()> {
    let entries = sorted_entries(dir)?;
    if let Some((_, path, t)) = entries.iter().find(|(n, _, _)| n == SOURCEIGNORE) {
        if t.is_file() {
            rules.add(&std::fs::read_to_string(path)?, rel);
        }
    }
    for (name, path, t) in &entries {
        if t.is_dir() && name != ".git" {
            collect_sourceignores(path, &join(rel, name), rules)?;
        }
    }
    Ok(())
}

fn prune(dir: &Path, rel: &str, rules: &Rules, kept: &mut Vec<(String, Entry)>) -> io::Result<()> {
    for (name, path, t) in sorted_entries(dir)? {
        let rel_path = join(rel, &name);
        if rules.is_ignored(&rel_path, t.is_dir()) {
            if t.is_dir() {
                std::fs::remove_dir_all(&path)?;
            } else {
                std::fs::remove_file(&path)?;
            }
        } else if t.is_dir() {
            prune(&path, &rel_path, rules, kept)?;
        } else if t.is_symlink() {
            let target = std::fs::read_link(&path)?;
            if stays_inside(rel, &target) {
                kept.push((rel_path, Entry::Link(target.to_string_lossy().into_owned())));
            } else {
                std::fs::remove_file(&path)?;
            }
        } else {
            kept.push((rel_path, Entry::File(path)));
        }
    }
    Ok(())
}

/// Whether a link in directory `rel` (from the root) pointing to `target` stays inside the
/// root.
fn stays_inside(rel: &str, target: &Path) -> bool {
    let mut depth = rel.split('/').filter(|s| !s.is_empty()).count();
    for component in target.components() {
        match component {
            Component::Normal(_) | Component::CurDir => depth += 1,
            Component::ParentDir => {
                if depth == 0 {
                    return false;
                }
                depth -= 1;
            }
            Component::RootDir | Component::Prefix(_) => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_should_stay_inside_the_artifact() {
        assert!(stays_inside("", Path::new("a/b")));
        assert!(stays_inside("a/b", Path::new("../c")));
        assert!(stays_inside("a", Path::new("../c")));
        assert!(!stays_inside("", Path::new("../c")));
        assert!(!stays_inside("a", Path::new("../../c")));
        assert!(!stays_inside("a", Path::new("/etc/passwd")));
    }

    #[test]
    fn pruning_should_apply_every_ignore_source_and_digest_what_is_left() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        let write = |p: &str, text: &str| {
            let path = root.join(p);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            std::fs::write(path, text).expect("write");
        };
        write("app.yaml", "a");
        write("notes.md", "n");
        write("sub/.sourceignore", "*.txt\n");
        write("sub/x.txt", "x");
        write("sub/keep.yaml", "k");
        write("top.txt", "t");
        std::os::unix::fs::symlink("/etc/passwd", root.join("escape")).expect("link");
        std::os::unix::fs::symlink("app.yaml", root.join("inside")).expect("link");
        let first = prune_and_digest(root, Some("*.md\n")).expect("prune");
        assert!(root.join("app.yaml").exists());
        assert!(!root.join("notes.md").exists());
        assert!(!root.join("sub/x.txt").exists());
        assert!(root.join("sub/keep.yaml").exists());
        assert!(
            root.join("top.txt").exists(),
            "the .sourceignore of sub/ applies in sub/ only"
        );
        assert!(std::fs::symlink_metadata(root.join("escape")).is_err());
        assert!(std::fs::symlink_metadata(root.join("inside")).is_ok());
        // The same tree digests the same; a changed file changes it.
        assert_eq!(prune_and_digest(root, None).expect("again"), first);
        write("sub/keep.yaml", "changed");
        assert_ne!(prune_and_digest(root, None).expect("changed"), first);
        assert!(first.starts_with("sha256:") && first.len() == 7 + 64);
    }
}

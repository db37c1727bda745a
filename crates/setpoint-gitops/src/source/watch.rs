//! What the source loop watches besides its objects: the refs of local repositories, so a new
//! commit is fetched at once rather than at the next `interval`; and deletions, whose mirror
//! and artifacts it removes.
//!
//! A URL is local when it is an absolute path (`/srv/git/app`) or a `file://` URL
//! (`file:///srv/git/app`). For each GitRepository with a local URL that is not suspended, a
//! task polls the repository's refs every [`POLL`]: the size, modification time and inode of
//! `HEAD`, `packed-refs` and every file under `refs/` and `reftable/` of its git directory
//! (`<path>/.git`, the directory a `.git` file names and its common directory for linked
//! worktrees, or `<path>` itself for a bare repository). Any difference enqueues the
//! GitRepository. Nothing is read but metadata, so a poll costs a few `stat` calls.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use setpoint_runtime::{Deleted, Enqueuer, EventHandler, ObjectKey};
use tokio_util::sync::CancellationToken;

use super::mirror::mirror_dir;
use crate::{ArtifactStore, GitRepository};

/// How often a local repository's refs are looked at.
pub(crate) const POLL: Duration = Duration::from_millis(500);

/// The filesystem path of a local URL, or `None` for a remote one.
pub(crate) fn local_path(url: &str) -> Option<PathBuf> {
    if url.starts_with('/') {
        return Some(PathBuf::from(url));
    }
    let rest = url.strip_prefix("file://")?;
    // `file:///path` (empty host) or `file://localhost/path`.
    let path = rest.strip_prefix("localhost").unwrap_or(rest);
    path.starts_with('/').then(|| PathBuf::from(path))
}

/// The event handler that keeps one poller per local GitRepository and cleans up after
/// deleted ones.
pub(crate) struct LocalRepos {
    enqueuer: Enqueuer<ObjectKey>,
    artifacts: ArtifactStore,
    /// Cancelled when the loop stops: every poller stops with it.
    shutdown: CancellationToken,
    /// The poller of each watched GitRepository: the path it polls, and its stop token.
    pollers: Mutex<HashMap<ObjectKey, (PathBuf, CancellationToken)>>,
}

impl LocalRepos {
    /// A handler enqueueing into `enqueuer`, its pollers stopping with `shutdown`.
    pub(crate) fn new(
        enqueuer: Enqueuer<ObjectKey>,
        artifacts: ArtifactStore,
        shutdown: CancellationToken,
    ) -> LocalRepos {
        LocalRepos {
            enqueuer,
            artifacts,
            shutdown,
            pollers: Mutex::new(HashMap::new()),
        }
    }

    /// Starts, restarts or stops the poller of `repo` to match its spec.
    fn track(&self, repo: &GitRepository) {
        let key = ObjectKey::of(repo);
        let wanted = if repo.spec.suspend {
            None
        } else {
            local_path(&repo.spec.url)
        };
        let mut pollers = self.pollers.lock();
        if let Some((path, stop)) = pollers.get(&key) {
            if Some(path) == wanted.as_ref() {
                return;
            }
            stop.cancel();
            pollers.remove(&key);
        }
        if let Some(path) = wanted {
            let stop = self.shutdown.child_token();
            tokio::spawn(poll(
                path.clone(),
                key.clone(),
                self.enqueuer.clone(),
                stop.clone(),
            ));
            pollers.insert(key, (path, stop));
        }
    }
}

impl EventHandler<GitRepository> for LocalRepos {
    fn on_add(&self, object: &Arc<GitRepository>, _in_initial_list: bool) {
        self.track(object);
    }

    fn on_update(&self, _old: &Arc<GitRepository>, new: &Arc<GitRepository>) {
        self.track(new);
    }

    fn on_delete(&self, deleted: &Deleted<GitRepository>) {
        let repo = deleted.object();
        let key = ObjectKey::of(repo.as_ref());
        if let Some((_, stop)) = self.pollers.lock().remove(&key) {
            stop.cancel();
        }
        let namespace = key.namespace.clone().unwrap_or_default();
        let artifacts = self.artifacts.repository_dir(&namespace, &key.name);
        let mirror = mirror_dir(self.artifacts.root(), &namespace, &key.name);
        tokio::spawn(async move {
            for dir in [artifacts, mirror] {
                if let Err(e) = tokio::fs::remove_dir_all(&dir).await {
                    if e.kind() != std::io::ErrorKind::NotFound {
                        tracing::warn!(dir = %dir.display(), error = %e, "deleting the files of a deleted GitRepository");
                    }
                }
            }
            tracing::info!(gitrepository = %key, "deleted its mirror and artifacts");
        });
    }
}

/// Polls `path`'s refs until `stop`, enqueueing `key` on every change.
async fn poll(
    path: PathBuf,
    key: ObjectKey,
    enqueuer: Enqueuer<ObjectKey>,
    stop: CancellationToken,
) {
    let mut last = fingerprint(&path);
    let mut ticks = tokio::time::interval(POLL);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = ticks.tick() => {}
        }
        let now = fingerprint(&path);
        if now != last {
            tracing::debug!(gitrepository = %key, path = %path.display(), "local repository changed");
            enqueuer.add(key.clone());
            last = now;
        }
    }
}

/// One file's identity for change detection.
type Stamp = (PathBuf, u64, i64, i64, u64);

/// The metadata of every ref file of the repository at `path` (empty if there is none).
fn fingerprint(path: &Path) -> Vec<Stamp> {
    let mut stamps = Vec::new();
    for dir in git_dirs(path) {
        for name in ["HEAD", "packed-refs"] {
            stamp(&dir.join(name), &mut stamps);
        }
        for sub in ["refs", "reftable"] {
            walk(&dir.join(sub), &mut stamps);
        }
    }
    stamps.sort();
    stamps
}

/// The git directories holding `path`'s refs.
fn git_dirs(path: &Path) -> Vec<PathBuf> {
    let dot_git = path.join(".git");
    let git_dir = if dot_git.is_dir() {
        dot_git
    } else if dot_git.is_file() {
        // A linked worktree or a submodule: `gitdir: <dir>`.
        let Some(dir) = std::fs::read_to_string(&dot_git).ok().and_then(|text| {
            text.lines()
                .find_map(|l| l.strip_prefix("gitdir:"))
                .map(|d| path.join(d.trim()))
        }) else {
            return Vec::new();
        };
        dir
    } else {
        path.to_owned()
    };
    let mut dirs = vec![git_dir.clone()];
    if let Ok(common) = std::fs::read_to_string(git_dir.join("commondir")) {
        dirs.push(git_dir.join(common.trim()));
    }
    dirs
}

fn stamp(path: &Path, stamps: &mut Vec<Stamp>) {
    use std::os::unix::fs::MetadataExt as _;
    if let Ok(m) = std::fs::metadata(path) {
        stamps.push((path.to_owned(), m.len(), m.mtime(), m.mtime_nsec(), m.ino()));
    }
}

fn walk(dir: &Path, stamps: &mut Vec<Stamp>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        match entry.file_type() {
            Ok(t) if t.is_dir() => walk(&path, stamps),
            Ok(_) => stamp(&path, stamps),
            Err(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_urls_should_be_paths_and_file_urls() {
        assert_eq!(local_path("/srv/repo"), Some(PathBuf::from("/srv/repo")));
        assert_eq!(
            local_path("file:///srv/repo"),
            Some(PathBuf::from("/srv/repo"))
        );
        assert_eq!(
            local_path("file://localhost/srv/repo"),
            Some(PathBuf::from("/srv/repo"))
        );
        for remote in [
            "https://h/r.git",
            "git@h:r.git",
            "ssh://h/r",
            "relative/path",
            "file://host/x",
        ] {
            assert_eq!(local_path(remote), None, "{remote}");
        }
    }

    #[test]
    fn a_new_ref_should_change_the_fingerprint() {
        let dir = tempfile::tempdir().expect("tempdir");
        let git = dir.path().join(".git");
        std::fs::create_dir_all(git.join("refs/heads")).expect("mkdir");
        std::fs::write(git.join("HEAD"), "ref: refs/heads/main\n").expect("HEAD");
        let before = fingerprint(dir.path());
        std::fs::write(git.join("refs/heads/main"), "0".repeat(40)).expect("ref");
        assert_ne!(fingerprint(dir.path()), before);
    }
}

//! The bare mirror of each GitRepository, `<artifact root>/mirrors/<ns>/<name>.git`: made
//! with `git init --bare`, refreshed with `git fetch --prune --force` of every branch and tag
//! (so a ref deleted upstream goes away here too), and remade from scratch when `spec.url`
//! changes (objects of another repository must not satisfy a commit pin).

use std::path::{Path, PathBuf};

use super::git::{Git, GitError};

/// The file in a mirror recording the URL it mirrors.
const URL_FILE: &str = "setpoint-url";

/// Why a mirror could not be refreshed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum MirrorError {
    /// A git command failed (its stderr is in the message).
    #[error(transparent)]
    Git(#[from] GitError),
    /// The mirror's directory could not be made or cleaned.
    #[error("preparing the mirror {path}")]
    Io {
        /// The directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// The mirror directory of a GitRepository under the artifact root.
pub(crate) fn mirror_dir(root: &Path, namespace: &str, name: &str) -> PathBuf {
    root.join("mirrors")
        .join(namespace)
        .join(format!("{name}.git"))
}

/// Makes the mirror if missing (or remakes it for another URL), then fetches every branch and
/// tag of `url` into it, pruning refs gone upstream. `git` carries the credentials and the
/// time limit.
pub(crate) async fn fetch(git: &Git, mirror: &Path, url: &str) -> Result<(), MirrorError> {
    let io = |source| MirrorError::Io {
        path: mirror.to_owned(),
        source,
    };
    let recorded = tokio::fs::read_to_string(mirror.join(URL_FILE)).await.ok();
    if recorded.as_deref() != Some(url) {
        if tokio::fs::try_exists(mirror).await.map_err(io)? {
            tokio::fs::remove_dir_all(mirror).await.map_err(io)?;
        }
        if let Some(parent) = mirror.parent() {
            tokio::fs::create_dir_all(parent).await.map_err(io)?;
        }
        git.run(&[
            "init".as_ref(),
            "--bare".as_ref(),
            "--quiet".as_ref(),
            mirror.as_os_str(),
        ])
        .await?;
        tokio::fs::write(mirror.join(URL_FILE), url)
            .await
            .map_err(io)?;
    }
    git.in_repo(mirror)
        .run(&[
            "fetch",
            "--prune",
            "--force",
            "--no-write-fetch-head",
            "--quiet",
            "--",
            url,
            "+refs/heads/*:refs/heads/*",
            "+refs/tags/*:refs/tags/*",
        ])
        .await?;
    Ok(())
}

/// The branch the remote's `HEAD` points to (`git ls-remote --symref URL HEAD`), if it says.
pub(crate) async fn remote_head(git: &Git, url: &str) -> Result<Option<String>, GitError> {
    let out = git
        .run(&["ls-remote", "--symref", "--", url, "HEAD"])
        .await?;
    Ok(parse_symref(&String::from_utf8_lossy(&out)))
}

/// The branch in `ref: refs/heads/<branch>\tHEAD` of `ls-remote --symref` output.
fn parse_symref(output: &str) -> Option<String> {
    output.lines().find_map(|line| {
        let target = line.strip_prefix("ref: ")?.strip_suffix("\tHEAD")?;
        target.strip_prefix("refs/heads/").map(str::to_owned)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_remote_head_should_be_read_from_ls_remote() {
        let out = "ref: refs/heads/trunk\tHEAD\n0123456789abcdef0123456789abcdef01234567\tHEAD\n";
        assert_eq!(parse_symref(out).as_deref(), Some("trunk"));
        assert_eq!(parse_symref("0123\tHEAD\n"), None);
        assert_eq!(
            mirror_dir(Path::new("/r"), "ns", "n"),
            Path::new("/r/mirrors/ns/n.git")
        );
    }
}

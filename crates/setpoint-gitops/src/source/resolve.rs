//! Resolving `spec.ref` to one commit of the mirror, and the revision string that names it:
//! `<branch>@sha1:<sha>` for a branch (the remote's HEAD branch when none is given, else
//! `master`, else `main`), `<tag>@sha1:<sha>` for a tag (peeled to its commit) or the tag a
//! semver range chose, `sha1:<sha>` for a bare commit pin, `<branch>@sha1:<sha>` for a commit
//! pinned on a branch (which must contain it).
//!
//! [`check_ref`] validates a ref without git (what only a spec change fixes);
//! [`resolve`] then answers from the fetched mirror.

use super::git::{Git, GitError};
use super::semver::{Range, RangeError, Tag};
use crate::kinds::GitRepositoryRef;

/// A commit and the revision string naming it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Resolved {
    /// `<ref>@sha1:<sha>` or `sha1:<sha>`.
    pub(crate) revision: String,
    /// The commit's full hash.
    pub(crate) sha: String,
}

/// A ref that no fetch can resolve: only a spec change fixes it.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum RefError {
    /// `tag` and `semver` are both set.
    #[error("spec.ref: set at most one of tag and semver")]
    TagAndSemver,
    /// `commit` is not a full hash.
    #[error("spec.ref.commit {0:?} is not a full commit hash (40 or 64 hexadecimal digits)")]
    Commit(String),
    /// A name git would not take as a ref.
    #[error("spec.ref.{field} {name:?} is not a valid ref name")]
    Name {
        /// `branch` or `tag`.
        field: &'static str,
        /// The name.
        name: String,
    },
    /// The semver range does not parse.
    #[error("spec.ref.semver: {0}")]
    Semver(#[from] RangeError),
}

/// Why the mirror has no commit for the ref.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ResolveError {
    /// A git command failed.
    #[error(transparent)]
    Git(#[from] GitError),
    /// The ref is not in the repository.
    #[error("{0}")]
    NotFound(String),
}

/// The ref's problems git would not fix, if any; the parsed semver range when it has one.
pub(crate) fn check_ref(reference: Option<&GitRepositoryRef>) -> Result<Option<Range>, RefError> {
    let Some(r) = reference else {
        return Ok(None);
    };
    if r.tag.is_some() && r.semver.is_some() {
        return Err(RefError::TagAndSemver);
    }
    if let Some(commit) = &r.commit {
        let hex = commit.bytes().all(|b| b.is_ascii_hexdigit());
        if !hex || !(commit.len() == 40 || commit.len() == 64) {
            return Err(RefError::Commit(commit.clone()));
        }
    }
    for (field, name) in [("branch", &r.branch), ("tag", &r.tag)] {
        if let Some(name) = name {
            if !valid_ref_name(name) {
                return Err(RefError::Name {
                    field,
                    name: name.clone(),
                });
            }
        }
    }
    r.semver
        .as_deref()
        .map(Range::parse)
        .transpose()
        .map_err(RefError::from)
}

/// The rules of `git check-ref-format` that matter here: no empty or dot-led components, no
/// `..`, no control characters, spaces or `~^:?*[\`, no leading `-`, no trailing `.lock`/`/`.
fn valid_ref_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('-')
        && !name.starts_with('/')
        && !name.ends_with('/')
        && !name.ends_with(".lock")
        && !name.ends_with('.')
        && !name.contains("..")
        && !name.contains("@{")
        && !name.contains("//")
        && !name.split('/').any(|c| c.starts_with('.'))
        && !name
            .chars()
            .any(|c| c.is_control() || " ~^:?*[\\".contains(c))
}

/// Resolves the ref in the fetched mirror. `range` is [`check_ref`]'s; `remote_head` is the
/// remote's HEAD branch, asked for only when the ref names nothing.
pub(crate) async fn resolve(
    git: &Git,
    reference: Option<&GitRepositoryRef>,
    range: Option<&Range>,
    remote_head: Option<String>,
) -> Result<Resolved, ResolveError> {
    let r = reference.cloned().unwrap_or_default();
    if let Some(range) = range {
        let tags = tags(git).await?;
        let semver = r.semver.as_deref().unwrap_or_default();
        let tag = range.select(&tags).ok_or_else(|| {
            ResolveError::NotFound(format!("no tag matches the semver range '{semver}'"))
        })?;
        return Ok(Resolved {
            revision: format!("{}@sha1:{}", tag.name, tag.sha),
            sha: tag.sha.clone(),
        });
    }
    if let Some(tag) = &r.tag {
        let sha = commit_of(git, &format!("refs/tags/{tag}"))
            .await?
            .ok_or_else(|| ResolveError::NotFound(format!("tag '{tag}' not found")))?;
        return Ok(Resolved {
            revision: format!("{tag}@sha1:{sha}"),
            sha,
        });
    }
    if let Some(commit) = &r.commit {
        let sha = commit_of(git, commit).await?.ok_or_else(|| {
            ResolveError::NotFound(format!(
                "commit '{commit}' not found on any branch or tag of the repository"
            ))
        })?;
        return match &r.branch {
            None => Ok(Resolved {
                revision: format!("sha1:{sha}"),
                sha,
            }),
            Some(branch) => {
                let head = format!("refs/heads/{branch}");
                if commit_of(git, &head).await?.is_none() {
                    return Err(ResolveError::NotFound(format!(
                        "branch '{branch}' not found"
                    )));
                }
                if !git
                    .check(&["merge-base", "--is-ancestor", &sha, &head])
                    .await?
                {
                    return Err(ResolveError::NotFound(format!(
                        "commit '{sha}' is not on branch '{branch}'"
                    )));
                }
                Ok(Resolved {
                    revision: format!("{branch}@sha1:{sha}"),
                    sha,
                })
            }
        };
    }
    let branch = match r.branch {
        Some(branch) => branch,
        None => default_branch(git, remote_head).await?,
    };
    let sha = commit_of(git, &format!("refs/heads/{branch}"))
        .await?
        .ok_or_else(|| ResolveError::NotFound(format!("branch '{branch}' not found")))?;
    Ok(Resolved {
        revision: format!("{branch}@sha1:{sha}"),
        sha,
    })
}

/// The remote's HEAD branch if it named one that was fetched, else `master`, else `main`.
async fn default_branch(git: &Git, remote_head: Option<String>) -> Result<String, ResolveError> {
    let candidates = remote_head
        .into_iter()
        .chain(["master".to_owned(), "main".to_owned()]);
    for branch in candidates {
        if commit_of(git, &format!("refs/heads/{branch}"))
            .await?
            .is_some()
        {
            return Ok(branch);
        }
    }
    Err(ResolveError::NotFound(
        "the repository has no default branch (its HEAD names none, and it has neither master \
         nor main): set spec.ref.branch"
            .to_owned(),
    ))
}

/// The commit `rev` names in the mirror, if any.
async fn commit_of(git: &Git, rev: &str) -> Result<Option<String>, GitError> {
    let spec = format!("{rev}^{{commit}}");
    match git
        .run(&[
            "rev-parse",
            "--verify",
            "--quiet",
            "--end-of-options",
            &spec,
        ])
        .await
    {
        Ok(out) => Ok(Some(String::from_utf8_lossy(&out).trim().to_owned())),
        Err(GitError::Failed { code: Some(1), .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Every tag with its commit and that commit's committer time.
async fn tags(git: &Git) -> Result<Vec<Tag>, GitError> {
    let out = git
        .run(&[
            "for-each-ref",
            "--format=%(refname:strip=2)%00%(objectname)%00%(*objectname)%00%(committerdate:unix)%00%(*committerdate:unix)",
            "refs/tags",
        ])
        .await?;
    Ok(String::from_utf8_lossy(&out)
        .lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split('\0').collect();
            let [name, object, peeled, time, peeled_time] = f.as_slice() else {
                return None;
            };
            let (sha, time) = if peeled.is_empty() {
                (object, time)
            } else {
                (peeled, peeled_time)
            };
            Some(Tag {
                name: (*name).to_owned(),
                sha: (*sha).to_owned(),
                time: time.parse().unwrap_or(0),
            })
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refs_only_a_spec_change_fixes_should_be_caught_before_git() {
        let r = |f: fn(&mut GitRepositoryRef)| {
            let mut r = GitRepositoryRef::default();
            f(&mut r);
            check_ref(Some(&r)).map(|_| ())
        };
        assert_eq!(r(|_| {}), Ok(()));
        assert_eq!(
            r(|r| {
                r.tag = Some("v1".into());
                r.semver = Some("1.x".into());
            }),
            Err(RefError::TagAndSemver)
        );
        assert!(matches!(
            r(|r| r.commit = Some("abc123".into())),
            Err(RefError::Commit(_))
        ));
        assert_eq!(r(|r| r.commit = Some("a".repeat(40))), Ok(()));
        assert!(matches!(
            r(|r| r.branch = Some("--upload-pack=x".into())),
            Err(RefError::Name { .. })
        ));
        assert!(matches!(
            r(|r| r.tag = Some("a..b".into())),
            Err(RefError::Name { .. })
        ));
        assert!(matches!(
            r(|r| r.semver = Some("banana".into())),
            Err(RefError::Semver(_))
        ));
        assert_eq!(r(|r| r.branch = Some("feature/x-1".into())), Ok(()));
    }
}

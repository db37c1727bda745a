//! Running the `git` binary: never through a shell, never prompting, never reading the user's
//! or the system's git configuration, and bounded in time (the child is killed when its time
//! is up). Every git invocation of the source loop goes through [`Git::run`].
//!
//! Git runs in a process group of its own; a command that times out or whose future is
//! dropped has its whole group killed (git's ssh, remote helpers and hooks with it).
//!
//! Credentials reach git only through its environment (see `auth.rs`), never its arguments,
//! and error messages have the user-info part of URLs (`https://user:secret@host`) removed.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

/// The most of git's standard error kept in a message.
const STDERR_LIMIT: usize = 600;

/// Why a git command failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum GitError {
    /// `git` could not be started (not installed, not on `PATH`).
    #[error("starting git {command}")]
    Spawn {
        /// The subcommand.
        command: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The command took longer than its limit and was killed.
    #[error("git {command} timed out after {timeout:?}")]
    Timeout {
        /// The subcommand.
        command: String,
        /// The limit.
        timeout: Duration,
    },
    /// The command exited unsuccessfully; `stderr` is git's message, trimmed.
    #[error("git {command} failed: {stderr}")]
    Failed {
        /// The subcommand.
        command: String,
        /// The exit code, if it exited.
        code: Option<i32>,
        /// What git said (trimmed, user-info removed from URLs).
        stderr: String,
    },
}

/// A git command line under construction: where it runs, its environment, its time limit.
#[derive(Debug, Clone)]
pub(crate) struct Git {
    git_dir: Option<PathBuf>,
    env: Vec<(String, String)>,
    timeout: Duration,
}

impl Git {
    /// Git with no repository, limited to `timeout` per command.
    pub(crate) fn new(timeout: Duration) -> Git {
        Git {
            git_dir: None,
            env: Vec::new(),
            timeout,
        }
    }

    /// The same, on the repository at `git_dir` (`--git-dir`).
    pub(crate) fn in_repo(&self, git_dir: &Path) -> Git {
        Git {
            git_dir: Some(git_dir.to_owned()),
            ..self.clone()
        }
    }

    /// The same, with `name=value` in the environment.
    pub(crate) fn with_env(mut self, name: &str, value: &str) -> Git {
        self.env.push((name.to_owned(), value.to_owned()));
        self
    }

    /// The same, with several variables.
    pub(crate) fn with_envs(mut self, vars: &[(String, String)]) -> Git {
        self.env.extend(vars.iter().cloned());
        self
    }

    /// Runs `git <args>` and returns its standard output; a non-zero exit is an error.
    ///
    /// Cancel-safe: dropping the future kills the child.
    pub(crate) async fn run<S: AsRef<OsStr>>(&self, args: &[S]) -> Result<Vec<u8>, GitError> {
        let (code, stdout, stderr, command) = self.output(args).await?;
        if code == Some(0) {
            Ok(stdout)
        } else {
            Err(GitError::Failed {
                command,
                code,
                stderr: trim_stderr(&stderr),
            })
        }
    }

    /// Runs `git <args>` and returns whether it exited 0 (1 is "no", anything else an error):
    /// for the commands that answer a question by their exit code (`merge-base --is-ancestor`,
    /// `rev-parse --verify --quiet`).
    pub(crate) async fn check<S: AsRef<OsStr>>(&self, args: &[S]) -> Result<bool, GitError> {
        let (code, _, stderr, command) = self.output(args).await?;
        match code {
            Some(0) => Ok(true),
            Some(1) => Ok(false),
            _ => Err(GitError::Failed {
                command,
                code,
                stderr: trim_stderr(&stderr),
            }),
        }
    }

    async fn output<S: AsRef<OsStr>>(
        &self,
        args: &[S],
    ) -> Result<(Option<i32>, Vec<u8>, Vec<u8>, String), GitError> {
        let command = args
            .first()
            .map(|a| a.as_ref().to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut cmd = tokio::process::Command::new("git");
        // Nothing of the parent's git environment (GIT_DIR, GIT_INDEX_FILE, …) leaks in.
        for (name, _) in std::env::vars_os() {
            if name.to_string_lossy().starts_with("GIT_") {
                cmd.env_remove(name);
            }
        }
        cmd.env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_SSH_COMMAND", "ssh -o BatchMode=yes")
            .env("LC_ALL", "C");
        for (name, value) in &self.env {
            cmd.env(name, value);
        }
        // Never run hooks or a remote's helper commands; no credential helper of anyone's.
        cmd.args([
            "-c",
            "protocol.ext.allow=never",
            "-c",
            "core.hooksPath=/dev/null",
            "-c",
            "credential.helper=",
            "-c",
            "core.askPass=",
        ]);
        if let Some(dir) = &self.git_dir {
            cmd.arg("--git-dir").arg(dir);
        }
        cmd.args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        let child = cmd.spawn().map_err(|source| GitError::Spawn {
            command: command.clone(),
            source,
        })?;
        let mut group = KillGroup(
            child
                .id()
                .and_then(|id| rustix::process::Pid::from_raw(i32::try_from(id).ok()?)),
        );
        let result = tokio::time::timeout(self.timeout, child.wait_with_output()).await;
        if let Ok(Ok(_)) = &result {
            // Git exited and was reaped: its group may be gone, and its id reused.
            group.0 = None;
        }
        match result {
            Err(_) => Err(GitError::Timeout {
                command,
                timeout: self.timeout,
            }),
            Ok(Err(source)) => Err(GitError::Spawn { command, source }),
            Ok(Ok(out)) => Ok((out.status.code(), out.stdout, out.stderr, command)),
        }
    }
}

/// Kills a process group when dropped, unless disarmed (`None`).
struct KillGroup(Option<rustix::process::Pid>);

impl Drop for KillGroup {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
    }
}

/// Git's standard error as one line for a condition message: blank lines and progress dropped,
/// lines joined with `; `, URL user-info removed, at most [`STDERR_LIMIT`] bytes.
pub(crate) fn trim_stderr(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    let joined = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("hint:"))
        .collect::<Vec<_>>()
        .join("; ");
    let mut message = redact_userinfo(&joined);
    if message.len() > STDERR_LIMIT {
        let mut end = STDERR_LIMIT;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        message.truncate(end);
        message.push('…');
    }
    if message.is_empty() {
        "(no message)".to_owned()
    } else {
        message
    }
}

/// `text` with the user-info of every `scheme://user:password@host` removed.
pub(crate) fn redact_userinfo(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("://") {
        let (head, tail) = rest.split_at(i + 3);
        out.push_str(head);
        let authority_end = tail
            .find(|c: char| c == '/' || c.is_whitespace() || c == '\'' || c == '"')
            .unwrap_or(tail.len());
        let authority = &tail[..authority_end];
        match authority.rfind('@') {
            Some(at) => {
                out.push_str("***@");
                out.push_str(&authority[at + 1..]);
            }
            None => out.push_str(authority),
        }
        rest = &tail[authority_end..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_command_over_its_time_should_be_killed_and_reported() {
        let git = Git::new(Duration::from_millis(200));
        let err = git
            .run(&["-c", "alias.wait=!sleep 30", "wait"])
            .await
            .expect_err("times out");
        assert!(matches!(err, GitError::Timeout { .. }), "{err}");
    }

    #[test]
    fn credentials_in_urls_should_be_redacted() {
        assert_eq!(
            redact_userinfo("fatal: unable to access 'https://bob:s3cret@example.com/r.git/': 403"),
            "fatal: unable to access 'https://***@example.com/r.git/': 403"
        );
        assert_eq!(
            redact_userinfo("file:///tmp/x and ssh://git@h:22/p"),
            "file:///tmp/x and ssh://***@h:22/p"
        );
    }

    #[test]
    fn stderr_should_become_one_short_line() {
        let long = "x".repeat(2 * STDERR_LIMIT);
        assert!(trim_stderr(long.as_bytes()).len() <= STDERR_LIMIT + '…'.len_utf8());
        assert_eq!(
            trim_stderr(b"fatal: one\n\nhint: try\nfatal: two\n"),
            "fatal: one; fatal: two"
        );
        assert_eq!(trim_stderr(b""), "(no message)");
    }
}

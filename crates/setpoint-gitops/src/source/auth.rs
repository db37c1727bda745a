//! `spec.secretRef`: credentials from a Secret of the GitRepository's namespace, handed to git
//! through its environment only (never its command line, which `ps` shows):
//!
//! - `username` and `password`: HTTPS basic auth, as an `Authorization` header in git's
//!   configuration given by environment (`GIT_CONFIG_COUNT`/`GIT_CONFIG_KEY_0`/
//!   `GIT_CONFIG_VALUE_0` = `http.extraHeader`), sent on every request of that one fetch;
//! - `identity` (a private key, PEM or OpenSSH) and optionally `known_hosts`: SSH, through
//!   `GIT_SSH_COMMAND`, with the key (and the known hosts) written to a private temporary
//!   directory (0700, the key 0600) that is removed when the fetch is done. Host keys are always
//!   checked: against `known_hosts` when given, else against the process's own
//!   `~/.ssh/known_hosts`.

use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::Path;

use base64::Engine as _;
use k8s_openapi::api::core::v1::Secret;
use setpoint_runtime::Client;

/// Why the credentials could not be had (`Ready=False`, reason `AuthenticationFailed`).
#[derive(Debug, thiserror::Error)]
pub(crate) enum AuthError {
    /// The Secret does not exist.
    #[error("secret '{namespace}/{name}' not found")]
    Missing {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
    /// The Secret could not be read.
    #[error("reading secret '{namespace}/{name}': {source}")]
    Read {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// The Secret has neither credential form.
    #[error(
        "secret '{namespace}/{name}' has neither 'username' and 'password' (HTTPS) nor \
         'identity' (SSH)"
    )]
    NoCredentials {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
    /// The key files could not be written.
    #[error("writing the SSH key to a temporary file")]
    Io(#[source] std::io::Error),
}

/// Credentials for one fetch: environment variables for git, and the directory holding key
/// files (removed when this is dropped).
#[derive(Debug, Default)]
pub(crate) struct GitAuth {
    /// What git's environment gets.
    pub(crate) env: Vec<(String, String)>,
    /// The private directory of the key files, deleted on drop.
    _dir: Option<tempfile::TempDir>,
}

/// The credentials `secret_name` (in `namespace`) holds; no Secret named, none.
pub(crate) async fn credentials(
    client: &Client,
    namespace: &str,
    secret_name: Option<&str>,
) -> Result<GitAuth, AuthError> {
    let Some(name) = secret_name else {
        return Ok(GitAuth::default());
    };
    let secret = client
        .namespaced_api::<Secret>(namespace)
        .get_opt(name)
        .await
        .map_err(|source| AuthError::Read {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            source,
        })?
        .ok_or_else(|| AuthError::Missing {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        })?;
    let data = secret.data.unwrap_or_default();
    let get = |key: &str| data.get(key).map(|v| v.0.clone());
    if let (Some(user), Some(password)) = (get("username"), get("password")) {
        return Ok(basic(&user, &password));
    }
    if let Some(identity) = get("identity") {
        return ssh(&identity, get("known_hosts").as_deref()).map_err(AuthError::Io);
    }
    Err(AuthError::NoCredentials {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
    })
}

fn basic(user: &[u8], password: &[u8]) -> GitAuth {
    let mut pair = user.to_vec();
    pair.push(b':');
    pair.extend_from_slice(password);
    let header = format!(
        "Authorization: Basic {}",
        base64::engine::general_purpose::STANDARD.encode(pair)
    );
    GitAuth {
        env: vec![
            ("GIT_CONFIG_COUNT".into(), "1".into()),
            ("GIT_CONFIG_KEY_0".into(), "http.extraHeader".into()),
            ("GIT_CONFIG_VALUE_0".into(), header),
        ],
        _dir: None,
    }
}

fn ssh(identity: &[u8], known_hosts: Option<&[u8]>) -> std::io::Result<GitAuth> {
    let dir = tempfile::Builder::new()
        .prefix("setpoint-git-ssh-")
        .tempdir()?;
    let key = dir.path().join("identity");
    private_file(&key, identity)?;
    let mut command = format!(
        "ssh -F /dev/null -o BatchMode=yes -o IdentitiesOnly=yes -o StrictHostKeyChecking=yes -i {}",
        quote(&key)
    );
    if let Some(hosts) = known_hosts {
        let path = dir.path().join("known_hosts");
        private_file(&path, hosts)?;
        command.push_str(&format!(" -o UserKnownHostsFile={}", quote(&path)));
    }
    Ok(GitAuth {
        env: vec![("GIT_SSH_COMMAND".into(), command)],
        _dir: Some(dir),
    })
}

/// Writes `bytes` to a new file readable by its owner only (a key must end with a newline for
/// ssh to read it).
fn private_file(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(bytes)?;
    if !bytes.ends_with(b"\n") {
        file.write_all(b"\n")?;
    }
    file.sync_all()
}

/// A path quoted for the shell git runs `GIT_SSH_COMMAND` with.
fn quote(path: &Path) -> String {
    format!("'{}'", path.to_string_lossy().replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    #[tokio::test]
    async fn basic_auth_should_reach_git_through_its_environment() {
        let auth = basic(b"u", b"p");
        let git =
            super::super::git::Git::new(std::time::Duration::from_secs(30)).with_envs(&auth.env);
        let out = git
            .run(&["config", "--get", "http.extraHeader"])
            .await
            .expect("git config");
        assert_eq!(
            String::from_utf8_lossy(&out).trim(),
            "Authorization: Basic dTpw"
        );
    }

    #[test]
    fn ssh_keys_should_be_private_and_removed_after_use() {
        let auth = ssh(b"KEY", Some(b"host ssh-ed25519 AAAA")).expect("ssh auth");
        let command = &auth.env[0].1;
        assert!(command.contains("StrictHostKeyChecking=yes"), "{command}");
        let dir = auth._dir.as_ref().expect("dir").path().to_owned();
        let mode = std::fs::metadata(dir.join("identity"))
            .expect("key")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(std::fs::read(dir.join("identity")).expect("read"), b"KEY\n");
        drop(auth);
        assert!(!dir.exists());
        assert_eq!(quote(Path::new("/a b/it's")), r"'/a b/it'\''s'");
    }
}

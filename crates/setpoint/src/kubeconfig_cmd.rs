//! `setpoint kubeconfig`: kubeconfigs for other users and for nodes, made from the cluster's
//! credentials in `DATA_DIR/pki` (run it where the server's data directory is).
//!
//! - `setpoint kubeconfig user NAME [--group G]…`: a client certificate `CN=NAME`, `O=G…`
//!   signed by the cluster CA (valid `--expiration`, one year by default); or, with `--token`,
//!   a random bearer token appended to the static token file `DATA_DIR/pki/tokens.csv`
//!   (kube-apiserver's `--token-auth-file` format `token,user,uid,"group1,group2"`, mode 0600).
//! - `setpoint kubeconfig node NODE`: a client certificate `CN=system:node:NODE`,
//!   `O=system:nodes`, the identity a node agent presents.
//!
//! The kubeconfig (one cluster trusting the CA, one user, one context, current) goes to
//! standard output or to `-o FILE` (mode 0600). The server URL is `--server`, else the one in
//! `DATA_DIR/admin.kubeconfig`.

use std::fs::OpenOptions;
use std::io::Write as _;
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _, Result};
use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use clap::{Args, Subcommand};
use rand::RngCore as _;

/// `setpoint kubeconfig …`.
#[derive(Debug, Subcommand)]
pub(crate) enum KubeconfigCommand {
    /// A kubeconfig for a user: a client certificate (CN=NAME, O=each --group) signed by the
    /// cluster CA, or with --token a static token added to DATA_DIR/pki/tokens.csv.
    User {
        /// The user name (the certificate's CN).
        name: String,
        /// A group of the user (the certificate's O); repeat for several.
        #[arg(long = "group", value_name = "GROUP")]
        groups: Vec<String>,
        /// Issue a random bearer token (appended to DATA_DIR/pki/tokens.csv) instead of a
        /// certificate.
        #[arg(long)]
        token: bool,
        /// Common flags.
        #[command(flatten)]
        common: Common,
    },
    /// A kubeconfig for a node agent: a client certificate CN=system:node:NODE,
    /// O=system:nodes.
    Node {
        /// The node's name.
        name: String,
        /// Common flags.
        #[command(flatten)]
        common: Common,
    },
}

/// Flags every `setpoint kubeconfig` subcommand takes.
#[derive(Debug, Args)]
pub(crate) struct Common {
    /// The server's data directory (its `pki` holds the CA and the token file).
    #[arg(long, value_name = "DIR")]
    data_dir: PathBuf,
    /// The API server URL (default: the one in DATA_DIR/admin.kubeconfig).
    #[arg(long, value_name = "URL")]
    server: Option<String>,
    /// How long the certificate is valid: a number with `s`, `m`, `h`, `d` or `y` (`1y`).
    #[arg(long, value_name = "DURATION", default_value = "1y", value_parser = parse_duration)]
    expiration: time::Duration,
    /// Write the kubeconfig here (mode 0600) instead of standard output.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<PathBuf>,
}

/// Runs a `setpoint kubeconfig` subcommand.
pub(crate) fn kubeconfig(command: KubeconfigCommand) -> Result<()> {
    let (user, groups, token, common) = match command {
        KubeconfigCommand::User {
            name,
            groups,
            token,
            common,
        } => {
            check_name(&name, "user name")?;
            for group in &groups {
                check_name(group, "group")?;
            }
            (name, groups, token, common)
        }
        KubeconfigCommand::Node { name, common } => {
            check_node_name(&name)?;
            (
                format!("system:node:{name}"),
                vec!["system:nodes".to_owned()],
                false,
                common,
            )
        }
    };
    let ca = signing_ca(Some(&common.data_dir), None, None)?.with_context(|| {
        format!(
            "no cluster CA in {}/pki (ca.crt, ca.key): name a server's data directory (created at its first start)",
            common.data_dir.display()
        )
    })?;
    let server = match &common.server {
        Some(server) => server.clone(),
        None => admin_server(&common.data_dir)?,
    };
    let credential = if token {
        let token = random_token();
        append_token(
            &common.data_dir.join("pki/tokens.csv"),
            &token,
            &user,
            &groups,
        )?;
        Credential::Token(token)
    } else {
        let (cert_pem, key_pem) =
            setpoint_controllers::issue_client_certificate(&ca, &user, &groups, common.expiration)?;
        Credential::Certificate { cert_pem, key_pem }
    };
    let credential = (ca.cert_pem, credential);
    let text = render(&server, &credential.0, &user, &credential.1);
    match &common.output {
        Some(path) => {
            write_private(path, &text).with_context(|| format!("writing {}", path.display()))?
        }
        None => print!("{text}"),
    }
    Ok(())
}

/// The CA the CSR signer signs with: the named files, else `DATA_DIR/pki/ca.crt` and
/// `ca.key` when both exist; `None` when there are none.
pub(crate) fn signing_ca(
    data_dir: Option<&Path>,
    cert_file: Option<&Path>,
    key_file: Option<&Path>,
) -> Result<Option<setpoint_controllers::SigningCa>> {
    let read = |path: &Path| {
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
    };
    if let (Some(cert), Some(key)) = (cert_file, key_file) {
        return Ok(Some(setpoint_controllers::SigningCa {
            cert_pem: read(cert)?,
            key_pem: read(key)?,
        }));
    }
    let Some(dir) = data_dir.map(|d| d.join("pki")) else {
        return Ok(None);
    };
    let (cert, key) = (dir.join("ca.crt"), dir.join("ca.key"));
    if !cert.exists() || !key.exists() {
        return Ok(None);
    }
    Ok(Some(setpoint_controllers::SigningCa {
        cert_pem: read(&cert)?,
        key_pem: read(&key)?,
    }))
}

/// 32 random bytes in base64url: a static token.
fn random_token() -> String {
    let mut bytes = [0_u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// What the kubeconfig's user presents.
enum Credential {
    Certificate { cert_pem: String, key_pem: String },
    Token(String),
}

/// A user or group name must be non-empty and fit a token-file line and a certificate subject.
fn check_name(name: &str, what: &str) -> Result<()> {
    if name.is_empty() {
        bail!("the {what} must not be empty");
    }
    if let Some(c) = name
        .chars()
        .find(|c| c.is_control() || matches!(c, ',' | '"'))
    {
        bail!("the {what} {name:?} may not contain {c:?}");
    }
    Ok(())
}

/// A node name is a DNS subdomain: lowercase letters, digits, `-` and `.`, at most 253.
fn check_node_name(name: &str) -> Result<()> {
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && l.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    if name.is_empty() || name.len() > 253 || !name.split('.').all(label_ok) {
        bail!("invalid node name {name:?}: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character");
    }
    Ok(())
}

/// `1y`, `30d`, `12h`, `90m`, `600s`.
pub(crate) fn parse_duration(text: &str) -> Result<time::Duration, String> {
    let split = text.len().saturating_sub(1);
    let (number, unit) = text.split_at(split);
    let n: i64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration like 1y, 30d, 12h, 90m or 600s"))?;
    let seconds = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        "y" => 365 * 86_400,
        _ => {
            return Err(format!(
                "{text:?} is not a duration like 1y, 30d, 12h, 90m or 600s"
            ))
        }
    };
    if n <= 0 {
        return Err(format!("the duration {text:?} must be positive"));
    }
    Ok(time::Duration::seconds(n.saturating_mul(seconds)))
}

/// The server URL of `DATA_DIR/admin.kubeconfig`.
fn admin_server(data_dir: &Path) -> Result<String> {
    let path = data_dir.join(setpoint_apiserver::ADMIN_KUBECONFIG);
    let text = std::fs::read_to_string(&path).with_context(|| {
        format!(
            "reading {} for the server URL (or pass --server URL)",
            path.display()
        )
    })?;
    let config: serde_yaml_ng::Value =
        serde_yaml_ng::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    match config["clusters"][0]["cluster"]["server"].as_str() {
        Some(server) => Ok(server.to_owned()),
        None => bail!("{} names no server: pass --server URL", path.display()),
    }
}

/// A random uid for a token-file user (a version 4 UUID).
fn random_uid() -> String {
    setpoint_apiserver::new_uid()
}

/// Appends `token,user,uid[,"groups"]` to the token file, created (or kept) mode 0600.
fn append_token(path: &Path, token: &str, user: &str, groups: &[String]) -> Result<()> {
    let mut line = format!("{token},{user},{}", random_uid());
    if !groups.is_empty() {
        line.push_str(&format!(",\"{}\"", groups.join(",")));
    }
    line.push('\n');
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("opening {}", path.display()))?;
    file.set_permissions(std::fs::Permissions::from_mode(0o600))
        .with_context(|| format!("securing {}", path.display()))?;
    // A file whose last line lacks its newline gets one first, so lines never merge.
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    if len > 0 {
        let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        if bytes.last() != Some(&b'\n') {
            line.insert(0, '\n');
        }
    }
    file.write_all(line.as_bytes())
        .and_then(|()| file.sync_all())
        .with_context(|| format!("appending to {}", path.display()))
}

fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    let mut file = OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    file.write_all(text.as_bytes())
}

/// A double-quoted YAML scalar (JSON escapes, which YAML reads the same way).
fn quote(text: &str) -> String {
    serde_json::Value::String(text.to_owned()).to_string()
}

/// The kubeconfig: cluster `setpoint`, user `user`, context `user@setpoint` (current).
fn render(server: &str, ca_pem: &str, user: &str, credential: &Credential) -> String {
    let b = |pem: &str| quote(&STANDARD.encode(pem));
    let context = quote(&format!("{user}@setpoint"));
    let credential = match credential {
        Credential::Certificate { cert_pem, key_pem } => format!(
            "    client-certificate-data: {}\n    client-key-data: {}\n",
            b(cert_pem),
            b(key_pem)
        ),
        Credential::Token(token) => format!("    token: {}\n", quote(token)),
    };
    format!(
        "apiVersion: v1
kind: Config
preferences: {{}}
clusters:
- name: setpoint
  cluster:
    server: {server}
    certificate-authority-data: {ca}
users:
- name: {user}
  user:
{credential}contexts:
- name: {context}
  context:
    cluster: setpoint
    user: {user}
current-context: {context}
",
        server = quote(server),
        ca = b(ca_pem),
        user = quote(user),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_should_take_a_unit() {
        assert_eq!(parse_duration("1y").unwrap(), time::Duration::days(365));
        assert_eq!(parse_duration("90m").unwrap(), time::Duration::minutes(90));
        assert!(parse_duration("10").is_err());
        assert!(parse_duration("0d").is_err());
        assert!(parse_duration("").is_err());
    }

    #[test]
    fn names_should_be_checked() {
        assert!(check_name("jane", "user name").is_ok());
        assert!(check_name("a,b", "user name").is_err());
        assert!(check_name("", "group").is_err());
        assert!(check_node_name("node-1.example").is_ok());
        assert!(check_node_name("Node_1").is_err());
    }

    #[test]
    fn tokens_should_be_appended_one_line_each_with_mode_0600() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens.csv");
        std::fs::write(&path, "old,user,uid").unwrap();
        append_token(&path, "t1", "jane", &["dev".into(), "ops".into()]).unwrap();
        append_token(&path, "t2", "joe", &[]).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[1].starts_with("t1,jane,") && lines[1].ends_with(",\"dev,ops\""));
        assert_eq!(lines[2].split(',').count(), 3);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
}

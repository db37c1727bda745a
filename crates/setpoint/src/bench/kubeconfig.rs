//! Reading the admin kubeconfig that `setpoint server` writes: the server's URL, the CA that
//! signed its certificate and the admin bearer token, taken from the current context the way
//! kubectl takes them.

use std::net::SocketAddr;

use anyhow::{bail, Context as _, Result};
use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use serde::Deserialize;

/// Where the API server is and how to talk to it.
#[derive(Clone, Debug)]
pub(super) struct Endpoint {
    /// The address from the server URL (`https://<addr>`).
    pub(super) addr: SocketAddr,
    /// The CA certificate to trust, PEM.
    pub(super) ca_pem: String,
    /// The bearer token.
    pub(super) token: String,
}

/// The parts of a kubeconfig this module reads.
#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct Kubeconfig {
    current_context: String,
    contexts: Vec<Named<KubeContext>>,
    clusters: Vec<Named<Cluster>>,
    users: Vec<Named<User>>,
}

/// A kubeconfig list entry: `{name, <kind>: {...}}`, with the inner object under any key.
#[derive(Deserialize)]
struct Named<T> {
    name: String,
    #[serde(alias = "context", alias = "cluster", alias = "user")]
    value: T,
}

/// A context: which cluster with which user.
#[derive(Deserialize)]
struct KubeContext {
    cluster: String,
    user: String,
}

/// A cluster: its URL and CA.
#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct Cluster {
    server: String,
    certificate_authority_data: String,
}

/// A user; only bearer tokens are read.
#[derive(Deserialize)]
struct User {
    token: Option<String>,
}

/// Reads the endpoint from the text of a kubeconfig. The server must be an `https://` URL with
/// a literal IP address and port (which is what `setpoint server` writes).
pub(super) fn parse(text: &str) -> Result<Endpoint> {
    let config: Kubeconfig = serde_yaml_ng::from_str(text).context("parsing the kubeconfig")?;
    let context = named(&config.contexts, "context", &config.current_context)?;
    let cluster = named(&config.clusters, "cluster", &context.cluster)?;
    let user = named(&config.users, "user", &context.user)?;

    let Some(authority) = cluster.server.strip_prefix("https://") else {
        bail!("the server URL {:?} is not https://", cluster.server);
    };
    let addr = authority
        .trim_end_matches('/')
        .parse()
        .with_context(|| format!("the server URL {:?} is not https://ip:port", cluster.server))?;
    let ca = STANDARD
        .decode(&cluster.certificate_authority_data)
        .context("decoding certificate-authority-data")?;
    let ca_pem = String::from_utf8(ca).context("certificate-authority-data is not PEM text")?;
    let token = user
        .token
        .clone()
        .with_context(|| format!("the user {:?} has no token", context.user))?;
    Ok(Endpoint {
        addr,
        ca_pem,
        token,
    })
}

/// The entry called `name` in a kubeconfig list of `what`s.
fn named<'a, T>(entries: &'a [Named<T>], what: &str, name: &str) -> Result<&'a T> {
    entries
        .iter()
        .find(|entry| entry.name == name)
        .map(|entry| &entry.value)
        .with_context(|| format!("the kubeconfig has no {what} named {name:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_should_follow_the_current_context() {
        let text = r#"apiVersion: v1
kind: Config
clusters:
- name: "setpoint"
  cluster:
    server: "https://127.0.0.1:41241"
    certificate-authority-data: "Y2E="
users:
- name: "admin"
  user:
    token: "secret"
- name: "admin-cert"
  user:
    client-certificate-data: "Yw=="
contexts:
- name: "setpoint"
  context:
    cluster: "setpoint"
    user: "admin"
current-context: "setpoint"
"#;
        let endpoint = parse(text).expect("parses");
        assert_eq!(endpoint.addr, "127.0.0.1:41241".parse().expect("addr"));
        assert_eq!(endpoint.ca_pem, "ca");
        assert_eq!(endpoint.token, "secret");
    }

    #[test]
    fn parse_should_refuse_plain_http() {
        let text = r#"clusters: [{name: c, cluster: {server: "http://127.0.0.1:1", certificate-authority-data: ""}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
"#;
        assert!(parse(text).is_err());
    }
}

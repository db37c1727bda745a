//! The admin kubeconfig, as YAML that kubectl, client-go, the `kube` crate and the Python
//! client read. It has one cluster, `setpoint`, that trusts the cluster CA
//! (`certificate-authority-data`), and two users with the same identity: `admin`, which
//! presents the bearer token, and `admin-cert`, which presents the admin client certificate.
//! The current context, `setpoint`, uses `admin` (the token: one line to rotate, nothing to
//! renew); the context `setpoint-cert` uses `admin-cert`.
//!
//! Every value is written as a double-quoted scalar whose escapes are JSON's, which YAML reads
//! the same way, so no value can change the document's structure.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;

/// Name of the cluster entry.
pub(crate) const CLUSTER: &str = "setpoint";
/// Name of the token user and of the default context.
pub(crate) const TOKEN_USER: &str = "admin";
/// Name of the client-certificate user.
pub(crate) const CERT_USER: &str = "admin-cert";
/// Name of the context using the client certificate.
pub(crate) const CERT_CONTEXT: &str = "setpoint-cert";

/// What goes into a kubeconfig.
pub(crate) struct Credentials<'a> {
    /// The server URL, `https://host:port`.
    pub(crate) server: String,
    /// The CA certificate, PEM.
    pub(crate) ca_pem: &'a str,
    /// The bearer token.
    pub(crate) token: &'a str,
    /// The client certificate, PEM.
    pub(crate) client_cert_pem: &'a str,
    /// The client certificate's key, PEM.
    pub(crate) client_key_pem: &'a str,
}

/// The URL clients use for a server bound to `addr`; an unspecified address is replaced by the
/// loopback address of its family.
pub(crate) fn server_url(addr: SocketAddr) -> String {
    let ip = match addr.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    format!("https://{}", SocketAddr::new(ip, addr.port()))
}

/// Renders the kubeconfig.
pub(crate) fn render(credentials: &Credentials<'_>) -> String {
    let q = quote;
    let b = |pem: &str| quote(&STANDARD.encode(pem));
    format!(
        "apiVersion: v1
kind: Config
preferences: {{}}
clusters:
- name: {cluster}
  cluster:
    server: {server}
    certificate-authority-data: {ca}
users:
- name: {token_user}
  user:
    token: {token}
- name: {cert_user}
  user:
    client-certificate-data: {cert}
    client-key-data: {key}
contexts:
- name: {cluster}
  context:
    cluster: {cluster}
    user: {token_user}
- name: {cert_context}
  context:
    cluster: {cluster}
    user: {cert_user}
current-context: {cluster}
",
        cluster = q(CLUSTER),
        server = q(&credentials.server),
        ca = b(credentials.ca_pem),
        token_user = q(TOKEN_USER),
        token = q(credentials.token),
        cert_user = q(CERT_USER),
        cert = b(credentials.client_cert_pem),
        key = b(credentials.client_key_pem),
        cert_context = q(CERT_CONTEXT),
    )
}

/// `value` as a double-quoted scalar (JSON string syntax, which is valid YAML).
fn quote(value: &str) -> String {
    serde_json::Value::from(value).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_url_should_bracket_ipv6_and_replace_unspecified_addresses() {
        assert_eq!(
            server_url("127.0.0.1:6443".parse().unwrap()),
            "https://127.0.0.1:6443"
        );
        assert_eq!(
            server_url("[::1]:443".parse().unwrap()),
            "https://[::1]:443"
        );
        assert_eq!(
            server_url("0.0.0.0:6443".parse().unwrap()),
            "https://127.0.0.1:6443"
        );
        assert_eq!(
            server_url("[::]:6443".parse().unwrap()),
            "https://[::1]:6443"
        );
    }

    #[test]
    fn render_should_quote_values_so_they_cannot_break_the_document() {
        let yaml = render(&Credentials {
            server: "https://127.0.0.1:1".to_owned(),
            ca_pem: "ca",
            token: "to\"ken\nx: y",
            client_cert_pem: "c",
            client_key_pem: "k",
        });
        assert!(yaml.contains("    token: \"to\\\"ken\\nx: y\"\n"));
        assert!(yaml.contains("certificate-authority-data: \"Y2E=\"\n"));
        assert!(yaml.ends_with("current-context: \"setpoint\"\n"));
    }
}

//! What the transport stamps on every request before anything else looks at it: its audit ID
//! ([`AuditId`], the client's `Audit-ID` header if it sent one, else a new random UUID, echoed
//! in the `Audit-Id` response header of every answer, as kube-apiserver's audit-init filter
//! does) and the address of the peer it came from ([`PeerAddr`]); and, for a request run as an
//! impersonated user, who sent it ([`ImpersonatedBy`]). Both travel as request
//! extensions; the audit log (`audit/`) reads them.

use std::net::SocketAddr;

use http::{HeaderMap, HeaderValue, Response};

/// The header carrying a request's audit ID, both ways.
pub(crate) const AUDIT_ID_HEADER: &str = "audit-id";

/// A request's audit ID: the one the client sent in `Audit-ID` (kept as sent), else a new
/// random (version 4) UUID.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct AuditId(pub(crate) String);

impl AuditId {
    /// The ID a request with `headers` gets.
    pub(crate) fn of(headers: &HeaderMap) -> AuditId {
        headers
            .get(AUDIT_ID_HEADER)
            .and_then(|value| value.to_str().ok())
            .filter(|value| !value.is_empty())
            .map_or_else(AuditId::generate, |value| AuditId(value.to_owned()))
    }

    /// A new random (version 4) UUID.
    pub(crate) fn generate() -> AuditId {
        AuditId(crate::ids::new_uid())
    }

    /// Sets the `Audit-Id` header of `response`, unless it has one (an answer proxied from an
    /// aggregated server keeps that server's).
    pub(crate) fn stamp<B>(&self, response: &mut Response<B>) {
        if response.headers().contains_key(AUDIT_ID_HEADER) {
            return;
        }
        if let Ok(value) = HeaderValue::from_str(&self.0) {
            response.headers_mut().insert(AUDIT_ID_HEADER, value);
        }
    }
}

/// Who really sent a request that runs as another user (impersonation): whoever substitutes
/// the impersonated user puts the sender here, and the audit log records both.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ImpersonatedBy(pub(crate) crate::auth::User);

/// The address of the client a request came from (the TCP peer).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PeerAddr(pub(crate) SocketAddr);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_audit_id_should_be_a_version_4_uuid() {
        let AuditId(id) = AuditId::generate();
        assert_eq!(id.len(), 36, "{id}");
        let groups: Vec<&str> = id.split('-').collect();
        assert_eq!(
            groups.iter().map(|g| g.len()).collect::<Vec<_>>(),
            [8, 4, 4, 4, 12]
        );
        assert!(groups[2].starts_with('4'), "{id}");
        assert!(matches!(&groups[3][..1], "8" | "9" | "a" | "b"), "{id}");
        assert_ne!(AuditId::generate(), AuditId::generate());
    }

    #[test]
    fn the_clients_audit_id_should_be_kept_and_echoed() {
        let mut headers = HeaderMap::new();
        headers.insert("Audit-ID", HeaderValue::from_static("from-the-client"));
        let id = AuditId::of(&headers);
        assert_eq!(id.0, "from-the-client");
        let mut response = Response::new(());
        id.stamp(&mut response);
        assert_eq!(response.headers()["Audit-Id"], "from-the-client");
        AuditId("other".to_owned()).stamp(&mut response);
        assert_eq!(response.headers()["Audit-Id"], "from-the-client");
    }
}

//! Authorization: whether a user may do what a request asks, decided as kube-apiserver decides
//! it — a chain of authorizers (`system:masters`, the node authorizer, then RBAC), the first
//! that allows or denies deciding (`chain.rs`). This file holds what every part shares: the
//! request's [`Attributes`], a [`Decision`], the [`Authorizer`] trait, and kube's 403 answer
//! ([`forbidden`]).
//!
//! - `attributes.rs`: the attributes of an HTTP request, as kube's request-info resolver sees them.
//! - `chain.rs`: the chain in `Api` ([`Chain`]).
//! - `node.rs`: the node authorizer (identities' part).
//! - `rbac/`: the RBAC authorizer, its in-memory index and rule matching.
//! - `bootstrap/`: the default roles and bindings, created and reconciled at start.

mod attributes;
pub(crate) mod bootstrap;
mod chain;
pub(crate) mod node;
pub(crate) mod rbac;

pub(crate) use attributes::attributes_of;
pub(crate) use chain::Chain;

use setpoint_core::{ApiError, Details, Reason};

use crate::auth::User;

/// What a request asks to do, as an authorizer sees it (kube-apiserver's
/// `authorizer.Attributes`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Attributes {
    /// Who asks.
    pub(crate) user: User,
    /// The verb: `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`,
    /// `deletecollection`, or for a non-resource request the lower-cased HTTP method; also the
    /// special verbs `impersonate`, `bind`, `escalate`, `approve`, `sign`, `use`.
    pub(crate) verb: String,
    /// Whether the request is for a resource (else for a non-resource `path`).
    pub(crate) resource_request: bool,
    /// The namespace (`""` for cluster-scoped requests and lists across namespaces).
    pub(crate) namespace: String,
    /// The API group (`""` for core).
    pub(crate) api_group: String,
    /// The API version.
    pub(crate) api_version: String,
    /// The plural resource name.
    pub(crate) resource: String,
    /// The subresource (`status`, `log`, `exec`, …), or `""`.
    pub(crate) subresource: String,
    /// The object's name, or `""`.
    pub(crate) name: String,
    /// The request path (for non-resource requests).
    pub(crate) path: String,
}

impl Attributes {
    /// A resource request of `user`: `verb` on `resource` (`pods` or `pods/log`) of `api_group`
    /// in `namespace` (`""`: cluster scope), on the object `name` (`""`: any).
    pub(crate) fn resource(
        user: &User,
        verb: &str,
        api_group: &str,
        resource: &str,
        namespace: &str,
        name: &str,
    ) -> Self {
        let (resource, subresource) = resource.split_once('/').unwrap_or((resource, ""));
        Attributes {
            user: user.clone(),
            verb: verb.to_owned(),
            resource_request: true,
            namespace: namespace.to_owned(),
            api_group: api_group.to_owned(),
            api_version: "*".to_owned(),
            resource: resource.to_owned(),
            subresource: subresource.to_owned(),
            name: name.to_owned(),
            path: String::new(),
        }
    }

    /// A non-resource request of `user`: `verb` (`get`, `post`, …) on `path`.
    pub(crate) fn non_resource(user: &User, verb: &str, path: &str) -> Self {
        Attributes {
            user: user.clone(),
            verb: verb.to_owned(),
            path: path.to_owned(),
            ..Attributes::default()
        }
    }

    /// The resource with its subresource, as RBAC rules and messages name it (`pods/log`).
    pub(crate) fn combined_resource(&self) -> String {
        if self.subresource.is_empty() {
            self.resource.clone()
        } else {
            format!("{}/{}", self.resource, self.subresource)
        }
    }
}

/// An authorizer's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Allowed; the reason says by what (e.g. the binding), for reviews and audit.
    Allow(String),
    /// Refused outright: no later authorizer is asked.
    Deny(String),
    /// This authorizer has no opinion; the next one in the chain is asked (the last one's
    /// `NoOpinion` refuses).
    NoOpinion(String),
}

impl Decision {
    /// Whether the request is allowed.
    pub(crate) fn allowed(&self) -> bool {
        matches!(self, Decision::Allow(_))
    }

    /// The reason given, whatever the decision.
    pub(crate) fn reason(&self) -> &str {
        match self {
            Decision::Allow(r) | Decision::Deny(r) | Decision::NoOpinion(r) => r,
        }
    }
}

/// Decides requests.
pub(crate) trait Authorizer: Send + Sync {
    /// Whether `attributes` may be done.
    fn authorize(&self, attributes: &Attributes) -> Decision;
}

/// Authorizes an HTTP request that resolved to `target`, as the user the transport found (the
/// request's `User` extension); a request without one (an in-process caller) acts as the
/// admin and is allowed. A refusal is kube's 403 ([`forbidden`]).
pub(crate) fn authorize_request(
    api: &crate::api::Api,
    request: &http::Request<bytes::Bytes>,
    target: &crate::request_info::Target,
) -> Result<(), ApiError> {
    let Some(user) = request.extensions().get::<User>() else {
        return Ok(());
    };
    let attributes = attributes_of(user, request.method(), request.uri().path(), target);
    match api.authorizer().authorize(&attributes) {
        Decision::Allow(_) => Ok(()),
        refused => Err(forbidden(&attributes, refused.reason())),
    }
}

/// kube-apiserver's 403 for a request its authorizers refused, `reason` (if any) after a colon:
/// `pods "p1" is forbidden: User "jane" cannot get resource "pods/log" in API group "" in the
/// namespace "default"`, `… at the cluster scope`, or for a path
/// `forbidden: User "jane" cannot get path "/metrics"`.
pub(crate) fn forbidden(attributes: &Attributes, reason: &str) -> ApiError {
    let user = &attributes.user.name;
    let verb = &attributes.verb;
    let mut why = if attributes.resource_request {
        let resource = attributes.combined_resource();
        let group = &attributes.api_group;
        if attributes.namespace.is_empty() {
            format!(
                "User {user:?} cannot {verb} resource {resource:?} in API group {group:?} at the cluster scope"
            )
        } else {
            let ns = &attributes.namespace;
            format!(
                "User {user:?} cannot {verb} resource {resource:?} in API group {group:?} in the namespace {ns:?}"
            )
        }
    } else {
        format!("User {user:?} cannot {verb} path {:?}", attributes.path)
    };
    if !reason.is_empty() {
        why = format!("{why}: {reason}");
    }
    let gr = setpoint_core::GroupResource::new(&attributes.api_group, &attributes.resource);
    let message = match (attributes.resource.is_empty(), attributes.name.is_empty()) {
        (true, _) => format!("forbidden: {why}"),
        (false, true) => format!("{gr} is forbidden: {why}"),
        (false, false) => format!("{gr} {:?} is forbidden: {why}", attributes.name),
    };
    ApiError {
        reason: Reason::Forbidden,
        message,
        details: Some(Box::new(Details {
            name: attributes.name.clone(),
            group: attributes.api_group.clone(),
            kind: attributes.resource.clone(),
            ..Details::default()
        })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jane() -> User {
        User::new("jane", [])
    }

    #[test]
    fn forbidden_should_word_the_refusal_as_kube_apiserver_does() {
        let create = Attributes::resource(&jane(), "create", "", "pods", "default", "");
        assert_eq!(
            forbidden(&create, "").message,
            r#"pods is forbidden: User "jane" cannot create resource "pods" in API group "" in the namespace "default""#
        );
        let log = Attributes::resource(&jane(), "get", "", "pods/log", "default", "p1");
        let error = forbidden(&log, "");
        assert_eq!(
            error.message,
            r#"pods "p1" is forbidden: User "jane" cannot get resource "pods/log" in API group "" in the namespace "default""#
        );
        let details = error.details.unwrap();
        assert_eq!(
            (details.name.as_str(), details.kind.as_str()),
            ("p1", "pods")
        );
        let nodes = Attributes::resource(&jane(), "list", "", "nodes", "", "");
        assert_eq!(
            forbidden(&nodes, "").message,
            r#"nodes is forbidden: User "jane" cannot list resource "nodes" in API group "" at the cluster scope"#
        );
        let roles = Attributes::resource(
            &jane(),
            "get",
            "rbac.authorization.k8s.io",
            "roles",
            "d",
            "r",
        );
        assert_eq!(
            forbidden(&roles, "RBAC: why").message,
            r#"roles.rbac.authorization.k8s.io "r" is forbidden: User "jane" cannot get resource "roles" in API group "rbac.authorization.k8s.io" in the namespace "d": RBAC: why"#
        );
        let path = Attributes::non_resource(&jane(), "get", "/metrics");
        assert_eq!(
            forbidden(&path, "").message,
            r#"forbidden: User "jane" cannot get path "/metrics""#
        );
    }
}

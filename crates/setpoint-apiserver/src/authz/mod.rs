//! Authorization: whether a user may do what a request asks, decided as kube-apiserver decides
//! it — a chain of authorizers (the node authorizer, then RBAC), the first that allows or denies
//! deciding; `system:masters` is always allowed. This file holds what every part shares: the
//! request's [`Attributes`], a [`Decision`], and the [`Authorizer`] trait.

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

/// Decides requests.
pub(crate) trait Authorizer: Send + Sync {
    /// Whether `attributes` may be done.
    fn authorize(&self, attributes: &Attributes) -> Decision;
}

// TEMP (until rbac's chain is merged)
pub(crate) mod node;
mod bootstrap {
    pub(crate) mod components;
}

//! One operation of a path, independent of OpenAPI version: its method,
//! `x-kubernetes-action` and group-version-kind, parameters, body and responses. [`super::v3`]
//! and [`super::v2`] render it.

use super::params::Param;

/// An HTTP method.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Method {
    Get,
    Put,
    Post,
    Delete,
    Patch,
}

impl Method {
    /// The method's key in an OpenAPI path item.
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Method::Get => "get",
            Method::Put => "put",
            Method::Post => "post",
            Method::Delete => "delete",
            Method::Patch => "patch",
        }
    }
}

/// `x-kubernetes-action`: what an operation does, as kube-apiserver names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Action {
    Get,
    List,
    /// Watch one object (`/watch/…/{name}`).
    Watch,
    /// Watch a collection (`/watch/…`).
    WatchList,
    Post,
    Put,
    Patch,
    Delete,
    DeleteCollection,
}

impl Action {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Action::Get => "get",
            Action::List => "list",
            Action::Watch => "watch",
            Action::WatchList => "watchlist",
            Action::Post => "post",
            Action::Put => "put",
            Action::Patch => "patch",
            Action::Delete => "delete",
            Action::DeleteCollection => "deletecollection",
        }
    }
}

/// What a body or a response holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Payload {
    /// An object of the named definition.
    Definition(String),
    /// Plain text (a pod's log).
    Text,
}

/// A request body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Body {
    /// Accepted media types.
    pub(super) content_types: Vec<&'static str>,
    /// The named definition.
    pub(super) definition: String,
}

/// The group, version and kind an operation speaks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Gvk {
    pub(super) group: String,
    pub(super) version: String,
    pub(super) kind: String,
}

/// One operation of a path.
#[derive(Clone, Debug)]
pub(super) struct Operation {
    pub(super) method: Method,
    pub(super) action: Action,
    pub(super) gvk: Gvk,
    /// `operationId`, e.g. `readCoreV1NamespacedPod`.
    pub(super) id: String,
    pub(super) description: String,
    /// Path parameters first, then query parameters.
    pub(super) params: Vec<&'static Param>,
    pub(super) body: Option<Body>,
    /// Media types of the responses.
    pub(super) produces: Vec<&'static str>,
    /// Status code and what it returns.
    pub(super) responses: Vec<(u16, Payload)>,
}

/// Media types of a PATCH body, strategic merge patch for built-in kinds only (for custom
/// resources kube-apiserver answers it with 415).
pub(super) fn patch_content_types(builtin: bool) -> Vec<&'static str> {
    let mut types = vec![
        "application/json-patch+json",
        "application/merge-patch+json",
    ];
    if builtin {
        types.push("application/strategic-merge-patch+json");
    }
    types.push("application/apply-patch+yaml");
    types
}

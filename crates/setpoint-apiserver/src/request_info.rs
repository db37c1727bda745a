//! What a request asks for, parsed from its method, path and query the way kube-apiserver's
//! request-info resolver does: `/api/v1/namespaces/default/pods/p1/log` is the `get` verb on
//! the `log` subresource of pod `p1` in namespace `default`.

use std::collections::BTreeMap;

use http::Method;
use setpoint_core::ApiError;

/// A request for objects of a resource (as opposed to discovery, OpenAPI or health).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ResourceRequest {
    /// API group; `""` for core.
    pub(crate) group: String,
    /// API version.
    pub(crate) version: String,
    /// The namespace in the path, if any.
    pub(crate) namespace: Option<String>,
    /// Plural resource name.
    pub(crate) resource: String,
    /// Object name, if the path names one.
    pub(crate) name: Option<String>,
    /// Subresource (`status`, `scale`, `log`, `binding`, …), if any.
    pub(crate) subresource: Option<String>,
    /// The verb (`get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`).
    pub(crate) verb: Verb,
}

/// The API verb of a resource request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verb {
    /// GET one object.
    Get,
    /// GET a collection.
    List,
    /// GET a collection with `watch=true` (or the legacy `/watch/` path).
    Watch,
    /// POST to a collection.
    Create,
    /// PUT one object.
    Update,
    /// PATCH one object.
    Patch,
    /// DELETE one object.
    Delete,
    /// DELETE a collection.
    DeleteCollection,
}

impl Verb {
    /// The verb as discovery and RBAC name it.
    #[must_use]
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "get",
            Verb::List => "list",
            Verb::Watch => "watch",
            Verb::Create => "create",
            Verb::Update => "update",
            Verb::Patch => "patch",
            Verb::Delete => "delete",
            Verb::DeleteCollection => "deletecollection",
        }
    }
}

/// What a path addresses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Target {
    /// `/api`: the core group's versions.
    CoreGroup,
    /// `/apis`: every group.
    Groups,
    /// `/apis/{group}`.
    Group(String),
    /// `/api/v1` or `/apis/{group}/{version}`: a group-version's resources.
    GroupVersion {
        /// Group (`""` for core).
        group: String,
        /// Version.
        version: String,
    },
    /// A resource request.
    Resource(ResourceRequest),
    /// Anything else (`/version`, `/openapi/...`, health, unknown): the raw path.
    Other(String),
}

/// The query string, decoded (one decoder for the whole workspace: [`setpoint_core::parse_query`]).
pub(crate) use setpoint_core::parse_query;

/// Whether a query flag is set (`true` or `1`, as Go's `strconv.ParseBool` accepts).
pub(crate) fn flag(query: &BTreeMap<String, String>, key: &str) -> Result<bool, ApiError> {
    match query.get(key).map(String::as_str) {
        None | Some("") => Ok(false),
        Some("1" | "t" | "T" | "true" | "TRUE" | "True") => Ok(true),
        Some("0" | "f" | "F" | "false" | "FALSE" | "False") => Ok(false),
        Some(other) => Err(ApiError::bad_request(format!(
            "invalid value {other:?} for query parameter {key:?}: expected a boolean"
        ))),
    }
}

/// Resolves what a request addresses.
pub(crate) fn resolve(
    method: &Method,
    path: &str,
    query: &BTreeMap<String, String>,
) -> Result<Target, ApiError> {
    let trimmed = path.trim_end_matches('/');
    let segments: Vec<&str> = trimmed.split('/').skip(1).collect();
    let (group, version, rest) = match segments.as_slice() {
        ["api"] => return Ok(Target::CoreGroup),
        ["apis"] => return Ok(Target::Groups),
        ["apis", group] => return Ok(Target::Group((*group).to_owned())),
        ["api", version, rest @ ..] => ("", *version, rest),
        ["apis", group, version, rest @ ..] => (*group, *version, rest),
        _ => return Ok(Target::Other(path.to_owned())),
    };
    if rest.is_empty() {
        return Ok(Target::GroupVersion {
            group: group.to_owned(),
            version: version.to_owned(),
        });
    }
    let (legacy_watch, rest) = match rest {
        ["watch", rest @ ..] => (true, rest),
        _ => (false, rest),
    };
    // `namespaces/{ns}/{resource}…` is namespaced, except the namespace's own subresources.
    let (namespace, parts): (Option<&str>, Vec<&str>) = match rest {
        ["namespaces", ns, resource, more @ ..]
            if !matches!(*resource, "status" | "finalize") || !more.is_empty() =>
        {
            (
                Some(*ns),
                std::iter::once(*resource)
                    .chain(more.iter().copied())
                    .collect(),
            )
        }
        other => (None, other.to_vec()),
    };
    if parts.iter().any(|p| p.is_empty()) || parts.len() > 3 {
        return Ok(Target::Other(path.to_owned()));
    }
    let resource = parts[0].to_owned();
    let name = parts.get(1).map(|s| (*s).to_owned());
    let subresource = parts.get(2).map(|s| (*s).to_owned());
    let watch = legacy_watch || flag(query, "watch")?;
    let verb = match (method.as_str(), name.is_some()) {
        ("GET" | "HEAD", true) if watch => Verb::Watch,
        ("GET" | "HEAD", true) => Verb::Get,
        ("GET" | "HEAD", false) if watch => Verb::Watch,
        ("GET" | "HEAD", false) => Verb::List,
        ("POST", _) => Verb::Create,
        ("PUT", true) => Verb::Update,
        ("PATCH", true) => Verb::Patch,
        ("DELETE", true) => Verb::Delete,
        ("DELETE", false) => Verb::DeleteCollection,
        _ => {
            // go-restful's 405 for a path without a route for the method, as kube-apiserver
            // words it (`details` is `{}`, as for every MethodNotAllowed).
            return Err(ApiError::new(
                setpoint_core::Reason::MethodNotAllowed,
                "the server does not allow this method on the requested resource",
            ));
        }
    };
    Ok(Target::Resource(ResourceRequest {
        group: group.to_owned(),
        version: version.to_owned(),
        namespace: namespace.map(str::to_owned),
        resource,
        name,
        subresource,
        verb,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(method: Method, path: &str, query: &str) -> ResourceRequest {
        match resolve(&method, path, &parse_query(Some(query))).unwrap() {
            Target::Resource(r) => r,
            other => panic!("{path}: {other:?}"),
        }
    }

    #[test]
    fn namespaced_paths_should_resolve_to_namespace_resource_name_and_subresource() {
        let r = res(Method::GET, "/api/v1/namespaces/default/pods/p1/log", "");
        assert_eq!(
            (
                r.group.as_str(),
                r.namespace.as_deref(),
                r.resource.as_str(),
                r.name.as_deref(),
                r.subresource.as_deref(),
                r.verb
            ),
            (
                "",
                Some("default"),
                "pods",
                Some("p1"),
                Some("log"),
                Verb::Get
            )
        );
        let r = res(
            Method::GET,
            "/apis/apps/v1/namespaces/ns/deployments",
            "watch=1",
        );
        assert_eq!((r.group.as_str(), r.verb), ("apps", Verb::Watch));
    }

    #[test]
    fn stream_subresources_should_take_their_verb_from_the_method() {
        // As kube-apiserver's request info (what RBAC is asked): `get pods/exec` for a
        // WebSocket GET, `create pods/exec` for a SPDY POST.
        for (method, verb) in [(Method::GET, Verb::Get), (Method::POST, Verb::Create)] {
            for sub in ["exec", "attach", "portforward"] {
                let r = res(
                    method.clone(),
                    &format!("/api/v1/namespaces/d/pods/p/{sub}"),
                    "command=true",
                );
                assert_eq!((r.subresource.as_deref(), r.verb), (Some(sub), verb));
            }
        }
    }

    #[test]
    fn namespace_objects_should_resolve_as_cluster_scoped() {
        let r = res(Method::GET, "/api/v1/namespaces/default", "");
        assert_eq!(
            (r.resource.as_str(), r.name.as_deref(), r.namespace),
            ("namespaces", Some("default"), None)
        );
        let r = res(Method::PUT, "/api/v1/namespaces/default/finalize", "");
        assert_eq!(
            (r.name.as_deref(), r.subresource.as_deref(), r.verb),
            (Some("default"), Some("finalize"), Verb::Update)
        );
        let r = res(Method::DELETE, "/api/v1/namespaces/x/configmaps", "");
        assert_eq!(
            (r.namespace.as_deref(), r.verb),
            (Some("x"), Verb::DeleteCollection)
        );
    }

    #[test]
    fn discovery_paths_should_resolve_to_their_targets() {
        let q = BTreeMap::new();
        assert_eq!(
            resolve(&Method::GET, "/api", &q).unwrap(),
            Target::CoreGroup
        );
        assert_eq!(resolve(&Method::GET, "/apis/", &q).unwrap(), Target::Groups);
        assert_eq!(
            resolve(&Method::GET, "/apis/apps/v1", &q).unwrap(),
            Target::GroupVersion {
                group: "apps".into(),
                version: "v1".into()
            }
        );
        assert_eq!(
            resolve(&Method::GET, "/version", &q).unwrap(),
            Target::Other("/version".into())
        );
    }

    #[test]
    fn query_parsing_should_be_lenient_and_decode_escapes() {
        let q = parse_query(Some(
            "&limit=500&labelSelector=app%3Dweb%2Ctier+in+(a)&watch",
        ));
        assert_eq!(q["limit"], "500");
        assert_eq!(q["labelSelector"], "app=web,tier in (a)");
        assert_eq!(q["watch"], "");
        assert!(flag(&parse_query(Some("watch=true")), "watch").unwrap());
        assert!(flag(&parse_query(Some("watch=yes")), "watch").is_err());
    }
}

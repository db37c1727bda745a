//! The authorization attributes of an HTTP request, as kube-apiserver's request-info resolver
//! gives them: a resource request (`/api/v1/namespaces/default/pods/p1/log`: `get` on
//! `pods/log` named `p1` in `default`; a namespace's own path is in that namespace) or a
//! non-resource one (discovery, `/version`, `/openapi/*`, `/metrics`, …: the lower-cased HTTP
//! method on the path).

use http::Method;

use super::Attributes;
use crate::auth::User;
use crate::request_info::Target;

/// What `user` asks by `method` on `path`, which resolved to `target`.
pub(crate) fn attributes_of(
    user: &User,
    method: &Method,
    path: &str,
    target: &Target,
) -> Attributes {
    let Target::Resource(r) = target else {
        return Attributes::non_resource(user, &method.as_str().to_ascii_lowercase(), path);
    };
    let name = r.name.clone().unwrap_or_default();
    // kube-apiserver puts a namespace's own requests (`/api/v1/namespaces/foo`, `…/foo/status`)
    // in that namespace, so a RoleBinding there can grant them.
    let namespace = match &r.namespace {
        Some(ns) => ns.clone(),
        None if r.group.is_empty() && r.resource == "namespaces" => name.clone(),
        None => String::new(),
    };
    Attributes {
        user: user.clone(),
        verb: r.verb.as_str().to_owned(),
        resource_request: true,
        namespace,
        api_group: r.group.clone(),
        api_version: r.version.clone(),
        resource: r.resource.clone(),
        subresource: r.subresource.clone().unwrap_or_default(),
        name,
        path: path.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request_info::{parse_query, resolve};

    fn of(method: Method, path: &str) -> Attributes {
        let target = resolve(&method, path, &parse_query(None)).unwrap();
        attributes_of(&User::new("u", []), &method, path, &target)
    }

    #[test]
    fn resource_requests_should_carry_verb_namespace_and_subresource() {
        let a = of(Method::GET, "/api/v1/namespaces/default/pods/p1/log");
        assert!(a.resource_request);
        assert_eq!(
            (
                a.verb.as_str(),
                a.namespace.as_str(),
                a.resource.as_str(),
                a.subresource.as_str(),
                a.name.as_str()
            ),
            ("get", "default", "pods", "log", "p1")
        );
        let a = of(Method::GET, "/api/v1/namespaces/foo");
        assert_eq!((a.namespace.as_str(), a.name.as_str()), ("foo", "foo"));
        let a = of(Method::DELETE, "/apis/apps/v1/namespaces/d/deployments");
        assert_eq!(
            (a.verb.as_str(), a.api_group.as_str()),
            ("deletecollection", "apps")
        );
    }

    #[test]
    fn discovery_and_other_paths_should_be_non_resource() {
        for path in [
            "/api",
            "/apis",
            "/apis/apps",
            "/apis/apps/v1",
            "/version",
            "/openapi/v2",
            "/metrics",
        ] {
            let a = of(Method::GET, path);
            assert!(!a.resource_request, "{path}");
            assert_eq!((a.verb.as_str(), a.path.as_str()), ("get", path));
        }
    }
}

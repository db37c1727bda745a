//! The labels kube-apiserver puts on a request's metrics: `verb` (`GET`, `LIST`, `WATCH`,
//! `POST`, `PUT`, `PATCH`, `APPLY`, `DELETE`, `DELETECOLLECTION`, `CONNECT` for the stream and
//! proxy subresources of pods, services and nodes; the HTTP method for
//! non-resource paths), `dry_run`, `group`, `version`, `resource`, `subresource`, `scope`
//! (`resource` for one named object or a create, `namespace`, `cluster`; empty for
//! non-resource paths) and `component` (`apiserver`).

use http::Request;

use crate::request_info::{self, Target, Verb};

/// One request's labels.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct RequestLabels {
    pub(crate) verb: String,
    dry_run: &'static str,
    group: String,
    version: String,
    resource: String,
    subresource: String,
    scope: &'static str,
}

impl RequestLabels {
    /// The labels of `request`.
    pub(crate) fn of<B>(request: &Request<B>) -> RequestLabels {
        let query = request_info::parse_query(request.uri().query());
        let dry_run = if query.contains_key("dryRun") {
            "All"
        } else {
            ""
        };
        let plain = |verb: &str| RequestLabels {
            verb: verb.to_owned(),
            dry_run,
            group: String::new(),
            version: String::new(),
            resource: String::new(),
            subresource: String::new(),
            scope: "",
        };
        let Ok(Target::Resource(r)) =
            request_info::resolve(request.method(), request.uri().path(), &query)
        else {
            return plain(request.method().as_str());
        };
        let apply = request
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|t| t.starts_with("application/apply-patch"));
        let connect = r.group.is_empty()
            && matches!(
                (r.resource.as_str(), r.subresource.as_deref()),
                ("pods", Some("exec" | "attach" | "portforward" | "proxy"))
                    | ("services" | "nodes", Some("proxy"))
            );
        let verb = match r.verb {
            _ if connect => "CONNECT",
            Verb::Get => "GET",
            Verb::List => "LIST",
            Verb::Watch => "WATCH",
            Verb::Create => "POST",
            Verb::Update => "PUT",
            Verb::Patch if apply => "APPLY",
            Verb::Patch => "PATCH",
            Verb::Delete => "DELETE",
            Verb::DeleteCollection => "DELETECOLLECTION",
        };
        let scope = if r.name.is_some() || r.verb == Verb::Create {
            "resource"
        } else if r.namespace.is_some() {
            "namespace"
        } else {
            "cluster"
        };
        RequestLabels {
            verb: verb.to_owned(),
            dry_run,
            group: r.group,
            version: r.version,
            resource: r.resource,
            subresource: r.subresource.unwrap_or_default(),
            scope,
        }
    }

    /// The labels as `(name, value)` pairs, in kube-apiserver's order.
    pub(crate) fn pairs(&self) -> super::Labels {
        vec![
            ("verb", self.verb.clone()),
            ("dry_run", self.dry_run.to_owned()),
            ("group", self.group.clone()),
            ("version", self.version.clone()),
            ("resource", self.resource.clone()),
            ("subresource", self.subresource.clone()),
            ("scope", self.scope.to_owned()),
            ("component", "apiserver".to_owned()),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(method: &str, uri: &str, content_type: Option<&str>) -> Vec<(&'static str, String)> {
        let mut request = Request::builder().method(method).uri(uri);
        if let Some(t) = content_type {
            request = request.header("content-type", t);
        }
        RequestLabels::of(&request.body(()).unwrap()).pairs()
    }

    fn get<'a>(pairs: &'a [(&'static str, String)], name: &str) -> &'a str {
        &pairs.iter().find(|(n, _)| *n == name).unwrap().1
    }

    #[test]
    fn labels_should_name_verb_resource_and_scope_as_kube_apiserver_does() {
        let l = labels("GET", "/apis/apps/v1/namespaces/default/deployments", None);
        assert_eq!(
            (
                get(&l, "verb"),
                get(&l, "group"),
                get(&l, "resource"),
                get(&l, "scope")
            ),
            ("LIST", "apps", "deployments", "namespace")
        );
        let l = labels("GET", "/api/v1/pods?watch=1", None);
        assert_eq!((get(&l, "verb"), get(&l, "scope")), ("WATCH", "cluster"));
        let l = labels(
            "PATCH",
            "/api/v1/namespaces/default/configmaps/c?fieldManager=x&dryRun=All",
            Some("application/apply-patch+yaml"),
        );
        assert_eq!(
            (get(&l, "verb"), get(&l, "scope"), get(&l, "dry_run")),
            ("APPLY", "resource", "All")
        );
        let l = labels(
            "PUT",
            "/apis/apps/v1/namespaces/d/deployments/w/scale",
            None,
        );
        assert_eq!(get(&l, "subresource"), "scale");
        for method in ["GET", "POST"] {
            let l = labels(
                method,
                "/api/v1/namespaces/d/pods/p/exec?command=true",
                None,
            );
            assert_eq!(
                (get(&l, "verb"), get(&l, "subresource"), get(&l, "scope")),
                ("CONNECT", "exec", "resource")
            );
        }
        let l = labels("GET", "/version", None);
        assert_eq!((get(&l, "verb"), get(&l, "resource")), ("GET", ""));
    }
}

//! The operations of the served resources, by path: which HTTP methods each path has, from
//! the resource's verbs and subresources.
//!
//! Paths follow kube-apiserver: for a namespaced `pods` in the core group,
//! `/api/v1/namespaces/{namespace}/pods` (list, create, delete collection),
//! `…/pods/{name}` (read, replace, patch, delete), `…/pods/{name}/<subresource>`,
//! `/api/v1/pods` (list across namespaces), and the `/api/v1/watch/…` forms of the lists and
//! the object. Subresources' operations do not depend on the resource's verbs.

use std::collections::BTreeMap;

use super::builtin::{DELETE_OPTIONS, PATCH, SCALE, STATUS, WATCH_EVENT};
use super::operation::{patch_content_types, Action, Body, Gvk, Method, Operation, Payload};
use super::params::{self, Param};
use super::schema::{definition_name, is_builtin, list_definition_name};
use super::OpenApiResource;

const JSON: &str = "application/json";

/// Every operation of the resources, by path.
pub(super) fn paths<'a>(
    resources: impl IntoIterator<Item = &'a OpenApiResource>,
) -> BTreeMap<String, Vec<Operation>> {
    let mut by_path: BTreeMap<String, Vec<Operation>> = BTreeMap::new();
    for r in resources {
        for (path, op) in Builder::new(r).operations() {
            by_path.entry(path).or_default().push(op);
        }
    }
    by_path
}

/// Builds one resource's operations.
struct Builder<'a> {
    r: &'a OpenApiResource,
    gvk: Gvk,
    /// Definition names of the kind and its list.
    kind_def: String,
    list_def: String,
    /// `/api/v1` or `/apis/<group>/<version>`.
    prefix: String,
    /// `CoreV1`, `AppsV1`, `ExampleComV1`: the group-version in operation ids.
    id_gv: String,
}

impl<'a> Builder<'a> {
    fn new(r: &'a OpenApiResource) -> Self {
        let prefix = if r.group.is_empty() {
            format!("/api/{}", r.version)
        } else {
            format!("/apis/{}/{}", r.group, r.version)
        };
        Builder {
            r,
            gvk: Gvk {
                group: r.group.clone(),
                version: r.version.clone(),
                kind: r.kind.clone(),
            },
            kind_def: definition_name(r),
            list_def: list_definition_name(r),
            prefix,
            id_gv: id_group_version(&r.group, &r.version),
        }
    }

    fn can(&self, verb: &str) -> bool {
        self.r.verbs.iter().any(|v| v == verb)
    }

    /// `namespaces/{namespace}/<plural>` or `<plural>`.
    fn collection(&self) -> String {
        if self.r.namespaced {
            format!("namespaces/{{namespace}}/{}", self.r.plural)
        } else {
            self.r.plural.clone()
        }
    }

    /// `{name}` if asked, `{namespace}` for namespaced resources, then `rest`.
    fn params(&self, name: bool, rest: &[&'static Param]) -> Vec<&'static Param> {
        let mut all = Vec::new();
        if name {
            all.push(&params::NAME);
        }
        if self.r.namespaced {
            all.push(&params::NAMESPACE);
        }
        all.extend_from_slice(rest);
        all
    }

    /// `readCoreV1NamespacedPodStatus`: verb, group-version, scope, kind, suffix.
    fn id(&self, verb: &str, suffix: &str) -> String {
        let scope = if self.r.namespaced { "Namespaced" } else { "" };
        format!("{verb}{}{scope}{}{suffix}", self.id_gv, self.r.kind)
    }

    /// An operation on the kind without parameters, body or responses yet.
    fn base(&self, method: Method, action: Action, id: String, description: String) -> Operation {
        Operation {
            method,
            action,
            gvk: self.gvk.clone(),
            id,
            description,
            params: Vec::new(),
            body: None,
            produces: vec![JSON],
            responses: Vec::new(),
        }
    }

    fn operations(&self) -> Vec<(String, Operation)> {
        let kind = &self.r.kind;
        let collection = format!("{}/{}", self.prefix, self.collection());
        let item = format!("{collection}/{{name}}");
        let mut ops = Vec::new();
        if self.can("list") {
            let list = |id: String, params: Vec<&'static Param>| Operation {
                params,
                responses: ok(&self.list_def),
                ..self.base(
                    Method::Get,
                    Action::List,
                    id,
                    format!("list or watch objects of kind {kind}"),
                )
            };
            ops.push((
                collection.clone(),
                list(self.id("list", ""), self.params(false, params::LIST)),
            ));
            if self.r.namespaced {
                let id = format!("list{}{kind}ForAllNamespaces", self.id_gv);
                ops.push((
                    format!("{}/{}", self.prefix, self.r.plural),
                    list(id, params::LIST.to_vec()),
                ));
            }
        }
        if self.can("watch") {
            let watch = format!("{}/watch/{}", self.prefix, self.collection());
            ops.push((
                watch.clone(),
                self.watch(
                    Action::WatchList,
                    self.id("watch", "List"),
                    self.params(false, params::LIST),
                ),
            ));
            ops.push((
                format!("{watch}/{{name}}"),
                self.watch(
                    Action::Watch,
                    self.id("watch", ""),
                    self.params(true, params::LIST),
                ),
            ));
            if self.r.namespaced {
                let id = format!("watch{}{kind}ListForAllNamespaces", self.id_gv);
                ops.push((
                    format!("{}/watch/{}", self.prefix, self.r.plural),
                    self.watch(Action::WatchList, id, params::LIST.to_vec()),
                ));
            }
        }
        if self.can("create") {
            ops.push((
                collection.clone(),
                Operation {
                    params: self.params(false, params::WRITE),
                    body: Some(object_body(&self.kind_def)),
                    responses: created(&self.kind_def),
                    ..self.base(
                        Method::Post,
                        Action::Post,
                        self.id("create", ""),
                        format!("create a {kind}"),
                    )
                },
            ));
        }
        if self.can("deletecollection") {
            ops.push((
                collection.clone(),
                Operation {
                    params: self.params(false, params::DELETE_COLLECTION),
                    body: Some(object_body(DELETE_OPTIONS)),
                    responses: ok(STATUS),
                    ..self.base(
                        Method::Delete,
                        Action::DeleteCollection,
                        self.id("deleteCollection", ""),
                        format!("delete collection of {kind}"),
                    )
                },
            ));
        }
        if self.can("get") {
            ops.push((item.clone(), self.read(&self.kind_def, "")));
        }
        if self.can("update") {
            ops.push((item.clone(), self.replace(&self.kind_def, "")));
        }
        if self.can("patch") {
            ops.push((item.clone(), self.patch(&self.kind_def, "")));
        }
        if self.can("delete") {
            ops.push((
                item.clone(),
                Operation {
                    params: self.params(true, params::DELETE),
                    body: Some(object_body(DELETE_OPTIONS)),
                    responses: codes(&[200, 202], &self.kind_def),
                    ..self.base(
                        Method::Delete,
                        Action::Delete,
                        self.id("delete", ""),
                        format!("delete a {kind}"),
                    )
                },
            ));
        }
        for sub in &self.r.subresources {
            let path = format!("{item}/{sub}");
            ops.extend(
                self.subresource(sub)
                    .into_iter()
                    .map(|op| (path.clone(), op)),
            );
        }
        ops
    }

    /// The operations of `…/{name}/<sub>`; none for subresources not listed here.
    fn subresource(&self, sub: &str) -> Vec<Operation> {
        let kind = &self.r.kind;
        match sub {
            "status" => vec![
                self.read(&self.kind_def, "Status"),
                self.replace(&self.kind_def, "Status"),
                self.patch(&self.kind_def, "Status"),
            ],
            "scale" => {
                let scale = Gvk {
                    group: "autoscaling".into(),
                    version: "v1".into(),
                    kind: "Scale".into(),
                };
                [
                    self.read(SCALE, "Scale"),
                    self.replace(SCALE, "Scale"),
                    self.patch(SCALE, "Scale"),
                ]
                .map(|op| Operation {
                    gvk: scale.clone(),
                    ..op
                })
                .to_vec()
            }
            "log" => vec![Operation {
                params: self.params(true, params::LOG),
                produces: vec!["text/plain", JSON],
                responses: vec![(200, Payload::Text)],
                ..self.base(
                    Method::Get,
                    Action::Get,
                    self.id("read", "Log"),
                    format!("read log of the specified {kind}"),
                )
            }],
            "binding" => vec![Operation {
                gvk: Gvk {
                    group: String::new(),
                    version: "v1".into(),
                    kind: "Binding".into(),
                },
                params: self.params(true, params::WRITE),
                body: Some(object_body(BINDING)),
                responses: created(BINDING),
                ..self.base(
                    Method::Post,
                    Action::Post,
                    self.id("create", "Binding"),
                    format!("create binding of a {kind}"),
                )
            }],
            "eviction" => vec![Operation {
                gvk: Gvk {
                    group: "policy".into(),
                    version: "v1".into(),
                    kind: "Eviction".into(),
                },
                params: self.params(true, params::WRITE),
                body: Some(object_body(EVICTION)),
                responses: created(EVICTION),
                ..self.base(
                    Method::Post,
                    Action::Post,
                    self.id("create", "Eviction"),
                    format!("create eviction of a {kind}"),
                )
            }],
            "finalize" => vec![self.replace(&self.kind_def, "Finalize")],
            _ => vec![],
        }
    }

    /// "the specified Pod", "status of the specified Pod".
    fn what(&self, suffix: &str) -> String {
        let of = if suffix.is_empty() {
            String::new()
        } else {
            format!("{} of ", suffix.to_lowercase())
        };
        format!("{of}the specified {}", self.r.kind)
    }

    fn read(&self, def: &str, suffix: &str) -> Operation {
        Operation {
            params: self.params(true, params::READ),
            responses: ok(def),
            ..self.base(
                Method::Get,
                Action::Get,
                self.id("read", suffix),
                format!("read {}", self.what(suffix)),
            )
        }
    }

    fn replace(&self, def: &str, suffix: &str) -> Operation {
        Operation {
            params: self.params(true, params::WRITE),
            body: Some(object_body(def)),
            responses: codes(&[200, 201], def),
            ..self.base(
                Method::Put,
                Action::Put,
                self.id("replace", suffix),
                format!("replace {}", self.what(suffix)),
            )
        }
    }

    fn patch(&self, def: &str, suffix: &str) -> Operation {
        Operation {
            params: self.params(true, params::PATCH),
            body: Some(Body {
                content_types: patch_content_types(is_builtin(self.r)),
                definition: PATCH.to_owned(),
            }),
            responses: codes(&[200, 201], def),
            ..self.base(
                Method::Patch,
                Action::Patch,
                self.id("patch", suffix),
                format!("partially update {}", self.what(suffix)),
            )
        }
    }

    fn watch(&self, action: Action, id: String, params: Vec<&'static Param>) -> Operation {
        Operation {
            params,
            produces: vec!["application/json;stream=watch"],
            responses: ok(WATCH_EVENT),
            ..self.base(
                Method::Get,
                action,
                id,
                format!("watch changes to objects of kind {}", self.r.kind),
            )
        }
    }
}

const BINDING: &str = "io.k8s.api.core.v1.Binding";
const EVICTION: &str = "io.k8s.api.policy.v1.Eviction";

fn ok(def: &str) -> Vec<(u16, Payload)> {
    codes(&[200], def)
}

fn created(def: &str) -> Vec<(u16, Payload)> {
    codes(&[200, 201, 202], def)
}

fn codes(codes: &[u16], def: &str) -> Vec<(u16, Payload)> {
    codes
        .iter()
        .map(|&code| (code, Payload::Definition(def.to_owned())))
        .collect()
}

fn object_body(def: &str) -> Body {
    Body {
        content_types: vec!["*/*"],
        definition: def.to_owned(),
    }
}

/// `CoreV1`, `AppsV1`, `CoordinationV1` (a `.k8s.io` suffix is dropped), `ExampleComV1beta1`.
fn id_group_version(group: &str, version: &str) -> String {
    let group = if group.is_empty() {
        "core"
    } else {
        group.strip_suffix(".k8s.io").unwrap_or(group)
    };
    group
        .split(['.', '-'])
        .chain([version])
        .map(capitalize)
        .collect()
}

fn capitalize(word: &str) -> String {
    let mut chars = word.chars();
    chars
        .next()
        .map(|first| first.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests;

//! What discovery says about a built-in resource — group, version, kind, names, scope, verbs,
//! subresources — and where its objects are stored, as one [`Identity`] a kind's file fills in
//! and [`Identity::build`] turns into a [`ResourceDef`] with the kind's strategy.

use std::sync::Arc;

use setpoint_core::GroupVersionKind;

use super::strategy::Strategy;
use super::{ResourceDef, Subresource};

/// Every verb: what most resources support.
pub(crate) const ALL_VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];
/// The verbs of a `status` or `scale` subresource.
pub(crate) const STATUS_VERBS: &[&str] = &["get", "patch", "update"];

/// A `status` subresource of `of`.
pub(crate) fn status(of: &GroupVersionKind) -> Subresource {
    Subresource {
        name: "status",
        kind: of.clone(),
        verbs: STATUS_VERBS,
    }
}

/// A `scale` subresource (it speaks `autoscaling/v1 Scale`).
pub(crate) fn scale() -> Subresource {
    Subresource {
        name: "scale",
        kind: GroupVersionKind::new("autoscaling", "v1", "Scale"),
        verbs: STATUS_VERBS,
    }
}

/// A built-in resource as discovery lists it.
pub(crate) struct Identity {
    pub(crate) group: &'static str,
    pub(crate) version: &'static str,
    pub(crate) kind: &'static str,
    pub(crate) plural: &'static str,
    pub(crate) singular: &'static str,
    pub(crate) short_names: &'static [&'static str],
    pub(crate) categories: &'static [&'static str],
    pub(crate) namespaced: bool,
    pub(crate) verbs: &'static [&'static str],
}

impl Identity {
    /// The resource, served by `strategy`, with the subresources `subresources` lists for its
    /// group-version-kind.
    pub(crate) fn build(
        self,
        strategy: Arc<dyn Strategy>,
        subresources: impl FnOnce(&GroupVersionKind) -> Vec<Subresource>,
    ) -> ResourceDef {
        let gvk = GroupVersionKind::new(self.group, self.version, self.kind);
        // Storage keys as kube-apiserver lays them out: `/registry/<plural>/` (CRDs under their
        // group, `/registry/apiextensions.k8s.io/customresourcedefinitions/`); both Event APIs
        // share `/registry/events/` (events.k8s.io/v1 objects are converted to and from core/v1).
        let key_prefix = if self.group == "apiextensions.k8s.io" {
            format!("/registry/{}/{}/", self.group, self.plural)
        } else {
            format!("/registry/{}/", self.plural)
        };
        ResourceDef {
            subresources: subresources(&gvk),
            gvk,
            plural: self.plural.to_owned(),
            singular: self.singular.to_owned(),
            short_names: self.short_names.iter().map(|s| (*s).to_owned()).collect(),
            categories: self.categories.iter().map(|s| (*s).to_owned()).collect(),
            namespaced: self.namespaced,
            verbs: self.verbs,
            key_prefix,
            strategy,
        }
    }
}

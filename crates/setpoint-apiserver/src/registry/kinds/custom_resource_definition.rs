//! apiextensions.k8s.io/v1 CustomResourceDefinition, as discovery lists it. Its strategy
//! (defaults, validation that compiles schemas and CEL rules, the cleanup finalizer) is
//! `crd::definition`'s: it needs the schema compiler, which lives in `crd/`, and `crd/`
//! depends on the registry, not the other way round.

use std::sync::Arc;

use crate::registry::identity::{status, Identity, ALL_VERBS};
use crate::registry::strategy::Strategy;
use crate::registry::ResourceDef;

pub(crate) fn resources(strategy: Arc<dyn Strategy>) -> Vec<ResourceDef> {
    vec![Identity {
        group: "apiextensions.k8s.io",
        version: "v1",
        kind: "CustomResourceDefinition",
        plural: "customresourcedefinitions",
        singular: "customresourcedefinition",
        short_names: &["crd", "crds"],
        categories: &["api-extensions"],
        namespaced: false,
        verbs: ALL_VERBS,
    }
    .build(strategy, |g| vec![status(g)])]
}

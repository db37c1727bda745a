//! The resources the API serves: for each, its names and scope as discovery advertises them,
//! where its objects live in the store, and its [`Strategy`], which prepares, defaults,
//! validates, prints and converts its objects. Built-in kinds are in `kinds/`, one file each;
//! custom resources are built by `crd/`, which implements [`Strategy`] for them.

pub(crate) mod admission_policies;
mod config_data;
mod defaults;
mod fields;
mod identity;
mod kinds;
pub(crate) mod managed_fields;
pub(crate) mod meta;
mod pod_template;
pub(crate) mod store;
pub(crate) mod strategy;
pub(crate) mod table;
pub(crate) mod token_projection;
mod validation;
mod versions;
mod volumes;
pub(crate) mod webhooks;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;
use setpoint_core::{Cause, GroupResource, GroupVersionKind, SelectableFields};

pub(crate) use fields::{metadata_fields, metadata_labels};
pub(crate) use identity::{ALL_VERBS, STATUS_VERBS};
pub(crate) use kinds::{
    bind_pod, builtin_resources, component_status, default_service_cidr, evict_pod,
    finalize_namespace, registered_resources, system_class, with_ready_condition, COMPONENTS,
    COMPONENT_STATUS_DEPRECATED, DEFAULT_SERVICE_CIDR, SYSTEM_PRIORITY_CLASSES,
};
pub(crate) use strategy::{Asker, Peers, Propagation, ScaleView, Strategy};
pub(crate) use validation::{finalizers as validate_finalizers, metadata as validate_metadata};
pub(crate) use versions::compare_versions;

/// A subresource of a resource, as discovery lists it.
#[derive(Clone, Debug)]
pub(crate) struct Subresource {
    pub(crate) name: &'static str,
    /// The kind it speaks (e.g. `autoscaling/v1 Scale` for `scale`).
    pub(crate) kind: GroupVersionKind,
    pub(crate) verbs: &'static [&'static str],
}

/// One served resource.
#[derive(Debug)]
pub(crate) struct ResourceDef {
    pub(crate) gvk: GroupVersionKind,
    pub(crate) plural: String,
    pub(crate) singular: String,
    pub(crate) short_names: Vec<String>,
    pub(crate) categories: Vec<String>,
    pub(crate) namespaced: bool,
    pub(crate) verbs: &'static [&'static str],
    pub(crate) subresources: Vec<Subresource>,
    /// Store keys: `<prefix><namespace>/<name>` or `<prefix><name>`.
    pub(crate) key_prefix: String,
    /// How objects of this kind are prepared, defaulted, validated, printed and stored.
    pub(crate) strategy: Arc<dyn Strategy>,
}

impl ResourceDef {
    pub(crate) fn group_resource(&self) -> GroupResource {
        GroupResource::new(&self.gvk.group, &self.plural)
    }

    /// 422 Invalid for the object `name` of this kind.
    pub(crate) fn invalid(&self, name: &str, causes: Vec<Cause>) -> setpoint_core::ApiError {
        setpoint_core::ApiError::invalid(&self.gvk.kind, &self.gvk.group, name, causes)
    }

    pub(crate) fn has_subresource(&self, name: &str) -> bool {
        self.subresources.iter().any(|s| s.name == name)
    }

    pub(crate) fn supports(&self, verb: &str) -> bool {
        self.verbs.contains(&verb)
    }

    /// The store key of an object.
    pub(crate) fn key(&self, namespace: Option<&str>, name: &str) -> String {
        match namespace {
            Some(ns) if self.namespaced => format!("{}{ns}/{name}", self.key_prefix),
            _ => format!("{}{name}", self.key_prefix),
        }
    }

    /// The store prefix of a collection: one namespace's, or all of them.
    pub(crate) fn collection_prefix(&self, namespace: Option<&str>) -> String {
        match namespace {
            Some(ns) if self.namespaced => format!("{}{ns}/", self.key_prefix),
            _ => self.key_prefix.clone(),
        }
    }

    /// `<Kind>List`, or what a CRD names its lists.
    pub(crate) fn list_kind(&self) -> String {
        self.strategy.list_kind(&self.gvk.kind)
    }

    /// The field labels field selectors may use on this resource.
    pub(crate) fn selectable(&self) -> SelectableFields {
        self.strategy.selectable(self.namespaced)
    }
}

impl crate::watchcache::CachedResource for ResourceDef {
    fn key_prefix(&self) -> &str {
        &self.key_prefix
    }

    fn served_from_storage(&self, stored: Value) -> Value {
        self.strategy.served_from_storage(stored)
    }

    fn field_set(&self, object: &Value) -> BTreeMap<String, String> {
        self.strategy.field_set(object)
    }

    fn describe(&self) -> String {
        self.group_resource().to_string()
    }

    fn stored_form(&self) -> Option<crate::watchcache::StoredForm> {
        if !self.strategy.serves_as_stored() || self.strategy.conversion().is_some() {
            return None;
        }
        let mut roots: Vec<String> = Vec::new();
        for field in self.selectable().fields() {
            if field.starts_with("metadata.")
                && !matches!(field, "metadata.name" | "metadata.namespace")
            {
                return None; // the stored decode reads no other metadata
            }
            let root = field.split('.').next().unwrap_or(field);
            if root != "metadata" && !roots.iter().any(|r| r == root) {
                roots.push(root.to_owned());
            }
        }
        Some(crate::watchcache::StoredForm::new(
            &self.gvk.api_version(),
            roots,
        ))
    }
}

/// Every served resource, by group, version and plural name.
pub(crate) struct Registry {
    by_gvr: BTreeMap<(String, String, String), Arc<ResourceDef>>,
    /// Every served version of each group and plural (writes and admission look them up).
    by_gr: std::collections::HashMap<(String, String), Vec<Arc<ResourceDef>>>,
    /// Group names in the order discovery lists them, each with its versions (preferred first).
    groups: Vec<(String, Vec<String>)>,
}

impl Registry {
    pub(crate) fn new(resources: Vec<Arc<ResourceDef>>) -> Registry {
        let mut by_gvr = BTreeMap::new();
        let mut by_gr = std::collections::HashMap::new();
        let mut groups: Vec<(String, Vec<String>)> = Vec::new();
        for def in resources {
            let g = def.gvk.group.clone();
            let v = def.gvk.version.clone();
            match groups.iter_mut().find(|(name, _)| *name == g) {
                Some((_, versions)) if !versions.contains(&v) => versions.push(v.clone()),
                Some(_) => {}
                None => groups.push((g.clone(), vec![v.clone()])),
            }
            by_gr
                .entry((g.clone(), def.plural.clone()))
                .or_insert_with(Vec::new)
                .push(def.clone());
            by_gvr.insert((g, v, def.plural.clone()), def);
        }
        Registry {
            by_gvr,
            by_gr,
            groups,
        }
    }

    pub(crate) fn get(
        &self,
        group: &str,
        version: &str,
        plural: &str,
    ) -> Option<&Arc<ResourceDef>> {
        self.by_gvr
            .get(&(group.to_owned(), version.to_owned(), plural.to_owned()))
    }

    /// Every resource, in group/version/name order.
    pub(crate) fn all(&self) -> impl Iterator<Item = &Arc<ResourceDef>> {
        self.by_gvr.values()
    }

    /// Every served version of the resource `plural` of `group`.
    pub(crate) fn versions_of(&self, group: &str, plural: &str) -> &[Arc<ResourceDef>] {
        self.by_gr
            .get(&(group.to_owned(), plural.to_owned()))
            .map_or(&[], Vec::as_slice)
    }

    /// The resources of one group-version.
    pub(crate) fn group_version(&self, group: &str, version: &str) -> Vec<&Arc<ResourceDef>> {
        self.by_gvr
            .values()
            .filter(|d| d.gvk.group == group && d.gvk.version == version)
            .collect()
    }

    /// Groups (the core group is `""`) with their versions, preferred first.
    pub(crate) fn groups(&self) -> &[(String, Vec<String>)] {
        &self.groups
    }
}

//! The resources the API serves: for each, its names and scope as discovery advertises them,
//! where its objects live in the store, and the strategy that prepares, defaults and validates
//! them (`strategy`), prints them as table rows (`table`) and exposes fields to selectors.

mod builtin;
pub(crate) mod cluster_ip;
mod fields;
mod hpa;
pub(crate) mod meta;
mod representation;
pub(crate) mod store;
pub(crate) mod strategy;
pub(crate) mod table;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;
use setpoint_core::{Cause, GroupResource, GroupVersionKind};

use crate::crd::CustomResource;

pub(crate) use builtin::{builtin_resources, ALL_VERBS, STATUS_VERBS};
pub(crate) use fields::{field_set, selectable};
pub(crate) use representation::Representation;

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
    /// How objects of this kind are prepared, defaulted, validated and printed.
    pub(crate) strategy: strategy::Kind,
    /// How they are stored (another resource's form, for events.k8s.io Events).
    pub(crate) representation: Representation,
    /// For a custom resource (`strategy` is [`strategy::Kind::Custom`]): what its CRD
    /// defines for this version.
    pub(crate) custom: Option<Arc<CustomResource>>,
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

    /// `<Kind>List`.
    pub(crate) fn list_kind(&self) -> String {
        match &self.custom {
            Some(c) => c.list_kind.clone(),
            None => format!("{}List", self.gvk.kind),
        }
    }

    /// Whether the resource has a `status` subresource: status is then kept out of
    /// main-resource writes, and the subresource writes only status.
    pub(crate) fn has_status(&self) -> bool {
        match &self.custom {
            Some(c) => c.status,
            None => self.strategy.has_status(),
        }
    }

    /// Whether `metadata.generation` is kept (every custom resource has one).
    pub(crate) fn has_generation(&self) -> bool {
        self.custom.is_some() || self.strategy.has_generation()
    }

    /// Whether a change from `old` to `new` bumps `metadata.generation`: a spec change for
    /// built-in kinds; for custom resources any change outside `metadata` (and `status`, when
    /// it has its own subresource), as kube-apiserver does.
    pub(crate) fn generation_changed(&self, new: &Value, old: &Value) -> bool {
        if !self.has_generation() {
            return false;
        }
        if self.custom.is_none() {
            return new["spec"] != old["spec"];
        }
        let strip = |v: &Value| {
            let mut v = v.clone();
            if let Some(map) = v.as_object_mut() {
                map.remove("metadata");
                if self.has_status() {
                    map.remove("status");
                }
            }
            v
        };
        strip(new) != strip(old)
    }

    /// The object as the typed struct (or, for a custom resource, its schema) sees it: fields
    /// of the wrong type are an error (built-ins), unknown fields are dropped.
    pub(crate) fn normalize(&self, value: &Value) -> Result<Value, String> {
        match &self.custom {
            Some(c) => c.prune(value.clone()),
            None => self.strategy.normalize(value),
        }
    }

    /// Sets what a new object starts with and applies the defaults.
    pub(crate) fn prepare_create(&self, object: &mut Value) {
        match &self.custom {
            Some(c) => {
                if c.status {
                    if let Some(map) = object.as_object_mut() {
                        map.remove("status");
                    }
                }
                c.apply_defaults(object);
            }
            None => self.strategy.prepare_create(object),
        }
    }

    /// Applies the defaults to an updated object.
    pub(crate) fn prepare_update(&self, object: &mut Value) {
        match &self.custom {
            Some(c) => c.apply_defaults(object),
            None => self.strategy.prepare_update(object),
        }
    }

    /// Validates an object (and, for an update, what changed from `old`).
    pub(crate) async fn validate(&self, object: &Value, old: Option<&Value>) -> Vec<Cause> {
        match &self.custom {
            Some(c) => {
                let mut causes = Vec::new();
                strategy::validate_finalizers(&object["metadata"], false, &mut causes);
                causes.extend(c.validate(object, old).await);
                causes
            }
            None => self.strategy.validate(object, old),
        }
    }

    /// The field labels field selectors may use on this resource.
    pub(crate) fn selectable(&self) -> setpoint_core::SelectableFields {
        match &self.custom {
            Some(c) if !c.selectable.is_empty() => {
                let mut labels = vec!["metadata.name".to_owned()];
                if self.namespaced {
                    labels.push("metadata.namespace".to_owned());
                }
                labels.extend(c.selectable.iter().map(|(label, _)| label.clone()));
                setpoint_core::SelectableFields::for_kind(labels)
            }
            _ => selectable(self.strategy, self.namespaced),
        }
    }

    /// The values of every selectable field of `object`.
    pub(crate) fn field_set(&self, object: &Value) -> BTreeMap<String, String> {
        let mut fields = field_set(self.strategy, object);
        if let Some(c) = &self.custom {
            fields.extend(c.selectable_values(object));
        }
        fields
    }

    /// The object as stored, from the object as served.
    pub(crate) fn to_storage(&self, object: Value) -> Value {
        match &self.custom {
            Some(c) => c.to_storage(object),
            None => self.representation.to_storage(object),
        }
    }

    /// The object as served, from the object as stored.
    pub(crate) fn served_from_storage(&self, object: Value) -> Value {
        match &self.custom {
            Some(c) => c.served_from_storage(object),
            None => self.representation.served_from_storage(object),
        }
    }
}

impl crate::watchcache::CachedResource for ResourceDef {
    fn key_prefix(&self) -> &str {
        &self.key_prefix
    }

    fn served_from_storage(&self, stored: Value) -> Value {
        ResourceDef::served_from_storage(self, stored)
    }

    fn field_set(&self, object: &Value) -> BTreeMap<String, String> {
        ResourceDef::field_set(self, object)
    }

    fn describe(&self) -> String {
        self.group_resource().to_string()
    }
}

/// Every served resource, by group, version and plural name.
pub(crate) struct Registry {
    by_gvr: BTreeMap<(String, String, String), Arc<ResourceDef>>,
    /// Group names in the order discovery lists them, each with its versions (preferred first).
    groups: Vec<(String, Vec<String>)>,
}

impl Registry {
    pub(crate) fn new(resources: Vec<Arc<ResourceDef>>) -> Registry {
        let mut by_gvr = BTreeMap::new();
        let mut groups: Vec<(String, Vec<String>)> = Vec::new();
        for def in resources {
            let g = def.gvk.group.clone();
            let v = def.gvk.version.clone();
            match groups.iter_mut().find(|(name, _)| *name == g) {
                Some((_, versions)) if !versions.contains(&v) => versions.push(v.clone()),
                Some(_) => {}
                None => groups.push((g.clone(), vec![v.clone()])),
            }
            by_gvr.insert((g, v, def.plural.clone()), def);
        }
        Registry { by_gvr, groups }
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

//! The resources the API serves: for each, its names and scope as discovery advertises them,
//! where its objects live in the store, and the strategy that prepares, defaults and validates
//! them (`strategy`), prints them as table rows (`table`) and exposes fields to selectors.

mod builtin;
mod fields;
mod representation;
pub(crate) mod strategy;
pub(crate) mod table;

use std::collections::BTreeMap;
use std::sync::Arc;

use setpoint_core::{GroupResource, GroupVersionKind};

pub(crate) use builtin::builtin_resources;
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
    pub(crate) plural: &'static str,
    pub(crate) singular: &'static str,
    pub(crate) short_names: &'static [&'static str],
    pub(crate) categories: &'static [&'static str],
    pub(crate) namespaced: bool,
    pub(crate) verbs: &'static [&'static str],
    pub(crate) subresources: Vec<Subresource>,
    /// Store keys: `<prefix><namespace>/<name>` or `<prefix><name>`.
    pub(crate) key_prefix: String,
    /// How objects of this kind are prepared, defaulted, validated and printed.
    pub(crate) strategy: strategy::Kind,
    /// How they are stored (another resource's form, for events.k8s.io Events).
    pub(crate) representation: Representation,
}

impl ResourceDef {
    pub(crate) fn group_resource(&self) -> GroupResource {
        GroupResource::new(&self.gvk.group, self.plural)
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
        format!("{}List", self.gvk.kind)
    }
}

/// Every served resource, by group, version and plural name.
pub(crate) struct Registry {
    by_gvr: BTreeMap<(String, String, String), Arc<ResourceDef>>,
    /// Group names in the order discovery lists them, each with its versions (preferred first).
    groups: Vec<(String, Vec<String>)>,
}

impl Registry {
    pub(crate) fn new(resources: Vec<ResourceDef>) -> Registry {
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
            by_gvr.insert((g, v, def.plural.to_owned()), Arc::new(def));
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

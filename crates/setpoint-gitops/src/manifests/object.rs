//! Who an object is: [`ObjectId`] (group, kind, namespace, name), read from a manifest or an
//! inventory entry, printed the way `kubectl` names objects (`Deployment/ns/name`) and written
//! in Flux's inventory format (`<namespace>_<name>_<group>_<kind>`).

use std::fmt;

use serde_json::Value;

/// The identity of one object, independent of the version it is written in.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectId {
    /// The API group (`""` for the core group).
    pub group: String,
    /// The kind.
    pub kind: String,
    /// The namespace (`""` for cluster-scoped objects, and for namespaced objects written
    /// without one until a default is given).
    pub namespace: String,
    /// The name.
    pub name: String,
}

impl ObjectId {
    /// The identity of a manifest, `None` when it lacks `apiVersion`, `kind` or
    /// `metadata.name`.
    pub fn of(object: &Value) -> Option<ObjectId> {
        let api_version = object.get("apiVersion")?.as_str()?;
        let kind = object.get("kind")?.as_str()?;
        let name = object.pointer("/metadata/name")?.as_str()?;
        if kind.is_empty() || name.is_empty() || api_version.is_empty() {
            return None;
        }
        let namespace = object
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or("");
        Some(ObjectId {
            group: split_api_version(api_version).0.to_owned(),
            kind: kind.to_owned(),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        })
    }

    /// The inventory id: `<namespace>_<name>_<group>_<kind>`.
    pub fn inventory_id(&self) -> String {
        format!(
            "{}_{}_{}_{}",
            self.namespace, self.name, self.group, self.kind
        )
    }

    /// The identity an inventory id names (`None` if it is not four `_`-separated parts; no
    /// part of a valid id holds `_`).
    pub fn from_inventory_id(id: &str) -> Option<ObjectId> {
        let mut parts = id.split('_');
        let namespace = parts.next()?;
        let name = parts.next()?;
        let group = parts.next()?;
        let kind = parts.next()?;
        if parts.next().is_some() || name.is_empty() || kind.is_empty() {
            return None;
        }
        Some(ObjectId {
            group: group.to_owned(),
            kind: kind.to_owned(),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        })
    }

    /// Whether this is a CustomResourceDefinition.
    pub fn is_crd(&self) -> bool {
        self.kind == "CustomResourceDefinition" && self.group == "apiextensions.k8s.io"
    }

    /// Whether this is a Namespace.
    pub fn is_namespace(&self) -> bool {
        self.kind == "Namespace" && self.group.is_empty()
    }
}

impl fmt::Display for ObjectId {
    /// `Kind/namespace/name`, or `Kind/name` for a cluster-scoped object (Flux's and
    /// `kubectl`'s way of naming objects in messages).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.namespace.is_empty() {
            write!(f, "{}/{}", self.kind, self.name)
        } else {
            write!(f, "{}/{}/{}", self.kind, self.namespace, self.name)
        }
    }
}

/// `(group, version)` of an `apiVersion` (`v1` → `("", "v1")`, `apps/v1` → `("apps", "v1")`).
pub fn split_api_version(api_version: &str) -> (&str, &str) {
    match api_version.split_once('/') {
        Some((group, version)) => (group, version),
        None => ("", api_version),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ids_should_round_trip_through_the_inventory_format() {
        let deploy = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "prod"}});
        let id = ObjectId::of(&deploy).expect("id");
        assert_eq!(id.inventory_id(), "prod_web_apps_Deployment");
        assert_eq!(id.to_string(), "Deployment/prod/web");
        assert_eq!(ObjectId::from_inventory_id(&id.inventory_id()), Some(id));
        let ns = ObjectId::of(&json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "prod"}}))
        .expect("id");
        assert_eq!(ns.inventory_id(), "_prod__Namespace");
        assert_eq!(ns.to_string(), "Namespace/prod");
        assert!(ns.is_namespace());
        assert_eq!(ObjectId::from_inventory_id("a_b_c"), None);
        assert_eq!(ObjectId::of(&json!({"kind": "X"})), None);
    }
}

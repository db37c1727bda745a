//! [`ObjectKey`]: the namespace and name that identify an object of a known kind — the key of
//! the cache, of the work queue, and of every reconcile.

use std::fmt;

use kube::Resource;

/// Namespace (absent for cluster-scoped objects) and name. Displays as `namespace/name` or
/// `name`, as client-go's cache keys do.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    /// The namespace, `None` for cluster-scoped objects.
    pub namespace: Option<String>,
    /// The name.
    pub name: String,
}

impl ObjectKey {
    /// The key of a namespaced object.
    pub fn namespaced(namespace: impl Into<String>, name: impl Into<String>) -> ObjectKey {
        ObjectKey {
            namespace: Some(namespace.into()),
            name: name.into(),
        }
    }

    /// The key of a cluster-scoped object.
    pub fn cluster(name: impl Into<String>) -> ObjectKey {
        ObjectKey {
            namespace: None,
            name: name.into(),
        }
    }

    /// The key of `object` (an object without a name gets the empty name).
    pub fn of<K: Resource>(object: &K) -> ObjectKey {
        let meta = object.meta();
        ObjectKey {
            namespace: meta.namespace.clone(),
            name: meta.name.clone().unwrap_or_default(),
        }
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{ns}/{}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
    use kube::api::ObjectMeta;

    #[test]
    fn key_should_display_like_client_go() {
        let cm = ConfigMap {
            metadata: ObjectMeta {
                namespace: Some("ns".into()),
                name: Some("a".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        assert_eq!(ObjectKey::of(&cm).to_string(), "ns/a");
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some("ns".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        assert_eq!(ObjectKey::of(&ns).to_string(), "ns");
    }
}

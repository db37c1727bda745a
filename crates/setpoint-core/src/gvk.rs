//! Names of API types: group/version/kind for a type, group/resource for a collection.

use std::fmt;

/// A type of object: `apps/v1 Deployment`. The core group is the empty string.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GroupVersionKind {
    /// API group (`""` for core).
    pub group: String,
    /// Version within the group.
    pub version: String,
    /// Kind, in CamelCase.
    pub kind: String,
}

impl GroupVersionKind {
    /// Builds one from its parts.
    pub fn new(group: &str, version: &str, kind: &str) -> Self {
        GroupVersionKind {
            group: group.to_owned(),
            version: version.to_owned(),
            kind: kind.to_owned(),
        }
    }

    /// The `apiVersion` string: `v1` for core, else `group/version`.
    #[must_use]
    pub fn api_version(&self) -> String {
        api_version(&self.group, &self.version)
    }
}

impl fmt::Display for GroupVersionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.api_version(), self.kind)
    }
}

/// A collection of objects, as error messages name it: `deployments.apps`, `pods`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GroupResource {
    /// API group (`""` for core).
    pub group: String,
    /// Plural resource name, lower case.
    pub resource: String,
}

impl GroupResource {
    /// Builds one from its parts.
    pub fn new(group: &str, resource: &str) -> Self {
        GroupResource {
            group: group.to_owned(),
            resource: resource.to_owned(),
        }
    }
}

impl fmt::Display for GroupResource {
    /// `resource.group`, or just `resource` in the core group.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() {
            write!(f, "{}", self.resource)
        } else {
            write!(f, "{}.{}", self.resource, self.group)
        }
    }
}

/// The `apiVersion` string for a group and version.
#[must_use]
pub fn api_version(group: &str, version: &str) -> String {
    if group.is_empty() {
        version.to_owned()
    } else {
        format!("{group}/{version}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_should_render_as_kubernetes_prints_them() {
        assert_eq!(
            GroupResource::new("apps", "deployments").to_string(),
            "deployments.apps"
        );
        assert_eq!(GroupResource::new("", "pods").to_string(), "pods");
        assert_eq!(GroupVersionKind::new("", "v1", "Pod").api_version(), "v1");
        assert_eq!(
            GroupVersionKind::new("apps", "v1", "Deployment").to_string(),
            "apps/v1 Deployment"
        );
    }
}

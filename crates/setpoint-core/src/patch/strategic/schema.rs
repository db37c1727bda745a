//! Patch metadata for strategic merge patch: for each field of a kind that carries Go
//! `patchStrategy`/`patchMergeKey` struct tags (the OpenAPI `x-kubernetes-patch-strategy` and
//! `x-kubernetes-patch-merge-key` extensions), how a patch combines it.
//!
//! A [`PatchSchema`] is written as a table from dotted field paths to [`FieldStrategy`]. A path
//! names struct fields from the object's root; list fields add no index, so
//! `spec.containers.env` is the `env` of every container. Fields not in the table get the
//! default treatment: objects merge recursively, lists and scalars are replaced whole.

use std::collections::BTreeMap;

/// How a strategic merge patch combines one field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FieldStrategy {
    /// `patchStrategy:"merge"` and `patchMergeKey:"<key>"` on a list of objects: patch
    /// elements are merged into the live element with the same value of `key`, or added.
    MergeByKey {
        /// The member identifying an element, e.g. `name` for containers.
        key: &'static str,
        /// The field is also tagged `retainKeys`. Only clients act on this (kubectl then sends
        /// `$retainKeys` directives); the server applies such directives wherever they appear.
        retain_keys: bool,
    },
    /// `patchStrategy:"merge"` without a merge key, on a list of scalars (e.g.
    /// `metadata.finalizers`): the patch's values are added to the live ones as a set.
    MergeScalars,
    /// `patchStrategy:"retainKeys"` alone, on an object (e.g. a Deployment's `spec.strategy`):
    /// merged like any object; kubectl sends `$retainKeys` for it.
    RetainKeys,
    /// `patchStrategy:"replace"`: the patch value replaces the field whole, object or list.
    Replace,
}

impl FieldStrategy {
    /// Shorthand for a list merged by `key`.
    #[must_use]
    pub const fn by(key: &'static str) -> FieldStrategy {
        FieldStrategy::MergeByKey {
            key,
            retain_keys: false,
        }
    }

    /// Shorthand for a list merged by `key` whose elements kubectl patches with `$retainKeys`.
    #[must_use]
    pub const fn by_retaining_keys(key: &'static str) -> FieldStrategy {
        FieldStrategy::MergeByKey {
            key,
            retain_keys: true,
        }
    }

    /// The merge key, for lists merged element-wise.
    #[must_use]
    pub fn merge_key(self) -> Option<&'static str> {
        match self {
            FieldStrategy::MergeByKey { key, .. } => Some(key),
            _ => None,
        }
    }

    /// Whether lists with this strategy are merged rather than replaced.
    #[must_use]
    pub fn merges_lists(self) -> bool {
        matches!(
            self,
            FieldStrategy::MergeByKey { .. } | FieldStrategy::MergeScalars
        )
    }
}

/// The patch metadata of one kind: which fields merge how. Built from a table of
/// `(dotted path, strategy)` entries; see the module docs for the path form.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PatchSchema {
    /// The object's root. Its `strategy` is always `None`.
    root: SchemaNode,
}

/// A field in a [`PatchSchema`], and the fields below it (for a list, its elements' fields).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(in crate::patch) struct SchemaNode {
    /// The field's own strategy; `None` for the default treatment.
    pub(in crate::patch) strategy: Option<FieldStrategy>,
    /// Fields of the object (or list elements) this field holds.
    children: BTreeMap<String, SchemaNode>,
}

impl SchemaNode {
    /// The field `name` below this one, if the schema says anything about it.
    pub(in crate::patch) fn child(&self, name: &str) -> Option<&SchemaNode> {
        self.children.get(name)
    }

    fn collect(&self, prefix: &str, out: &mut Vec<(String, FieldStrategy)>) {
        for (name, child) in &self.children {
            let path = if prefix.is_empty() {
                name.clone()
            } else {
                format!("{prefix}.{name}")
            };
            if let Some(strategy) = child.strategy {
                out.push((path.clone(), strategy));
            }
            child.collect(&path, out);
        }
    }
}

impl PatchSchema {
    /// A schema from `(dotted path, strategy)` entries. A later entry for the same path wins.
    ///
    /// ```
    /// use setpoint_core::{FieldStrategy, PatchSchema};
    /// let schema = PatchSchema::from_entries([
    ///     ("spec.containers", FieldStrategy::by("name")),
    ///     ("spec.containers.env", FieldStrategy::by("name")),
    /// ]);
    /// assert_eq!(schema.strategy("spec.containers.env"), Some(FieldStrategy::by("name")));
    /// assert_eq!(schema.strategy("spec.containers.args"), None);
    /// ```
    pub fn from_entries<'a>(
        entries: impl IntoIterator<Item = (&'a str, FieldStrategy)>,
    ) -> PatchSchema {
        let mut root = SchemaNode::default();
        for (path, strategy) in entries {
            let node = path.split('.').fold(&mut root, |node, name| {
                node.children.entry(name.to_owned()).or_default()
            });
            node.strategy = Some(strategy);
        }
        PatchSchema { root }
    }

    /// The strategy of the field at a dotted path, `None` for the default treatment.
    #[must_use]
    pub fn strategy(&self, path: &str) -> Option<FieldStrategy> {
        path.split('.')
            .try_fold(&self.root, |node, name| node.child(name))
            .and_then(|node| node.strategy)
    }

    /// Every field with a strategy, as `(dotted path, strategy)`, sorted by path.
    #[must_use]
    pub fn entries(&self) -> Vec<(String, FieldStrategy)> {
        let mut out = Vec::new();
        self.root.collect("", &mut out);
        out
    }

    /// The object's root, where merging starts.
    pub(in crate::patch) fn root(&self) -> &SchemaNode {
        &self.root
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_should_answer_by_dotted_path_and_list_its_entries_sorted() {
        let schema = PatchSchema::from_entries([
            ("spec.template.spec.containers", FieldStrategy::by("name")),
            ("metadata.finalizers", FieldStrategy::MergeScalars),
            ("spec.strategy", FieldStrategy::RetainKeys),
        ]);
        assert_eq!(
            schema.strategy("metadata.finalizers"),
            Some(FieldStrategy::MergeScalars)
        );
        assert_eq!(schema.strategy("spec.template"), None);
        assert_eq!(schema.strategy("spec.template.spec.volumes"), None);
        let paths: Vec<String> = schema.entries().into_iter().map(|(p, _)| p).collect();
        assert_eq!(
            paths,
            [
                "metadata.finalizers",
                "spec.strategy",
                "spec.template.spec.containers"
            ]
        );
    }

    #[test]
    fn strategy_helpers_should_expose_merge_keys() {
        assert_eq!(FieldStrategy::by("uid").merge_key(), Some("uid"));
        assert_eq!(FieldStrategy::MergeScalars.merge_key(), None);
        assert!(FieldStrategy::by_retaining_keys("name").merges_lists());
        assert!(!FieldStrategy::Replace.merges_lists());
        assert!(!FieldStrategy::RetainKeys.merges_lists());
    }
}

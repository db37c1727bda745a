//! [`FieldSet`]: a set of field paths stored as a tree keyed by encoded path elements, and its
//! `fieldsV1` JSON form: each element is a key whose value is an object of the elements below
//! it; `"."` marks an element that is itself in the set and has elements below it; a leaf
//! in the set is `{}`.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::element::Element;
use super::shape::Shape;

/// A set of field paths.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldSet {
    nodes: BTreeMap<String, Node>,
}

/// One element of a [`FieldSet`]: whether the path ending here is in the set, and the set's
/// paths that continue below it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Node {
    pub(crate) member: bool,
    pub(crate) children: FieldSet,
}

impl Node {
    fn is_empty(&self) -> bool {
        !self.member && self.children.is_empty()
    }
}

/// Why a `fieldsV1` value could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FieldsV1Error {
    /// A value that is not an object.
    #[error("fieldsV1 values must be objects, found {found} at {at:?}")]
    NotAnObject {
        /// What was found.
        found: String,
        /// The element holding it.
        at: String,
    },
    /// A key that is no path element.
    #[error("{0:?} is not a field path element (f:, k:, v: or i:)")]
    BadElement(String),
}

impl FieldSet {
    /// The empty set.
    #[must_use]
    pub fn new() -> FieldSet {
        FieldSet::default()
    }

    /// Whether the set holds no path.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The node of `element` directly below the root, created if absent.
    pub(crate) fn node_mut(&mut self, element: String) -> &mut Node {
        self.nodes.entry(element).or_default()
    }

    /// The node of `element` directly below the root.
    pub(crate) fn node(&self, element: &str) -> Option<&Node> {
        self.nodes.get(element)
    }

    /// Adds the path `path` (encoded elements; empty adds nothing).
    pub fn insert<S: AsRef<str>>(&mut self, path: &[S]) {
        let Some((last, parents)) = path.split_last() else {
            return;
        };
        let mut set = self;
        for element in parents {
            set = &mut set.node_mut(element.as_ref().to_owned()).children;
        }
        set.node_mut(last.as_ref().to_owned()).member = true;
    }

    /// Whether `path` is in the set.
    #[must_use]
    pub fn contains<S: AsRef<str>>(&self, path: &[S]) -> bool {
        let Some((last, parents)) = path.split_last() else {
            return false;
        };
        let mut set = self;
        for element in parents {
            match set.nodes.get(element.as_ref()) {
                Some(node) => set = &node.children,
                None => return false,
            }
        }
        set.nodes.get(last.as_ref()).is_some_and(|n| n.member)
    }

    /// Adds every path of `other`.
    pub fn union_with(&mut self, other: &FieldSet) {
        for (element, theirs) in &other.nodes {
            let ours = self.node_mut(element.clone());
            ours.member |= theirs.member;
            ours.children.union_with(&theirs.children);
        }
    }

    /// The paths of both sets.
    #[must_use]
    pub fn union(&self, other: &FieldSet) -> FieldSet {
        let mut out = self.clone();
        out.union_with(other);
        out
    }

    /// The paths of this set that `other` lacks (each path on its own: a path below one of
    /// `other`'s stays unless `other` has it too).
    #[must_use]
    pub fn difference(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet::new();
        for (element, ours) in &self.nodes {
            let node = match other.nodes.get(element) {
                None => ours.clone(),
                Some(theirs) => Node {
                    member: ours.member && !theirs.member,
                    children: ours.children.difference(&theirs.children),
                },
            };
            if !node.is_empty() {
                out.nodes.insert(element.clone(), node);
            }
        }
        out
    }

    /// The paths in both sets.
    #[must_use]
    pub fn intersection(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet::new();
        for (element, ours) in &self.nodes {
            if let Some(theirs) = other.nodes.get(element) {
                let node = Node {
                    member: ours.member && theirs.member,
                    children: ours.children.intersection(&theirs.children),
                };
                if !node.is_empty() {
                    out.nodes.insert(element.clone(), node);
                }
            }
        }
        out
    }

    /// Removes `path` and every path below it.
    pub fn remove_subtree<S: AsRef<str>>(&mut self, path: &[S]) {
        let Some((last, parents)) = path.split_last() else {
            self.nodes.clear();
            return;
        };
        let Some((first, rest)) = parents.split_first() else {
            self.nodes.remove(last.as_ref());
            return;
        };
        if let Some(node) = self.nodes.get_mut(first.as_ref()) {
            let mut below: Vec<&str> = rest.iter().map(AsRef::as_ref).collect();
            below.push(last.as_ref());
            node.children.remove_subtree(&below);
            if node.is_empty() {
                self.nodes.remove(first.as_ref());
            }
        }
    }

    /// Removes `path` itself, keeping the paths below it.
    pub fn remove<S: AsRef<str>>(&mut self, path: &[S]) {
        let Some((first, rest)) = path.split_first() else {
            return;
        };
        if let Some(node) = self.nodes.get_mut(first.as_ref()) {
            if rest.is_empty() {
                node.member = false;
            } else {
                node.children.remove(rest);
            }
            if node.is_empty() {
                self.nodes.remove(first.as_ref());
            }
        }
    }

    /// Every path in the set, sorted.
    #[must_use]
    pub fn paths(&self) -> Vec<Vec<String>> {
        let mut out = Vec::new();
        self.collect(&mut Vec::new(), &mut out);
        out
    }

    fn collect(&self, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
        for (element, node) in &self.nodes {
            prefix.push(element.clone());
            if node.member {
                out.push(prefix.clone());
            }
            node.children.collect(prefix, out);
            prefix.pop();
        }
    }

    /// The set with every named field that has paths below it made a member too (a struct
    /// field is removed as a whole when pruning, as structured-merge-diff does).
    #[must_use]
    pub fn with_named_fields_as_members(&self, shape: &Shape) -> FieldSet {
        let mut out = FieldSet::new();
        for (element, node) in &self.nodes {
            let (child_shape, named) = match element.strip_prefix("f:") {
                Some(name) => (shape.field(name), shape.is_named(name)),
                None => (shape.item(), false),
            };
            let children = node.children.with_named_fields_as_members(child_shape);
            let member = node.member || (named && !children.is_empty());
            out.nodes.insert(element.clone(), Node { member, children });
        }
        out
    }

    /// The `fieldsV1` JSON of the set.
    #[must_use]
    pub fn to_fields_v1(&self) -> Value {
        let mut out = Map::new();
        for (element, node) in &self.nodes {
            let mut inner = Map::new();
            if node.member && !node.children.is_empty() {
                inner.insert(".".into(), Value::Object(Map::new()));
            }
            if let Value::Object(children) = node.children.to_fields_v1() {
                inner.extend(children);
            }
            out.insert(element.clone(), Value::Object(inner));
        }
        Value::Object(out)
    }

    /// Reads a `fieldsV1` value.
    pub fn from_fields_v1(value: &Value) -> Result<FieldSet, FieldsV1Error> {
        let Value::Object(map) = value else {
            return Err(FieldsV1Error::NotAnObject {
                found: value.to_string(),
                at: String::new(),
            });
        };
        let mut out = FieldSet::new();
        for (element, inner) in map {
            if element == "." {
                continue;
            }
            if Element::decode(element).is_none() {
                return Err(FieldsV1Error::BadElement(element.clone()));
            }
            let Value::Object(children) = inner else {
                return Err(FieldsV1Error::NotAnObject {
                    found: inner.to_string(),
                    at: element.clone(),
                });
            };
            let member = children.is_empty() || children.contains_key(".");
            let node = Node {
                member,
                children: FieldSet::from_fields_v1(inner)?,
            };
            if !node.is_empty() {
                out.nodes.insert(element.clone(), node);
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn set(paths: &[&[&str]]) -> FieldSet {
        let mut s = FieldSet::new();
        for p in paths {
            s.insert(p);
        }
        s
    }

    #[test]
    fn fields_v1_should_round_trip_with_dots_for_members_that_have_children() {
        let fields = json!({
            "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
            "f:spec": {"f:containers": {"k:{\"name\":\"web\"}": {".": {}, "f:image": {}, "f:name": {}}}}
        });
        let s = FieldSet::from_fields_v1(&fields).unwrap();
        assert!(s.contains(&["f:metadata", "f:labels"]));
        assert!(!s.contains(&["f:metadata"]));
        assert!(s.contains(&["f:spec", "f:containers", "k:{\"name\":\"web\"}", "f:image"]));
        assert_eq!(s.to_fields_v1(), fields);
        assert_eq!(s.paths().len(), 5);
    }

    #[test]
    fn bad_fields_v1_should_be_refused() {
        assert!(FieldSet::from_fields_v1(&json!({"spec": {}})).is_err());
        assert!(FieldSet::from_fields_v1(&json!({"f:spec": 1})).is_err());
        assert!(FieldSet::from_fields_v1(&json!([])).is_err());
    }

    #[test]
    fn set_operations_should_work_path_by_path() {
        let a = set(&[
            &["f:spec", "f:replicas"],
            &["f:spec", "f:paused"],
            &["f:data"],
        ]);
        let b = set(&[&["f:spec", "f:replicas"], &["f:data", "f:x"]]);
        assert_eq!(a.intersection(&b), set(&[&["f:spec", "f:replicas"]]));
        // `f:data` is a member of a; b only has a path below it.
        assert_eq!(
            a.difference(&b),
            set(&[&["f:spec", "f:paused"], &["f:data"]])
        );
        assert!(a.union(&b).contains(&["f:data", "f:x"]));
        let mut c = a.clone();
        c.remove_subtree(&["f:spec"]);
        assert_eq!(c, set(&[&["f:data"]]));
        let mut d = a.union(&b);
        d.remove(&["f:data"]);
        assert!(!d.contains(&["f:data"]) && d.contains(&["f:data", "f:x"]));
    }
}

//! The ownership rules of server-side apply over a [`Managers`] table:
//!
//! - [`update`] (any write that is not an apply: create, update, patch): the writer comes to
//!   own every field it added or changed, taken from whoever owned it; removed fields are
//!   owned by nobody. Never a conflict.
//! - [`apply`]: the configuration is merged into the live object; the applier owns exactly
//!   the configuration's fields; fields it applied last time and not now are removed unless
//!   another manager owns them; a field whose value the apply changes and another manager
//!   owns is a conflict, unless forced, which takes the field over.

use std::collections::BTreeMap;

use serde_json::Value;

use super::set::FieldSet;
use super::shape::Shape;
use super::walk::{compare, field_set, merge, remove, Comparison};

/// How a manager wrote its fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Operation {
    /// Server-side apply.
    Apply,
    /// Any other write.
    Update,
}

impl Operation {
    /// The name `managedFields` entries use.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Apply => "Apply",
            Operation::Update => "Update",
        }
    }
}

/// Who owns a set of fields: a manager name, its operation and the subresource it wrote
/// through (`""` for the main resource).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ManagerKey {
    /// The `fieldManager` (or the client's user agent).
    pub manager: String,
    /// Apply or Update.
    pub operation: Operation,
    /// `""`, `status`, `scale`, …
    pub subresource: String,
}

/// The fields one manager owns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Managed {
    /// The fields.
    pub set: FieldSet,
    /// The API version the manager wrote in.
    pub api_version: String,
    /// When its fields last changed (RFC 3339), if known.
    pub time: Option<String>,
}

/// Every manager's fields.
pub type Managers = BTreeMap<ManagerKey, Managed>;

/// A field another manager owns whose value an apply would change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conflict {
    /// The owner.
    pub manager: ManagerKey,
    /// The owner's entry.
    pub owner: Managed,
    /// The field (encoded elements).
    pub path: Vec<String>,
}

/// Fields nobody owns: exact paths (the path itself, not what is below it) and whole subtrees.
#[derive(Clone, Debug, Default)]
pub struct Ignore {
    exact: Vec<Vec<String>>,
    subtrees: Vec<Vec<String>>,
}

impl Ignore {
    /// Ignores `exact` paths themselves and everything below `subtrees`.
    #[must_use]
    pub fn new(exact: Vec<Vec<String>>, subtrees: Vec<Vec<String>>) -> Ignore {
        Ignore { exact, subtrees }
    }

    /// Removes the ignored fields from `set`.
    pub fn filter(&self, set: &mut FieldSet) {
        for path in &self.exact {
            set.remove(path);
        }
        for path in &self.subtrees {
            set.remove_subtree(path);
        }
    }

    /// Drops the ignored fields from each part of a comparison.
    pub fn filter_comparison(&self, c: &mut Comparison) {
        self.filter(&mut c.added);
        self.filter(&mut c.modified);
        self.filter(&mut c.removed);
    }
}

/// Who writes, and what the rules need to know of the object's kind.
#[derive(Clone, Copy, Debug)]
pub struct Writer<'a> {
    /// The manager writing.
    pub manager: &'a ManagerKey,
    /// The API version it writes in.
    pub api_version: &'a str,
    /// The kind's schema shape.
    pub shape: &'a Shape,
    /// The fields nobody owns.
    pub ignore: &'a Ignore,
}

/// Records a non-apply write that turned `old` (absent for a create) into `new`.
pub fn update(managers: &mut Managers, old: Option<&Value>, new: &Value, w: &Writer<'_>) {
    let (shape, writer, api_version, ignore) = (w.shape, w.manager, w.api_version, w.ignore);
    let mut diff = compare(old, Some(new), shape);
    ignore.filter_comparison(&mut diff);
    let changed = diff.added.union(&diff.modified);
    for (key, managed) in managers.iter_mut() {
        if key != writer {
            managed.set = managed.set.difference(&changed).difference(&diff.removed);
        }
    }
    let mine = managers.entry(writer.clone()).or_insert_with(|| Managed {
        set: FieldSet::new(),
        api_version: api_version.to_owned(),
        time: None,
    });
    let mut set = mine.set.difference(&diff.removed).union(&changed);
    ignore.filter(&mut set);
    if set != mine.set || mine.api_version != api_version {
        mine.set = set;
        mine.api_version = api_version.to_owned();
        mine.time = None;
    }
    managers.retain(|_, m| !m.set.is_empty());
}

/// Applies `config` for `applier` to `live` (absent when the apply creates the object) and
/// returns the new object, or the conflicts when not `force`d. A manager whose set changed
/// has its `time` cleared, for the caller to stamp.
pub fn apply(
    managers: &mut Managers,
    live: Option<&Value>,
    config: &Value,
    w: &Writer<'_>,
    force: bool,
) -> Result<Value, Vec<Conflict>> {
    let (shape, applier, api_version, ignore) = (w.shape, w.manager, w.api_version, w.ignore);
    let mut new = merge(live, config, shape);
    let last = managers.get(applier).map(|m| m.set.clone());
    let mut set = field_set(config, shape);
    ignore.filter(&mut set);
    if let Some(last) = last.filter(|l| !l.is_empty()) {
        let mut owned = set.clone();
        for (key, managed) in managers.iter() {
            if key != applier {
                owned.union_with(&managed.set);
            }
        }
        let stale = last
            .with_named_fields_as_members(shape)
            .difference(&owned.with_named_fields_as_members(shape));
        remove(&mut new, &stale, shape);
    }
    let mut diff = compare(live, Some(&new), shape);
    ignore.filter_comparison(&mut diff);
    let changed = diff.added.union(&diff.modified);
    let mut conflicts = Vec::new();
    for (key, managed) in managers.iter() {
        if key == applier {
            continue;
        }
        for path in managed.set.intersection(&changed).paths() {
            conflicts.push(Conflict {
                manager: key.clone(),
                owner: managed.clone(),
                path,
            });
        }
    }
    if !force && !conflicts.is_empty() {
        return Err(conflicts);
    }
    for (key, managed) in managers.iter_mut() {
        if key != applier {
            managed.set = managed.set.difference(&changed).difference(&diff.removed);
        }
    }
    let previous = managers.insert(
        applier.clone(),
        Managed {
            set,
            api_version: api_version.to_owned(),
            time: None,
        },
    );
    if let Some(previous) = previous {
        let mine = managers.get_mut(applier).expect("just inserted");
        if previous.set == mine.set && previous.api_version == mine.api_version && diff.is_empty() {
            mine.time = previous.time;
        }
    }
    managers.retain(|_, m| !m.set.is_empty());
    Ok(new)
}

#[cfg(test)]
#[path = "managers_tests.rs"]
mod tests;

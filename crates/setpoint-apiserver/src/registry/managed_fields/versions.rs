//! Managers that wrote at another version of the resource. Their fields are recorded in their
//! own version's terms (an `autoscaling/v1` HPA's `targetCPUUtilizationPercentage` is `v2`'s
//! `metrics`), so a write is also compared at each of their versions, as structured-merge-diff
//! does: what it changed there is taken from them, and an apply conflicts with them there.
//!
//! Objects are converted as a read at that version would be (to the storage form, then served
//! at that version). A resource converted by a webhook (a CRD's `conversion.strategy: Webhook`)
//! cannot be converted here, within a write; its other-version managers are compared at the
//! writer's version, field path for field path.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::Value;
use setpoint_core::fieldpath::{self, Conflict, FieldSet, Ignore, Managers, Shape};

use super::{shape_of, FieldManager};
use crate::registry::ResourceDef;

/// What a write changed, seen at one other version.
pub(super) struct VersionChanges {
    api_version: String,
    /// Added or modified fields.
    changed: FieldSet,
    removed: FieldSet,
}

impl FieldManager<'_> {
    /// `object`, written at this manager's version, as served at `api_version`, with that
    /// version's shape; `None` where it cannot be converted here.
    fn at_version(&self, object: &Value, target: &ResourceDef) -> Option<(Value, Arc<Shape>)> {
        if self.def.strategy.conversion().is_some() || target.strategy.conversion().is_some() {
            return None;
        }
        let stored = self.def.strategy.to_storage(object.clone());
        let mut served = target.strategy.served_from_storage(stored);
        served["apiVersion"] = Value::String(target.gvk.api_version());
        Some((served, shape_of(target)))
    }

    /// For each version other than the writer's that some manager of `managers` wrote at:
    /// the fields a write turning `old` into `new` changed and removed there.
    pub(super) fn changes_at_other_versions(
        &self,
        managers: &Managers,
        old: Option<&Value>,
        new: &Value,
        ignore: &Ignore,
    ) -> Vec<VersionChanges> {
        if self.versions.is_empty() {
            return Vec::new();
        }
        let mine = self.def.gvk.api_version();
        let versions: BTreeSet<&str> = managers
            .values()
            .map(|m| m.api_version.as_str())
            .filter(|v| *v != mine)
            .collect();
        let mut out = Vec::new();
        for api_version in versions {
            let Some(target) = self
                .versions
                .iter()
                .find(|d| d.gvk.api_version() == api_version)
            else {
                continue;
            };
            let Some((new_there, shape)) = self.at_version(new, target) else {
                continue;
            };
            let old_there = old.and_then(|o| self.at_version(o, target)).map(|(o, _)| o);
            let mut diff = fieldpath::walk::compare(old_there.as_ref(), Some(&new_there), &shape);
            ignore.filter_comparison(&mut diff);
            out.push(VersionChanges {
                api_version: api_version.to_owned(),
                changed: diff.added.union(&diff.modified),
                removed: diff.removed,
            });
        }
        out
    }

    /// Takes what `changes` changed or removed from the other managers at their versions.
    pub(super) fn take_from_other_versions(
        &self,
        managers: &mut Managers,
        changes: &[VersionChanges],
    ) {
        for change in changes {
            for (key, managed) in managers.iter_mut() {
                if *key != self.key && managed.api_version == change.api_version {
                    managed.set = managed
                        .set
                        .difference(&change.changed)
                        .difference(&change.removed);
                }
            }
        }
        managers.retain(|_, m| !m.set.is_empty());
    }

    /// The fields of other managers at their versions that `changes` would change.
    pub(super) fn conflicts_at_other_versions(
        &self,
        managers: &Managers,
        changes: &[VersionChanges],
    ) -> Vec<Conflict> {
        let mut conflicts = Vec::new();
        for change in changes {
            for (key, managed) in managers {
                if *key == self.key || managed.api_version != change.api_version {
                    continue;
                }
                for path in managed.set.intersection(&change.changed).paths() {
                    conflicts.push(Conflict {
                        manager: key.clone(),
                        owner: managed.clone(),
                        path,
                    });
                }
            }
        }
        conflicts
    }
}

//! The configuration API Priority and Fairness runs on, compiled from the FlowSchemas and
//! PriorityLevelConfigurations of the watch caches: the schemas in matching order (ascending
//! `matchingPrecedence`, then name; dangling ones — naming a missing level — left out, as
//! kube-apiserver does), and each level with its concurrency limit.
//!
//! Limits: the server's total seats (`--max-requests-inflight` + `--max-mutating-requests-inflight`)
//! are shared among the `Limited` levels in proportion to their `nominalConcurrencyShares`
//! (rounded up, at least one seat). Borrowing between levels (`lendablePercent`,
//! `borrowingLimitPercent`) is not done: a level's nominal limit is its limit. `Exempt` levels
//! have no limit. The mandatory objects (`exempt`, `catch-all`) are used from `defaults.rs`
//! when the store lacks them, so every request is classified.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::flowcontrol::v1 as fc;

use super::defaults;
use super::queueset::{Level, LevelKind, Queuing};
use super::rules::{rule_matches, Digest};

/// How a FlowSchema tells flows apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Distinguisher {
    /// One flow per user name.
    ByUser,
    /// One flow per namespace.
    ByNamespace,
}

/// One FlowSchema, ready to match.
#[derive(Debug)]
pub(crate) struct Schema {
    pub(crate) name: String,
    pub(crate) uid: String,
    precedence: i32,
    pub(crate) level: String,
    distinguisher: Option<Distinguisher>,
    rules: Vec<fc::PolicyRulesWithSubjects>,
}

impl Schema {
    fn of(object: &fc::FlowSchema) -> Option<Schema> {
        let spec = object.spec.as_ref()?;
        let distinguisher = match spec.distinguisher_method.as_ref().map(|d| d.type_.as_str()) {
            Some("ByUser") => Some(Distinguisher::ByUser),
            Some("ByNamespace") => Some(Distinguisher::ByNamespace),
            _ => None,
        };
        Some(Schema {
            name: object.metadata.name.clone()?,
            uid: object.metadata.uid.clone().unwrap_or_default(),
            precedence: spec.matching_precedence.unwrap_or(1000),
            level: spec.priority_level_configuration.name.clone(),
            distinguisher,
            rules: spec.rules.clone().unwrap_or_default(),
        })
    }

    /// The flow of `digest` within this schema: the distinguisher's value.
    pub(crate) fn flow(&self, digest: &Digest<'_>) -> String {
        match self.distinguisher {
            Some(Distinguisher::ByUser) => digest.user.name.clone(),
            Some(Distinguisher::ByNamespace) => digest.namespace().to_owned(),
            None => String::new(),
        }
    }
}

/// The compiled configuration: swapped whole when the objects change.
#[derive(Debug)]
pub(crate) struct Config {
    /// What the two caches had received and held when it was compiled.
    pub(crate) stamp: (u64, u64),
    /// The total seats the limits were computed from.
    pub(crate) total_seats: usize,
    /// In matching order; none dangling.
    pub(crate) schemas: Vec<Arc<Schema>>,
    /// By name.
    pub(crate) levels: BTreeMap<String, Arc<Level>>,
}

impl Config {
    /// The first schema matching `digest`, and its level. `None` only if the mandatory
    /// `catch-all` was changed so that it no longer matches.
    pub(crate) fn classify(&self, digest: &Digest<'_>) -> Option<(&Arc<Schema>, &Arc<Level>)> {
        self.schemas.iter().find_map(|schema| {
            let level = self.levels.get(&schema.level)?;
            schema
                .rules
                .iter()
                .any(|rule| rule_matches(rule, digest))
                .then_some((schema, level))
        })
    }
}

/// What a PriorityLevelConfiguration asks for.
fn kind_of(object: &fc::PriorityLevelConfiguration) -> LevelKind {
    let Some(spec) = object.spec.as_ref() else {
        return LevelKind::Exempt;
    };
    if spec.type_ == "Exempt" {
        return LevelKind::Exempt;
    }
    let limited = spec.limited.clone().unwrap_or_default();
    let shares = limited.nominal_concurrency_shares.unwrap_or(30).max(0);
    let queuing = limited.limit_response.as_ref().and_then(|response| {
        if response.type_ != "Queue" {
            return None;
        }
        let q = response.queuing.clone().unwrap_or_default();
        Some(Queuing {
            queues: usize::try_from(q.queues.unwrap_or(64)).unwrap_or(64).max(1),
            hand_size: usize::try_from(q.hand_size.unwrap_or(8))
                .unwrap_or(8)
                .max(1),
            queue_length_limit: usize::try_from(q.queue_length_limit.unwrap_or(50)).unwrap_or(50),
        })
    });
    LevelKind::Limited {
        shares: u32::try_from(shares).unwrap_or(0),
        queuing,
    }
}

/// Compiles `schemas` and `levels` (as the caches hold them) into a [`Config`] for
/// `total_seats`, reusing from `previous` every level whose kind did not change (its queues
/// and the requests in them go on; only its limit is set anew).
pub(crate) fn compile(
    schemas: &[fc::FlowSchema],
    levels: &[fc::PriorityLevelConfiguration],
    total_seats: usize,
    stamp: (u64, u64),
    previous: Option<&Config>,
) -> Config {
    let mut level_objects: BTreeMap<String, fc::PriorityLevelConfiguration> = BTreeMap::new();
    for mandatory in defaults::mandatory_levels() {
        if let Some(name) = mandatory.metadata.name.clone() {
            level_objects.insert(name, mandatory);
        }
    }
    for level in levels {
        if let Some(name) = level.metadata.name.clone() {
            level_objects.insert(name, level.clone());
        }
    }
    let kinds: BTreeMap<String, (String, LevelKind)> = level_objects
        .iter()
        .map(|(name, object)| {
            (
                name.clone(),
                (
                    object.metadata.uid.clone().unwrap_or_default(),
                    kind_of(object),
                ),
            )
        })
        .collect();
    let total_shares: u64 = kinds
        .values()
        .map(|(_, kind)| match kind {
            LevelKind::Limited { shares, .. } => u64::from(*shares),
            LevelKind::Exempt => 0,
        })
        .sum();
    let mut compiled = BTreeMap::new();
    for (name, (uid, kind)) in kinds {
        let limit = match &kind {
            LevelKind::Limited { shares, .. } => {
                nominal_limit(total_seats, u64::from(*shares), total_shares)
            }
            LevelKind::Exempt => 0,
        };
        let reused = previous
            .and_then(|p| p.levels.get(&name))
            .filter(|level| level.kind == kind && level.uid == uid)
            .cloned();
        let level = reused.unwrap_or_else(|| Arc::new(Level::new(name.clone(), uid, kind)));
        level.set_limit(limit);
        compiled.insert(name, level);
    }
    let mut schema_objects: BTreeMap<String, Schema> = BTreeMap::new();
    for mandatory in defaults::mandatory_schemas() {
        if let Some(schema) = Schema::of(&mandatory) {
            schema_objects.insert(schema.name.clone(), schema);
        }
    }
    for object in schemas {
        if let Some(schema) = Schema::of(object) {
            schema_objects.insert(schema.name.clone(), schema);
        }
    }
    let mut ordered: Vec<Arc<Schema>> = schema_objects
        .into_values()
        .filter(|schema| compiled.contains_key(&schema.level))
        .map(Arc::new)
        .collect();
    ordered.sort_by(|a, b| {
        a.precedence
            .cmp(&b.precedence)
            .then_with(|| a.name.cmp(&b.name))
    });
    Config {
        stamp,
        total_seats,
        schemas: ordered,
        levels: compiled,
    }
}

/// A level's share of `total` seats: `ceil(total × shares / all shares)`, at least 1.
fn nominal_limit(total: usize, shares: u64, all_shares: u64) -> usize {
    if all_shares == 0 {
        return total.max(1);
    }
    let total = total as u64;
    let limit = (total * shares).div_ceil(all_shares);
    usize::try_from(limit).unwrap_or(usize::MAX).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_should_be_shares_of_the_total_rounded_up() {
        assert_eq!(nominal_limit(600, 30, 245), 74);
        assert_eq!(nominal_limit(10, 5, 245), 1);
        assert_eq!(nominal_limit(10, 0, 245), 1);
    }
}

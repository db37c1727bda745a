//! The options of a list or watch, once decoded from the query string (`handlers/params.rs`
//! decodes them): which objects, at which revision, how many, from where; and whether a write
//! is a dry run.

use std::collections::BTreeMap;

use base64::Engine;
use serde_json::json;
use setpoint_core::{ApiError, Revision};

use crate::watchcache::Filter;

/// Whether a write's query asks for a dry run (`dryRun=All`); anything else is a 400.
pub(crate) fn dry_run_of(query: &BTreeMap<String, String>) -> Result<bool, ApiError> {
    match query.get("dryRun").map(String::as_str) {
        None | Some("") => Ok(false),
        Some("All") => Ok(true),
        Some(other) => Err(ApiError::bad_request(format!(
            "dryRun: Unsupported value: {other:?}: supported values: \"All\""
        ))),
    }
}

/// How `resourceVersion` is to be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RvMatch {
    /// Unset: the most recent state (a consistent read).
    MostRecent,
    /// `0`: any state the cache has.
    Any,
    /// `N` (or `NotOlderThan`): a state at least as new as `N`.
    NotOlderThan(Revision),
    /// `Exact`, or `N` with a limit: the state at exactly `N`.
    Exact(Revision),
}

/// Parsed list/watch options.
pub(crate) struct ListOptions {
    pub(crate) filter: Filter,
    pub(crate) rv: RvMatch,
    pub(crate) limit: Option<usize>,
    pub(crate) continue_token: Option<Continue>,
}

/// Where a paged list continues: the snapshot revision and the key after which to go on, and
/// (for an unfiltered list) how many objects were left after the page that made the token —
/// the next page's `remainingItemCount` is that less its own items, so no page but the first
/// counts the rest of the collection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Continue {
    pub(crate) revision: Revision,
    pub(crate) start: String,
    pub(crate) remaining: Option<u64>,
}

impl Continue {
    pub(crate) fn encode(&self) -> String {
        let mut raw =
            json!({"v": "setpoint.continue/v1", "rv": self.revision.get(), "start": self.start});
        if let Some(remaining) = self.remaining {
            raw["rem"] = json!(remaining);
        }
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw.to_string())
    }

    pub(crate) fn decode(token: &str) -> Result<Continue, ApiError> {
        let invalid = || {
            ApiError::bad_request("continue key is not valid: invalid continue token".to_string())
        };
        let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(token.trim_end_matches('='))
            .map_err(|_| invalid())?;
        let v: serde_json::Value = serde_json::from_slice(&raw).map_err(|_| invalid())?;
        match (v["v"].as_str(), v["rv"].as_u64(), v["start"].as_str()) {
            (Some("setpoint.continue/v1"), Some(rv), Some(start)) => Ok(Continue {
                revision: Revision(rv),
                start: start.to_owned(),
                remaining: v["rem"].as_u64(),
            }),
            _ => Err(invalid()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continue_tokens_should_round_trip_and_reject_garbage() {
        let c = Continue {
            revision: Revision(42),
            start: "/registry/pods/a/b\u{0}".into(),
            remaining: Some(7),
        };
        assert_eq!(Continue::decode(&c.encode()).unwrap(), c);
        assert!(Continue::decode("bm9wZQ").is_err());
        assert!(Continue::decode("!!!").is_err());
    }
}

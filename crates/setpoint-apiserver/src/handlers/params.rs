//! List and watch options from the query string, validated as kube-apiserver validates them.

use base64::Engine;
use serde_json::json;
use setpoint_core::{ApiError, FieldSelector, LabelSelector, Revision};

use super::Ctx;
use crate::watchcache::Filter;

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

/// Where a paged list continues: the snapshot revision and the key after which to go on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Continue {
    pub(crate) revision: Revision,
    pub(crate) start: String,
}

impl Continue {
    pub(crate) fn encode(&self) -> String {
        let raw =
            json!({"v": "setpoint.continue/v1", "rv": self.revision.get(), "start": self.start});
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
            }),
            _ => Err(invalid()),
        }
    }
}

fn revision(s: &str) -> Result<Revision, ApiError> {
    s.parse::<Revision>()
        .map_err(|_| ApiError::bad_request(format!("invalid resource version {s:?}")))
}

impl ListOptions {
    /// Parses the query of a list or watch request.
    pub(crate) fn parse(ctx: &Ctx<'_>, watch: bool) -> Result<ListOptions, ApiError> {
        let q = ctx.query;
        let labels = match q.get("labelSelector").map(String::as_str) {
            None | Some("") => LabelSelector::everything(),
            Some(s) => LabelSelector::parse(s).map_err(|e| ApiError::bad_request(e.to_string()))?,
        };
        let fields = match q.get("fieldSelector").map(String::as_str) {
            None | Some("") => FieldSelector::everything(),
            Some(s) => FieldSelector::parse(s)
                .and_then(|f| f.resolve(&ctx.def.selectable()))
                .map_err(|e| ApiError::bad_request(e.to_string()))?,
        };
        let rv_param = q
            .get("resourceVersion")
            .map(String::as_str)
            .filter(|s| !s.is_empty());
        let rv_match = q
            .get("resourceVersionMatch")
            .map(String::as_str)
            .filter(|s| !s.is_empty());
        let limit = match q.get("limit").map(String::as_str) {
            None | Some("") | Some("0") => None,
            Some(l) => Some(
                l.parse::<usize>()
                    .map_err(|_| ApiError::bad_request(format!("invalid limit {l:?}")))?,
            ),
        };
        let continue_token = match q.get("continue").map(String::as_str) {
            None | Some("") => None,
            Some(t) => {
                if rv_param.is_some() {
                    return Err(invalid_options(
                        "resourceVersion",
                        "specifying resource version is not allowed when using continue",
                    ));
                }
                Some(Continue::decode(t)?)
            }
        };
        let rv = match (rv_param, rv_match) {
            (None, None) => RvMatch::MostRecent,
            // A streaming list (watch + sendInitialEvents) without a resourceVersion starts
            // from a consistent read of the current state, as kube-apiserver serves it.
            (None, Some("NotOlderThan")) if watch && q.contains_key("sendInitialEvents") => {
                RvMatch::MostRecent
            }
            (None, Some(_)) => {
                return Err(invalid_options(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden unless resourceVersion is provided",
                ))
            }
            (Some("0"), None) => RvMatch::Any,
            (Some(v), None) if limit.is_some() && !watch && v != "0" => {
                RvMatch::Exact(revision(v)?)
            }
            (Some(v), None) => RvMatch::NotOlderThan(revision(v)?),
            (Some("0"), Some("Exact")) => {
                return Err(invalid_options(
                    "resourceVersionMatch",
                    "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
                ))
            }
            (Some(v), Some("Exact")) if !watch => RvMatch::Exact(revision(v)?),
            (Some("0"), Some("NotOlderThan")) => RvMatch::Any,
            (Some(v), Some("NotOlderThan")) => RvMatch::NotOlderThan(revision(v)?),
            (Some(_), Some(other)) => {
                return Err(invalid_options(
                    "resourceVersionMatch",
                    &format!(
                    "Unsupported value: {other:?}: supported values: \"Exact\", \"NotOlderThan\""
                ),
                ))
            }
        };
        Ok(ListOptions {
            filter: Filter {
                namespace: ctx.req.namespace.clone(),
                labels,
                fields,
            },
            rv,
            limit,
            continue_token,
        })
    }
}

/// 422 for invalid list options, as kube-apiserver words it.
pub(crate) fn invalid_options(field: &str, message: &str) -> ApiError {
    ApiError::invalid(
        "ListOptions",
        "meta.k8s.io",
        "",
        vec![setpoint_core::Cause::new(
            "FieldValueInvalid",
            field,
            format!("{field}: Invalid value: {message}"),
        )],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continue_tokens_should_round_trip_and_reject_garbage() {
        let c = Continue {
            revision: Revision(42),
            start: "/registry/pods/a/b\u{0}".into(),
        };
        assert_eq!(Continue::decode(&c.encode()).unwrap(), c);
        assert!(Continue::decode("bm9wZQ").is_err());
        assert!(Continue::decode("!!!").is_err());
    }
}

//! List and watch options from the query string, validated as kube-apiserver validates them.

use setpoint_core::{ApiError, FieldSelector, LabelSelector, Revision};

use super::Ctx;
use crate::registry::store::{Continue, ListOptions, RvMatch};
use crate::watchcache::Filter;

fn revision(s: &str) -> Result<Revision, ApiError> {
    s.parse::<Revision>()
        .map_err(|_| ApiError::bad_request(format!("invalid resource version {s:?}")))
}

/// Parses the query of a list or watch request.
pub(crate) fn list_options(ctx: &Ctx<'_>, watch: bool) -> Result<ListOptions, ApiError> {
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
        (Some(v), None) if limit.is_some() && !watch && v != "0" => RvMatch::Exact(revision(v)?),
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

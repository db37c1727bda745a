//! `DeleteOptions` of a DELETE or DELETECOLLECTION, from the request body and the query string,
//! validated as kube-apiserver validates them.
//!
//! kube-apiserver reads the options from the body when there is one and from the query
//! otherwise. Setpoint reads both: a field set in the body wins, the query fills in what the
//! body leaves out, and the request is a dry run if either says so. A client that puts
//! `dryRun=All` in the query and its other options in a body (or the reverse, as kubectl does)
//! must never see its dry run performed for real.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{json, Value};
use setpoint_core::{ApiError, Cause};

pub(crate) use crate::registry::Propagation;

/// The options of one deletion.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct DeleteOptions {
    /// `gracePeriodSeconds`, never negative: kube-apiserver treats a negative period as 1 s.
    pub(crate) grace_period: Option<i64>,
    /// `propagationPolicy`, or what the deprecated `orphanDependents` asked for.
    pub(crate) propagation: Option<Propagation>,
    /// `preconditions.uid`: the object must have this UID (else 409).
    pub(crate) precondition_uid: Option<String>,
    /// `preconditions.resourceVersion`: the object must be at this version (else 409).
    pub(crate) precondition_rv: Option<String>,
    /// `dryRun: ["All"]` in the body or `dryRun=All` in the query: nothing is written.
    pub(crate) dry_run: bool,
}

/// The JSON body, as far as it matters here (`kind`/`apiVersion` are accepted and ignored).
#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Body {
    grace_period_seconds: Option<i64>,
    propagation_policy: Option<String>,
    orphan_dependents: Option<bool>,
    preconditions: Option<Preconditions>,
    dry_run: Option<Vec<String>>,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Preconditions {
    uid: Option<String>,
    resource_version: Option<String>,
}

impl DeleteOptions {
    /// Reads and validates the options of `ctx`'s request (see the module docs). Malformed
    /// values are 400s; values kube-apiserver's validation refuses are 422s for the kind
    /// `DeleteOptions`.
    ///
    /// `body` is the decoded `DeleteOptions` (JSON, YAML or protobuf on the wire; an
    /// `Eviction`'s `deleteOptions`), `null` when there is none.
    pub(crate) fn parse(
        query: &BTreeMap<String, String>,
        body: &Value,
    ) -> Result<DeleteOptions, ApiError> {
        let body = if body.is_null() {
            Body::default()
        } else {
            Body::deserialize(body).map_err(|e| {
                ApiError::bad_request(format!("the DeleteOptions body is not valid: {e}"))
            })?
        };
        let query_grace =
            match query.get("gracePeriodSeconds").map(String::as_str) {
                None | Some("") => None,
                Some(g) => Some(g.parse::<i64>().map_err(|_| {
                    ApiError::bad_request(format!("invalid gracePeriodSeconds {g:?}"))
                })?),
            };
        let query_orphan = match query.get("orphanDependents").map(String::as_str) {
            None | Some("") => None,
            Some("true") => Some(true),
            Some("false") => Some(false),
            Some(o) => {
                return Err(ApiError::bad_request(format!(
                    "invalid orphanDependents {o:?}"
                )))
            }
        };
        let query_propagation = query
            .get("propagationPolicy")
            .filter(|p| !p.is_empty())
            .cloned();
        let mut dry_run: Vec<String> = body.dry_run.unwrap_or_default();
        if let Some(d) = query.get("dryRun").filter(|d| !d.is_empty()) {
            dry_run.push(d.clone());
        }

        let propagation = body.propagation_policy.or(query_propagation);
        let orphan = body.orphan_dependents.or(query_orphan);
        let mut causes = Vec::new();
        if let (Some(p), Some(_)) = (&propagation, orphan) {
            causes.push(Cause::invalid(
                "propagationPolicy",
                &json!(p),
                "orphanDependents and deletionPropagation cannot be both set",
            ));
        }
        let policy = match propagation.as_deref() {
            None => match orphan {
                Some(true) => Some(Propagation::Orphan),
                Some(false) | None => None,
            },
            Some("Background") => Some(Propagation::Background),
            Some("Foreground") => Some(Propagation::Foreground),
            Some("Orphan") => Some(Propagation::Orphan),
            Some(other) => {
                causes.push(Cause::not_supported(
                    "propagationPolicy",
                    &json!(other),
                    &["Foreground", "Background", "Orphan", "nil"],
                ));
                None
            }
        };
        for d in dry_run.iter().filter(|d| *d != "All") {
            causes.push(Cause::not_supported("dryRun", &json!(d), &["All"]));
        }
        if !causes.is_empty() {
            return Err(ApiError::invalid(
                "DeleteOptions",
                "meta.k8s.io",
                "",
                causes,
            ));
        }
        let preconditions = body.preconditions.unwrap_or_default();
        Ok(DeleteOptions {
            // Negative periods are treated as 1 s on the delete path, as kube-apiserver does.
            grace_period: body
                .grace_period_seconds
                .or(query_grace)
                .map(|g| if g < 0 { 1 } else { g }),
            propagation: policy,
            precondition_uid: preconditions.uid.filter(|u| !u.is_empty()),
            precondition_rv: preconditions.resource_version.filter(|r| !r.is_empty()),
            dry_run: !dry_run.is_empty(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(query: &[(&str, &str)], body: &str) -> Result<DeleteOptions, ApiError> {
        let query: BTreeMap<String, String> = query
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let body = if body.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(body).unwrap()
        };
        DeleteOptions::parse(&query, &body)
    }

    #[test]
    fn a_dry_run_in_the_body_or_the_query_should_count() {
        // Regression (issue 14.1): kubectl sends dryRun in the body, and it was ignored.
        assert!(parse(&[], r#"{"dryRun":["All"]}"#).unwrap().dry_run);
        assert!(parse(&[("dryRun", "All")], "").unwrap().dry_run);
        assert!(
            parse(
                &[("dryRun", "All")],
                r#"{"propagationPolicy":"Background"}"#
            )
            .unwrap()
            .dry_run
        );
        assert!(
            !parse(&[], r#"{"propagationPolicy":"Background"}"#)
                .unwrap()
                .dry_run
        );
    }

    #[test]
    fn the_body_should_win_and_the_query_fill_in() {
        let o = parse(
            &[("gracePeriodSeconds", "9"), ("propagationPolicy", "Orphan")],
            r#"{"gracePeriodSeconds":3}"#,
        )
        .unwrap();
        assert_eq!(o.grace_period, Some(3));
        assert_eq!(o.propagation, Some(Propagation::Orphan));
    }

    #[test]
    fn bad_values_should_be_refused_as_kube_apiserver_refuses_them() {
        let e = parse(&[], r#"{"dryRun":["Some"]}"#).unwrap_err();
        assert_eq!(e.reason, setpoint_core::Reason::Invalid);
        let e = parse(&[("dryRun", "Some")], "").unwrap_err();
        assert_eq!(e.reason, setpoint_core::Reason::Invalid);
        let e = parse(
            &[],
            r#"{"orphanDependents":true,"propagationPolicy":"Orphan"}"#,
        )
        .unwrap_err();
        assert_eq!(e.reason, setpoint_core::Reason::Invalid);
        let e = parse(&[("gracePeriodSeconds", "99999999999999999999")], "").unwrap_err();
        assert_eq!(e.reason, setpoint_core::Reason::BadRequest);
        let e = parse(&[], r#"{"gracePeriodSeconds":99999999999999999999}"#).unwrap_err();
        assert_eq!(e.reason, setpoint_core::Reason::BadRequest);
    }

    #[test]
    fn a_negative_grace_period_should_count_as_one_second() {
        assert_eq!(
            parse(&[("gracePeriodSeconds", "-5")], "")
                .unwrap()
                .grace_period,
            Some(1)
        );
        assert_eq!(
            parse(&[], r#"{"gracePeriodSeconds":-9223372036854775808}"#)
                .unwrap()
                .grace_period,
            Some(1)
        );
    }
}

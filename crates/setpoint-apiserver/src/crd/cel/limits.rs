//! The cost limits of CEL rules, kube-apiserver's (`k8s.io/apiserver/pkg/apis/cel` and the
//! apiextensions validation): a rule whose estimated cost exceeds the per-expression limit, or
//! a CRD version whose rules together exceed the per-CRD limit, is refused when the CRD is
//! written; at run time one evaluation may cost at most [`PER_CALL_LIMIT`] and all the rules
//! evaluated for one object together at most [`RUNTIME_BUDGET`].
//!
//! Costs are in kube-apiserver's units, roughly one per operation (a variable read, a field
//! selection, a function call, an iteration step), with string and list operations costing a
//! tenth per character or item they go through.

/// The most one evaluation of one rule (or message expression) may cost.
pub(crate) const PER_CALL_LIMIT: u64 = 1_000_000;

/// The most all the rules evaluated while validating one object may cost together.
pub(crate) const RUNTIME_BUDGET: u64 = 10_000_000;

/// The most a rule's estimated cost may be: one evaluation's worst case times the number of
/// times the rule can run on one object (`StaticEstimatedCostLimit`).
pub(crate) const STATIC_ESTIMATED_COST_LIMIT: u64 = 10_000_000;

/// The most the estimated costs of all the rules of a CRD version's schema may add up to
/// (`StaticEstimatedCRDCostLimit`).
pub(crate) const STATIC_ESTIMATED_CRD_COST_LIMIT: u64 = 100_000_000;

/// The largest request body the estimates assume (kube-apiserver's 3 MiB): a list, map or
/// string without `maxItems`, `maxProperties` or `maxLength` is as long as fits in it.
pub(crate) const MAX_REQUEST_SIZE_BYTES: u64 = 3 * 1024 * 1024;

/// cel-go's message for an evaluation stopped at [`PER_CALL_LIMIT`], which kube-apiserver
/// quotes in its cause.
pub(crate) const COST_LIMIT_EXCEEDED: &str = "operation cancelled: actual cost limit exceeded";

/// Why an estimated cost is refused, in kube-apiserver's words: `what` exceeds `limit` by a
/// factor (`more than 100x`, `2.5x`, or `1.200000x` under 1.5).
pub(crate) fn over_budget_message(what: &str, cost: u64, limit: u64) -> String {
    let factor = cost as f64 / limit as f64;
    let factor = if factor > 100.0 {
        "more than 100x".to_owned()
    } else if factor < 1.5 {
        format!("{factor:.6}x")
    } else {
        format!("{factor:.1}x")
    };
    format!(
        "{what} exceeds budget by factor of {factor} (try simplifying the rule, or adding \
         maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn over_budget_messages_should_give_the_factor_as_kube_apiserver_does() {
        let m = over_budget_message("estimated rule cost", 25, 10);
        assert!(m.starts_with("estimated rule cost exceeds budget by factor of 2.5x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"), "{m}");
        assert!(over_budget_message("x", 12, 10).contains("factor of 1.200000x"));
        assert!(over_budget_message("x", u64::MAX, 10).contains("factor of more than 100x"));
    }
}

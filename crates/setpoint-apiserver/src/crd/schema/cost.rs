//! The estimated cost of a schema's CEL rules, checked when a CRD is written, as
//! kube-apiserver checks it: a rule's (or message expression's) estimated cost is the worst
//! case of one evaluation times the number of times it can run on one object — the product
//! of the `maxItems`/`maxProperties` of the lists and maps above it, or, when one of them has
//! none, as many values as fit in a request. A rule over
//! [`STATIC_ESTIMATED_COST_LIMIT`] is refused at its `rule` (or `messageExpression`), and a
//! schema whose rules add up to more than [`STATIC_ESTIMATED_CRD_COST_LIMIT`] is refused at
//! its root, naming the most expensive rules. Rules under `allOf`/`anyOf`/`oneOf`/`not` are
//! not estimated (kube-apiserver does not compile them either).

use setpoint_core::Cause;

use super::{Additional, Schema, Type};
use crate::crd::cel::limits::{
    over_budget_message, STATIC_ESTIMATED_COST_LIMIT, STATIC_ESTIMATED_CRD_COST_LIMIT,
};
use crate::crd::cel::unbounded_cardinality;

/// The running total of a schema's estimated rule costs.
#[derive(Default)]
struct Total {
    cost: u64,
    /// The (at most four) most expensive rules contributing at least 1% of the CRD limit,
    /// most expensive first.
    most_expensive: Vec<(u64, String)>,
}

impl Total {
    fn observe(&mut self, path: String, cost: u64) {
        self.cost = self.cost.saturating_add(cost);
        if cost < STATIC_ESTIMATED_CRD_COST_LIMIT / 100 {
            return;
        }
        self.most_expensive.push((cost, path));
        self.most_expensive.sort_by_key(|e| std::cmp::Reverse(e.0));
        self.most_expensive.truncate(4);
    }
}

impl Schema {
    /// The causes for the schema's rules (at `at`, the path of its `openAPIV3Schema`) being
    /// too expensive. `per_rule` is false where kube-apiserver skips the per-rule limit: on
    /// an update that leaves this version's schema as it was.
    pub(crate) fn check_costs(&self, at: &str, per_rule: bool) -> Vec<Cause> {
        let mut causes = Vec::new();
        let mut total = Total::default();
        self.check_node_costs(at, Some(1), per_rule, &mut total, &mut causes);
        if total.cost > STATIC_ESTIMATED_CRD_COST_LIMIT {
            for (_, path) in &total.most_expensive {
                causes.push(Cause::forbidden(
                    path.clone(),
                    "contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema",
                ));
            }
            causes.push(Cause::forbidden(
                at,
                &over_budget_message(
                    "x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema",
                    total.cost,
                    STATIC_ESTIMATED_CRD_COST_LIMIT,
                ),
            ));
        }
        causes
    }

    /// `cardinality`: how many times this node can occur in one object (`None`: unbounded).
    fn check_node_costs(
        &self,
        at: &str,
        cardinality: Option<u64>,
        per_rule: bool,
        total: &mut Total,
        causes: &mut Vec<Cause>,
    ) {
        let times = cardinality.unwrap_or_else(|| unbounded_cardinality(self));
        for (i, rule) in self.rules.iter().enumerate() {
            let (rule_cost, message_cost) = rule.estimated_costs(self);
            let costs = [
                ("rule", Some(rule_cost)),
                ("messageExpression", message_cost),
            ];
            for (field, cost) in costs {
                let Some(cost) = cost else { continue };
                let cost = cost.saturating_mul(times);
                let path = format!("{at}.x-kubernetes-validations[{i}].{field}");
                if per_rule && cost > STATIC_ESTIMATED_COST_LIMIT {
                    let what = format!("estimated {field} cost");
                    let message = over_budget_message(&what, cost, STATIC_ESTIMATED_COST_LIMIT);
                    causes.push(Cause::forbidden(path.clone(), &message));
                }
                total.observe(path, cost);
            }
        }
        // How many times each child of this node can occur per occurrence of it.
        let fan_out = match self.kind {
            Some(Type::Array) => self.max_items,
            Some(Type::Object) if self.additional.is_some() => self.max_properties,
            _ => Some(1),
        };
        let below = cardinality.zip(fan_out).map(|(c, f)| c.saturating_mul(f));
        for (name, property) in &self.properties {
            let at = format!("{at}.properties[{name}]");
            property.check_node_costs(&at, below, per_rule, total, causes);
        }
        if let Some(items) = &self.items {
            let at = format!("{at}.items");
            items.check_node_costs(&at, below, per_rule, total, causes);
        }
        if let Some(Additional::Schema(values)) = &self.additional {
            let at = format!("{at}.additionalProperties");
            values.check_node_costs(&at, below, per_rule, total, causes);
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;

    const TRIPLE: &str = "self.l.all(a, self.l.all(b, self.l.all(c, a + b + c >= 0)))";

    fn costs(schema: Value) -> Vec<String> {
        Schema::compile(&schema, "s")
            .unwrap()
            .check_costs("s", true)
            .into_iter()
            .map(|c| c.message)
            .collect()
    }

    fn with_list(list: Value, rule: &str) -> Value {
        json!({"type": "object", "properties": {"spec": {"type": "object",
            "x-kubernetes-validations": [{"rule": rule}],
            "properties": {"l": list}}}})
    }

    #[test]
    fn a_nested_rule_over_an_unbounded_list_should_be_refused() {
        // Regression (issue 14.5): a rule cubic in an unbounded list was accepted and took
        // half a minute per create.
        let unbounded = json!({"type": "array", "items": {"type": "integer"}});
        let msgs = costs(with_list(unbounded, TRIPLE));
        assert_eq!(
            msgs,
            vec![
                "s.properties[spec].x-kubernetes-validations[0].rule: Forbidden: estimated rule cost exceeds budget by factor of more than 100x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)",
                "s.properties[spec].x-kubernetes-validations[0].rule: Forbidden: contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema",
                "s: Forbidden: x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema exceeds budget by factor of more than 100x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)",
            ]
        );
        let bounded = json!({"type": "array", "maxItems": 10, "items": {"type": "integer"}});
        assert_eq!(costs(with_list(bounded, TRIPLE)), Vec::<String>::new());
    }

    #[test]
    fn rules_under_unbounded_lists_should_count_once_per_item() {
        let rule = "self.name.startsWith('a')";
        let items = json!({"type": "object", "x-kubernetes-validations": [{"rule": rule}],
            "properties": {"name": {"type": "string"}}});
        // An unbounded string in every item of an unbounded list: refused.
        let schema =
            json!({"type": "object", "properties": {"l": {"type": "array", "items": items}}});
        let msgs = costs(schema);
        assert!(msgs[0].starts_with("s.properties[l].items.x-kubernetes-validations[0].rule: Forbidden: estimated rule cost exceeds budget"), "{msgs:?}");
        // Bounded names in at most 100 items: accepted.
        let mut items = items;
        items["properties"]["name"]["maxLength"] = json!(253);
        let schema = json!({"type": "object", "properties": {"l": {"type": "array", "maxItems": 100, "items": items}}});
        assert_eq!(costs(schema), Vec::<String>::new());
    }

    #[test]
    fn many_rules_should_be_refused_by_their_total() {
        // Each rule is under the per-rule limit, together they are over the CRD's.
        let rule = "self.all(x, x.startsWith('a'))";
        let mut properties = serde_json::Map::new();
        for i in 0..12 {
            properties.insert(
                format!("p{i}"),
                json!({"type": "array", "maxItems": 100, "x-kubernetes-validations": [{"rule": rule}],
                    "items": {"type": "string", "maxLength": 900_000}}),
            );
        }
        let msgs = costs(json!({"type": "object", "properties": properties}));
        assert!(msgs.len() == 5, "{msgs:?}");
        assert!(msgs[..4].iter().all(|m| m.ends_with("Forbidden: contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema")), "{msgs:?}");
        assert!(msgs[4].starts_with("s: Forbidden: x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema exceeds budget by factor of 1."), "{msgs:?}");
    }
}

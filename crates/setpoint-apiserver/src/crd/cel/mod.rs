//! CEL validation rules (`x-kubernetes-validations`), evaluated with the `cel` crate: each
//! rule sees the value at its schema node as `self` and, when the rule mentions it, the same
//! place before an update as `oldSelf`. A rule that mentions `oldSelf` is a transition rule:
//! it runs only on updates where the old value exists (unless `optionalOldSelf`, which is
//! not supported: such rules run only when there is an old value too).
//!
//! A rule that is false, or that fails to evaluate, becomes a cause at the node's path (or
//! at `fieldPath` below it) with its `reason` (default `FieldValueInvalid`) and a message:
//! the string its `messageExpression` evaluates to (with the rule's variables), else — when
//! there is none, or it fails, or gives an empty, blank or multi-line string — the rule's
//! `message`, else `failed rule: <rule>`. Kubernetes' CEL libraries beyond the standard one
//! (`quantity`, `url`, `isSorted`, …) are not available.
//!
//! Costs are limited as kube-apiserver limits them ([`limits`]): a CRD whose rules are
//! estimated ([`estimate`]) to cost too much is refused, and at run time ([`meter`]) an
//! evaluation past [`limits::PER_CALL_LIMIT`], or rules past the request's
//! [`limits::RUNTIME_BUDGET`], fail the request and stop every further rule. Rules run off
//! the async worker threads ([`pool`]).

mod estimate;
mod expression;
pub(crate) mod limits;
mod meter;
pub(crate) mod pool;

use std::fmt;
use std::sync::{Arc, OnceLock};

use cel::{Context, Env};
use serde_json::{json, Value};
use setpoint_core::Cause;

pub(crate) use estimate::unbounded_cardinality;
pub(crate) use expression::{to_cel, Expression};
use limits::{COST_LIMIT_EXCEEDED, PER_CALL_LIMIT};
pub(crate) use meter::Budget;
use meter::Metered;

use crate::crd::schema::Schema;

/// One compiled rule.
pub(crate) struct Rule {
    source: String,
    program: Metered,
    message: Option<String>,
    /// `messageExpression`, compiled, with its source.
    message_expression: Option<(String, Metered)>,
    reason: String,
    /// A path below the node to report at, e.g. `.spec.replicas` → `<node>.spec.replicas`.
    field_path: Option<String>,
    /// Whether the rule reads `oldSelf`.
    transition: bool,
}

impl fmt::Debug for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Rule")
            .field("rule", &self.source)
            .finish_non_exhaustive()
    }
}

fn env() -> Arc<Env> {
    static ENV: OnceLock<Arc<Env>> = OnceLock::new();
    ENV.get_or_init(|| Arc::new(Env::stdlib())).clone()
}

/// The OpenAPI type name of a JSON value, as validation messages name it.
pub(crate) fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

impl Rule {
    /// Compiles one `x-kubernetes-validations` entry; `path` names it in errors.
    pub(crate) fn compile(v: &Value, path: &str) -> Result<Rule, String> {
        let source = v
            .get("rule")
            .and_then(Value::as_str)
            .filter(|r| !r.trim().is_empty())
            .ok_or_else(|| format!("{path}.rule: Required value"))?
            .to_owned();
        let program = env().compile(&source).map_err(|e| {
            format!("{path}.rule: Invalid value: {source:?}: compilation failed: {e}")
        })?;
        let transition = program.references().has_variable("oldSelf");
        let program = Metered::new(program);
        let message_expression = match v
            .get("messageExpression")
            .and_then(Value::as_str)
            .filter(|m| !m.trim().is_empty())
        {
            Some(m) => Some((
                m.to_owned(),
                Metered::new(env().compile(m).map_err(|e| {
                    format!("{path}.messageExpression: Invalid value: {m:?}: messageExpression compilation failed: {e}")
                })?),
            )),
            None => None,
        };
        let reason = match v.get("reason").and_then(Value::as_str) {
            None | Some("FieldValueInvalid") => "FieldValueInvalid",
            Some("FieldValueForbidden") => "FieldValueForbidden",
            Some("FieldValueRequired") => "FieldValueRequired",
            Some("FieldValueDuplicate") => "FieldValueDuplicate",
            Some(other) => {
                return Err(format!("{path}.reason: Unsupported value: {other:?}: supported values: \"FieldValueDuplicate\", \"FieldValueForbidden\", \"FieldValueInvalid\", \"FieldValueRequired\""))
            }
        };
        Ok(Rule {
            source,
            program,
            message: v
                .get("message")
                .and_then(Value::as_str)
                .filter(|m| !m.is_empty())
                .map(str::to_owned),
            message_expression,
            reason: reason.to_owned(),
            field_path: v
                .get("fieldPath")
                .and_then(Value::as_str)
                .filter(|p| !p.is_empty())
                .map(str::to_owned),
            transition,
        })
    }

    /// The variables a rule and its message expression see.
    fn context(value: &Value, old: Option<&Value>) -> Result<Context<'static, 'static>, String> {
        let mut context = Context::with_env(env());
        let this = cel::to_value(value).map_err(|e| e.to_string())?;
        context.add_variable_from_value("self", this);
        if let Some(old) = old {
            let before = cel::to_value(old).map_err(|e| e.to_string())?;
            context.add_variable_from_value("oldSelf", before);
        }
        Ok(context)
    }

    /// The worst-case cost of evaluating the rule once at `node`, and of its message
    /// expression if it has one.
    pub(crate) fn estimated_costs(&self, node: &Schema) -> (u64, Option<u64>) {
        let rule = estimate::estimate(self.program.program().expression(), node);
        let message = self
            .message_expression
            .as_ref()
            .map(|(_, m)| estimate::estimate(m.program().expression(), node));
        (rule, message)
    }

    /// How kube-apiserver names the rule in cost errors: its message, else its source.
    fn error_string(&self) -> &str {
        match &self.message {
            Some(m) if !m.trim().is_empty() => m.trim(),
            _ => self.source.trim(),
        }
    }

    /// Evaluates the rule on `value` (and `old`) with no limit; `Ok(true)` if it holds.
    #[cfg(test)]
    pub(crate) fn evaluate(&self, value: &Value, old: Option<&Value>) -> Result<bool, String> {
        if self.transition && old.is_none() {
            return Ok(true);
        }
        let context = Self::context(value, old)?;
        match self.program.run(context, u64::MAX).result? {
            cel::Value::Bool(b) => Ok(b),
            other => Err(format!("rule returned {other:?}, not a bool")),
        }
    }

    /// The failure message of a rule that does not hold: its `messageExpression`'s value if
    /// that is a usable one-line string, else `message`, else `failed rule: <rule>`. `Err`
    /// is the cause to report instead when the message expression overran its limit or the
    /// budget.
    fn failure_message(
        &self,
        value: &Value,
        old: Option<&Value>,
        field: &str,
        budget: &Budget,
    ) -> Result<String, Cause> {
        if let Some((source, program)) = &self.message_expression {
            let run = Self::context(value, old).map(|c| program.run(c, PER_CALL_LIMIT));
            let shown = json!(type_name(value));
            let evaluated = match run {
                Ok(run) if run.over_limit => {
                    budget.exhaust();
                    return Err(Cause::invalid(field, &shown, &format!("no further validation rules will be run due to call cost exceeds limit for messageExpression: {source:?}")));
                }
                Ok(run) if !budget.spend(run.cost) => {
                    return Err(Cause::invalid(field, &shown, "messageExpression evaluation failed due to running out of cost budget, no further validation rules will be run"));
                }
                Ok(run) => run.result,
                Err(e) => Err(e),
            };
            match evaluated {
                Ok(cel::Value::String(m)) if !m.trim().is_empty() && !m.contains('\n') => {
                    return Ok(m.to_string());
                }
                Ok(other) => tracing::debug!(
                    message_expression = %source,
                    result = ?other,
                    "messageExpression gave no usable message (not a one-line, non-blank string)"
                ),
                Err(e) => tracing::debug!(
                    message_expression = %source,
                    error = %e,
                    "messageExpression failed to evaluate"
                ),
            }
        }
        Ok(self
            .message
            .clone()
            .unwrap_or_else(|| format!("failed rule: {}", self.source)))
    }

    /// The cause to report when the rule does not hold for the value at `path`, paying for
    /// the evaluation from `budget`. A rule that overruns [`PER_CALL_LIMIT`] or the budget
    /// exhausts it and gets a cause saying so.
    pub(crate) fn check(
        &self,
        value: &Value,
        old: Option<&Value>,
        path: &str,
        budget: &Budget,
    ) -> Option<Cause> {
        if self.transition && old.is_none() {
            return None;
        }
        let shown = json!(type_name(value));
        let run = match Self::context(value, old) {
            Ok(context) => self.program.run(context, PER_CALL_LIMIT),
            Err(e) => {
                return Some(Cause::invalid(
                    path,
                    &shown,
                    &format!("rule evaluation error: {}: {e}", self.source),
                ))
            }
        };
        if run.over_limit {
            budget.exhaust();
            let detail = format!(
                "'{COST_LIMIT_EXCEEDED}': no further validation rules will be run due to call cost exceeds limit for rule: {}",
                self.error_string()
            );
            return Some(Cause::invalid(path, &shown, &detail));
        }
        if !budget.spend(run.cost) {
            return Some(out_of_budget(path, value));
        }
        let field = match &self.field_path {
            Some(p) if p.starts_with('.') || p.starts_with('[') => format!("{path}{p}"),
            Some(p) => format!("{path}.{p}"),
            None => path.to_owned(),
        };
        let detail = match run.result {
            Ok(cel::Value::Bool(true)) => return None,
            Ok(cel::Value::Bool(false)) => match self.failure_message(value, old, &field, budget) {
                Ok(message) => message,
                Err(cause) => return Some(cause),
            },
            Ok(other) => format!(
                "rule evaluation error: {}: rule returned {other:?}, not a bool",
                self.source
            ),
            Err(e) => format!("rule evaluation error: {}: {e}", self.source),
        };
        Some(match self.reason.as_str() {
            "FieldValueForbidden" => Cause::forbidden(field, &detail),
            "FieldValueRequired" => Cause::new(
                "FieldValueRequired",
                field.clone(),
                format!("{field}: Required value: {detail}"),
            ),
            "FieldValueDuplicate" => Cause::new(
                "FieldValueDuplicate",
                field.clone(),
                format!("{field}: Duplicate value: {detail}"),
            ),
            _ => Cause::invalid(field, &shown, &detail),
        })
    }
}

/// The cause for rules that cannot run because the request's budget is spent.
pub(crate) fn out_of_budget(path: &str, value: &Value) -> Cause {
    Cause::invalid(
        path,
        &json!(type_name(value)),
        "validation failed due to running out of cost budget, no further validation rules will be run",
    )
}

/// Checks `rules` (those of the node at `path`) on `value`, adding a cause for each that
/// does not hold, until the budget is exhausted.
pub(crate) fn check_rules(
    rules: &[Rule],
    value: &Value,
    old: Option<&Value>,
    path: &str,
    budget: &Budget,
    causes: &mut Vec<Cause>,
) {
    if rules.is_empty() || budget.exhausted() {
        return;
    }
    if budget.remaining() == 0 {
        budget.exhaust();
        causes.push(out_of_budget(path, value));
        return;
    }
    for rule in rules {
        if budget.exhausted() {
            return;
        }
        causes.extend(rule.check(value, old, path, budget));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(v: Value) -> Rule {
        Rule::compile(&v, "r").unwrap()
    }

    fn budget() -> Budget {
        Budget::new(limits::RUNTIME_BUDGET)
    }

    #[test]
    fn rules_should_see_self_and_report_their_message() {
        let r = rule(
            json!({"rule": "self.replicas <= self.maxReplicas", "message": "replicas must not exceed maxReplicas"}),
        );
        assert!(r
            .check(
                &json!({"replicas": 2, "maxReplicas": 3}),
                None,
                "spec",
                &budget()
            )
            .is_none());
        let cause = r
            .check(
                &json!({"replicas": 5, "maxReplicas": 3}),
                None,
                "spec",
                &budget(),
            )
            .unwrap();
        assert_eq!(cause.field, "spec");
        assert_eq!(
            cause.message,
            "spec: Invalid value: \"object\": replicas must not exceed maxReplicas"
        );
        let plain = rule(json!({"rule": "self.name.startsWith('a')"}));
        let cause = plain
            .check(&json!({"name": "bob"}), None, "spec", &budget())
            .unwrap();
        assert!(
            cause
                .message
                .ends_with("failed rule: self.name.startsWith('a')"),
            "{}",
            cause.message
        );
        let sized = rule(json!({"rule": "size(self) < 3 && self.all(x, x > 0)"}));
        assert!(sized.evaluate(&json!([1, 2]), None).unwrap());
        assert!(!sized.evaluate(&json!([1, 0]), None).unwrap());
    }

    #[test]
    fn transition_rules_should_compare_with_the_old_value_only_on_update() {
        let r = rule(
            json!({"rule": "self == oldSelf", "message": "is immutable", "reason": "FieldValueForbidden", "fieldPath": ".mode"}),
        );
        assert!(r.check(&json!("a"), None, "spec.mode", &budget()).is_none());
        assert!(r
            .check(&json!("a"), Some(&json!("a")), "spec.mode", &budget())
            .is_none());
        let cause = r
            .check(&json!("b"), Some(&json!("a")), "spec", &budget())
            .unwrap();
        assert_eq!(cause.reason, "FieldValueForbidden");
        assert_eq!(cause.field, "spec.mode");
    }

    #[test]
    fn message_expressions_should_give_the_message_and_fall_back_when_unusable() {
        let r = rule(json!({"rule": "self.replicas <= self.max",
            "message": "too many",
            "messageExpression": "'replicas must be at most ' + string(self.max)"}));
        let cause = r
            .check(&json!({"replicas": 5, "max": 3}), None, "spec", &budget())
            .unwrap();
        assert!(
            cause.message.ends_with(": replicas must be at most 3"),
            "{}",
            cause.message
        );
        for unusable in [
            "self.missing.field",
            "''",
            "'   '",
            "'two\\nlines'",
            "self.max",
        ] {
            let r = rule(json!({"rule": "self.replicas <= self.max",
                "message": "too many", "messageExpression": unusable}));
            let cause = r
                .check(&json!({"replicas": 5, "max": 3}), None, "spec", &budget())
                .unwrap();
            assert!(
                cause.message.ends_with(": too many"),
                "{unusable}: {}",
                cause.message
            );
        }
        let bare = rule(json!({"rule": "self.replicas <= self.max", "messageExpression": "''"}));
        let cause = bare
            .check(&json!({"replicas": 5, "max": 3}), None, "spec", &budget())
            .unwrap();
        assert!(
            cause
                .message
                .ends_with("failed rule: self.replicas <= self.max"),
            "{}",
            cause.message
        );
        let e =
            Rule::compile(&json!({"rule": "true", "messageExpression": "'a' +"}), "x").unwrap_err();
        assert!(e.starts_with("x.messageExpression: Invalid value"), "{e}");
    }

    #[test]
    fn rules_that_do_not_compile_should_be_refused() {
        let e = Rule::compile(&json!({"rule": "self.a ==="}), "x").unwrap_err();
        assert!(e.starts_with("x.rule: Invalid value"), "{e}");
        assert!(Rule::compile(&json!({"message": "m"}), "x").is_err());
    }
}

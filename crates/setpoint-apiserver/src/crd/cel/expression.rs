//! A CEL expression over named variables, for users of the engine other than CRD rules (the
//! admission webhooks' `matchConditions`): compiled once, evaluated with JSON values bound to
//! its variables, metered with the per-call limit of [`super::limits::PER_CALL_LIMIT`].

use std::fmt;

use serde_json::Value;

use super::limits::PER_CALL_LIMIT;
use super::meter::Metered;

/// One compiled expression.
pub(crate) struct Expression {
    source: String,
    program: Metered,
}

impl fmt::Debug for Expression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Expression")
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

impl Expression {
    /// Compiles `source`; the error is the compiler's message.
    pub(crate) fn compile(source: &str) -> Result<Expression, String> {
        let program = super::env().compile(source).map_err(|e| e.to_string())?;
        Ok(Expression {
            source: source.to_owned(),
            program: Metered::new(program),
        })
    }

    /// Evaluates the expression with `variables` bound (a `null` value binds CEL's `null`);
    /// fails when a value does not convert, the evaluation fails, or it costs more than the
    /// per-call limit.
    pub(crate) fn evaluate(&self, variables: &[(&str, &Value)]) -> Result<cel::Value, String> {
        let values = variables
            .iter()
            .map(|(name, value)| Ok((*name, to_cel(value)?)))
            .collect::<Result<Vec<_>, String>>()?;
        self.evaluate_values(values)
    }

    /// Like [`Expression::evaluate`], with the variables already CEL values (results of other
    /// expressions, say).
    pub(crate) fn evaluate_values(
        &self,
        variables: Vec<(&str, cel::Value)>,
    ) -> Result<cel::Value, String> {
        let mut context = cel::Context::with_env(super::env());
        for (name, value) in variables {
            context.add_variable_from_value(name, value);
        }
        let run = self.program.run(context, PER_CALL_LIMIT);
        if run.over_limit {
            return Err(super::limits::COST_LIMIT_EXCEEDED.to_owned());
        }
        run.result
    }

    /// Evaluates the expression as a condition: it must give a boolean.
    pub(crate) fn holds(&self, variables: &[(&str, &Value)]) -> Result<bool, String> {
        match self.evaluate(variables)? {
            cel::Value::Bool(b) => Ok(b),
            other => Err(format!(
                "expression {:?} returned {other:?}, not a bool",
                self.source
            )),
        }
    }
}

/// A JSON value as CEL sees it.
pub(crate) fn to_cel(value: &Value) -> Result<cel::Value, String> {
    cel::to_value(value).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn expressions_should_see_their_variables() {
        let e = Expression::compile("object.metadata.name == 'a' && oldObject == null").unwrap();
        let object = json!({"metadata": {"name": "a"}});
        assert!(e
            .holds(&[("object", &object), ("oldObject", &Value::Null)])
            .unwrap());
        let other = json!({"metadata": {"name": "b"}});
        assert!(!e
            .holds(&[("object", &other), ("oldObject", &Value::Null)])
            .unwrap());
        assert!(Expression::compile("object.").is_err());
        assert!(Expression::compile("1").unwrap().holds(&[]).is_err());
    }
}

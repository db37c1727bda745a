//! Runtime cost of CEL evaluations: a [`Metered`] program counts what it does while it runs
//! and stops once past its limit; a [`Budget`] is what one request may still spend.
//!
//! The `cel` crate has no cost tracking of its own, so a program is rewritten when it is
//! compiled: every comprehension step first calls a counting function (a name no rule can
//! spell, starting with `@`) with the cost of that step, which fails the evaluation once the
//! limit is passed, before the step runs. The step shapes the interpreter optimizes (the
//! `&&`/`||` fold of `all`/`exists`, the appending step of `map`/`filter`) keep their shape,
//! so the counted program behaves as the original. Costs outside comprehensions are counted
//! once, before the evaluation starts. Everything an evaluation does is bounded by the input
//! apart from comprehension steps, so counting those bounds the time an evaluation can take.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use cel::common::ast::{operators, CallExpr, ComprehensionExpr, EntryExpr, Expr, IdedExpr};
use cel::common::ast::{ListExpr, LiteralValue};
use cel::{Context, ExecutionError, Program};

use super::limits::COST_LIMIT_EXCEEDED;

/// The counting function the rewritten programs call.
const CHARGE: &str = "@setpoint_cost";

/// A compiled expression with its counted form.
pub(crate) struct Metered {
    program: Program,
    /// The expression with a charge before every comprehension step.
    counted: IdedExpr,
    /// The cost of the expression outside comprehension steps.
    base: u64,
}

/// What one evaluation came to.
pub(crate) struct Run {
    /// The value, or why there is none.
    pub(crate) result: Result<cel::Value, String>,
    /// What the evaluation cost (at least the limit when stopped there).
    pub(crate) cost: u64,
    /// Whether the evaluation was stopped at its limit.
    pub(crate) over_limit: bool,
}

impl Metered {
    pub(crate) fn new(program: Program) -> Metered {
        let counted = instrument(program.expression());
        let base = flat_cost(program.expression());
        Metered {
            program,
            counted,
            base,
        }
    }

    pub(crate) fn program(&self) -> &Program {
        &self.program
    }

    /// Evaluates the expression in `context`, stopping once it has cost more than `limit`.
    pub(crate) fn run(&self, mut context: Context<'_, '_>, limit: u64) -> Run {
        let meter = Arc::new(Meter {
            used: AtomicU64::new(0),
            limit,
        });
        let counter = Arc::clone(&meter);
        let result = match context.add_function(CHARGE, move |cost: i64| counter.charge(cost)) {
            Err(e) => Err(e.to_string()),
            Ok(())
                if meter
                    .charge(i64::try_from(self.base).unwrap_or(i64::MAX))
                    .is_err() =>
            {
                Err(COST_LIMIT_EXCEEDED.to_owned())
            }
            Ok(()) => cel::Value::resolve(&self.counted, &context).map_err(|e| e.to_string()),
        };
        let cost = meter.used.load(Ordering::Relaxed);
        Run {
            result,
            cost,
            over_limit: cost > limit,
        }
    }
}

/// The cost counter of one evaluation.
struct Meter {
    used: AtomicU64,
    limit: u64,
}

impl Meter {
    /// Adds `cost`; fails once the total is past the limit.
    fn charge(&self, cost: i64) -> Result<cel::Value, ExecutionError> {
        let cost = u64::try_from(cost).unwrap_or(0);
        let used = self.used.load(Ordering::Relaxed).saturating_add(cost);
        self.used.store(used, Ordering::Relaxed);
        if used > self.limit {
            Err(ExecutionError::function_error(CHARGE, COST_LIMIT_EXCEEDED))
        } else {
            Ok(cel::Value::Bool(true))
        }
    }
}

/// What the CEL rules of one request may still spend. Once a rule overruns its own limit or
/// the budget, the budget is exhausted and no further rule runs.
#[derive(Debug)]
pub(crate) struct Budget {
    remaining: Cell<u64>,
    exhausted: Cell<bool>,
}

impl Budget {
    pub(crate) fn new(total: u64) -> Budget {
        Budget {
            remaining: Cell::new(total),
            exhausted: Cell::new(false),
        }
    }

    pub(crate) fn remaining(&self) -> u64 {
        self.remaining.get()
    }

    pub(crate) fn exhausted(&self) -> bool {
        self.exhausted.get()
    }

    pub(crate) fn exhaust(&self) {
        self.exhausted.set(true);
    }

    /// Takes `cost` from what remains; `false` (and exhausted) if it is more than that.
    pub(crate) fn spend(&self, cost: u64) -> bool {
        match self.remaining.get().checked_sub(cost) {
            Some(left) => {
                self.remaining.set(left);
                true
            }
            None => {
                self.exhaust();
                false
            }
        }
    }
}

/// The cost of an expression's nodes outside comprehension steps: 1 a variable, selection or
/// call, 10 a list, 30 a map, 40 a struct.
fn flat_cost(expr: &IdedExpr) -> u64 {
    match &expr.expr {
        Expr::Unspecified | Expr::Literal(_) => 0,
        Expr::Ident(_) => 1,
        Expr::Select(select) => flat_cost(&select.operand).saturating_add(1),
        Expr::Call(call) => {
            let target = call.target.as_deref().map_or(0, flat_cost);
            call.args
                .iter()
                .map(flat_cost)
                .fold(target.saturating_add(1), u64::saturating_add)
        }
        Expr::List(list) => list
            .elements
            .iter()
            .map(flat_cost)
            .fold(10, u64::saturating_add),
        Expr::Map(map) => map.entries.iter().fold(30, |sum, entry| match &entry.expr {
            EntryExpr::MapEntry(e) => sum
                .saturating_add(flat_cost(&e.key))
                .saturating_add(flat_cost(&e.value)),
            EntryExpr::StructField(f) => sum.saturating_add(flat_cost(&f.value)),
        }),
        Expr::Struct(s) => s.entries.iter().fold(40, |sum, entry| match &entry.expr {
            EntryExpr::StructField(f) => sum.saturating_add(flat_cost(&f.value)),
            EntryExpr::MapEntry(e) => sum
                .saturating_add(flat_cost(&e.key))
                .saturating_add(flat_cost(&e.value)),
        }),
        Expr::Comprehension(c) => flat_cost(&c.iter_range)
            .saturating_add(flat_cost(&c.accu_init))
            .saturating_add(flat_cost(&c.result)),
    }
}

/// The cost of one step of a comprehension (at least 1).
fn step_cost(c: &ComprehensionExpr) -> u64 {
    flat_cost(&c.loop_cond)
        .saturating_add(flat_cost(&c.loop_step))
        .max(1)
}

fn node(expr: Expr) -> IdedExpr {
    IdedExpr { id: 0, expr }
}

fn call(name: &str, args: Vec<IdedExpr>) -> IdedExpr {
    node(Expr::Call(CallExpr {
        func_name: name.to_owned(),
        target: None,
        args,
    }))
}

/// `@setpoint_cost(cost) ? then : otherwise`: charges `cost`, then evaluates `then` (the
/// charge is true or fails, so `otherwise` is never evaluated).
fn charged(cost: u64, then: IdedExpr, otherwise: IdedExpr) -> IdedExpr {
    let cost = i64::try_from(cost).unwrap_or(i64::MAX);
    let charge = call(
        CHARGE,
        vec![node(Expr::Literal(LiteralValue::Int(cost.into())))],
    );
    call(operators::CONDITIONAL, vec![charge, then, otherwise])
}

fn literal_false() -> IdedExpr {
    node(Expr::Literal(LiteralValue::Boolean(false.into())))
}

/// A copy of `expr` that charges every comprehension step before running it.
fn instrument(expr: &IdedExpr) -> IdedExpr {
    let mut out = expr.clone();
    rewrite(&mut out);
    out
}

fn rewrite(expr: &mut IdedExpr) {
    match &mut expr.expr {
        Expr::Unspecified | Expr::Literal(_) | Expr::Ident(_) => {}
        Expr::Select(select) => rewrite(&mut select.operand),
        Expr::Call(call) => {
            if let Some(target) = call.target.as_deref_mut() {
                rewrite(target);
            }
            call.args.iter_mut().for_each(rewrite);
        }
        Expr::List(list) => list.elements.iter_mut().for_each(rewrite),
        Expr::Map(map) => map
            .entries
            .iter_mut()
            .for_each(|entry| match &mut entry.expr {
                EntryExpr::MapEntry(e) => {
                    rewrite(&mut e.key);
                    rewrite(&mut e.value);
                }
                EntryExpr::StructField(f) => rewrite(&mut f.value),
            }),
        Expr::Struct(s) => s
            .entries
            .iter_mut()
            .for_each(|entry| match &mut entry.expr {
                EntryExpr::StructField(f) => rewrite(&mut f.value),
                EntryExpr::MapEntry(e) => {
                    rewrite(&mut e.key);
                    rewrite(&mut e.value);
                }
            }),
        Expr::Comprehension(c) => {
            let cost = step_cost(c);
            rewrite(&mut c.iter_range);
            rewrite(&mut c.accu_init);
            rewrite(&mut c.loop_cond);
            rewrite(&mut c.loop_step);
            rewrite(&mut c.result);
            charge_step(c, cost);
        }
    }
}

fn is_ident(expr: &IdedExpr, name: &str) -> bool {
    matches!(&expr.expr, Expr::Ident(n) if n == name)
}

/// The single item of `accu + [item]`, the step of `map`.
fn appended<'a>(expr: &'a mut IdedExpr, accu: &str) -> Option<&'a mut IdedExpr> {
    match &mut expr.expr {
        Expr::Call(call) if call.func_name == operators::ADD && call.target.is_none() => {
            match call.args.as_mut_slice() {
                [lhs, rhs] if is_ident(lhs, accu) => match &mut rhs.expr {
                    Expr::List(ListExpr { elements, .. }) if elements.len() == 1 => {
                        elements.first_mut()
                    }
                    _ => None,
                },
                _ => None,
            }
        }
        _ => None,
    }
}

/// Makes the step of `c` charge `cost` first, keeping the shapes the interpreter recognizes.
fn charge_step(c: &mut ComprehensionExpr, cost: u64) {
    let accu = c.accu_var.clone();
    if let Expr::Call(call) = &mut c.loop_step.expr {
        let name = call.func_name.as_str();
        let folds = call.target.is_none()
            && call.args.len() == 2
            && is_ident(&call.args[0], &accu)
            && (name == operators::LOGICAL_AND || name == operators::LOGICAL_OR);
        // `accu && x` (all), `accu || x` (exists): charge in front of `x`.
        if folds {
            let x = std::mem::take(&mut call.args[1]);
            call.args[1] = charged(cost, x, literal_false());
            return;
        }
        // `cond ? accu + [x] : accu` (filter): charge in front of `cond`.
        let guarded = name == operators::CONDITIONAL
            && call.target.is_none()
            && call.args.len() == 3
            && is_ident(&call.args[2], &accu);
        if guarded && appended(&mut call.args[1], &accu).is_some() {
            let cond = std::mem::take(&mut call.args[0]);
            call.args[0] = charged(cost, cond, literal_false());
            return;
        }
    }
    // `accu + [x]` (map): charge in front of `x`.
    if let Some(item) = appended(&mut c.loop_step, &accu) {
        let x = std::mem::take(item);
        *item = charged(cost, x, node(Expr::Literal(LiteralValue::Null)));
        return;
    }
    let step = std::mem::take(&mut c.loop_step);
    c.loop_step = charged(cost, step, node(Expr::Ident(accu)));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metered(source: &str) -> Metered {
        Metered::new(cel::Env::stdlib().compile(source).unwrap())
    }

    fn run(source: &str, limit: u64) -> Run {
        let env = Arc::new(cel::Env::stdlib());
        let mut context = Context::with_env(env);
        context.add_variable_from_value("l", (0..100).collect::<Vec<i64>>());
        metered(source).run(context, limit)
    }

    #[test]
    fn counted_programs_should_give_the_same_values() {
        for (source, want) in [
            ("l.all(x, x >= 0)", cel::Value::Bool(true)),
            ("l.exists(x, x == 50)", cel::Value::Bool(true)),
            ("l.exists_one(x, x == 50)", cel::Value::Bool(true)),
            ("size(l.map(x, x * 2)) == 100", cel::Value::Bool(true)),
            (
                "l.filter(x, x < 10) == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]",
                cel::Value::Bool(true),
            ),
            ("l.map(x, x < 2, x + 1) == [1, 2]", cel::Value::Bool(true)),
            ("l.all(x, l.exists(y, y == x))", cel::Value::Bool(true)),
            ("l.all(x, x < 5)", cel::Value::Bool(false)),
        ] {
            let run = run(source, u64::MAX);
            assert_eq!(run.result, Ok(want), "{source}");
            assert!(!run.over_limit, "{source}");
        }
    }

    #[test]
    fn cost_should_grow_with_the_steps_taken() {
        let one = run("l.all(x, x >= 0)", u64::MAX).cost;
        let nested = run("l.all(x, l.all(y, x + y >= 0))", u64::MAX).cost;
        assert!(one >= 100, "{one}");
        assert!(nested >= 100 * one, "{nested} vs {one}");
        // A short circuit stops the counting too.
        assert!(run("l.all(x, x < 5)", u64::MAX).cost < one);
    }

    #[test]
    fn an_evaluation_past_its_limit_should_stop() {
        // Regression (issue 14.5): CEL evaluations had no cost limit.
        let run = run("l.all(a, l.all(b, l.all(c, a + b + c >= 0)))", 10_000);
        assert!(run.over_limit);
        assert!(run.cost > 10_000 && run.cost < 20_000, "{}", run.cost);
        assert!(run.result.is_err());
    }

    #[test]
    fn budgets_should_refuse_what_they_cannot_pay() {
        let budget = Budget::new(10);
        assert!(budget.spend(6));
        assert!(!budget.exhausted());
        assert!(!budget.spend(5));
        assert!(budget.exhausted());
        assert_eq!(budget.remaining(), 4);
    }
}

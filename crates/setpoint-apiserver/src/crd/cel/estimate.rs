//! Static cost estimation of a CEL expression: the worst-case cost of one evaluation at a
//! schema node, from the worst-case sizes the schema allows. It follows the principles of
//! kube-apiserver's estimate (cel-go's `EstimateCost` with the apiextensions size estimator);
//! the numbers are this model's own, not cel-go's:
//! - a comprehension (`all`, `exists`, `exists_one`, `map`, `filter`) costs its range and, for
//!   every element the range can hold, one loop step, so nested comprehensions multiply;
//! - a value read from the object is as large as its schema lets it be: `maxItems`,
//!   `maxProperties`, `maxLength`, a format's length, or else as many elements as fit in a
//!   3 MiB request, each serialized as small as its schema allows;
//! - a variable read, a field selection or a call costs 1, creating a list 10 and a map 30,
//!   and string and list operations (`+`, `==`, `contains`, `matches`, …) a tenth per
//!   character or item they go through.
//!
//! Arithmetic saturates: an estimate too large for a `u64` is `u64::MAX`.

use cel::common::ast::{operators, CallExpr, ComprehensionExpr, EntryExpr, Expr, IdedExpr};
use cel::common::ast::{LiteralValue, SelectExpr};

use super::limits::MAX_REQUEST_SIZE_BYTES;
use crate::crd::schema::{Additional, Schema, Type};

const LIST_CREATE: u64 = 10;
const MAP_CREATE: u64 = 30;
const STRUCT_CREATE: u64 = 40;

/// The worst-case cost of evaluating `expr` once with `self` (and `oldSelf`) at `node`.
pub(crate) fn estimate(expr: &IdedExpr, node: &Schema) -> u64 {
    let this = Shape::of(node);
    let mut estimator = Estimator {
        vars: vec![("self", this), ("oldSelf", this)],
    };
    estimator.cost(expr).0
}

/// How many times a rule at `node` can run on one object when nothing above it bounds the
/// count: as many values as fit in a request, each as small as `node` allows, plus a comma.
pub(crate) fn unbounded_cardinality(node: &Schema) -> u64 {
    MAX_REQUEST_SIZE_BYTES / min_size(node).saturating_add(1)
}

/// The cost of going through `n` characters or items.
fn traverse(n: u64) -> u64 {
    n.div_ceil(10)
}

/// What kind of value a shape is, as far as costs go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Scalar,
    String,
    List,
    Map,
    Unknown,
}

/// What the estimator knows of a value.
#[derive(Clone, Copy, Debug)]
struct Shape<'s> {
    kind: Kind,
    /// Worst-case length: characters of a string, items of a list, entries of a map.
    size: u64,
    /// Worst-case size of an element, for a list or map not read from the object.
    elem: u64,
    /// The schema node of a value read from the object.
    node: Option<&'s Schema>,
}

impl<'s> Shape<'s> {
    fn scalar() -> Shape<'s> {
        Shape {
            kind: Kind::Scalar,
            size: 1,
            elem: 0,
            node: None,
        }
    }

    fn unknown() -> Shape<'s> {
        Shape {
            kind: Kind::Unknown,
            size: MAX_REQUEST_SIZE_BYTES,
            elem: MAX_REQUEST_SIZE_BYTES,
            node: None,
        }
    }

    fn string(size: u64) -> Shape<'s> {
        Shape {
            kind: Kind::String,
            size,
            elem: 0,
            node: None,
        }
    }

    fn of(node: &'s Schema) -> Shape<'s> {
        let kind = match node.kind {
            _ if node.int_or_string => Kind::Unknown,
            Some(Type::String) => Kind::String,
            Some(Type::Array) => Kind::List,
            Some(Type::Object) => Kind::Map,
            Some(_) => Kind::Scalar,
            None => Kind::Unknown,
        };
        Shape {
            kind,
            size: max_size(node),
            elem: MAX_REQUEST_SIZE_BYTES,
            node: Some(node),
        }
    }

    /// Field `name` of this value (`self.spec`, or a map's entry `self.labels.app`).
    fn field(self, name: &str) -> Shape<'s> {
        let Some(node) = self.node else {
            return Shape::unknown();
        };
        if let Some(property) = node.properties.get(name) {
            return Shape::of(property);
        }
        match &node.additional {
            Some(Additional::Schema(values)) => Shape::of(values),
            _ => Shape::unknown(),
        }
    }

    /// An item of this list, or a value of this map.
    fn element(self) -> Shape<'s> {
        match self.node {
            Some(node) => match (&node.items, &node.additional) {
                (Some(items), _) => Shape::of(items),
                (None, Some(Additional::Schema(values))) => Shape::of(values),
                _ => Shape::unknown(),
            },
            None => Shape {
                kind: Kind::Unknown,
                size: self.elem,
                elem: MAX_REQUEST_SIZE_BYTES,
                node: None,
            },
        }
    }

    /// What a comprehension's variable takes: a list's items, a map's keys.
    fn iterated(self) -> Shape<'s> {
        match self.kind {
            Kind::Map => Shape::string(MAX_REQUEST_SIZE_BYTES),
            _ => self.element(),
        }
    }

    /// The larger of two shapes (the branches of `?:`).
    fn max(self, other: Shape<'s>) -> Shape<'s> {
        let same_node = match (self.node, other.node) {
            (Some(a), Some(b)) => std::ptr::eq(a, b),
            _ => false,
        };
        Shape {
            kind: if self.kind == other.kind {
                self.kind
            } else {
                Kind::Unknown
            },
            size: self.size.max(other.size),
            elem: self.elem.max(other.elem),
            node: if same_node { self.node } else { None },
        }
    }

    fn traversable(self) -> bool {
        matches!(self.kind, Kind::String | Kind::List)
    }
}

/// The longest a value at `node` can be (items, entries or characters; 1 for a scalar).
fn max_size(node: &Schema) -> u64 {
    let whole = MAX_REQUEST_SIZE_BYTES - 2;
    if node.int_or_string {
        return whole;
    }
    match node.kind {
        Some(Type::String) => node.max_length.unwrap_or(match node.format.as_deref() {
            Some("date") => 12,
            Some("date-time" | "duration") => 32,
            _ => whole,
        }),
        Some(Type::Array) => node.max_items.unwrap_or_else(|| {
            let item = node.items.as_deref().map_or(1, min_size);
            whole / item.saturating_add(1)
        }),
        Some(Type::Object) => match &node.additional {
            Some(additional) => node.max_properties.unwrap_or_else(|| {
                let value = match additional {
                    Additional::Schema(values) => min_size(values),
                    Additional::Any => 1,
                };
                // A key of at least one character, its quotes, a colon and a comma.
                whole / value.saturating_add(6)
            }),
            None => node
                .max_properties
                .unwrap_or(node.properties.len() as u64)
                .max(1),
        },
        Some(_) => 1,
        None => MAX_REQUEST_SIZE_BYTES,
    }
}

/// The fewest bytes a value at `node` serializes to in JSON.
fn min_size(node: &Schema) -> u64 {
    if node.int_or_string {
        return 1;
    }
    match node.kind {
        Some(Type::String) => match node.format.as_deref() {
            Some("date") => 12,
            Some("date-time") => 21,
            Some("duration") => 3,
            _ => node.min_length.unwrap_or(0).saturating_add(2),
        },
        Some(Type::Boolean) => 4,
        Some(Type::Array | Type::Object) => 2,
        Some(Type::Integer | Type::Number) | None => 1,
    }
}

fn literal(value: &LiteralValue) -> Shape<'static> {
    match value {
        LiteralValue::String(s) => Shape::string(s.inner().len() as u64),
        LiteralValue::Bytes(b) => Shape::string(b.inner().len() as u64),
        _ => Shape::scalar(),
    }
}

/// Walks an expression with the shapes of the variables in scope.
struct Estimator<'e, 's> {
    vars: Vec<(&'e str, Shape<'s>)>,
}

impl<'e, 's> Estimator<'e, 's> {
    fn lookup(&self, name: &str) -> Shape<'s> {
        self.vars
            .iter()
            .rev()
            .find(|(n, _)| *n == name)
            .map_or_else(Shape::unknown, |(_, shape)| *shape)
    }

    fn cost(&mut self, expr: &'e IdedExpr) -> (u64, Shape<'s>) {
        match &expr.expr {
            Expr::Unspecified => (0, Shape::unknown()),
            Expr::Literal(value) => (0, literal(value)),
            Expr::Ident(name) => (1, self.lookup(name)),
            Expr::Select(select) => self.select(select),
            Expr::List(list) => {
                let mut cost = LIST_CREATE;
                let mut elem = 0;
                for element in &list.elements {
                    let (c, shape) = self.cost(element);
                    cost = cost.saturating_add(c);
                    elem = elem.max(shape.size);
                }
                let size = list.elements.len() as u64;
                let shape = Shape {
                    kind: Kind::List,
                    size,
                    elem,
                    node: None,
                };
                (cost, shape)
            }
            Expr::Map(map) => {
                let mut cost = MAP_CREATE;
                let mut elem = 0;
                for entry in &map.entries {
                    if let EntryExpr::MapEntry(entry) = &entry.expr {
                        let (key, _) = self.cost(&entry.key);
                        let (value, shape) = self.cost(&entry.value);
                        cost = cost.saturating_add(key).saturating_add(value);
                        elem = elem.max(shape.size);
                    }
                }
                let size = map.entries.len() as u64;
                let shape = Shape {
                    kind: Kind::Map,
                    size,
                    elem,
                    node: None,
                };
                (cost, shape)
            }
            Expr::Struct(fields) => {
                let mut cost = STRUCT_CREATE;
                for entry in &fields.entries {
                    if let EntryExpr::StructField(field) = &entry.expr {
                        cost = cost.saturating_add(self.cost(&field.value).0);
                    }
                }
                (cost, Shape::unknown())
            }
            Expr::Comprehension(comprehension) => self.comprehension(comprehension),
            Expr::Call(call) => self.call(call),
        }
    }

    fn select(&mut self, select: &'e SelectExpr) -> (u64, Shape<'s>) {
        let (cost, operand) = self.cost(&select.operand);
        let shape = if select.test {
            Shape::scalar()
        } else {
            operand.field(&select.field)
        };
        (cost.saturating_add(1), shape)
    }

    fn comprehension(&mut self, c: &'e ComprehensionExpr) -> (u64, Shape<'s>) {
        let (range_cost, range) = self.cost(&c.iter_range);
        let (init_cost, _) = self.cost(&c.accu_init);
        let scope = self.vars.len();
        match &c.iter_var2 {
            None => self.vars.push((&c.iter_var, range.iterated())),
            Some(second) => {
                let first = match range.kind {
                    Kind::Map => range.iterated(),
                    _ => Shape::scalar(),
                };
                self.vars.push((&c.iter_var, first));
                self.vars.push((second, range.element()));
            }
        }
        // The accumulator of `map` and `filter` grows by one item a step: appending is
        // cheap, as cel-go's estimate has it.
        let accumulator = Shape {
            kind: Kind::Unknown,
            size: 1,
            elem: 0,
            node: None,
        };
        self.vars.push((&c.accu_var, accumulator));
        let (cond, _) = self.cost(&c.loop_cond);
        let (step_cost, step) = self.cost(&c.loop_step);
        let (result_cost, result) = self.cost(&c.result);
        self.vars.truncate(scope);
        let per_step = cond.saturating_add(step_cost);
        let cost = range_cost
            .saturating_add(init_cost)
            .saturating_add(range.size.saturating_mul(per_step))
            .saturating_add(result_cost);
        let builds_list = matches!(&c.result.expr, Expr::Ident(name) if *name == c.accu_var)
            && matches!(c.accu_init.expr, Expr::List(_));
        let shape = if builds_list {
            Shape {
                kind: Kind::List,
                size: range.size,
                elem: step.elem,
                node: None,
            }
        } else {
            result
        };
        (cost, shape)
    }

    fn call(&mut self, call: &'e CallExpr) -> (u64, Shape<'s>) {
        let name = call.func_name.as_str();
        if name == operators::CONDITIONAL && call.args.len() == 3 {
            let (cond, _) = self.cost(&call.args[0]);
            let (then_cost, then) = self.cost(&call.args[1]);
            let (else_cost, otherwise) = self.cost(&call.args[2]);
            return (
                cond.saturating_add(then_cost.max(else_cost)),
                then.max(otherwise),
            );
        }
        let mut cost = 0u64;
        let target = call.target.as_deref().map(|t| {
            let (c, shape) = self.cost(t);
            cost = cost.saturating_add(c);
            shape
        });
        let mut args = Vec::with_capacity(call.args.len());
        for arg in &call.args {
            let (c, shape) = self.cost(arg);
            cost = cost.saturating_add(c);
            args.push(shape);
        }
        let (own, shape) = call_cost(name, target, &args);
        (cost.saturating_add(own), shape)
    }
}

/// What a call costs beyond its arguments, and the shape of its result.
fn call_cost<'s>(name: &str, target: Option<Shape<'s>>, args: &[Shape<'s>]) -> (u64, Shape<'s>) {
    // The value a function works on: the target of `x.f()`, the first argument of `f(x)`.
    let subject = target
        .or_else(|| args.first().copied())
        .unwrap_or_else(Shape::unknown);
    let other = match target {
        Some(_) => args.first().copied(),
        None => args.get(1).copied(),
    }
    .unwrap_or_else(Shape::scalar);
    match name {
        operators::LOGICAL_AND
        | operators::LOGICAL_OR
        | operators::LOGICAL_NOT
        | operators::NOT_STRICTLY_FALSE => (0, Shape::scalar()),
        operators::EQUALS
        | operators::NOT_EQUALS
        | operators::LESS
        | operators::LESS_EQUALS
        | operators::GREATER
        | operators::GREATER_EQUALS => {
            let cost = if subject.traversable() || other.traversable() {
                traverse(subject.size.min(other.size))
            } else {
                0
            };
            (cost.saturating_add(1), Shape::scalar())
        }
        operators::ADD if subject.traversable() || other.traversable() => {
            let size = subject.size.saturating_add(other.size);
            let kind = if subject.traversable() {
                subject.kind
            } else {
                other.kind
            };
            let shape = Shape {
                kind,
                size,
                elem: subject.elem.max(other.elem),
                node: None,
            };
            (traverse(size).saturating_add(1), shape)
        }
        operators::INDEX | operators::OPT_INDEX => (1, subject.element()),
        operators::IN => {
            let cost = match other.kind {
                Kind::List | Kind::Unknown => other.size,
                _ => 0,
            };
            (cost.saturating_add(1), Shape::scalar())
        }
        "contains" | "startsWith" | "endsWith" | "indexOf" | "lastIndexOf" => {
            (traverse(subject.size).saturating_add(1), Shape::scalar())
        }
        "matches" => {
            let pattern = other.size.div_ceil(4).max(1);
            let cost = traverse(subject.size).saturating_mul(pattern);
            (cost.saturating_add(1), Shape::scalar())
        }
        "lowerAscii" | "upperAscii" | "trim" | "replace" | "substring" | "charAt" | "reverse"
        | "format" => (
            traverse(subject.size).saturating_add(1),
            Shape::string(subject.size),
        ),
        "split" => (
            traverse(subject.size).saturating_add(1),
            Shape {
                kind: Kind::List,
                size: subject.size,
                elem: subject.size,
                node: None,
            },
        ),
        "join" => {
            let size = subject.size.saturating_mul(subject.element().size);
            (traverse(size).saturating_add(1), Shape::string(size))
        }
        "string" if subject.kind == Kind::String => (1, subject),
        "string" => (1, Shape::string(32)),
        "size" | "int" | "uint" | "double" | "bool" | "duration" | "timestamp" | "type" => {
            (1, Shape::scalar())
        }
        "dyn" => (1, subject),
        _ => (1, Shape::unknown()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn cost(rule: &str, schema: serde_json::Value) -> u64 {
        let node = Schema::compile(&schema, "s").unwrap();
        let program = cel::Env::stdlib().compile(rule).unwrap();
        estimate(program.expression(), &node)
    }

    fn list(extra: serde_json::Value) -> serde_json::Value {
        let mut l = json!({"type": "array", "items": {"type": "integer"}});
        for (k, v) in extra.as_object().unwrap() {
            l[k] = v.clone();
        }
        json!({"type": "object", "properties": {"l": l, "s": {"type": "string"}}})
    }

    #[test]
    fn nested_comprehensions_should_multiply_by_the_list_size() {
        let triple = "self.l.all(a, self.l.all(b, self.l.all(c, a + b + c >= 0)))";
        let bounded = cost(triple, list(json!({"maxItems": 10})));
        assert!(bounded > 1_000 && bounded < 100_000, "{bounded}");
        assert!(cost(triple, list(json!({}))) > 100 * 10_000_000);
        let single = cost("self.l.all(a, a >= 0)", list(json!({"maxItems": 10})));
        assert!(single < bounded / 10, "{single} vs {bounded}");
    }

    #[test]
    fn simple_rules_should_cost_little() {
        let schema = list(json!({}));
        assert!(cost("self.s == 'red' || size(self.l) < 3", schema.clone()) < 20);
        // One pass over the longest string a request can hold.
        let scan = cost("self.s.startsWith('a')", schema);
        assert!(scan > 100_000 && scan < 1_000_000, "{scan}");
        let bounded = cost(
            "self.s.startsWith('a')",
            json!({"type": "object", "properties": {"s": {"type": "string", "maxLength": 63}}}),
        );
        assert!(bounded < 20, "{bounded}");
    }

    #[test]
    fn unbounded_lists_should_hold_as_many_items_as_fit_in_a_request() {
        let ints = Schema::compile(&json!({"type": "integer"}), "s").unwrap();
        assert_eq!(unbounded_cardinality(&ints), MAX_REQUEST_SIZE_BYTES / 2);
        let node = Schema::compile(&list(json!({})), "s").unwrap();
        let l = Shape::of(&node).field("l");
        assert_eq!(l.size, (MAX_REQUEST_SIZE_BYTES - 2) / 2);
        assert_eq!(l.element().kind, Kind::Scalar);
    }
}

//! A route's filter: a CEL expression over what the receiver found in an event (docs/DESIGN.md "Routing").
//!
//! cel-rust is pre-1.0, so it is pinned and nothing of it leaves this file: a [`Filter`] is compiled once at start
//! (a filter that does not compile stops the start, with its line and column) and judges each event into a
//! [`Verdict`]. Its cost is bounded the way cel-go bounds it, by a budget of work charged while it runs rather than a
//! clock, so that a hostile body costs the same few milliseconds on any machine:
//! - the body is parsed only if the filter names `body`, and only the parts it names are kept (`body.data.object.id`
//!   keeps one string; the rest of a 1 MiB body is skipped by the parser without being built);
//! - the program is rewritten so that every call's arguments and every comprehension step pass through a meter
//!   that charges what they carry (a string by its length, a list or map by its entries); past [`BUDGET`] the
//!   verdict is [`Verdict::Error`], never a crash and never a silent miss;
//! - the source is at most [`MAX_SOURCE_BYTES`] long.

use std::cell::Cell;
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use cel::common::ast::{CallExpr, Expr, IdedExpr};
use cel::objects::{Key, Map};
use cel::{Context, Env, ExecutionError, Value};

use super::body::{self, Wanted};

/// The longest filter accepted.
pub const MAX_SOURCE_BYTES: usize = 4096;
/// Units of work one evaluation may spend: a unit is a call's argument, a comprehension step, a list or map entry
/// passed to a call, or a KiB of a string passed to one. cel-rust spends 0.2–0.6 µs a unit, so at this budget
/// the worst filter stays within a few milliseconds (the `bench` command's `filter` figures): `exists` over a list
/// of about 2,500 items, or a 1 MiB string searched a few dozen times.
pub const BUDGET: u64 = 10_000;

/// Units of the body one evaluation may keep (a value, or a KiB of a string): what the filter reads of a body,
/// built as CEL values. A Shopify order of 250 lines is about 8,000.
pub const KEPT: u64 = 20_000;

/// The names a filter may read; anything else is a compile error at start.
pub const VARIABLES: [&str; 6] = [
    "body",
    "headers",
    "event_type",
    "source",
    "provider",
    "received_at",
];

/// The meter's name in the rewritten program: not a name a filter can write (CEL identifiers cannot start with `@`).
const METER: &str = "@meter";

thread_local! {
    /// What the evaluation running on this thread may still spend. An evaluation never yields, so a thread runs one
    /// at a time.
    static LEFT: Cell<u64> = const { Cell::new(0) };
}

/// What a filter judges: the event as the receiver found it.
#[derive(Debug, Clone, Copy)]
pub struct Facts<'a> {
    /// The raw body; `body` in the filter is it parsed as JSON, or `null` when it is not JSON.
    pub body: &'a [u8],
    /// The kept headers (lower-case names).
    pub headers: &'a [(String, String)],
    /// The type the receiver found (docs/providers.md, "id / type"), `null` when the provider sends none.
    pub event_type: Option<&'a str>,
    pub source: &'a str,
    /// The source's scheme (`stripe`, `github`, `hmac`, …).
    pub provider: &'a str,
    /// Milliseconds since the Unix epoch.
    pub received_at: i64,
}

/// A route's judgement of one event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Matched,
    /// The filter was false; with [`Filter::explain`], the first top-level `&&` clause that was false.
    Filtered {
        clause: Option<String>,
    },
    /// The filter could not be evaluated on this event (a missing field without `has()`, a type mismatch, the
    /// budget spent): no delivery, counted and shown with the event.
    Error(String),
}

impl Verdict {
    /// The word stores and listings keep: `matched`, `filtered` or `error`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Verdict::Matched => "matched",
            Verdict::Filtered { .. } => "filtered",
            Verdict::Error(_) => "error",
        }
    }
}

/// A filter that did not compile: where, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterError {
    /// 1-based line and column in the filter's source; 0 when the error is the whole filter's.
    pub line: usize,
    pub column: usize,
    pub message: String,
}

impl fmt::Display for FilterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            f.write_str(&self.message)
        } else {
            write!(f, "line {}, column {}: {}", self.line, self.column, self.message)
        }
    }
}

impl std::error::Error for FilterError {}

/// A compiled filter.
#[derive(Clone)]
pub struct Filter {
    source: Arc<str>,
    env: Arc<Env>,
    /// The metered program, and each of its top-level `&&` clauses with its text, for [`Filter::explain`].
    program: Arc<IdedExpr>,
    clauses: Arc<[(String, IdedExpr)]>,
    /// Which parts of the body the program reads.
    wanted: Arc<Wanted>,
}

impl fmt::Debug for Filter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Filter").field(&self.source).finish()
    }
}

impl PartialEq for Filter {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source
    }
}
impl Eq for Filter {}

impl Filter {
    pub fn compile(source: &str) -> Result<Filter, FilterError> {
        let whole = |message: String| FilterError {
            line: 0,
            column: 0,
            message,
        };
        if source.len() > MAX_SOURCE_BYTES {
            return Err(whole(format!("longer than {MAX_SOURCE_BYTES} bytes")));
        }
        if source.trim().is_empty() {
            return Err(whole("is empty (leave `filter` out to admit every event)".into()));
        }
        let env = Env::stdlib();
        let program = env.compile(source).map_err(|errors| {
            let first = errors.errors.first();
            FilterError {
                line: first.map_or(0, |e| usize::try_from(e.pos.0).unwrap_or(0)),
                column: first.map_or(0, |e| usize::try_from(e.pos.1).unwrap_or(0) + 1),
                message: first.map_or_else(|| errors.to_string(), |e| e.msg.clone()),
            }
        })?;
        let info = program.source_info();
        let position = |id: u64| -> (usize, usize) {
            let at = info.offset_for(id).map_or(0, |(start, _)| start as usize);
            let before = &source[..at.min(source.len())];
            let line = before.matches('\n').count() + 1;
            let column = before.len() - before.rfind('\n').map_or(0, |n| n + 1) + 1;
            (line, column)
        };
        let root = program.expression().clone();
        check_names(&root, &mut Vec::new()).map_err(|(id, message)| {
            let (line, column) = position(id);
            FilterError {
                line,
                column,
                message,
            }
        })?;
        let mut wanted = Wanted::default();
        body_paths(&root, &mut wanted);
        let parts = conjuncts(&root);
        let texts = split_and(source);
        let clauses = parts
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let text = match texts.get(i).filter(|_| texts.len() == parts.len()) {
                    Some(t) => t.clone(),
                    None => {
                        let (start, stop) = span(c, info);
                        source.get(start..=stop).unwrap_or(source).trim().to_owned()
                    }
                };
                (text, metered((*c).clone()))
            })
            .collect::<Vec<_>>();
        Ok(Filter {
            source: source.into(),
            env: Arc::new(env),
            program: Arc::new(metered(root)),
            clauses: clauses.into(),
            wanted: Arc::new(wanted),
        })
    }

    pub fn source(&self) -> &str {
        &self.source
    }

    /// The verdict on one event.
    pub fn judge(&self, facts: &Facts<'_>) -> Verdict {
        let context = match self.context(facts) {
            Ok(c) => c,
            Err(e) => return Verdict::Error(e),
        };
        match self.run(&self.program, &context) {
            Ok(true) => Verdict::Matched,
            Ok(false) => Verdict::Filtered { clause: None },
            Err(e) => Verdict::Error(e),
        }
    }

    /// [`Filter::judge`], and when the event is filtered out, the first top-level `&&` clause that was false (what
    /// `inbox routes test` prints).
    pub fn explain(&self, facts: &Facts<'_>) -> Verdict {
        match self.judge(facts) {
            Verdict::Filtered { .. } => {
                let Ok(context) = self.context(facts) else {
                    return Verdict::Filtered { clause: None };
                };
                let clause = self
                    .clauses
                    .iter()
                    .find(|(_, c)| matches!(self.run(c, &context), Ok(false)))
                    .map(|(text, _)| text.clone());
                Verdict::Filtered { clause }
            }
            other => other,
        }
    }

    fn context(&self, facts: &Facts<'_>) -> Result<Context<'static, 'static>, String> {
        let mut context = Context::with_env(self.env.clone());
        context
            .add_function(METER, meter)
            .map_err(|e| format!("cannot set up the filter: {e:?}"))?;
        let body = if self.wanted.is_empty() {
            Value::Null
        } else {
            body::parse(facts.body, &self.wanted, KEPT).map_err(|e| {
                format!(
                    "the parts of the body the filter reads hold more than {} values",
                    e.limit
                )
            })?
        };
        let headers: HashMap<Key, Value> = facts
            .headers
            .iter()
            .map(|(k, v)| {
                (
                    Key::String(Arc::new(k.to_ascii_lowercase())),
                    Value::from(v.as_str()),
                )
            })
            .collect();
        context.add_variable_from_value("body", body);
        context.add_variable_from_value("headers", Value::Map(Map::from(headers)));
        context.add_variable_from_value("event_type", facts.event_type.map_or(Value::Null, Value::from));
        context.add_variable_from_value("source", facts.source);
        context.add_variable_from_value("provider", facts.provider);
        context.add_variable_from_value("received_at", facts.received_at);
        Ok(context)
    }

    fn run(&self, program: &IdedExpr, context: &Context<'_, '_>) -> Result<bool, String> {
        LEFT.with(|left| left.set(BUDGET));
        let result = Value::resolve(program, context);
        match result {
            Ok(Value::Bool(b)) => Ok(b),
            Ok(other) => Err(format!(
                "the filter gave {}, not true or false",
                type_name(&other)
            )),
            Err(e) => Err(execution_error(&e, &self.source)),
        }
    }
}

/// The meter every call's arguments and every comprehension step pass through: it charges what the value carries
/// and hands it on unchanged.
fn meter(value: Value) -> Result<Value, ExecutionError> {
    let cost = match &value {
        Value::String(s) => 1 + s.len() as u64 / 1024,
        Value::Bytes(b) => 1 + b.len() as u64 / 1024,
        Value::List(l) => 1 + l.len() as u64,
        Value::Map(m) => 1 + m.map.len() as u64,
        _ => 1,
    };
    LEFT.with(|left| match left.get().checked_sub(cost) {
        Some(rest) => {
            left.set(rest);
            Ok(value)
        }
        None => {
            left.set(0);
            Err(ExecutionError::function_error(
                "filter",
                format!("spent its budget of {BUDGET} units on this event"),
            ))
        }
    })
}

/// What a filter's failure says, in words that carry no value of the body: cel-rust's own messages print the
/// values they failed on, and a body is personal data that no log or listing may carry. Names the filter wrote
/// (a missing key, a function) are kept; values are told by their type.
fn execution_error(e: &ExecutionError, source: &str) -> String {
    #[allow(deprecated)]
    match e {
        ExecutionError::NoSuchKey(key) if source.contains(key.as_str()) => format!("no such key: {key}"),
        ExecutionError::NoSuchKey(_) => "no such key".to_owned(),
        ExecutionError::UndeclaredReference(name) if source.contains(name.as_str()) => {
            format!("undeclared reference to {name:?}")
        }
        ExecutionError::InvalidArgumentCount { .. }
        | ExecutionError::UnexpectedType { .. }
        | ExecutionError::NoSuchOverload(_)
        | ExecutionError::MissingArgumentOrTarget => e.to_string(),
        ExecutionError::UnsupportedTargetType { target } => {
            format!("invalid argument: {}", type_name(target))
        }
        ExecutionError::NotSupportedAsMethod { method, target } if source.contains(method.as_str()) => {
            format!("{method} is not a method of {}", type_name(target))
        }
        ExecutionError::UnsupportedKeyType(v) => format!("{} cannot be a map's key", type_name(v)),
        ExecutionError::ValuesNotComparable(a, b) => {
            format!("{} cannot be compared to {}", type_name(a), type_name(b))
        }
        ExecutionError::UnsupportedBinaryOperator(op, a, b) => {
            format!("{op} does not apply to {} and {}", type_name(a), type_name(b))
        }
        ExecutionError::UnsupportedIndex(i, v) => {
            format!("{} cannot be indexed by {}", type_name(v), type_name(i))
        }
        // The meter's own message (the budget) carries no value; another function's might.
        ExecutionError::FunctionError { function, message } if function == "filter" => message.clone(),
        ExecutionError::FunctionError { function, .. } if source.contains(function.as_str()) => {
            format!("{function} failed on this event")
        }
        ExecutionError::DivisionByZero(_) | ExecutionError::RemainderByZero(_) => {
            "division by zero".to_owned()
        }
        ExecutionError::Overflow(op, _, _) => format!("{op} overflowed"),
        ExecutionError::IndexOutOfBounds(_) => "index out of bounds".to_owned(),
        _ => "the filter failed on this event".to_owned(),
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::List(_) => "a list",
        Value::Map(_) => "a map",
        Value::Int(_) => "an int",
        Value::UInt(_) => "a uint",
        Value::Float(_) => "a double",
        Value::String(_) => "a string",
        Value::Bytes(_) => "bytes",
        Value::Bool(_) => "a bool",
        Value::Null => "null",
        _ => "a value",
    }
}

/// Every identifier is one of [`VARIABLES`] or a comprehension's own variable.
fn check_names(e: &IdedExpr, bound: &mut Vec<String>) -> Result<(), (u64, String)> {
    match &e.expr {
        Expr::Ident(name) => {
            if VARIABLES.contains(&name.as_str()) || bound.iter().any(|b| b == name) {
                Ok(())
            } else {
                Err((
                    e.id,
                    format!("unknown name {name:?}: a filter reads {}", VARIABLES.join(", ")),
                ))
            }
        }
        Expr::Comprehension(c) => {
            check_names(&c.iter_range, bound)?;
            check_names(&c.accu_init, bound)?;
            let before = bound.len();
            bound.push(c.iter_var.clone());
            bound.extend(c.iter_var2.clone());
            bound.push(c.accu_var.clone());
            let inner = [&c.loop_cond, &c.loop_step, &c.result]
                .into_iter()
                .try_for_each(|x| check_names(x, bound));
            bound.truncate(before);
            inner
        }
        _ => children(e).into_iter().try_for_each(|c| check_names(c, bound)),
    }
}

fn children(e: &IdedExpr) -> Vec<&IdedExpr> {
    use cel::common::ast::{EntryExpr, IdedEntryExpr};
    /// A map's and a struct's entries hold their expressions alike.
    fn entries(entries: &[IdedEntryExpr]) -> Vec<&IdedExpr> {
        entries
            .iter()
            .flat_map(|entry| match &entry.expr {
                EntryExpr::MapEntry(me) => vec![&me.key, &me.value],
                EntryExpr::StructField(sf) => vec![&sf.value],
            })
            .collect()
    }
    match &e.expr {
        Expr::Call(c) => c.target.iter().map(|t| &**t).chain(c.args.iter()).collect(),
        Expr::Comprehension(c) => vec![&c.iter_range, &c.accu_init, &c.loop_cond, &c.loop_step, &c.result],
        Expr::List(l) => l.elements.iter().collect(),
        Expr::Map(m) => entries(&m.entries),
        Expr::Struct(s) => entries(&s.entries),
        Expr::Select(s) => vec![&*s.operand],
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => Vec::new(),
    }
}

/// The constant path a select chain reads from `body` (`body.data.object` → `["data", "object"]`), if it is one.
fn body_path(e: &IdedExpr) -> Option<Vec<String>> {
    match &e.expr {
        Expr::Ident(name) if name == "body" => Some(Vec::new()),
        Expr::Select(s) => body_path(&s.operand).map(|mut p| {
            p.push(s.field.clone());
            p
        }),
        Expr::Call(CallExpr {
            func_name,
            target: None,
            args,
        }) if func_name == "_[_]" && args.len() == 2 => {
            let mut p = body_path(&args[0])?;
            match &args[1].expr {
                Expr::Literal(cel::common::ast::LiteralValue::String(s)) => {
                    p.push(s.inner().to_owned());
                    Some(p)
                }
                _ => None,
            }
        }
        _ => None,
    }
}

/// Records every part of the body the program reads: the longest constant path of each use of `body`, kept whole
/// from there. (A comprehension variable that shadows `body` only makes more of the body kept, never less.)
fn body_paths(e: &IdedExpr, wanted: &mut Wanted) {
    if let Some(path) = body_path(e) {
        wanted.add(&path);
        if let Expr::Call(c) = &e.expr {
            // `body["a"][x]`: the key expression may read the body too.
            c.args.iter().skip(1).for_each(|a| body_paths(a, wanted));
        }
        return;
    }
    children(e).into_iter().for_each(|c| body_paths(c, wanted));
}

/// The top-level `&&` clauses, in order.
fn conjuncts(e: &IdedExpr) -> Vec<&IdedExpr> {
    match &e.expr {
        Expr::Call(c) if c.func_name == "_&&_" && c.target.is_none() => {
            c.args.iter().flat_map(conjuncts).collect()
        }
        _ => vec![e],
    }
}

/// The source's top-level `&&` clauses as written: split outside brackets and string literals.
fn split_and(source: &str) -> Vec<String> {
    let bytes = source.as_bytes();
    let (mut depth, mut quote, mut start, mut i) = (0i32, None::<u8>, 0, 0);
    let mut parts = Vec::new();
    while i < bytes.len() {
        let b = bytes[i];
        match quote {
            Some(_) if b == b'\\' => i += 1,
            Some(q) if b == q => quote = None,
            Some(_) => {}
            None => match b {
                b'"' | b'\'' => quote = Some(b),
                b'(' | b'[' | b'{' => depth += 1,
                b')' | b']' | b'}' => depth -= 1,
                b'&' if depth == 0 && bytes.get(i + 1) == Some(&b'&') => {
                    parts.push(source[start..i].trim().to_owned());
                    start = i + 2;
                    i += 1;
                }
                _ => {}
            },
        }
        i += 1;
    }
    parts.push(source[start..].trim().to_owned());
    parts
}

/// Where a subtree was written: from its first node's start to its last node's stop.
fn span(e: &IdedExpr, info: &cel::common::ast::SourceInfo) -> (usize, usize) {
    let mut range = info
        .offset_for(e.id)
        .map_or((usize::MAX, 0), |(a, b)| (a as usize, b as usize));
    for c in children(e) {
        let (a, b) = span(c, info);
        range = (range.0.min(a), range.1.max(b));
    }
    range
}

fn constant_work(name: &str) -> bool {
    matches!(name, "_&&_" | "_||_" | "!_" | "_?_:_") || name.starts_with('@')
}

/// The program with the meter around every call's arguments and every comprehension's range and step.
fn metered(e: IdedExpr) -> IdedExpr {
    let wrap = |inner: IdedExpr| IdedExpr {
        id: inner.id,
        expr: Expr::Call(CallExpr {
            func_name: METER.to_owned(),
            target: None,
            args: vec![inner],
        }),
    };
    let id = e.id;
    let expr = match e.expr {
        // The logical operators and the macros' plumbing (`@not_strictly_false`) do constant work whatever their
        // arguments hold: only the other calls are charged for theirs. (Metering an argument of `&&`, `||` or
        // `?:` would keep which of them run, as the meter passes its value on unchanged.)
        Expr::Call(c) if constant_work(&c.func_name) => Expr::Call(CallExpr {
            func_name: c.func_name,
            target: c.target.map(|t| Box::new(metered(*t))),
            args: c.args.into_iter().map(metered).collect(),
        }),
        Expr::Call(c) => Expr::Call(CallExpr {
            func_name: c.func_name,
            target: c.target.map(|t| Box::new(wrap(metered(*t)))),
            args: c.args.into_iter().map(|a| wrap(metered(a))).collect(),
        }),
        Expr::Comprehension(mut c) => {
            c.iter_range = wrap(metered(c.iter_range));
            c.loop_step = wrap(metered(c.loop_step));
            c.loop_cond = metered(c.loop_cond);
            c.result = metered(c.result);
            c.accu_init = metered(c.accu_init);
            Expr::Comprehension(c)
        }
        Expr::Select(mut s) => {
            s.operand = Box::new(metered(*s.operand));
            Expr::Select(s)
        }
        Expr::List(mut l) => {
            l.elements = l.elements.into_iter().map(metered).collect();
            Expr::List(l)
        }
        other => other,
    };
    IdedExpr { id, expr }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;

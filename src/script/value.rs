//! Typed values of the script language and pgbench's rules for mixing them: the four
//! types (`int`, `double`, `boolean`, `null`), how each coerces to another (and when it
//! cannot), the errors evaluation can end with, and the text a value becomes in SQL,
//! in `debug()` and in messages. Everything here is plain data: the evaluator
//! (`eval`) computes with it, the executor formats it into statements.
//!
//! The rules are pgbench 15's (pgbench.c: `coerceToInt`, `coerceToDouble`,
//! `coerceToBool`, `valueTruth`, `makeVariableValue`, `getVariable`), so a script gives
//! the same values under connbench as under pgbench.

use std::fmt::Write as _;

/// How deep an expression may nest: parentheses, unary operators and calls inside one
/// another, and the depth of the tree it builds (a chain of `+` is as deep as it is
/// long). The parser recurses once per level on the main thread (8 MiB of stack), the
/// evaluator once per level on a client's worker thread (2 MiB); pgbench's parser gives
/// up near 10,000 levels (bison's stack: "memory exhausted"). The deepest expression in
/// pgbench's own test suite is 19 levels (its test of every operator), pgbench's and
/// sysbench's built-in scripts need 3; 256 leaves more than ten times the deepest. At
/// the limit, measured: parsing takes 0.35 MiB of stack optimised (2.5 MiB in a debug
/// build), evaluating 0.19 MiB (0.85 MiB), so a script at the limit runs in any build.
pub const MAX_DEPTH: usize = 256;

/// A value: what an expression evaluates to and what a variable holds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value {
    Int(i64),
    Double(f64),
    Bool(bool),
    Null,
}

/// A value's type, for messages (kept a byte, so an evaluation's result stays small).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Type {
    Int,
    Double,
    Boolean,
    Null,
}

impl Type {
    /// pgbench's name of the type, as its messages and `debug()` print it.
    pub fn name(self) -> &'static str {
        match self {
            Type::Int => "int",
            Type::Double => "double",
            Type::Boolean => "boolean",
            Type::Null => "null",
        }
    }
}

/// The integer operations that can overflow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntOp {
    Add,
    Sub,
    Mul,
    Div,
}

impl IntOp {
    fn name(self) -> &'static str {
        match self {
            IntOp::Add => "add",
            IntOp::Sub => "sub",
            IntOp::Mul => "mul",
            IntOp::Div => "div",
        }
    }
}

impl Value {
    pub fn type_of(self) -> Type {
        match self {
            Value::Int(_) => Type::Int,
            Value::Double(_) => Type::Double,
            Value::Bool(_) => Type::Boolean,
            Value::Null => Type::Null,
        }
    }

    /// pgbench's name of the type, as its messages and `debug()` print it.
    pub fn type_name(self) -> &'static str {
        self.type_of().name()
    }

    /// As an integer: doubles round half to even (C's `rint`), and must fit.
    pub fn to_int(self) -> Result<i64, EvalError> {
        match self {
            Value::Int(i) => Ok(i),
            Value::Double(d) => {
                let r = d.round_ties_even();
                // The range check of PostgreSQL's FLOAT8_FITS_IN_INT64: [-2^63, 2^63).
                if r.is_nan() || !(-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&r) {
                    Err(EvalError::DoubleToInt(r))
                } else {
                    Ok(r as i64)
                }
            }
            other => Err(EvalError::Coerce {
                from: other.type_of(),
                to: Type::Int,
            }),
        }
    }

    pub fn to_double(self) -> Result<f64, EvalError> {
        match self {
            Value::Int(i) => Ok(i as f64),
            Value::Double(d) => Ok(d),
            other => Err(EvalError::Coerce {
                from: other.type_of(),
                to: Type::Double,
            }),
        }
    }

    pub fn to_bool(self) -> Result<bool, EvalError> {
        match self {
            Value::Bool(b) => Ok(b),
            other => Err(EvalError::Coerce {
                from: other.type_of(),
                to: Type::Boolean,
            }),
        }
    }

    /// Truth for `\if`, `\elif` and CASE: non-zero numbers are true, NULL is false.
    pub fn truth(self) -> bool {
        match self {
            Value::Int(i) => i != 0,
            Value::Double(d) => d != 0.0,
            Value::Bool(b) => b,
            Value::Null => false,
        }
    }

    /// Appends the value as pgbench substitutes it into SQL: integers in decimal,
    /// doubles as C's `%.15g`, booleans as `true`/`false`, NULL as `NULL`.
    pub fn push_sql(self, out: &mut String) {
        match self {
            Value::Int(i) => push_int(out, i),
            Value::Double(d) => push_double(out, d),
            Value::Bool(b) => out.push_str(if b { "true" } else { "false" }),
            Value::Null => out.push_str("NULL"),
        }
    }

    /// The value as `debug()` prints it: `int 3`, `double 1.5`, `boolean true`, `null`.
    pub fn debug_text(self) -> String {
        let mut s = String::new();
        match self {
            Value::Null => s.push_str("null"),
            other => {
                s.push_str(other.type_name());
                s.push(' ');
                other.push_sql(&mut s);
            }
        }
        s
    }

    /// A variable's text (from `-D`, `\gset` or `\aset`) as a value, as pgbench reads it
    /// when an expression uses it: `null`; a prefix of `true`/`yes`, or `on`, for true;
    /// a prefix of `false`/`no`, or `off`/`of`, for false; an integer; else a double.
    /// `None` when it is none of these.
    pub fn from_text(s: &str) -> Option<Value> {
        if s.is_empty() {
            return None;
        }
        let prefix_of = |word: &str| s.len() <= word.len() && word[..s.len()].eq_ignore_ascii_case(s);
        if s.eq_ignore_ascii_case("null") {
            return Some(Value::Null);
        }
        if prefix_of("true") || prefix_of("yes") || s.eq_ignore_ascii_case("on") {
            return Some(Value::Bool(true));
        }
        if prefix_of("false")
            || prefix_of("no")
            || s.eq_ignore_ascii_case("off")
            || s.eq_ignore_ascii_case("of")
        {
            return Some(Value::Bool(false));
        }
        if looks_like_int(s) {
            // An integer that overflows is an error, not a double (pgbench's is_an_int).
            return parse_int(s.trim()).map(Value::Int);
        }
        parse_double(s).map(Value::Double)
    }
}

/// pgbench's `is_an_int`: optional spaces, an optional sign, digits, nothing else.
fn looks_like_int(s: &str) -> bool {
    let t = s.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    let t = t.strip_prefix(['+', '-']).unwrap_or(t);
    !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit())
}

fn parse_int(s: &str) -> Option<i64> {
    s.strip_prefix('+').unwrap_or(s).parse().ok()
}

/// C's `strtod` on a whole string, refusing what overflows (pgbench's `strtodouble`).
fn parse_double(s: &str) -> Option<f64> {
    let t = s.trim_start();
    let lower = t.to_ascii_lowercase();
    let unsigned = lower.trim_start_matches(['+', '-']);
    let v: f64 = match unsigned {
        "inf" | "infinity" | "nan" => t.parse().ok()?,
        _ if unsigned.starts_with(|c: char| c.is_ascii_digit() || c == '.') => t.parse().ok()?,
        _ => return None,
    };
    // ERANGE: a finite literal that overflowed to infinity.
    if v.is_infinite() && !unsigned.starts_with("inf") {
        return None;
    }
    Some(v)
}

/// Why evaluating an expression (or running a meta-command) failed. Small and `Copy`,
/// so a failure in the hot loop is counted without formatting; the message comes from
/// [`EvalError::message`], which needs the script's variable names.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum EvalError {
    /// `+`, `-` or `*` of integers beyond 64 bits ("add", "sub", "mul"), or `/` of
    /// i64::MIN by -1 ("div").
    Overflow(IntOp),
    DivisionByZero,
    Coerce {
        from: Type,
        to: Type,
    },
    DoubleToInt(f64),
    EmptyRange,
    RangeTooLarge,
    GaussianParameter(f64),
    ExponentialParameter(f64),
    ZipfianParameter(f64),
    PermuteSize,
    /// A sysbench distribution's parameter out of its range: which, and the value.
    SysbenchParameter(&'static str, f64),
    /// A variable read before anything set it (by its index).
    Undefined(usize),
    /// A call of `least` or `greatest` with more than 16 arguments (pgbench's MAX_FARGS).
    TooManyArguments,
    /// A variable whose text is not a value (by its index).
    Malformed(usize),
    /// A tree nested past [`MAX_DEPTH`] (the parser builds none).
    TooDeep,
}

impl EvalError {
    /// A short stable key, for counting failures by kind.
    pub fn key(self) -> &'static str {
        match self {
            EvalError::Overflow(_) | EvalError::DoubleToInt(_) => "out-of-range",
            EvalError::DivisionByZero => "division-by-zero",
            EvalError::Coerce { .. } => "type",
            EvalError::EmptyRange | EvalError::RangeTooLarge => "random-range",
            EvalError::GaussianParameter(_)
            | EvalError::ExponentialParameter(_)
            | EvalError::ZipfianParameter(_)
            | EvalError::PermuteSize
            | EvalError::SysbenchParameter(..) => "parameter",
            EvalError::Undefined(_) => "undefined-variable",
            EvalError::Malformed(_) => "malformed-variable",
            EvalError::TooManyArguments => "too-many-arguments",
            EvalError::TooDeep => "too-deep",
        }
    }

    /// The message, in pgbench's words where it has them, with the variable's name and
    /// text from `names` and `text_of`.
    pub fn message(self, names: &[String], text_of: impl Fn(usize) -> Option<String>) -> String {
        let name = |i: usize| names.get(i).map(String::as_str).unwrap_or("?");
        match self {
            EvalError::Overflow(op) => format!("bigint {} out of range", op.name()),
            EvalError::DivisionByZero => "division by zero".into(),
            EvalError::Coerce { from, to } => format!("cannot coerce {} to {}", from.name(), to.name()),
            EvalError::DoubleToInt(d) => format!("double to int overflow for {d:.6}"),
            EvalError::EmptyRange => "empty range given to random: the minimum is above the maximum".into(),
            EvalError::RangeTooLarge => "random range is too large: its width must fit in a bigint".into(),
            EvalError::GaussianParameter(p) => {
                format!("gaussian parameter must be at least 2.000000 (not {p:.6})")
            }
            EvalError::ExponentialParameter(p) => {
                format!("exponential parameter must be greater than zero (not {p:.6})")
            }
            EvalError::ZipfianParameter(p) => {
                format!("zipfian parameter must be in range [1.001, 1000] (not {p:.6})")
            }
            EvalError::PermuteSize => "permute size parameter must be greater than zero".into(),
            EvalError::SysbenchParameter(what, v) => format!("sysbench {what} (not {v})"),
            EvalError::Undefined(i) => format!(
                "undefined variable \"{}\": set it before this command (\\set, \\gset, -D)",
                name(i)
            ),
            EvalError::TooManyArguments => {
                "too many function arguments, maximum is 16; split the call, e.g. least(least(...), least(...))".into()
            }
            EvalError::TooDeep => format!(
                "the expression nests deeper than {} levels (connbench's limit); split it over several \\set commands",
                MAX_DEPTH
            ),
            EvalError::Malformed(i) => format!(
                "malformed variable \"{}\" value: \"{}\" (not an int, a double, a boolean or null)",
                name(i),
                text_of(i).unwrap_or_default()
            ),
        }
    }
}

/// Appends an integer's decimal digits. This runs for every parameter of every
/// statement: `itoa` writes two digits a step and hands back a `str` without the
/// UTF-8 check a byte buffer needs, about 50 instructions against the 200 of our own
/// digit loop and its check (callgrind, issue 56), and the formatting machinery's more.
pub fn push_int(out: &mut String, v: i64) {
    out.push_str(itoa::Buffer::new().format(v));
}

/// Appends a double as C's `printf("%.15g")` (DBL_DIG significant digits), with
/// PostgreSQL's own snprintf spellings of the special values: `NaN`, `Infinity`,
/// `-Infinity`.
pub fn push_double(out: &mut String, d: f64) {
    const DIGITS: i32 = 15;
    if d.is_nan() {
        out.push_str("NaN");
        return;
    }
    if d.is_infinite() {
        out.push_str(if d > 0.0 { "Infinity" } else { "-Infinity" });
        return;
    }
    if d == 0.0 {
        out.push_str(if d.is_sign_negative() { "-0" } else { "0" });
        return;
    }
    // The exponent after rounding to 15 significant digits decides the style, as %g's.
    let sci = format!("{:.*e}", (DIGITS - 1) as usize, d);
    let (mantissa, exp) = sci.split_once('e').expect("{:e} has an exponent");
    let exp: i32 = exp.parse().expect("{:e}'s exponent is an integer");
    if !(-4..DIGITS).contains(&exp) {
        out.push_str(trim_fraction(mantissa));
        out.push('e');
        out.push(if exp < 0 { '-' } else { '+' });
        let _ = write!(out, "{:02}", exp.unsigned_abs());
    } else {
        let fixed = format!("{:.*}", (DIGITS - 1 - exp) as usize, d);
        out.push_str(trim_fraction(&fixed));
    }
}

/// `%g` drops trailing zeros of the fraction, and the point when nothing is left.
fn trim_fraction(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(d: f64) -> String {
        let mut s = String::new();
        push_double(&mut s, d);
        s
    }

    #[test]
    fn doubles_format_as_c_percent_15g() {
        // Expected strings from pgbench 15's debug() ("double %.*g" with DBL_DIG).
        assert_eq!(g(1.5), "1.5");
        assert_eq!(g(1.0 / 3.0), "0.333333333333333");
        assert_eq!(g(2.0), "2");
        assert_eq!(g(1e15), "1e+15");
        assert_eq!(g(123456789012345678.0), "1.23456789012346e+17");
        assert_eq!(g(0.1 + 0.2), "0.3");
        assert_eq!(g(2f64.sqrt()), "1.4142135623731");
        assert_eq!(g(10f64.ln()), "2.30258509299405");
        assert_eq!(g(std::f64::consts::PI), "3.14159265358979");
        assert_eq!(g(f64::INFINITY), "Infinity");
        assert_eq!(g(f64::NEG_INFINITY), "-Infinity");
        assert_eq!(g(f64::NAN), "NaN");
        assert_eq!(g(0.0), "0");
        assert_eq!(g(1e-5), "1e-05");
        assert_eq!(g(0.0001), "0.0001");
        assert_eq!(g(-2.5e-300), "-2.5e-300");
        assert_eq!(g(999999999999999.0), "999999999999999");
        assert_eq!(g(9999999999999999.0), "1e+16");
    }

    #[test]
    fn integers_format_like_display() {
        for v in [0i64, 7, -7, 10, 99_999, i64::MAX, i64::MIN, -5000] {
            let mut s = String::from("x");
            push_int(&mut s, v);
            assert_eq!(s, format!("x{v}"));
        }
    }

    #[test]
    fn coercions_follow_pgbench() {
        assert_eq!(Value::Double(2.5).to_int(), Ok(2), "rint rounds half to even");
        assert_eq!(Value::Double(3.5).to_int(), Ok(4));
        assert_eq!(Value::Double(-2.5).to_int(), Ok(-2));
        assert_eq!(Value::Double(1e30).to_int(), Err(EvalError::DoubleToInt(1e30)));
        assert!(Value::Double(f64::NAN).to_int().is_err());
        assert_eq!(Value::Double(i64::MIN as f64).to_int(), Ok(i64::MIN));
        assert!(Value::Double(-(i64::MIN as f64)).to_int().is_err());
        assert_eq!(Value::Int(3).to_double(), Ok(3.0));
        assert_eq!(
            Value::Bool(true).to_int(),
            Err(EvalError::Coerce {
                from: Type::Boolean,
                to: Type::Int
            })
        );
        assert_eq!(
            Value::Int(1).to_bool(),
            Err(EvalError::Coerce {
                from: Type::Int,
                to: Type::Boolean
            })
        );
        assert!(Value::Null.to_double().is_err());
        assert!(!Value::Null.truth());
        assert!(Value::Double(0.5).truth());
        assert!(!Value::Int(0).truth());
    }

    #[test]
    fn text_becomes_a_value_as_pgbench_reads_variables() {
        assert_eq!(Value::from_text("5"), Some(Value::Int(5)));
        assert_eq!(Value::from_text("-12"), Some(Value::Int(-12)));
        assert_eq!(Value::from_text("2.5"), Some(Value::Double(2.5)));
        assert_eq!(Value::from_text("1e3"), Some(Value::Double(1000.0)));
        assert_eq!(Value::from_text("yes"), Some(Value::Bool(true)));
        assert_eq!(Value::from_text("T"), Some(Value::Bool(true)));
        assert_eq!(Value::from_text("of"), Some(Value::Bool(false)));
        assert_eq!(Value::from_text("n"), Some(Value::Bool(false)));
        assert_eq!(Value::from_text("NULL"), Some(Value::Null));
        assert_eq!(Value::from_text("hello"), None);
        assert_eq!(Value::from_text(""), None);
        assert_eq!(Value::from_text("1e500"), None, "overflow is malformed");
        assert_eq!(
            Value::from_text("99999999999999999999"),
            None,
            "an int that overflows"
        );
    }

    #[test]
    fn debug_text_is_pgbenchs() {
        assert_eq!(Value::Int(3).debug_text(), "int 3");
        assert_eq!(Value::Double(1.5).debug_text(), "double 1.5");
        assert_eq!(Value::Bool(true).debug_text(), "boolean true");
        assert_eq!(Value::Null.debug_text(), "null");
    }
}

//! Evaluating expressions: a client's variables ([`Vars`]), its random generator
//! ([`Prng`]) and an expression tree in, a [`Value`] or an [`EvalError`] out.
//!
//! pgbench 15's semantics (pgbench.c: `evalStandardFunc`, `evalLazyFunc`): arithmetic
//! on two integers stays integer and fails on overflow ("bigint add out of range");
//! with a double on either side it is done in doubles; `%` and `mod()` always work in
//! integers; division by zero fails; any NULL argument makes a function NULL (except
//! `debug()` and IS); AND, OR and CASE evaluate lazily. Nothing here allocates: the
//! built-in scripts' `\set aid random(1, 100000 * :scale)` runs once per transaction.

use super::parser::{BinOp, Expr, FastInt, Func, Step, MAX_ARGS};
use super::prng::{self, Prng};
use super::value::{EvalError, IntOp, Value, MAX_DEPTH};

/// What a variable holds.
#[derive(Debug, Clone, PartialEq)]
pub enum Slot {
    /// Nothing has set it yet.
    Unset,
    Value(Value),
    /// Text from `-D`, `\gset` or `\aset`: substituted into SQL as it is, read as a value
    /// (int, double, boolean or null) when an expression uses it.
    Text(String),
}

/// A client's variables, by the indices the parser gave their names.
#[derive(Debug, Clone)]
pub struct Vars {
    pub slots: Vec<Slot>,
}

impl Vars {
    pub fn new(n: usize) -> Vars {
        Vars {
            slots: vec![Slot::Unset; n],
        }
    }

    /// The variable's value for an expression.
    pub fn get(&self, i: usize) -> Result<Value, EvalError> {
        match &self.slots[i] {
            Slot::Value(v) => Ok(*v),
            Slot::Unset => Err(EvalError::Undefined(i)),
            Slot::Text(s) => Value::from_text(s).ok_or(EvalError::Malformed(i)),
        }
    }

    pub fn set(&mut self, i: usize, v: Value) {
        self.slots[i] = Slot::Value(v);
    }

    /// Stores text, reusing the slot's string when it already holds one.
    pub fn set_text(&mut self, i: usize, text: &str) {
        match &mut self.slots[i] {
            Slot::Text(s) => {
                s.clear();
                s.push_str(text);
            }
            slot => *slot = Slot::Text(text.to_string()),
        }
    }

    /// The slot's string to write into (empty and new when it holds none), to be given
    /// back with [`Vars::put_text`].
    pub fn take_text(&mut self, i: usize) -> String {
        match &mut self.slots[i] {
            Slot::Text(s) => std::mem::take(s),
            _ => String::new(),
        }
    }

    /// Stores text taken with [`Vars::take_text`].
    pub fn put_text(&mut self, i: usize, text: String) {
        self.slots[i] = Slot::Text(text);
    }

    /// The variable's text, when it holds text (for messages).
    pub fn text(&self, i: usize) -> Option<String> {
        match &self.slots[i] {
            Slot::Text(s) => Some(s.clone()),
            _ => None,
        }
    }

    /// Appends the variable as SQL text (pgbench's `getVariable`); false when unset.
    pub fn push_sql(&self, i: usize, out: &mut String) -> bool {
        match &self.slots[i] {
            Slot::Value(v) => v.push_sql(out),
            Slot::Text(s) => out.push_str(s),
            Slot::Unset => return false,
        }
        true
    }
}

/// Evaluates `e`; `debug` receives what each `debug()` call prints.
pub fn eval(e: &Expr, vars: &Vars, rng: &mut Prng, debug: &mut dyn FnMut(Value)) -> Result<Value, EvalError> {
    eval_at(e, vars, rng, debug, 1)
}

/// Evaluates `e`, found `depth` levels down its tree. The parser builds no tree deeper
/// than [`MAX_DEPTH`]; the bound is kept here too, so a tree made any other way fails
/// with an error rather than overflowing a worker thread's stack.
fn eval_at(
    e: &Expr,
    vars: &Vars,
    rng: &mut Prng,
    debug: &mut dyn FnMut(Value),
    depth: usize,
) -> Result<Value, EvalError> {
    if depth > MAX_DEPTH {
        return Err(EvalError::TooDeep);
    }
    match e {
        Expr::Const(v) => Ok(*v),
        Expr::Var(i) => vars.get(*i),
        Expr::Binary(op, l, r) => {
            let l = eval_at(l, vars, rng, debug, depth + 1)?;
            let r = eval_at(r, vars, rng, debug, depth + 1)?;
            if matches!(l, Value::Null) || matches!(r, Value::Null) {
                return Ok(Value::Null);
            }
            binary(*op, l, r)
        }
        Expr::Not(x) => match eval_at(x, vars, rng, debug, depth + 1)? {
            Value::Null => Ok(Value::Null),
            v => Ok(Value::Bool(!v.to_bool()?)),
        },
        Expr::And(l, r) | Expr::Or(l, r) => {
            let is_and = matches!(e, Expr::And(..));
            let a = eval_at(l, vars, rng, debug, depth + 1)?;
            if matches!(a, Value::Null) {
                return Ok(Value::Null);
            }
            // The first operand decides alone when it is false (AND) or true (OR).
            if a.to_bool()? != is_and {
                return Ok(Value::Bool(!is_and));
            }
            match eval_at(r, vars, rng, debug, depth + 1)? {
                Value::Null => Ok(Value::Null),
                b => Ok(Value::Bool(b.to_bool()?)),
            }
        }
        Expr::Is(x, what) => {
            let v = eval_at(x, vars, rng, debug, depth + 1)?;
            // pgbench's "!is": the same type and, for booleans, the same value.
            Ok(Value::Bool(match (v, what) {
                (Value::Null, Value::Null) => true,
                (Value::Bool(a), Value::Bool(b)) => a == *b,
                _ => false,
            }))
        }
        Expr::Case(arms, otherwise) => {
            for (cond, then) in arms {
                if eval_at(cond, vars, rng, debug, depth + 1)?.truth() {
                    return eval_at(then, vars, rng, debug, depth + 1);
                }
            }
            eval_at(otherwise, vars, rng, debug, depth + 1)
        }
        // Most calls take at most three arguments: a small array for them keeps the
        // hot path's random(lo, hi) from clearing room for sixteen.
        Expr::Fast(f) => f.eval(vars, rng, depth),
        Expr::Call(f, args) if args.len() <= 3 => call_with::<3>(*f, args, vars, rng, debug, depth),
        Expr::Call(_, args) if args.len() > MAX_ARGS => Err(EvalError::TooManyArguments),
        Expr::Call(f, args) => call_with::<MAX_ARGS>(*f, args, vars, rng, debug, depth),
    }
}

/// Evaluates a call's arguments (at most `N`) into an array on the stack, then calls.
fn call_with<const N: usize>(
    f: Func,
    args: &[Expr],
    vars: &Vars,
    rng: &mut Prng,
    debug: &mut dyn FnMut(Value),
    depth: usize,
) -> Result<Value, EvalError> {
    let mut vals = [Value::Null; N];
    let mut has_null = false;
    for (slot, a) in vals.iter_mut().zip(args) {
        *slot = eval_at(a, vars, rng, debug, depth + 1)?;
        has_null |= matches!(*slot, Value::Null);
    }
    let vals = &vals[..args.len().min(N)];
    if f == Func::Debug {
        debug(vals[0]);
        return Ok(vals[0]);
    }
    if has_null {
        return Ok(Value::Null);
    }
    call(f, vals, rng)
}

/// The deepest stack a [`FastInt`] program may need.
const FAST_STACK: usize = 8;

/// Compiles `e` into a [`FastInt`] when it qualifies; else returns it as it is.
pub fn compile(e: Expr) -> Expr {
    fn emit(e: &Expr, steps: &mut Vec<Step>, vars: &mut Vec<usize>, depth: usize) -> Option<usize> {
        // Returns the stack depth this subtree needs.
        Some(match e {
            Expr::Const(Value::Int(i)) => {
                steps.push(Step::Const(*i));
                depth + 1
            }
            Expr::Var(v) => {
                steps.push(Step::Var(*v));
                if !vars.contains(v) {
                    vars.push(*v);
                }
                depth + 1
            }
            Expr::Binary(op @ (BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div | BinOp::Mod), l, r) => {
                let a = emit(l, steps, vars, depth)?;
                let b = emit(r, steps, vars, depth + 1)?;
                steps.push(Step::Op(*op));
                a.max(b)
            }
            Expr::Call(Func::Random, args) if args.len() == 2 => {
                let a = emit(&args[0], steps, vars, depth)?;
                let b = emit(&args[1], steps, vars, depth + 1)?;
                steps.push(Step::Random);
                a.max(b)
            }
            _ => return None,
        })
    }
    let mut steps = Vec::new();
    let mut vars = Vec::new();
    match emit(&e, &mut steps, &mut vars, 0) {
        Some(depth) if depth <= FAST_STACK && !matches!(e, Expr::Const(_) | Expr::Var(_)) => {
            Expr::Fast(Box::new(FastInt {
                steps,
                vars,
                general: e,
            }))
        }
        _ => e,
    }
}

impl FastInt {
    fn eval(&self, vars: &Vars, rng: &mut Prng, depth: usize) -> Result<Value, EvalError> {
        let all_ints = self
            .vars
            .iter()
            .all(|&v| matches!(vars.slots[v], Slot::Value(Value::Int(_))));
        if !all_ints {
            return eval_at(&self.general, vars, rng, &mut |_| {}, depth);
        }
        let mut stack = [0i64; FAST_STACK];
        let mut n = 0;
        for step in &self.steps {
            match *step {
                Step::Const(i) => {
                    stack[n] = i;
                    n += 1;
                }
                Step::Var(v) => {
                    stack[n] = match vars.slots[v] {
                        Slot::Value(Value::Int(i)) => i,
                        _ => unreachable!("checked before running"),
                    };
                    n += 1;
                }
                Step::Op(op) => {
                    n -= 1;
                    let v = binary(op, Value::Int(stack[n - 1]), Value::Int(stack[n]))?;
                    let Value::Int(i) = v else {
                        unreachable!("integer operators on integers give integers")
                    };
                    stack[n - 1] = i;
                }
                Step::Random => {
                    n -= 1;
                    let (lo, hi) = (stack[n - 1], stack[n]);
                    stack[n - 1] = random(lo, hi, rng)?;
                }
            }
        }
        Ok(Value::Int(stack[0]))
    }
}

/// random(lo, hi) after pgbench's checks on the range.
fn random(lo: i64, hi: i64, rng: &mut Prng) -> Result<i64, EvalError> {
    if lo > hi {
        return Err(EvalError::EmptyRange);
    }
    // The width plus one must fit in a bigint, as pgbench requires.
    if hi.checked_sub(lo).and_then(|w| w.checked_add(1)).is_none() {
        return Err(EvalError::RangeTooLarge);
    }
    Ok(rng.uniform(lo, hi))
}

fn binary(op: BinOp, l: Value, r: Value) -> Result<Value, EvalError> {
    use BinOp::*;
    match op {
        Add | Sub | Mul | Div | Eq | Ne | Lt | Le
            if matches!(l, Value::Double(_)) || matches!(r, Value::Double(_)) =>
        {
            let (a, b) = (l.to_double()?, r.to_double()?);
            Ok(match op {
                Add => Value::Double(a + b),
                Sub => Value::Double(a - b),
                Mul => Value::Double(a * b),
                Div => Value::Double(a / b),
                Eq => Value::Bool(a == b),
                Ne => Value::Bool(a != b),
                Lt => Value::Bool(a < b),
                _ => Value::Bool(a <= b),
            })
        }
        Add | Sub | Mul | Div | Mod | Eq | Ne | Lt | Le => {
            let (a, b) = (l.to_int()?, r.to_int()?);
            Ok(match op {
                Add => Value::Int(a.checked_add(b).ok_or(EvalError::Overflow(IntOp::Add))?),
                Sub => Value::Int(a.checked_sub(b).ok_or(EvalError::Overflow(IntOp::Sub))?),
                Mul => Value::Int(a.checked_mul(b).ok_or(EvalError::Overflow(IntOp::Mul))?),
                Eq => Value::Bool(a == b),
                Ne => Value::Bool(a != b),
                Lt => Value::Bool(a < b),
                Le => Value::Bool(a <= b),
                Div | Mod => {
                    if b == 0 {
                        return Err(EvalError::DivisionByZero);
                    }
                    match (op, b) {
                        // i64::MIN / -1 does not fit; anything % -1 is 0.
                        (Div, -1) => Value::Int(a.checked_neg().ok_or(EvalError::Overflow(IntOp::Div))?),
                        (Mod, -1) => Value::Int(0),
                        (Div, _) => Value::Int(a / b),
                        _ => Value::Int(a % b),
                    }
                }
                _ => unreachable!("listed above"),
            })
        }
        BitAnd | BitOr | BitXor | Shl | Shr => {
            let (a, b) = (l.to_int()?, r.to_int()?);
            Ok(Value::Int(match op {
                BitAnd => a & b,
                BitOr => a | b,
                BitXor => a ^ b,
                // pgbench shifts with C's operators, which x86 reduces modulo 64: so does
                // wrapping_shl, and a script gets the same numbers on both.
                Shl => a.wrapping_shl(b as u32),
                _ => a.wrapping_shr(b as u32),
            }))
        }
    }
}

fn call(f: Func, a: &[Value], rng: &mut Prng) -> Result<Value, EvalError> {
    Ok(match f {
        Func::Pi => Value::Double(std::f64::consts::PI),
        Func::Abs => match a[0] {
            Value::Int(i) => Value::Int(i.wrapping_abs()),
            v => Value::Double(v.to_double()?.abs()),
        },
        Func::Double => Value::Double(a[0].to_double()?),
        Func::Sqrt => Value::Double(a[0].to_double()?.sqrt()),
        Func::Ln => Value::Double(a[0].to_double()?.ln()),
        Func::Exp => Value::Double(a[0].to_double()?.exp()),
        Func::Int => Value::Int(a[0].to_int()?),
        Func::Mod => binary(BinOp::Mod, a[0], a[1])?,
        Func::Pow => Value::Double(a[0].to_double()?.powf(a[1].to_double()?)),
        Func::Least | Func::Greatest => {
            let least = f == Func::Least;
            if a.iter().any(|v| matches!(v, Value::Double(_))) {
                let mut m = a[0].to_double()?;
                for v in &a[1..] {
                    let d = v.to_double()?;
                    m = if least { m.min(d) } else { m.max(d) };
                }
                Value::Double(m)
            } else {
                let mut m = a[0].to_int()?;
                for v in &a[1..] {
                    let i = v.to_int()?;
                    m = if least { m.min(i) } else { m.max(i) };
                }
                Value::Int(m)
            }
        }
        Func::HashMurmur2 => Value::Int(prng::hash_murmur2(a[0].to_int()?, a[1].to_int()?)),
        Func::HashFnv1a => Value::Int(prng::hash_fnv1a(a[0].to_int()?, a[1].to_int()?)),
        Func::Permute => {
            let (v, size, seed) = (a[0].to_int()?, a[1].to_int()?, a[2].to_int()?);
            if size <= 0 {
                return Err(EvalError::PermuteSize);
            }
            Value::Int(prng::permute(v, size, seed))
        }
        Func::Random | Func::RandomExponential | Func::RandomGaussian | Func::RandomZipfian => {
            let (lo, hi) = (a[0].to_int()?, a[1].to_int()?);
            if lo > hi {
                return Err(EvalError::EmptyRange);
            }
            // The width plus one must fit in a bigint, as pgbench requires.
            if hi.checked_sub(lo).and_then(|w| w.checked_add(1)).is_none() {
                return Err(EvalError::RangeTooLarge);
            }
            Value::Int(match f {
                Func::Random => rng.uniform(lo, hi),
                _ => {
                    let p = a[2].to_double()?;
                    match f {
                        Func::RandomGaussian if p < 2.0 => return Err(EvalError::GaussianParameter(p)),
                        Func::RandomGaussian => rng.gaussian(lo, hi, p),
                        Func::RandomZipfian if !(1.001..=1000.0).contains(&p) => {
                            return Err(EvalError::ZipfianParameter(p))
                        }
                        Func::RandomZipfian => rng.zipfian(lo, hi, p),
                        _ if p <= 0.0 || p.is_nan() => return Err(EvalError::ExponentialParameter(p)),
                        _ => rng.exponential(lo, hi, p),
                    }
                }
            })
        }
        Func::SysbenchGaussian | Func::SysbenchPareto | Func::SysbenchSpecial => {
            let (lo, hi) = (a[0].to_int()?, a[1].to_int()?);
            // sysbench draws unsigned 32-bit ids; the same bounds keep its arithmetic.
            if lo > hi || lo < 0 || hi > i64::from(u32::MAX) {
                return Err(EvalError::EmptyRange);
            }
            let p = a[2].to_double()?;
            Value::Int(match f {
                Func::SysbenchGaussian if !(1.0..=1e6).contains(&p) => {
                    return Err(EvalError::SysbenchParameter(
                        "iterations must be in 1..1000000",
                        p,
                    ))
                }
                Func::SysbenchGaussian => rng.sysbench_gaussian(lo, hi, p as u32),
                Func::SysbenchPareto if !(p > 0.0 && p < 1.0) => {
                    return Err(EvalError::SysbenchParameter(
                        "pareto h must be between 0 and 1",
                        p,
                    ))
                }
                Func::SysbenchPareto => rng.sysbench_pareto(lo, hi, p),
                _ => {
                    let (pct, res) = (a[3].to_double()?, a[4].to_double()?);
                    if !(1.0..=1e6).contains(&p) {
                        return Err(EvalError::SysbenchParameter(
                            "iterations must be in 1..1000000",
                            p,
                        ));
                    }
                    if !(0.0..=100.0).contains(&pct) {
                        return Err(EvalError::SysbenchParameter("special pct must be in 0..100", pct));
                    }
                    if !(0.0..100.0).contains(&res) {
                        return Err(EvalError::SysbenchParameter("special res must be in 0..99", res));
                    }
                    rng.sysbench_special(lo, hi, p as u32, pct, res)
                }
            })
        }
        Func::Debug => a[0],
    })
}

#[cfg(test)]
mod tests {
    use super::super::parser::parse_expr;
    use super::super::value::Type;
    use super::*;

    /// Evaluates `text` with variables x = 7, d = 2.5, s = "12" (text), t = "hello"
    /// (text), u unset; returns the value and what debug() printed.
    fn run(text: &str) -> (Result<Value, EvalError>, Vec<String>) {
        let names = ["x", "d", "s", "t", "u", "default_seed"];
        let e = parse_expr(text, &mut |n| {
            names.iter().position(|x| *x == n).expect("known name")
        })
        .unwrap_or_else(|e| panic!("{text}: {e:?}"));
        let mut vars = Vars::new(names.len());
        vars.set(0, Value::Int(7));
        vars.set(1, Value::Double(2.5));
        vars.set_text(2, "12");
        vars.set_text(3, "hello");
        vars.set(5, Value::Int(-1240385398947155067));
        let mut printed = Vec::new();
        let v = eval(&e, &vars, &mut Prng::new(5), &mut |v| {
            printed.push(v.debug_text())
        });
        (v, printed)
    }

    fn ok(text: &str) -> Value {
        run(text).0.unwrap_or_else(|e| panic!("{text}: {e:?}"))
    }

    fn err(text: &str) -> EvalError {
        run(text).0.expect_err(text)
    }

    // Expected values come from pgbench 15.18 printing the same expressions with debug().

    #[test]
    fn arithmetic_and_types() {
        assert_eq!(ok("1 + 2 * 3"), Value::Int(7));
        assert_eq!(ok("7 / 2"), Value::Int(3));
        assert_eq!(ok("-7 / 2"), Value::Int(-3));
        assert_eq!(ok("5 / 2.0"), Value::Double(2.5));
        assert_eq!(ok("7 % -3"), Value::Int(1));
        assert_eq!(ok("-7 % 3"), Value::Int(-1));
        assert_eq!(ok("5.5 % 2"), Value::Int(0), "% rounds 5.5 to 6 first");
        assert_eq!(ok("mod(7, 3)"), Value::Int(1));
        assert_eq!(ok(":x * :d"), Value::Double(17.5));
        assert_eq!(
            ok(":s + 1"),
            Value::Int(13),
            "text that looks like an int is an int"
        );
        assert_eq!(ok("1 = 1.0"), Value::Bool(true));
        assert_eq!(ok("1.5 = 1.5"), Value::Bool(true));
        assert_eq!(ok("0.1 + 0.2 <> 0.3"), Value::Bool(true));
        assert_eq!(ok("1 != 2"), Value::Bool(true));
        assert_eq!(ok("3 >= 3"), Value::Bool(true));
        assert_eq!(ok("-9223372036854775807 - 1"), Value::Int(i64::MIN));
    }

    #[test]
    fn bits_and_shifts() {
        assert_eq!(ok("1 << 3 | 1 & 3 # 7"), Value::Int(6));
        assert_eq!(ok("~5"), Value::Int(-6));
        assert_eq!(ok("~1+2"), Value::Int(-4));
        assert_eq!(ok("1 << 64"), Value::Int(1));
        assert_eq!(ok("1 << -1"), Value::Int(i64::MIN));
        assert_eq!(ok("-8 >> 1"), Value::Int(-4));
    }

    #[test]
    fn logic_nulls_and_case() {
        assert_eq!(
            ok("1 + 2 * 3 = 7 AND NOT false OR NULL IS NULL"),
            Value::Bool(true)
        );
        assert_eq!(ok("NULL AND false"), Value::Null);
        assert_eq!(ok("false AND NULL"), Value::Bool(false));
        assert_eq!(ok("true OR 1/0"), Value::Bool(true), "OR is lazy");
        assert_eq!(ok("1 + NULL"), Value::Null);
        assert_eq!(ok("abs(NULL)"), Value::Null);
        assert_eq!(ok("NULL ISNULL"), Value::Bool(true));
        assert_eq!(ok("2 NOTNULL"), Value::Bool(true));
        assert_eq!(ok("true IS TRUE"), Value::Bool(true));
        assert_eq!(ok("1 IS NOT TRUE"), Value::Bool(true));
        assert_eq!(ok("1 IS NULL IS NULL"), Value::Bool(false));
        assert_eq!(
            ok("CASE WHEN 1 > 2 THEN 1 WHEN 2 > 1 THEN 2.5 END"),
            Value::Double(2.5)
        );
        assert_eq!(ok("CASE WHEN false THEN 1 END"), Value::Null);
        assert_eq!(ok("CASE WHEN NULL THEN 1 ELSE 2 END"), Value::Int(2));
        assert_eq!(ok("CASE WHEN 0.0 THEN 1 WHEN :x THEN 3 END"), Value::Int(3));
    }

    #[test]
    fn functions() {
        assert_eq!(ok("abs(-5)"), Value::Int(5));
        assert_eq!(ok("abs(-2.5)"), Value::Double(2.5));
        assert_eq!(ok("least(1, 2.5, 0)"), Value::Double(0.0));
        assert_eq!(ok("greatest(1, 3, 2)"), Value::Int(3));
        assert_eq!(ok("int(2.5) + int(3.5) * 10"), Value::Int(42));
        assert_eq!(ok("double(3)"), Value::Double(3.0));
        assert_eq!(ok("sqrt(2)"), Value::Double(2f64.sqrt()));
        assert_eq!(ok("ln(10)"), Value::Double(10f64.ln()));
        assert_eq!(ok("exp(1)"), Value::Double(1f64.exp()));
        assert_eq!(ok("pi()"), Value::Double(std::f64::consts::PI));
        assert_eq!(ok("pow(2, 10)"), Value::Double(1024.0));
        assert_eq!(ok("power(2, 0.5)"), Value::Double(2f64.sqrt()));
        assert!(matches!(ok("sqrt(-1)"), Value::Double(d) if d.is_nan()));
        assert_eq!(ok("ln(0)"), Value::Double(f64::NEG_INFINITY));
        // From pgbench 15 with the seeds written out.
        assert_eq!(ok("hash(5, 42)"), Value::Int(3392551525449559074));
        assert_eq!(ok("hash_murmur2(5, 42)"), Value::Int(3392551525449559074));
        assert_eq!(ok("hash_fnv1a(5, 42)"), Value::Int(7229678446045915210));
        assert_eq!(ok("hash_murmur2(-7, 0)"), Value::Int(-2376560325806870531));
        assert_eq!(ok("permute(3, 10, 42)"), Value::Int(4));
        // One argument: the seed is :default_seed (here the one of --random-seed=5, -c 1).
        assert_eq!(
            ok("hash(1)"),
            ok("hash_murmur2(1, -1240385398947155067)"),
            "hash(x) is hash(x, :default_seed)"
        );
        assert!(matches!(ok("permute(5, 10)"), Value::Int(0..=9)));
        // The random functions: in range, with pgbench's first draw for seed 5, client 0
        // being 475806 of random(1, 1000000) (Prng::new(5) is not client 0's generator,
        // so only the range is checked here; prng.rs checks the stream).
        for f in [
            "random(1, 10)",
            "random_exponential(1, 10, 2)",
            "random_gaussian(1, 10, 2.5)",
            "random_zipfian(1, 10, 1.5)",
        ] {
            assert!(matches!(ok(f), Value::Int(1..=10)), "{f}");
        }
        assert_eq!(ok("random(5, 5)"), Value::Int(5));
        assert!(matches!(
            ok("random(-9223372036854775807 - 1, -2)"),
            Value::Int(i64::MIN..=-2)
        ));
    }

    #[test]
    fn compiled_integer_expressions_give_the_general_results_and_draws() {
        let names = ["x", "d", "s", "t", "u", "default_seed"];
        let mut vars = Vars::new(names.len());
        vars.set(0, Value::Int(7));
        vars.set(1, Value::Double(2.5));
        vars.set_text(2, "12");
        for text in [
            "random(1, 100000 * :x)",
            "random(-5000, 5000) + :x * 3 - 1",
            "(:x + 1) / 2 % 3",
            "random(1, 10) * random(1, 10)",
            "9223372036854775807 + :x",
            "-9223372036854775807 - :x * 2",
            ":x / (:x - 7)",
            "(-9223372036854775807 - 1) / -1",
            "random(:x, 1)",
            "random(-9223372036854775807 - 1, 9223372036854775807)",
            "random(1, :d * 4)",
            "random(1, 10) + :d",
            "random(1, 10) + :s",
            "random(1, 10) + :u",
        ] {
            let general = parse_expr(text, &mut |n| names.iter().position(|x| *x == n).unwrap()).unwrap();
            let fast = compile(general.clone());
            if !text.contains(":d *") && !text.contains("+ :d") {
                assert!(matches!(fast, Expr::Fast(_)), "{text} compiles");
            }
            let (mut r1, mut r2) = (Prng::new(9), Prng::new(9));
            for _ in 0..50 {
                let a = eval(&general, &vars, &mut r1, &mut |_| {});
                let b = eval(&fast, &vars, &mut r2, &mut |_| {});
                assert_eq!(a, b, "{text}");
            }
            assert_eq!(r1.next_u64(), r2.next_u64(), "{text}: the same draws");
        }
        // Anything else stays as it was.
        let e = parse_expr("1.5 + 1", &mut |_| 0).unwrap();
        assert_eq!(compile(e.clone()), e);
    }

    #[test]
    fn debug_prints_and_passes_through() {
        let (v, printed) = run("debug(1 + 2) + debug(1.5) + debug(:d)");
        assert_eq!(v, Ok(Value::Double(7.0)));
        assert_eq!(printed, ["int 3", "double 1.5", "double 2.5"]);
        let (_, printed) = run("debug(debug(1) > debug(2))");
        assert_eq!(
            printed,
            ["int 2", "int 1", "boolean false"],
            "> evaluates its right side first"
        );
        let (v, printed) = run("debug(NULL)");
        assert_eq!((v, printed), (Ok(Value::Null), vec!["null".to_string()]));
    }

    /// An expression `MAX_DEPTH` deep, of each kind of node that recurses, evaluates on a
    /// thread with a worker's stack (2 MiB, std's default), in this build; one level
    /// more, made without the parser, is an error, not an overflow.
    #[test]
    fn the_deepest_expression_evaluates_on_a_worker_s_stack() {
        let n = MAX_DEPTH - 1;
        let texts = [
            format!("{}debug(1)", "-".repeat(n - 1)),
            format!("{}debug(1){}", "least(1, 2, 3, ".repeat(n - 1), ")".repeat(n - 1)),
            format!(
                "{}debug(1){}",
                "CASE WHEN true THEN ".repeat(n - 1),
                " END".repeat(n - 1)
            ),
            format!("{}debug(true)", "NOT NOT ".repeat((n - 1) / 2)),
            format!("debug(1){}", " + 1".repeat(n - 1)),
        ];
        // Parsed on a stack the main thread's size, where connbench parses scripts.
        let main = std::thread::Builder::new().stack_size(8 << 20);
        let trees = main
            .spawn(move || {
                let parse = |t: &String| parse_expr(t, &mut |_| 0).unwrap_or_else(|e| panic!("{}", e.why));
                texts.iter().map(parse).collect::<Vec<_>>()
            })
            .unwrap()
            .join()
            .unwrap();
        let worker = std::thread::Builder::new().stack_size(2 << 20);
        let printed = worker
            .spawn(move || {
                let run = |e: &Expr| {
                    let mut printed = 0;
                    eval(e, &Vars::new(1), &mut Prng::new(1), &mut |_| printed += 1).unwrap();
                    printed
                };
                trees.iter().map(run).collect::<Vec<_>>()
            })
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(printed, [1; 5], "debug() at the bottom of each ran once");

        let mut deep = Expr::Const(Value::Int(1));
        for _ in 0..MAX_DEPTH {
            deep = Expr::Not(Box::new(deep));
        }
        let e = eval(&deep, &Vars::new(0), &mut Prng::new(1), &mut |_| {}).unwrap_err();
        assert_eq!(e, EvalError::TooDeep);
        assert!(e.message(&[], |_| None).contains("deeper than 256 levels"));
    }

    #[test]
    fn errors_are_pgbenchs() {
        assert_eq!(err("9223372036854775807 + 1"), EvalError::Overflow(IntOp::Add));
        assert_eq!(err("-9223372036854775807 - 2"), EvalError::Overflow(IntOp::Sub));
        assert_eq!(err("4611686018427387904 * 2"), EvalError::Overflow(IntOp::Mul));
        assert_eq!(
            err("(-9223372036854775807 - 1) / -1"),
            EvalError::Overflow(IntOp::Div)
        );
        assert_eq!(err("- - 9223372036854775808"), EvalError::Overflow(IntOp::Sub));
        assert_eq!(ok("(-9223372036854775807 - 1) % -1"), Value::Int(0));
        assert_eq!(err("1 / 0"), EvalError::DivisionByZero);
        assert_eq!(err("5 % 0"), EvalError::DivisionByZero);
        assert_eq!(err("mod(5, 0)"), EvalError::DivisionByZero);
        assert_eq!(
            ok("1.0 / 0"),
            Value::Double(f64::INFINITY),
            "doubles divide by zero"
        );
        assert_eq!(
            err("true + 1"),
            EvalError::Coerce {
                from: Type::Boolean,
                to: Type::Int
            }
        );
        assert_eq!(
            err("NOT 1"),
            EvalError::Coerce {
                from: Type::Int,
                to: Type::Boolean
            }
        );
        assert_eq!(
            err("1 = 1.0 AND 1"),
            EvalError::Coerce {
                from: Type::Int,
                to: Type::Boolean
            }
        );
        assert_eq!(
            err("abs(true)"),
            EvalError::Coerce {
                from: Type::Boolean,
                to: Type::Double
            }
        );
        assert_eq!(err("int(1e30)"), EvalError::DoubleToInt(1e30));
        assert_eq!(err("random(5, 1)"), EvalError::EmptyRange);
        assert_eq!(
            err("random(-9223372036854775807 - 1, 9223372036854775807)"),
            EvalError::RangeTooLarge
        );
        assert_eq!(err("random(0, 9223372036854775807)"), EvalError::RangeTooLarge);
        assert_eq!(
            err("random_gaussian(1, 10, 1.5)"),
            EvalError::GaussianParameter(1.5)
        );
        assert_eq!(err("random_zipfian(1, 10, 1)"), EvalError::ZipfianParameter(1.0));
        assert_eq!(
            err("random_exponential(1, 10, 0)"),
            EvalError::ExponentialParameter(0.0)
        );
        assert_eq!(err("permute(1, 0)"), EvalError::PermuteSize);
        assert_eq!(err(":u + 1"), EvalError::Undefined(4));
        assert_eq!(err(":t + 1"), EvalError::Malformed(3));
        let names: Vec<String> = ["x", "d", "s", "t"].map(String::from).to_vec();
        assert_eq!(
            EvalError::Malformed(3).message(&names, |_| Some("hello".into())),
            "malformed variable \"t\" value: \"hello\" (not an int, a double, a boolean or null)"
        );
        assert_eq!(
            EvalError::Overflow(IntOp::Add).message(&names, |_| None),
            "bigint add out of range"
        );
    }
}

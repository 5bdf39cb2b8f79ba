//! The expression grammar of pgbench 15 (exprparse.y) and the tree it builds.
//!
//! Precedence, lowest first, as exprparse.y declares it (taken from PostgreSQL's SQL
//! grammar): `OR`; `AND`; `NOT` (prefix); `IS`, `ISNULL`, `NOTNULL` (postfix);
//! comparisons `= <> != < <= > >=` (which do not chain); the bit operators
//! `| # & << >>` and prefix `~`; `+ -`; `* / %`; unary `+ -`. Like pgbench, `a > b` is
//! built as `b < a` (so `b` is evaluated first, which `debug()` shows), `-x` as `0 - x`
//! and `~x` as `-1 # x`; `hash(x)` and `permute(i, n)` get `:default_seed` as their
//! seed. Variables are resolved to indices here, so evaluation never looks up a name.

use super::lexer::{tokenize, Tok, Token};
use super::value::{Value, MAX_DEPTH};

/// An expression tree.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    Const(Value),
    /// A variable, by index into the script's variables.
    Var(usize),
    /// An operator that is NULL when either side is.
    Binary(BinOp, Box<Expr>, Box<Expr>),
    Not(Box<Expr>),
    /// Evaluated lazily, with SQL's three-valued logic.
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
    /// `x IS NULL`, `x IS TRUE`, `x IS FALSE` (negated forms wrap this in `Not`).
    Is(Box<Expr>, Value),
    /// `CASE WHEN c THEN v ... ELSE e END`; a missing ELSE is NULL.
    Case(Vec<(Expr, Expr)>, Box<Expr>),
    Call(Func, Vec<Expr>),
    /// An integer-only expression compiled for the hot path (by the evaluator's
    /// `compile`); never built by the parser itself.
    Fast(Box<FastInt>),
}

/// An expression of integer constants, variables, `+ - * / %` and `random(lo, hi)`, as
/// a postfix program over i64: the built-in scripts' `\set aid random(1, 100000 *
/// :scale)` costs a few nanoseconds instead of a walk over typed values. When a
/// variable it reads does not hold an integer, the general evaluator runs instead;
/// that is checked before anything runs, so no random number is drawn twice. Results
/// and errors are the general evaluator's. The tree's node, so it lives with
/// [`Expr`]; the evaluator compiles and runs it.
#[derive(Debug, Clone, PartialEq)]
pub struct FastInt {
    pub steps: Vec<Step>,
    pub vars: Vec<usize>,
    pub general: Expr,
}

/// One step of a [`FastInt`] program, on a stack of integers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Step {
    Const(i64),
    Var(usize),
    Op(BinOp),
    Random,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    Eq,
    Ne,
    Lt,
    Le,
    BitAnd,
    BitOr,
    BitXor,
    Shl,
    Shr,
}

/// The functions, by the name a script calls them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Func {
    Abs,
    Debug,
    Double,
    Exp,
    Greatest,
    HashFnv1a,
    HashMurmur2,
    Int,
    Least,
    Ln,
    Mod,
    Permute,
    Pi,
    Pow,
    Random,
    RandomExponential,
    RandomGaussian,
    RandomZipfian,
    Sqrt,
    /// connbench's own (not pgbench's): sysbench 1.0's `special`, `gaussian` and
    /// `pareto` distributions, for the built-in sysbench workloads.
    SysbenchGaussian,
    SysbenchPareto,
    SysbenchSpecial,
}

/// How many arguments a function takes.
enum Arity {
    Exactly(usize),
    /// At least one (least, greatest).
    Some,
    /// One, and a seed that defaults to `:default_seed` (the hashes).
    Seeded(usize),
}

/// pgbench's limit on a function's arguments (MAX_FARGS).
pub const MAX_ARGS: usize = 16;

impl Func {
    const ALL: [(&'static str, Func); 24] = [
        ("abs", Func::Abs),
        ("debug", Func::Debug),
        ("double", Func::Double),
        ("exp", Func::Exp),
        ("greatest", Func::Greatest),
        ("hash", Func::HashMurmur2),
        ("hash_fnv1a", Func::HashFnv1a),
        ("hash_murmur2", Func::HashMurmur2),
        ("int", Func::Int),
        ("least", Func::Least),
        ("ln", Func::Ln),
        ("mod", Func::Mod),
        ("permute", Func::Permute),
        ("pi", Func::Pi),
        ("pow", Func::Pow),
        ("power", Func::Pow),
        ("random", Func::Random),
        ("random_exponential", Func::RandomExponential),
        ("random_gaussian", Func::RandomGaussian),
        ("random_zipfian", Func::RandomZipfian),
        ("sqrt", Func::Sqrt),
        ("sysbench_gaussian", Func::SysbenchGaussian),
        ("sysbench_pareto", Func::SysbenchPareto),
        ("sysbench_special", Func::SysbenchSpecial),
    ];

    /// The function of this name (case-insensitive, as pgbench's find_func).
    pub fn named(name: &str) -> Option<Func> {
        Func::ALL
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|&(_, f)| f)
    }

    fn arity(self) -> Arity {
        match self {
            Func::Pi => Arity::Exactly(0),
            Func::Abs | Func::Debug | Func::Double | Func::Exp | Func::Int | Func::Ln | Func::Sqrt => {
                Arity::Exactly(1)
            }
            Func::Mod | Func::Pow | Func::Random => Arity::Exactly(2),
            Func::RandomExponential | Func::RandomGaussian | Func::RandomZipfian => Arity::Exactly(3),
            Func::SysbenchGaussian | Func::SysbenchPareto => Arity::Exactly(3),
            Func::SysbenchSpecial => Arity::Exactly(5),
            Func::Least | Func::Greatest => Arity::Some,
            Func::HashFnv1a | Func::HashMurmur2 => Arity::Seeded(1),
            Func::Permute => Arity::Seeded(2),
        }
    }
}

/// A syntax error: what, and the byte offset it was found at.
#[derive(Debug, Clone, PartialEq)]
pub struct ParseError {
    pub why: String,
    pub at: usize,
}

/// Parses `text` into an expression; `var` gives a variable's index by name (creating
/// it), `default_seed` is the index of `:default_seed`.
pub fn parse_expr(text: &str, var: &mut dyn FnMut(&str) -> usize) -> Result<Expr, ParseError> {
    let tokens = tokenize(text).map_err(|e| ParseError { why: e.why, at: e.at })?;
    let mut p = Parser {
        tokens,
        pos: 0,
        end: text.len(),
        var,
        nesting: 0,
    };
    if p.tokens.is_empty() {
        return Err(p.error("an expression is missing"));
    }
    let (e, _) = p.expr(0)?;
    if p.pos < p.tokens.len() {
        return Err(p.error(format!("unexpected {} after a complete expression", p.describe())));
    }
    Ok(e)
}

// Binding powers: the levels of exprparse.y's precedence list.
const OR: u8 = 1;
const AND: u8 = 2;
const NOT: u8 = 3;
const IS: u8 = 4;
const CMP: u8 = 5;
const BIT: u8 = 6;
const ADD: u8 = 7;
const MUL: u8 = 8;
const UNARY: u8 = 9;

struct Parser<'a> {
    tokens: Vec<Token>,
    pos: usize,
    end: usize,
    var: &'a mut dyn FnMut(&str) -> usize,
    /// How many `expr` calls are active: the parser's own recursion.
    nesting: usize,
}

/// An expression and the depth of its tree (a constant is 1).
type Node = (Expr, usize);

/// A node over `children`: one level deeper than the deepest of them.
fn over(e: Expr, children: impl IntoIterator<Item = usize>) -> Node {
    (e, 1 + children.into_iter().max().unwrap_or(0))
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Tok> {
        self.tokens.get(self.pos).map(|t| &t.tok)
    }

    fn at(&self) -> usize {
        self.tokens.get(self.pos).map_or(self.end, |t| t.at)
    }

    fn error(&self, why: impl Into<String>) -> ParseError {
        ParseError {
            why: why.into(),
            at: self.at(),
        }
    }

    /// The current token in words, for messages.
    fn describe(&self) -> String {
        match self.peek() {
            None => "end of expression".into(),
            Some(Tok::Int(n)) => n.to_string(),
            Some(Tok::MaxIntPlusOne) => "9223372036854775808".into(),
            Some(Tok::Double(d)) => d.to_string(),
            Some(Tok::Var(v)) => format!(":{v}"),
            Some(Tok::Ident(f)) => format!("{f:?}"),
            Some(Tok::Op(o)) => format!("{o:?}"),
            Some(Tok::Open) => "\"(\"".into(),
            Some(Tok::Close) => "\")\"".into(),
            Some(Tok::Comma) => "\",\"".into(),
            Some(other) => format!("{other:?}").to_uppercase(),
        }
    }

    fn expect(&mut self, want: Tok, what: &str) -> Result<(), ParseError> {
        if self.peek() == Some(&want) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.error(format!("expected {what}, found {}", self.describe())))
        }
    }

    /// The error for an expression nested past [`MAX_DEPTH`], found here.
    fn too_deep(&self) -> ParseError {
        self.error(format!(
            "the expression nests deeper than {MAX_DEPTH} levels (connbench's limit: each level \
             costs stack on the client's thread); split it over several \\set commands"
        ))
    }

    /// Precedence climbing: an operand, then every operator binding at least `min`. The
    /// parser's recursion and the tree's depth are both bounded by [`MAX_DEPTH`].
    fn expr(&mut self, min: u8) -> Result<Node, ParseError> {
        if self.nesting >= MAX_DEPTH {
            return Err(self.too_deep());
        }
        self.nesting += 1;
        let result = self.climb(min);
        self.nesting -= 1;
        let node = result?;
        if node.1 > MAX_DEPTH {
            return Err(self.too_deep());
        }
        Ok(node)
    }

    fn climb(&mut self, min: u8) -> Result<Node, ParseError> {
        let mut left = self.prefix()?;
        while let Some(tok) = self.peek().cloned() {
            // A chain of operators builds a tree as deep as it is long, without recursing.
            if left.1 >= MAX_DEPTH {
                return Err(self.too_deep());
            }
            let (level, op) = match &tok {
                Tok::Or => (OR, None),
                Tok::And => (AND, None),
                Tok::Is | Tok::IsNull | Tok::NotNull => (IS, None),
                Tok::Op(o) => match *o {
                    "=" | "<>" | "!=" | "<" | "<=" | ">" | ">=" => (CMP, Some(*o)),
                    "|" | "#" | "&" | "<<" | ">>" => (BIT, Some(*o)),
                    "+" | "-" => (ADD, Some(*o)),
                    "*" | "/" | "%" => (MUL, Some(*o)),
                    _ => break,
                },
                _ => break,
            };
            if level < min {
                break;
            }
            self.pos += 1;
            let (l, ld) = left;
            left = match tok {
                Tok::Or => {
                    let (r, rd) = self.expr(OR + 1)?;
                    over(Expr::Or(Box::new(l), Box::new(r)), [ld, rd])
                }
                Tok::And => {
                    let (r, rd) = self.expr(AND + 1)?;
                    over(Expr::And(Box::new(l), Box::new(r)), [ld, rd])
                }
                Tok::IsNull => over(Expr::Is(Box::new(l), Value::Null), [ld]),
                Tok::NotNull => (Expr::Not(Box::new(Expr::Is(Box::new(l), Value::Null))), ld + 2),
                Tok::Is => {
                    let negated = self.peek() == Some(&Tok::Not);
                    if negated {
                        self.pos += 1;
                    }
                    let what = match self.peek() {
                        Some(Tok::Null) => Value::Null,
                        Some(Tok::Bool(b)) => Value::Bool(*b),
                        _ => {
                            return Err(self.error(format!(
                                "IS must be followed by [NOT] NULL, TRUE or FALSE, not {}",
                                self.describe()
                            )))
                        }
                    };
                    self.pos += 1;
                    let is = Expr::Is(Box::new(l), what);
                    if negated {
                        (Expr::Not(Box::new(is)), ld + 2)
                    } else {
                        (is, ld + 1)
                    }
                }
                _ => {
                    let op = op.expect("operators carry their spelling");
                    let (r, rd) = self.expr(level + 1)?;
                    let e = over(binary(op, l, r), [ld, rd]);
                    if level == CMP {
                        // Comparisons are %nonassoc: `a < b < c` is a syntax error.
                        if let Some(Tok::Op(o)) = self.peek() {
                            if matches!(*o, "=" | "<>" | "!=" | "<" | "<=" | ">" | ">=") {
                                return Err(self.error(format!(
                                    "comparisons do not chain: {o:?} after a comparison; \
                                     combine them with AND"
                                )));
                            }
                        }
                    }
                    e
                }
            };
        }
        Ok(left)
    }

    fn prefix(&mut self) -> Result<Node, ParseError> {
        let Some(tok) = self.peek().cloned() else {
            return Err(self.error("the expression ends where a value is expected"));
        };
        self.pos += 1;
        let leaf = |e| (e, 1);
        Ok(match tok {
            Tok::Open => {
                let e = self.expr(0)?;
                self.expect(Tok::Close, "\")\"")?;
                e
            }
            Tok::Op("+") => self.expr(UNARY)?,
            Tok::Op("-") => {
                if self.peek() == Some(&Tok::MaxIntPlusOne) {
                    self.pos += 1;
                    leaf(Expr::Const(Value::Int(i64::MIN)))
                } else {
                    let (e, d) = self.expr(UNARY)?;
                    let zero = Box::new(Expr::Const(Value::Int(0)));
                    (Expr::Binary(BinOp::Sub, zero, Box::new(e)), d + 1)
                }
            }
            // `~` takes the bit operators' level (exprparse.y gives the rule no %prec).
            Tok::Op("~") => {
                let (e, d) = self.expr(BIT + 1)?;
                let ones = Box::new(Expr::Const(Value::Int(-1)));
                (Expr::Binary(BinOp::BitXor, ones, Box::new(e)), d + 1)
            }
            Tok::Not => {
                let (e, d) = self.expr(NOT)?;
                (Expr::Not(Box::new(e)), d + 1)
            }
            Tok::Null => leaf(Expr::Const(Value::Null)),
            Tok::Bool(b) => leaf(Expr::Const(Value::Bool(b))),
            Tok::Int(n) => leaf(Expr::Const(Value::Int(n))),
            Tok::Double(d) => leaf(Expr::Const(Value::Double(d))),
            Tok::MaxIntPlusOne => {
                self.pos -= 1;
                return Err(self.error(
                    "bigint constant overflow (9223372036854775808); only -9223372036854775808 fits",
                ));
            }
            Tok::Var(name) => leaf(Expr::Var((self.var)(&name))),
            Tok::Ident(name) => self.call(&name)?,
            Tok::Case => self.case()?,
            _ => {
                self.pos -= 1;
                return Err(self.error(format!("expected a value, found {}", self.describe())));
            }
        })
    }

    fn call(&mut self, name: &str) -> Result<Node, ParseError> {
        self.pos -= 1;
        let Some(f) = Func::named(name) else {
            return Err(self.error(format!(
                "unknown function {name:?}; pgbench's are abs, debug, double, exp, greatest, hash, \
                 hash_fnv1a, hash_murmur2, int, least, ln, mod, permute, pi, pow, power, random, \
                 random_exponential, random_gaussian, random_zipfian, sqrt"
            )));
        };
        self.pos += 1;
        self.expect(Tok::Open, &format!("\"(\" after {name}"))?;
        let mut args = Vec::new();
        let mut depth = 1;
        if self.peek() != Some(&Tok::Close) {
            loop {
                let (a, d) = self.expr(0)?;
                args.push(a);
                depth = depth.max(d);
                if self.peek() == Some(&Tok::Comma) {
                    self.pos += 1;
                } else {
                    break;
                }
            }
        }
        self.expect(Tok::Close, &format!("\",\" or \")\" in {name}'s arguments"))?;
        let n = args.len();
        let ok = match f.arity() {
            Arity::Exactly(k) => n == k,
            // More than MAX_ARGS fails when evaluated, as in pgbench (evalStandardFunc).
            Arity::Some => n >= 1,
            Arity::Seeded(k) => {
                if n == k {
                    args.push(Expr::Var((self.var)("default_seed")));
                }
                n == k || n == k + 1
            }
        };
        if !ok {
            let want = match f.arity() {
                Arity::Exactly(0) => "no arguments".to_string(),
                Arity::Exactly(1) => "1 argument".to_string(),
                Arity::Exactly(k) => format!("{k} arguments"),
                Arity::Some => "at least 1 argument".to_string(),
                Arity::Seeded(k) => format!("{k} or {} arguments (the last a seed)", k + 1),
            };
            self.pos -= 1;
            return Err(self.error(format!("{name}() takes {want}, not {n}")));
        }
        Ok(over(Expr::Call(f, args), [depth]))
    }

    fn case(&mut self) -> Result<Node, ParseError> {
        let mut arms = Vec::new();
        let mut depth = 1;
        while self.peek() == Some(&Tok::When) {
            self.pos += 1;
            let (cond, cd) = self.expr(0)?;
            self.expect(Tok::Then, "THEN")?;
            let (then, td) = self.expr(0)?;
            arms.push((cond, then));
            depth = depth.max(cd).max(td);
        }
        if arms.is_empty() {
            return Err(self.error(format!("CASE needs WHEN ... THEN ..., found {}", self.describe())));
        }
        let (otherwise, od) = if self.peek() == Some(&Tok::Else) {
            self.pos += 1;
            self.expr(0)?
        } else {
            (Expr::Const(Value::Null), 1)
        };
        self.expect(Tok::End, "WHEN, ELSE or END")?;
        Ok(over(Expr::Case(arms, Box::new(otherwise)), [depth, od]))
    }
}

fn binary(op: &str, l: Expr, r: Expr) -> Expr {
    let (op, l, r) = match op {
        "+" => (BinOp::Add, l, r),
        "-" => (BinOp::Sub, l, r),
        "*" => (BinOp::Mul, l, r),
        "/" => (BinOp::Div, l, r),
        "%" => (BinOp::Mod, l, r),
        "=" => (BinOp::Eq, l, r),
        "<>" | "!=" => (BinOp::Ne, l, r),
        "<" => (BinOp::Lt, l, r),
        "<=" => (BinOp::Le, l, r),
        ">" => (BinOp::Lt, r, l),
        ">=" => (BinOp::Le, r, l),
        "&" => (BinOp::BitAnd, l, r),
        "|" => (BinOp::BitOr, l, r),
        "#" => (BinOp::BitXor, l, r),
        "<<" => (BinOp::Shl, l, r),
        _ => (BinOp::Shr, l, r),
    };
    Expr::Binary(op, Box::new(l), Box::new(r))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Expr, ParseError> {
        let mut names: Vec<String> = Vec::new();
        parse_expr(s, &mut |n| match names.iter().position(|x| x == n) {
            Some(i) => i,
            None => {
                names.push(n.to_string());
                names.len() - 1
            }
        })
    }

    fn int(n: i64) -> Box<Expr> {
        Box::new(Expr::Const(Value::Int(n)))
    }

    #[test]
    fn precedence_follows_exprparse() {
        // * over +
        assert_eq!(
            parse("1 + 2 * 3").unwrap(),
            Expr::Binary(
                BinOp::Add,
                int(1),
                Box::new(Expr::Binary(BinOp::Mul, int(2), int(3)))
            )
        );
        // + over the bit operators, and ~ at their level: ~(1 + 2)
        assert_eq!(
            parse("~1+2").unwrap(),
            Expr::Binary(
                BinOp::BitXor,
                int(-1),
                Box::new(Expr::Binary(BinOp::Add, int(1), int(2)))
            )
        );
        // unary minus binds tightest: (0 - 1) + 2
        assert_eq!(
            parse("-1+2").unwrap(),
            Expr::Binary(
                BinOp::Add,
                Box::new(Expr::Binary(BinOp::Sub, int(0), int(1))),
                int(2)
            )
        );
        // NOT over comparison: NOT (a = b); AND over OR
        assert!(
            matches!(parse("NOT 1 = 2").unwrap(), Expr::Not(e) if matches!(*e, Expr::Binary(BinOp::Eq, _, _)))
        );
        assert!(
            matches!(parse("true OR false AND false").unwrap(), Expr::Or(_, r) if matches!(*r, Expr::And(_, _)))
        );
        // > is < with the operands swapped
        assert_eq!(parse("1 > 2").unwrap(), Expr::Binary(BinOp::Lt, int(2), int(1)));
        // left associativity
        assert_eq!(
            parse("8 - 2 - 1").unwrap(),
            Expr::Binary(
                BinOp::Sub,
                Box::new(Expr::Binary(BinOp::Sub, int(8), int(2))),
                int(1)
            )
        );
        assert_eq!(
            parse("-9223372036854775808").unwrap(),
            Expr::Const(Value::Int(i64::MIN))
        );
        // IS chains (pgbench accepts `1 IS NULL IS NULL`)
        assert!(parse("1 IS NULL IS NULL").is_ok());
        assert!(matches!(parse("1 IS NOT TRUE").unwrap(), Expr::Not(_)));
        assert!(matches!(parse("1 NOTNULL").unwrap(), Expr::Not(_)));
    }

    #[test]
    fn functions_take_their_arguments() {
        assert!(matches!(parse("hash(1)").unwrap(), Expr::Call(Func::HashMurmur2, a) if a.len() == 2));
        assert!(matches!(parse("permute(1, 10)").unwrap(), Expr::Call(Func::Permute, a) if a.len() == 3));
        assert!(matches!(
            parse("RANDOM(1, 2)").unwrap(),
            Expr::Call(Func::Random, _)
        ));
        assert!(matches!(parse("pi()").unwrap(), Expr::Call(Func::Pi, a) if a.is_empty()));
        assert!(
            matches!(parse("CASE WHEN 1 THEN 2 END").unwrap(), Expr::Case(arms, e) if arms.len() == 1 && *e == Expr::Const(Value::Null))
        );
    }

    /// `text` with `(`, `-` or a call nested `n` deep around `1`, or `1` followed by `n`
    /// additions (a tree `n + 1` deep built without recursing).
    fn nested(shape: &str, n: usize) -> String {
        match shape {
            "paren" => format!("{}1{}", "(".repeat(n), ")".repeat(n)),
            "minus" => format!("{}1", "-".repeat(n)),
            "not" => format!("{}1", "NOT ".repeat(n)),
            "abs" => format!("{}1{}", "abs(".repeat(n), ")".repeat(n)),
            "least" => format!("{}1{}", "least(1, 2, 3, ".repeat(n), ")".repeat(n)),
            "case" => format!("{}1{}", "CASE WHEN true THEN ".repeat(n), " END".repeat(n)),
            _ => format!("1{}", " + 1".repeat(n)),
        }
    }

    /// Runs `f` on a thread with the main thread's stack (8 MiB), where connbench parses
    /// scripts; a test thread has 2 MiB, and a debug build's parser needs up to 10 KiB a
    /// level.
    fn on_main_sized_stack(f: impl FnOnce() + Send + 'static) {
        let main = std::thread::Builder::new().stack_size(8 << 20);
        main.spawn(f).unwrap().join().unwrap();
    }

    #[test]
    fn nesting_is_bounded_in_depth_and_recursion() {
        on_main_sized_stack(nesting_bounds);
    }

    fn nesting_bounds() {
        // The top level is one level: 255 more fit, 256 more do not, whatever nests.
        for shape in ["paren", "minus", "not", "abs", "least", "case", "chain"] {
            let deepest = nested(shape, MAX_DEPTH - 1);
            assert!(
                parse(&deepest).is_ok(),
                "{shape} at the limit: {:?}",
                parse(&deepest).err()
            );
            let e = parse(&nested(shape, MAX_DEPTH)).expect_err(shape);
            assert!(
                e.why.contains("nests deeper than 256 levels"),
                "{shape}: {}",
                e.why
            );
        }
        // Where the limit is passed: the 257th "(" is at offset 256.
        assert_eq!(parse(&nested("paren", MAX_DEPTH)).unwrap_err().at, MAX_DEPTH);
        // pgbench's "memory exhausted" cases are refused, not a stack overflow.
        for text in [
            nested("paren", 10_000),
            nested("minus", 300_000),
            nested("chain", 300_000),
        ] {
            let e = parse(&text).unwrap_err();
            assert!(e.why.contains("nests deeper than"), "{}", e.why);
        }
        // Wide but shallow is fine: a long CASE and many calls side by side.
        let wide = format!("CASE {} ELSE 0 END", "WHEN false THEN 1 ".repeat(5_000));
        assert!(parse(&wide).is_ok());
        let side_by_side = vec!["abs(1)"; 5_000].join(" * 0 + ");
        assert!(
            parse(&side_by_side).is_err(),
            "a chain of 10,000 operators is 10,000 deep"
        );
    }

    #[test]
    fn syntax_errors_say_what_and_where() {
        for (text, want, at) in [
            ("1 +", "ends where a value", 3),
            ("1 < 2 < 3", "do not chain", 6),
            ("foo(1)", "unknown function \"foo\"", 0),
            ("random(1)", "random() takes 2 arguments, not 1", 8),
            ("least()", "at least 1 argument", 6),
            ("pi(1)", "no arguments", 4),
            ("hash(1, 2, 3)", "1 or 2 arguments", 12),
            ("(1", "expected \")\"", 2),
            ("9223372036854775808", "bigint constant overflow", 0),
            ("1 IS 2", "IS must be followed", 5),
            ("CASE 1 END", "CASE needs WHEN", 5),
            ("1 2", "after a complete expression", 2),
            ("", "missing", 0),
        ] {
            let e = parse(text).unwrap_err();
            assert!(e.why.contains(want), "{text}: {}", e.why);
            assert_eq!(e.at, at, "{text}: {}", e.why);
        }
    }
}

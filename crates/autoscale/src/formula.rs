//! KEDA's `scalingModifiers.formula`: the part of the expr language
//! (<https://expr.medv.io/docs/Language-Definition>) a formula over trigger values uses.
//!
//! Numbers, trigger names, `nil`, `true`/`false`; arithmetic `+ - * / % **` (and `^`);
//! comparisons `== != < <= > >=`; `&& || !` (and `and`, `or`, `not`); the ternary `c ? a : b`;
//! nil coalescing `a ?? b` (what KEDA's `scalingModifiers` fallback needs: a failed trigger is
//! `nil`); and the functions `min`, `max`, `abs`, `ceil`, `floor`, `round`, `int`, `float`.
//! Anything else is refused when the formula is parsed, naming the character where it stops.
//!
//! ```
//! use inferscale_autoscale::formula::Formula;
//!
//! let f = Formula::parse("p95 > 5 ? max(queue / 5, 3) : queue / 5").unwrap();
//! let v = f.eval(&|name| match name { "queue" => Some(40.0), "p95" => Some(7.5), _ => None });
//! assert_eq!(v, Ok(8.0));
//! ```

use std::fmt;

/// A parsed formula.
#[derive(Debug, Clone, PartialEq)]
pub struct Formula {
    text: String,
    root: Node,
}

#[derive(Debug, Clone, PartialEq)]
enum Node {
    Num(f64),
    Bool(bool),
    Nil,
    Var(String),
    Neg(Box<Node>),
    Not(Box<Node>),
    Bin(Op, Box<Node>, Box<Node>),
    If(Box<Node>, Box<Node>, Box<Node>),
    Call(Func, Vec<Node>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    Pow,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    And,
    Or,
    Coalesce,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Func {
    Min,
    Max,
    Abs,
    Ceil,
    Floor,
    Round,
    Int,
    Float,
}

/// A formula that does not parse: where and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("formula {text:?}: at character {at}: {message}")]
pub struct FormulaError {
    /// The formula.
    pub text: String,
    /// 1-based character position.
    pub at: usize,
    /// What was expected.
    pub message: String,
}

/// Why a formula has no number.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EvalError {
    /// The result (or an operand that needs a number) is `nil`: a trigger failed.
    #[error("the formula's value is nil (a trigger it reads failed; `a ?? b` gives a default)")]
    Nil,
    /// A boolean where a number is needed, or the reverse.
    #[error("{0}")]
    Type(String),
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Val {
    Num(f64),
    Bool(bool),
    Nil,
}

impl Formula {
    /// Parses `text`.
    pub fn parse(text: &str) -> Result<Formula, FormulaError> {
        let mut p = Parser {
            text,
            chars: text.char_indices().collect(),
            i: 0,
        };
        let root = p.ternary()?;
        p.skip_ws();
        if p.i < p.chars.len() {
            return Err(p.error("an operator or the end of the formula"));
        }
        Ok(Formula {
            text: text.to_owned(),
            root,
        })
    }

    /// The formula as written.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The names it reads, in order of first use.
    pub fn names(&self) -> Vec<String> {
        fn walk(n: &Node, out: &mut Vec<String>) {
            match n {
                Node::Var(v) if !out.contains(v) => out.push(v.clone()),
                Node::Neg(a) | Node::Not(a) => walk(a, out),
                Node::Bin(_, a, b) => {
                    walk(a, out);
                    walk(b, out);
                }
                Node::If(c, a, b) => {
                    walk(c, out);
                    walk(a, out);
                    walk(b, out);
                }
                Node::Call(_, args) => args.iter().for_each(|a| walk(a, out)),
                _ => {}
            }
        }
        let mut out = Vec::new();
        walk(&self.root, &mut out);
        out
    }

    /// Its value, reading each name through `var` (`None`: the trigger failed, `nil`).
    pub fn eval(&self, var: &dyn Fn(&str) -> Option<f64>) -> Result<f64, EvalError> {
        match eval(&self.root, var)? {
            Val::Num(v) => Ok(v),
            Val::Bool(b) => Err(EvalError::Type(format!(
                "the formula's value is the boolean {b}, not a number"
            ))),
            Val::Nil => Err(EvalError::Nil),
        }
    }
}

impl fmt::Display for Formula {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

fn num(v: Val) -> Result<f64, EvalError> {
    match v {
        Val::Num(x) => Ok(x),
        Val::Nil => Err(EvalError::Nil),
        Val::Bool(b) => Err(EvalError::Type(format!(
            "a number is needed, not the boolean {b}"
        ))),
    }
}

fn truth(v: Val) -> Result<bool, EvalError> {
    match v {
        Val::Bool(b) => Ok(b),
        Val::Nil => Err(EvalError::Nil),
        Val::Num(x) => Err(EvalError::Type(format!(
            "a condition is needed, not the number {x}"
        ))),
    }
}

fn eval(n: &Node, var: &dyn Fn(&str) -> Option<f64>) -> Result<Val, EvalError> {
    Ok(match n {
        Node::Num(v) => Val::Num(*v),
        Node::Bool(b) => Val::Bool(*b),
        Node::Nil => Val::Nil,
        Node::Var(name) => var(name).map_or(Val::Nil, Val::Num),
        Node::Neg(a) => Val::Num(-num(eval(a, var)?)?),
        Node::Not(a) => Val::Bool(!truth(eval(a, var)?)?),
        Node::If(c, a, b) => {
            if truth(eval(c, var)?)? {
                eval(a, var)?
            } else {
                eval(b, var)?
            }
        }
        Node::Bin(Op::Coalesce, a, b) => match eval(a, var)? {
            Val::Nil => eval(b, var)?,
            v => v,
        },
        Node::Bin(Op::And, a, b) => Val::Bool(truth(eval(a, var)?)? && truth(eval(b, var)?)?),
        Node::Bin(Op::Or, a, b) => Val::Bool(truth(eval(a, var)?)? || truth(eval(b, var)?)?),
        Node::Bin(op @ (Op::Eq | Op::Ne), a, b) => {
            let (x, y) = (eval(a, var)?, eval(b, var)?);
            Val::Bool((x == y) == (*op == Op::Eq))
        }
        Node::Bin(op, a, b) => {
            let (x, y) = (num(eval(a, var)?)?, num(eval(b, var)?)?);
            match op {
                Op::Add => Val::Num(x + y),
                Op::Sub => Val::Num(x - y),
                Op::Mul => Val::Num(x * y),
                Op::Div => Val::Num(x / y),
                Op::Rem => Val::Num(x % y),
                Op::Pow => Val::Num(x.powf(y)),
                Op::Lt => Val::Bool(x < y),
                Op::Le => Val::Bool(x <= y),
                Op::Gt => Val::Bool(x > y),
                Op::Ge => Val::Bool(x >= y),
                Op::Eq | Op::Ne | Op::And | Op::Or | Op::Coalesce => {
                    unreachable!("handled above")
                }
            }
        }
        Node::Call(f, args) => {
            let vals = args
                .iter()
                .map(|a| eval(a, var).and_then(num))
                .collect::<Result<Vec<f64>, _>>()?;
            Val::Num(match f {
                Func::Min => vals.iter().copied().fold(f64::INFINITY, f64::min),
                Func::Max => vals.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                Func::Abs => vals[0].abs(),
                Func::Ceil => vals[0].ceil(),
                Func::Floor => vals[0].floor(),
                Func::Round => vals[0].round(),
                Func::Int => vals[0].trunc(),
                Func::Float => vals[0],
            })
        }
    })
}

struct Parser<'a> {
    text: &'a str,
    chars: Vec<(usize, char)>,
    i: usize,
}

impl Parser<'_> {
    fn error(&self, expected: &str) -> FormulaError {
        let found = self
            .chars
            .get(self.i)
            .map_or("the end".to_owned(), |(_, c)| format!("{c:?}"));
        FormulaError {
            text: self.text.to_owned(),
            at: self.i + 1,
            message: format!("expected {expected}, found {found}"),
        }
    }

    fn skip_ws(&mut self) {
        while self
            .chars
            .get(self.i)
            .is_some_and(|(_, c)| c.is_whitespace())
        {
            self.i += 1;
        }
    }

    fn rest(&self) -> &str {
        self.chars
            .get(self.i)
            .map_or("", |&(at, _)| &self.text[at..])
    }

    /// Consumes `tok` if it comes next (a word only when not followed by a name character).
    fn eat(&mut self, tok: &str) -> bool {
        self.skip_ws();
        let rest = self.rest();
        if !rest.starts_with(tok) {
            return false;
        }
        let word = tok.chars().all(|c| c.is_ascii_alphabetic());
        if word
            && rest[tok.len()..]
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            return false;
        }
        self.i += tok.chars().count();
        true
    }

    fn ternary(&mut self) -> Result<Node, FormulaError> {
        let c = self.binary(0)?;
        if self.peek_is("??") || !self.eat("?") {
            return Ok(c);
        }
        let a = self.ternary()?;
        if !self.eat(":") {
            return Err(self.error("':' of the ternary"));
        }
        let b = self.ternary()?;
        Ok(Node::If(Box::new(c), Box::new(a), Box::new(b)))
    }

    fn peek_is(&mut self, tok: &str) -> bool {
        self.skip_ws();
        self.rest().starts_with(tok)
    }

    /// Binary operators by precedence, lowest first (expr's order).
    fn binary(&mut self, level: usize) -> Result<Node, FormulaError> {
        const LEVELS: &[&[(&str, Op)]] = &[
            &[("??", Op::Coalesce)],
            &[("||", Op::Or), ("or", Op::Or)],
            &[("&&", Op::And), ("and", Op::And)],
            &[("==", Op::Eq), ("!=", Op::Ne)],
            &[("<=", Op::Le), (">=", Op::Ge), ("<", Op::Lt), (">", Op::Gt)],
            &[("+", Op::Add), ("-", Op::Sub)],
            &[("*", Op::Mul), ("/", Op::Div), ("%", Op::Rem)],
        ];
        if level == LEVELS.len() {
            return self.power();
        }
        let mut left = self.binary(level + 1)?;
        'more: loop {
            for &(tok, op) in LEVELS[level] {
                if (tok == "*" && self.peek_is("**")) || (tok == "?" && self.peek_is("??")) {
                    continue;
                }
                if self.eat(tok) {
                    let right = self.binary(level + 1)?;
                    left = Node::Bin(op, Box::new(left), Box::new(right));
                    continue 'more;
                }
            }
            return Ok(left);
        }
    }

    fn power(&mut self) -> Result<Node, FormulaError> {
        let base = self.unary()?;
        if self.eat("**") || self.eat("^") {
            // Right-associative.
            let exp = self.power()?;
            return Ok(Node::Bin(Op::Pow, Box::new(base), Box::new(exp)));
        }
        Ok(base)
    }

    fn unary(&mut self) -> Result<Node, FormulaError> {
        if self.eat("-") {
            return Ok(Node::Neg(Box::new(self.unary()?)));
        }
        if self.eat("+") {
            return self.unary();
        }
        if self.eat("!") || self.eat("not") {
            return Ok(Node::Not(Box::new(self.unary()?)));
        }
        self.atom()
    }

    fn atom(&mut self) -> Result<Node, FormulaError> {
        self.skip_ws();
        if self.eat("(") {
            let e = self.ternary()?;
            if !self.eat(")") {
                return Err(self.error("')'"));
            }
            return Ok(e);
        }
        let start = self.i;
        let Some(&(_, c)) = self.chars.get(self.i) else {
            return Err(self.error("a number, a trigger name or '('"));
        };
        if c.is_ascii_digit() || c == '.' {
            while self
                .chars
                .get(self.i)
                .is_some_and(|(_, c)| c.is_ascii_digit() || *c == '.' || *c == '_')
            {
                self.i += 1;
            }
            // An exponent: 1e3, 2.5E-2.
            if self
                .chars
                .get(self.i)
                .is_some_and(|(_, c)| *c == 'e' || *c == 'E')
            {
                let save = self.i;
                self.i += 1;
                if self
                    .chars
                    .get(self.i)
                    .is_some_and(|(_, c)| *c == '+' || *c == '-')
                {
                    self.i += 1;
                }
                if self
                    .chars
                    .get(self.i)
                    .is_some_and(|(_, c)| c.is_ascii_digit())
                {
                    while self
                        .chars
                        .get(self.i)
                        .is_some_and(|(_, c)| c.is_ascii_digit())
                    {
                        self.i += 1;
                    }
                } else {
                    self.i = save;
                }
            }
            let s: String = self.chars[start..self.i]
                .iter()
                .map(|(_, c)| *c)
                .filter(|c| *c != '_')
                .collect();
            return s.parse().map(Node::Num).map_err(|_| {
                self.i = start;
                self.error("a number")
            });
        }
        if c.is_ascii_alphabetic() || c == '_' {
            while self
                .chars
                .get(self.i)
                .is_some_and(|(_, c)| c.is_ascii_alphanumeric() || *c == '_')
            {
                self.i += 1;
            }
            let word: String = self.chars[start..self.i].iter().map(|(_, c)| *c).collect();
            match word.as_str() {
                "nil" => return Ok(Node::Nil),
                "true" => return Ok(Node::Bool(true)),
                "false" => return Ok(Node::Bool(false)),
                _ => {}
            }
            if self.eat("(") {
                let (f, arity) = match word.as_str() {
                    "min" => (Func::Min, None),
                    "max" => (Func::Max, None),
                    "abs" => (Func::Abs, Some(1)),
                    "ceil" => (Func::Ceil, Some(1)),
                    "floor" => (Func::Floor, Some(1)),
                    "round" => (Func::Round, Some(1)),
                    "int" => (Func::Int, Some(1)),
                    "float" => (Func::Float, Some(1)),
                    _ => {
                        self.i = start;
                        return Err(self.error(
                            "a function the rehearsal knows (min, max, abs, ceil, floor, round, int, float)",
                        ));
                    }
                };
                let mut args = Vec::new();
                if !self.eat(")") {
                    loop {
                        args.push(self.ternary()?);
                        if self.eat(")") {
                            break;
                        }
                        if !self.eat(",") {
                            return Err(self.error("',' or ')'"));
                        }
                    }
                }
                let ok = match arity {
                    Some(n) => args.len() == n,
                    None => !args.is_empty(),
                };
                if !ok {
                    self.i = start;
                    return Err(self.error(&format!(
                        "{word}() with {} argument(s)",
                        arity.map_or("at least 1".to_owned(), |n| n.to_string())
                    )));
                }
                return Ok(Node::Call(f, args));
            }
            return Ok(Node::Var(word));
        }
        Err(self.error("a number, a trigger name or '('"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(f: &str, vars: &[(&str, f64)]) -> Result<f64, EvalError> {
        let f = Formula::parse(f).unwrap_or_else(|e| panic!("{e}"));
        f.eval(&|n| vars.iter().find(|v| v.0 == n).map(|v| v.1))
    }

    #[test]
    fn arithmetic_follows_expr_precedence() {
        assert_eq!(run("1 + 2 * 3", &[]), Ok(7.0));
        assert_eq!(run("(1 + 2) * 3", &[]), Ok(9.0));
        assert_eq!(run("2 ** 3 ** 2", &[]), Ok(512.0));
        assert_eq!(run("-2 ^ 2", &[]), Ok(4.0));
        assert_eq!(run("10 % 4 + 1e1", &[]), Ok(12.0));
        assert_eq!(run("a / b", &[("a", 3.0), ("b", 4.0)]), Ok(0.75));
    }

    #[test]
    fn conditions_ternaries_and_functions() {
        let f = "queue > 10 && p95 >= 2 ? max(queue, 20) : min(queue, 1)";
        assert_eq!(run(f, &[("queue", 12.0), ("p95", 2.0)]), Ok(20.0));
        assert_eq!(run(f, &[("queue", 12.0), ("p95", 1.0)]), Ok(1.0));
        assert_eq!(
            run("ceil(x) + floor(x) + round(x) + abs(-x)", &[("x", 1.5)]),
            Ok(6.5)
        );
        assert_eq!(run("not (1 > 2) ? 1 : 0", &[]), Ok(1.0));
        assert_eq!(run("a == 1 or a != 1 ? 3 : 4", &[("a", 1.0)]), Ok(3.0));
    }

    #[test]
    fn a_failed_trigger_is_nil_and_coalesces() {
        assert_eq!(run("queue ?? 8", &[]), Ok(8.0));
        assert_eq!(run("queue ?? other ?? 8", &[("other", 2.0)]), Ok(2.0));
        assert_eq!(run("queue + 1", &[]), Err(EvalError::Nil));
        assert_eq!(run("(queue ?? 0) / 5", &[("queue", 10.0)]), Ok(2.0));
        assert!(matches!(run("1 < 2", &[]), Err(EvalError::Type(_))));
    }

    #[test]
    fn names_are_listed_and_bad_formulas_say_where() {
        let f = Formula::parse("a + b * a ?? c").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(f.names(), ["a", "b", "c"]);
        for (bad, at) in [
            ("1 +", 4),
            ("foo(1)", 1),
            ("(1 + 2", 7),
            ("a b", 3),
            ("1 ? 2", 6),
            ("max()", 1),
        ] {
            let e = Formula::parse(bad).expect_err(bad);
            assert_eq!(e.at, at, "{bad}: {e}");
        }
    }
}

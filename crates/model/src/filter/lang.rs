//! HBase's filter language (the strings after `FILTER =>`), the subset Cellar evaluates:
//!
//! ```text
//! expr   := and ( OR and )*            -- AND binds tighter than OR
//! and    := unary ( AND unary )*
//! unary  := SKIP unary | WHILE unary | '(' expr ')' | Name '(' [arg (',' arg)*] ')'
//! arg    := 'quoted' ('' is a quote) | integer | true | false | < <= = != > >=
//! ```
//!
//! Comparator arguments are `'binary:..'`, `'binaryprefix:..'`, `'substring:..'` or
//! `'regexstring:..'`. Filter strings are bytes: the shell string they came from may hold
//! any byte.

use crate::{Comparator, CompareOp, Filter, ListOp};
use bytes::Bytes;

/// Parses a filter string into a filter tree.
pub fn parse_filter(src: &[u8]) -> Result<Filter, String> {
    let tokens = lex(src)?;
    let mut p = Parser { tokens, pos: 0 };
    let filter = p.or_expr()?;
    if p.peek().tok != Tok::End {
        return Err(p.error("AND, OR or end of filter"));
    }
    Ok(filter)
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Name(String),
    Str(Vec<u8>),
    Int(i64),
    Op(CompareOp),
    LParen,
    RParen,
    Comma,
    End,
}

#[derive(Debug, Clone)]
struct Token {
    tok: Tok,
    /// 1-based byte position in the filter string.
    position: usize,
    text: String,
}

fn syntax(position: usize, expected: &str, found: &str) -> String {
    format!("filter syntax error at position {position}: expected {expected}, found {found}")
}

fn lex(src: &[u8]) -> Result<Vec<Token>, String> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < src.len() {
        let start = i;
        let c = src[i];
        let tok = match c {
            b' ' | b'\t' | b'\n' | b'\r' => {
                i += 1;
                continue;
            }
            b'(' => {
                i += 1;
                Tok::LParen
            }
            b')' => {
                i += 1;
                Tok::RParen
            }
            b',' => {
                i += 1;
                Tok::Comma
            }
            b'<' | b'>' | b'=' | b'!' => {
                let two = src.get(i + 1) == Some(&b'=');
                let op = match (c, two) {
                    (b'<', false) => CompareOp::Less,
                    (b'<', true) => CompareOp::LessOrEqual,
                    (b'>', false) => CompareOp::Greater,
                    (b'>', true) => CompareOp::GreaterOrEqual,
                    (b'=', _) => CompareOp::Equal,
                    (b'!', true) => CompareOp::NotEqual,
                    _ => return Err(syntax(i + 1, "a comparison operator", "'!'")),
                };
                i += if two && c != b'=' { 2 } else { 1 };
                Tok::Op(op)
            }
            b'\'' => {
                let mut bytes = Vec::new();
                i += 1;
                loop {
                    match src.get(i) {
                        None => {
                            return Err(syntax(
                                start + 1,
                                "a closing ' for the string starting here",
                                "end of filter",
                            ))
                        }
                        Some(b'\'') if src.get(i + 1) == Some(&b'\'') => {
                            bytes.push(b'\'');
                            i += 2;
                        }
                        Some(b'\'') => {
                            i += 1;
                            break;
                        }
                        Some(&b) => {
                            bytes.push(b);
                            i += 1;
                        }
                    }
                }
                Tok::Str(bytes)
            }
            b'-' | b'0'..=b'9' => {
                let mut j = i + 1;
                while j < src.len() && src[j].is_ascii_digit() {
                    j += 1;
                }
                let text = String::from_utf8_lossy(&src[i..j]).into_owned();
                let n = text
                    .parse::<i64>()
                    .map_err(|_| syntax(i + 1, "a number", &format!("'{text}'")))?;
                i = j;
                Tok::Int(n)
            }
            c if c.is_ascii_alphabetic() => {
                let mut j = i + 1;
                while j < src.len() && (src[j].is_ascii_alphanumeric() || src[j] == b'_') {
                    j += 1;
                }
                let word = String::from_utf8_lossy(&src[i..j]).into_owned();
                i = j;
                Tok::Name(word)
            }
            _ => {
                let found = format!("'{}'", String::from_utf8_lossy(&src[i..i + 1]));
                return Err(syntax(i + 1, "a filter, operator or argument", &found));
            }
        };
        out.push(Token {
            tok,
            position: start + 1,
            text: String::from_utf8_lossy(&src[start..i]).into_owned(),
        });
    }
    out.push(Token {
        tok: Tok::End,
        position: src.len() + 1,
        text: String::new(),
    });
    Ok(out)
}

/// One argument of a filter call.
#[derive(Debug, Clone, PartialEq)]
enum Arg {
    Str(Vec<u8>),
    Int(i64),
    Bool(bool),
    Op(CompareOp),
}

struct Parser {
    tokens: Vec<Token>,
    pos: usize,
}

impl Parser {
    fn peek(&self) -> &Token {
        &self.tokens[self.pos.min(self.tokens.len() - 1)]
    }

    fn bump(&mut self) -> Token {
        let t = self.peek().clone();
        if self.pos < self.tokens.len() - 1 {
            self.pos += 1;
        }
        t
    }

    fn error(&self, expected: &str) -> String {
        let t = self.peek();
        let found = if t.tok == Tok::End {
            "end of filter".to_string()
        } else {
            format!("'{}'", t.text)
        };
        syntax(t.position, expected, &found)
    }

    fn keyword(&self, word: &str) -> bool {
        matches!(&self.peek().tok, Tok::Name(n) if n.eq_ignore_ascii_case(word))
    }

    fn or_expr(&mut self) -> Result<Filter, String> {
        let mut members = vec![self.and_expr()?];
        while self.keyword("OR") {
            self.bump();
            members.push(self.and_expr()?);
        }
        Ok(combine(ListOp::MustPassOne, members))
    }

    fn and_expr(&mut self) -> Result<Filter, String> {
        let mut members = vec![self.unary()?];
        while self.keyword("AND") {
            self.bump();
            members.push(self.unary()?);
        }
        Ok(combine(ListOp::MustPassAll, members))
    }

    fn unary(&mut self) -> Result<Filter, String> {
        let t = self.peek().clone();
        match t.tok {
            Tok::LParen => {
                self.bump();
                let f = self.or_expr()?;
                if self.peek().tok != Tok::RParen {
                    return Err(self.error("AND, OR or ')'"));
                }
                self.bump();
                Ok(f)
            }
            Tok::Name(name) if name.eq_ignore_ascii_case("SKIP") => {
                self.bump();
                Ok(Filter::Skip(Box::new(self.unary()?)))
            }
            Tok::Name(name) if name.eq_ignore_ascii_case("WHILE") => {
                self.bump();
                Ok(Filter::WhileMatch(Box::new(self.unary()?)))
            }
            Tok::Name(name) => {
                self.bump();
                if self.peek().tok != Tok::LParen {
                    return Err(self.error(&format!("'(' after {name}")));
                }
                self.bump();
                let mut args = Vec::new();
                if self.peek().tok != Tok::RParen {
                    loop {
                        args.push(self.arg()?);
                        match self.peek().tok {
                            Tok::Comma => {
                                self.bump();
                            }
                            Tok::RParen => break,
                            _ => return Err(self.error("',' or ')'")),
                        }
                    }
                }
                self.bump();
                build(&name, args).map_err(|e| format!("{name} at position {}: {e}", t.position))
            }
            _ => Err(self.error("a filter name or '('")),
        }
    }

    fn arg(&mut self) -> Result<Arg, String> {
        let t = self.peek().clone();
        let arg = match t.tok {
            Tok::Str(s) => Arg::Str(s),
            Tok::Int(n) => Arg::Int(n),
            Tok::Op(op) => Arg::Op(op),
            Tok::Name(ref w) if w.eq_ignore_ascii_case("true") => Arg::Bool(true),
            Tok::Name(ref w) if w.eq_ignore_ascii_case("false") => Arg::Bool(false),
            _ => {
                return Err(self
                    .error("an argument ('quoted', number, true, false or a comparison operator)"))
            }
        };
        self.bump();
        Ok(arg)
    }
}

fn combine(op: ListOp, mut members: Vec<Filter>) -> Filter {
    if members.len() == 1 {
        if let Some(f) = members.pop() {
            return f;
        }
    }
    Filter::List(op, members)
}

/// The usage of each supported filter, for error messages.
const USAGES: &[(&str, &str)] = &[
    ("PrefixFilter", "PrefixFilter('row prefix')"),
    ("ColumnPrefixFilter", "ColumnPrefixFilter('qualifier prefix')"),
    ("RowFilter", "RowFilter(op, 'comparator:value')"),
    ("FamilyFilter", "FamilyFilter(op, 'comparator:value')"),
    ("QualifierFilter", "QualifierFilter(op, 'comparator:value')"),
    ("ValueFilter", "ValueFilter(op, 'comparator:value')"),
    (
        "SingleColumnValueFilter",
        "SingleColumnValueFilter('family', 'qualifier', op, 'comparator:value'[, filterIfMissing, latestVersionOnly])",
    ),
    ("KeyOnlyFilter", "KeyOnlyFilter([lenAsValue])"),
    ("FirstKeyOnlyFilter", "FirstKeyOnlyFilter()"),
    ("PageFilter", "PageFilter(rows)"),
    ("ColumnPaginationFilter", "ColumnPaginationFilter(limit, offset)"),
    ("TimestampsFilter", "TimestampsFilter(ts, ...)"),
    ("ColumnCountGetFilter", "ColumnCountGetFilter(columns)"),
    (
        "ColumnRangeFilter",
        "ColumnRangeFilter('min', minInclusive, 'max', maxInclusive)",
    ),
];

fn build(name: &str, args: Vec<Arg>) -> Result<Filter, String> {
    let Some((_, usage)) = USAGES.iter().find(|(n, _)| *n == name) else {
        let known: Vec<&str> = USAGES.iter().map(|(n, _)| *n).collect();
        return Err(format!("unknown filter (supported: {})", known.join(", ")));
    };
    let bad = || format!("wrong arguments, usage: {usage}");
    let s = |a: &Arg| match a {
        Arg::Str(s) => Ok(Bytes::copy_from_slice(s)),
        _ => Err(bad()),
    };
    let op = |a: &Arg| match a {
        Arg::Op(op) => Ok(*op),
        _ => Err(bad()),
    };
    let flag = |a: &Arg| match a {
        Arg::Bool(b) => Ok(*b),
        _ => Err(bad()),
    };
    let cmp = |a: &Arg| match a {
        Arg::Str(s) => comparator(s),
        _ => Err(bad()),
    };
    Ok(match (name, args.as_slice()) {
        ("PrefixFilter", [p]) => Filter::Prefix(s(p)?),
        ("ColumnPrefixFilter", [p]) => Filter::ColumnPrefix(s(p)?),
        ("RowFilter", [o, c]) => Filter::Row(op(o)?, cmp(c)?),
        ("FamilyFilter", [o, c]) => Filter::Family(op(o)?, cmp(c)?),
        ("QualifierFilter", [o, c]) => Filter::Qualifier(op(o)?, cmp(c)?),
        ("ValueFilter", [o, c]) => Filter::Value(op(o)?, cmp(c)?),
        ("SingleColumnValueFilter", [f, q, o, c, rest @ ..]) => {
            let (filter_if_missing, latest_version_only) = match rest {
                [] => (false, true),
                [m, l] => (flag(m)?, flag(l)?),
                _ => return Err(bad()),
            };
            Filter::SingleColumnValue {
                family: s(f)?,
                qualifier: s(q)?,
                op: op(o)?,
                comparator: cmp(c)?,
                filter_if_missing,
                latest_version_only,
            }
        }
        ("KeyOnlyFilter", []) => Filter::KeyOnly {
            len_as_value: false,
        },
        ("KeyOnlyFilter", [l]) => Filter::KeyOnly {
            len_as_value: flag(l)?,
        },
        ("FirstKeyOnlyFilter", []) => Filter::FirstKeyOnly,
        ("PageFilter", [Arg::Int(n)]) => {
            Filter::Page(u64::try_from(*n).map_err(|_| "the page size must not be negative")?)
        }
        ("ColumnPaginationFilter", [Arg::Int(limit), Arg::Int(offset)]) => {
            let count = |n: &i64| u32::try_from(*n).map_err(|_| bad());
            Filter::ColumnPage {
                limit: count(limit)?,
                offset: count(offset)?,
                column_offset: None,
            }
        }
        ("ColumnCountGetFilter", [Arg::Int(n)]) => {
            Filter::ColumnCount(u32::try_from(*n).map_err(|_| bad())?)
        }
        ("TimestampsFilter", timestamps) => Filter::Timestamps(
            timestamps
                .iter()
                .map(|a| match a {
                    Arg::Int(ts) => u64::try_from(*ts)
                        .map_err(|_| format!("timestamp {ts} is negative, usage: {usage}")),
                    _ => Err(bad()),
                })
                .collect::<Result<_, _>>()?,
        ),
        ("ColumnRangeFilter", [min, mi, max, ma]) => {
            let bound = |b: Bytes| if b.is_empty() { None } else { Some(b) };
            Filter::ColumnRange {
                min: bound(s(min)?),
                min_inclusive: flag(mi)?,
                max: bound(s(max)?),
                max_inclusive: flag(ma)?,
            }
        }
        _ => return Err(bad()),
    })
}

/// `'binary:abc'` and friends.
fn comparator(spec: &[u8]) -> Result<Comparator, String> {
    let colon = spec.iter().position(|&b| b == b':').ok_or_else(|| {
        format!(
            "comparator '{}' needs a type: binary:, binaryprefix:, substring: or regexstring:",
            String::from_utf8_lossy(spec)
        )
    })?;
    let kind = String::from_utf8_lossy(&spec[..colon]).to_ascii_lowercase();
    let operand = &spec[colon + 1..];
    let text = || String::from_utf8_lossy(operand).into_owned();
    Ok(match kind.as_str() {
        "binary" => Comparator::Binary(Bytes::copy_from_slice(operand)),
        "binaryprefix" => Comparator::BinaryPrefix(Bytes::copy_from_slice(operand)),
        "substring" => Comparator::Substring(text()),
        "regexstring" => Comparator::Regex(text()),
        other => {
            return Err(format!(
                "unknown comparator type '{other}' (expected binary, binaryprefix, substring or regexstring)"
            ))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Filter {
        parse_filter(s.as_bytes()).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    #[test]
    fn single_filters() {
        assert_eq!(p("PrefixFilter('r')"), Filter::Prefix(b("r")));
        assert_eq!(
            p(" ColumnPrefixFilter ( 'q' ) "),
            Filter::ColumnPrefix(b("q"))
        );
        assert_eq!(
            p("QualifierFilter(=, 'binary:q1')"),
            Filter::Qualifier(CompareOp::Equal, Comparator::Binary(b("q1")))
        );
        assert_eq!(
            p("ValueFilter(!=, 'substring:x')"),
            Filter::Value(CompareOp::NotEqual, Comparator::Substring("x".into()))
        );
        assert_eq!(
            p("RowFilter(>=, 'binaryprefix:r')"),
            Filter::Row(CompareOp::GreaterOrEqual, Comparator::BinaryPrefix(b("r")))
        );
        assert_eq!(
            p("FamilyFilter(<, 'regexstring:^c.*')"),
            Filter::Family(CompareOp::Less, Comparator::Regex("^c.*".into()))
        );
        assert_eq!(
            p("RowFilter(<=,'binary:a:b')"),
            Filter::Row(CompareOp::LessOrEqual, Comparator::Binary(b("a:b")))
        );
        assert_eq!(
            p("RowFilter(>,'binary:it''s')"),
            Filter::Row(CompareOp::Greater, Comparator::Binary(b("it's")))
        );
        assert_eq!(
            p("KeyOnlyFilter()"),
            Filter::KeyOnly {
                len_as_value: false
            }
        );
        assert_eq!(
            p("KeyOnlyFilter(true)"),
            Filter::KeyOnly { len_as_value: true }
        );
        assert_eq!(p("FirstKeyOnlyFilter()"), Filter::FirstKeyOnly);
        assert_eq!(p("PageFilter(10)"), Filter::Page(10));
        assert_eq!(
            p("ColumnRangeFilter('a', true, 'c', false)"),
            Filter::ColumnRange {
                min: Some(b("a")),
                min_inclusive: true,
                max: Some(b("c")),
                max_inclusive: false
            }
        );
        assert_eq!(
            p("ColumnRangeFilter('', false, 'c', TRUE)"),
            Filter::ColumnRange {
                min: None,
                min_inclusive: false,
                max: Some(b("c")),
                max_inclusive: true
            }
        );
    }

    #[test]
    fn skip_wraps_the_filter_after_it_and_column_pages_take_limit_and_offset() {
        assert_eq!(
            p("SKIP ValueFilter(!=, 'binary:0') AND ColumnPaginationFilter(2, 1)"),
            Filter::List(
                ListOp::MustPassAll,
                vec![
                    Filter::Skip(Box::new(Filter::Value(
                        CompareOp::NotEqual,
                        Comparator::Binary(b("0"))
                    ))),
                    Filter::ColumnPage {
                        limit: 2,
                        offset: 1,
                        column_offset: None
                    },
                ]
            )
        );
        assert_eq!(
            p("WHILE RowFilter(<, 'binary:m')"),
            Filter::WhileMatch(Box::new(Filter::Row(
                CompareOp::Less,
                Comparator::Binary(b("m"))
            )))
        );
        assert_eq!(
            p("skip (PrefixFilter('a') OR PrefixFilter('b'))"),
            Filter::Skip(Box::new(Filter::List(
                ListOp::MustPassOne,
                vec![Filter::Prefix(b("a")), Filter::Prefix(b("b"))]
            )))
        );
    }

    #[test]
    fn timestamps_filter_takes_any_number_of_timestamps() {
        assert_eq!(
            p("TimestampsFilter(5, 10)"),
            Filter::Timestamps(vec![5, 10])
        );
        assert_eq!(p("TimestampsFilter()"), Filter::Timestamps(vec![]));
        let err = parse_filter(b"TimestampsFilter(5, -1)").expect_err("negative");
        assert!(err.contains("timestamp -1 is negative"), "{err}");
        let err = parse_filter(b"TimestampsFilter('5')").expect_err("not a number");
        assert!(err.contains("usage: TimestampsFilter(ts, ...)"), "{err}");
        assert_eq!(p("ColumnCountGetFilter(3)"), Filter::ColumnCount(3));
        let err = parse_filter(b"ColumnCountGetFilter(-3)").expect_err("negative");
        assert!(
            err.contains("usage: ColumnCountGetFilter(columns)"),
            "{err}"
        );
    }

    #[test]
    fn single_column_value_defaults_and_flags() {
        let f = p("SingleColumnValueFilter('cf','q', =, 'binary:v')");
        assert_eq!(
            f,
            Filter::SingleColumnValue {
                family: b("cf"),
                qualifier: b("q"),
                op: CompareOp::Equal,
                comparator: Comparator::Binary(b("v")),
                filter_if_missing: false,
                latest_version_only: true,
            }
        );
        let f = p("SingleColumnValueFilter('cf','q', =, 'binary:v', true, false)");
        let Filter::SingleColumnValue {
            filter_if_missing,
            latest_version_only,
            ..
        } = f
        else {
            panic!("scvf expected")
        };
        assert!(filter_if_missing && !latest_version_only);
    }

    #[test]
    fn and_binds_tighter_than_or_and_parentheses_group() {
        let f = p("PrefixFilter('a') OR PrefixFilter('b') AND KeyOnlyFilter()");
        assert_eq!(
            f,
            Filter::List(
                ListOp::MustPassOne,
                vec![
                    Filter::Prefix(b("a")),
                    Filter::List(
                        ListOp::MustPassAll,
                        vec![
                            Filter::Prefix(b("b")),
                            Filter::KeyOnly {
                                len_as_value: false
                            }
                        ]
                    )
                ]
            )
        );
        let f = p("(PrefixFilter('a') OR PrefixFilter('b')) AND KeyOnlyFilter() and PageFilter(1)");
        assert_eq!(
            f,
            Filter::List(
                ListOp::MustPassAll,
                vec![
                    Filter::List(
                        ListOp::MustPassOne,
                        vec![Filter::Prefix(b("a")), Filter::Prefix(b("b"))]
                    ),
                    Filter::KeyOnly {
                        len_as_value: false
                    },
                    Filter::Page(1),
                ]
            )
        );
    }

    #[test]
    fn binary_bytes_pass_through() {
        let f = parse_filter(b"PrefixFilter('\x00\xff')").expect("bytes");
        assert_eq!(f, Filter::Prefix(Bytes::from_static(b"\x00\xff")));
    }

    #[test]
    fn errors_name_position_and_expectation() {
        let err = parse_filter(b"PrefixFilter('a') XOR PageFilter(1)").expect_err("xor");
        assert_eq!(
            err,
            "filter syntax error at position 19: expected AND, OR or end of filter, found 'XOR'"
        );
        let err = parse_filter(b"PrefixFilter 'a'").expect_err("no paren");
        assert!(err.contains("expected '(' after PrefixFilter"), "{err}");
        let err = parse_filter(b"PrefixFilter('a'").expect_err("unclosed");
        assert!(err.contains("found end of filter"), "{err}");
        let err = parse_filter(b"PrefixFilter('a)").expect_err("unterminated");
        assert!(err.contains("closing '"), "{err}");
        let err = parse_filter(b"NoSuchFilter()").expect_err("unknown");
        assert!(
            err.contains("NoSuchFilter") && err.contains("unknown filter"),
            "{err}"
        );
        let err = parse_filter(b"PageFilter('x')").expect_err("bad arg");
        assert!(err.contains("usage: PageFilter(rows)"), "{err}");
        let err = parse_filter(b"ValueFilter(=, 'nope')").expect_err("no type");
        assert!(err.contains("needs a type"), "{err}");
        let err = parse_filter(b"ValueFilter(=, 'long:1')").expect_err("bad type");
        assert!(err.contains("'long'"), "{err}");
        let err = parse_filter(b"WHILE AND PrefixFilter('a')").expect_err("while what");
        assert!(err.contains("'(' after AND"), "{err}");
        let err = parse_filter(b"ColumnPaginationFilter(-1, 0)").expect_err("negative");
        assert!(
            err.contains("ColumnPaginationFilter(limit, offset)"),
            "{err}"
        );
        let err = parse_filter(b"ValueFilter(! 'x')").expect_err("bang");
        assert!(err.contains("position 13"), "{err}");
        assert!(parse_filter(b"")
            .expect_err("empty")
            .contains("end of filter"));
    }
}

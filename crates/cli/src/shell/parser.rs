//! The shell's input language: HBase shell commands written as a Ruby-literal subset.
//!
//! A script is commands separated by `;` or newlines. A command is a name followed by
//! comma-separated arguments (optionally in parentheses). Values are strings in single quotes
//! (Ruby rules: only `\\` and `\'` are escapes) or double quotes (`\x00`, `\n`, `\t`, `\r`,
//! `\0`, `\e`, `\\`, `\"`), integers, `true`/`false`/`nil`, bare constants (`NAME`),
//! `[...]` arrays and `{KEY => value, ...}` hashes; trailing `KEY => value` pairs without
//! braces form a hash, as in Ruby. `#` starts a comment. Strings are bytes: `"\xff"` is one
//! byte.

use std::fmt;

/// A parsed literal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    Str(Vec<u8>),
    Int(i64),
    Bool(bool),
    Nil,
    /// A bare word such as `NAME` or `FOREVER`.
    Const(String),
    Array(Vec<Value>),
    Hash(Vec<(Value, Value)>),
}

impl Value {
    /// How the value reads in an error message.
    pub fn describe(&self) -> String {
        match self {
            Value::Str(s) => format!("'{}'", String::from_utf8_lossy(s)),
            Value::Int(n) => n.to_string(),
            Value::Bool(b) => b.to_string(),
            Value::Nil => "nil".into(),
            Value::Const(c) => c.clone(),
            Value::Array(_) => "an array".into(),
            Value::Hash(_) => "a hash".into(),
        }
    }
}

/// One command of a script.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    pub name: String,
    pub args: Vec<Value>,
    /// Where the command starts (1-based, in characters of the script).
    pub column: usize,
}

/// A syntax error: where, what was expected and what was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntaxError {
    pub column: usize,
    pub expected: String,
    pub found: String,
    /// The input ended inside a string, bracket or argument list: more lines may complete it.
    pub incomplete: bool,
}

impl fmt::Display for SyntaxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "syntax error at column {}: expected {}, found {}",
            self.column, self.expected, self.found
        )
    }
}

/// Parses a whole script.
pub fn parse_script(src: &str) -> Result<Vec<Command>, SyntaxError> {
    let tokens = lex(src)?;
    Parser {
        tokens,
        pos: 0,
        depth: 0,
    }
    .script()
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Ident(String),
    Str(Vec<u8>),
    Int(i64),
    Comma,
    Semi,
    Newline,
    Arrow,
    LBrace,
    RBrace,
    LBracket,
    RBracket,
    LParen,
    RParen,
    End,
}

#[derive(Debug, Clone)]
struct Token {
    tok: Tok,
    column: usize,
    /// The source text, for error messages.
    text: String,
}

/// The token a one-character punctuation mark stands for.
fn punctuation(c: char) -> Option<Tok> {
    Some(match c {
        '\n' => Tok::Newline,
        ',' => Tok::Comma,
        ';' => Tok::Semi,
        '{' => Tok::LBrace,
        '}' => Tok::RBrace,
        '[' => Tok::LBracket,
        ']' => Tok::RBracket,
        '(' => Tok::LParen,
        ')' => Tok::RParen,
        _ => return None,
    })
}

fn lex(src: &str) -> Result<Vec<Token>, SyntaxError> {
    let chars: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let start = i;
        let column = i + 1;
        let tok = if let Some(t) = punctuation(c) {
            i += 1;
            t
        } else {
            match c {
                ' ' | '\t' | '\r' => {
                    i += 1;
                    continue;
                }
                '#' => {
                    while i < chars.len() && chars[i] != '\n' {
                        i += 1;
                    }
                    continue;
                }
                '=' if chars.get(i + 1) == Some(&'>') => {
                    i += 2;
                    Tok::Arrow
                }
                '\'' | '"' => {
                    let (bytes, next) = lex_string(&chars, i)?;
                    i = next;
                    Tok::Str(bytes)
                }
                '-' | '0'..='9' => {
                    let mut j = i + 1;
                    while j < chars.len() && (chars[j].is_ascii_digit() || chars[j] == '_') {
                        j += 1;
                    }
                    let text: String = chars[i..j].iter().filter(|&&c| c != '_').collect();
                    let n = text.parse::<i64>().map_err(|_| SyntaxError {
                        column,
                        expected: "a number".into(),
                        found: format!("'{}'", chars[i..j].iter().collect::<String>()),
                        incomplete: false,
                    })?;
                    i = j;
                    Tok::Int(n)
                }
                c if c.is_ascii_alphabetic() || c == '_' => {
                    let mut j = i + 1;
                    while j < chars.len()
                        && (chars[j].is_ascii_alphanumeric() || chars[j] == '_' || chars[j] == '?')
                    {
                        j += 1;
                    }
                    let word: String = chars[i..j].iter().collect();
                    i = j;
                    Tok::Ident(word)
                }
                other => {
                    return Err(SyntaxError {
                        column,
                        expected: "a command, value or punctuation".into(),
                        found: format!("'{other}'"),
                        incomplete: false,
                    })
                }
            }
        };
        out.push(Token {
            tok,
            column,
            text: chars[start..i].iter().collect(),
        });
    }
    out.push(Token {
        tok: Tok::End,
        column: chars.len() + 1,
        text: String::new(),
    });
    Ok(out)
}

/// Reads a quoted string starting at `chars[start]`; returns its bytes and the index after it.
fn lex_string(chars: &[char], start: usize) -> Result<(Vec<u8>, usize), SyntaxError> {
    let quote = chars[start];
    let mut bytes = Vec::new();
    let mut i = start + 1;
    let push_char = |bytes: &mut Vec<u8>, c: char| {
        let mut buf = [0u8; 4];
        bytes.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
    };
    loop {
        let Some(&c) = chars.get(i) else {
            return Err(SyntaxError {
                column: start + 1,
                expected: format!("a closing {quote} for the string starting here"),
                found: "end of input".into(),
                incomplete: true,
            });
        };
        i += 1;
        if c == quote {
            return Ok((bytes, i));
        }
        if c != '\\' {
            push_char(&mut bytes, c);
            continue;
        }
        let Some(&e) = chars.get(i) else {
            continue; // reported as unterminated on the next turn
        };
        i += 1;
        if quote == '\'' {
            // Ruby single quotes: only \\ and \' are escapes.
            if e != '\\' && e != '\'' {
                bytes.push(b'\\');
            }
            push_char(&mut bytes, e);
            continue;
        }
        match e {
            'n' => bytes.push(b'\n'),
            't' => bytes.push(b'\t'),
            'r' => bytes.push(b'\r'),
            '0' => bytes.push(0),
            'e' => bytes.push(0x1b),
            'a' => bytes.push(0x07),
            's' => bytes.push(b' '),
            'x' => {
                let mut value = 0u8;
                let mut digits = 0;
                while digits < 2 {
                    match chars.get(i).and_then(|c| c.to_digit(16)) {
                        Some(d) => {
                            value = value * 16 + d as u8;
                            digits += 1;
                            i += 1;
                        }
                        None => break,
                    }
                }
                if digits == 0 {
                    return Err(SyntaxError {
                        column: i,
                        expected: "hex digits after \\x".into(),
                        found: chars
                            .get(i)
                            .map_or("end of input".into(), |c| format!("'{c}'")),
                        incomplete: false,
                    });
                }
                bytes.push(value);
            }
            other => push_char(&mut bytes, other),
        }
    }
}

struct Parser {
    tokens: Vec<Token>,
    pos: usize,
    /// Nesting of brackets: newlines inside them are whitespace.
    depth: usize,
}

impl Parser {
    fn peek(&self) -> &Token {
        let last = self.tokens.len() - 1;
        &self.tokens[self.pos.min(last)]
    }

    fn bump(&mut self) -> Token {
        let t = self.peek().clone();
        if self.pos < self.tokens.len() - 1 {
            self.pos += 1;
        }
        t
    }

    fn skip_newlines(&mut self) {
        while self.peek().tok == Tok::Newline {
            self.pos += 1;
        }
    }

    fn error(&self, expected: &str) -> SyntaxError {
        let t = self.peek();
        let (found, incomplete) = match &t.tok {
            Tok::End => (
                "end of input".to_string(),
                self.depth > 0 || self.after_comma(),
            ),
            Tok::Newline => (
                "end of line".to_string(),
                self.depth > 0 || self.after_comma(),
            ),
            _ => (format!("'{}'", t.text), false),
        };
        SyntaxError {
            column: t.column,
            expected: expected.into(),
            found,
            incomplete,
        }
    }

    /// Whether the last token before the current one (newlines aside) promises more.
    fn after_comma(&self) -> bool {
        self.tokens[..self.pos]
            .iter()
            .rev()
            .find(|t| t.tok != Tok::Newline)
            .is_some_and(|t| matches!(t.tok, Tok::Comma | Tok::Arrow | Tok::LParen))
    }

    fn script(&mut self) -> Result<Vec<Command>, SyntaxError> {
        let mut commands = Vec::new();
        loop {
            while matches!(self.peek().tok, Tok::Semi | Tok::Newline) {
                self.bump();
            }
            if self.peek().tok == Tok::End {
                return Ok(commands);
            }
            commands.push(self.command()?);
            match self.peek().tok {
                Tok::Semi | Tok::Newline | Tok::End => {}
                _ => return Err(self.error("',' or end of command")),
            }
        }
    }

    fn command(&mut self) -> Result<Command, SyntaxError> {
        let t = self.peek().clone();
        let Tok::Ident(name) = t.tok else {
            return Err(self.error("a command name"));
        };
        self.bump();
        let args = if self.peek().tok == Tok::LParen {
            self.bump();
            self.depth += 1;
            self.skip_newlines();
            let args = if self.peek().tok == Tok::RParen {
                Vec::new()
            } else {
                self.arguments()?
            };
            self.skip_newlines();
            if self.peek().tok != Tok::RParen {
                return Err(self.error("',' or ')'"));
            }
            self.bump();
            self.depth -= 1;
            args
        } else if matches!(self.peek().tok, Tok::Semi | Tok::Newline | Tok::End) {
            Vec::new()
        } else {
            self.arguments()?
        };
        Ok(Command {
            name,
            args,
            column: t.column,
        })
    }

    /// `value (, value)*`, where trailing `key => value` pairs form one hash.
    fn arguments(&mut self) -> Result<Vec<Value>, SyntaxError> {
        let mut args = Vec::new();
        loop {
            let v = self.value()?;
            if self.peek().tok == Tok::Arrow {
                args.push(self.bare_hash(v)?);
                return Ok(args);
            }
            args.push(v);
            if self.peek().tok != Tok::Comma {
                return Ok(args);
            }
            self.bump();
            self.skip_newlines();
        }
    }

    fn bare_hash(&mut self, first_key: Value) -> Result<Value, SyntaxError> {
        let mut pairs = Vec::new();
        let mut key = first_key;
        loop {
            if self.peek().tok != Tok::Arrow {
                return Err(self.error("'=>'"));
            }
            self.bump();
            self.skip_newlines();
            let value = self.value()?;
            pairs.push((key, value));
            if self.peek().tok != Tok::Comma {
                return Ok(Value::Hash(pairs));
            }
            self.bump();
            self.skip_newlines();
            key = self.value()?;
        }
    }

    fn value(&mut self) -> Result<Value, SyntaxError> {
        let t = self.peek().clone();
        let v = match t.tok {
            Tok::Str(s) => Value::Str(s),
            Tok::Int(n) => Value::Int(n),
            Tok::Ident(w) => match w.as_str() {
                "true" => Value::Bool(true),
                "false" => Value::Bool(false),
                "nil" => Value::Nil,
                _ => Value::Const(w),
            },
            Tok::LBracket => return self.array(),
            Tok::LBrace => return self.hash(),
            _ => return Err(self.error("a value (string, number, constant, [array] or {hash})")),
        };
        self.bump();
        Ok(v)
    }

    fn array(&mut self) -> Result<Value, SyntaxError> {
        self.bump();
        self.depth += 1;
        let mut items = Vec::new();
        loop {
            self.skip_newlines();
            if self.peek().tok == Tok::RBracket {
                break;
            }
            items.push(self.value()?);
            if self.item_ends_list(Tok::RBracket, "',' or ']'")? {
                break;
            }
        }
        self.bump();
        self.depth -= 1;
        Ok(Value::Array(items))
    }

    /// After an item of an array or hash: consumes a `,` (false: more may follow), or sees
    /// `close` (true: the list ends); anything else is an error expecting `expected`.
    fn item_ends_list(&mut self, close: Tok, expected: &str) -> Result<bool, SyntaxError> {
        self.skip_newlines();
        if self.peek().tok == Tok::Comma {
            self.bump();
            Ok(false)
        } else if self.peek().tok == close {
            Ok(true)
        } else {
            Err(self.error(expected))
        }
    }

    fn hash(&mut self) -> Result<Value, SyntaxError> {
        self.bump();
        self.depth += 1;
        let mut pairs = Vec::new();
        loop {
            self.skip_newlines();
            if self.peek().tok == Tok::RBrace {
                break;
            }
            let key = self.value()?;
            self.skip_newlines();
            if self.peek().tok != Tok::Arrow {
                return Err(self.error("'=>'"));
            }
            self.bump();
            self.skip_newlines();
            let value = self.value()?;
            pairs.push((key, value));
            if self.item_ends_list(Tok::RBrace, "',' or '}'")? {
                break;
            }
        }
        self.bump();
        self.depth -= 1;
        Ok(Value::Hash(pairs))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(src: &str) -> Command {
        let mut cmds = parse_script(src).expect("parses");
        assert_eq!(cmds.len(), 1, "{cmds:?}");
        cmds.remove(0)
    }

    fn s(x: &str) -> Value {
        Value::Str(x.as_bytes().to_vec())
    }

    fn c(x: &str) -> Value {
        Value::Const(x.into())
    }

    #[test]
    fn commands_with_strings_numbers_and_hashes() {
        let cmd = one("create 't', 'cf1', {NAME => 'cf2', VERSIONS => 3, IN_MEMORY => true}");
        assert_eq!(cmd.name, "create");
        assert_eq!(
            cmd.args,
            vec![
                s("t"),
                s("cf1"),
                Value::Hash(vec![
                    (c("NAME"), s("cf2")),
                    (c("VERSIONS"), Value::Int(3)),
                    (c("IN_MEMORY"), Value::Bool(true)),
                ]),
            ]
        );
        let cmd = one("list");
        assert!(cmd.args.is_empty());
        let cmd = one("put('t', 'r', 'cf:q', 'v', -5)");
        assert_eq!(cmd.args.len(), 5);
        assert_eq!(cmd.args[4], Value::Int(-5));
    }

    #[test]
    fn arrays_nil_and_nested_values() {
        let cmd = one("scan 't', {COLUMNS => ['cf:a', 'cf:b'], TIMERANGE => [1, 2_000], X => nil}");
        let Value::Hash(pairs) = &cmd.args[1] else {
            panic!("hash expected: {cmd:?}")
        };
        assert_eq!(pairs[0].1, Value::Array(vec![s("cf:a"), s("cf:b")]));
        assert_eq!(
            pairs[1].1,
            Value::Array(vec![Value::Int(1), Value::Int(2000)])
        );
        assert_eq!(pairs[2].1, Value::Nil);
        assert_eq!(
            one("x [], {}").args,
            vec![Value::Array(vec![]), Value::Hash(vec![])]
        );
    }

    #[test]
    fn trailing_pairs_without_braces_form_a_hash() {
        let cmd = one("alter 't', 'delete' => 'cf'");
        assert_eq!(
            cmd.args,
            vec![s("t"), Value::Hash(vec![(s("delete"), s("cf"))])]
        );
        let cmd = one("create 't', 'cf', SPLITS => ['a', 'm'], X => 1");
        assert_eq!(cmd.args.len(), 3);
        assert_eq!(
            cmd.args[2],
            Value::Hash(vec![
                (c("SPLITS"), Value::Array(vec![s("a"), s("m")])),
                (c("X"), Value::Int(1))
            ])
        );
    }

    #[test]
    fn double_quotes_take_escapes_single_quotes_do_not() {
        let cmd = one(r#"put 't', "\x00\xff\n\t\\\"\x4", 'a\x00\'\\'"#);
        assert_eq!(cmd.args[1], Value::Str(b"\x00\xff\n\t\\\"\x04".to_vec()));
        assert_eq!(cmd.args[2], Value::Str(b"a\\x00'\\".to_vec()));
        let cmd = one("get 't', 'héllo'");
        assert_eq!(cmd.args[1], Value::Str("héllo".as_bytes().to_vec()));
    }

    #[test]
    fn scripts_split_on_semicolons_and_newlines_but_not_inside_brackets() {
        let cmds = parse_script("create 't','cf'; put 't','r','cf:q','v'\n\nscan 't', {\n LIMIT => 1,\n}\n# comment\nlist;")
            .expect("parses");
        let names: Vec<_> = cmds.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["create", "put", "scan", "list"]);
        assert_eq!(cmds[1].column, 18);
        assert!(parse_script("  ;; \n").expect("empty").is_empty());
    }

    #[test]
    fn errors_say_where_what_was_expected_and_what_was_found() {
        let err = parse_script("put 't', 'r' x").expect_err("junk");
        assert_eq!(
            err.to_string(),
            "syntax error at column 14: expected ',' or end of command, found 'x'"
        );
        assert!(!err.incomplete);
        let err = parse_script("scan 't', {LIMIT 5}").expect_err("no arrow");
        assert_eq!(err.column, 18);
        assert_eq!(err.expected, "'=>'");
        let err = parse_script("get 't', %").expect_err("bad char");
        assert_eq!(err.column, 10);
        assert_eq!(err.found, "'%'");
        let err = parse_script(r#"put "\xZZ""#).expect_err("bad hex");
        assert!(err.expected.contains("hex"), "{err}");
        let err = parse_script("'t'").expect_err("no command");
        assert_eq!(err.expected, "a command name");
    }

    #[test]
    fn unfinished_input_is_marked_incomplete() {
        for src in [
            "put 't', 'r",
            "scan 't', {LIMIT => 1,",
            "create 't',",
            "x [1, 2",
        ] {
            let err = parse_script(src).expect_err(src);
            assert!(err.incomplete, "{src}: {err}");
        }
        let err = parse_script("put 't', 'r'\nx 'y").expect_err("unterminated");
        assert!(err.incomplete);
        assert!(!parse_script("put 't', }").expect_err("stray").incomplete);
    }
}

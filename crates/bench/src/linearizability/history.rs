//! A history: the operations clients ran on a few registers, each with when it was invoked,
//! when its answer came, and what the answer was. Stored as JSON lines, one operation a
//! line (the format: `docs/chaos.md`).

use serde::{Deserialize, Serialize};
use std::io::{BufRead, Write};
use std::path::Path;

/// What a client asked of one register (one column of one row, holding an i64).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase")]
pub enum Call {
    /// Write `value`.
    Put { value: i64 },
    /// Read the value (or learn there is none).
    Get,
    /// Write `new` if the value is `expected` (`None`: if there is no value).
    Cas { expected: Option<i64>, new: i64 },
    /// Add `delta` to the value (none counts as 0) and return the sum.
    Incr { delta: i64 },
}

impl Call {
    /// Whether the call can change the register (a get cannot).
    pub fn writes(&self) -> bool {
        !matches!(self, Call::Get)
    }
}

/// What came back, for an operation that completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ret {
    /// A put was acknowledged.
    Written,
    /// A get's answer: the value, or `None` when the register held none.
    Read(Option<i64>),
    /// A check-and-mutate's answer: whether it wrote.
    Applied(bool),
    /// An increment's answer: the new value.
    Counter(i64),
}

/// How an operation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// Answered; `ret` holds the answer.
    Ok,
    /// Definitely did not take effect (refused before it was sent, or refused by the server
    /// before it ran).
    Fail,
    /// May or may not have taken effect (a timeout, a connection lost after sending, a
    /// server killed mid-call). Its completion is "never": it may take effect at any time
    /// after it was invoked.
    Unknown,
}

/// One operation of a history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Op {
    /// The client (one at a time: a client waits for each answer before its next call).
    pub client: u32,
    /// The register: operations on different keys are checked independently.
    pub key: String,
    #[serde(flatten)]
    pub call: Call,
    /// When the call was made, in nanoseconds from the start of the run.
    pub invoke_ns: u64,
    /// When the client stopped waiting: the answer, the error, or the timeout. For an
    /// `unknown` operation the checker ignores it (the operation may take effect later).
    pub end_ns: u64,
    pub outcome: Outcome,
    /// The answer, when `outcome` is `ok`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ret: Option<Ret>,
    /// Why it failed or is unknown (the client's error), for people reading the history.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Op {
    /// Checks that the fields agree: an `ok` operation has the answer its call gives, the
    /// others have none, and the end is not before the invocation.
    pub fn validate(&self) -> Result<(), String> {
        if self.end_ns < self.invoke_ns {
            return Err(format!(
                "ends at {} ns, before it was invoked at {} ns",
                self.end_ns, self.invoke_ns
            ));
        }
        match (self.outcome, self.ret) {
            (Outcome::Ok, None) => Err("is ok but has no \"ret\"".into()),
            (Outcome::Ok, Some(ret)) => {
                let fits = matches!(
                    (self.call, ret),
                    (Call::Put { .. }, Ret::Written)
                        | (Call::Get, Ret::Read(_))
                        | (Call::Cas { .. }, Ret::Applied(_))
                        | (Call::Incr { .. }, Ret::Counter(_))
                );
                if fits {
                    Ok(())
                } else {
                    Err(format!("a {:?} cannot return {ret:?}", self.call))
                }
            }
            (_, Some(ret)) => Err(format!("is {:?} but has an answer ({ret:?})", self.outcome)),
            (_, None) => Ok(()),
        }
    }
}

/// Writes operations as JSON lines.
pub fn write_op(out: &mut impl Write, op: &Op) -> std::io::Result<()> {
    serde_json::to_writer(&mut *out, op).map_err(std::io::Error::other)?;
    out.write_all(b"\n")
}

/// Reads a JSON-lines history; errors name the line and what is wrong with it. Blank lines
/// are skipped. A last line without its newline that does not parse is the torn end of a
/// history whose writer was killed: it is left out (the operation's outcome was never
/// recorded), and said on stderr.
pub fn read(mut input: impl BufRead, source: &str) -> Result<Vec<Op>, String> {
    let mut text = String::new();
    input
        .read_to_string(&mut text)
        .map_err(|e| format!("{source}: {e}"))?;
    let complete = text.ends_with('\n');
    let lines: Vec<&str> = text.lines().collect();
    let mut ops = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let n = i + 1;
        if line.trim().is_empty() {
            continue;
        }
        let op: Op = match serde_json::from_str(line) {
            Ok(op) => op,
            Err(e) if !complete && n == lines.len() => {
                eprintln!("{source}: line {n} is cut short ({e}); left out");
                continue;
            }
            Err(e) => return Err(format!("{source}: line {n}: {e}")),
        };
        op.validate()
            .map_err(|e| format!("{source}: line {n}: the operation {e}"))?;
        ops.push(op);
    }
    Ok(ops)
}

/// Reads a history file.
pub fn read_file(path: &Path) -> Result<Vec<Op>, String> {
    let f =
        std::fs::File::open(path).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    read(std::io::BufReader::new(f), &path.display().to_string())
}

/// Writes a history file.
pub fn write_file(path: &Path, ops: &[Op]) -> Result<(), String> {
    let f = std::fs::File::create(path)
        .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
    let mut w = std::io::BufWriter::new(f);
    for op in ops {
        write_op(&mut w, op).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    w.flush()
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(call: Call, outcome: Outcome, ret: Option<Ret>) -> Op {
        Op {
            client: 1,
            key: "k".into(),
            call,
            invoke_ns: 10,
            end_ns: 20,
            outcome,
            ret,
            error: None,
        }
    }

    #[test]
    fn round_trips_through_json_lines() {
        let ops = vec![
            op(Call::Put { value: 7 }, Outcome::Ok, Some(Ret::Written)),
            op(Call::Get, Outcome::Ok, Some(Ret::Read(None))),
            op(Call::Get, Outcome::Ok, Some(Ret::Read(Some(7)))),
            op(
                Call::Cas {
                    expected: None,
                    new: 3,
                },
                Outcome::Ok,
                Some(Ret::Applied(false)),
            ),
            op(Call::Incr { delta: 2 }, Outcome::Ok, Some(Ret::Counter(9))),
            op(Call::Incr { delta: 2 }, Outcome::Unknown, None),
        ];
        let mut buf = Vec::new();
        for o in &ops {
            write_op(&mut buf, o).expect("write");
        }
        let text = String::from_utf8(buf.clone()).expect("utf8");
        assert!(text.contains(r#""op":"get""#), "{text}");
        assert!(text.contains(r#""ret":{"read":null}"#), "{text}");
        assert_eq!(read(&buf[..], "mem").expect("read"), ops);
    }

    #[test]
    fn a_torn_last_line_is_left_out_but_a_torn_middle_is_an_error() {
        let good = r#"{"client":1,"key":"k","op":"get","invoke_ns":1,"end_ns":2,"outcome":"ok","ret":{"read":5}}"#;
        let torn = r#"{"client":1,"key":"k","op":"pu"#;
        let text = format!("{good}\n{good}\n{torn}");
        assert_eq!(read(text.as_bytes(), "h").expect("torn tail").len(), 2);
        let text = format!("{good}\n{torn}\n{good}\n");
        let e = read(text.as_bytes(), "h").expect_err("torn middle");
        assert!(e.contains("line 2"), "{e}");
        let text = format!("{good}\n{torn}\n");
        assert!(read(text.as_bytes(), "h").is_err(), "a complete bad line");
    }

    #[test]
    fn inconsistent_lines_are_refused_with_their_number() {
        let good = r#"{"client":1,"key":"k","op":"get","invoke_ns":1,"end_ns":2,"outcome":"ok","ret":{"read":5}}"#;
        for (bad, needle) in [
            (
                r#"{"client":1,"key":"k","op":"get","invoke_ns":1,"end_ns":2,"outcome":"ok"}"#,
                "no \"ret\"",
            ),
            (
                r#"{"client":1,"key":"k","op":"put","value":1,"invoke_ns":1,"end_ns":2,"outcome":"ok","ret":{"read":5}}"#,
                "cannot return",
            ),
            (
                r#"{"client":1,"key":"k","op":"get","invoke_ns":3,"end_ns":2,"outcome":"fail"}"#,
                "before it was invoked",
            ),
            (r#"{"client":1}"#, "line 2"),
        ] {
            let text = format!("{good}\n{bad}\n");
            let e = read(text.as_bytes(), "h.jsonl").expect_err(bad);
            assert!(e.contains("h.jsonl: line 2"), "{e}");
            assert!(e.contains(needle), "{e}");
        }
    }
}

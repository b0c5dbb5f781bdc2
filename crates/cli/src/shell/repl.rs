//! The three ways commands arrive: `-e` scripts, piped standard input, and the interactive
//! line editor. Scripts and piped input stop at the first failing command (so a caller sees
//! a non-zero exit); the interactive shell reports the error and goes on.

use super::commands::translate;
use super::exec::{execute, Cluster, Flow};
use super::parser::{parse_script, Command, SyntaxError};
use std::io::{BufRead, Write};
use std::path::PathBuf;

/// Parses the whole script, then runs its commands in order.
pub fn run_script(
    cluster: &mut dyn Cluster,
    src: &str,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<(), String> {
    let commands = match parse_script(src) {
        Ok(c) => c,
        Err(e) => {
            report(err, &located(src, 0, &e));
            return Err("the script has a syntax error; nothing was run".into());
        }
    };
    run_until_failure(cluster, &commands, out, err, |name| {
        format!("'{name}' failed; later commands were not run")
    })
    .map(|_| ())
}

/// Runs `commands` in order, stopping at the first that fails (reported on `err`; the
/// returned error is `failed(name)`). `Ok(Flow::Exit)` when a command asked to leave.
fn run_until_failure(
    cluster: &mut dyn Cluster,
    commands: &[Command],
    out: &mut dyn Write,
    err: &mut dyn Write,
    failed: impl Fn(&str) -> String,
) -> Result<Flow, String> {
    for cmd in commands {
        match translate(cmd).and_then(|a| execute(cluster, a, out)) {
            Ok(Flow::Continue) => {}
            Ok(Flow::Exit) => return Ok(Flow::Exit),
            Err(e) => {
                report(err, &e);
                return Err(failed(&cmd.name));
            }
        }
    }
    Ok(Flow::Continue)
}

/// Reads commands from `input` (not a terminal): a command may continue on later lines
/// while a string, bracket or argument list is open.
pub fn run_reader(
    cluster: &mut dyn Cluster,
    input: &mut dyn BufRead,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<(), String> {
    let mut buffer = String::new();
    let mut first_line = 1;
    let mut line_no = 0;
    loop {
        let mut line = String::new();
        let n = input
            .read_line(&mut line)
            .map_err(|e| format!("cannot read standard input: {e}"))?;
        let eof = n == 0;
        if !eof {
            line_no += 1;
            if buffer.is_empty() {
                first_line = line_no;
            }
            buffer.push_str(&line);
        }
        if buffer.trim().is_empty() {
            buffer.clear();
            if eof {
                return Ok(());
            }
            continue;
        }
        match parse_script(&buffer) {
            Err(e) if e.incomplete && !eof => continue,
            Err(e) => {
                report(err, &located(&buffer, first_line - 1, &e));
                return Err(format!("syntax error on line {first_line}; stopped"));
            }
            Ok(commands) => {
                buffer.clear();
                let flow = run_until_failure(cluster, &commands, out, err, |name| {
                    format!("'{name}' on line {first_line} failed; stopped")
                })?;
                if flow == Flow::Exit {
                    return Ok(());
                }
            }
        }
        if eof {
            return Ok(());
        }
    }
}

/// The interactive shell: line editing, history in `~/.cellar_history`, Ctrl-D to leave.
pub fn run_interactive(cluster: &mut dyn Cluster) -> Result<(), String> {
    let mut editor = rustyline::DefaultEditor::new()
        .map_err(|e| format!("cannot start the line editor: {e}"))?;
    let history = history_path();
    if let Some(path) = &history {
        // A missing or unreadable history file only means starting without history.
        let _ = editor.load_history(path);
    }
    println!("Cellar shell. Type 'help' for the list of commands, 'exit' or Ctrl-D to leave.");
    let mut stdout = std::io::stdout();
    let mut stderr = std::io::stderr();
    let mut buffer = String::new();
    let mut count = 1u32;
    loop {
        let prompt = if buffer.is_empty() {
            format!("cellar:{count:03}:0> ")
        } else {
            format!("cellar:{count:03}:1* ")
        };
        let line = match editor.readline(&prompt) {
            Ok(line) => line,
            Err(rustyline::error::ReadlineError::Interrupted) => {
                buffer.clear();
                continue;
            }
            Err(rustyline::error::ReadlineError::Eof) => break,
            Err(e) => return Err(format!("cannot read input: {e}")),
        };
        if !buffer.is_empty() {
            buffer.push('\n');
        }
        buffer.push_str(&line);
        if buffer.trim().is_empty() {
            buffer.clear();
            continue;
        }
        let commands = match parse_script(&buffer) {
            Err(e) if e.incomplete => continue,
            Err(e) => {
                report(&mut stderr, &located(&buffer, 0, &e));
                Vec::new()
            }
            Ok(c) => c,
        };
        let _ = editor.add_history_entry(buffer.replace('\n', " "));
        if let Some(path) = &history {
            let _ = editor.save_history(path);
        }
        buffer.clear();
        count += 1;
        for cmd in &commands {
            match translate(cmd).and_then(|a| execute(cluster, a, &mut stdout)) {
                Ok(Flow::Continue) => {}
                Ok(Flow::Exit) => return Ok(()),
                Err(e) => {
                    report(&mut stderr, &e);
                    break;
                }
            }
        }
    }
    Ok(())
}

fn history_path() -> Option<PathBuf> {
    std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cellar_history"))
}

fn report(err: &mut dyn Write, message: &str) {
    // Nothing better to do if standard error itself is gone.
    let _ = writeln!(err, "ERROR: {message}");
}

/// A syntax error's message with its column made relative to its line, naming the line
/// when the input spans several (`line_offset`: lines before `src` in the input).
fn located(src: &str, line_offset: usize, e: &SyntaxError) -> String {
    let before: String = src.chars().take(e.column.saturating_sub(1)).collect();
    let line_index = before.matches('\n').count();
    let column = match before.rfind('\n') {
        Some(i) => before[i + 1..].chars().count() + 1,
        None => e.column,
    };
    let relative = SyntaxError {
        column,
        ..e.clone()
    };
    if line_offset == 0 && !src.trim_end().contains('\n') {
        relative.to_string()
    } else {
        format!("line {}: {relative}", line_offset + line_index + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::super::fake::Fake;
    use super::*;

    fn outputs(
        r: Result<(), String>,
        out: Vec<u8>,
        err: Vec<u8>,
    ) -> (Result<(), String>, String, String) {
        let text = |b: Vec<u8>| String::from_utf8(b).expect("utf-8");
        (r, text(out), text(err))
    }

    fn script(fake: &mut Fake, src: &str) -> (Result<(), String>, String, String) {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let r = run_script(fake, src, &mut out, &mut err);
        outputs(r, out, err)
    }

    fn piped(fake: &mut Fake, input: &str) -> (Result<(), String>, String, String) {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let r = run_reader(fake, &mut input.as_bytes(), &mut out, &mut err);
        outputs(r, out, err)
    }

    #[test]
    fn scripts_run_in_order_and_stop_at_the_first_failure() {
        let mut fake = Fake::default();
        let (r, out, err) = script(&mut fake, "flush 't'; drop 'nope'; flush 't'");
        assert!(r.expect_err("failed").contains("'drop' failed"));
        assert_eq!(err, "ERROR: table nope does not exist\n");
        assert_eq!(out.matches("Took ").count(), 1, "{out}");
        assert_eq!(fake.calls, ["flush t"]);

        let mut fake = Fake::default();
        let (r, out, err) = script(&mut fake, "flush 't'; flush 't' x");
        assert!(r.is_err());
        assert!(
            out.is_empty(),
            "nothing runs when the script does not parse"
        );
        assert_eq!(
            err,
            "ERROR: syntax error at column 22: expected ',' or end of command, found 'x'\n"
        );

        let (r, _, err) = script(&mut fake, "bogus");
        assert!(r.is_err());
        assert!(
            err.contains("unknown command 'bogus'; type 'help'"),
            "{err}"
        );

        let (r, out, _) = script(&mut fake, "exit; flush 't'");
        assert!(r.is_ok() && out.is_empty());
    }

    #[test]
    fn piped_input_joins_continued_lines() {
        let mut fake = Fake::default();
        let (r, out, err) = piped(
            &mut fake,
            "flush 't'\nsplit 't',\n  'm'\n\nalter 't', {\n NAME => 'cf',\n VERSIONS => 2 }\n",
        );
        assert_eq!(r, Ok(()), "{err}");
        assert_eq!(out.matches("Took ").count(), 3, "{out}");
        assert_eq!(fake.calls, ["flush t", "split t Some([109])"]);
        assert_eq!(fake.altered[0].0[0].max_versions, 2);

        let (r, _, err) = piped(&mut fake, "flush 't'\nput 't', 'r\n");
        assert!(r.is_err());
        assert!(
            err.starts_with("ERROR: line 2: syntax error at column 10"),
            "{err}"
        );

        let (r, _, err) = piped(&mut fake, "list\nget 'x', 'r'\nflush 't'\n");
        assert!(r.expect_err("fails").contains("line 2"));
        assert_eq!(err, "ERROR: table x does not exist\n");
    }

    #[test]
    fn syntax_errors_are_located_on_their_line() {
        let src = "list\nput 't' x";
        let e = parse_script(src).expect_err("bad");
        assert_eq!(
            located(src, 0, &e),
            "line 2: syntax error at column 9: expected ',' or end of command, found 'x'"
        );
        let src = "put 't', 'r' x";
        let e = parse_script(src).expect_err("bad");
        assert!(located(src, 0, &e).starts_with("syntax error at column 14"));
        assert!(located(src, 4, &e).starts_with("line 5: syntax error at column 14"));
    }
}

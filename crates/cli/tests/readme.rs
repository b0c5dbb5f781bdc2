//! The README's quick-start commands, run as written (issue 46: "keep the README's commands
//! copy-paste true"): its shell script and its benchmark lines, read from README.md itself,
//! against a real `cellar standalone`. The only change made to them is the one a reader
//! makes too: the server's address (the test's server listens on a free port, not 16200) and
//! the binary's path (this build's, not `./target/release/cellar` or `cargo run --release --`).

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use support::Server;

const CELLAR: &str = env!("CARGO_BIN_EXE_cellar");

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn readme() -> String {
    std::fs::read_to_string(repo().join("README.md")).expect("README.md")
}

/// The first ```sh block after the heading `## {section}`.
fn sh_block(readme: &str, section: &str) -> String {
    let after = readme
        .split_once(&format!("\n## {section}\n"))
        .unwrap_or_else(|| panic!("no section '{section}' in README.md"))
        .1;
    let start = after.find("```sh\n").expect("a sh block") + "```sh\n".len();
    let len = after[start..].find("\n```").expect("the block's end");
    after[start..start + len].to_string()
}

/// Runs one README command line (binary replaced, address replaced) in `dir`; its stdout.
fn run(line: &str, dir: &Path, server: &str) -> String {
    let line = line.replace("127.0.0.1:16200", server);
    let args = shell_words(&line);
    let (_, rest) = args.split_first().expect("a command");
    let out = Command::new(CELLAR)
        .args(rest)
        .current_dir(dir)
        .output()
        .expect("run cellar");
    assert!(
        out.status.success(),
        "README line failed: {line}\nstdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Splits a command line as sh does for the quoting the README uses ('...', "...", \").
fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = line.chars();
    let mut quote: Option<char> = None;
    while let Some(c) = chars.next() {
        match (quote, c) {
            (None, '#') if !in_word => break,
            (None, c) if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            (None, '\'' | '"') => {
                quote = Some(c);
                in_word = true;
            }
            (Some(q), c) if c == q => quote = None,
            (Some('"') | None, '\\') => {
                if let Some(next) = chars.next() {
                    word.push(next);
                }
                in_word = true;
            }
            (_, c) => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        words.push(word);
    }
    words
}

#[test]
fn the_readme_shell_example_runs_as_written() {
    let server = Server::start();
    let block = sh_block(&readme(), "The shell");
    // The `-e` example: its command starts at `cargo run --release -- shell -e` and runs to
    // the block's end (continued lines).
    let start = block.find("shell -e").expect("a shell -e example");
    let script = format!("cellar {}", &block[start..].replace('\n', " "));
    let args = shell_words(&script);
    let out = Command::new(CELLAR)
        .args(["shell", "--connect", &server.native])
        .args(&args[2..])
        .output()
        .expect("run cellar shell");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{script}\nstdout:\n{stdout}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("a@example.org"), "{stdout}");
}

#[test]
fn the_readme_benchmark_lines_run_as_written() {
    let server = Server::start();
    let dir = tempfile::tempdir().expect("tmp");
    std::os::unix::fs::symlink(repo().join("workloads"), dir.path().join("workloads"))
        .expect("workloads/ beside the results");
    let block = sh_block(&readme(), "Benchmarks");
    let line = |prefix: &str| {
        block
            .lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no README line starting {prefix:?}"))
            .to_string()
    };
    let load = run(
        &line("./target/release/cellar bench load -P workloads/workloada -p recordcount=100000"),
        dir.path(),
        &server.native,
    );
    assert!(load.contains("[INSERT], Operations, 100000"), "{load}");
    let ran = run(
        &line("./target/release/cellar bench run  -P workloads/workloada"),
        dir.path(),
        &server.native,
    );
    assert!(ran.contains("[OVERALL], RunTime(ms)"), "{ran}");
    // The run draws its keys from the 100,000 the load wrote, not the workload file's 1,000.
    let json = std::fs::read_to_string(dir.path().join("results/run-a.json"))
        .expect("the run's --json file");
    let doc: serde_json::Value = serde_json::from_str(&json).expect("JSON");
    assert_eq!(doc["record_count"], 100000, "{json}");
    run(
        &line("./target/release/cellar bench report"),
        dir.path(),
        &server.native,
    );
    assert!(
        dir.path().join("charts/ycsb-throughput.png").is_file(),
        "bench report drew no chart from the --json files"
    );
}

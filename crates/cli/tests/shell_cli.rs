//! `cellar shell` against a real `cellar standalone` process on 127.0.0.1: every command,
//! HBase-style output, binary escaping, syntax errors and server errors with exit codes.

mod support;

use std::io::Write;
use std::process::{Command, Output, Stdio};

const CELLAR: &str = env!("CARGO_BIN_EXE_cellar");

/// Runs `cellar shell` against one server.
struct Shell {
    server: support::Server,
}

impl Shell {
    fn start() -> Shell {
        Shell {
            server: support::Server::start(),
        }
    }

    fn addr(&self) -> &str {
        &self.server.native
    }

    /// Runs `cellar shell -e script`.
    fn shell(&self, script: &str) -> Output {
        Command::new(CELLAR)
            .args(["shell", "--connect", self.addr(), "-e", script])
            .stdin(Stdio::null())
            .output()
            .expect("run cellar shell")
    }

    /// Runs the script and expects it to succeed; returns its standard output.
    fn ok(&self, script: &str) -> String {
        let out = self.shell(script);
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(
            out.status.success(),
            "`{script}` failed\nstdout:\n{stdout}\nstderr:\n{stderr}\nserver:\n{}",
            self.server.output()
        );
        stdout
    }

    /// Runs the script and expects it to fail; returns its standard error.
    fn fails(&self, script: &str) -> String {
        let out = self.shell(script);
        assert!(
            !out.status.success(),
            "`{script}` should fail\nstdout:\n{}",
            String::from_utf8_lossy(&out.stdout)
        );
        String::from_utf8_lossy(&out.stderr).into_owned()
    }
}

/// The output's lines without trailing spaces and `Took` lines.
fn lines(out: &str) -> Vec<String> {
    out.lines()
        .filter(|l| !l.starts_with("Took "))
        .map(|l| l.trim_end().to_string())
        .collect()
}

/// The cell lines (` key   rest`) as (key, rest) pairs.
fn cells(out: &str) -> Vec<(String, String)> {
    lines(out)
        .iter()
        .filter(|l| l.starts_with(' '))
        .map(|l| {
            let l = l.trim_start();
            let (k, rest) = l.split_once(' ').unwrap_or((l, ""));
            (k.to_string(), rest.trim_start().to_string())
        })
        .collect()
}

fn rows_of(out: &str) -> Vec<String> {
    let mut rows: Vec<String> = cells(out).into_iter().map(|(k, _)| k).collect();
    rows.dedup();
    rows
}

#[test]
fn shell_runs_every_command_against_a_real_server() {
    let server = Shell::start();

    let out = server.ok(
        "create 't', 'cf', {NAME => 'cf2', VERSIONS => 3, TTL => 'FOREVER', COMPRESSION => 'ZSTD', \
         BLOOMFILTER => 'ROWCOL', BLOCKSIZE => 65536, IN_MEMORY => true}",
    );
    assert!(out.contains("Created table t"), "{out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("Took ") && l.ends_with(" seconds")),
        "{out}"
    );
    server.ok("create 'other', 'f', {SPLITS => ['m']}");

    assert_eq!(
        lines(&server.ok("list")),
        ["TABLE", "other", "t", "2 row(s)"]
    );
    assert_eq!(
        lines(&server.ok("list 'o.*'")),
        ["TABLE", "other", "1 row(s)"]
    );
    assert_eq!(lines(&server.ok("exists 't'")), ["Table t does exist"]);
    assert_eq!(
        lines(&server.ok("exists 'nope'")),
        ["Table nope does not exist"]
    );
    let d = server.ok("describe 't'");
    assert!(
        d.starts_with("Table t is ENABLED\nt\nCOLUMN FAMILIES DESCRIPTION\n"),
        "{d}"
    );
    assert!(d.contains("{NAME => 'cf', VERSIONS => '1'"), "{d}");
    assert!(
        d.contains("{NAME => 'cf2', VERSIONS => '3', MIN_VERSIONS => '0', KEEP_DELETED_CELLS => 'FALSE', TTL => 'FOREVER', COMPRESSION => 'ZSTD', BLOOMFILTER => 'ROWCOL', BLOCKSIZE => '65536', IN_MEMORY => 'true'}"),
        "{d}"
    );
    let d = server.ok("describe 'other'");
    assert!(
        d.contains("2 region(s)") && d.contains("ENDKEY => 'm'"),
        "{d}"
    );
    // list_regions names the regions merge_region takes; the two halves merge back.
    server.ok("create 'halves', 'f', {SPLITS => ['m']}");
    let listed = lines(&server.ok("list_regions 'halves'"));
    assert_eq!(listed.len(), 3, "{listed:?}");
    assert_eq!(listed[2], "2 region(s)");
    let ids: Vec<&str> = listed[..2]
        .iter()
        .map(|l| l.trim().split(':').next().unwrap_or_default())
        .collect();
    let gap = server.fails(&format!(
        "merge_region '{}', '{}'; merge_region '{}'",
        ids[0], ids[0], ids[1]
    ));
    assert!(gap.contains("named twice"), "{gap}");
    let merged = server.ok(&format!("merge_region '{}', '{}'", ids[0], ids[1]));
    assert!(merged.contains("merged into halves,,"), "{merged}");
    let listed = lines(&server.ok("list_regions 'halves'"));
    assert_eq!(listed.len(), 2, "{listed:?}");
    assert!(
        listed[0].contains("STARTKEY => '', ENDKEY => ''"),
        "{listed:?}"
    );
    // Snapshots: take, list, clone, restore, delete.
    server.ok("put 'halves', 'a', 'f:q', 'one'; snapshot 'halves', 'snap1'");
    let listed = lines(&server.ok("list_snapshots"));
    assert!(
        listed[0].starts_with("SNAPSHOT") && listed[1].starts_with("snap1 "),
        "{listed:?}"
    );
    assert!(listed[1].contains(" halves "), "{listed:?}");
    assert_eq!(listed[2], "1 row(s)");
    server.ok("put 'halves', 'a', 'f:q', 'two'; clone_snapshot 'snap1', 'halves_copy'");
    assert!(server.ok("get 'halves_copy', 'a'").contains("value=one"));
    let e = server.fails("restore_snapshot 'snap1'");
    assert!(e.contains("not disabled") || e.contains("disable"), "{e}");
    server.ok("disable 'halves'; restore_snapshot 'snap1'; enable 'halves'");
    assert!(server.ok("get 'halves', 'a'").contains("value=one"));
    server.ok("delete_snapshot 'snap1'");
    assert_eq!(
        lines(&server.ok("list_snapshots"))
            .last()
            .map(String::as_str),
        Some("0 row(s)")
    );
    let e = server.fails("clone_snapshot 'snap1', 'again'");
    assert!(e.contains("does not exist"), "{e}");
    assert!(
        server.ok("get 'halves_copy', 'a'").contains("value=one"),
        "the clone outlives its snapshot"
    );

    // Writes, including a binary row key.
    server.ok(
        "put 't', 'r1', 'cf:q', 'v1'; put 't', \"\\x00\\xff\", 'cf:q', 'bin\\n'; \
         put 't', \"\\x00\\xff\", 'cf:q', \"bin\\n\"; \
         put 't', 'r2', 'cf2:a', 'x', 100; put 't', 'r2', 'cf2:a', 'y', 200; \
         put 't', 'r2', 'cf:q', 'v2'",
    );
    let out = server.ok("scan 't'");
    let l = lines(&out);
    assert!(
        l[0].starts_with("ROW") && l[0].ends_with("COLUMN+CELL"),
        "{out}"
    );
    assert_eq!(l.last().map(String::as_str), Some("3 row(s)"), "{out}");
    let c = cells(&out);
    assert_eq!(c[0].0, "\\x00\\xFF", "binary rows print escaped: {out}");
    assert!(c[0].1.starts_with("column=cf:q, timestamp="), "{out}");
    assert!(c[0].1.ends_with(", value=bin\\x0A"), "{out}");
    assert_eq!(c[1], ("r1".into(), c[1].1.clone()));
    assert!(c[1].1.ends_with("value=v1"), "{out}");
    assert_eq!(
        c[3],
        (
            "r2".to_string(),
            "column=cf2:a, timestamp=1970-01-01T00:00:00.200Z, value=y".to_string()
        )
    );
    let ts = c[1].1.split("timestamp=").nth(1).unwrap_or_default();
    assert!(
        ts.starts_with("20") && ts.contains('T') && ts.contains("Z, value="),
        "{ts}"
    );

    // Get: whole row, columns, versions, time ranges.
    let out = server.ok("get 't', 'r1'");
    let l = lines(&out);
    assert!(
        l[0].starts_with("COLUMN") && l[0].ends_with("CELL"),
        "{out}"
    );
    assert_eq!(cells(&out).len(), 1);
    assert_eq!(cells(&out)[0].0, "cf:q");
    assert!(cells(&out)[0].1.ends_with("value=v1"), "{out}");
    assert_eq!(l.last().map(String::as_str), Some("1 row(s)"));
    let out = server.ok("get 't', 'r2', {COLUMN => 'cf2:a', VERSIONS => 3}");
    assert_eq!(
        cells(&out),
        [
            (
                "cf2:a".to_string(),
                "timestamp=1970-01-01T00:00:00.200Z, value=y".to_string()
            ),
            (
                "cf2:a".to_string(),
                "timestamp=1970-01-01T00:00:00.100Z, value=x".to_string()
            ),
        ]
    );
    let out = server.ok("get 't', 'r2', {COLUMN => 'cf2:a', TIMERANGE => [0, 150]}");
    assert_eq!(cells(&out).len(), 1);
    assert!(cells(&out)[0].1.ends_with("value=x"), "{out}");
    let out = server.ok("get 't', 'r2', 'cf:q'");
    assert_eq!(cells(&out).len(), 1);
    assert!(cells(&out)[0].1.ends_with("value=v2"), "{out}");
    let out = server.ok("get 't', 'r2', {FILTER => \"ValueFilter(=, 'binary:y')\"}");
    assert_eq!(cells(&out).len(), 1, "{out}");
    assert_eq!(
        lines(&server.ok("get 't', 'none'"))
            .last()
            .map(String::as_str),
        Some("0 row(s)")
    );

    // Scan options.
    assert_eq!(
        rows_of(&server.ok("scan 't', {STARTROW => 'r1', STOPROW => 'r2'}")),
        ["r1"]
    );
    assert_eq!(
        rows_of(&server.ok("scan 't', {ROWPREFIXFILTER => 'r'}")),
        ["r1", "r2"]
    );
    assert_eq!(
        rows_of(&server.ok("scan 't', {LIMIT => 1}")),
        ["\\x00\\xFF"]
    );
    assert_eq!(
        rows_of(&server.ok("scan 't', {REVERSED => true}")),
        ["r2", "r1", "\\x00\\xFF"]
    );
    let out = server.ok("scan 't', {COLUMNS => ['cf2:a'], VERSIONS => 2}");
    assert_eq!(cells(&out).len(), 2, "{out}");
    let out = server.ok("scan 't', {COLUMNS => 'cf', CACHE => 1, BATCH => 1}");
    assert_eq!(rows_of(&out).len(), 3, "{out}");
    assert!(lines(&out).contains(&"3 row(s)".to_string()), "{out}");
    let out = server.ok("scan 't', {TIMERANGE => [0, 150]}");
    assert_eq!(rows_of(&out), ["r2"]);

    // Filters in HBase's filter language.
    let scan_rows =
        |filter: &str| rows_of(&server.ok(&format!("scan 't', {{FILTER => \"{filter}\"}}")));
    assert_eq!(scan_rows("PrefixFilter('r')"), ["r1", "r2"]);
    assert_eq!(scan_rows("ValueFilter(=, 'binary:v1')"), ["r1"]);
    assert_eq!(scan_rows("ValueFilter(=, 'substring:BIN')"), ["\\x00\\xFF"]);
    assert_eq!(scan_rows("RowFilter(>=, 'binaryprefix:r2')"), ["r2"]);
    assert_eq!(scan_rows("QualifierFilter(=, 'binary:a')"), ["r2"]);
    assert_eq!(scan_rows("ColumnPrefixFilter('a')"), ["r2"]);
    assert_eq!(
        scan_rows("ColumnRangeFilter('a', true, 'b', false)"),
        ["r2"]
    );
    assert_eq!(
        scan_rows("SingleColumnValueFilter('cf', 'q', =, 'binary:v2', true, true)"),
        ["r2"]
    );
    assert_eq!(
        scan_rows("SingleColumnValueFilter('cf2', 'a', =, 'binary:y')"),
        ["\\x00\\xFF", "r1", "r2"],
        "rows without the column pass unless filterIfMissing"
    );
    assert_eq!(scan_rows("PageFilter(2)"), ["\\x00\\xFF", "r1"]);
    assert_eq!(
        scan_rows(
            "PrefixFilter('r1') OR (QualifierFilter(=, 'binary:a') AND ValueFilter(=, 'binary:y'))"
        ),
        ["r1", "r2"]
    );
    let out = server.ok("scan 't', {FILTER => \"PrefixFilter('r') AND KeyOnlyFilter()\"}");
    assert!(
        cells(&out).iter().all(|(_, rest)| rest.ends_with("value=")),
        "{out}"
    );
    let out = server.ok("scan 't', {FILTER => \"FirstKeyOnlyFilter()\"}");
    assert_eq!(cells(&out).len(), 3, "{out}");

    // Counters and count.
    assert_eq!(
        lines(&server.ok("incr 't', 'r3', 'cf:c'")),
        ["COUNTER VALUE = 1"]
    );
    assert_eq!(
        lines(&server.ok("incr 't', 'r3', 'cf:c', 5")),
        ["COUNTER VALUE = 6"]
    );
    assert_eq!(
        lines(&server.ok("get_counter 't', 'r3', 'cf:c'")),
        ["COUNTER VALUE = 6"]
    );
    let out = server.ok("count 't', {INTERVAL => 2}");
    assert_eq!(
        lines(&out),
        [
            "Current count: 2, row: r1",
            "Current count: 4, row: r3",
            "4 row(s)"
        ]
    );

    // Deletes.
    server.ok("delete 't', 'r2', 'cf2:a'");
    let out = server.ok("get 't', 'r2', {COLUMN => 'cf2:a', VERSIONS => 3}");
    assert_eq!(
        cells(&out).len(),
        1,
        "delete removes the newest version only: {out}"
    );
    assert!(cells(&out)[0].1.ends_with("value=x"), "{out}");
    server.ok("deleteall 't', 'r2', 'cf2:a'");
    assert_eq!(cells(&server.ok("get 't', 'r2', 'cf2'")).len(), 0);
    server.ok("deleteall 't', 'r1'");
    assert_eq!(
        lines(&server.ok("get 't', 'r1'"))
            .last()
            .map(String::as_str),
        Some("0 row(s)")
    );

    // Schema changes.
    server.ok("alter 't', {NAME => 'cf', VERSIONS => 5}");
    let d = server.ok("describe 't'");
    assert!(d.contains("{NAME => 'cf', VERSIONS => '5'"), "{d}");
    assert!(
        d.contains("{NAME => 'cf2', VERSIONS => '3'"),
        "other families unchanged: {d}"
    );
    server.ok("alter 't', 'delete' => 'cf2'");
    assert!(!server.ok("describe 't'").contains("'cf2'"));
    server.ok("alter 't', {NAME => 'cf3'}; alter 't', {NAME => 'cf3', METHOD => 'delete'}");
    assert!(!server.ok("describe 't'").contains("'cf3'"));

    // Enable/disable and admin tools.
    assert_eq!(lines(&server.ok("is_enabled 't'")), ["true"]);
    server.ok("disable 't'");
    assert_eq!(lines(&server.ok("is_disabled 't'")), ["true"]);
    assert_eq!(lines(&server.ok("is_enabled 't'")), ["false"]);
    server.ok("enable 't'");
    assert_eq!(lines(&server.ok("is_disabled 't'")), ["false"]);
    server.ok("flush 't'; major_compact 't'; split 'other', 'f'");
    let status = server.ok("status");
    assert!(
        status.contains("tables") && status.contains("regions"),
        "{status}"
    );

    // Truncate keeps the table, drops its rows.
    let out = server.ok("truncate 't'");
    assert!(out.contains("Truncating 't' table"), "{out}");
    let out = server.ok("scan 't'");
    assert!(cells(&out).is_empty(), "{out}");
    assert_eq!(lines(&out).last().map(String::as_str), Some("0 row(s)"));
    assert_eq!(lines(&server.ok("is_enabled 't'")), ["true"]);

    // Errors: syntax, unknown tables, unknown commands; non-zero exits.
    let err = server.fails("put 't' 'r1'");
    assert!(
        err.contains(
            "ERROR: syntax error at column 9: expected ',' or end of command, found ''r1''"
        ),
        "{err}"
    );
    let err = server.fails("get 'nosuch', 'r'");
    assert!(err.contains("ERROR: ") && err.contains("nosuch"), "{err}");
    let err = server.fails("put 'nosuch', 'r', 'cf:q', 'v'");
    assert!(err.contains("nosuch"), "{err}");
    let err = server.fails("frobnicate");
    assert!(
        err.contains("unknown command 'frobnicate'; type 'help'"),
        "{err}"
    );
    let err = server.fails("list; scan 't', {FILTER => \"Nope()\"}; list");
    assert!(err.contains("unknown filter"), "{err}");

    // Drop.
    server.ok("disable 't'; drop 't'");
    assert_eq!(lines(&server.ok("exists 't'")), ["Table t does not exist"]);

    // help and exit.
    let help = server.ok("help");
    assert!(
        help.contains("Group name: dml") && help.contains("get_counter"),
        "{help}"
    );
    assert!(server.ok("help 'scan'").contains("ROWPREFIXFILTER"));

    // The table's own attributes: set, shown, and READONLY refuses writes.
    server.ok("alter 'other', MAX_FILESIZE => '134217728', DURABILITY => 'ASYNC_WAL'");
    server.ok("alter 'other', READONLY => true");
    let d = server.ok("describe 'other'");
    assert!(
        d.contains(
            "TABLE_ATTRIBUTES => {DURABILITY => 'ASYNC_WAL', MAX_FILESIZE => '134217728', READONLY => 'true'}"
        ),
        "{d}"
    );
    let e = server.fails("put 'other', 'r', 'f:q', 'v'");
    assert!(e.contains("region is read only"), "{e}");
    server.ok("alter 'other', READONLY => false");
    server.ok("put 'other', 'r', 'f:q', 'v'");
    let e = server.fails("alter 'other', DURABILITY => 'SOMETIMES'");
    assert!(e.contains("SOMETIMES"), "{e}");
    assert_eq!(server.ok("exit; list"), "");
}

#[test]
fn shell_reads_piped_commands_and_stops_at_a_failure() {
    let server = Shell::start();
    let mut child = Command::new(CELLAR)
        .args(["shell", "--connect", server.addr()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run cellar shell");
    let script =
        "create 'p', 'cf'\nput 'p', 'r',\n  'cf:q', 'v'\nscan 'p'\nget 'missing', 'r'\nlist\n";
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(script.as_bytes())
        .expect("write commands");
    let out = child.wait_with_output().expect("shell output");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "the failing get makes the exit non-zero"
    );
    assert!(stdout.contains("Created table p"), "{stdout}");
    assert!(
        stdout.contains("column=cf:q") && stdout.contains("value=v"),
        "{stdout}"
    );
    assert!(
        !stdout.contains("TABLE"),
        "commands after the failure do not run: {stdout}"
    );
    assert!(
        stderr.contains("ERROR: ") && stderr.contains("missing"),
        "{stderr}"
    );
}

#[test]
fn the_shell_pointed_at_the_http_or_hbase_port_says_so_at_once() {
    let sh = Shell::start();
    let http = sh.server.http.clone().expect("the server has an HTTP port");
    for (addr, says) in [
        (&http, "is an HTTP port"),
        (&sh.server.hbase, "is an HBase RPC port"),
    ] {
        let started = std::time::Instant::now();
        let out = Command::new(CELLAR)
            .args(["shell", "--connect", addr, "-e", "list"])
            .stdin(Stdio::null())
            .output()
            .expect("run cellar shell");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{addr}: the shell succeeded");
        assert!(err.contains(says), "{addr}: {err}");
        assert!(
            err.contains("native port (16200 by default"),
            "{addr}: {err}"
        );
        // Not after the HTTP server's 10 s wait for a request head.
        assert!(
            started.elapsed() < std::time::Duration::from_secs(8),
            "{addr}: took {:?}",
            started.elapsed()
        );
    }
}

#[test]
fn a_put_to_a_column_without_its_family_hints_at_family_qualifier() {
    let sh = Shell::start();
    sh.ok("create 'hint', 'cf'");
    let err = sh.fails("put 'hint', 'r1', 'email', 'v'");
    assert!(
        err.contains("a column is 'family:qualifier', e.g. 'cf:email'"),
        "{err}"
    );
    sh.ok("put 'hint', 'r1', 'cf:email', 'v'");
}

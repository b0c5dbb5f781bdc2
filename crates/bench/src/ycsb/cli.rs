//! YCSB's command line, parsed by hand so YCSB's single-dash long options (`-threads`,
//! `-target`) work as they do in YCSB.

use std::path::PathBuf;

/// Where the operations go when `--db` is not given.
pub const DEFAULT_DB: &str = "cellar://127.0.0.1:16200";

/// What the command line asks for. `-threads` and `-target` become the properties
/// `threadcount` and `target`, in command-line order with the `-p` overrides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CliArgs {
    /// `-P FILE`, in order: later files override earlier ones.
    pub property_files: Vec<PathBuf>,
    /// `-p NAME=VALUE`, `-threads N`, `-target OPS`, in order: later wins; all applied after
    /// the files.
    pub overrides: Vec<(String, String)>,
    /// `-s`: a status line every `status.interval` seconds.
    pub status: bool,
    /// `--db URL`.
    pub db: String,
    /// `--json FILE`.
    pub json: Option<PathBuf>,
    /// `-h` / `--help`.
    pub help: bool,
}

/// The help text for `cellar bench load|run`.
pub fn help_text(phase: &str) -> String {
    format!(
        "\
cellar bench {phase}: YCSB's {what}, against Cellar.

Usage: cellar bench {phase} -P WORKLOAD_FILE [OPTIONS]

Options:
  -P FILE            Load workload properties from FILE (repeatable; later files win),
                     e.g. -P workloads/workloada
  -p NAME=VALUE      Set one property (repeatable; applied after the files, later wins),
                     e.g. -p recordcount=100000 -p operationcount=1000000
  -threads N         Client threads (property threadcount; default 1)
  -target OPS        Total operations per second across all threads (property target;
                     0 or absent: as fast as possible)
  -s                 Print a status line to stderr every status.interval seconds (default 10)
  --db URL           Where to run: cellar://HOST:PORT (a Cellar server; default {DEFAULT_DB})
                     or embedded:DIR (the storage engine in this process, one region per
                     table under DIR)
  --json FILE        Also write the results as JSON to FILE
  -h, --help         Show this help

Useful properties: recordcount, operationcount, insertstart, insertcount, fieldcount,
fieldlength, readproportion, updateproportion, scanproportion, insertproportion,
requestdistribution, maxexecutiontime (seconds), table (default usertable),
columnfamily (default family), presplit (regions to create the table with, load phase),
durability (of inserts and updates: USE_DEFAULT, SKIP_WAL, ASYNC_WAL, SYNC_WAL, FSYNC_WAL),
querycache (true: the load phase creates the family with QUERY_CACHE => true),
preparedscan (true: scans are executions of one prepared scan, seed 003's Prepared Scan),
scancompress (true: scan results travel zstd-compressed),
scancaching (rows per scan call; default: the scan's length, at most 1000),
zipfianconstant (requestdistribution=zipfian's exponent, default 0.99),
tls.ca, tls.cert, tls.key (TLS: the CA that signs the server's certificate, and the client
certificate and key for servers that require one), user (the user to say you are to a
server that checks permissions and takes clients' word).

Results are printed to stdout in YCSB's format ([OVERALL], [READ], ... lines).
",
        what = if phase == "load" {
            "load phase (inserts recordcount records)"
        } else {
            "run phase (operationcount transactions)"
        }
    )
}

/// Parses the arguments after `cellar bench load|run`.
pub fn parse(args: &[String]) -> Result<CliArgs, String> {
    let mut out = CliArgs {
        property_files: Vec::new(),
        overrides: Vec::new(),
        status: false,
        db: DEFAULT_DB.to_string(),
        json: None,
        help: false,
    };
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut value = |what: &str| {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{arg} needs {what} after it (see --help)"))
        };
        match arg.as_str() {
            "-P" => out
                .property_files
                .push(PathBuf::from(value("a file name")?)),
            "-p" => {
                let pair = value("NAME=VALUE")?;
                let (name, v) = pair
                    .split_once('=')
                    .filter(|(n, _)| !n.trim().is_empty())
                    .ok_or_else(|| format!("-p {pair}: expected NAME=VALUE"))?;
                out.overrides
                    .push((name.trim().to_string(), v.trim().to_string()));
            }
            "-threads" => {
                let n = value("a thread count")?;
                match n.parse::<u64>() {
                    Ok(t) if t > 0 => out.overrides.push(("threadcount".into(), n)),
                    _ => return Err(format!("-threads {n}: expected a positive whole number")),
                }
            }
            "-target" => {
                let n = value("operations per second")?;
                if n.parse::<u64>().is_err() {
                    return Err(format!(
                        "-target {n}: expected a whole number of operations per second"
                    ));
                }
                out.overrides.push(("target".into(), n));
            }
            "-s" => out.status = true,
            "--db" | "-db" => out.db = value("a URL (cellar://HOST:PORT or embedded:DIR)")?,
            "--json" => out.json = Some(PathBuf::from(value("a file name")?)),
            "-h" | "--help" | "-help" => out.help = true,
            other => return Err(format!("unknown argument '{other}' (see --help)")),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn parses_every_option_in_order() {
        let a = parse(&args(
            "-P w/a -P w/b -p recordcount=10 -threads 4 -target 100 -p recordcount=20 -s --db embedded:/tmp/x --json o.json",
        ))
        .expect("valid");
        assert_eq!(
            a.property_files,
            vec![PathBuf::from("w/a"), PathBuf::from("w/b")]
        );
        assert_eq!(
            a.overrides,
            vec![
                ("recordcount".to_string(), "10".to_string()),
                ("threadcount".to_string(), "4".to_string()),
                ("target".to_string(), "100".to_string()),
                ("recordcount".to_string(), "20".to_string()),
            ]
        );
        assert!(a.status);
        assert_eq!(a.db, "embedded:/tmp/x");
        assert_eq!(a.json, Some(PathBuf::from("o.json")));
        assert!(!a.help);
    }

    #[test]
    fn defaults_and_help() {
        let a = parse(&args("-h")).expect("valid");
        assert!(a.help);
        assert_eq!(a.db, DEFAULT_DB);
        assert!(help_text("run").contains("-threads"));
    }

    #[test]
    fn errors_name_the_argument() {
        for (line, needle) in [
            ("-P", "-P"),
            ("-p foo", "foo"),
            ("-p =3", "=3"),
            ("-threads x", "-threads x"),
            ("-threads 0", "-threads 0"),
            ("-target fast", "fast"),
            ("--bogus", "--bogus"),
        ] {
            let e = parse(&args(line)).expect_err(line);
            assert!(e.contains(needle), "{line}: {e}");
        }
    }
}

//! Headless Chromium (Debian's `chromium`, which `scripts/test.sh` installs) loading a page,
//! running its script for a while of virtual time, and handing back the DOM it left and
//! what it wrote to the console.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long one page load may take in real time.
const LOAD_LIMIT: Duration = Duration::from_secs(120);

pub struct Browser {
    program: PathBuf,
    profile: tempfile::TempDir,
}

/// A page after its script ran.
pub struct Page {
    pub url: String,
    pub dom: String,
    /// Console messages (`console.*` calls, uncaught errors, failed loads).
    pub console: Vec<String>,
}

impl Browser {
    /// `CELLAR_CHROMIUM`, else `chromium`, `chromium-browser` or `google-chrome` on the path.
    pub fn find() -> Browser {
        let program = std::env::var_os("CELLAR_CHROMIUM")
            .map(PathBuf::from)
            .or_else(|| {
                ["chromium", "chromium-browser", "google-chrome"]
                    .iter()
                    .find_map(|name| on_path(name))
            })
            .expect(
                "no Chromium: install Debian's chromium (apt-get install chromium; \
                 scripts/test.sh does) or set CELLAR_CHROMIUM to the browser",
            );
        Browser {
            program,
            profile: tempfile::tempdir().expect("browser profile dir"),
        }
    }

    fn run(&self, url: &str, virtual_ms: u64, extra: &[String]) -> (String, String) {
        let mut cmd = Command::new(&self.program);
        cmd.args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--hide-scrollbars",
            "--enable-logging=stderr",
            "--v=0",
            "--window-size=1280,1000",
        ])
        .arg(format!("--user-data-dir={}", self.profile.path().display()))
        .arg(format!("--virtual-time-budget={virtual_ms}"))
        .args(extra)
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        // Its own process group, so that a stuck browser is killed with its helpers.
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        let mut child = cmd.spawn().expect("start chromium");
        let pid = child.id();
        // Read both pipes while it runs (a full pipe would stall it).
        let mut out = child.stdout.take().expect("stdout");
        let mut err = child.stderr.take().expect("stderr");
        let out_reader = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = std::io::Read::read_to_string(&mut out, &mut s);
            s
        });
        let err_reader = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = std::io::Read::read_to_string(&mut err, &mut s);
            s
        });
        let started = Instant::now();
        loop {
            if child.try_wait().expect("wait chromium").is_some() {
                break;
            }
            if started.elapsed() > LOAD_LIMIT {
                // The whole process group: the browser's helpers too.
                let _ = Command::new("kill")
                    .args(["-9", "--", &format!("-{pid}")])
                    .status();
                let _ = child.wait();
                panic!("chromium did not finish {url} within {LOAD_LIMIT:?}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let stdout = out_reader.join().unwrap_or_default();
        let stderr = err_reader.join().unwrap_or_default();
        (stdout, stderr)
    }

    /// Loads `url`, lets its script run for `virtual_ms` of virtual time (network waits do not
    /// count), and returns the DOM and the console.
    pub fn load(&self, url: &str, virtual_ms: u64) -> Page {
        let (dom, stderr) = self.run(url, virtual_ms, &["--dump-dom".to_string()]);
        assert!(
            dom.contains("</html>"),
            "chromium printed no DOM for {url}:\n{stderr}"
        );
        Page {
            url: url.to_string(),
            dom,
            console: console_lines(&stderr),
        }
    }

    /// A PNG of `url` after `virtual_ms`, written to `out`.
    pub fn screenshot(&self, url: &str, virtual_ms: u64, out: &Path) {
        let (_, stderr) = self.run(
            url,
            virtual_ms,
            &[format!("--screenshot={}", out.display())],
        );
        assert!(out.exists(), "no screenshot of {url}:\n{stderr}");
    }
}

fn on_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    })
}

/// Chromium logs every console message as `...:CONSOLE:LINE] "text", source: URL (LINE)`.
fn console_lines(stderr: &str) -> Vec<String> {
    stderr
        .lines()
        .filter(|l| l.contains(":CONSOLE"))
        .map(str::to_string)
        .collect()
}

impl Page {
    /// The page rendered without a console message and without its error banner.
    pub fn assert_clean(&self) {
        assert!(
            self.console.is_empty(),
            "{}: console messages:\n{}",
            self.url,
            self.console.join("\n")
        );
        assert!(
            self.dom.contains(r#"<div id="error" hidden="">"#),
            "{}: the page shows an error:\n{}",
            self.url,
            self.dom
        );
    }

    /// The exact values (`data-v`) of the numbers the page shows under `key`, in page order.
    pub fn values(&self, key: &str) -> Vec<String> {
        let needle = format!(r#"data-k="{key}" data-v=""#);
        let mut out = Vec::new();
        let mut rest = self.dom.as_str();
        while let Some(at) = rest.find(&needle) {
            rest = &rest[at + needle.len()..];
            let end = rest.find('"').unwrap_or(rest.len());
            out.push(html_unescape(&rest[..end]));
        }
        out
    }

    /// The one value under `key`.
    pub fn value(&self, key: &str) -> String {
        let v = self.values(key);
        assert_eq!(v.len(), 1, "{}: {key} shown {} times", self.url, v.len());
        v.into_iter().next().unwrap_or_default()
    }

    /// How many times the page refreshed itself from the server.
    pub fn updates(&self) -> u64 {
        let needle = r#"data-updates=""#;
        self.dom
            .find(needle)
            .and_then(|at| {
                let rest = &self.dom[at + needle.len()..];
                rest[..rest.find('"')?].parse().ok()
            })
            .unwrap_or(0)
    }
}

fn html_unescape(s: &str) -> String {
    s.replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

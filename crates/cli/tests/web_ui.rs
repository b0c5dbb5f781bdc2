//! The web UI in a real browser: headless Chromium loads the pages of a real `cellar
//! standalone` and of a real cluster's master (ZooKeeper, a master, two region servers), runs
//! their script, and the test reads the DOM it left: the pages load without a console
//! message, show the numbers the JSON endpoints show, and keep updating while the server
//! works. `CELLAR_UI_SCREENSHOTS=DIR` also saves a PNG of each page there
//! (`scripts/ui-screenshots.sh`, for `docs/ui/`).

mod support;

use bytes::Bytes;
use cellar_client::{FamilySchema, RowMutation, Scan, TableSchema, LATEST_TIMESTAMP};
use serde_json::Value;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::browser::Browser;
use support::cluster::LocalCluster;
use support::{connect_blocking, wait_for, Server};

/// Virtual time a page runs before its DOM is read: several polls at `?interval=250`.
const VIRTUAL_MS: u64 = 3000;

fn json(server: &Server, path: &str) -> Value {
    serde_json::from_str(&server.http_get(path)).expect("the endpoint answers JSON")
}

fn screenshot(browser: &Browser, url: &str, name: &str) {
    if let Some(dir) = std::env::var_os("CELLAR_UI_SCREENSHOTS") {
        let dir = std::path::PathBuf::from(dir);
        std::fs::create_dir_all(&dir).expect("screenshot dir");
        browser.screenshot(url, VIRTUAL_MS * 4, &dir.join(format!("{name}.png")));
    }
}

fn put(t: &cellar_client::blocking::Table, row: &str) {
    t.put(RowMutation::new(Bytes::from(row.to_string())).put(
        b"f",
        b"q",
        LATEST_TIMESTAMP,
        vec![b'v'; 200],
    ))
    .expect("put");
}

/// Writes rows to `table` until dropped.
struct Writer {
    stop: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<u64>>,
}

impl Writer {
    fn start(native: &str, table: &str) -> Writer {
        let stop = Arc::new(AtomicBool::new(false));
        let (flag, native, table) = (stop.clone(), native.to_string(), table.to_string());
        let handle = std::thread::spawn(move || {
            let c = connect_blocking(&native);
            let t = c.table(&table);
            let deadline = Instant::now() + Duration::from_secs(300);
            let mut n = 0u64;
            while !flag.load(Ordering::SeqCst) && Instant::now() < deadline && n < 2_000_000 {
                put(
                    &t,
                    &format!("{}-live-{n:08}", ["a", "h", "q"][(n % 3) as usize]),
                );
                n += 1;
            }
            n
        });
        Writer {
            stop,
            handle: Some(handle),
        }
    }

    fn stop(mut self) -> u64 {
        self.stop.store(true, Ordering::SeqCst);
        self.handle
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

fn sum_regions(status: &Value) -> u64 {
    status["gauges"]["regions_per_table"]
        .as_object()
        .expect("regions_per_table")
        .values()
        .filter_map(Value::as_u64)
        .sum()
}

#[test]
fn standalone_pages_load_show_the_endpoints_numbers_and_update() {
    let browser = Browser::find();
    let server = Server::start_with_config("[rpc]\nslow_call_ms = 1\n");
    let http = server.http.clone().expect("http address");
    server.shell(
        "create 'users', 'f', SPLITS => ['g', 'p']\n\
         put 'users', 'alice', 'f:a', '1'\nput 'users', 'amy', 'f:a', '1'\n\
         put 'users', 'anna', 'f:a', '1'\nput 'users', 'hank', 'f:a', '2'\n\
         put 'users', 'zed', 'f:a', '3'\nflush 'users'\nget 'users', 'alice'",
    );
    // A scanner left open on the server.
    let c = connect_blocking(&server.native);
    let users = c.table("users");
    let mut scanner = users.scan(Scan::new().caching(1));
    assert!(scanner.next().is_some(), "a first row");

    // The overview: every number as /status says.
    let overview = browser.load(&format!("http://{http}/?interval=250"), VIRTUAL_MS);
    overview.assert_clean();
    let status = json(&server, "/status");
    assert!(overview.updates() >= 3, "polled: {}", overview.updates());
    assert_eq!(overview.value("regions"), sum_regions(&status).to_string());
    assert_eq!(overview.value("servers"), "1");
    let g = &status["gauges"];
    for key in ["store_files", "store_file_bytes", "memstore_bytes"] {
        assert_eq!(overview.value(key), g[key].to_string(), "{key}");
    }
    assert_eq!(overview.value("wal_state"), "ok");
    assert!(
        overview.dom.contains(r#"<a href="/table/users">users</a>"#),
        "the tables link to their pages:\n{}",
        overview.dom
    );
    assert_eq!(overview.values("table.regions"), ["1", "3"], "meta, users");
    screenshot(
        &browser,
        &format!("http://{http}/?interval=500"),
        "overview",
    );

    // This server: handlers, scanners, slow calls, the WAL, log lines.
    let page = browser.load(&format!("http://{http}/server?interval=250"), VIRTUAL_MS);
    page.assert_clean();
    let s = json(&server, "/api/server");
    assert_eq!(page.value("handlers"), s["handlers"]["count"].to_string());
    assert_eq!(page.value("open_scanners"), "1", "the scanner left open");
    assert_eq!(s["open_scanners"], 1);
    assert_eq!(page.value("wal.state"), "ok");
    assert_eq!(page.value("flush_queue"), s["queues"]["flush"].to_string());
    for method in ["CREATE_TABLE", "FLUSH_TABLE"] {
        assert!(
            page.dom.contains(&format!(r#"data-slow="{method}""#)),
            "{method} is a slow call over 1 ms:\n{}",
            page.dom
        );
    }
    assert!(
        page.dom.contains("table created table=users"),
        "recent log lines:\n{}",
        page.dom
    );
    screenshot(
        &browser,
        &format!("http://{http}/server?interval=500"),
        "server",
    );

    // The table page while a client writes: regions as /api/regions says, counts rising.
    let before = json(&server, "/api/regions?table=users");
    let regions = before["tables"][0]["regions"]
        .as_array()
        .expect("regions")
        .clone();
    let writes_before: u64 = regions
        .iter()
        .filter_map(|r| r["write_requests"].as_u64())
        .sum();
    let writer = Writer::start(&server.native, "users");
    let seen = wait_for(Duration::from_secs(30), || {
        let now = json(&server, "/api/regions?table=users");
        let w: u64 = now["tables"][0]["regions"]
            .as_array()?
            .iter()
            .filter_map(|r| r["write_requests"].as_u64())
            .sum();
        (w > writes_before + 100).then_some(())
    });
    assert!(seen.is_some(), "the writer writes");
    let table = browser.load(
        &format!("http://{http}/table/users?interval=250"),
        VIRTUAL_MS,
    );
    screenshot(
        &browser,
        &format!("http://{http}/table/users?interval=500"),
        "table",
    );
    let written = writer.stop();
    table.assert_clean();
    assert!(table.updates() >= 3, "polled: {}", table.updates());
    assert_eq!(table.value("regions"), "3");
    let starts: Vec<String> = regions
        .iter()
        .map(|r| r["start_key"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(starts, ["", "g", "p"]);
    assert_eq!(table.values("region.start_key"), starts);
    assert_eq!(table.values("region.end_key"), ["g", "p", ""]);
    let shown_writes: u64 = table
        .values("region.write_requests")
        .iter()
        .map(|v| v.parse::<u64>().expect("a count"))
        .sum();
    assert!(
        shown_writes > writes_before + 100,
        "the page shows the writes made while it was open ({shown_writes} shown, {writes_before} before, {written} written)"
    );
    let points: u64 = table
        .dom
        .split(r#"data-points=""#)
        .nth(1)
        .and_then(|r| r[..r.find('"')?].parse().ok())
        .unwrap_or(0);
    assert!(points >= 2, "the chart has points: {points}");
    let server_name = status["server"].as_str().expect("server name");
    assert_eq!(
        table.dom.matches(&format!(">{server_name}</a>")).count(),
        3,
        "each region names its server"
    );

    // A table that does not exist: the page says so.
    let missing = browser.load(&format!("http://{http}/table/nope?interval=250"), 1000);
    assert!(
        missing.dom.contains("table 'nope' does not exist"),
        "{}",
        missing.dom
    );
    drop(scanner);
}

#[test]
fn a_clusters_master_page_lists_every_server_and_links_to_each() {
    let browser = Browser::find();
    let cluster = LocalCluster::start(2);
    let (master, region_servers) = (&cluster.master, &cluster.region_servers);
    let listed = wait_for(Duration::from_secs(60), || {
        let s = json(master, "/status");
        (s["servers"].as_array()?.len() == 2).then_some(())
    });
    assert!(listed.is_some(), "the master lists both region servers");

    let c = connect_blocking(&master.native);
    c.admin()
        .create_table(
            TableSchema::new("spread", vec![FamilySchema::new("f")]),
            vec![Bytes::from_static(b"m")],
        )
        .expect("create a table of two regions");
    let t = c.table("spread");
    let written = wait_for(Duration::from_secs(60), || {
        for row in ["a1", "a2", "z1"] {
            if t.put(RowMutation::new(Bytes::from(row)).put(
                b"f",
                b"q",
                LATEST_TIMESTAMP,
                b"v".to_vec(),
            ))
            .is_err()
            {
                return None;
            }
        }
        Some(())
    });
    assert!(written.is_some(), "the cluster takes writes");

    let http = master.http.clone().expect("master http");
    let overview = browser.load(&format!("http://{http}/?interval=250"), VIRTUAL_MS);
    overview.assert_clean();
    assert_eq!(overview.value("servers"), "2");
    let root = overview.value("root");
    assert!(
        root.starts_with("file:///") && root.ends_with("/root"),
        "the root with its scheme: {root}"
    );
    for rs in region_servers {
        let rs_http = rs.http.clone().expect("region server http");
        assert!(
            overview
                .dom
                .contains(&format!(r#"href="http://{rs_http}/server""#)),
            "the master links to {rs_http}:\n{}",
            overview.dom
        );
    }
    assert!(
        !overview.dom.contains("unreachable"),
        "every server answered the page:\n{}",
        overview.dom
    );
    assert_eq!(
        overview.values("server.calls_per_s").len(),
        2,
        "a request rate per server"
    );
    screenshot(
        &browser,
        &format!("http://{http}/?interval=500"),
        "cluster-master",
    );

    // The table page on the master: each region with its server, and the numbers the page
    // fetched from that server.
    let table = browser.load(
        &format!("http://{http}/table/spread?interval=250"),
        VIRTUAL_MS,
    );
    table.assert_clean();
    assert_eq!(table.values("region.start_key"), ["", "m"]);
    let writes: u64 = table
        .values("region.write_requests")
        .iter()
        .map(|v| v.parse::<u64>().expect("a count"))
        .sum();
    assert!(
        writes >= 3,
        "the three puts, as the region servers count them: {writes}"
    );

    // A link followed: the region server's own page.
    let rs_http = region_servers[0].http.clone().expect("http");
    let page = browser.load(&format!("http://{rs_http}/server?interval=250"), 1500);
    page.assert_clean();
    assert_eq!(page.value("role"), "regionserver");
}

/// Issue 46 item 5: the master's overview lists a killed region server under "dead servers",
/// with its native and HTTP addresses beside its HBase name.
#[test]
fn a_clusters_master_page_lists_a_killed_region_server_as_dead() {
    let browser = Browser::find();
    let mut cluster = LocalCluster::start(2);
    let listed = wait_for(Duration::from_secs(60), || {
        let s = json(&cluster.master, "/status");
        (s["servers"].as_array()?.len() == 2).then_some(())
    });
    assert!(listed.is_some(), "the master lists both region servers");
    let victim = &mut cluster.region_servers[1];
    let native = victim.native.clone();
    let rs_http = victim.http.clone().expect("region server http");
    victim.kill9();
    let name = wait_for(Duration::from_secs(120), || {
        let s = json(&cluster.master, "/status");
        Some(
            s["dead_servers"].as_array()?.first()?["name"]
                .as_str()?
                .to_string(),
        )
    })
    .expect("the master lists the killed server as dead");

    let http = cluster.master.http.clone().expect("master http");
    let overview = browser.load(&format!("http://{http}/?interval=250"), VIRTUAL_MS);
    overview.assert_clean();
    assert_eq!(overview.value("dead_servers"), "1");
    assert_eq!(overview.values("dead.name"), [name]);
    assert_eq!(overview.values("dead.native"), [native]);
    assert_eq!(overview.values("dead.http"), [rs_http]);
    assert_eq!(overview.value("servers"), "1", "one live region server");
}

/// Issue 46 item 6: a table whose data is all in the memstore shows its memstore size beside
/// its store file size (0 B), and the table page says its read and write counts are since
/// each region opened (an alter reopens the regions and the counts start again).
#[test]
fn the_overview_shows_a_tables_memstore_and_the_counts_say_since_when() {
    let browser = Browser::find();
    let server = Server::start();
    let http = server.http.clone().expect("http address");
    server.shell("create 'fresh', 'f'\nput 'fresh', 'r1', 'f:a', 'not flushed'");

    let overview = browser.load(&format!("http://{http}/?interval=250"), VIRTUAL_MS);
    overview.assert_clean();
    let names: Vec<Value> = json(&server, "/api/regions")["tables"]
        .as_array()
        .expect("tables")
        .iter()
        .map(|t| t["name"].clone())
        .collect();
    let i = names
        .iter()
        .position(|n| n == "fresh")
        .expect("the table is listed");
    let at = |key: &str| {
        let all = overview.values(key);
        assert_eq!(all.len(), names.len(), "{key}: {all:?}, tables {names:?}");
        all[i].parse::<u64>().expect("a number of bytes")
    };
    assert_eq!(at("table.store_file_bytes"), 0, "nothing flushed yet");
    let memstore = at("table.memstore_bytes");
    let api = json(&server, "/api/regions?table=fresh");
    assert_eq!(
        Some(memstore),
        api["tables"][0]["regions"][0]["memstore_bytes"].as_u64(),
        "the memstore as /api/regions has it"
    );
    assert!(memstore > 0, "the put is in the memstore");

    let table = browser.load(
        &format!("http://{http}/table/fresh?interval=250"),
        VIRTUAL_MS,
    );
    table.assert_clean();
    for heading in ["Reads since opened", "Writes since opened"] {
        assert!(table.dom.contains(heading), "{heading}:\n{}", table.dom);
    }
}

//! The web UI on the HTTP port: the pages (`/` overview, `/table/NAME`, `/server`), their
//! script and style compiled into the binary (no CDN, nothing fetched from elsewhere), and the
//! JSON they draw from: `/status`, `/api/regions[?table=NAME]` and `/api/server`
//! (`docs/web-ui.md`). The pages render in the browser from that JSON, so what a page shows
//! is what the endpoints say; they poll it to stay live.
//!
//! In a cluster the master's pages list every region server and link to its own pages; a
//! table page fetches each region's size and request counts from the server holding it
//! (those JSON answers allow any origin: they are read-only and on the same network as the
//! metrics).

use crate::status::TableView;
use serde_json::{json, Value};

const PAGE: &str = include_str!("web/page.html");
const SCRIPT: &str = include_str!("web/cellar.js");
const STYLE: &str = include_str!("web/cellar.css");
const ICON: &str = include_str!("web/favicon.svg");

/// A static answer of the UI: its content type and body.
pub(crate) fn asset(path: &str) -> Option<(&'static str, &'static str)> {
    match path {
        "/" | "/server" => Some(("text/html; charset=utf-8", PAGE)),
        p if p.starts_with("/table/") => Some(("text/html; charset=utf-8", PAGE)),
        "/ui/cellar.js" => Some(("text/javascript; charset=utf-8", SCRIPT)),
        "/ui/cellar.css" => Some(("text/css; charset=utf-8", STYLE)),
        "/ui/favicon.svg" | "/favicon.ico" => Some(("image/svg+xml", ICON)),
        _ => None,
    }
}

/// `/api/regions`: `here` is this server's name, used for the regions it holds itself.
pub(crate) fn regions_json(here: &str, here_http: &str, tables: &[TableView]) -> String {
    let tables: Vec<Value> = tables
        .iter()
        .map(|t| {
            json!({
                "name": t.name,
                "enabled": t.enabled,
                "families": t.families,
                "regions": t.regions.iter().map(|r| {
                    let (server, http) = if r.server.is_empty() && r.load.is_some() {
                        (here, here_http)
                    } else {
                        (r.server.as_str(), r.server_http.as_str())
                    };
                    let mut v = json!({
                        "name": r.name,
                        "id": r.id,
                        "start_key": r.start_key,
                        "end_key": r.end_key,
                        "state": r.state,
                        "server": server,
                        "server_http": http,
                        "open_here": r.load.is_some(),
                    });
                    if let (Some(l), Some(o)) = (r.load.as_ref(), v.as_object_mut()) {
                        o.insert("memstore_bytes".into(), l.memstore_bytes.into());
                        o.insert("store_file_bytes".into(), l.store_file_bytes.into());
                        o.insert("store_files".into(), l.store_files.into());
                        o.insert("read_requests".into(), l.read_requests.into());
                        o.insert("write_requests".into(), l.write_requests.into());
                    }
                    v
                }).collect::<Vec<_>>(),
            })
        })
        .collect();
    let mut s = json!({ "server": here, "tables": tables }).to_string();
    s.push('\n');
    s
}

/// What the server page shows besides `/status`: handlers, queues, slow calls, log lines.
pub(crate) struct ServerPage<'a> {
    pub name: &'a str,
    pub role: &'a str,
    pub rpc: &'a crate::config::RpcConfig,
    pub native: &'a crate::metrics::RpcMetrics,
    pub hbase: Option<&'a crate::metrics::RpcMetrics>,
    pub gauges: &'a crate::status::Gauges,
}

/// `/api/server`.
pub(crate) fn server_json(p: &ServerPage<'_>) -> String {
    let front = |m: &crate::metrics::RpcMetrics| {
        json!({
            "handlers_busy": m.handlers_busy(),
            "call_queue_length": m.queue_depth(),
            "open_connections": m.open_connections(),
            "calls": m.total_calls(),
            "slow_calls": m.slow_calls().total(),
        })
    };
    let mut slow: Vec<(&str, crate::metrics::SlowCall)> = p
        .native
        .slow_calls()
        .recent()
        .into_iter()
        .map(|c| ("native", c))
        .collect();
    if let Some(h) = p.hbase {
        slow.extend(h.slow_calls().recent().into_iter().map(|c| ("hbase", c)));
    }
    slow.sort_by_key(|(_, c)| std::cmp::Reverse(c.at_ms));
    let g = p.gauges;
    let v = json!({
        "server": p.name,
        "role": p.role,
        "handlers": {
            "count": p.rpc.handler_count,
            "max_queued_calls": p.rpc.max_queued_calls,
            "io_threads": p.rpc.io_threads,
            "native": front(p.native),
            "hbase": p.hbase.map(front),
        },
        "queues": {
            "flush": g.flush_queue,
            "compaction": g.compaction_queue,
        },
        "open_scanners": g.open_scanners,
        "prepared_scans_open": g.prepared_scans_open,
        "slow_call_ms": p.rpc.slow_call_ms,
        "slow_calls": slow.iter().map(|(front, c)| json!({
            "at_ms": c.at_ms,
            "front": front,
            "method": c.method,
            "duration_ms": c.duration_us as f64 / 1000.0,
            "failed": c.failed,
        })).collect::<Vec<_>>(),
        "wal": crate::status::wal_json(g),
        "log": crate::logs::recent(),
    });
    let mut s = v.to_string();
    s.push('\n');
    s
}

/// `%XX` escapes of a URL path segment or query value decoded (`+` stays `+`); `None` when an
/// escape is malformed or the result is not UTF-8.
pub(crate) fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_values_are_decoded_and_bad_escapes_refused() {
        assert_eq!(percent_decode("ns%3At").as_deref(), Some("ns:t"));
        assert_eq!(percent_decode("%4"), None);
        assert_eq!(percent_decode("%zz"), None);
        assert_eq!(percent_decode("%ff"), None, "not UTF-8");
    }

    #[test]
    fn every_page_and_asset_is_served_and_others_are_not() {
        for p in [
            "/",
            "/server",
            "/table/t1",
            "/ui/cellar.js",
            "/ui/cellar.css",
        ] {
            assert!(asset(p).is_some(), "{p}");
        }
        assert!(asset("/ui/other.js").is_none());
        // The page loads nothing from elsewhere.
        for (_, body) in [asset("/"), asset("/ui/cellar.js"), asset("/ui/cellar.css")]
            .into_iter()
            .flatten()
        {
            assert!(!body.contains("http://") && !body.contains("https://"));
        }
    }
}

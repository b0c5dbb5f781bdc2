//! The Grafana dashboard (`ops/grafana/cellar-dashboard.json`) asks only for metrics a real
//! `cellar standalone` serves on `/metrics`: every `cellar_*` name in its queries is one the
//! server exports once it has served calls (a histogram's `_bucket`/`_count`/`_sum` series
//! included), so no panel is silently empty after a metric is renamed.

mod support;

use std::collections::BTreeSet;
use std::path::Path;
use support::Server;

/// The `cellar_*` metric names in a PromQL expression.
fn names(expr: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = expr;
    while let Some(at) = rest.find("cellar_") {
        let name: String = rest[at..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        rest = &rest[at + name.len()..];
        out.push(name);
    }
    out
}

#[test]
fn every_metric_the_dashboard_queries_is_served() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../ops/grafana/cellar-dashboard.json");
    let dashboard: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("the dashboard file"))
            .expect("the dashboard is JSON");
    let mut wanted = BTreeSet::new();
    let panels = dashboard["panels"].as_array().expect("panels");
    assert!(panels.len() >= 10, "a dashboard of {} panels", panels.len());
    for p in panels {
        let targets = p["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "panel {} has no query", p["title"]);
        for t in targets {
            wanted.extend(names(t["expr"].as_str().expect("a query")));
        }
    }
    let server = Server::start();
    // Per-method and per-error series appear once there was such a call: make some.
    let client = support::connect_blocking(&server.native);
    client
        .admin()
        .create_table(
            cellar_client::TableSchema::new("t", vec![cellar_client::FamilySchema::new("f")]),
            vec![],
        )
        .expect("create");
    client
        .table("t")
        .put(cellar_client::RowMutation::new("r").put(
            b"f",
            b"q",
            cellar_client::LATEST_TIMESTAMP,
            "v",
        ))
        .expect("put");
    client
        .table("t")
        .get(cellar_client::Get::new("r"))
        .expect("get");
    assert!(client
        .table("missing")
        .get(cellar_client::Get::new("r"))
        .is_err());
    let metrics = server.http_get("/metrics");
    let served: BTreeSet<&str> = metrics
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split([' ', '{']).next())
        .collect();
    let missing: Vec<&String> = wanted
        .iter()
        .filter(|w| !served.contains(w.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "the dashboard queries metrics the server does not serve: {missing:?}"
    );
}

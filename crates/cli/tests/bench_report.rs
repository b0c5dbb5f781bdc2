//! `cellar bench report`: charts from small JSON fixtures of every kind.

use std::path::Path;
use std::process::Command;

fn ycsb(threads: u64, throughput: f64) -> serde_json::Value {
    serde_json::json!({
        "kind": "ycsb", "phase": "run", "workload": "workloada", "db": "cellar",
        "threads": threads, "throughput": throughput,
        "operations": {
            "READ": {"p50_us": 90.0, "p95_us": 180.0, "p99_us": 400.0, "p999_us": 900.0, "count": 10},
            "UPDATE": {"p50_us": 120.0, "p95_us": 250.0, "p99_us": 600.0, "p999_us": 1500.0}
        }
    })
}

fn write(path: &Path, v: &serde_json::Value) {
    std::fs::write(path, serde_json::to_string(v).expect("encode")).expect("write fixture");
}

fn report(inputs: &[&Path], out: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_cellar"))
        .args(["bench", "report", "--input"])
        .args(inputs)
        .arg("--out")
        .arg(out)
        .output()
        .expect("run cellar bench report")
}

#[test]
fn charts_of_every_kind_are_written_as_png_and_svg() {
    let dir = tempfile::tempdir().expect("temp dir");
    let results = dir.path().join("results");
    std::fs::create_dir(&results).expect("mkdir");
    for (t, tp) in [(1, 4000.0), (4, 11000.0), (16, 19000.0)] {
        write(&results.join(format!("ycsb-a-{t}.json")), &ycsb(t, tp));
    }
    let mut stages = serde_json::Map::new();
    for (i, s) in [
        "client_serialize",
        "send_prepare",
        "wire_out",
        "server_queue",
        "server_processing",
        "server_serialize",
        "wire_back",
        "client_process",
    ]
    .iter()
    .enumerate()
    {
        stages.insert(format!("{s}_us"), serde_json::json!(1.5 + i as f64));
    }
    stages.insert("total_us".into(), serde_json::json!(40.0));
    let stages = serde_json::Value::Object(stages);
    let breakdown = dir.path().join("breakdown.json");
    write(
        &breakdown,
        &serde_json::json!({
            "tool": "cellar-bench", "kind": "breakdown", "value_size": 1024, "ops": 100,
            "stages": {"get": stages.clone(), "put": stages}
        }),
    );
    let mut rows = Vec::new();
    for size in [10, 1000] {
        for (i, test) in [
            "sequential-write",
            "random-write",
            "random-read",
            "random-read-memory",
            "scan",
        ]
        .iter()
        .enumerate()
        {
            rows.push(serde_json::json!({
                "test": test, "value_size": size, "rows": 100, "threads": 1, "ops": 100,
                "seconds": 0.1, "ops_per_sec": 1000.0 * (i + 1) as f64, "mb_per_sec": 1.0
            }));
        }
    }
    let bigtable = dir.path().join("bigtable.json");
    write(
        &bigtable,
        &serde_json::json!({
            "tool": "cellar-bench", "kind": "bigtable", "db": "embedded:/x", "results": rows
        }),
    );

    let out = dir.path().join("charts");
    let run = report(&[&results, &breakdown, &bigtable], &out);
    assert!(
        run.status.success(),
        "stdout: {}\nstderr: {}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    for name in [
        "ycsb-throughput",
        "ycsb-latency-workloada-run-cellar-t1",
        "ycsb-latency-workloada-run-cellar-t16",
        "breakdown",
        "bigtable",
    ] {
        let png = std::fs::read(out.join(format!("{name}.png"))).expect(name);
        assert!(png.len() > 1000, "{name}.png is {} bytes", png.len());
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "{name}.png magic");
        let svg = std::fs::read_to_string(out.join(format!("{name}.svg"))).expect(name);
        assert!(svg.contains("<svg"), "{name}.svg has no svg root");
        assert!(
            svg.trim_end().ends_with("</svg>"),
            "{name}.svg is not closed"
        );
        assert!(
            svg.contains("<rect") || svg.contains("<polyline"),
            "{name}.svg draws nothing"
        );
    }
    let breakdown_svg = std::fs::read_to_string(out.join("breakdown.svg")).expect("breakdown.svg");
    assert!(
        breakdown_svg.contains("server_processing"),
        "legend names the stages"
    );
}

#[test]
fn bad_inputs_are_named() {
    let dir = tempfile::tempdir().expect("temp dir");
    let bad = dir.path().join("bad.json");
    std::fs::write(
        &bad,
        r#"{"kind":"ycsb","phase":"run","workload":"a","db":"x","threads":2}"#,
    )
    .expect("write");
    let run = report(&[&bad], &dir.path().join("out"));
    assert!(!run.status.success());
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        stderr.contains("bad.json") && stderr.contains("throughput"),
        "{stderr}"
    );
    let other = dir.path().join("other.json");
    std::fs::write(&other, r#"{"kind":"tpcc"}"#).expect("write");
    let run = report(&[&other], &dir.path().join("out"));
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(!run.status.success() && stderr.contains("tpcc"), "{stderr}");
}

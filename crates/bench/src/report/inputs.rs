//! Reading benchmark JSON results, recognised by their `kind`.

use serde_json::Value;
use std::path::PathBuf;

/// One YCSB phase result.
#[derive(Debug, Clone)]
pub struct Ycsb {
    pub phase: String,
    pub workload: String,
    pub db: String,
    pub threads: u64,
    pub throughput: f64,
    /// (operation, [p50, p95, p99, p99.9] µs), operations sorted by name.
    pub latencies: Vec<(String, [f64; 4])>,
}

/// A `cellar bench breakdown` result: (operation, [(stage, µs)]).
#[derive(Debug, Clone)]
pub struct Breakdown {
    pub value_size: u64,
    pub ops: Vec<(String, Vec<(String, f64)>)>,
}

/// A `cellar bench bigtable` result: (test, value size, ops/s).
#[derive(Debug, Clone)]
pub struct Bigtable {
    pub db: String,
    pub results: Vec<(String, u64, f64)>,
}

#[derive(Debug, Default)]
pub struct Results {
    pub ycsb: Vec<Ycsb>,
    pub breakdowns: Vec<Breakdown>,
    pub bigtables: Vec<Bigtable>,
}

impl Results {
    pub fn is_empty(&self) -> bool {
        self.ycsb.is_empty() && self.breakdowns.is_empty() && self.bigtables.is_empty()
    }
}

/// The stages of a breakdown, in call order (the JSON keys less `_us`).
pub const STAGES: [&str; 8] = [
    "client_serialize",
    "send_prepare",
    "wire_out",
    "server_queue",
    "server_processing",
    "server_serialize",
    "wire_back",
    "client_process",
];

/// Reads every file given, and every `*.json` file of every directory given.
pub fn load(inputs: &[PathBuf]) -> Result<Results, String> {
    let mut files = Vec::new();
    for input in inputs {
        if input.is_dir() {
            let entries = std::fs::read_dir(input)
                .map_err(|e| format!("cannot list {}: {e}", input.display()))?;
            let mut found: Vec<PathBuf> = entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "json"))
                .collect();
            found.sort();
            files.extend(found);
        } else {
            files.push(input.clone());
        }
    }
    let mut results = Results::default();
    for file in files {
        let text = std::fs::read_to_string(&file)
            .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
        let doc: Value = serde_json::from_str(&text)
            .map_err(|e| format!("{} is not JSON: {e}", file.display()))?;
        let at = |e: String| format!("{}: {e}", file.display());
        match doc.get("kind").and_then(Value::as_str) {
            Some("ycsb") => results.ycsb.push(ycsb(&doc).map_err(at)?),
            Some("breakdown") => results.breakdowns.push(breakdown(&doc).map_err(at)?),
            Some("bigtable") => results.bigtables.push(bigtable(&doc).map_err(at)?),
            other => {
                return Err(at(format!(
                "unknown result kind {other:?} (expected \"ycsb\", \"breakdown\" or \"bigtable\")"
            )))
            }
        }
    }
    Ok(results)
}

fn field<'a>(v: &'a Value, name: &str) -> Result<&'a Value, String> {
    v.get(name)
        .ok_or_else(|| format!("field {name:?} is missing"))
}

fn num(v: &Value, name: &str) -> Result<f64, String> {
    field(v, name)?
        .as_f64()
        .ok_or_else(|| format!("field {name:?} is not a number"))
}

fn text(v: &Value, name: &str) -> Result<String, String> {
    match field(v, name)? {
        Value::String(s) => Ok(s.clone()),
        other => Ok(other.to_string()),
    }
}

fn ycsb(doc: &Value) -> Result<Ycsb, String> {
    let mut latencies = Vec::new();
    if let Some(ops) = doc.get("operations").and_then(Value::as_object) {
        for (op, stats) in ops {
            // Operations without latencies (a phase's totals, say) have no bars.
            if stats.get("p50_us").is_none() {
                continue;
            }
            let p = |name: &str| num(stats, name).map_err(|e| format!("operations.{op}: {e}"));
            latencies.push((
                op.clone(),
                [p("p50_us")?, p("p95_us")?, p("p99_us")?, p("p999_us")?],
            ));
        }
    }
    latencies.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(Ycsb {
        phase: text(doc, "phase")?,
        workload: text(doc, "workload")?,
        db: text(doc, "db")?,
        threads: num(doc, "threads")? as u64,
        throughput: num(doc, "throughput")?,
        latencies,
    })
}

fn breakdown(doc: &Value) -> Result<Breakdown, String> {
    let stages = field(doc, "stages")?;
    let mut ops = Vec::new();
    for op in ["get", "put"] {
        let s = field(stages, op).map_err(|e| format!("stages: {e}"))?;
        let values = STAGES
            .iter()
            .map(|name| {
                num(s, &format!("{name}_us"))
                    .map(|us| (name.to_string(), us))
                    .map_err(|e| format!("stages.{op}: {e}"))
            })
            .collect::<Result<Vec<_>, String>>()?;
        ops.push((op.to_string(), values));
    }
    Ok(Breakdown {
        value_size: num(doc, "value_size")? as u64,
        ops,
    })
}

fn bigtable(doc: &Value) -> Result<Bigtable, String> {
    let list = field(doc, "results")?
        .as_array()
        .ok_or("field \"results\" is not a list")?;
    let results = list
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let at = |e: String| format!("results[{i}]: {e}");
            Ok((
                text(r, "test").map_err(at)?,
                num(r, "value_size").map_err(at)? as u64,
                num(r, "ops_per_sec").map_err(at)?,
            ))
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok(Bigtable {
        db: text(doc, "db")?,
        results,
    })
}

/// A file-name-safe form of `s`.
pub fn slug(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect()
}

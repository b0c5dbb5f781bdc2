//! `cellar bench availability`: how long each region could not be written, while something
//! else (a chaos script) kills servers. One probe per region writes a row every
//! `--interval-ms` with a short timeout and no client retries; a gap between two acknowledged
//! writes longer than `--threshold-ms` is an outage of that region. Prints every outage and
//! the longest per region, and with `--json` writes them for `scripts/bench-cluster.sh`.

use bytes::Bytes;
use cellar_client::blocking::Client;
use cellar_client::{ClientConfig, FamilySchema, RowMutation, TableSchema, LATEST_TIMESTAMP};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Command-line options of `cellar bench availability`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The cluster: cellar://HOST:PORT (the master; several: HOST:PORT,HOST:PORT).
    #[arg(long, default_value = "cellar://127.0.0.1:16100")]
    pub db: String,
    /// The probe table (family `f`), created with --regions regions if it does not exist.
    #[arg(long, default_value = "availability_probe")]
    pub table: String,
    /// Regions of the probe table: split points 01, 02, ...
    #[arg(long, default_value_t = 10)]
    pub regions: u32,
    /// Seconds to probe for.
    #[arg(long, default_value_t = 60)]
    pub duration: u64,
    /// Time between one probe's writes.
    #[arg(long, default_value_t = 50)]
    pub interval_ms: u64,
    /// A write that takes longer than this fails (and the probe tries again).
    #[arg(long, default_value_t = 1000)]
    pub timeout_ms: u64,
    /// Gaps between acknowledged writes longer than this are outages.
    #[arg(long, default_value_t = 1000)]
    pub threshold_ms: u64,
    /// Also write the results here (JSON).
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// One region's time without an acknowledged write.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Outage {
    pub region: u32,
    /// Seconds from the start of the probe to the last write before the gap.
    pub from_s: f64,
    /// Seconds from that write to the next acknowledged one.
    pub seconds: f64,
}

/// What a probe run saw.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Report {
    pub regions: u32,
    pub duration_s: f64,
    pub writes: u64,
    pub failed_writes: u64,
    pub outages: Vec<Outage>,
    /// Per region, its longest gap between acknowledged writes (seconds).
    pub longest: Vec<f64>,
}

fn address(db: &str) -> Result<String, String> {
    match db
        .strip_prefix("cellar://")
        .map(|a| a.trim_end_matches('/'))
    {
        Some(a) if !a.is_empty() => Ok(a.to_string()),
        _ => Err(format!("--db {db}: give the cluster as cellar://HOST:PORT")),
    }
}

/// The row region `i` of the probe table holds (region 0 is below "01").
fn probe_row(i: u32) -> Bytes {
    Bytes::from(format!("{i:02}-probe"))
}

pub fn run(a: Args) -> Result<(), String> {
    if a.regions == 0 || a.regions > 99 {
        return Err("--regions must be 1 to 99".into());
    }
    let addr = address(&a.db)?;
    let config = ClientConfig {
        rpc_timeout: Duration::from_millis(a.timeout_ms.max(1)),
        retries: 0,
        ..ClientConfig::default()
    };
    let admin_client = Client::connect(&addr).map_err(|e| format!("{addr}: {e}"))?;
    let admin = admin_client.admin();
    if !admin.table_exists(&a.table).map_err(|e| e.to_string())? {
        let splits = (1..a.regions)
            .map(|i| Bytes::from(format!("{i:02}")))
            .collect();
        admin
            .create_table(
                TableSchema::new(&a.table, vec![FamilySchema::new("f")]),
                splits,
            )
            .map_err(|e| format!("creating {}: {e}", a.table))?;
    }
    let started = Instant::now();
    let deadline = started + Duration::from_secs(a.duration);
    let interval = Duration::from_millis(a.interval_ms);
    let threshold = Duration::from_millis(a.threshold_ms);
    let probes: Vec<_> = (0..a.regions)
        .map(|region| {
            let (addr, config, table) = (addr.clone(), config.clone(), a.table.clone());
            std::thread::spawn(move || -> Result<(u64, u64, Vec<Outage>, f64), String> {
                let client = Client::connect_with(&addr, config).map_err(|e| e.to_string())?;
                let t = client.table(&table);
                let (mut writes, mut failed, mut outages, mut longest) =
                    (0u64, 0u64, Vec::new(), 0f64);
                let mut last_ok = Instant::now();
                while Instant::now() < deadline {
                    let m = RowMutation::new(probe_row(region)).put(
                        b"f",
                        b"t",
                        LATEST_TIMESTAMP,
                        Bytes::from(format!("{:?}", started.elapsed())),
                    );
                    writes += 1;
                    if t.put(m).is_ok() {
                        let gap = last_ok.elapsed();
                        longest = longest.max(gap.as_secs_f64());
                        if gap > threshold {
                            outages.push(Outage {
                                region,
                                from_s: (last_ok - started).as_secs_f64(),
                                seconds: gap.as_secs_f64(),
                            });
                        }
                        last_ok = Instant::now();
                    } else {
                        failed += 1;
                    }
                    std::thread::sleep(interval);
                }
                // A region still down at the end is an outage up to now.
                let gap = last_ok.elapsed();
                longest = longest.max(gap.as_secs_f64());
                if gap > threshold + interval {
                    outages.push(Outage {
                        region,
                        from_s: (last_ok - started).as_secs_f64(),
                        seconds: gap.as_secs_f64(),
                    });
                }
                Ok((writes, failed, outages, longest))
            })
        })
        .collect();
    let mut report = Report {
        regions: a.regions,
        ..Report::default()
    };
    for p in probes {
        let (writes, failed, outages, longest) = p
            .join()
            .map_err(|_| "a probe thread panicked".to_string())??;
        report.writes += writes;
        report.failed_writes += failed;
        report.outages.extend(outages);
        report.longest.push(longest);
    }
    report.duration_s = started.elapsed().as_secs_f64();
    report.outages.sort_by(|x, y| x.from_s.total_cmp(&y.from_s));
    println!(
        "availability: {} regions, {:.0} s, {} writes ({} failed), {} outages over {} ms",
        report.regions,
        report.duration_s,
        report.writes,
        report.failed_writes,
        report.outages.len(),
        a.threshold_ms
    );
    for o in &report.outages {
        println!(
            "outage: region {:02} at {:.1} s for {:.2} s",
            o.region, o.from_s, o.seconds
        );
    }
    let mut longest = report.longest.clone();
    longest.sort_by(f64::total_cmp);
    if let (Some(min), Some(max)) = (longest.first(), longest.last()) {
        println!(
            "longest gap per region: min {min:.2} s, median {:.2} s, max {max:.2} s",
            longest[longest.len() / 2]
        );
    }
    if let Some(path) = &a.json {
        let json = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
        std::fs::write(path, json).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_rows_fall_in_their_regions() {
        // Region i holds [i, i+1) in the split points 01, 02, ...; region 0 is below "01".
        assert!(probe_row(0) < "01");
        for i in 1..10u32 {
            assert!(probe_row(i) >= format!("{i:02}").as_bytes());
            assert!(probe_row(i) < format!("{:02}", i + 1).as_bytes());
        }
        assert!(address("cellar://").is_err());
        assert_eq!(address("cellar://a:1,b:2/").as_deref(), Ok("a:1,b:2"));
    }
}

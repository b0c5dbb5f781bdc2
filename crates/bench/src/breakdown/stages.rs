//! Averaging call timings per stage, and printing them.

use cellar_client::CallTiming;
use std::fmt::Write;

/// Running sums of the stages of many calls.
#[derive(Debug, Default, Clone)]
pub struct StageMeans {
    calls: u64,
    /// Nanoseconds per stage, in [`CallTiming::stages`] order.
    sums: [u128; 8],
    total: u128,
}

impl StageMeans {
    pub fn add(&mut self, t: &CallTiming) {
        self.calls += 1;
        for (sum, (_, d)) in self.sums.iter_mut().zip(t.stages()) {
            *sum += d.as_nanos();
        }
        self.total += t.total.as_nanos();
    }

    fn mean_us(&self, nanos: u128) -> f64 {
        if self.calls == 0 {
            0.0
        } else {
            nanos as f64 / self.calls as f64 / 1000.0
        }
    }

    /// (stage name, mean µs) in call order.
    pub fn means(&self) -> Vec<(&'static str, f64)> {
        CallTiming::default()
            .stages()
            .iter()
            .zip(self.sums)
            .map(|((name, _), sum)| (*name, self.mean_us(sum)))
            .collect()
    }

    pub fn total_us(&self) -> f64 {
        self.mean_us(self.total)
    }

    /// `{"client_serialize_us": .., ..., "total_us": ..}`.
    pub fn to_json(&self) -> serde_json::Value {
        let mut map = serde_json::Map::new();
        for (name, us) in self.means() {
            map.insert(format!("{name}_us"), serde_json::json!(round3(us)));
        }
        map.insert(
            "total_us".into(),
            serde_json::json!(round3(self.total_us())),
        );
        serde_json::Value::Object(map)
    }
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// The human-readable table: one row per stage, µs and share of the total for Get and Put.
pub fn table(ops: u64, value_size: usize, get: &StageMeans, put: &StageMeans) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Per-stage latency, mean of {ops} calls each, {value_size}-byte values \
         (wire = round trip - server time, split in halves as out/back)"
    );
    let _ = writeln!(
        out,
        "{:<20} {:>10} {:>7} {:>10} {:>7}",
        "stage", "get µs", "get %", "put µs", "put %"
    );
    let share = |us: f64, total: f64| if total > 0.0 { 100.0 * us / total } else { 0.0 };
    for ((name, g), (_, p)) in get.means().into_iter().zip(put.means()) {
        let _ = writeln!(
            out,
            "{:<20} {:>10.2} {:>6.1}% {:>10.2} {:>6.1}%",
            name,
            g,
            share(g, get.total_us()),
            p,
            share(p, put.total_us())
        );
    }
    let _ = writeln!(
        out,
        "{:<20} {:>10.2} {:>7} {:>10.2} {:>7}",
        "total",
        get.total_us(),
        "",
        put.total_us(),
        ""
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn means_and_json_follow_the_stages() {
        let t = CallTiming {
            client_serialize: Duration::from_micros(2),
            send_prepare: Duration::from_micros(1),
            wire_out: Duration::from_micros(10),
            server_queue: Duration::from_micros(3),
            server_processing: Duration::from_micros(20),
            server_serialize: Duration::from_micros(1),
            wire_back: Duration::from_micros(10),
            client_process: Duration::from_micros(3),
            total: Duration::from_micros(50),
        };
        let mut m = StageMeans::default();
        m.add(&t);
        m.add(&CallTiming {
            server_processing: Duration::from_micros(40),
            total: Duration::from_micros(70),
            ..t
        });
        let j = m.to_json();
        assert_eq!(j["server_processing_us"], serde_json::json!(30.0));
        assert_eq!(j["total_us"], serde_json::json!(60.0));
        assert_eq!(j["wire_out_us"], serde_json::json!(10.0));
        let text = table(2, 10, &m, &m);
        assert!(text.contains("server_queue"), "{text}");
    }
}

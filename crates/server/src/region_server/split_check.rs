//! When a region is big enough to split (Hypertable's policy: `split.initial_bytes`, doubling
//! with each split of the table up to `split.max_bytes`, or the table's `MAX_FILESIZE`), and a
//! cluster region server's split thread, which asks its master to split such regions. The
//! split itself is the master's (`crate::master::split_procedure`).

use super::RegionServer;
use crate::names;
use crate::router::{HostedRegion, TableRoute};
use bytes::Bytes;

/// The size at which a region of table `t` splits: its `MAX_FILESIZE` when it sets one (as
/// HBase's constant-size policy), else [`split_size`] of the server's settings.
pub(crate) fn table_split_size(cfg: &crate::config::SplitConfig, t: &TableRoute) -> u64 {
    t.schema
        .options
        .max_file_size
        .unwrap_or_else(|| split_size(cfg.initial_bytes, cfg.max_bytes, t.splits))
}

/// The split size of a table split `splits` times: `initial × 2^splits`, at most `max`.
pub fn split_size(initial: u64, max: u64, splits: u32) -> u64 {
    let mut size = initial.min(max);
    for _ in 0..splits {
        size = size.saturating_mul(2);
        if size >= max {
            return max;
        }
    }
    size
}

/// Where a region past the split size `limit` splits: its middle row, unless it still
/// reads its parent's files (references) or has no middle row yet.
pub(crate) fn split_point(hosted: &HostedRegion, limit: u64) -> Option<Bytes> {
    hosted
        .if_open(|r| {
            let s = r.stats();
            let big = !r.has_references() && s.store_file_bytes + s.memstore_bytes >= limit;
            if big {
                r.middle_row()
            } else {
                None
            }
        })
        .flatten()
}

impl RegionServer {
    /// A cluster region server's split thread: regions past the split size are reported to
    /// the master with their middle row; the master runs the split (and its janitor).
    pub(crate) fn split_request_tick(&self) {
        if !self.config.split.auto || self.check_running().is_err() {
            return;
        }
        let Some(request) = self.split_requester.lock().clone() else {
            return;
        };
        let cfg = &self.config.split;
        for (name, t) in self.router.tables() {
            if names::is_system(&name) {
                continue;
            }
            let limit = table_split_size(cfg, &t);
            for hosted in t.regions.values() {
                if let Some(row) = split_point(hosted, limit) {
                    if let Err(e) = request(&name, row) {
                        tracing::warn!(table = %name, region = hosted.info.id, error = %e, "asking the master to split a region");
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_size_doubles_up_to_the_max() {
        assert_eq!(split_size(64, 1000, 0), 64);
        assert_eq!(split_size(64, 1000, 1), 128);
        assert_eq!(split_size(64, 1000, 3), 512);
        assert_eq!(split_size(64, 1000, 4), 1000);
        assert_eq!(split_size(64, 1000, u32::MAX), 1000);
        assert_eq!(split_size(u64::MAX / 2, u64::MAX, 5), u64::MAX);
    }
}

//! What the master reports about the cluster (`GetClusterStatus`: `Admin.getClusterMetrics`,
//! `getRegionServers`) and a region server about its regions (`GetRegionLoad`:
//! `Admin.getRegionMetrics`). A standalone Cellar is one process: the active master and the
//! only live region server, with no backup masters, dead servers or balancer. A cluster's
//! master lists its dead region servers as HBase's does.

use super::names;
use super::registry;
use super::HbaseService;
use crate::master::Assignment;
use crate::meta::META_TABLE;
use crate::router::RegionState;
use bytes::Bytes;
use cellar_proto::hbase;
use cellar_proto::hbase::region_specifier::RegionSpecifierType;
use cellar_proto::hbase::Option as Part;

/// The version reported as HBase's: the HBase release whose client Cellar is tested with,
/// then Cellar's own. HBase's `VersionInfo` compares it as just below that release.
pub(crate) fn hbase_version() -> String {
    format!("2.6.4-cellar-{}", env!("CARGO_PKG_VERSION"))
}

const MIB: u64 = 1024 * 1024;
/// How long the master waits for a region server's load.
const LOAD_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// The status with the `parts` asked for (all when none is named).
pub(crate) fn cluster_status(svc: &HbaseService, parts: &[i32]) -> hbase::ClusterStatus {
    let wants = |p: Part| parts.is_empty() || parts.contains(&(p as i32));
    let me = registry::server_name(svc);
    let mut status = hbase::ClusterStatus::default();
    if wants(Part::HbaseVersion) {
        status.hbase_version = Some(hbase::HBaseVersionFileContent {
            version: hbase_version(),
        });
    }
    if wants(Part::ClusterId) {
        status.cluster_id = Some(hbase::ClusterId {
            cluster_id: svc.cluster_id.clone(),
        });
    }
    // A cluster's master: the live region servers.
    let live = match svc.master.as_ref().and_then(|m| m.assignment()) {
        Some(a) => a.refresh_live().unwrap_or_default(),
        None => Vec::new(),
    };
    let cluster: Vec<hbase::ServerName> = live
        .iter()
        .map(|s| hbase::ServerName {
            host_name: s.name.host.clone(),
            port: Some(u32::from(s.name.port)),
            start_code: Some(s.name.start_code),
        })
        .collect();
    if wants(Part::LiveServers) {
        status.live_servers = if let Some(a) = svc.master.as_ref().and_then(|m| m.assignment()) {
            let a: &Assignment = a;
            // Each server's load from the server, all asked at once; one that does not
            // answer in time is listed with an empty load.
            let loads: Vec<hbase::ServerLoad> = std::thread::scope(|scope| {
                let asks: Vec<_> = live
                    .iter()
                    .map(|s| scope.spawn(move || a.server_status(s, LOAD_WAIT)))
                    .collect();
                asks.into_iter()
                    .zip(&live)
                    .map(|(ask, s)| match ask.join() {
                        Ok(Ok(st)) => remote_server_load(&st, s.name.start_code),
                        Ok(Err(e)) => {
                            tracing::debug!(server = %s.name, error = %e, "no load from region server");
                            hbase::ServerLoad::default()
                        }
                        Err(_) => hbase::ServerLoad::default(),
                    })
                    .collect()
            });
            cluster
                .iter()
                .zip(loads)
                .map(|(s, server_load)| hbase::LiveServerInfo {
                    server: s.clone(),
                    server_load,
                })
                .collect()
        } else {
            vec![hbase::LiveServerInfo {
                server: me.clone(),
                server_load: server_load(svc),
            }]
        };
    }
    if wants(Part::DeadServers) {
        // Region servers the master saw that are gone (until one starts again where it was),
        // as HBase's `status` lists them.
        status.dead_servers = match svc.master.as_ref().and_then(|m| m.assignment()) {
            Some(a) => a
                .dead_servers()
                .iter()
                .map(|s| hbase::ServerName {
                    host_name: s.name.host.clone(),
                    port: Some(u32::from(s.name.port)),
                    start_code: Some(s.name.start_code),
                })
                .collect(),
            None => Vec::new(),
        };
    }
    if wants(Part::Master) {
        status.master = Some(me.clone());
    }
    if wants(Part::BalancerOn) {
        // Standalone: nothing moves regions between servers, there is one.
        status.balancer_on = Some(svc.master.as_ref().is_some_and(|m| m.balancer_enabled()));
    }
    if wants(Part::ServersName) {
        status.servers_name = if svc.master.as_ref().and_then(|m| m.assignment()).is_some() {
            cluster
        } else {
            vec![me]
        };
    }
    if wants(Part::TableToRegionsCount) {
        status.table_region_states_count = region_counts(svc);
    }
    status
}

/// This server's load: its requests and every open region's sizes.
fn server_load(svc: &HbaseService) -> hbase::ServerLoad {
    let (used, max) = crate::metrics::process_memory();
    hbase::ServerLoad {
        number_of_requests: None,
        total_number_of_requests: Some(svc.rs.requests.load(std::sync::atomic::Ordering::Relaxed)),
        used_heap_mb: Some(mib(used)),
        max_heap_mb: Some(mib(max)),
        region_loads: region_loads(svc, None),
        report_start_time: Some(svc.start_code),
        report_end_time: Some(super::now_ms()),
    }
}

/// A cluster's region server's load, from its own STATUS (HBase's region servers report
/// theirs to the master; Cellar's master asks when a client wants them).
fn remote_server_load(st: &cellar_client::Status, start_code: u64) -> hbase::ServerLoad {
    hbase::ServerLoad {
        number_of_requests: None,
        total_number_of_requests: Some(st.requests),
        used_heap_mb: Some(mib(st.used_memory_bytes)),
        max_heap_mb: Some(mib(st.max_memory_bytes)),
        region_loads: st.region_loads.iter().map(to_hbase).collect(),
        report_start_time: Some(start_code),
        report_end_time: Some(super::now_ms()),
    }
}

fn mib(bytes: u64) -> u32 {
    u32::try_from(bytes / MIB).unwrap_or(u32::MAX)
}

/// A region's size in whole MiB as HBase's region servers report it (`roundSize`): 0 only when
/// empty, 1 for anything under a MiB, else rounded down. `RegionSizeCalculator` (what
/// `TableInputFormat` gives each split as its length) adds the store file and memstore sizes
/// in MiB, and tools drop splits of length 0 as empty (Spark's `ignoreEmptySplits`), so a
/// small region must not read as 0.
fn region_mib(bytes: u64) -> u32 {
    match bytes {
        0 => 0,
        b if b < MIB => 1,
        b => mib(b),
    }
}

/// The load of each open region, of `table` only if named, in table and row order.
pub(crate) fn region_loads(svc: &HbaseService, table: Option<&str>) -> Vec<hbase::RegionLoad> {
    let mut regions: Vec<_> = svc
        .rs
        .router
        .all_regions()
        .into_iter()
        .filter(|r| table.is_none_or(|t| r.table == t))
        .collect();
    regions.sort_by(|a, b| (&a.table, &a.info.start_key).cmp(&(&b.table, &b.info.start_key)));
    regions
        .iter()
        .filter_map(|r| crate::status::region_load(r))
        .map(|l| to_hbase(&l))
        .collect()
}

/// A region's numbers as HBase's RegionLoad.
fn to_hbase(l: &crate::status::RegionLoad) -> hbase::RegionLoad {
    let name = if l.table == META_TABLE {
        Bytes::from_static(names::META_REGION_NAME)
    } else {
        names::region_name(&l.table, &l.start_key, l.region_id)
    };
    hbase::RegionLoad {
        region_specifier: hbase::RegionSpecifier {
            r#type: RegionSpecifierType::RegionName as i32,
            value: name,
        },
        stores: Some(l.stores),
        storefiles: Some(l.store_files),
        // Blocks are stored uncompressed.
        store_uncompressed_size_mb: Some(region_mib(l.store_file_bytes)),
        storefile_size_mb: Some(region_mib(l.store_file_bytes)),
        mem_store_size_mb: Some(region_mib(l.memstore_bytes)),
        read_requests_count: Some(l.read_requests),
        write_requests_count: Some(l.write_requests),
        filtered_read_requests_count: Some(0),
        // HBase's region size is that of its store files (HStore.getHFilesSize), not memstore.
        region_size_mb: Some(region_mib(l.store_file_bytes)),
    }
}

/// Per user table: its regions by state. Splits complete before their call returns, so no
/// region is ever reported in transition.
fn region_counts(svc: &HbaseService) -> Vec<hbase::TableRegionStatesCount> {
    let mut out = Vec::new();
    for (table, route) in svc.rs.router.tables() {
        if crate::names::is_system(&table) {
            continue;
        }
        let total = route.regions.len();
        let open = route
            .regions
            .values()
            .filter(|r| r.state() == RegionState::Open)
            .count();
        let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        out.push(hbase::TableRegionStatesCount {
            table_name: names::table_to_pb(&table),
            region_states_count: hbase::RegionStatesCount {
                open_regions: count(open),
                split_regions: 0,
                closed_regions: count(total - open),
                regions_in_transition: 0,
                total_regions: count(total),
            },
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(store_file_bytes: u64, memstore_bytes: u64) -> crate::status::RegionLoad {
        crate::status::RegionLoad {
            table: "t".into(),
            start_key: Bytes::from_static(b"k"),
            region_id: 1,
            stores: 2,
            store_files: 1,
            store_file_bytes,
            memstore_bytes,
            read_requests: 0,
            write_requests: 0,
        }
    }

    #[test]
    fn region_sizes_round_as_hbase_so_a_small_region_is_not_empty() {
        assert_eq!(region_mib(0), 0);
        assert_eq!(region_mib(1), 1);
        assert_eq!(region_mib(MIB - 1), 1);
        assert_eq!(region_mib(MIB), 1);
        assert_eq!(region_mib(3 * MIB - 1), 2);
        assert_eq!(region_mib(u64::MAX), u32::MAX);

        // 200 KiB of store files and 5 KiB in the memstore: HBase 2.6 reports 1 and 1, so
        // RegionSizeCalculator (store files + memstore) gives the split 2 MiB, not 0.
        let l = to_hbase(&load(200 * 1024, 5 * 1024));
        assert_eq!(l.storefile_size_mb, Some(1));
        assert_eq!(l.store_uncompressed_size_mb, Some(1));
        assert_eq!(l.mem_store_size_mb, Some(1));
        assert_eq!(l.region_size_mb, Some(1));

        let empty = to_hbase(&load(0, 0));
        assert_eq!(empty.storefile_size_mb, Some(0));
        assert_eq!(empty.mem_store_size_mb, Some(0));
        assert_eq!(empty.region_size_mb, Some(0));

        // The region size is its store files', as HBase's: the memstore is not in it.
        let big = to_hbase(&load(5 * MIB + 7, 3 * MIB));
        assert_eq!(big.storefile_size_mb, Some(5));
        assert_eq!(big.mem_store_size_mb, Some(3));
        assert_eq!(big.region_size_mb, Some(5));
    }
}

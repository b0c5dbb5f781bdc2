//! What the master reports about the cluster (`GetClusterStatus`: `Admin.getClusterMetrics`,
//! `getRegionServers`) and a region server about its regions (`GetRegionLoad`:
//! `Admin.getRegionMetrics`). A standalone Cellar is one process: the active master and the
//! only live region server, with no backup masters, dead servers or balancer.

use super::names;
use super::registry;
use super::HbaseService;
use crate::meta::META_TABLE;
use crate::router::{HostedRegion, RegionState};
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
    // A cluster's master: the live region servers (their own loads are theirs to report).
    let cluster: Vec<hbase::ServerName> = match svc.rs.assignment() {
        Some(a) => a
            .refresh_live()
            .unwrap_or_default()
            .iter()
            .map(|s| hbase::ServerName {
                host_name: s.name.host.clone(),
                port: Some(u32::from(s.name.port)),
                start_code: Some(s.name.start_code),
            })
            .collect(),
        None => Vec::new(),
    };
    if wants(Part::LiveServers) {
        status.live_servers = if svc.rs.assignment().is_some() {
            cluster
                .iter()
                .map(|s| hbase::LiveServerInfo {
                    server: s.clone(),
                    server_load: hbase::ServerLoad::default(),
                })
                .collect()
        } else {
            vec![hbase::LiveServerInfo {
                server: me.clone(),
                server_load: server_load(svc),
            }]
        };
    }
    if wants(Part::Master) {
        status.master = Some(me.clone());
    }
    if wants(Part::BalancerOn) {
        // Standalone: nothing moves regions between servers, there is one.
        status.balancer_on = Some(svc.rs.balancer_enabled());
    }
    if wants(Part::ServersName) {
        status.servers_name = if svc.rs.assignment().is_some() {
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
    let now = super::now_ms();
    let (used, max) = process_memory_mb();
    hbase::ServerLoad {
        number_of_requests: None,
        total_number_of_requests: Some(svc.rs.requests.load(std::sync::atomic::Ordering::Relaxed)),
        used_heap_mb: used,
        max_heap_mb: max,
        region_loads: region_loads(svc, None),
        report_start_time: Some(svc.start_code),
        report_end_time: Some(now),
    }
}

/// This process's resident memory and the most it may use, in MiB (HBase reports its JVM
/// heap here; `status 'simple'` shows them as usedHeapMB and maxHeapMB).
fn process_memory_mb() -> (Option<u32>, Option<u32>) {
    let mb = |bytes: u64| u32::try_from(bytes / MIB).ok();
    let kib_field = |text: &str, key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
            .map(|kib| kib * 1024)
    };
    let used = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| kib_field(&s, "VmRSS:"));
    let machine = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| kib_field(&s, "MemTotal:"));
    // A memory cgroup's limit, when lower (v2, then v1).
    let cgroup = [
        "/sys/fs/cgroup/memory.max",
        "/sys/fs/cgroup/memory/memory.limit_in_bytes",
    ]
    .iter()
    .find_map(|p| std::fs::read_to_string(p).ok()?.trim().parse::<u64>().ok());
    let max = match (machine, cgroup) {
        (Some(m), Some(c)) => Some(m.min(c)),
        (m, c) => m.or(c),
    };
    (used.and_then(mb), max.and_then(mb))
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
    regions.iter().filter_map(|r| region_load(r)).collect()
}

fn region_load(r: &HostedRegion) -> Option<hbase::RegionLoad> {
    let (stats, stores) = r.if_open(|region| (region.stats(), region.schema().families.len()))?;
    let mib = |bytes: u64| u32::try_from(bytes / MIB).unwrap_or(u32::MAX);
    let name = if r.table == META_TABLE {
        Bytes::from_static(names::META_REGION_NAME)
    } else {
        names::region_name(&r.table, &r.info.start_key, r.info.id)
    };
    Some(hbase::RegionLoad {
        region_specifier: hbase::RegionSpecifier {
            r#type: RegionSpecifierType::RegionName as i32,
            value: name,
        },
        stores: Some(u32::try_from(stores).unwrap_or(u32::MAX)),
        storefiles: Some(u32::try_from(stats.store_files).unwrap_or(u32::MAX)),
        // Blocks are stored uncompressed.
        store_uncompressed_size_mb: Some(mib(stats.store_file_bytes)),
        storefile_size_mb: Some(mib(stats.store_file_bytes)),
        mem_store_size_mb: Some(mib(stats.memstore_bytes)),
        read_requests_count: Some(stats.read_requests),
        write_requests_count: Some(stats.write_requests),
        filtered_read_requests_count: Some(0),
        region_size_mb: Some(mib(stats.store_file_bytes + stats.memstore_bytes)),
    })
}

/// Per user table: its regions by state. Splits complete before their call returns, so no
/// region is ever reported in transition.
fn region_counts(svc: &HbaseService) -> Vec<hbase::TableRegionStatesCount> {
    let mut out = Vec::new();
    for (table, route) in svc.rs.router.tables() {
        if crate::catalog::names::is_system(&table) {
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

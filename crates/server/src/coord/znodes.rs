//! HBase's znodes in HBase's own encoding (docs/design/0004-cluster.md §3): what an HBase
//! 2.x client reads to find a cluster, and what Cellar's servers read about each other.
//!
//! Every value is HBase's metadata prefix (`0xFF`, a 4-byte big-endian length, that many
//! bytes naming the writer), then `PBUF`, then a protobuf message. Readers accept values
//! without the metadata prefix too, as HBase's do.

use super::{ServerName, ServerRecord};
use bytes::Bytes;
use cellar_proto::hbase;
use prost::Message;

/// The first byte of HBase's metadata prefix.
const META_MAGIC: u8 = 0xFF;
/// What precedes every protobuf value HBase keeps in ZooKeeper.
const PB_MAGIC: &[u8] = b"PBUF";
/// A writer id longer than this is not HBase's (HBase writes `pid@host` and 8 bytes).
const MAX_WRITER_ID: usize = 4096;
/// RegionState.State's OPEN.
const REGION_STATE_OPEN: i32 = 3;

/// The znode paths under a parent (HBase's `zookeeper.znode.parent`, `/hbase` by default).
#[derive(Debug, Clone)]
pub struct Paths {
    pub parent: String,
}

impl Paths {
    pub fn new(parent: &str) -> Paths {
        let parent = parent.trim_end_matches('/');
        Paths {
            parent: if parent.is_empty() {
                "/hbase".to_string()
            } else {
                parent.to_string()
            },
        }
    }
    pub fn cluster_id(&self) -> String {
        format!("{}/hbaseid", self.parent)
    }
    pub fn master(&self) -> String {
        format!("{}/master", self.parent)
    }
    pub fn backup_masters(&self) -> String {
        format!("{}/backup-masters", self.parent)
    }
    pub fn backup_master(&self, name: &ServerName) -> String {
        format!("{}/backup-masters/{name}", self.parent)
    }
    pub fn region_servers(&self) -> String {
        format!("{}/rs", self.parent)
    }
    pub fn region_server(&self, name: &ServerName) -> String {
        format!("{}/rs/{name}", self.parent)
    }
    pub fn meta_server(&self) -> String {
        format!("{}/meta-region-server", self.parent)
    }
    pub fn balancer(&self) -> String {
        format!("{}/balancer", self.parent)
    }
}

/// Prefixes a message with HBase's metadata (writer `writer`, 8 bytes of salt) and `PBUF`.
pub fn wrap(writer: &[u8], message: &[u8]) -> Vec<u8> {
    let salt = salt();
    let id_len = writer.len() + salt.len();
    let mut out = Vec::with_capacity(1 + 4 + id_len + PB_MAGIC.len() + message.len());
    out.push(META_MAGIC);
    out.extend_from_slice(&u32::try_from(id_len).unwrap_or(0).to_be_bytes());
    out.extend_from_slice(writer);
    out.extend_from_slice(&salt);
    out.extend_from_slice(PB_MAGIC);
    out.extend_from_slice(message);
    out
}

/// The protobuf message of a znode value: the metadata prefix (if any) and `PBUF` removed.
pub fn unwrap(data: &[u8]) -> Result<&[u8], String> {
    let mut rest = data;
    if rest.first() == Some(&META_MAGIC) {
        let len_bytes: [u8; 4] = rest
            .get(1..5)
            .and_then(|b| b.try_into().ok())
            .ok_or("the metadata prefix is cut short")?;
        let id_len = u32::from_be_bytes(len_bytes) as usize;
        if id_len > MAX_WRITER_ID {
            return Err(format!("a writer id of {id_len} bytes"));
        }
        rest = rest
            .get(5 + id_len..)
            .ok_or("the writer id runs past the end")?;
    }
    rest.strip_prefix(PB_MAGIC)
        .ok_or_else(|| "no PBUF before the message".to_string())
}

/// `hbaseid`.
pub fn encode_cluster_id(writer: &[u8], id: &str) -> Vec<u8> {
    let msg = hbase::ClusterId {
        cluster_id: id.to_string(),
    };
    wrap(writer, &msg.encode_to_vec())
}

pub fn decode_cluster_id(data: &[u8]) -> Result<String, String> {
    let msg = hbase::ClusterId::decode(unwrap(data)?).map_err(|e| e.to_string())?;
    Ok(msg.cluster_id)
}

/// HBase's `LoadBalancerState` (LoadBalancer.proto).
#[derive(Clone, PartialEq, prost::Message)]
struct LoadBalancerState {
    #[prost(bool, optional, tag = "1")]
    balancer_on: Option<bool>,
}

/// `balancer`: `PBUF` and the state, without the metadata prefix (as HBase's master writes it).
pub fn encode_balancer(on: bool) -> Vec<u8> {
    let msg = LoadBalancerState {
        balancer_on: Some(on),
    };
    let mut out = PB_MAGIC.to_vec();
    out.extend_from_slice(&msg.encode_to_vec());
    out
}

/// Whether the balancer is on; a state without the field means on (HBase's default).
pub fn decode_balancer(data: &[u8]) -> Result<bool, String> {
    let msg = LoadBalancerState::decode(unwrap(data)?).map_err(|e| e.to_string())?;
    Ok(msg.balancer_on.unwrap_or(true))
}

fn server_name_to_pb(name: &ServerName) -> hbase::ServerName {
    hbase::ServerName {
        host_name: name.host.clone(),
        port: Some(u32::from(name.port)),
        start_code: Some(name.start_code),
    }
}

fn server_name_from_pb(pb: &hbase::ServerName) -> Result<ServerName, String> {
    let port = pb.port.ok_or("a server name without a port")?;
    Ok(ServerName {
        host: pb.host_name.clone(),
        port: u16::try_from(port).map_err(|_| format!("port {port} out of range"))?,
        start_code: pb.start_code.unwrap_or(0),
    })
}

/// The port part of `host:port`, for HBase's `info_port`.
fn port_of(addr: &str) -> Option<u32> {
    addr.rsplit_once(':').and_then(|(_, p)| p.parse().ok())
}

/// `master` and `backup-masters/<name>`.
pub fn encode_master(writer: &[u8], server: &ServerRecord) -> Vec<u8> {
    let msg = hbase::Master {
        master: server_name_to_pb(&server.name),
        rpc_version: Some(0),
        info_port: port_of(&server.http_addr),
        cellar_native_address: Some(server.native_addr.clone()),
        cellar_http_address: Some(server.http_addr.clone()),
    };
    wrap(writer, &msg.encode_to_vec())
}

pub fn decode_master(data: &[u8]) -> Result<ServerRecord, String> {
    let msg = hbase::Master::decode(unwrap(data)?).map_err(|e| e.to_string())?;
    Ok(ServerRecord {
        name: server_name_from_pb(&msg.master)?,
        native_addr: msg.cellar_native_address.unwrap_or_default(),
        http_addr: msg.cellar_http_address.unwrap_or_default(),
    })
}

/// `meta-region-server`: hbase:meta open on `server`.
pub fn encode_meta_server(writer: &[u8], server: &ServerRecord) -> Vec<u8> {
    let msg = hbase::MetaRegionServer {
        server: server_name_to_pb(&server.name),
        rpc_version: Some(0),
        state: Some(REGION_STATE_OPEN),
        cellar_native_address: Some(server.native_addr.clone()),
    };
    wrap(writer, &msg.encode_to_vec())
}

pub fn decode_meta_server(data: &[u8]) -> Result<ServerRecord, String> {
    let msg = hbase::MetaRegionServer::decode(unwrap(data)?).map_err(|e| e.to_string())?;
    Ok(ServerRecord {
        name: server_name_from_pb(&msg.server)?,
        native_addr: msg.cellar_native_address.unwrap_or_default(),
        http_addr: String::new(),
    })
}

/// `rs/<name>`: the name is the node's; the value carries the addresses.
pub fn encode_region_server(writer: &[u8], server: &ServerRecord) -> Vec<u8> {
    let msg = hbase::RegionServerInfo {
        info_port: port_of(&server.http_addr).and_then(|p| i32::try_from(p).ok()),
        cellar_native_address: Some(server.native_addr.clone()),
        cellar_http_address: Some(server.http_addr.clone()),
    };
    wrap(writer, &msg.encode_to_vec())
}

pub fn decode_region_server(node: &str, data: &[u8]) -> Result<ServerRecord, String> {
    let name =
        ServerName::parse(node).ok_or_else(|| format!("'{node}' is not host,port,startcode"))?;
    let msg = hbase::RegionServerInfo::decode(unwrap(data)?).map_err(|e| e.to_string())?;
    Ok(ServerRecord {
        name,
        native_addr: msg.cellar_native_address.unwrap_or_default(),
        http_addr: msg.cellar_http_address.unwrap_or_default(),
    })
}

/// 8 bytes that differ between writes (HBase salts its writer id the same way).
fn salt() -> [u8; 8] {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.finish().to_be_bytes()
}

/// This process as HBase names writers: `cellar-<pid>@<host>`.
pub fn writer_id() -> Bytes {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    Bytes::from(format!("cellar-{}@{}", std::process::id(), host.trim()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> ServerRecord {
        ServerRecord {
            name: ServerName {
                host: "127.0.0.1".into(),
                port: 16020,
                start_code: 42,
            },
            native_addr: "127.0.0.1:16200".into(),
            http_addr: "127.0.0.1:16210".into(),
        }
    }

    #[test]
    fn values_carry_hbase_prefixes() {
        let data = encode_cluster_id(b"w@h", "abc");
        // 0xFF, length 3 + 8 salt bytes, the writer, the salt, PBUF, the message.
        assert_eq!(data[0], 0xFF);
        assert_eq!(&data[1..5], &11u32.to_be_bytes());
        assert_eq!(&data[5..8], b"w@h");
        assert_eq!(&data[16..20], b"PBUF");
        assert_eq!(&data[20..], &[0x0a, 3, b'a', b'b', b'c']);
        assert_eq!(decode_cluster_id(&data).as_deref(), Ok("abc"));
    }

    #[test]
    fn records_read_back() {
        let r = record();
        assert_eq!(decode_master(&encode_master(b"w", &r)), Ok(r.clone()));
        let meta = decode_meta_server(&encode_meta_server(b"w", &r)).expect("meta");
        assert_eq!(
            (meta.name, meta.native_addr),
            (r.name.clone(), r.native_addr.clone())
        );
        let node = r.name.to_string();
        assert_eq!(
            decode_region_server(&node, &encode_region_server(b"w", &r)),
            Ok(r)
        );
    }

    #[test]
    fn the_meta_server_is_open_for_hbase_clients() {
        let data = encode_meta_server(b"w", &record());
        let msg = hbase::MetaRegionServer::decode(unwrap(&data).expect("unwrap")).expect("pb");
        assert_eq!(msg.state, Some(3));
        assert_eq!(msg.server.port, Some(16020));
    }

    #[test]
    fn the_balancer_switch_is_hbase_s_load_balancer_state() {
        // PBUF, then field 1 (varint) = 0 or 1: what HBase's LoadBalancerTracker writes.
        assert_eq!(encode_balancer(false), b"PBUF\x08\x00".to_vec());
        assert_eq!(encode_balancer(true), b"PBUF\x08\x01".to_vec());
        assert_eq!(decode_balancer(&encode_balancer(false)), Ok(false));
        assert_eq!(decode_balancer(&encode_balancer(true)), Ok(true));
        // A state without the field is on, HBase's default.
        assert_eq!(decode_balancer(b"PBUF"), Ok(true));
        assert!(decode_balancer(b"PBUF\x08").is_err());
    }

    #[test]
    fn damaged_values_are_errors_not_panics() {
        let good = encode_master(b"writer", &record());
        for cut in 0..good.len() {
            let _ = decode_master(&good[..cut]);
        }
        assert!(unwrap(&[0xFF, 0xFF, 0xFF, 0xFF, 0xFF]).is_err());
        assert!(unwrap(b"JSON{}").is_err());
        // Without the metadata prefix, as old writers left it.
        let mut bare = b"PBUF".to_vec();
        bare.extend(
            hbase::ClusterId {
                cluster_id: "x".into(),
            }
            .encode_to_vec(),
        );
        assert_eq!(decode_cluster_id(&bare).as_deref(), Ok("x"));
    }
}

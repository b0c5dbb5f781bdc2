//! ClientMetaService: how a client configured with HBase's RPC connection registry finds the
//! cluster id, the active master and `hbase:meta`. This one server is all three: the active
//! (and only) master, the bootstrap node and the host of `hbase:meta,,1`.

use super::names::{self, META_REGION_ID, META_TABLE};
use super::{message, HbaseError, HbaseService, Reply, Request, Service};
use bytes::Bytes;
use cellar_proto::hbase;

/// ClientMetaService's calls and their decode halves.
pub(crate) const SERVICE: Service = Service {
    name: "ClientMetaService",
    admit: super::admit_all,
    calls: &[
        ("GetClusterId", |p, _| {
            Call::ClusterId.decode(p, "GetClusterIdRequest")
        }),
        ("GetActiveMaster", |p, _| {
            Call::ActiveMaster.decode(p, "GetActiveMasterRequest")
        }),
        ("GetMasters", |p, _| {
            Call::Masters.decode(p, "GetMastersRequest")
        }),
        ("GetMetaRegionLocations", |p, _| {
            Call::MetaRegionLocations.decode(p, "GetMetaRegionLocationsRequest")
        }),
        ("GetBootstrapNodes", |p, _| {
            Call::BootstrapNodes.decode(p, "GetBootstrapNodesRequest")
        }),
    ],
};

/// A ClientMetaService call. Every request of this service is empty.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Call {
    ClusterId,
    ActiveMaster,
    Masters,
    MetaRegionLocations,
    BootstrapNodes,
}

impl Call {
    /// The decode half: only checks the bytes are a message (`what` names it).
    pub(crate) fn decode(self, param: Bytes, what: &str) -> Result<Request, HbaseError> {
        message::<hbase::GetClusterIdRequest>(param, what)?;
        Ok(Request::Registry(self))
    }

    pub(crate) fn execute(self, svc: &HbaseService) -> Result<Reply, HbaseError> {
        Ok(match self {
            Call::ClusterId => Reply::message(&hbase::GetClusterIdResponse {
                cluster_id: Some(svc.cluster_id.clone()),
            }),
            Call::ActiveMaster => Reply::message(&hbase::GetActiveMasterResponse {
                server_name: Some(server_name(svc)),
            }),
            Call::Masters => Reply::message(&hbase::GetMastersResponse {
                master_servers: vec![hbase::GetMastersResponseEntry {
                    server_name: server_name(svc),
                    is_active: true,
                }],
            }),
            Call::MetaRegionLocations => Reply::message(&hbase::GetMetaRegionLocationsResponse {
                meta_locations: vec![meta_location(svc)],
            }),
            Call::BootstrapNodes => Reply::message(&hbase::GetBootstrapNodesResponse {
                server_name: vec![server_name(svc)],
            }),
        })
    }
}

/// This server as HBase names servers: host, port and start code.
pub(crate) fn server_name(svc: &HbaseService) -> hbase::ServerName {
    hbase::ServerName {
        host_name: svc.host.clone(),
        port: Some(u32::from(svc.port)),
        start_code: Some(svc.start_code),
    }
}

/// `hbase:meta,,1`'s RegionInfo: region id 1, no keys.
pub(crate) fn meta_region_info() -> hbase::RegionInfo {
    hbase::RegionInfo {
        region_id: META_REGION_ID,
        table_name: names::table_to_pb(META_TABLE),
        start_key: Some(Bytes::new()),
        end_key: Some(Bytes::new()),
        offline: Some(false),
        split: Some(false),
        replica_id: Some(0),
    }
}

/// Where `hbase:meta,,1` is served: here.
pub(crate) fn meta_location(svc: &HbaseService) -> hbase::RegionLocation {
    hbase::RegionLocation {
        region_info: meta_region_info(),
        server_name: Some(server_name(svc)),
        seq_num: 1,
    }
}

/// The answer to the 2.6 client's registry preamble: the cluster id.
#[allow(dead_code)] // called by the connection (connection.rs)
pub(crate) fn connection_registry_response(
    svc: &HbaseService,
) -> hbase::GetConnectionRegistryResponse {
    hbase::GetConnectionRegistryResponse {
        cluster_id: svc.cluster_id.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hbase::master_service::test_support::Fixture;
    use prost::Message;

    fn ask<R: Message + Default>(f: &Fixture, method: &str) -> R {
        let reply = f
            .call("ClientMetaService", method, &hbase::GetClusterIdRequest {})
            .unwrap_or_else(|e| panic!("{method}: {e}"));
        R::decode(reply.param).expect("decodes")
    }

    #[test]
    fn the_registry_points_at_this_server() {
        let f = Fixture::new();
        let id: hbase::GetClusterIdResponse = ask(&f, "GetClusterId");
        assert_eq!(id.cluster_id.as_deref(), Some("c1"));
        let here = hbase::ServerName {
            host_name: "127.0.0.1".into(),
            port: Some(16020),
            start_code: Some(f.svc.start_code),
        };
        let m: hbase::GetActiveMasterResponse = ask(&f, "GetActiveMaster");
        assert_eq!(m.server_name.as_ref(), Some(&here));
        let ms: hbase::GetMastersResponse = ask(&f, "GetMasters");
        assert_eq!(ms.master_servers.len(), 1);
        assert!(ms.master_servers[0].is_active);
        let boot: hbase::GetBootstrapNodesResponse = ask(&f, "GetBootstrapNodes");
        assert_eq!(boot.server_name, vec![here.clone()]);
        let meta: hbase::GetMetaRegionLocationsResponse = ask(&f, "GetMetaRegionLocations");
        assert_eq!(meta.meta_locations.len(), 1);
        let loc = &meta.meta_locations[0];
        assert_eq!(loc.server_name.as_ref(), Some(&here));
        let ri = &loc.region_info;
        assert_eq!(
            (
                ri.region_id,
                &ri.table_name.namespace[..],
                &ri.table_name.qualifier[..]
            ),
            (1, &b"hbase"[..], &b"meta"[..])
        );
        // The client derives `hbase:meta,,1` from it.
        assert_eq!(
            &names::region_name(
                META_TABLE,
                &ri.start_key.clone().unwrap_or_default(),
                ri.region_id
            )[..],
            names::META_REGION_NAME
        );
        assert_eq!(connection_registry_response(&f.svc).cluster_id, "c1");
        let e = f
            .call("ClientMetaService", "Nope", &hbase::GetClusterIdRequest {})
            .expect_err("unknown");
        assert!(e.message.contains("Nope"));
    }
}

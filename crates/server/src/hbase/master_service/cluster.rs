//! The master and the cluster: is the master running, the cluster's status, the balancer
//! switch, maintenance mode and decommissioned servers. A standalone server holds every
//! region: its balancer (on, as HBase's standalone's) never has a region to move; there is no
//! maintenance mode and no server to decommission.

use super::{Call, Result};
use crate::hbase::{message, HbaseError, HbaseService, Reply, Request};
use bytes::Bytes;
use cellar_proto::hbase;

/// IsMasterRunning.
#[derive(Debug, Clone)]
pub(crate) struct IsMasterRunning;

impl IsMasterRunning {
    pub(crate) fn decode(param: Bytes, _cellblock: Bytes) -> Result<Request> {
        message::<hbase::IsMasterRunningRequest>(param, "IsMasterRunningRequest")?;
        Ok(Call::IsMasterRunning(IsMasterRunning).into())
    }

    pub(crate) fn execute(self, svc: &HbaseService) -> Result<Reply> {
        svc.rs.check_running().map_err(HbaseError::from)?;
        Ok(Reply::message(&hbase::IsMasterRunningResponse {
            is_master_running: true,
        }))
    }
}

/// GetClusterStatus: the parts of the status asked for.
#[derive(Debug, Clone)]
pub(crate) struct GetClusterStatus {
    pub(crate) options: Vec<i32>,
}

impl GetClusterStatus {
    pub(crate) fn decode(param: Bytes, _cellblock: Bytes) -> Result<Request> {
        let req: hbase::GetClusterStatusRequest = message(param, "GetClusterStatusRequest")?;
        Ok(Call::GetClusterStatus(GetClusterStatus {
            options: req.options,
        })
        .into())
    }

    pub(crate) fn execute(self, svc: &HbaseService) -> Result<Reply> {
        Ok(Reply::message(&hbase::GetClusterStatusResponse {
            cluster_status: crate::hbase::cluster_status::cluster_status(svc, &self.options),
        }))
    }
}

/// IsBalancerEnabled.
#[derive(Debug, Clone)]
pub(crate) struct IsBalancerEnabled;

impl IsBalancerEnabled {
    pub(crate) fn decode(param: Bytes, _cellblock: Bytes) -> Result<Request> {
        message::<hbase::IsBalancerEnabledRequest>(param, "IsBalancerEnabled")?;
        Ok(Call::IsBalancerEnabled(IsBalancerEnabled).into())
    }

    pub(crate) fn execute(self, svc: &HbaseService) -> Result<Reply> {
        Ok(Reply::message(&hbase::IsBalancerEnabledResponse {
            enabled: svc.master()?.balancer_enabled(),
        }))
    }
}

/// SetBalancerRunning: the balancer switched; the answer is how it was.
#[derive(Debug, Clone)]
pub(crate) struct SetBalancerRunning {
    pub(crate) on: bool,
}

impl SetBalancerRunning {
    pub(crate) fn decode(param: Bytes, _cellblock: Bytes) -> Result<Request> {
        let req: hbase::SetBalancerRunningRequest = message(param, "SetBalancerRunning")?;
        Ok(Call::SetBalancerRunning(SetBalancerRunning { on: req.on }).into())
    }

    pub(crate) fn execute(self, svc: &HbaseService) -> Result<Reply> {
        let previous = svc
            .master()?
            .balance_switch(self.on)
            .map_err(HbaseError::from)?;
        Ok(Reply::message(&hbase::SetBalancerRunningResponse {
            prev_balance_value: Some(previous),
        }))
    }
}

/// IsMasterInMaintenanceMode: never.
#[derive(Debug, Clone)]
pub(crate) struct IsInMaintenanceMode;

impl IsInMaintenanceMode {
    pub(crate) fn decode(param: Bytes, _cellblock: Bytes) -> Result<Request> {
        message::<hbase::IsInMaintenanceModeRequest>(param, "IsMasterInMaintenanceMode")?;
        Ok(Call::IsInMaintenanceMode(IsInMaintenanceMode).into())
    }

    pub(crate) fn execute(self) -> Result<Reply> {
        Ok(Reply::message(&hbase::IsInMaintenanceModeResponse {
            in_maintenance_mode: false,
        }))
    }
}

/// ListDecommissionedRegionServers: none.
#[derive(Debug, Clone)]
pub(crate) struct ListDecommissioned;

impl ListDecommissioned {
    pub(crate) fn decode(param: Bytes, _cellblock: Bytes) -> Result<Request> {
        message::<hbase::ListDecommissionedRegionServersRequest>(
            param,
            "ListDecommissionedRegionServers",
        )?;
        Ok(Call::ListDecommissioned(ListDecommissioned).into())
    }

    pub(crate) fn execute(self) -> Result<Reply> {
        Ok(Reply::message(
            &hbase::ListDecommissionedRegionServersResponse::default(),
        ))
    }
}

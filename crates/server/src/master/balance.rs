//! The balancer (by region count, as HBase's SimpleLoadBalancer) and the operator's region
//! moves: `balance_switch`, `balancer`, `move`, `assign`, `unassign`.
//!
//! A move closes the region on its server (flushing it, so nothing is left in that server's
//! log) and opens it on the target; meta follows each step. A region an operator unassigns
//! stays CLOSED until assigned again (the assignment loop leaves CLOSED regions alone).

use super::{Assignment, Master};
use crate::coord::{ServerName, ServerRecord};
use crate::error::ServerError;
use crate::meta::META_TABLE;
use crate::region_server::Role;
use crate::router::{HostedRegion, RegionState, TableState};
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Moves that leave every server within one region of the others: `(region, from, to)`,
/// taking from the most loaded and giving to the least loaded, lowest ids first.
pub fn plan(loads: &BTreeMap<ServerName, Vec<u64>>) -> Vec<(u64, ServerName, ServerName)> {
    let mut loads: BTreeMap<ServerName, Vec<u64>> = loads.clone();
    for regions in loads.values_mut() {
        regions.sort_unstable();
    }
    let mut moves = Vec::new();
    loop {
        let most = loads
            .iter()
            .max_by_key(|(n, r)| (r.len(), std::cmp::Reverse((*n).clone())));
        let least = loads.iter().min_by_key(|(n, r)| (r.len(), (*n).clone()));
        let (Some((from, fr)), Some((to, tr))) = (most, least) else {
            return moves;
        };
        if fr.len() <= tr.len() + 1 {
            return moves;
        }
        let (from, to) = (from.clone(), to.clone());
        let Some(region) = loads.get_mut(&from).and_then(|r| r.pop()) else {
            return moves;
        };
        if let Some(r) = loads.get_mut(&to) {
            r.push(region);
        }
        moves.push((region, from, to));
    }
}

impl Master {
    fn assignment_or_err(&self, what: &str) -> Result<Arc<Assignment>, ServerError> {
        match self.assignment() {
            Some(a) => Ok(Arc::clone(a)),
            None => Err(ServerError::invalid(format!(
                "{what}: this server is {} and holds every region itself; regions move between \
                 the region servers of a cluster",
                self.rs.role.name()
            ))),
        }
    }

    /// Turns the balancer on or off; whether it was on. Recorded in the coordination service
    /// first, so a master that takes over keeps the setting.
    pub fn balance_switch(&self, on: bool) -> Result<bool, ServerError> {
        if matches!(self.rs.role, Role::Standalone) {
            return Ok(self.rs.standalone_balancer.swap(on, Ordering::SeqCst));
        }
        let a = self.assignment_or_err("balance_switch")?;
        let _admin = self.rs.admin.lock();
        a.coord
            .publish_balancer(on)
            .map_err(|e| ServerError::Internal(format!("recording the balancer switch: {e}")))?;
        Ok(a.balancer_on.swap(on, Ordering::SeqCst))
    }

    /// Whether the balancer is on. A standalone server has a switch too, as HBase's standalone
    /// does (on by default); with one server its balancer never moves a region. A cluster's
    /// region server has none.
    pub fn balancer_enabled(&self) -> bool {
        match &self.rs.role {
            Role::Master(_) => self
                .assignment()
                .is_some_and(|a| a.balancer_on.load(Ordering::SeqCst)),
            Role::Standalone => self.rs.standalone_balancer.load(Ordering::SeqCst),
            Role::RegionServer => false,
        }
    }

    /// Runs the balancer now (if it is on); the number of regions moved (none on a standalone
    /// server: every region is already on its one server).
    pub fn balance(&self) -> Result<usize, ServerError> {
        if matches!(self.rs.role, Role::Standalone) {
            self.rs.check_running()?;
            return Ok(0);
        }
        let a = self.assignment_or_err("balancer")?;
        let _admin = self.rs.admin.lock();
        self.rs.check_running()?;
        if !a.balancer_on.load(Ordering::SeqCst) {
            return Ok(0);
        }
        self.balance_locked(&a)
    }

    /// The balancer's work; the admin lock is held.
    pub(crate) fn balance_locked(&self, a: &Assignment) -> Result<usize, ServerError> {
        let live = a.refresh_live()?;
        let mut loads: BTreeMap<ServerName, Vec<u64>> =
            live.iter().map(|s| (s.name.clone(), Vec::new())).collect();
        for (name, t) in self.rs.router.tables() {
            if name == META_TABLE || t.state != TableState::Enabled {
                continue;
            }
            for r in t.regions.values() {
                if r.state() != RegionState::Open {
                    continue;
                }
                if let Some(list) = r.server().and_then(|s| loads.get_mut(&s.name)) {
                    list.push(r.info.id);
                }
            }
        }
        let moves = plan(&loads);
        let mut moved = 0;
        for (id, _, to) in &moves {
            let (Some(hosted), Some(target)) = (
                self.rs.router.region(*id),
                live.iter().find(|s| &s.name == to).cloned(),
            ) else {
                continue;
            };
            match self.move_to(a, &hosted, target) {
                Ok(()) => moved += 1,
                Err(e) => {
                    tracing::warn!(region = %hosted.name(), error = %e, "balancer move failed");
                }
            }
        }
        if moved > 0 {
            tracing::info!(moved, planned = moves.len(), "balancer ran");
        }
        Ok(moved)
    }

    /// Moves a region (named by id, region name or encoded name) to `server` (its HBase name
    /// `host,port,startcode` or native `host:port`), or to the least loaded other server.
    pub fn move_region(&self, region: &str, server: Option<&str>) -> Result<(), ServerError> {
        let a = self.assignment_or_err("move")?;
        let _admin = self.rs.admin.lock();
        self.rs.check_running()?;
        let hosted = self.find_region(region)?;
        let live = a.refresh_live()?;
        let target = match server {
            Some(s) => live
                .iter()
                .find(|r| r.name.to_string() == s || r.native_addr == s)
                .cloned()
                .ok_or_else(|| {
                    ServerError::invalid(format!(
                        "move: no live region server named {s:?} (give host,port,startcode or \
                         the native host:port; `status 'detailed'` lists them)"
                    ))
                })?,
            None => {
                let here = hosted.server().map(|s| s.name.clone());
                let mut counts: BTreeMap<ServerName, usize> = BTreeMap::new();
                for r in self.rs.router.all_regions() {
                    if let Some(s) = r.server() {
                        *counts.entry(s.name.clone()).or_default() += 1;
                    }
                }
                live.iter()
                    .filter(|s| Some(&s.name) != here.as_ref())
                    .min_by_key(|s| (counts.get(&s.name).copied().unwrap_or(0), s.name.clone()))
                    .cloned()
                    .ok_or_else(|| {
                        ServerError::invalid("move: there is no other live region server")
                    })?
            }
        };
        self.move_to(&a, &hosted, target)
    }

    /// Opens a region that is not open (an unassigned one, or one whose opening failed).
    pub fn assign_region(&self, region: &str) -> Result<(), ServerError> {
        let a = self.assignment_or_err("assign")?;
        let _admin = self.rs.admin.lock();
        self.rs.check_running()?;
        let hosted = self.find_region(region)?;
        let t = self.rs.router.require(&hosted.table)?;
        if t.state != TableState::Enabled {
            return Err(ServerError::TableDisabled(hosted.table.clone()));
        }
        if hosted.state() == RegionState::Open && hosted.server().is_some() {
            return Ok(());
        }
        if !a.assign(&self.rs, &hosted, &t.schema, None) {
            return Err(ServerError::Internal(format!(
                "assign: no live region server could open {}",
                hosted.name()
            )));
        }
        self.rs
            .meta()?
            .put_region(&self.rs.record_of(&hosted, RegionState::Open))
    }

    /// Closes a region and leaves it closed until `assign` (HBase's `unassign`).
    pub fn unassign_region(&self, region: &str) -> Result<(), ServerError> {
        let a = self.assignment_or_err("unassign")?;
        let _admin = self.rs.admin.lock();
        self.rs.check_running()?;
        let hosted = self.find_region(region)?;
        a.unassign(&hosted, RegionState::Closed)?;
        self.rs
            .meta()?
            .put_region(&self.rs.record_of(&hosted, RegionState::Closed))
    }

    /// Closes `hosted` where it is and opens it on `target`; meta follows.
    pub(super) fn move_to(
        &self,
        a: &Assignment,
        hosted: &Arc<HostedRegion>,
        target: Arc<ServerRecord>,
    ) -> Result<(), ServerError> {
        let t = self.rs.router.require(&hosted.table)?;
        if hosted.server().is_some_and(|s| s.name == target.name) {
            return Ok(());
        }
        let from = hosted
            .server()
            .map(|s| s.name.to_string())
            .unwrap_or_default();
        a.unassign(hosted, RegionState::Offline)?;
        let opened = a.assign(&self.rs, hosted, &t.schema, Some(Arc::clone(&target)));
        self.rs
            .meta()?
            .put_region(&self.rs.record_of(hosted, RegionState::Open))?;
        if !opened {
            return Err(ServerError::Internal(format!(
                "{} closed on {from} but did not open on {}; the master retries",
                hosted.name(),
                target.name
            )));
        }
        tracing::info!(region = %hosted.name(), from = %from, to = %target.name, "region moved");
        Ok(())
    }

    /// A user region by id, region name (`table,start,id`) or HBase encoded name.
    pub(super) fn find_region(&self, region: &str) -> Result<Arc<HostedRegion>, ServerError> {
        let found = self.rs.router.all_regions().into_iter().find(|r| {
            r.info.id.to_string() == region
                || r.name() == region
                || crate::names::encoded_region_name(&r.table, &r.info.start_key, r.info.id)
                    == region
        });
        match found {
            Some(r) if r.table != META_TABLE => Ok(r),
            Some(_) => Err(ServerError::invalid(
                "hbase:meta is served by the master and does not move",
            )),
            None => Err(ServerError::invalid(format!(
                "no region {region:?} (give its id, its name table,startkey,id or its encoded name)"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(port: u16) -> ServerName {
        ServerName {
            host: "h".into(),
            port,
            start_code: 1,
        }
    }

    #[test]
    fn the_plan_evens_counts_to_within_one() {
        let loads = BTreeMap::from([
            (name(1), (1..=9).collect::<Vec<u64>>()),
            (name(2), vec![10]),
            (name(3), vec![]),
        ]);
        let moves = plan(&loads);
        assert_eq!(moves.len(), 5);
        let mut after: BTreeMap<ServerName, usize> =
            loads.iter().map(|(n, r)| (n.clone(), r.len())).collect();
        for (_, from, to) in &moves {
            *after.get_mut(from).expect("a planned server") -= 1;
            *after.get_mut(to).expect("a planned server") += 1;
        }
        let counts: Vec<usize> = after.values().copied().collect();
        assert_eq!(counts, vec![4, 3, 3]);
        // Already even: nothing moves; one server: nothing to do.
        assert!(plan(&BTreeMap::from([(name(1), vec![1, 2]), (name(2), vec![3])])).is_empty());
        assert!(plan(&BTreeMap::from([(name(1), vec![1, 2, 3])])).is_empty());
        assert!(plan(&BTreeMap::new()).is_empty());
    }
}

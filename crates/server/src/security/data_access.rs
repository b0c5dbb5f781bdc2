//! What a data call may touch: the checks both front ends run on a Get, a scan or a
//! mutation before the region server reads or writes (`docs/security.md`). Reads are narrowed
//! to the columns the caller may see; `hbase:meta` is read as HBase lets it be read.

use super::acl::ACL_ROW_PREFIX;
use super::acl::{Action, Scope};
use super::authz::{restrict, Authz};
use super::Caller;
use crate::error::ServerError;
use crate::names::META_TABLE;
use bytes::Bytes;
use cellar_model::MutationKind;

/// What a read of hbase:meta asks for.
enum MetaRead<'a> {
    /// One row (a Get).
    Row(&'a [u8]),
    /// Rows (a scan): its filter, to which the check may add.
    Rows(&'a mut Option<cellar_model::Filter>),
}

impl Authz {
    /// Narrows a Get of `table` to what `caller` may read; refused when nothing is left.
    pub(crate) fn check_get(
        &self,
        caller: &Caller,
        table: &str,
        get: &mut cellar_model::Get,
        what: &str,
    ) -> Result<(), ServerError> {
        if table == META_TABLE {
            return self.check_meta_read(caller, MetaRead::Row(&get.row), what);
        }
        self.check_read(caller, table, &mut get.columns, what)
    }

    /// Narrows a scan of `table` to what `caller` may read; refused when nothing is left.
    pub(crate) fn check_scan(
        &self,
        caller: &Caller,
        table: &str,
        scan: &mut cellar_model::Scan,
        what: &str,
    ) -> Result<(), ServerError> {
        if table == META_TABLE {
            return self.check_meta_read(caller, MetaRead::Rows(&mut scan.filter), what);
        }
        self.check_read(caller, table, &mut scan.columns, what)
    }

    /// hbase:meta, as HBase lets it be read: every authenticated caller reads its table,
    /// region and namespace rows (clients locate regions with them); its grant rows
    /// (`@acl/…`, what HBase keeps in `hbase:acl`) only a global ADMIN. Other callers' scans
    /// pass over the grant rows; a Get of one is refused (audited).
    fn check_meta_read(
        &self,
        caller: &Caller,
        read: MetaRead<'_>,
        what: &str,
    ) -> Result<(), ServerError> {
        self.authenticate(caller)?;
        if self.allows(caller, Action::Admin, &Scope::Global) {
            return Ok(());
        }
        match read {
            MetaRead::Row(row) if row.starts_with(ACL_ROW_PREFIX) => self.require(
                caller,
                Action::Admin,
                &Scope::Global,
                &format!("{what} the grants in {}", META_TABLE),
            ),
            MetaRead::Row(_) => Ok(()),
            MetaRead::Rows(filter) => {
                use cellar_model::filter::{Comparator, CompareOp, Filter, ListOp};
                let hide_grants = Filter::Row(
                    CompareOp::NotEqual,
                    Comparator::BinaryPrefix(Bytes::from_static(ACL_ROW_PREFIX)),
                );
                *filter = Some(match filter.take() {
                    None => hide_grants,
                    Some(f) => Filter::List(ListOp::MustPassAll, vec![hide_grants, f]),
                });
                Ok(())
            }
        }
    }

    /// Narrows a read of a user table to the columns `caller` may see; refused when none.
    fn check_read(
        &self,
        caller: &Caller,
        table: &str,
        columns: &mut Vec<cellar_model::Column>,
        what: &str,
    ) -> Result<(), ServerError> {
        if !self.enabled() {
            return Ok(());
        }
        let view = self.read_view(caller, table, what)?;
        if restrict(columns, &view) {
            Ok(())
        } else {
            // Only columns it may not read were asked for: refused (and audited) as HBase does.
            self.require(caller, Action::Read, &Scope::table(table), what)
        }
    }

    /// WRITE on every family a mutation touches; READ too on a condition's family.
    pub(crate) fn check_mutation(
        &self,
        caller: &Caller,
        table: &str,
        m: &cellar_model::RowMutation,
        kind: MutationKind,
        condition: Option<&cellar_model::Condition>,
    ) -> Result<(), ServerError> {
        if !self.enabled() {
            return Ok(());
        }
        let what = match (kind, condition.is_some()) {
            (_, true) => "check and mutate",
            (MutationKind::Increment, _) => "increment",
            (MutationKind::Append, _) => "append",
            _ => "put or delete",
        };
        let columns = m.entries.iter().map(|e| {
            let whole_family = matches!(
                e.cell_type,
                cellar_model::CellType::DeleteFamily | cellar_model::CellType::DeleteFamilyVersion
            );
            (&e.family[..], (!whole_family).then_some(&e.qualifier[..]))
        });
        self.require_write(caller, table, columns, what)?;
        if let Some(c) = condition {
            self.require(caller, Action::Read, &Scope::family(table, &c.family), what)?;
        }
        Ok(())
    }
}

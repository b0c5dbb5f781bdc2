//! What the master says of tables: their descriptors, names and states, by pattern or by
//! namespace. Callers see the user tables they hold a permission on, and the system tables
//! (hbase:meta, which every client reads) when they ask for them.

use super::{
    namespace_not_found, table_not_found, table_of, user_tables, visible_table, Call, Result,
};
use crate::hbase::{
    message, meta_view, names, schema, CallCtx, HbaseError, HbaseService, Reply, Request,
};
use crate::meta::META_TABLE;
use crate::names as catalog_names;
use crate::router::TableState;
use bytes::Bytes;
use cellar_model::{BloomType, FamilySchema, TableSchema};
use cellar_proto::hbase;

/// GetTableDescriptors: the tables named, or those a pattern and namespace pick.
#[derive(Debug, Clone)]
pub(crate) struct GetTableDescriptors {
    pub(crate) pick: Selection,
    /// The tables named; none: every table the selection takes.
    pub(crate) tables: Vec<String>,
}

impl GetTableDescriptors {
    pub(crate) fn decode(param: Bytes, _cellblock: Bytes) -> Result<Request> {
        let req: hbase::GetTableDescriptorsRequest = message(param, "GetTableDescriptorsRequest")?;
        let pick = Selection::new(
            req.regex.as_deref(),
            req.namespace.as_deref(),
            req.include_sys_tables(),
        )?;
        let tables = req
            .table_names
            .iter()
            .map(names::table_from_pb)
            .collect::<Result<_>>()?;
        Ok(Call::GetTableDescriptors(GetTableDescriptors { pick, tables }).into())
    }

    pub(crate) fn execute(self, svc: &HbaseService, ctx: &CallCtx) -> Result<Reply> {
        let pick = self.pick;
        let schemas: Vec<TableSchema> = if self.tables.is_empty() {
            pick.check_namespace(svc)?;
            listed_tables(svc, ctx, pick.sys)
                .into_iter()
                .filter(|(n, _)| pick.matches(n))
                .map(|(_, s)| s)
                .collect()
        } else {
            // Tables that do not exist are left out; the client reports them. As in
            // HBase, the regex still applies to the tables named (the namespace does not),
            // and a system table named is described whether or not system tables are asked
            // for (`describe 'hbase:meta'`).
            self.tables
                .iter()
                .filter(|name| pick.matches_name(name))
                .filter_map(|name| match system_table(name) {
                    Some(schema) => Some(schema),
                    None => visible_table(svc, name).map(|route| (*route.schema).clone()),
                })
                .collect()
        };
        Ok(Reply::message(&hbase::GetTableDescriptorsResponse {
            table_schema: schemas.iter().map(schema::table_to_pb).collect(),
        }))
    }
}

/// GetTableNames: the names of the tables a pattern and namespace pick.
#[derive(Debug, Clone)]
pub(crate) struct GetTableNames {
    pub(crate) pick: Selection,
}

impl GetTableNames {
    pub(crate) fn decode(param: Bytes, _cellblock: Bytes) -> Result<Request> {
        let req: hbase::GetTableNamesRequest = message(param, "GetTableNamesRequest")?;
        Ok(Call::GetTableNames(GetTableNames {
            pick: Selection::new(
                req.regex.as_deref(),
                req.namespace.as_deref(),
                req.include_sys_tables(),
            )?,
        })
        .into())
    }

    pub(crate) fn execute(self, svc: &HbaseService, ctx: &CallCtx) -> Result<Reply> {
        let pick = self.pick;
        pick.check_namespace(svc)?;
        Ok(Reply::message(&hbase::GetTableNamesResponse {
            table_names: listed_tables(svc, ctx, pick.sys)
                .into_iter()
                .filter(|(n, _)| pick.matches(n))
                .map(|(n, _)| names::table_to_pb(&n))
                .collect(),
        }))
    }
}

/// GetTableState: enabled or disabled (meta always enabled).
#[derive(Debug, Clone)]
pub(crate) struct GetTableState {
    pub(crate) table: String,
}

impl GetTableState {
    pub(crate) fn decode(param: Bytes, _cellblock: Bytes) -> Result<Request> {
        let req: hbase::GetTableStateRequest = message(param, "GetTableStateRequest")?;
        Ok(Call::GetTableState(GetTableState {
            table: table_of(&req.table_name, "GetTableStateRequest")?,
        })
        .into())
    }

    pub(crate) fn execute(self, svc: &HbaseService) -> Result<Reply> {
        let table = self.table;
        let state = if table == META_TABLE {
            TableState::Enabled
        } else {
            visible_table(svc, &table)
                .ok_or_else(|| table_not_found(&table))?
                .state
        };
        Ok(Reply::message(&hbase::GetTableStateResponse {
            table_state: meta_view::table_state_pb(state),
        }))
    }
}

/// ListTableDescriptorsByNamespace or ListTableNamesByNamespace: a namespace's tables.
#[derive(Debug, Clone)]
pub(crate) struct NamespaceTables {
    pub(crate) namespace: String,
    /// ListTableNamesByNamespace, else the descriptors.
    pub(crate) names_only: bool,
}

impl NamespaceTables {
    pub(crate) fn decode_descriptors(param: Bytes, _cellblock: Bytes) -> Result<Request> {
        let req: hbase::ListTableDescriptorsByNamespaceRequest =
            message(param, "ListTableDescriptorsByNamespace")?;
        Ok(Call::NamespaceTables(NamespaceTables {
            namespace: req.namespace_name,
            names_only: false,
        })
        .into())
    }

    pub(crate) fn decode_names(param: Bytes, _cellblock: Bytes) -> Result<Request> {
        let req: hbase::ListTableNamesByNamespaceRequest =
            message(param, "ListTableNamesByNamespace")?;
        Ok(Call::NamespaceTables(NamespaceTables {
            namespace: req.namespace_name,
            names_only: true,
        })
        .into())
    }

    pub(crate) fn execute(self, svc: &HbaseService, ctx: &CallCtx) -> Result<Reply> {
        let ns = self.namespace;
        if !svc.master()?.namespaces().contains_key(&ns) {
            return Err(namespace_not_found(&ns));
        }
        // HBase lists a namespace's system tables with it (hbase's, when asked for).
        let tables: Vec<_> = listed_tables(svc, ctx, true)
            .into_iter()
            .filter(|(n, _)| catalog_names::split(n).0 == ns)
            .collect();
        if self.names_only {
            Ok(Reply::message(&hbase::ListTableNamesByNamespaceResponse {
                table_name: tables.iter().map(|(n, _)| names::table_to_pb(n)).collect(),
            }))
        } else {
            Ok(Reply::message(
                &hbase::ListTableDescriptorsByNamespaceResponse {
                    table_schema: tables.iter().map(|(_, s)| schema::table_to_pb(s)).collect(),
                },
            ))
        }
    }
}

/// Which tables a list call wants: HBase matches the regex against the whole name, and for
/// tables of the default namespace also against `default:<name>`.
#[derive(Debug, Clone)]
pub(crate) struct Selection {
    regex: Option<regex::Regex>,
    namespace: Option<String>,
    /// Whether system tables are listed (`include_sys_tables`).
    sys: bool,
}

impl Selection {
    pub(crate) fn new(
        regex: Option<&str>,
        namespace: Option<&str>,
        sys: bool,
    ) -> Result<Selection> {
        let regex = regex
            .filter(|r| !r.is_empty())
            .map(|r| {
                regex::RegexBuilder::new(&format!("^(?:{r})$"))
                    .size_limit(cellar_model::filter::MAX_REGEX_BYTES)
                    .dfa_size_limit(cellar_model::filter::MAX_REGEX_BYTES)
                    .build()
                    .map_err(|e| {
                        HbaseError::do_not_retry(format!("invalid table name pattern '{r}': {e}"))
                    })
            })
            .transpose()?;
        Ok(Selection {
            regex,
            namespace: namespace.filter(|n| !n.is_empty()).map(String::from),
            sys,
        })
    }

    /// HBase looks the namespace up first: one that does not exist is
    /// NamespaceNotFoundException, not an empty list.
    fn check_namespace(&self, svc: &HbaseService) -> Result<()> {
        match &self.namespace {
            Some(ns) if !svc.master()?.namespaces().contains_key(ns) => {
                Err(namespace_not_found(ns))
            }
            _ => Ok(()),
        }
    }

    pub(crate) fn matches(&self, table: &str) -> bool {
        let (ns, _) = catalog_names::split(table);
        if self.namespace.as_deref().is_some_and(|want| want != ns) {
            return false;
        }
        self.matches_name(table)
    }

    /// Whether the regex (if any) takes `table`, whatever the namespace asked for.
    pub(crate) fn matches_name(&self, table: &str) -> bool {
        let (ns, _) = catalog_names::split(table);
        match &self.regex {
            None => true,
            Some(re) => {
                re.is_match(table)
                    || (ns == catalog_names::DEFAULT_NAMESPACE
                        && re.is_match(&format!("default:{table}")))
            }
        }
    }
}

/// The tables a listing shows, sorted by name: the user tables the caller sees, and with
/// `sys` the system tables.
fn listed_tables(svc: &HbaseService, ctx: &CallCtx, sys: bool) -> Vec<(String, TableSchema)> {
    let mut tables = user_tables(svc, ctx);
    if sys {
        tables.push((META_TABLE.to_string(), meta_descriptor()));
        tables.sort_by(|a, b| a.0.cmp(&b.0));
    }
    tables
}

/// The descriptor of a system table HBase's clients know, `None` for other names. Cellar's
/// one is hbase:meta (computed from its catalog; HBase 2.6 also lists hbase:namespace, a table
/// Cellar does not have: its namespaces live in the catalog, as HBase 3 keeps them in meta).
fn system_table(name: &str) -> Option<TableSchema> {
    (name == META_TABLE).then(meta_descriptor)
}

/// hbase:meta as HBase 2.6 describes it: `info` and `table` (three versions, in memory,
/// 8 KiB blocks, row+column blooms) and `rep_barrier` (every version; empty here, as on an
/// HBase without serial replication).
fn meta_descriptor() -> TableSchema {
    let family = |name: &str, versions: u32, block_size: u32| {
        let mut f = FamilySchema::new(name);
        f.max_versions = versions;
        f.in_memory = true;
        f.block_size = block_size;
        f.bloom = BloomType::RowCol;
        f
    };
    TableSchema::new(
        META_TABLE,
        vec![
            family("info", 3, 8 * 1024),
            family("rep_barrier", i32::MAX as u32, 64 * 1024),
            family("table", 3, 8 * 1024),
        ],
    )
}

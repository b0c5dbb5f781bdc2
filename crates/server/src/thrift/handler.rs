//! The calls of `Hbase.thrift`'s `Hbase` service, each turned into calls of Cellar's client.
//! HBase's semantics: a `*Ts` read sees versions older than the timestamp (`[0, ts)`), a
//! `*Ts` write puts at the timestamp and deletes versions at or before it; a column is
//! `family:qualifier` (`family:` the empty qualifier), or `family` for the whole family; a
//! read of nothing returns an empty list; `mutateRow` applies its deletes before its puts,
//! `mutateRows` its puts before its deletes.

use super::protocol::{Message, MessageType, TType, Value};
use super::values::{column_name, row_result, split_column, tcell, Fault, Fields, Outcome};
use super::{Gateway, OpenScanner};
use bytes::Bytes;
use cellar_client::{Error as ClientError, ErrorCode};
use cellar_model::{
    CompareOp, Condition, Durability, FamilySchema, Filter, Get, RowMutation, Scan, TableSchema,
    LATEST_TIMESTAMP,
};
use std::sync::Arc;
use std::time::Instant;

/// TApplicationException types.
const UNKNOWN_METHOD: i32 = 1;
const INVALID_MESSAGE_TYPE: i32 = 2;
const INTERNAL_ERROR: i32 = 6;

/// The methods that declare `IllegalArgument` (field 2) beside `IOError` (field 1).
const DECLARES_ILLEGAL_ARGUMENT: &[&str] = &[
    "createTable",
    "mutateRow",
    "mutateRowTs",
    "mutateRows",
    "mutateRowsTs",
    "atomicIncrement",
    "scannerGet",
    "scannerGetList",
    "scannerClose",
    "checkAndPut",
];

/// One call of one caller: the gateway, and the client that calls for the caller.
pub(crate) struct Call<'a> {
    gw: &'a Gateway,
    /// Calls the servers for `user`.
    pub(crate) client: cellar_client::Client,
    /// Who the caller is.
    pub(crate) user: Arc<str>,
}

impl std::ops::Deref for Call<'_> {
    type Target = Gateway;
    fn deref(&self) -> &Gateway {
        self.gw
    }
}

/// An answer to one call, for the connection to write in the caller's protocol and framing.
pub struct Reply {
    pub name: String,
    pub kind: MessageType,
    pub seq: i32,
    pub body: Vec<(i16, Value)>,
    /// Answered with an exception (declared or not).
    pub failed: bool,
}

/// Serves one call of `user`; `None` for a oneway call (no answer).
pub async fn call(gw: &Gateway, user: Option<&Arc<str>>, msg: Message) -> Option<Reply> {
    let Message {
        name,
        kind,
        seq,
        body,
    } = msg;
    let outcome = match kind {
        MessageType::Call | MessageType::Oneway => match user {
            None => Err(Fault::io(
                "org.apache.hadoop.hbase.security.AccessDeniedException: the Thrift gateway does not know who you are: present a client certificate (this port serves TLS), or have thrift.user set for callers without one".to_string(),
            )),
            Some(user) => match gw.client_for(user).await {
                Ok(client) => {
                    let c = Call {
                        gw,
                        client,
                        user: user.clone(),
                    };
                    dispatch(&c, &name, &Fields(&body)).await
                }
                Err(e) => Err(Fault::io(e)),
            },
        },
        other => Err(Fault::Application {
            kind: INVALID_MESSAGE_TYPE,
            message: format!("{name}: a server takes calls, not {other:?} messages"),
        }),
    };
    if kind == MessageType::Oneway {
        return None;
    }
    let (kind, body, failed) = match outcome {
        Ok(Some(v)) => (MessageType::Reply, vec![(0, v)], false),
        Ok(None) => (MessageType::Reply, Vec::new(), false),
        Err(Fault::Application { kind, message }) => (
            MessageType::Exception,
            vec![(1, Value::text(message)), (2, Value::I32(kind))],
            true,
        ),
        Err(fault) => {
            let (id, message) = match fault {
                Fault::IllegalArgument(m) if DECLARES_ILLEGAL_ARGUMENT.contains(&name.as_str()) => {
                    (2, m)
                }
                Fault::AlreadyExists(m) if name == "createTable" => (3, m),
                Fault::Io(m)
                | Fault::IllegalArgument(m)
                | Fault::AlreadyExists(m)
                | Fault::Application { message: m, .. } => (1, m),
            };
            tracing::debug!(method = %name, error = %message, "thrift call failed");
            // IOError.canRetry: HBase's rule, false for its do-not-retry exceptions (every
            // class the gateway names but a plain IOException).
            let can_retry = message.starts_with("java.io.IOException");
            let mut ex = vec![(1, Value::text(message))];
            if id == 1 {
                ex.push((2, Value::Bool(can_retry)));
            }
            (MessageType::Reply, vec![(id, Value::Struct(ex))], true)
        }
    };
    Some(Reply {
        name,
        kind,
        seq,
        body,
        failed,
    })
}

async fn dispatch(gw: &Call<'_>, name: &str, a: &Fields<'_>) -> Outcome<Option<Value>> {
    let admin = gw.client.admin();
    match name {
        // ---- tables ----
        "getTableNames" => {
            let tables = admin.list_tables().await.map_err(client_fault)?;
            let names = tables
                .into_iter()
                .filter(|t| !t.schema.name.starts_with("hbase:"))
                .map(|t| Value::text(t.schema.name))
                .collect();
            Ok(Some(Value::List(TType::Binary, names)))
        }
        "getTableNamesWithIsTableEnabled" => {
            let tables = admin.list_tables().await.map_err(client_fault)?;
            let map = tables
                .into_iter()
                .filter(|t| !t.schema.name.starts_with("hbase:"))
                .map(|t| (Value::text(t.schema.name), Value::Bool(t.enabled)))
                .collect();
            Ok(Some(Value::Map(TType::Binary, TType::Bool, map)))
        }
        "isTableEnabled" => {
            let t = a.text(1, "tableName")?;
            let info = admin.describe_table(&t).await.map_err(client_fault)?;
            Ok(Some(Value::Bool(info.enabled)))
        }
        // HBase's messages for a table in the wrong state, word for word (its master's
        // exception text, in places behind its class twice).
        "enableTable" => {
            let t = a.text(1, "tableName")?;
            match admin.enable_table(&t).await {
                Ok(()) => Ok(None),
                Err(e) if e.code() == Some(ErrorCode::TableNotDisabled) => Err(Fault::io(format!(
                    "org.apache.hadoop.hbase.TableNotDisabledException: tableName={t}, state=ENABLED"
                ))),
                Err(e) => Err(client_fault(e)),
            }
        }
        "disableTable" => {
            let t = a.text(1, "tableName")?;
            match admin.disable_table(&t).await {
                Ok(()) => Ok(None),
                Err(e) if e.code() == Some(ErrorCode::TableDisabled) => Err(Fault::io(format!(
                    "org.apache.hadoop.hbase.TableNotEnabledException: org.apache.hadoop.hbase.TableNotEnabledException: {t}"
                ))),
                Err(e) if e.code() == Some(ErrorCode::TableNotFound) => Err(Fault::io(format!(
                    "org.apache.hadoop.hbase.TableNotFoundException: org.apache.hadoop.hbase.TableNotFoundException: {t}"
                ))),
                Err(e) => Err(client_fault(e)),
            }
        }
        "compact" | "majorCompact" => {
            let target = a.text(1, "tableNameOrRegionName")?;
            // A region name is `table,startKey,id.encoded.`: its table is compacted.
            let table = target.split(',').next().unwrap_or_default().to_string();
            admin
                .compact(&table, name == "majorCompact")
                .await
                .map_err(client_fault)?;
            Ok(None)
        }
        "getColumnDescriptors" => {
            let t = a.text(1, "tableName")?;
            let info = admin.describe_table(&t).await.map_err(client_fault)?;
            let map = info
                .schema
                .families
                .iter()
                .map(|f| {
                    let d = column_descriptor(f);
                    (Value::Binary(column_name(f.name.as_bytes(), b"")), d)
                })
                .collect();
            Ok(Some(Value::Map(TType::Binary, TType::Struct, map)))
        }
        "getTableRegions" => {
            let t = a.text(1, "tableName")?;
            let regions = match admin.list_regions(&t).await {
                Ok(r) => r,
                // HBase answers an unknown table with no regions.
                Err(e) if e.code() == Some(ErrorCode::TableNotFound) => Vec::new(),
                Err(e) => return Err(client_fault(e)),
            };
            let list = regions.iter().map(region_info).collect();
            Ok(Some(Value::List(TType::Struct, list)))
        }
        "createTable" => {
            let t = a.text(1, "tableName")?;
            let families = a
                .struct_list(2, "columnFamilies")?
                .iter()
                .map(family_schema)
                .collect::<Outcome<Vec<_>>>()?;
            if families.is_empty() {
                return Err(Fault::io(
                    "org.apache.hadoop.hbase.DoNotRetryIOException: Table should have at least one column family.",
                ));
            }
            match admin
                .create_table(TableSchema::new(t.clone(), families), Vec::new())
                .await
            {
                Ok(()) => Ok(None),
                Err(e) if e.code() == Some(ErrorCode::TableExists) => {
                    Err(Fault::AlreadyExists("table name already in use".into()))
                }
                // HBase's TableName.valueOf throws an IllegalArgumentException its handler does
                // not catch (the families were checked above).
                Err(e) if e.code() == Some(ErrorCode::InvalidArgument) => {
                    Err(internal(name, server_message(&e)))
                }
                Err(e) => Err(client_fault(e)),
            }
        }
        "deleteTable" => {
            let t = a.text(1, "tableName")?;
            match admin.delete_table(&t).await {
                Ok(()) => Ok(None),
                Err(e) if e.code() == Some(ErrorCode::TableNotFound) => {
                    Err(Fault::io("java.io.IOException: table does not exist"))
                }
                Err(e) if e.code() == Some(ErrorCode::TableNotDisabled) => Err(Fault::io(format!(
                    "org.apache.hadoop.hbase.TableNotDisabledException: org.apache.hadoop.hbase.TableNotDisabledException: Not DISABLED; tableName={t}, state=ENABLED"
                ))),
                Err(e) => Err(client_fault(e)),
            }
        }

        // ---- reads ----
        "get" => {
            let (table, row) = (a.text(1, "tableName")?, a.bytes(2, "row")?);
            let get = column_get(row, &a.bytes(3, "column")?, 1, None);
            Ok(Some(cells(gw, &table, get).await?))
        }
        "getVer" => {
            let (table, row) = (a.text(1, "tableName")?, a.bytes(2, "row")?);
            let n = versions(a.opt_i32(4, "numVersions")?)?;
            let get = column_get(row, &a.bytes(3, "column")?, n, None);
            Ok(Some(cells(gw, &table, get).await?))
        }
        "getVerTs" => {
            let (table, row) = (a.text(1, "tableName")?, a.bytes(2, "row")?);
            let ts = timestamp(name, a.i64(4, "timestamp")?)?;
            let n = versions(a.opt_i32(5, "numVersions")?)?;
            let get = column_get(row, &a.bytes(3, "column")?, n, Some(ts));
            Ok(Some(cells(gw, &table, get).await?))
        }
        "getRow" | "getRowWithColumns" | "getRowTs" | "getRowWithColumnsTs" | "getRows"
        | "getRowsWithColumns" | "getRowsTs" | "getRowsWithColumnsTs" => {
            // One row or a list of rows (field 2); then the columns (field 3) of the
            // `WithColumns` calls; then the timestamp of the `Ts` calls.
            let table = a.text(1, "tableName")?;
            let rows = if name.starts_with("getRows") {
                a.bytes_list(2, "rows")?
            } else {
                vec![a.bytes(2, "row")?]
            };
            let with_columns = name.contains("WithColumns");
            let columns = if with_columns {
                a.bytes_list(3, "columns")?
            } else {
                Vec::new()
            };
            let ts = if name.ends_with("Ts") {
                Some(timestamp(
                    name,
                    a.i64(if with_columns { 4 } else { 3 }, "timestamp")?,
                )?)
            } else {
                None
            };
            Ok(Some(get_rows(gw, &table, rows, &columns, ts).await?))
        }

        // ---- writes ----
        "mutateRow" | "mutateRowTs" => {
            let table = a.text(1, "tableName")?;
            let row = a.bytes(2, "row")?;
            let mutations = a.struct_list(3, "mutations")?;
            let ts = write_ts(a, name, 4)?;
            let (deletes, puts) = row_mutations(row, &mutations, ts)?;
            apply(gw, &table, deletes.into_iter().collect(), puts.into_iter().collect()).await?;
            Ok(None)
        }
        "mutateRows" | "mutateRowsTs" => {
            let table = a.text(1, "tableName")?;
            let batches = a.struct_list(2, "rowBatches")?;
            let ts = write_ts(a, name, 3)?;
            let mut deletes = Vec::new();
            let mut puts = Vec::new();
            for b in &batches {
                let row = b.bytes(1, "BatchMutation.row")?;
                // HBase's mutateRows does not catch the IllegalArgumentException of a bad
                // mutation: Thrift's internal error.
                let (d, p) = row_mutations(row, &b.struct_list(2, "BatchMutation.mutations")?, ts)
                    .map_err(|f| match f {
                        Fault::IllegalArgument(m) => internal(name, m),
                        f => f,
                    })?;
                deletes.extend(d);
                puts.extend(p);
            }
            // HBase sends a batch's puts first, then its deletes (a single row's the other way);
            // each batch fails as its client reports a batch.
            let n = puts.len();
            apply_raw(gw, &table, Vec::new(), puts)
                .await
                .map_err(|e| batch_fault(e, n))?;
            let n = deletes.len();
            apply_raw(gw, &table, deletes, Vec::new())
                .await
                .map_err(|e| batch_fault(e, n))?;
            Ok(None)
        }
        "atomicIncrement" => {
            let table = a.text(1, "tableName")?;
            let row = a.bytes(2, "row")?;
            let (family, qualifier) = split_column(&a.bytes(3, "column")?);
            let amount = a.i64(4, "value")?;
            let v = gw
                .client
                .table(&table)
                .increment(&row, &family, qualifier.as_deref().unwrap_or(b""), amount)
                .await
                .map_err(client_fault)?;
            Ok(Some(Value::I64(v)))
        }
        "increment" => {
            let inc = a.strukt(1, "increment")?;
            increment(gw, &inc).await?;
            Ok(None)
        }
        "incrementRows" => {
            for inc in a.struct_list(1, "increments")? {
                increment(gw, &inc).await?;
            }
            Ok(None)
        }
        "append" => {
            let ap = a.strukt(1, "append")?;
            let table = ap.text(1, "TAppend.table")?;
            let row = ap.bytes(2, "TAppend.row")?;
            let columns = ap.bytes_list(3, "TAppend.columns")?;
            let values = ap.bytes_list(4, "TAppend.values")?;
            if columns.len() != values.len() {
                return Err(internal(
                    name,
                    format!(
                        "TAppend has {} columns and {} values",
                        columns.len(),
                        values.len()
                    ),
                ));
            }
            let split: Vec<(Bytes, Bytes, Bytes)> = columns
                .iter()
                .zip(values)
                .map(|(c, v)| {
                    let (f, q) = split_column(c);
                    (f, q.unwrap_or_default(), v)
                })
                .collect();
            let cols: Vec<(&[u8], &[u8], &[u8])> = split
                .iter()
                .map(|(f, q, v)| (&f[..], &q[..], &v[..]))
                .collect();
            let r = gw
                .client
                .table(&table)
                .append(&row, &cols)
                .await
                .map_err(client_fault)?;
            let list = r.cells.iter().map(|c| tcell(&c.value, c.timestamp)).collect();
            Ok(Some(Value::List(TType::Struct, list)))
        }
        "checkAndPut" => {
            let table = a.text(1, "tableName")?;
            let row = a.bytes(2, "row")?;
            let (family, qualifier) = split_column(&a.bytes(3, "column")?);
            // No value: the put happens only if the column does not exist.
            let value = a.opt_bytes(5, "value")?;
            let m = a.strukt(6, "mput")?;
            let (deletes, puts) = row_mutations(row.clone(), &[m], LATEST_TIMESTAMP)?;
            if deletes.is_some() {
                return Err(Fault::illegal("checkAndPut takes a put, not a delete"));
            }
            let Some(put) = puts else {
                return Err(Fault::illegal("checkAndPut needs a put"));
            };
            let cond = Condition {
                row,
                family,
                qualifier: qualifier.unwrap_or_default(),
                op: CompareOp::Equal,
                value,
            };
            let applied = gw
                .client
                .table(&table)
                .check_and_mutate(cond, put)
                .await
                .map_err(client_fault)?;
            Ok(Some(Value::Bool(applied)))
        }
        "deleteAll" | "deleteAllTs" => {
            let table = a.text(1, "tableName")?;
            let row = a.bytes(2, "row")?;
            let (family, qualifier) = split_column(&a.bytes(3, "column")?);
            let ts = write_ts(a, name, 4)?;
            let m = match qualifier {
                Some(q) => RowMutation::new(row).delete_column(&family, &q, ts),
                None => RowMutation::new(row).delete_family(&family, ts),
            };
            gw.client
                .table(&table)
                .delete(m)
                .await
                .map_err(client_fault)?;
            Ok(None)
        }
        "deleteAllRow" | "deleteAllRowTs" => {
            let table = a.text(1, "tableName")?;
            let row = a.bytes(2, "row")?;
            let ts = write_ts(a, name, 3)?;
            let info = admin.describe_table(&table).await.map_err(client_fault)?;
            let m = info
                .schema
                .families
                .iter()
                .fold(RowMutation::new(row), |m, f| {
                    m.delete_family(f.name.as_bytes(), ts)
                });
            gw.client
                .table(&table)
                .delete(m)
                .await
                .map_err(client_fault)?;
            Ok(None)
        }

        // ---- scanners ----
        "scannerOpenWithScan" => {
            let table = a.text(1, "tableName")?;
            let t = a.strukt(2, "scan")?;
            let mut scan = Scan::new();
            if let Some(s) = t.opt_bytes(1, "TScan.startRow")? {
                scan.start_row = s;
            }
            if let Some(s) = t.opt_bytes(2, "TScan.stopRow")? {
                scan.stop_row = s;
            }
            if let Some(ts) = t.opt_i64(3, "TScan.timestamp")? {
                scan = scan.time_range(0, timestamp(name, ts)?);
            }
            scan = add_columns(scan, &t.bytes_list(4, "TScan.columns")?);
            if let Some(c) = t.opt_i32(5, "TScan.caching")? {
                if c > 0 {
                    scan = scan.caching(c as u32);
                }
            }
            if let Some(f) = t.opt_bytes(6, "TScan.filterString")? {
                if !f.is_empty() {
                    scan = scan.filter(parse_filter(&f)?);
                }
            }
            if let Some(b) = t.opt_i32(7, "TScan.batchSize")? {
                if b > 0 {
                    scan = scan.batch(b as u32);
                }
            }
            let sort = t.opt_bool(8, "TScan.sortColumns")?.unwrap_or(false);
            if t.opt_bool(9, "TScan.reversed")?.unwrap_or(false) {
                scan.reversed = true;
            }
            if let Some(cb) = t.opt_bool(10, "TScan.cacheBlocks")? {
                scan.cache_blocks = cb;
            }
            open_scanner(gw, &table, scan, sort).await
        }
        "scannerOpen" | "scannerOpenTs" => {
            let table = a.text(1, "tableName")?;
            let mut scan = Scan::new();
            scan.start_row = a.opt_bytes(2, "startRow")?.unwrap_or_default();
            scan = add_columns(scan, &a.bytes_list(3, "columns")?);
            if name == "scannerOpenTs" {
                scan = scan.time_range(0, timestamp(name, a.i64(4, "timestamp")?)?);
            }
            open_scanner(gw, &table, scan, false).await
        }
        "scannerOpenWithStop" | "scannerOpenWithStopTs" => {
            let table = a.text(1, "tableName")?;
            let mut scan = Scan::new();
            scan.start_row = a.opt_bytes(2, "startRow")?.unwrap_or_default();
            scan.stop_row = a.opt_bytes(3, "stopRow")?.unwrap_or_default();
            scan = add_columns(scan, &a.bytes_list(4, "columns")?);
            if name == "scannerOpenWithStopTs" {
                scan = scan.time_range(0, timestamp(name, a.i64(5, "timestamp")?)?);
            }
            open_scanner(gw, &table, scan, false).await
        }
        "scannerOpenWithPrefix" => {
            let table = a.text(1, "tableName")?;
            let prefix = a.opt_bytes(2, "startAndPrefix")?.unwrap_or_default();
            let scan = add_columns(Scan::new().prefix(&prefix), &a.bytes_list(3, "columns")?);
            open_scanner(gw, &table, scan, false).await
        }
        "scannerGet" => {
            let id = a.opt_i32(1, "id")?.unwrap_or(-1);
            Ok(Some(scanner_rows(gw, id, 1).await?))
        }
        "scannerGetList" => {
            let id = a.opt_i32(1, "id")?.unwrap_or(-1);
            let n = a.opt_i32(2, "nbRows")?.unwrap_or(1);
            if n < 0 {
                return Err(internal(name, format!("nbRows {n} is negative")));
            }
            Ok(Some(scanner_rows(gw, id, n as usize).await?))
        }
        "scannerClose" => {
            let id = a.opt_i32(1, "id")?.unwrap_or(-1);
            let removed = {
                let mut map = gw.scanners.lock();
                // Another caller's scanner is as unknown as a closed one.
                match map.get(&id) {
                    Some((owner, _)) if *owner == gw.user => map.remove(&id),
                    _ => None,
                }
            };
            match removed {
                // Dropping the scanner closes it on the server.
                Some(_) => Ok(None),
                None => Err(Fault::illegal("scanner ID is invalid")),
            }
        }

        // ---- the rest of HBase 2's interface ----
        "getRegionInfo" => {
            // A meta row key: `table,row,...`; answers the region holding `row`.
            let key = a.bytes(1, "row")?;
            let text = String::from_utf8_lossy(&key).into_owned();
            let mut parts = text.splitn(3, ',');
            let (Some(table), Some(row)) = (parts.next(), parts.next()) else {
                return Err(Fault::io(format!(
                    "{text:?} is not a region name (table,row,id)"
                )));
            };
            let regions = admin.list_regions(table).await.map_err(client_fault)?;
            let r = regions
                .iter()
                .find(|r| r.contains(row.as_bytes()))
                .ok_or_else(|| Fault::io(format!("no region of {table} holds row {row:?}")))?;
            Ok(Some(region_info(r)))
        }
        "getThriftServerType" => Ok(Some(Value::I32(1))), // TThriftServerType.ONE
        "getClusterId" => match &gw.cluster_id {
            Some(id) => Ok(Some(Value::text(id.clone()))),
            // The call declares no exception: Thrift's internal error carries the message.
            None => Err(Fault::Application {
                kind: INTERNAL_ERROR,
                message: "Internal error processing getClusterId: a gateway started with `cellar thrift` does not know the cluster id; `--thrift-listen` on a server does".into(),
            }),
        },
        other => Err(Fault::Application {
            kind: UNKNOWN_METHOD,
            message: format!("Invalid method name: '{other}'"),
        }),
    }
}

/// HBase's wording where the client library would name the exception class.
fn client_fault(e: ClientError) -> Fault {
    let class = match e.code() {
        Some(ErrorCode::TableNotFound) => "org.apache.hadoop.hbase.TableNotFoundException",
        Some(ErrorCode::NoSuchFamily) => {
            "org.apache.hadoop.hbase.regionserver.NoSuchColumnFamilyException"
        }
        Some(ErrorCode::TableExists) => "org.apache.hadoop.hbase.TableExistsException",
        Some(ErrorCode::TableDisabled) => "org.apache.hadoop.hbase.TableNotEnabledException",
        Some(ErrorCode::TableNotDisabled) => "org.apache.hadoop.hbase.TableNotDisabledException",
        Some(ErrorCode::PermissionDenied) => {
            "org.apache.hadoop.hbase.security.AccessDeniedException"
        }
        Some(ErrorCode::InvalidArgument) | Some(ErrorCode::MalformedRequest) => {
            "org.apache.hadoop.hbase.DoNotRetryIOException"
        }
        _ => "java.io.IOException",
    };
    let message = server_message(&e);
    let message = match e.code() {
        // HBase's TableNotFoundException says only the table's name.
        Some(ErrorCode::TableNotFound) => table_not_found_name(message),
        // An increment of a cell that is not a counter, in HBase's words.
        Some(ErrorCode::InvalidArgument) => match counter_width(&message) {
            Some(n) => {
                format!("{class}: Field is not a long, it's {n} bytes wide")
            }
            None => message,
        },
        _ => message,
    };
    Fault::io(format!("{class}: {message}"))
}

/// The width of the cell a refused increment found, from the region server's message
/// ("increment of f:q: the current value is N bytes, not an 8-byte counter").
fn counter_width(message: &str) -> Option<usize> {
    let rest = message.split("the current value is ").nth(1)?;
    let (n, tail) = rest.split_once(' ')?;
    tail.starts_with("bytes, not an 8-byte counter")
        .then(|| n.parse().ok())
        .flatten()
}

/// Thrift's internal error for `method`, as HBase's handler answers an exception it does not
/// declare (an unchecked one: `IllegalArgumentException`, a parser's); HBase's message ends
/// at the method's name, the gateway's adds the reason.
fn internal(method: &str, reason: impl std::fmt::Display) -> Fault {
    Fault::Application {
        kind: INTERNAL_ERROR,
        message: format!("Internal error processing {method}: {reason}"),
    }
}

/// The server's own message, without the client's decoration.
fn server_message(e: &ClientError) -> String {
    match e {
        ClientError::Rpc { message, .. } => message.clone(),
        ClientError::RetriesExhausted { last, .. } => server_message(last),
        other => other.to_string(),
    }
}

/// The timestamp of a `*Ts` write (argument `id`); the server's clock for the others.
fn write_ts(a: &Fields<'_>, name: &str, id: i16) -> Outcome<u64> {
    if name.ends_with("Ts") {
        timestamp(name, a.i64(id, "timestamp")?)
    } else {
        Ok(LATEST_TIMESTAMP)
    }
}

/// A timestamp argument of `method`. HBase refuses a negative one with an
/// `IllegalArgumentException` that only `mutateRowTs` catches (as `IllegalArgument`); every
/// other call answers Thrift's internal error.
fn timestamp(method: &str, ts: i64) -> Outcome<u64> {
    u64::try_from(ts).map_err(|_| {
        if method == "mutateRowTs" {
            Fault::illegal(format!(
                "java.lang.IllegalArgumentException: Timestamp cannot be negative. ts={ts}"
            ))
        } else {
            internal(method, format!("timestamp {ts} is negative"))
        }
    })
}

fn versions(n: Option<i32>) -> Outcome<u32> {
    match n {
        None => Ok(1),
        Some(n) if n >= 1 => Ok(n as u32),
        Some(_) => Err(Fault::io("java.io.IOException: versions must be positive")),
    }
}

fn column_get(row: Bytes, column: &[u8], n: u32, before: Option<u64>) -> Get {
    let (family, qualifier) = split_column(column);
    let mut get = match qualifier {
        Some(q) => Get::new(row).column(&family, &q),
        None => Get::new(row).family(&family),
    };
    get = get.versions(n);
    if let Some(ts) = before {
        get = get.time_range(0, ts);
    }
    get
}

async fn cells(gw: &Call<'_>, table: &str, get: Get) -> Outcome<Value> {
    let row = gw
        .client
        .table(table)
        .get(get)
        .await
        .map_err(client_fault)?;
    let list = row
        .cells
        .iter()
        .map(|c| tcell(&c.value, c.timestamp))
        .collect();
    Ok(Value::List(TType::Struct, list))
}

/// Rows, each its newest cells of `columns` (all when empty); rows without any are left out.
async fn get_rows(
    gw: &Call<'_>,
    table: &str,
    rows: Vec<Bytes>,
    columns: &[Bytes],
    before: Option<u64>,
) -> Outcome<Value> {
    let t = gw.client.table(table);
    let mut out = Vec::with_capacity(rows.len());
    for row in rows {
        let mut get = Get::new(row);
        for c in columns {
            get = match split_column(c) {
                (f, Some(q)) => get.column(&f, &q),
                (f, None) => get.family(&f),
            };
        }
        if let Some(ts) = before {
            get = get.time_range(0, ts);
        }
        let r = t.get(get).await.map_err(client_fault)?;
        if !r.cells.is_empty() {
            out.push(row_result(&r.row, &r.cells, false));
        }
    }
    Ok(Value::List(TType::Struct, out))
}

/// One row's `Mutation`s as its deletes and its puts (HBase applies the deletes first).
fn row_mutations(
    row: Bytes,
    mutations: &[Fields<'_>],
    ts: u64,
) -> Outcome<(Option<RowMutation>, Option<RowMutation>)> {
    let mut deletes = RowMutation::new(row.clone());
    let mut puts = RowMutation::new(row);
    for m in mutations {
        let is_delete = m.opt_bool(1, "Mutation.isDelete")?.unwrap_or(false);
        let column = m.bytes(2, "Mutation.column")?;
        let (family, qualifier) = split_column(&column);
        if family.is_empty() {
            return Err(Fault::illegal(
                "java.lang.IllegalArgumentException: Family cannot be null",
            ));
        }
        let durability = if m.opt_bool(4, "Mutation.writeToWAL")?.unwrap_or(true) {
            Durability::UseDefault
        } else {
            Durability::SkipWal
        };
        if is_delete {
            deletes = match qualifier {
                Some(q) => deletes.delete_column(&family, &q, ts),
                None => deletes.delete_family(&family, ts),
            };
            deletes.durability = durability;
        } else {
            // HBase drops such a put with only a log line; a dropped write is worse than an
            // error.
            let Some(qualifier) = qualifier else {
                return Err(Fault::illegal(format!(
                    "a put needs family:qualifier, not {:?}",
                    String::from_utf8_lossy(&column)
                )));
            };
            let value = m.opt_bytes(3, "Mutation.value")?.unwrap_or_default();
            puts = puts.put(&family, &qualifier, ts, value);
            puts.durability = durability;
        }
    }
    let some = |m: RowMutation| (!m.entries.is_empty()).then_some(m);
    Ok((some(deletes), some(puts)))
}

/// Applies deletes, then puts.
async fn apply(
    gw: &Call<'_>,
    table: &str,
    deletes: Vec<RowMutation>,
    puts: Vec<RowMutation>,
) -> Outcome<()> {
    apply_raw(gw, table, deletes, puts)
        .await
        .map_err(client_fault)
}

async fn apply_raw(
    gw: &Call<'_>,
    table: &str,
    deletes: Vec<RowMutation>,
    mut puts: Vec<RowMutation>,
) -> Result<(), ClientError> {
    let t = gw.client.table(table);
    for d in deletes {
        t.delete(d).await?;
    }
    if puts.len() > 1 {
        t.put_all(puts).await?;
    } else if let Some(p) = puts.pop() {
        t.put(p).await?;
    }
    Ok(())
}

/// A failed batch of `n` rows as HBase's client reports one (RetriesExhaustedWithDetails
/// Exception: each failure counted under its do-not-retry exception's message, then the
/// servers; a missing table has none, `null`). Cellar's batch fails whole, so every row
/// is counted.
fn batch_fault(e: ClientError, n: usize) -> Fault {
    let what = match e.code() {
        Some(ErrorCode::TableNotFound) => table_not_found_name(server_message(&e)),
        Some(ErrorCode::NoSuchFamily) => format!(
            "org.apache.hadoop.hbase.regionserver.NoSuchColumnFamilyException: {}",
            server_message(&e)
        ),
        _ => return client_fault(e),
    };
    let s = if n == 1 { "" } else { "s" };
    Fault::io(format!(
        "org.apache.hadoop.hbase.client.RetriesExhaustedWithDetailsException: Failed {n} action{s}: {what}: {n} time{s}, servers with issues: null"
    ))
}

/// The table a TableNotFound error names (HBase's message is only that).
fn table_not_found_name(message: String) -> String {
    message
        .strip_prefix("table '")
        .and_then(|m| m.strip_suffix("' not found"))
        .map(str::to_string)
        .unwrap_or(message)
}

async fn increment(gw: &Call<'_>, inc: &Fields<'_>) -> Outcome<()> {
    let table = inc.text(1, "TIncrement.table")?;
    let row = inc.bytes(2, "TIncrement.row")?;
    let (family, qualifier) = split_column(&inc.bytes(3, "TIncrement.column")?);
    let amount = inc.opt_i64(4, "TIncrement.ammount")?.unwrap_or(1);
    gw.client
        .table(&table)
        .increment(&row, &family, qualifier.as_deref().unwrap_or(b""), amount)
        .await
        .map_err(client_fault)?;
    Ok(())
}

fn add_columns(mut scan: Scan, columns: &[Bytes]) -> Scan {
    for c in columns {
        scan = match split_column(c) {
            (f, Some(q)) => scan.column(&f, &q),
            (f, None) => scan.family(&f),
        };
    }
    scan
}

/// A scan's filter string. HBase answers a bad one with Thrift's internal error (its parser's
/// exception is not declared); so does the gateway, but naming the problem.
fn parse_filter(src: &[u8]) -> Outcome<Filter> {
    let bad = |e: String| Fault::Application {
        kind: INTERNAL_ERROR,
        message: format!(
            "Internal error processing scannerOpenWithScan: Incorrect filter string {}: {e}",
            String::from_utf8_lossy(src)
        ),
    };
    let f = cellar_model::parse_filter(src).map_err(bad)?;
    f.validate().map_err(|e| bad(e.to_string()))?;
    Ok(f)
}

async fn open_scanner(
    gw: &Call<'_>,
    table: &str,
    scan: Scan,
    sort: bool,
) -> Outcome<Option<Value>> {
    // Nothing is read yet: as HBase's scannerOpen, a missing table or family fails at the first
    // scannerGet.
    let scanner = gw.client.table(table).scan(scan);
    let id = gw
        .add_scanner(
            gw.user.clone(),
            OpenScanner {
                scanner,
                done: false,
                sort_columns: sort,
                last_used: Instant::now(),
            },
        )
        .map_err(Fault::io)?;
    Ok(Some(Value::I32(id)))
}

async fn scanner_rows(gw: &Call<'_>, id: i32, n: usize) -> Outcome<Value> {
    let entry = gw
        .scanners
        .lock()
        .get(&id)
        .filter(|(owner, _)| *owner == gw.user)
        .map(|(_, s)| s.clone());
    let Some(entry) = entry else {
        return Err(Fault::illegal("scanner ID is invalid"));
    };
    let mut s = entry.lock().await;
    let mut rows = Vec::with_capacity(n.min(1024));
    while rows.len() < n {
        let next = if s.done {
            None
        } else {
            match s.scanner.next().await {
                Ok(r) => r,
                // The scanner stays until closed, as in HBase (happybase closes it after the
                // error): done, it answers empty lists.
                Err(e) => {
                    s.done = true;
                    s.last_used = Instant::now();
                    return Err(client_fault(e));
                }
            }
        };
        let Some(r) = next else {
            s.done = true;
            break;
        };
        rows.push(row_result(&r.row, &r.cells, s.sort_columns));
    }
    s.last_used = Instant::now();
    Ok(Value::List(TType::Struct, rows))
}

fn region_info(r: &cellar_client::RegionLocation) -> Value {
    let (host, port) = match r.server.rsplit_once(':') {
        Some((h, p)) => (h.to_string(), p.parse::<i32>().unwrap_or(0)),
        None => (r.server.clone(), 0),
    };
    Value::Struct(vec![
        (1, Value::Binary(r.start_key.to_vec())),
        (2, Value::Binary(r.end_key.to_vec())),
        (3, Value::I64(r.region_id as i64)),
        (4, Value::text(r.name.clone())),
        (5, Value::Byte(1)),
        (6, Value::text(host)),
        (7, Value::I32(port)),
    ])
}

/// `ColumnDescriptor` of a family: name `family:`, HBase's names for compression and blooms,
/// time to live in seconds (`Integer.MAX_VALUE`: forever); what HBase does not report (bloom
/// vector size and hashes, block cache) the IDL's defaults, 0 and false.
fn column_descriptor(f: &FamilySchema) -> Value {
    let compression = f.compression.to_string().to_ascii_uppercase();
    let bloom = f.bloom.to_string().to_ascii_uppercase();
    let ttl = f
        .ttl_secs
        .map(|s| s.min(i32::MAX as u64) as i32)
        .unwrap_or(i32::MAX);
    Value::Struct(vec![
        (1, Value::Binary(column_name(f.name.as_bytes(), b""))),
        (2, Value::I32(f.max_versions.min(i32::MAX as u32) as i32)),
        (3, Value::text(compression)),
        (4, Value::Bool(f.in_memory)),
        (5, Value::text(bloom)),
        (6, Value::I32(0)),
        (7, Value::I32(0)),
        // HBase's Thrift server does not report it: the IDL's default.
        (8, Value::Bool(false)),
        (9, Value::I32(ttl)),
    ])
}

/// A family from a `ColumnDescriptor`; unset fields take the IDL's defaults.
fn family_schema(d: &Fields<'_>) -> Outcome<FamilySchema> {
    let name = d.bytes(1, "ColumnDescriptor.name")?;
    let (family, _) = split_column(&name);
    if family.is_empty() {
        return Err(Fault::illegal("column name is empty"));
    }
    let family = String::from_utf8(family.to_vec())
        .map_err(|_| Fault::illegal("column family name is not UTF-8"))?;
    let mut f = FamilySchema::new(family.clone());
    let max_versions = d.opt_i32(2, "ColumnDescriptor.maxVersions")?.unwrap_or(3);
    if max_versions < 1 {
        return Err(Fault::illegal(
            "java.lang.IllegalArgumentException: Maximum versions must be positive",
        ));
    }
    f.max_versions = max_versions as u32;
    let text_or_none = |id, what| -> Outcome<String> {
        Ok(d.opt_text(id, what)?
            .filter(|t| !t.is_empty())
            .unwrap_or_else(|| "NONE".into()))
    };
    // HBase looks compression up by its lower-cased name, and a bloom type by its exact
    // (upper-case) enum name; its codecs that Cellar lacks are refused naming both lists.
    let compression = text_or_none(3, "ColumnDescriptor.compression")?.to_ascii_lowercase();
    f.compression = match compression.as_str() {
        "none" | "snappy" | "lz4" | "zstd" => compression
            .parse()
            .map_err(|e| Fault::illegal(format!("family {family}: {e}")))?,
        "gz" | "lzo" | "bzip2" | "lzma" => {
            return Err(Fault::illegal(format!(
                "java.lang.IllegalArgumentException: compression {} is HBase's but not Cellar's (NONE, SNAPPY, LZ4, ZSTD)",
                compression.to_ascii_uppercase()
            )))
        }
        other => {
            return Err(Fault::illegal(format!(
                "java.lang.IllegalArgumentException: Unsupported compression algorithm name: {other}"
            )))
        }
    };
    let bloom = text_or_none(5, "ColumnDescriptor.bloomFilterType")?;
    f.bloom = match bloom.as_str() {
        "NONE" | "ROW" | "ROWCOL" => bloom
            .parse()
            .map_err(|e| Fault::illegal(format!("family {family}: {e}")))?,
        "ROWPREFIX_FIXED_LENGTH" => {
            return Err(Fault::illegal(
                "java.lang.IllegalArgumentException: bloom filter type ROWPREFIX_FIXED_LENGTH is HBase's but not Cellar's (NONE, ROW, ROWCOL)",
            ))
        }
        other => {
            return Err(Fault::illegal(format!(
                "java.lang.IllegalArgumentException: No enum constant org.apache.hadoop.hbase.regionserver.BloomType.{other}"
            )))
        }
    };
    f.in_memory = d.opt_bool(4, "ColumnDescriptor.inMemory")?.unwrap_or(false);
    f.bloom = text_or_none(5, "ColumnDescriptor.bloomFilterType")?
        .parse()
        .map_err(|e| Fault::illegal(format!("family {family}: {e}")))?;
    let ttl = d.opt_i32(9, "ColumnDescriptor.timeToLive")?.unwrap_or(-1);
    f.ttl_secs = (ttl > 0 && ttl != i32::MAX).then_some(ttl as u64);
    Ok(f)
}

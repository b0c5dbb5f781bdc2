//! Turning parsed commands into requests: argument checking, option hashes, column specs
//! and filters, ending in an [`Action`] built from Cellar's model types. Nothing here talks
//! to a server.

use super::parser::{Command, Value};
use bytes::Bytes;
use cellar_model::parse_filter;
use cellar_model::{
    BloomType, Column, Compression, FamilySchema, Filter, Get, RowMutation, Scan, TableSchema,
    TimeRange, LATEST_TIMESTAMP,
};

/// What a command asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    Create {
        schema: TableSchema,
        splits: Vec<Bytes>,
    },
    Alter {
        table: String,
        changes: Vec<FamilySpec>,
        deletes: Vec<String>,
        /// Table options (`alter 't', QUERY_CACHE => true`): set on every family.
        every_family: Vec<Setting>,
        /// The table's own attributes (`alter 't', MAX_FILESIZE => N, READONLY => true`).
        table_settings: Vec<TableSetting>,
    },
    /// Tables whose whole name matches the regular expression.
    List {
        pattern: Option<String>,
    },
    Describe(String),
    ListRegions(String),
    Exists(String),
    Put {
        table: String,
        mutation: RowMutation,
    },
    Get {
        table: String,
        get: Get,
    },
    Scan {
        table: String,
        scan: Scan,
        /// `PREPARED => true`: run as an execution of a prepared scan (compact results).
        prepared: bool,
    },
    Delete {
        table: String,
        mutation: RowMutation,
    },
    DeleteAll {
        table: String,
        row: Bytes,
        target: DeleteTarget,
        timestamp: u64,
    },
    Incr {
        table: String,
        row: Bytes,
        family: Bytes,
        qualifier: Bytes,
        amount: i64,
    },
    GetCounter {
        table: String,
        row: Bytes,
        family: Bytes,
        qualifier: Bytes,
    },
    Count {
        table: String,
        /// Print progress every this many rows.
        interval: u64,
        caching: u32,
    },
    Truncate(String),
    Disable(String),
    Enable(String),
    Drop(String),
    IsEnabled(String),
    IsDisabled(String),
    Status {
        detailed: bool,
    },
    BalanceSwitch(bool),
    Balancer,
    Move {
        region: String,
        server: Option<String>,
    },
    Merge {
        regions: Vec<String>,
        force: bool,
    },
    Snapshot {
        table: String,
        name: String,
        skip_flush: bool,
    },
    ListSnapshots,
    DeleteSnapshot(String),
    CloneSnapshot {
        name: String,
        table: String,
    },
    RestoreSnapshot(String),
    Assign(String),
    Unassign(String),
    Flush(String),
    MajorCompact(String),
    Split {
        table: String,
        row: Option<Bytes>,
    },
    /// `grant 'user', 'RW'[, '@ns' | 'table'[, 'family'[, 'qualifier']]]`.
    Grant {
        user: String,
        actions: String,
        scope: cellar_client::PermissionScope,
    },
    /// `revoke 'user'[, '@ns' | 'table'[, 'family'[, 'qualifier']]]`: everything the user
    /// holds there.
    Revoke {
        user: String,
        scope: cellar_client::PermissionScope,
    },
    /// `user_permission[ '@ns' | 'table']`.
    UserPermission(Option<cellar_client::PermissionScope>),
    Help(Option<String>),
    Exit,
}

/// What `deleteall` removes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeleteTarget {
    /// Every family of the row (the families come from the table's schema).
    Row,
    Family(Bytes),
    Column(Bytes, Bytes),
}

/// A family named in `create` or `alter`, with the options given for it. `alter` applies
/// the options to the family's current schema, so options not named stay as they are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FamilySpec {
    pub name: String,
    pub settings: Vec<Setting>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setting {
    Versions(u32),
    MinVersions(u32),
    Ttl(Option<u64>),
    Compression(Compression),
    Bloom(BloomType),
    BlockSize(u32),
    InMemory(bool),
    QueryCache(bool),
    KeepDeletedCells(bool),
}

impl FamilySpec {
    /// `base` with this spec's options applied.
    pub fn apply_to(&self, mut base: FamilySchema) -> FamilySchema {
        for s in &self.settings {
            match *s {
                Setting::Versions(n) => base.max_versions = n,
                Setting::MinVersions(n) => base.min_versions = n,
                Setting::Ttl(t) => base.ttl_secs = t,
                Setting::Compression(c) => base.compression = c,
                Setting::Bloom(b) => base.bloom = b,
                Setting::BlockSize(n) => base.block_size = n,
                Setting::InMemory(b) => base.in_memory = b,
                Setting::QueryCache(b) => base.query_cache = b,
                Setting::KeepDeletedCells(b) => base.keep_deleted_cells = b,
            }
        }
        base
    }
}

/// One entry of the command table: name, group, usage lines, what it does.
pub struct CommandHelp {
    pub name: &'static str,
    pub group: &'static str,
    pub usage: &'static str,
    pub summary: &'static str,
}

pub const GROUPS: &[&str] = &["general", "ddl", "dml", "tools", "snapshots", "security"];

pub const COMMANDS: &[CommandHelp] = &[
    CommandHelp { name: "status", group: "general", usage: "status\nstatus 'detailed'", summary: "Show the cluster's servers, regions and tables; 'detailed' lists every region server\nand the regions on it." },
    CommandHelp { name: "help", group: "general", usage: "help\nhelp 'command'", summary: "List the commands, or describe one." },
    CommandHelp { name: "exit", group: "general", usage: "exit", summary: "Leave the shell (also: quit, Ctrl-D)." },
    CommandHelp { name: "create", group: "ddl", usage: "create 't', 'cf1', {NAME => 'cf2', VERSIONS => 3, TTL => 60, COMPRESSION => 'ZSTD',\n       BLOOMFILTER => 'ROWCOL', BLOCKSIZE => 65536, IN_MEMORY => true, MIN_VERSIONS => 1},\n       {SPLITS => ['a', 'm']}", summary: "Create a table with the given column families (and optional split points)." },
    CommandHelp { name: "alter", group: "ddl", usage: "alter 't', {NAME => 'cf', VERSIONS => 5}\nalter 't', {NAME => 'cf', QUERY_CACHE => true}\nalter 't', QUERY_CACHE => true\nalter 't', {NAME => 'cf', METHOD => 'delete'}\nalter 't', 'delete' => 'cf'\nalter 't', MAX_FILESIZE => '134217728', DURABILITY => 'ASYNC_WAL', READONLY => true", summary: "Add or change column families (options not named keep their values), or delete one. QUERY_CACHE without NAME applies to every family; MAX_FILESIZE, DURABILITY and READONLY are the table's own (describe shows them under TABLE_ATTRIBUTES)." },
    CommandHelp { name: "list", group: "ddl", usage: "list\nlist 'regex'", summary: "List tables, optionally those whose whole name matches a regular expression." },
    CommandHelp { name: "list_regions", group: "tools", usage: "list_regions 't'", summary: "List a table's regions: id, start and end keys, server (what merge_region and move take)." },
    CommandHelp { name: "describe", group: "ddl", usage: "describe 't'", summary: "Show a table's state, families and regions (alias: desc)." },
    CommandHelp { name: "exists", group: "ddl", usage: "exists 't'", summary: "Tell whether a table exists." },
    CommandHelp { name: "disable", group: "ddl", usage: "disable 't'", summary: "Take a table offline (needed before drop)." },
    CommandHelp { name: "enable", group: "ddl", usage: "enable 't'", summary: "Bring a disabled table back online." },
    CommandHelp { name: "drop", group: "ddl", usage: "drop 't'", summary: "Delete a disabled table and its data." },
    CommandHelp { name: "is_enabled", group: "ddl", usage: "is_enabled 't'", summary: "Print true if the table is enabled." },
    CommandHelp { name: "is_disabled", group: "ddl", usage: "is_disabled 't'", summary: "Print true if the table is disabled." },
    CommandHelp { name: "put", group: "dml", usage: "put 't', 'row', 'cf:q', 'value'[, timestamp]", summary: "Write one cell." },
    CommandHelp { name: "get", group: "dml", usage: "get 't', 'row'[, 'cf:q', ...]\nget 't', 'row', {COLUMN => ['cf:q', 'cf2'], VERSIONS => 3, TIMERANGE => [t1, t2],\n       TIMESTAMP => t, FILTER => \"ValueFilter(=, 'binary:v')\"}", summary: "Read one row." },
    CommandHelp { name: "scan", group: "dml", usage: "scan 't'[, {STARTROW => 'a', STOPROW => 'z', ROWPREFIXFILTER => 'p', COLUMNS => ['cf:q'],\n       LIMIT => 10, VERSIONS => 2, TIMERANGE => [t1, t2], REVERSED => true, CACHE => 100,\n       BATCH => 10, CACHE_BLOCKS => false, FILTER => \"PrefixFilter('r') AND KeyOnlyFilter()\",\n       RAW => true, PREPARED => true, COMPRESS => true}]", summary: "Read a range of rows. RAW returns delete markers and the cells they mask too (until a major compaction). PREPARED runs it as a prepared scan (each row key once, columns by index); COMPRESS has the server zstd-compress the results. FILTER takes HBase's filter language: PrefixFilter, ColumnPrefixFilter,\nColumnRangeFilter, RowFilter, FamilyFilter, QualifierFilter, ValueFilter, SingleColumnValueFilter,\nKeyOnlyFilter, FirstKeyOnlyFilter, PageFilter, ColumnPaginationFilter, ColumnCountGetFilter, TimestampsFilter, combined with AND, OR,
SKIP, WHILE and parentheses." },
    CommandHelp { name: "delete", group: "dml", usage: "delete 't', 'row', 'cf:q'[, timestamp]", summary: "Delete one version of a cell: the newest, or the one at the timestamp." },
    CommandHelp { name: "deleteall", group: "dml", usage: "deleteall 't', 'row'[, 'cf:q' | 'cf'][, timestamp]", summary: "Delete every version (up to the timestamp) of a column, a family or the whole row." },
    CommandHelp { name: "incr", group: "dml", usage: "incr 't', 'row', 'cf:q'[, amount]", summary: "Add to a counter (8-byte big-endian) and print its new value." },
    CommandHelp { name: "get_counter", group: "dml", usage: "get_counter 't', 'row', 'cf:q'", summary: "Print a counter's value." },
    CommandHelp { name: "count", group: "dml", usage: "count 't'[, {INTERVAL => 1000, CACHE => 1000}]", summary: "Count a table's rows, reporting every INTERVAL rows." },
    CommandHelp { name: "truncate", group: "dml", usage: "truncate 't'", summary: "Disable the table and delete all of its rows, keeping its schema." },
    CommandHelp { name: "flush", group: "tools", usage: "flush 't'", summary: "Write a table's memstores to store files." },
    CommandHelp { name: "major_compact", group: "tools", usage: "major_compact 't'", summary: "Rewrite each store of a table into one file, dropping deleted and expired cells." },
    CommandHelp { name: "split", group: "tools", usage: "split 't'[, 'split row']", summary: "Split a table's regions (the one holding the row, at that row)." },
    CommandHelp { name: "grant", group: "security", usage: "grant 'user' | '@group', 'RWXCA'[, '@ns' | 'table'[, 'family'[, 'qualifier']]]", summary: "Give a user or group permissions (R read, W write, X exec, C create, A admin): globally, on a namespace, a table, a family or a column." },
    CommandHelp { name: "revoke", group: "security", usage: "revoke 'user' | '@group'[, '@ns' | 'table'[, 'family'[, 'qualifier']]]", summary: "Take back every permission a user or group holds at exactly that scope." },
    CommandHelp { name: "user_permission", group: "security", usage: "user_permission[ '@ns' | 'table']", summary: "List the permissions granted globally, on a namespace, or on a table (its families and columns too)." },
    CommandHelp { name: "balance_switch", group: "tools", usage: "balance_switch true|false", summary: "Turn the balancer on or off (a cluster's master); prints whether it was on." },
    CommandHelp { name: "balancer", group: "tools", usage: "balancer", summary: "Run the balancer now: even out region counts across region servers." },
    CommandHelp { name: "snapshot", group: "snapshots", usage: "snapshot 't', 'name'[, {SKIP_FLUSH => true}]", summary: "Take a snapshot of a table: no data is copied; each region is flushed first unless\nSKIP_FLUSH." },
    CommandHelp { name: "list_snapshots", group: "snapshots", usage: "list_snapshots", summary: "List snapshots: name, table, when taken." },
    CommandHelp { name: "delete_snapshot", group: "snapshots", usage: "delete_snapshot 'name'", summary: "Delete a snapshot (clones made from it keep their data)." },
    CommandHelp { name: "clone_snapshot", group: "snapshots", usage: "clone_snapshot 'name', 'new_table'", summary: "Create a table from a snapshot without copying data." },
    CommandHelp { name: "restore_snapshot", group: "snapshots", usage: "restore_snapshot 'name'", summary: "Bring the snapshot's table, disabled, back to the snapshot (enable it afterwards)." },
    CommandHelp { name: "merge_region", group: "tools", usage: "merge_region 'REGION_A', 'REGION_B'[, true]\n       merge_region ['REGION_A', 'REGION_B', 'REGION_C'][, true]", summary: "Merge adjacent regions of a table (ids, names or encoded names) into one. Regions with a\ngap between them are refused, forced or not." },
    CommandHelp { name: "move", group: "tools", usage: "move 'REGION'[, 'SERVER']", summary: "Move a region (id, name or encoded name) to a region server (host,port,startcode or\nnative host:port), or to the least loaded other one." },
    CommandHelp { name: "assign", group: "tools", usage: "assign 'REGION'", summary: "Open a region that is not open." },
    CommandHelp { name: "unassign", group: "tools", usage: "unassign 'REGION'", summary: "Close a region and keep it closed until assigned." },
];

pub fn help_for(name: &str) -> Option<&'static CommandHelp> {
    let name = match name {
        "desc" => "describe",
        "quit" => "exit",
        n => n,
    };
    COMMANDS.iter().find(|c| c.name == name)
}

/// The action of a parsed command, or an error naming what is wrong with it.
pub fn translate(cmd: &Command) -> Result<Action, String> {
    let args = Args {
        name: cmd.name.as_str(),
        values: &cmd.args,
    };
    Ok(match cmd.name.as_str() {
        "create" => create(&args)?,
        "alter" => alter(&args)?,
        "list" => {
            args.count(0, 1)?;
            let pattern = args.opt(0).map(|v| args.text(v, "pattern")).transpose()?;
            if let Some(p) = &pattern {
                regex::Regex::new(p)
                    .map_err(|e| format!("list: invalid regular expression '{p}': {e}"))?;
            }
            Action::List { pattern }
        }
        "describe" | "desc" => Action::Describe(args.only_table()?),
        "list_regions" => Action::ListRegions(args.only_table()?),
        "exists" => Action::Exists(args.only_table()?),
        "disable" => Action::Disable(args.only_table()?),
        "enable" => Action::Enable(args.only_table()?),
        "drop" => Action::Drop(args.only_table()?),
        "is_enabled" => Action::IsEnabled(args.only_table()?),
        "is_disabled" => Action::IsDisabled(args.only_table()?),
        "truncate" => Action::Truncate(args.only_table()?),
        "flush" => Action::Flush(args.only_table()?),
        "major_compact" => Action::MajorCompact(args.only_table()?),
        "put" => {
            args.count(4, 5)?;
            let (family, qualifier) = column_of(&args.bytes(&args.values[2], "column")?);
            let ts = args.opt(4).map(|v| args.timestamp(v)).transpose()?;
            let value = args.bytes(&args.values[3], "value")?;
            Action::Put {
                table: args.table()?,
                mutation: RowMutation::new(args.row()?).put(
                    &family,
                    &qualifier.unwrap_or_default(),
                    ts.unwrap_or(LATEST_TIMESTAMP),
                    value,
                ),
            }
        }
        "get" => get(&args)?,
        "scan" => scan(&args)?,
        "delete" => {
            args.count(3, 4)?;
            let (family, qualifier) = column_of(&args.bytes(&args.values[2], "column")?);
            let ts = args.opt(3).map(|v| args.timestamp(v)).transpose()?;
            Action::Delete {
                table: args.table()?,
                mutation: RowMutation::new(args.row()?).delete_version(
                    &family,
                    &qualifier.unwrap_or_default(),
                    ts.unwrap_or(LATEST_TIMESTAMP),
                ),
            }
        }
        "deleteall" => {
            args.count(2, 4)?;
            let mut target = DeleteTarget::Row;
            let mut timestamp = LATEST_TIMESTAMP;
            for (i, v) in args.values.iter().enumerate().skip(2) {
                match v {
                    Value::Int(_) if i == args.values.len() - 1 => timestamp = args.timestamp(v)?,
                    Value::Str(_) if i == 2 => {
                        target = match column_of(&args.bytes(v, "column")?) {
                            (f, None) => DeleteTarget::Family(f),
                            (f, Some(q)) => DeleteTarget::Column(f, q),
                        }
                    }
                    Value::Nil if i == 2 => {}
                    other => {
                        return Err(args.wrong(&format!(
                            "argument {}: expected a column or a timestamp, found {}",
                            i + 1,
                            other.describe()
                        )))
                    }
                }
            }
            Action::DeleteAll {
                table: args.table()?,
                row: args.row()?,
                target,
                timestamp,
            }
        }
        "incr" => {
            args.count(3, 4)?;
            let (family, qualifier) = args.counter_column()?;
            let amount = args.opt(3).map(|v| args.int(v, "amount")).transpose()?;
            Action::Incr {
                table: args.table()?,
                row: args.row()?,
                family,
                qualifier,
                amount: amount.unwrap_or(1),
            }
        }
        "get_counter" => {
            args.count(3, 3)?;
            let (family, qualifier) = args.counter_column()?;
            Action::GetCounter {
                table: args.table()?,
                row: args.row()?,
                family,
                qualifier,
            }
        }
        "count" => {
            args.count(1, 2)?;
            let mut interval = 1000;
            let mut caching = 1000;
            if let Some(v) = args.opt(1) {
                for (key, value) in args.hash(v, "options")? {
                    match key.as_str() {
                        "INTERVAL" => interval = args.positive(value, "INTERVAL")?,
                        "CACHE" => caching = args.u32(value, "CACHE")?,
                        _ => return Err(args.unknown_option(&key, &["INTERVAL", "CACHE"])),
                    }
                }
            }
            Action::Count {
                table: args.table()?,
                interval,
                caching,
            }
        }
        "status" => {
            args.count(0, 1)?;
            let detailed = match args.opt(0).map(|v| args.text(v, "format")).transpose()? {
                None => false,
                Some(f) if f == "simple" || f == "summary" => false,
                Some(f) if f == "detailed" => true,
                Some(f) => {
                    return Err(format!(
                        "status: unknown format '{f}' (use 'simple', 'summary' or 'detailed')"
                    ))
                }
            };
            Action::Status { detailed }
        }
        "grant" => {
            args.count(2, 5)?;
            let user = args.text(&args.values[0], "user")?;
            let actions = args.text(&args.values[1], "permissions")?;
            let scope = permission_scope(&args, 2)?;
            Action::Grant {
                user,
                actions,
                scope,
            }
        }
        "revoke" => {
            args.count(1, 4)?;
            let user = args.text(&args.values[0], "user")?;
            let scope = permission_scope(&args, 1)?;
            Action::Revoke { user, scope }
        }
        "user_permission" => {
            args.count(0, 1)?;
            Action::UserPermission(if args.values.is_empty() {
                None
            } else {
                Some(permission_scope(&args, 0)?)
            })
        }
        "balance_switch" => {
            args.count(1, 1)?;
            let on = match &args.values[0] {
                Value::Bool(b) => *b,
                v => match args.text(v, "switch")?.as_str() {
                    "true" => true,
                    "false" => false,
                    other => {
                        return Err(format!(
                            "balance_switch: expected true or false, got '{other}'"
                        ))
                    }
                },
            };
            Action::BalanceSwitch(on)
        }
        "balancer" => {
            args.count(0, 0)?;
            Action::Balancer
        }
        "move" => {
            args.count(1, 2)?;
            Action::Move {
                region: args.text(&args.values[0], "region")?,
                server: args.opt(1).map(|v| args.text(v, "server")).transpose()?,
            }
        }
        "snapshot" => {
            // `snapshot 't', 'name'[, {SKIP_FLUSH => true}]`
            args.count(2, 3)?;
            let mut skip_flush = false;
            if let Some(opts) = args.opt(2) {
                for (k, v) in args.hash(opts, "snapshot")? {
                    match (k.as_str(), v) {
                        ("SKIP_FLUSH", Value::Bool(b)) => skip_flush = *b,
                        (other, _) => {
                            return Err(format!(
                                "snapshot: unknown option {other} (SKIP_FLUSH => true|false)"
                            ))
                        }
                    }
                }
            }
            Action::Snapshot {
                table: args.table()?,
                name: args.text(&args.values[1], "snapshot name")?,
                skip_flush,
            }
        }
        "list_snapshots" => {
            args.count(0, 0)?;
            Action::ListSnapshots
        }
        "delete_snapshot" => {
            args.count(1, 1)?;
            Action::DeleteSnapshot(args.text(&args.values[0], "snapshot name")?)
        }
        "clone_snapshot" => {
            args.count(2, 2)?;
            Action::CloneSnapshot {
                name: args.text(&args.values[0], "snapshot name")?,
                table: args.text(&args.values[1], "table name")?,
            }
        }
        "restore_snapshot" => {
            args.count(1, 1)?;
            Action::RestoreSnapshot(args.text(&args.values[0], "snapshot name")?)
        }
        "merge_region" => {
            // `merge_region 'A', 'B'[, true]` or `merge_region ['A', 'B', ...][, true]`.
            args.count(1, 3)?;
            let (names, force_at): (Vec<&Value>, usize) = match &args.values[0] {
                Value::Array(items) => (items.iter().collect(), 1),
                first => (
                    vec![
                        first,
                        args.opt(1).ok_or_else(|| {
                            "merge_region: name two regions, or give a list of them".to_string()
                        })?,
                    ],
                    2,
                ),
            };
            if args.values.len() > force_at + 1 {
                return Err("merge_region: too many arguments".into());
            }
            let force = match args.opt(force_at) {
                None => false,
                Some(Value::Bool(b)) => *b,
                Some(v) => match args.text(v, "force")?.as_str() {
                    "true" => true,
                    "false" => false,
                    other => {
                        return Err(format!(
                            "merge_region: force is true or false, got '{other}'"
                        ))
                    }
                },
            };
            Action::Merge {
                regions: names
                    .into_iter()
                    .map(|v| args.text(v, "region"))
                    .collect::<Result<_, _>>()?,
                force,
            }
        }
        "assign" => {
            args.count(1, 1)?;
            Action::Assign(args.text(&args.values[0], "region")?)
        }
        "unassign" => {
            args.count(1, 1)?;
            Action::Unassign(args.text(&args.values[0], "region")?)
        }
        "split" => {
            args.count(1, 2)?;
            let row = args
                .opt(1)
                .map(|v| args.bytes(v, "split row"))
                .transpose()?;
            Action::Split {
                table: args.table()?,
                row: row.map(Bytes::from),
            }
        }
        "help" => {
            args.count(0, 1)?;
            Action::Help(args.opt(0).map(|v| args.text(v, "command")).transpose()?)
        }
        "exit" | "quit" => {
            args.count(0, 0)?;
            Action::Exit
        }
        other => {
            return Err(format!(
                "unknown command '{other}'; type 'help' for the list of commands"
            ))
        }
    })
}

/// A command's arguments with the checks every command needs.
struct Args<'a> {
    name: &'a str,
    values: &'a [Value],
}

impl Args<'_> {
    /// The command's usage, each example on its own indented line (as `help` prints them).
    fn usage(&self) -> String {
        help_for(self.name)
            .map(|h| {
                h.usage
                    .lines()
                    .map(|l| format!("\n  {l}"))
                    .collect::<String>()
            })
            .unwrap_or_default()
    }

    fn wrong(&self, what: &str) -> String {
        format!("{}: {what}\nusage:{}", self.name, self.usage())
    }

    fn count(&self, min: usize, max: usize) -> Result<(), String> {
        let n = self.values.len();
        if n < min || n > max {
            let expected = if min == max {
                min.to_string()
            } else {
                format!("{min} to {max}")
            };
            return Err(self.wrong(&format!(
                "wrong number of arguments: expected {expected}, got {n}"
            )));
        }
        Ok(())
    }

    fn opt(&self, i: usize) -> Option<&Value> {
        self.values.get(i)
    }

    fn bytes(&self, v: &Value, what: &str) -> Result<Vec<u8>, String> {
        match v {
            Value::Str(s) => Ok(s.clone()),
            Value::Int(n) => Ok(n.to_string().into_bytes()),
            other => Err(self.wrong(&format!(
                "{what}: expected a string, found {}",
                other.describe()
            ))),
        }
    }

    fn text(&self, v: &Value, what: &str) -> Result<String, String> {
        String::from_utf8(self.bytes(v, what)?)
            .map_err(|_| self.wrong(&format!("{what} must be UTF-8 text")))
    }

    fn table(&self) -> Result<String, String> {
        let v = self
            .values
            .first()
            .ok_or_else(|| self.wrong("missing table name"))?;
        let name = self.text(v, "table name")?;
        if name.is_empty() {
            return Err(self.wrong("the table name is empty"));
        }
        Ok(name)
    }

    fn only_table(&self) -> Result<String, String> {
        self.count(1, 1)?;
        self.table()
    }

    fn row(&self) -> Result<Bytes, String> {
        let v = self
            .values
            .get(1)
            .ok_or_else(|| self.wrong("missing row"))?;
        Ok(Bytes::from(self.bytes(v, "row")?))
    }

    fn counter_column(&self) -> Result<(Bytes, Bytes), String> {
        let (f, q) = column_of(&self.bytes(&self.values[2], "column")?);
        Ok((f, q.unwrap_or_default()))
    }

    fn int(&self, v: &Value, what: &str) -> Result<i64, String> {
        match v {
            Value::Int(n) => Ok(*n),
            Value::Str(s) => std::str::from_utf8(s)
                .ok()
                .and_then(|s| s.trim().parse().ok())
                .ok_or_else(|| {
                    self.wrong(&format!(
                        "{what}: expected a number, found {}",
                        v.describe()
                    ))
                }),
            other => Err(self.wrong(&format!(
                "{what}: expected a number, found {}",
                other.describe()
            ))),
        }
    }

    fn u32(&self, v: &Value, what: &str) -> Result<u32, String> {
        let n = self.int(v, what)?;
        u32::try_from(n).map_err(|_| self.wrong(&format!("{what}: {n} is out of range")))
    }

    fn positive(&self, v: &Value, what: &str) -> Result<u64, String> {
        let n = self.int(v, what)?;
        u64::try_from(n)
            .ok()
            .filter(|&n| n > 0)
            .ok_or_else(|| self.wrong(&format!("{what}: must be positive, got {n}")))
    }

    fn timestamp(&self, v: &Value) -> Result<u64, String> {
        let n = self.int(v, "timestamp")?;
        u64::try_from(n)
            .map_err(|_| self.wrong(&format!("timestamp: must not be negative, got {n}")))
    }

    fn flag(&self, v: &Value, what: &str) -> Result<bool, String> {
        match v {
            Value::Bool(b) => Ok(*b),
            Value::Str(s) if s.eq_ignore_ascii_case(b"true") => Ok(true),
            Value::Str(s) if s.eq_ignore_ascii_case(b"false") => Ok(false),
            other => Err(self.wrong(&format!(
                "{what}: expected true or false, found {}",
                other.describe()
            ))),
        }
    }

    /// A hash's pairs with upper-cased keys (constants or strings).
    fn hash<'v>(&self, v: &'v Value, what: &str) -> Result<Vec<(String, &'v Value)>, String> {
        let Value::Hash(pairs) = v else {
            return Err(self.wrong(&format!(
                "{what}: expected a {{KEY => value}} hash, found {}",
                v.describe()
            )));
        };
        pairs
            .iter()
            .map(|(k, v)| match k {
                Value::Const(c) => Ok((c.to_ascii_uppercase(), v)),
                Value::Str(s) => Ok((String::from_utf8_lossy(s).to_ascii_uppercase(), v)),
                other => Err(self.wrong(&format!(
                    "hash keys are names such as NAME, found {}",
                    other.describe()
                ))),
            })
            .collect()
    }

    fn unknown_option(&self, key: &str, known: &[&str]) -> String {
        self.wrong(&format!(
            "unknown option {key} (expected one of {})",
            known.join(", ")
        ))
    }

    fn columns(&self, v: &Value) -> Result<Vec<Column>, String> {
        let items: Vec<&Value> = match v {
            Value::Array(items) => items.iter().collect(),
            single => vec![single],
        };
        items
            .into_iter()
            .map(|item| {
                let (family, qualifier) = column_of(&self.bytes(item, "column")?);
                Ok(Column { family, qualifier })
            })
            .collect()
    }

    fn time_range(&self, v: &Value) -> Result<TimeRange, String> {
        match v {
            Value::Array(items) if items.len() == 2 => {
                let min = self.timestamp(&items[0])?;
                let max = self.timestamp(&items[1])?;
                if min > max {
                    return Err(self.wrong(&format!("TIMERANGE: start {min} is after end {max}")));
                }
                Ok(TimeRange { min, max })
            }
            other => Err(self.wrong(&format!(
                "TIMERANGE: expected [start, end], found {}",
                other.describe()
            ))),
        }
    }

    fn filter(&self, v: &Value) -> Result<Filter, String> {
        let text = self.bytes(v, "FILTER")?;
        let filter = parse_filter(&text).map_err(|e| format!("{}: {e}", self.name))?;
        filter
            .validate()
            .map_err(|e| format!("{}: {e}", self.name))?;
        Ok(filter)
    }
}

/// `'cf:q'` → (cf, Some(q)); `'cf'` → (cf, None). The split is at the first ':'.
fn column_of(spec: &[u8]) -> (Bytes, Option<Bytes>) {
    match spec.iter().position(|&b| b == b':') {
        Some(i) => (
            Bytes::copy_from_slice(&spec[..i]),
            Some(Bytes::copy_from_slice(&spec[i + 1..])),
        ),
        None => (Bytes::copy_from_slice(spec), None),
    }
}

const FAMILY_OPTIONS: &[&str] = &[
    "NAME",
    "VERSIONS",
    "MIN_VERSIONS",
    "TTL",
    "COMPRESSION",
    "BLOOMFILTER",
    "BLOCKSIZE",
    "IN_MEMORY",
    "QUERY_CACHE",
    "KEEP_DELETED_CELLS",
];

/// A family hash's settings (every key but NAME and, for alter, METHOD).
fn family_settings(args: &Args<'_>, pairs: &[(String, &Value)]) -> Result<Vec<Setting>, String> {
    let mut settings = Vec::new();
    for (key, v) in pairs {
        let schema_err = |e: cellar_model::Error| args.wrong(&format!("{key}: {e}"));
        let setting = match key.as_str() {
            "NAME" | "METHOD" => continue,
            "VERSIONS" => Setting::Versions(args.u32(v, key)?),
            "MIN_VERSIONS" => Setting::MinVersions(args.u32(v, key)?),
            "TTL" => Setting::Ttl(ttl(args, v)?),
            "COMPRESSION" => Setting::Compression(
                args.text(v, key)?
                    .parse::<Compression>()
                    .map_err(schema_err)?,
            ),
            "BLOOMFILTER" => Setting::Bloom(
                args.text(v, key)?
                    .parse::<BloomType>()
                    .map_err(schema_err)?,
            ),
            "BLOCKSIZE" => Setting::BlockSize(args.u32(v, key)?),
            "IN_MEMORY" => Setting::InMemory(args.flag(v, key)?),
            "QUERY_CACHE" => Setting::QueryCache(args.flag(v, key)?),
            "KEEP_DELETED_CELLS" => Setting::KeepDeletedCells(args.flag(v, key)?),
            _ => return Err(args.unknown_option(key, FAMILY_OPTIONS)),
        };
        settings.push(setting);
    }
    Ok(settings)
}

/// `TTL => 60`, `TTL => '60'` or `TTL => 'FOREVER'` (as is HBase's `Integer.MAX_VALUE`).
fn ttl(args: &Args<'_>, v: &Value) -> Result<Option<u64>, String> {
    let forever = match v {
        Value::Const(c) => c.eq_ignore_ascii_case("FOREVER"),
        Value::Str(s) => s.eq_ignore_ascii_case(b"FOREVER"),
        _ => false,
    };
    if forever {
        return Ok(None);
    }
    let n = args.int(v, "TTL")?;
    match u64::try_from(n) {
        Ok(n) if n == i32::MAX as u64 => Ok(None),
        Ok(n) => Ok(Some(n)),
        Err(_) => Err(args.wrong(&format!("TTL: must not be negative, got {n}"))),
    }
}

fn family_name(args: &Args<'_>, pairs: &[(String, &Value)]) -> Result<Option<String>, String> {
    pairs
        .iter()
        .find(|(k, _)| k == "NAME")
        .map(|(_, v)| args.text(v, "NAME"))
        .transpose()
}

fn create(args: &Args<'_>) -> Result<Action, String> {
    if args.values.len() < 2 {
        return Err(args.wrong("expected a table name and at least one column family"));
    }
    let table = args.table()?;
    let mut families = Vec::new();
    let mut splits = Vec::new();
    let mut query_cache = None;
    for v in &args.values[1..] {
        match v {
            Value::Str(_) => families.push(FamilySchema::new(args.text(v, "family")?)),
            Value::Hash(_) => {
                let pairs = args.hash(v, "family")?;
                if let Some(name) = family_name(args, &pairs)? {
                    let spec = FamilySpec {
                        name: name.clone(),
                        settings: family_settings(args, &pairs)?,
                    };
                    if let Some((k, _)) = pairs.iter().find(|(k, _)| k == "METHOD") {
                        return Err(args.unknown_option(k, FAMILY_OPTIONS));
                    }
                    families.push(spec.apply_to(FamilySchema::new(name)));
                    continue;
                }
                for (key, value) in pairs {
                    match (key.as_str(), value) {
                        ("SPLITS", Value::Array(items)) => {
                            for item in items {
                                splits.push(Bytes::from(args.bytes(item, "split point")?));
                            }
                        }
                        ("QUERY_CACHE", v) => query_cache = Some(args.flag(v, "QUERY_CACHE")?),
                        ("SPLITS", other) => {
                            return Err(args.wrong(&format!(
                                "SPLITS: expected an array of row keys, found {}",
                                other.describe()
                            )))
                        }
                        _ => {
                            return Err(args.wrong(&format!(
                                "unknown table option {key} (a family hash needs NAME; table options: SPLITS, QUERY_CACHE)"
                            )))
                        }
                    }
                }
            }
            other => {
                return Err(args.wrong(&format!(
                    "expected a family name or {{NAME => ...}} hash, found {}",
                    other.describe()
                )))
            }
        }
    }
    if let Some(on) = query_cache {
        for f in &mut families {
            f.query_cache = on;
        }
    }
    let schema = TableSchema::new(table, families);
    schema.validate().map_err(|e| args.wrong(&e.to_string()))?;
    Ok(Action::Create { schema, splits })
}

fn alter(args: &Args<'_>) -> Result<Action, String> {
    if args.values.len() < 2 {
        return Err(args.wrong("expected a table name and at least one family change"));
    }
    let table = args.table()?;
    let mut changes = Vec::new();
    let mut deletes = Vec::new();
    let mut every_family = Vec::new();
    let mut table_settings = Vec::new();
    for v in &args.values[1..] {
        if let Value::Str(_) = v {
            changes.push(FamilySpec {
                name: args.text(v, "family")?,
                settings: Vec::new(),
            });
            continue;
        }
        let pairs = args.hash(v, "family change")?;
        if let Some((_, target)) = pairs.iter().find(|(k, _)| k == "DELETE") {
            deletes.push(args.text(target, "family to delete")?);
            continue;
        }
        if !pairs.iter().any(|(k, _)| k == "NAME")
            && pairs
                .iter()
                .all(|(k, _)| k == "QUERY_CACHE" || TableSetting::KEYS.contains(&k.as_str()))
        {
            for (k, v) in &pairs {
                match k.as_str() {
                    "QUERY_CACHE" => {
                        every_family.push(Setting::QueryCache(args.flag(v, "QUERY_CACHE")?))
                    }
                    "MAX_FILESIZE" => table_settings
                        .push(TableSetting::MaxFileSize(args.positive(v, "MAX_FILESIZE")?)),
                    "DURABILITY" => table_settings.push(TableSetting::Durability(
                        args.text(v, "DURABILITY")?
                            .parse()
                            .map_err(|e: String| args.wrong(&format!("DURABILITY: {e}")))?,
                    )),
                    _ => table_settings.push(TableSetting::ReadOnly(args.flag(v, "READONLY")?)),
                }
            }
            continue;
        }
        let name = family_name(args, &pairs)?
            .ok_or_else(|| args.wrong("a family change needs NAME => 'family'"))?;
        let method = pairs
            .iter()
            .find(|(k, _)| k == "METHOD")
            .map(|(_, m)| args.text(m, "METHOD"))
            .transpose()?;
        match method.as_deref() {
            Some(m) if m.eq_ignore_ascii_case("delete") => deletes.push(name),
            Some(m) => {
                return Err(args.wrong(&format!("METHOD: only 'delete' is supported, found '{m}'")))
            }
            None => {
                let settings = family_settings(args, &pairs)?;
                let spec = FamilySpec { name, settings };
                changes.push(spec);
            }
        }
    }
    Ok(Action::Alter {
        table,
        changes,
        deletes,
        every_family,
        table_settings,
    })
}

/// A table attribute `alter` sets (HBase's table descriptor values).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableSetting {
    /// Bytes past which a region splits.
    MaxFileSize(u64),
    /// The durability of writes that do not name one.
    Durability(cellar_model::Durability),
    /// Writes are refused.
    ReadOnly(bool),
}

impl TableSetting {
    const KEYS: [&'static str; 3] = ["MAX_FILESIZE", "DURABILITY", "READONLY"];

    pub fn apply_to(self, o: &mut cellar_model::TableOptions) {
        match self {
            TableSetting::MaxFileSize(n) => o.max_file_size = Some(n),
            TableSetting::Durability(d) => o.durability = d,
            TableSetting::ReadOnly(r) => o.read_only = r,
        }
    }
}

fn get(args: &Args<'_>) -> Result<Action, String> {
    if args.values.len() < 2 {
        return Err(args.wrong("expected a table name and a row"));
    }
    let mut get = Get::new(args.row()?);
    for v in &args.values[2..] {
        if !matches!(v, Value::Hash(_)) {
            get.columns.extend(args.columns(v)?);
            continue;
        }
        for (key, value) in args.hash(v, "options")? {
            match key.as_str() {
                "COLUMN" | "COLUMNS" => get.columns.extend(args.columns(value)?),
                "VERSIONS" => get.max_versions = args.u32(value, "VERSIONS")?,
                "TIMERANGE" => get.time_range = args.time_range(value)?,
                "TIMESTAMP" => {
                    let ts = args.timestamp(value)?;
                    get.time_range = TimeRange {
                        min: ts,
                        max: ts.saturating_add(1),
                    };
                }
                "FILTER" => get.filter = Some(args.filter(value)?),
                _ => {
                    return Err(args.unknown_option(
                        &key,
                        &[
                            "COLUMN",
                            "COLUMNS",
                            "VERSIONS",
                            "TIMERANGE",
                            "TIMESTAMP",
                            "FILTER",
                        ],
                    ))
                }
            }
        }
    }
    Ok(Action::Get {
        table: args.table()?,
        get,
    })
}

fn scan(args: &Args<'_>) -> Result<Action, String> {
    args.count(1, 2)?;
    let mut scan = Scan::new();
    let mut prepared = false;
    if let Some(v) = args.opt(1) {
        for (key, value) in args.hash(v, "options")? {
            match key.as_str() {
                "STARTROW" => scan.start_row = Bytes::from(args.bytes(value, "STARTROW")?),
                "STOPROW" | "ENDROW" => scan.stop_row = Bytes::from(args.bytes(value, "STOPROW")?),
                "ROWPREFIXFILTER" => scan = scan.prefix(&args.bytes(value, "ROWPREFIXFILTER")?),
                "COLUMN" | "COLUMNS" => scan.columns.extend(args.columns(value)?),
                "LIMIT" => scan.limit = args.positive(value, "LIMIT")?,
                "VERSIONS" => scan.max_versions = args.u32(value, "VERSIONS")?,
                "TIMERANGE" => scan.time_range = args.time_range(value)?,
                "TIMESTAMP" => {
                    let ts = args.timestamp(value)?;
                    scan.time_range = TimeRange {
                        min: ts,
                        max: ts.saturating_add(1),
                    };
                }
                "REVERSED" => scan.reversed = args.flag(value, "REVERSED")?,
                "CACHE" => scan.caching = args.u32(value, "CACHE")?,
                "BATCH" => scan.batch = args.u32(value, "BATCH")?,
                "CACHE_BLOCKS" => scan.cache_blocks = args.flag(value, "CACHE_BLOCKS")?,
                "FILTER" => scan.filter = Some(args.filter(value)?),
                "PREPARED" => prepared = args.flag(value, "PREPARED")?,
                "COMPRESS" => scan.compress = args.flag(value, "COMPRESS")?,
                "RAW" => scan.raw = args.flag(value, "RAW")?,
                _ => {
                    return Err(args.unknown_option(
                        &key,
                        &[
                            "PREPARED",
                            "COMPRESS",
                            "STARTROW",
                            "STOPROW",
                            "ROWPREFIXFILTER",
                            "COLUMNS",
                            "LIMIT",
                            "VERSIONS",
                            "TIMERANGE",
                            "TIMESTAMP",
                            "REVERSED",
                            "CACHE",
                            "BATCH",
                            "CACHE_BLOCKS",
                            "FILTER",
                            "RAW",
                        ],
                    ))
                }
            }
        }
    }
    Ok(Action::Scan {
        table: args.table()?,
        scan,
        prepared,
    })
}

/// The scope of `grant` / `revoke` / `user_permission` from argument `from` on: none (global),
/// `'@ns'`, or `'table'[, 'family'[, 'qualifier']]`.
fn permission_scope(args: &Args, from: usize) -> Result<cellar_client::PermissionScope, String> {
    let mut scope = cellar_client::PermissionScope::default();
    let Some(first) = args.opt(from) else {
        return Ok(scope);
    };
    let first = args.text(first, "table or @namespace")?;
    if let Some(ns) = first.strip_prefix('@') {
        if args.values.len() > from + 1 {
            return Err("a namespace permission names no family or column".into());
        }
        scope.namespace = ns.to_string();
        return Ok(scope);
    }
    scope.table = first;
    if let Some(f) = args.opt(from + 1) {
        scope.family = Some(Bytes::from(args.bytes(f, "family")?));
    }
    if let Some(q) = args.opt(from + 2) {
        scope.qualifier = Some(Bytes::from(args.bytes(q, "qualifier")?));
    }
    Ok(scope)
}

#[cfg(test)]
mod tests {
    use super::super::parser::parse_script;
    use super::*;
    use cellar_model::{CellType, Comparator, CompareOp};

    fn action(src: &str) -> Action {
        let cmds = parse_script(src).expect("parses");
        translate(&cmds[0]).unwrap_or_else(|e| panic!("{src}: {e}"))
    }

    fn error(src: &str) -> String {
        let cmds = parse_script(src).expect("parses");
        translate(&cmds[0]).expect_err(src)
    }

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    #[test]
    fn a_wrong_call_shows_each_usage_example_on_its_own_line() {
        let e = error("status 'a', 'b'");
        assert!(
            e.ends_with("\nusage:\n  status\n  status 'detailed'"),
            "{e:?}"
        );
        assert!(!e.contains(" | "), "{e:?}");
    }

    #[test]
    fn create_builds_families_with_options_and_splits() {
        let a = action(
            "create 't', 'cf1', {NAME => 'cf2', VERSIONS => 3, TTL => 60, COMPRESSION => 'ZSTD', \
             BLOOMFILTER => 'ROWCOL', BLOCKSIZE => 65536, IN_MEMORY => true, MIN_VERSIONS => 1}, \
             {SPLITS => ['a','m']}",
        );
        let Action::Create { schema, splits } = a else {
            panic!("create expected")
        };
        assert_eq!(schema.name, "t");
        assert_eq!(schema.families[0], FamilySchema::new("cf1"));
        let f = &schema.families[1];
        assert_eq!(f.name, "cf2");
        assert_eq!(f.max_versions, 3);
        assert_eq!(f.min_versions, 1);
        assert_eq!(f.ttl_secs, Some(60));
        assert_eq!(f.compression, Compression::Zstd);
        assert_eq!(f.bloom, BloomType::RowCol);
        assert_eq!(f.block_size, 65536);
        assert!(f.in_memory);
        assert_eq!(splits, vec![b("a"), b("m")]);

        let Action::Create { schema, splits } =
            action("create 't', {NAME => 'f', TTL => 'FOREVER'}, SPLITS => ['k']")
        else {
            panic!("create expected")
        };
        assert_eq!(schema.families[0].ttl_secs, None);
        assert_eq!(splits, vec![b("k")]);
    }

    #[test]
    fn create_rejects_bad_options_naming_them() {
        assert!(error("create 't'").contains("at least one column family"));
        let e = error("create 't', {NAME => 'f', VERSION => 3}");
        assert!(
            e.contains("unknown option VERSION") && e.contains("VERSIONS"),
            "{e}"
        );
        let e = error("create 't', {NAME => 'f', COMPRESSION => 'GZ'}");
        assert!(e.contains("'gz'"), "{e}");
        let e = error("create 't', {NAME => 'f', VERSIONS => 0}");
        assert!(e.contains("max_versions"), "{e}");
        let e = error("create 't', 'f', 'f'");
        assert!(e.contains("twice"), "{e}");
        let e = error("create 't', {NUMREGIONS => 3}");
        assert!(e.contains("NUMREGIONS"), "{e}");
        let e = error("create 't', {NAME => 'f', IN_MEMORY => 3}");
        assert!(e.contains("IN_MEMORY: expected true or false"), "{e}");
        assert!(error("create 't', 5").contains("found 5"));
    }

    #[test]
    fn alter_changes_and_deletes_families() {
        let a = action("alter 't', {NAME => 'cf', VERSIONS => 5}");
        assert_eq!(
            a,
            Action::Alter {
                table: "t".into(),
                changes: vec![FamilySpec {
                    name: "cf".into(),
                    settings: vec![Setting::Versions(5)]
                }],
                deletes: vec![],
                every_family: vec![],
                table_settings: vec![]
            }
        );
        let mut current = FamilySchema::new("cf");
        current.ttl_secs = Some(9);
        let Action::Alter { changes, .. } = a else {
            panic!("alter")
        };
        let merged = changes[0].apply_to(current);
        assert_eq!((merged.max_versions, merged.ttl_secs), (5, Some(9)));

        for src in [
            "alter 't', {NAME => 'cf', METHOD => 'delete'}",
            "alter 't', 'delete' => 'cf'",
            "alter 't', {'delete' => 'cf'}",
        ] {
            assert_eq!(
                action(src),
                Action::Alter {
                    table: "t".into(),
                    changes: vec![],
                    deletes: vec!["cf".into()],
                    every_family: vec![],
                    table_settings: vec![]
                },
                "{src}"
            );
        }
        assert_eq!(
            action("alter 't', QUERY_CACHE => true"),
            Action::Alter {
                table: "t".into(),
                changes: vec![],
                deletes: vec![],
                every_family: vec![Setting::QueryCache(true)],
                table_settings: vec![]
            }
        );
        assert_eq!(
            action("alter 't', MAX_FILESIZE => '134217728', READONLY => true, DURABILITY => 'ASYNC_WAL'"),
            Action::Alter {
                table: "t".into(),
                changes: vec![],
                deletes: vec![],
                every_family: vec![],
                table_settings: vec![
                    TableSetting::MaxFileSize(134_217_728),
                    TableSetting::ReadOnly(true),
                    TableSetting::Durability(cellar_model::Durability::AsyncWal),
                ]
            }
        );
        let e = error("alter 't', DURABILITY => 'SOMETIMES'");
        assert!(e.contains("SOMETIMES"), "{e}");
        let Action::Alter { changes, .. } =
            action("alter 't', {NAME => 'cf', QUERY_CACHE => 'true'}")
        else {
            panic!("alter")
        };
        assert!(changes[0].apply_to(FamilySchema::new("cf")).query_cache);
        let Action::Create { schema, .. } =
            action("create 't', 'a', {NAME => 'b'}, {QUERY_CACHE => true}")
        else {
            panic!("create")
        };
        assert!(schema.families.iter().all(|f| f.query_cache));
        assert!(error("alter 't', {VERSIONS => 1}").contains("NAME"));
        assert!(error("alter 't', {NAME => 'c', METHOD => 'x'}").contains("'delete'"));
        assert!(error("alter 't'").contains("family change"));
    }

    #[test]
    fn put_delete_and_deleteall_build_mutations() {
        let Action::Put { table, mutation } = action("put 't', \"r\\x00\", 'cf:q', 'v', 42") else {
            panic!("put")
        };
        assert_eq!(table, "t");
        assert_eq!(mutation.row, Bytes::from_static(b"r\x00"));
        let e = &mutation.entries[0];
        assert_eq!(
            (&e.family[..], &e.qualifier[..], e.timestamp),
            (&b"cf"[..], &b"q"[..], 42)
        );
        assert_eq!((e.cell_type, &e.value[..]), (CellType::Put, &b"v"[..]));
        let Action::Put { mutation, .. } = action("put 't', 'r', 'cf:a:b', 7") else {
            panic!("put")
        };
        assert_eq!(mutation.entries[0].qualifier, "a:b");
        assert_eq!(mutation.entries[0].value, "7");
        assert_eq!(mutation.entries[0].timestamp, LATEST_TIMESTAMP);

        let Action::Delete { mutation, .. } = action("delete 't', 'r', 'cf:q'") else {
            panic!("delete")
        };
        assert_eq!(mutation.entries[0].cell_type, CellType::Delete);
        assert_eq!(mutation.entries[0].timestamp, LATEST_TIMESTAMP);

        let da = |src| match action(src) {
            Action::DeleteAll {
                target, timestamp, ..
            } => (target, timestamp),
            other => panic!("{other:?}"),
        };
        assert_eq!(
            da("deleteall 't', 'r'"),
            (DeleteTarget::Row, LATEST_TIMESTAMP)
        );
        assert_eq!(
            da("deleteall 't', 'r', 'cf'"),
            (DeleteTarget::Family(b("cf")), LATEST_TIMESTAMP)
        );
        assert_eq!(
            da("deleteall 't', 'r', 'cf:q', 5"),
            (DeleteTarget::Column(b("cf"), b("q")), 5)
        );
        assert_eq!(da("deleteall 't', 'r', 9"), (DeleteTarget::Row, 9));
        assert!(error("put 't', 'r', 'cf:q'").contains("expected 4 to 5, got 3"));
        assert!(error("put 't', 'r', 'cf:q', 'v', -1").contains("negative"));
        assert!(error("deleteall 't', 'r', 5, 'cf'").contains("argument 3"));
    }

    #[test]
    fn get_options() {
        let Action::Get { table, get } = action(
            "get 't', 'r', {COLUMN => ['cf:q', 'cf2'], VERSIONS => 3, TIMERANGE => [1, 5], \
             FILTER => \"ValueFilter(=, 'binary:v')\"}",
        ) else {
            panic!("get")
        };
        assert_eq!(table, "t");
        assert_eq!(get.row, "r");
        assert_eq!(
            get.columns,
            vec![
                Column {
                    family: b("cf"),
                    qualifier: Some(b("q"))
                },
                Column {
                    family: b("cf2"),
                    qualifier: None
                }
            ]
        );
        assert_eq!(get.max_versions, 3);
        assert_eq!(get.time_range, TimeRange { min: 1, max: 5 });
        assert_eq!(
            get.filter,
            Some(Filter::Value(CompareOp::Equal, Comparator::Binary(b("v"))))
        );
        let Action::Get { get, .. } = action("get 't', 'r', 'cf:a', 'cf:b'") else {
            panic!("get")
        };
        assert_eq!(get.columns.len(), 2);
        let Action::Get { get, .. } = action("get 't', 'r', {TIMESTAMP => 7}") else {
            panic!("get")
        };
        assert_eq!(get.time_range, TimeRange { min: 7, max: 8 });
        assert!(error("get 't', 'r', {COLUMS => 'x'}").contains("unknown option COLUMS"));
        assert!(error("get 't', 'r', {TIMERANGE => [5, 1]}").contains("after"));
        let e = error("get 't', 'r', {FILTER => \"ValueFilter(=, 'regexstring:(')\"}");
        assert!(e.contains("invalid regular expression '('"), "{e}");
        assert!(error("get 't'").contains("table name and a row"));
    }

    #[test]
    fn scan_options() {
        let Action::Scan { scan, .. } = action(
            "scan 't', {STARTROW => 'a', STOPROW => 'z', COLUMNS => 'cf:q', LIMIT => 10, \
             VERSIONS => 2, TIMERANGE => [0, 100], REVERSED => true, CACHE => 50, BATCH => 5, \
             CACHE_BLOCKS => false, FILTER => \"PrefixFilter('r') AND KeyOnlyFilter()\"}",
        ) else {
            panic!("scan")
        };
        assert_eq!(
            (&scan.start_row[..], &scan.stop_row[..]),
            (&b"a"[..], &b"z"[..])
        );
        assert_eq!(scan.columns.len(), 1);
        assert_eq!((scan.limit, scan.max_versions), (10, 2));
        assert_eq!(scan.time_range, TimeRange { min: 0, max: 100 });
        assert!(scan.reversed && !scan.cache_blocks);
        assert_eq!((scan.caching, scan.batch), (50, 5));
        assert!(matches!(scan.filter, Some(Filter::List(..))));

        let Action::Scan { scan, .. } = action("scan 't', {ROWPREFIXFILTER => 'ab'}") else {
            panic!("scan")
        };
        assert_eq!(
            (&scan.start_row[..], &scan.stop_row[..]),
            (&b"ab"[..], &b"ac"[..])
        );
        let Action::Scan { scan, .. } = action("scan 't'") else {
            panic!("scan")
        };
        assert_eq!(scan, Scan::new());
        let Action::Scan { scan, .. } = action("scan 't', {RAW => true, VERSIONS => 5}") else {
            panic!("scan")
        };
        assert!(scan.raw && scan.max_versions == 5);
        let e = error("scan 't', {FILTER => \"PrefixFilter('a') XOR\"}");
        assert!(
            e.starts_with("scan: filter syntax error at position 19"),
            "{e}"
        );
        assert!(error("scan 't', {LIMIT => 0}").contains("LIMIT: must be positive"));
        assert!(error("scan 't', 'x'").contains("expected a {KEY => value} hash"));
    }

    #[test]
    fn counters_admin_and_help() {
        assert_eq!(
            action("incr 't', 'r', 'cf:c'"),
            Action::Incr {
                table: "t".into(),
                row: b("r"),
                family: b("cf"),
                qualifier: b("c"),
                amount: 1
            }
        );
        assert!(matches!(
            action("incr 't', 'r', 'cf:c', -3"),
            Action::Incr { amount: -3, .. }
        ));
        assert!(matches!(
            action("get_counter 't', 'r', 'cf:c'"),
            Action::GetCounter { .. }
        ));
        assert_eq!(
            action("count 't', {INTERVAL => 2}"),
            Action::Count {
                table: "t".into(),
                interval: 2,
                caching: 1000
            }
        );
        assert_eq!(action("truncate 't'"), Action::Truncate("t".into()));
        assert_eq!(action("desc 't'"), Action::Describe("t".into()));
        assert_eq!(action("list_regions 't'"), Action::ListRegions("t".into()));
        assert_eq!(action("is_disabled 't'"), Action::IsDisabled("t".into()));
        assert_eq!(
            action("split 't', 'm'"),
            Action::Split {
                table: "t".into(),
                row: Some(b("m"))
            }
        );
        assert_eq!(action("status"), Action::Status { detailed: false });
        assert_eq!(
            action("status 'detailed'"),
            Action::Status { detailed: true }
        );
        assert!(error("status 'loud'").contains("unknown format"));
        assert_eq!(action("balance_switch false"), Action::BalanceSwitch(false));
        let merge = |regions: &[&str], force| Action::Merge {
            regions: regions.iter().map(|r| r.to_string()).collect(),
            force,
        };
        assert_eq!(action("merge_region 'a', 'b'"), merge(&["a", "b"], false));
        assert_eq!(
            action("merge_region 'a', 'b', true"),
            merge(&["a", "b"], true)
        );
        assert_eq!(
            action("merge_region ['a', 'b', 'c'], 'true'"),
            merge(&["a", "b", "c"], true)
        );
        assert!(error("merge_region 'a'").contains("name two regions"));
        assert!(error("merge_region ['a', 'b'], true, 'x'").contains("too many"));
        assert!(error("merge_region 'a', 'b', 'maybe'").contains("true or false"));
        let scope = |ns: &str, table: &str, f: Option<&str>, q: Option<&str>| {
            cellar_client::PermissionScope {
                namespace: ns.into(),
                table: table.into(),
                family: f.map(|f| Bytes::copy_from_slice(f.as_bytes())),
                qualifier: q.map(|q| Bytes::copy_from_slice(q.as_bytes())),
            }
        };
        assert_eq!(
            action("grant 'bob', 'RW', 't', 'f', 'q'"),
            Action::Grant {
                user: "bob".into(),
                actions: "RW".into(),
                scope: scope("", "t", Some("f"), Some("q"))
            }
        );
        assert_eq!(
            action("grant '@ops', 'A'"),
            Action::Grant {
                user: "@ops".into(),
                actions: "A".into(),
                scope: scope("", "", None, None)
            }
        );
        assert_eq!(
            action("revoke 'bob', '@ns'"),
            Action::Revoke {
                user: "bob".into(),
                scope: scope("ns", "", None, None)
            }
        );
        assert_eq!(action("user_permission"), Action::UserPermission(None));
        assert_eq!(
            action("user_permission 't'"),
            Action::UserPermission(Some(scope("", "t", None, None)))
        );
        assert_eq!(action("balancer"), Action::Balancer);
        assert_eq!(
            action("move '42', 'h,1,2'"),
            Action::Move {
                region: "42".into(),
                server: Some("h,1,2".into())
            }
        );
        assert_eq!(action("unassign '42'"), Action::Unassign("42".into()));
        assert_eq!(
            action("list 'a.*'"),
            Action::List {
                pattern: Some("a.*".into())
            }
        );
        assert!(error("list '('").contains("invalid regular expression"));
        assert_eq!(action("help 'scan'"), Action::Help(Some("scan".into())));
        assert_eq!(action("quit"), Action::Exit);
        assert!(error("drop").contains("expected 1, got 0"));
        assert!(error("drop ''").contains("empty"));
        let e = error("frobnicate 't'");
        assert_eq!(
            e,
            "unknown command 'frobnicate'; type 'help' for the list of commands"
        );
        for c in COMMANDS {
            assert!(GROUPS.contains(&c.group), "{}", c.name);
            assert!(c.usage.starts_with(c.name), "{}", c.name);
        }
    }
}

//! Running actions against a cluster and printing what HBase's shell prints.
//!
//! The cluster is reached through the small [`Cluster`] trait so the printing and the
//! multi-step commands (alter's merge, truncate, deleteall of a whole row, count) can be
//! tested without a server; the shipped shell implements it with Cellar's blocking client.

use super::commands::{help_for, Action, DeleteTarget, FamilySpec, COMMANDS, GROUPS};
use super::format;
use bytes::Bytes;
use cellar_model::{Cell, FamilySchema, Filter, Get, ListOp, RowMutation, Scan, TableSchema};
use std::io::Write;
use std::time::Instant;

/// What the shell needs to know about a table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableState {
    pub schema: TableSchema,
    pub enabled: bool,
    /// One printable line per region.
    pub regions: Vec<String>,
}

/// Rows of a scan as they arrive; a row may come in parts when the scan has a batch size.
pub type Rows<'a> = Box<dyn Iterator<Item = Result<(Bytes, Vec<Cell>), String>> + 'a>;

/// The operations the shell performs; errors are messages to print.
pub trait Cluster {
    fn create_table(&mut self, schema: TableSchema, splits: Vec<Bytes>) -> Result<(), String>;
    /// Changes families and, when given, sets the table's options.
    fn alter_table(
        &mut self,
        table: &str,
        families: Vec<FamilySchema>,
        deletes: Vec<String>,
        options: Option<cellar_model::TableOptions>,
    ) -> Result<(), String>;
    fn list_tables(&mut self) -> Result<Vec<TableState>, String>;
    fn describe_table(&mut self, table: &str) -> Result<TableState, String>;
    fn table_exists(&mut self, table: &str) -> Result<bool, String>;
    fn mutate(&mut self, table: &str, mutation: RowMutation) -> Result<(), String>;
    fn get(&mut self, table: &str, get: Get) -> Result<Vec<Cell>, String>;
    fn scan(&mut self, table: &str, scan: Scan) -> Result<Rows<'_>, String>;
    /// [`Cluster::scan`] as an execution of a prepared scan of the same shape.
    fn scan_prepared(&mut self, table: &str, scan: Scan) -> Result<Rows<'_>, String> {
        self.scan(table, scan)
    }
    fn increment(
        &mut self,
        table: &str,
        row: Bytes,
        family: &[u8],
        qualifier: &[u8],
        amount: i64,
    ) -> Result<i64, String>;
    fn disable_table(&mut self, table: &str) -> Result<(), String>;
    fn enable_table(&mut self, table: &str) -> Result<(), String>;
    fn delete_table(&mut self, table: &str) -> Result<(), String>;
    fn truncate_table(&mut self, table: &str) -> Result<(), String>;
    fn flush(&mut self, table: &str) -> Result<(), String>;
    fn major_compact(&mut self, table: &str) -> Result<(), String>;
    fn split(&mut self, table: &str, row: Option<&[u8]>) -> Result<(), String>;
    /// The lines `status` prints (`detailed`: every region server and its regions).
    fn status(&mut self, detailed: bool) -> Result<Vec<String>, String>;
    /// Turns the balancer on or off; whether it was on.
    fn balance_switch(&mut self, on: bool) -> Result<bool, String>;
    /// Runs the balancer: (regions moved, whether it is on).
    fn balance(&mut self) -> Result<(u32, bool), String>;
    fn move_region(&mut self, region: &str, server: Option<&str>) -> Result<(), String>;
    fn snapshot(&mut self, table: &str, name: &str, skip_flush: bool) -> Result<(), String>;
    /// (name, table, created ms since the epoch) of every snapshot.
    fn list_snapshots(&mut self) -> Result<Vec<(String, String, u64)>, String>;
    fn delete_snapshot(&mut self, name: &str) -> Result<(), String>;
    fn clone_snapshot(&mut self, name: &str, table: &str) -> Result<(), String>;
    fn restore_snapshot(&mut self, name: &str) -> Result<(), String>;
    /// Merges regions; the merged region's name, if the server told it.
    fn merge_regions(&mut self, regions: &[String], force: bool) -> Result<Option<String>, String>;
    fn assign(&mut self, region: &str) -> Result<(), String>;
    fn unassign(&mut self, region: &str) -> Result<(), String>;
    fn grant(
        &mut self,
        user: &str,
        actions: &str,
        scope: cellar_client::PermissionScope,
    ) -> Result<(), String>;
    fn revoke(&mut self, user: &str, scope: cellar_client::PermissionScope) -> Result<(), String>;
    fn user_permissions(
        &mut self,
        scope: Option<cellar_client::PermissionScope>,
    ) -> Result<Vec<cellar_client::Permission>, String>;
}

/// Whether the shell goes on after a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    Continue,
    Exit,
}

/// Runs one action, printing its output (and how long it took) to `out`.
pub fn execute(
    cluster: &mut dyn Cluster,
    action: Action,
    out: &mut dyn Write,
) -> Result<Flow, String> {
    let started = Instant::now();
    let io = |e: std::io::Error| format!("cannot write output: {e}");
    let mut lines: Vec<String> = Vec::new();
    let print = |out: &mut dyn Write, line: String| writeln!(out, "{line}").map_err(io);
    match action {
        Action::Help(topic) => {
            for line in help(topic.as_deref())? {
                print(out, line)?;
            }
            return Ok(Flow::Continue);
        }
        Action::Exit => return Ok(Flow::Exit),
        Action::Create { schema, splits } => {
            let name = schema.name.clone();
            cluster.create_table(schema, splits)?;
            lines.push(format!("Created table {name}"));
        }
        Action::Alter {
            table,
            mut changes,
            deletes,
            every_family,
            table_settings,
        } => {
            let current = cluster.describe_table(&table)?;
            if !every_family.is_empty() {
                for f in &current.schema.families {
                    if !changes.iter().any(|c| c.name == f.name) && !deletes.contains(&f.name) {
                        changes.push(FamilySpec {
                            name: f.name.clone(),
                            settings: Vec::new(),
                        });
                    }
                }
                for c in &mut changes {
                    c.settings.extend(every_family.iter().copied());
                }
            }
            let mut families = Vec::new();
            for change in &changes {
                let base = current
                    .schema
                    .family(change.name.as_bytes())
                    .cloned()
                    .unwrap_or_else(|| FamilySchema::new(change.name.clone()));
                let merged = change.apply_to(base);
                merged.validate().map_err(|e| format!("alter: {e}"))?;
                families.push(merged);
            }
            for name in &deletes {
                if current.schema.family(name.as_bytes()).is_none() {
                    return Err(format!(
                        "alter: table {table} has no column family '{name}'"
                    ));
                }
            }
            let options = (!table_settings.is_empty()).then(|| {
                let mut o = current.schema.options;
                for s in &table_settings {
                    s.apply_to(&mut o);
                }
                o
            });
            cluster.alter_table(&table, families, deletes, options)?;
            lines.push(format!("Table {table} altered"));
        }
        Action::List { pattern } => {
            let re = pattern
                .map(|p| {
                    regex::Regex::new(&format!("^(?:{p})$"))
                        .map_err(|e| format!("list: invalid regular expression '{p}': {e}"))
                })
                .transpose()?;
            let mut names: Vec<String> = cluster
                .list_tables()?
                .into_iter()
                .map(|t| t.schema.name)
                .filter(|n| re.as_ref().is_none_or(|re| re.is_match(n)))
                .collect();
            names.sort();
            let count = format::rows(names.len() as u64);
            lines.push("TABLE".into());
            lines.extend(names);
            lines.push(count);
        }
        Action::Describe(table) => {
            let t = cluster.describe_table(&table)?;
            lines.push(format!(
                "Table {table} is {}",
                if t.enabled { "ENABLED" } else { "DISABLED" }
            ));
            lines.push(format::table_attributes(&table, &t.schema.options));
            lines.push("COLUMN FAMILIES DESCRIPTION".into());
            lines.extend(t.schema.families.iter().map(format::family_description));
            lines.push(format::rows(t.schema.families.len() as u64));
            lines.push("REGIONS".into());
            lines.extend(t.regions.iter().map(|r| format!(" {r}")));
            lines.push(format!("{} region(s)", t.regions.len()));
        }
        Action::ListRegions(table) => {
            let t = cluster.describe_table(&table)?;
            lines.extend(t.regions.iter().map(|r| format!(" {r}")));
            lines.push(format!("{} region(s)", t.regions.len()));
        }
        Action::Exists(table) => {
            let exists = cluster.table_exists(&table)?;
            lines.push(format!(
                "Table {table} {}",
                if exists {
                    "does exist"
                } else {
                    "does not exist"
                }
            ));
        }
        Action::Put { table, mutation } | Action::Delete { table, mutation } => {
            let bare = mutation.entries.first().map(|c| c.qualifier.is_empty());
            let family = mutation.entries.first().map(|c| c.family.clone());
            if let Err(e) = cluster.mutate(&table, mutation) {
                // `put 't', 'r', 'email', 'v'`: a column named without its family.
                if bare == Some(true) && e.contains("family") {
                    let f = family
                        .map(|f| format::to_string_binary(&f))
                        .unwrap_or_default();
                    return Err(format!(
                        "{e} (a column is 'family:qualifier', e.g. 'cf:{f}'; `describe '{table}'` lists the families)"
                    ));
                }
                return Err(e);
            }
        }
        Action::DeleteAll {
            table,
            row,
            target,
            timestamp,
        } => {
            let mut m = RowMutation::new(row);
            m = match target {
                DeleteTarget::Column(f, q) => m.delete_column(&f, &q, timestamp),
                DeleteTarget::Family(f) => m.delete_family(&f, timestamp),
                DeleteTarget::Row => {
                    let t = cluster.describe_table(&table)?;
                    t.schema
                        .families
                        .iter()
                        .fold(m, |m, f| m.delete_family(f.name.as_bytes(), timestamp))
                }
            };
            cluster.mutate(&table, m)?;
        }
        Action::Get { table, get } => {
            let cells = cluster.get(&table, get)?;
            print(out, format::header("COLUMN", "CELL"))?;
            for c in &cells {
                print(out, format::get_cell(c))?;
            }
            lines.push(format::rows(u64::from(!cells.is_empty())));
        }
        Action::Scan {
            table,
            scan,
            prepared,
        } => {
            // The first row answers whether the scan can run at all (unknown table, no
            // server): fail before printing the header.
            let mut parts = if prepared {
                cluster.scan_prepared(&table, scan)?
            } else {
                cluster.scan(&table, scan)?
            };
            let first = parts.next().transpose()?;
            print(out, format::header("ROW", "COLUMN+CELL"))?;
            let mut rows = 0u64;
            let mut last: Option<Bytes> = None;
            for part in first.map(Ok).into_iter().chain(parts) {
                let (row, cells) = part?;
                if last.as_ref() != Some(&row) {
                    rows += 1;
                    last = Some(row);
                }
                for c in &cells {
                    print(out, format::scan_cell(c))?;
                }
            }
            lines.push(format::rows(rows));
        }
        Action::Incr {
            table,
            row,
            family,
            qualifier,
            amount,
        } => {
            let value = cluster.increment(&table, row, &family, &qualifier, amount)?;
            lines.push(format!("COUNTER VALUE = {value}"));
        }
        Action::GetCounter {
            table,
            row,
            family,
            qualifier,
        } => {
            let get = Get::new(row.clone()).column(&family, &qualifier);
            let cells = cluster.get(&table, get)?;
            match cells.first() {
                None => lines.push("No counter found at specified coordinates".into()),
                Some(c) => {
                    let bytes: [u8; 8] = c.value[..].try_into().map_err(|_| {
                        format!(
                            "{}:{} of row {} holds {} bytes, not an 8-byte counter",
                            format::to_string_binary(&family),
                            format::to_string_binary(&qualifier),
                            format::to_string_binary(&row),
                            c.value.len()
                        )
                    })?;
                    lines.push(format!("COUNTER VALUE = {}", i64::from_be_bytes(bytes)));
                }
            }
        }
        Action::Count {
            table,
            interval,
            caching,
        } => {
            let scan = Scan::new().caching(caching).filter(Filter::List(
                ListOp::MustPassAll,
                vec![
                    Filter::FirstKeyOnly,
                    Filter::KeyOnly {
                        len_as_value: false,
                    },
                ],
            ));
            let mut rows = 0u64;
            let mut last: Option<Bytes> = None;
            for part in cluster.scan(&table, scan)? {
                let (row, _) = part?;
                if last.as_ref() == Some(&row) {
                    continue;
                }
                rows += 1;
                if rows.is_multiple_of(interval) {
                    print(
                        out,
                        format!(
                            "Current count: {rows}, row: {}",
                            format::to_string_binary(&row)
                        ),
                    )?;
                }
                last = Some(row);
            }
            lines.push(format::rows(rows));
        }
        Action::Truncate(table) => {
            print(
                out,
                format!("Truncating '{table}' table (it may take a while):"),
            )?;
            if cluster.describe_table(&table)?.enabled {
                print(out, "Disabling table...".into())?;
                cluster.disable_table(&table)?;
            }
            print(out, "Truncating table...".into())?;
            cluster.truncate_table(&table)?;
            // HBase leaves a truncated table enabled; enable it if the server did not.
            if !cluster.describe_table(&table)?.enabled {
                cluster.enable_table(&table)?;
            }
        }
        Action::Disable(table) => cluster.disable_table(&table)?,
        Action::Enable(table) => cluster.enable_table(&table)?,
        Action::Drop(table) => cluster.delete_table(&table)?,
        Action::IsEnabled(table) => {
            lines.push(cluster.describe_table(&table)?.enabled.to_string());
        }
        Action::IsDisabled(table) => {
            lines.push((!cluster.describe_table(&table)?.enabled).to_string());
        }
        Action::Status { detailed } => lines.extend(cluster.status(detailed)?),
        Action::BalanceSwitch(on) => {
            let was = cluster.balance_switch(on)?;
            lines.push(format!("Previous balancer state : {was}"));
        }
        Action::Balancer => {
            let (moved, on) = cluster.balance()?;
            lines.push(if on {
                format!("true ({moved} region(s) moved)")
            } else {
                "false (the balancer is off; turn it on with balance_switch true)".to_string()
            });
        }
        Action::Move { region, server } => cluster.move_region(&region, server.as_deref())?,
        Action::Snapshot {
            table,
            name,
            skip_flush,
        } => cluster.snapshot(&table, &name, skip_flush)?,
        Action::ListSnapshots => {
            let all = cluster.list_snapshots()?;
            lines.push(format!("{:<30} {:<30} CREATION TIME", "SNAPSHOT", "TABLE"));
            for (name, table, created_ms) in &all {
                lines.push(format!(
                    "{name:<30} {table:<30} {}",
                    format::format_timestamp(*created_ms)
                ));
            }
            lines.push(format!("{} row(s)", all.len()));
        }
        Action::DeleteSnapshot(name) => cluster.delete_snapshot(&name)?,
        Action::CloneSnapshot { name, table } => cluster.clone_snapshot(&name, &table)?,
        Action::RestoreSnapshot(name) => cluster.restore_snapshot(&name)?,
        Action::Merge { regions, force } => {
            if let Some(merged) = cluster.merge_regions(&regions, force)? {
                lines.push(format!("merged into {merged}"));
            }
        }
        Action::Assign(region) => cluster.assign(&region)?,
        Action::Unassign(region) => cluster.unassign(&region)?,
        Action::Flush(table) => cluster.flush(&table)?,
        Action::MajorCompact(table) => cluster.major_compact(&table)?,
        Action::Split { table, row } => cluster.split(&table, row.as_deref())?,
        Action::Grant {
            user,
            actions,
            scope,
        } => cluster.grant(&user, &actions, scope)?,
        Action::Revoke { user, scope } => cluster.revoke(&user, scope)?,
        Action::UserPermission(scope) => {
            let list = cluster.user_permissions(scope)?;
            print(
                out,
                format::header("User", "Namespace,Table,Family,Qualifier:Permission"),
            )?;
            for p in &list {
                print(out, format::line(&p.user, &format::permission(p)))?;
            }
            lines.push(format::rows(list.len() as u64));
        }
    }
    for line in lines {
        print(out, line)?;
    }
    print(out, format::took(started.elapsed()))?;
    Ok(Flow::Continue)
}

fn help(topic: Option<&str>) -> Result<Vec<String>, String> {
    if let Some(name) = topic {
        let h = help_for(name).ok_or_else(|| {
            format!("unknown command '{name}'; type 'help' for the list of commands")
        })?;
        let mut lines = vec![h.summary.to_string(), String::new(), "Usage:".to_string()];
        lines.extend(h.usage.lines().map(|l| format!("  {l}")));
        return Ok(lines);
    }
    let mut lines = vec![
        "Cellar shell: HBase shell commands, e.g. put 't1', 'r1', 'cf:q', 'value'".to_string(),
        "Type help 'command' for one command's details. Strings in double quotes take escapes"
            .into(),
        "such as \"\\x00\"; separate commands with ';' or newlines.".into(),
        String::new(),
    ];
    for group in GROUPS {
        let names: Vec<&str> = COMMANDS
            .iter()
            .filter(|c| c.group == *group)
            .map(|c| c.name)
            .collect();
        lines.push(format!("  Group name: {group}"));
        lines.push(format!("  Commands: {}", names.join(", ")));
        lines.push(String::new());
    }
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::super::commands::translate;
    use super::super::fake::{cell, Fake};
    use super::super::parser::parse_script;
    use super::*;
    use cellar_model::CellType;

    /// Runs `src` and returns the output without the `Took` lines.
    fn run(fake: &mut Fake, src: &str) -> Result<String, String> {
        let mut out = Vec::new();
        for cmd in parse_script(src).map_err(|e| e.to_string())? {
            execute(fake, translate(&cmd)?, &mut out)?;
        }
        let text = String::from_utf8(out).map_err(|e| e.to_string())?;
        for l in text.lines().filter(|l| l.starts_with("Took ")) {
            assert!(l.ends_with(" seconds"), "{l}");
        }
        Ok(text
            .lines()
            .filter(|l| !l.starts_with("Took "))
            .map(|l| format!("{}\n", l.trim_end()))
            .collect())
    }

    #[test]
    fn scan_and_get_print_hbase_tables() {
        let mut fake = Fake::with_cells(vec![
            cell(b"\x00\xff", "a", b"v\\1"),
            cell(b"r2", "a", b"x"),
            cell(b"r2", "b", b"y"),
        ]);
        let out = run(&mut fake, "scan 't', {BATCH => 1}").expect("scan");
        let ts = "2026-11-22T05:40:00.123Z";
        assert_eq!(
            out,
            format!(
                "ROW                         COLUMN+CELL\n \
                 \\x00\\xFF                   column=cf:a, timestamp={ts}, value=v\\x5C1\n \
                 r2                         column=cf:a, timestamp={ts}, value=x\n \
                 r2                         column=cf:b, timestamp={ts}, value=y\n\
                 2 row(s)\n"
            )
        );
        assert_eq!(fake.scans[0].batch, 1);
        let out = run(&mut fake, "get 't', 'r2'").expect("get");
        assert_eq!(
            out,
            format!(
                "COLUMN                      CELL\n \
                 cf:a                       timestamp={ts}, value=x\n \
                 cf:b                       timestamp={ts}, value=y\n1 row(s)\n"
            )
        );
        let out = run(&mut fake, "get 't', 'nope'").expect("get");
        assert_eq!(out, "COLUMN                      CELL\n0 row(s)\n");
        let err = run(&mut fake, "get 'missing', 'r'").expect_err("no table");
        assert_eq!(err, "table missing does not exist");
    }

    #[test]
    fn a_scan_that_cannot_start_prints_no_header() {
        let mut fake = Fake::default();
        let mut out = Vec::new();
        let action = Action::Scan {
            table: "broken".into(),
            scan: Scan::new(),
            prepared: false,
        };
        let err = execute(&mut fake, action, &mut out).expect_err("offline");
        assert_eq!(err, "region is offline");
        assert!(out.is_empty());
    }

    #[test]
    fn count_scans_first_keys_and_reports_progress() {
        let cells = (0..5)
            .map(|i| cell(format!("r{i}").as_bytes(), "a", b""))
            .collect();
        let mut fake = Fake::with_cells(cells);
        let out = run(&mut fake, "count 't', {INTERVAL => 2}").expect("count");
        assert_eq!(
            out,
            "Current count: 2, row: r1\nCurrent count: 4, row: r3\n5 row(s)\n"
        );
        assert!(matches!(
            fake.scans[0].filter,
            Some(Filter::List(ListOp::MustPassAll, _))
        ));
    }

    #[test]
    fn alter_merges_with_the_current_schema() {
        let mut fake = Fake::default();
        run(
            &mut fake,
            "alter 't', {NAME => 'cf', VERSIONS => 5}, {NAME => 'new'}",
        )
        .expect("alter");
        let (families, deletes) = &fake.altered[0];
        assert_eq!(families[0].max_versions, 5);
        assert_eq!(
            families[0].ttl_secs,
            Some(100),
            "unnamed options keep their values"
        );
        assert_eq!(families[1], FamilySchema::new("new"));
        assert!(deletes.is_empty());
        run(&mut fake, "alter 't', 'delete' => 'cf2'").expect("delete");
        assert_eq!(fake.altered[1].1, vec!["cf2".to_string()]);
        let err = run(&mut fake, "alter 't', 'delete' => 'zz'").expect_err("unknown family");
        assert!(err.contains("no column family 'zz'"), "{err}");
        let err = run(&mut fake, "alter 't', {NAME => 'cf', MIN_VERSIONS => 9}").expect_err("bad");
        assert!(err.contains("min_versions"), "{err}");
        run(&mut fake, "alter 't', READONLY => true").expect("read only");
        let set = fake.options_set.last().expect("options sent");
        assert!(set.read_only);
        assert_eq!(
            set.durability,
            fake.state().schema.options.durability,
            "options not named keep their values"
        );
    }

    /// The fake's table is a region (`MemRegion`): what the shell writes, it reads back.
    #[test]
    fn writes_are_read_back_from_the_fake_s_region() {
        let mut fake = Fake::default();
        run(
            &mut fake,
            "put 't', 'r1', 'cf:a', 'v1'; put 't', 'r2', 'cf2:b', 'v2'",
        )
        .expect("put");
        let ts = "2026-11-22T05:40:00.123Z";
        assert_eq!(
            run(&mut fake, "get 't', 'r1'").expect("get"),
            format!("COLUMN                      CELL\n cf:a                       timestamp={ts}, value=v1\n1 row(s)\n")
        );
        assert_eq!(run(&mut fake, "count 't'").expect("count"), "2 row(s)\n");
        run(&mut fake, "deleteall 't', 'r1'").expect("deleteall");
        assert_eq!(
            run(&mut fake, "get 't', 'r1'").expect("get"),
            "COLUMN                      CELL\n0 row(s)\n"
        );
        let err = run(&mut fake, "put 't', 'r1', 'nope:a', 'v'").expect_err("no such family");
        assert!(err.contains("nope"), "{err}");
        assert!(!err.contains("family:qualifier"), "{err}");
        let err = run(&mut fake, "put 't', 'r1', 'email', 'v'").expect_err("no family given");
        assert!(
            err.contains("a column is 'family:qualifier', e.g. 'cf:email'"),
            "{err}"
        );
    }

    #[test]
    fn deleteall_of_a_row_deletes_every_family() {
        let mut fake = Fake::default();
        run(&mut fake, "deleteall 't', 'r'").expect("deleteall");
        let m = &fake.mutations[0];
        let fams: Vec<_> = m
            .entries
            .iter()
            .map(|e| (e.family.clone(), e.cell_type))
            .collect();
        assert_eq!(
            fams,
            vec![
                (Bytes::from_static(b"cf"), CellType::DeleteFamily),
                (Bytes::from_static(b"cf2"), CellType::DeleteFamily)
            ]
        );
        run(&mut fake, "deleteall 't', 'r', 'cf:q', 5").expect("column");
        assert_eq!(
            fake.mutations[1].entries[0].cell_type,
            CellType::DeleteColumn
        );
    }

    #[test]
    fn admin_commands_print_states() {
        let mut fake = Fake {
            enabled: true,
            ..Fake::default()
        };
        assert_eq!(
            run(&mut fake, "list").expect("list"),
            "TABLE\nabc\nt\n2 row(s)\n"
        );
        assert_eq!(
            run(&mut fake, "list 'a.*'").expect("list"),
            "TABLE\nabc\n1 row(s)\n"
        );
        assert_eq!(
            run(&mut fake, "list 'b'").expect("list"),
            "TABLE\n0 row(s)\n"
        );
        assert_eq!(
            run(&mut fake, "exists 't'").expect("e"),
            "Table t does exist\n"
        );
        assert_eq!(
            run(&mut fake, "exists 'u'").expect("e"),
            "Table u does not exist\n"
        );
        assert_eq!(run(&mut fake, "is_enabled 't'").expect("e"), "true\n");
        assert_eq!(run(&mut fake, "is_disabled 't'").expect("e"), "false\n");
        let d = run(&mut fake, "describe 't'").expect("describe");
        assert!(
            d.starts_with("Table t is ENABLED\nt\nCOLUMN FAMILIES DESCRIPTION\n{NAME => 'cf'"),
            "{d}"
        );
        assert!(
            d.contains("TTL => '100 SECONDS'") && d.contains("2 row(s)\nREGIONS\n"),
            "{d}"
        );
        assert_eq!(
            run(&mut fake, "truncate 't'").expect("truncate"),
            "Truncating 't' table (it may take a while):\nDisabling table...\nTruncating table...\n"
        );
        assert_eq!(fake.calls, ["disable t", "truncate t", "enable t"]);
        assert_eq!(
            run(&mut fake, "incr 't', 'r', 'cf:c', 5").expect("incr"),
            "COUNTER VALUE = 5\n"
        );
        assert_eq!(
            run(&mut fake, "incr 't', 'r', 'cf:c', 10").expect("incr"),
            "COUNTER VALUE = 15\n"
        );
        assert_eq!(
            run(&mut fake, "status").expect("status"),
            "1 servers, 0 dead\n"
        );
        run(
            &mut fake,
            "flush 't'; major_compact 't'; split 't', 'm'; drop 't'; enable 't'",
        )
        .expect("admin");
        assert_eq!(
            fake.calls[3..],
            [
                "flush t",
                "compact t",
                "split t Some([109])",
                "drop t",
                "enable t"
            ]
        );
    }

    #[test]
    fn get_counter_decodes_eight_bytes() {
        let mut fake = Fake::with_cells(vec![
            cell(b"c", "n", &42i64.to_be_bytes()),
            cell(b"s", "n", b"abc"),
        ]);
        assert_eq!(
            run(&mut fake, "get_counter 't', 'c', 'cf:n'").expect("c"),
            "COUNTER VALUE = 42\n"
        );
        let err = run(&mut fake, "get_counter 't', 's', 'cf:n'").expect_err("short");
        assert!(err.contains("3 bytes, not an 8-byte counter"), "{err}");
        assert_eq!(
            run(&mut fake, "get_counter 't', 'x', 'cf:n'").expect("none"),
            "No counter found at specified coordinates\n"
        );
    }

    #[test]
    fn help_lists_groups_and_describes_commands() {
        let mut fake = Fake::default();
        let all = run(&mut fake, "help").expect("help");
        for c in COMMANDS {
            assert!(all.contains(c.name), "{}", c.name);
        }
        let scan = run(&mut fake, "help 'scan'").expect("help scan");
        assert!(scan.contains("Usage:\n  scan 't'"), "{scan}");
        assert!(run(&mut fake, "help 'nope'")
            .expect_err("unknown")
            .contains("'nope'"));
        let mut out = Vec::new();
        let flow = execute(&mut fake, Action::Exit, &mut out).expect("exit");
        assert_eq!(flow, Flow::Exit);
        assert!(out.is_empty());
    }
}

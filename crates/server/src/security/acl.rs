//! HBase's permission model: actions (READ, WRITE, EXEC, CREATE, ADMIN) granted to users and
//! `@groups` at five scopes — global, namespace, table, family, qualifier — and the decisions
//! made from them. A permission at a scope covers everything inside it (a namespace's tables, a
//! table's families, a family's qualifiers). Pure logic: who the caller is and where grants are
//! stored live elsewhere (`super::authz`, `crate::meta`).
//!
//! Grants are stored as records (`docs/security.md`, "Stored permissions"): one meta cell per
//! (scope, user), its qualifier [`encode_key`] and its value the actions as HBase writes them
//! in `hbase:acl` ("RWXCA" letters).

use bytes::Bytes;
use std::collections::BTreeMap;
use std::fmt;

/// The prefix of meta's rows holding granted permissions (`@acl/<object>`).
pub const ACL_ROW_PREFIX: &[u8] = b"@acl/";

/// One action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Action {
    Read,
    Write,
    Exec,
    Create,
    Admin,
}

impl Action {
    pub const ALL: [Action; 5] = [
        Action::Read,
        Action::Write,
        Action::Exec,
        Action::Create,
        Action::Admin,
    ];

    /// HBase's letter for it (`hbase:acl` values, the shell's `'RW'`).
    pub fn code(self) -> char {
        match self {
            Action::Read => 'R',
            Action::Write => 'W',
            Action::Exec => 'X',
            Action::Create => 'C',
            Action::Admin => 'A',
        }
    }

    /// HBase's name for it (`AccessDeniedException` messages).
    pub fn name(self) -> &'static str {
        match self {
            Action::Read => "READ",
            Action::Write => "WRITE",
            Action::Exec => "EXEC",
            Action::Create => "CREATE",
            Action::Admin => "ADMIN",
        }
    }

    fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

/// A set of actions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct Actions(u8);

impl Actions {
    pub const NONE: Actions = Actions(0);

    pub fn of(actions: &[Action]) -> Actions {
        Actions(actions.iter().fold(0, |b, a| b | a.bit()))
    }

    pub fn contains(self, a: Action) -> bool {
        self.0 & a.bit() != 0
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    pub fn union(self, other: Actions) -> Actions {
        Actions(self.0 | other.0)
    }

    pub fn minus(self, other: Actions) -> Actions {
        Actions(self.0 & !other.0)
    }

    pub fn iter(self) -> impl Iterator<Item = Action> {
        Action::ALL.into_iter().filter(move |a| self.contains(*a))
    }

    /// Parses HBase's letters (`"RW"`, `"RWXCA"`, any order, case-insensitive).
    pub fn parse(codes: &str) -> Result<Actions, String> {
        let mut out = Actions::NONE;
        for c in codes.chars() {
            let a = match c.to_ascii_uppercase() {
                'R' => Action::Read,
                'W' => Action::Write,
                'X' => Action::Exec,
                'C' => Action::Create,
                'A' => Action::Admin,
                _ => {
                    return Err(format!(
                        "{c:?} is not a permission: use the letters R (read), W (write), X (exec), C (create), A (admin)"
                    ))
                }
            };
            out = out.union(Actions::of(&[a]));
        }
        if out.is_empty() {
            return Err("no permission given: use the letters R, W, X, C, A".into());
        }
        Ok(out)
    }
}

impl fmt::Display for Actions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for a in self.iter() {
            write!(f, "{}", a.code())?;
        }
        Ok(())
    }
}

/// Where a permission applies.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Scope {
    Global,
    Namespace(String),
    /// A table, or one family of it, or one column (family and qualifier).
    Table {
        table: String,
        family: Option<Bytes>,
        qualifier: Option<Bytes>,
    },
}

impl Scope {
    pub fn table(table: &str) -> Scope {
        Scope::Table {
            table: table.to_string(),
            family: None,
            qualifier: None,
        }
    }

    pub fn family(table: &str, family: &[u8]) -> Scope {
        Scope::Table {
            table: table.to_string(),
            family: Some(Bytes::copy_from_slice(family)),
            qualifier: None,
        }
    }

    /// Whether a permission at `self` covers `other` (a scope inside it, or itself).
    pub fn covers(&self, other: &Scope) -> bool {
        match (self, other) {
            (Scope::Global, _) => true,
            (Scope::Namespace(ns), Scope::Namespace(o)) => ns == o,
            (Scope::Namespace(ns), Scope::Table { table, .. }) => namespace_of(table) == ns,
            (
                Scope::Table {
                    table,
                    family,
                    qualifier,
                },
                Scope::Table {
                    table: t2,
                    family: f2,
                    qualifier: q2,
                },
            ) => {
                table == t2
                    && match (family, f2) {
                        (None, _) => true,
                        (Some(f), Some(f2)) => {
                            f == f2
                                && match (qualifier, q2) {
                                    (None, _) => true,
                                    (Some(q), Some(q2)) => q == q2,
                                    (Some(_), None) => false,
                                }
                        }
                        (Some(_), None) => false,
                    }
            }
            _ => false,
        }
    }

    /// The object whose meta row holds this scope's grants: `""` global, `@ns`, or the table.
    pub fn object(&self) -> String {
        match self {
            Scope::Global => String::new(),
            Scope::Namespace(ns) => format!("@{ns}"),
            Scope::Table { table, .. } => table.clone(),
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scope::Global => write!(f, "global"),
            Scope::Namespace(ns) => write!(f, "namespace={ns}"),
            Scope::Table {
                table,
                family,
                qualifier,
            } => {
                write!(f, "table={table}")?;
                if let Some(fam) = family {
                    write!(f, ", family={}", String::from_utf8_lossy(fam))?;
                }
                if let Some(q) = qualifier {
                    write!(f, ", qualifier={}", String::from_utf8_lossy(q))?;
                }
                Ok(())
            }
        }
    }
}

/// The namespace of a table name (`ns:t`, else `default`).
pub fn namespace_of(table: &str) -> &str {
    table.split_once(':').map_or("default", |(ns, _)| ns)
}

/// One grant: who (a user, or `@group`), where, what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Permission {
    pub user: String,
    pub scope: Scope,
    pub actions: Actions,
}

/// Who is asking: a user and the groups it is in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subject {
    pub user: String,
    pub groups: Vec<String>,
    /// Superusers may do everything.
    pub superuser: bool,
}

impl Subject {
    /// Whether a grant to `grantee` (a user, or `@group`) is a grant to this subject.
    fn is(&self, grantee: &str) -> bool {
        match grantee.strip_prefix('@') {
            Some(group) => self.groups.iter().any(|g| g == group),
            None => grantee == self.user,
        }
    }
}

/// Every grant, by (scope, grantee), and indexed by the object whose row holds it, so that a
/// check looks only at the grants of the global scope, the namespace and the table it is
/// about: 0.14–0.28 µs a check with a thousand other grants in the server (`authz_bench`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Permissions {
    grants: BTreeMap<(Scope, String), Actions>,
    by_object: std::collections::HashMap<String, Vec<(Scope, String, Actions)>>,
}

impl Permissions {
    pub fn from_list(list: impl IntoIterator<Item = Permission>) -> Permissions {
        let mut p = Permissions::default();
        for perm in list {
            p.grant(&perm);
        }
        p
    }

    /// Adds `perm`'s actions to what its grantee has at its scope (HBase's merge); the
    /// actions held now.
    pub fn grant(&mut self, perm: &Permission) -> Actions {
        let e = self
            .grants
            .entry((perm.scope.clone(), perm.user.clone()))
            .or_default();
        *e = e.union(perm.actions);
        let held = *e;
        self.reindex(&perm.scope.object());
        held
    }

    /// Rebuilds the index of one object's grants (grants change rarely; checks are many).
    fn reindex(&mut self, object: &str) {
        let entries: Vec<(Scope, String, Actions)> = self
            .grants
            .iter()
            .filter(|((s, _), _)| s.object() == object)
            .map(|((s, u), a)| (s.clone(), u.clone(), *a))
            .collect();
        if entries.is_empty() {
            self.by_object.remove(object);
        } else {
            self.by_object.insert(object.to_string(), entries);
        }
    }

    /// The grants that may cover `scope`: the global ones, its namespace's and its table's.
    fn candidates<'a>(
        &'a self,
        scope: &Scope,
    ) -> impl Iterator<Item = &'a (Scope, String, Actions)> {
        let (ns, table): (Option<&str>, Option<&str>) = match scope {
            Scope::Global => (None, None),
            Scope::Namespace(ns) => (Some(ns.as_str()), None),
            Scope::Table { table, .. } => (Some(namespace_of(table)), Some(table.as_str())),
        };
        let global = self.by_object.get("");
        let ns = ns.and_then(|n| self.by_object.get(&format!("@{n}")));
        let table = table.and_then(|t| self.by_object.get(t));
        [global, ns, table].into_iter().flatten().flatten()
    }

    /// Takes `actions` (all when `None`) from what `user` has at exactly `scope`; what is left
    /// (`None`: nothing was granted there).
    pub fn revoke(
        &mut self,
        user: &str,
        scope: &Scope,
        actions: Option<Actions>,
    ) -> Option<Actions> {
        let key = (scope.clone(), user.to_string());
        let held = *self.grants.get(&key)?;
        let left = match actions {
            None => Actions::NONE,
            Some(a) => held.minus(a),
        };
        if left.is_empty() {
            self.grants.remove(&key);
        } else {
            self.grants.insert(key, left);
        }
        self.reindex(&scope.object());
        Some(left)
    }

    /// Every grant, in scope order.
    pub fn list(&self) -> Vec<Permission> {
        self.grants
            .iter()
            .map(|((scope, user), actions)| Permission {
                user: user.clone(),
                scope: scope.clone(),
                actions: *actions,
            })
            .collect()
    }

    /// The grants of one scope's object (`Scope::object`).
    pub fn of_object(&self, object: &str) -> Vec<Permission> {
        self.list()
            .into_iter()
            .filter(|p| p.scope.object() == object)
            .collect()
    }

    /// Whether `who` may do `action` at `scope`: a superuser, or a grant at a scope that
    /// covers it.
    pub fn allows(&self, who: &Subject, action: Action, scope: &Scope) -> bool {
        who.superuser
            || self.candidates(scope).any(|(s, grantee, actions)| {
                actions.contains(action) && who.is(grantee) && s.covers(scope)
            })
    }

    /// Whether `who` may do `action` somewhere inside `table` (a family or a column of it):
    /// what lets a read in, with the cells it may not see filtered out.
    pub fn allows_some_of_table(&self, who: &Subject, action: Action, table: &str) -> bool {
        let t = Scope::table(table);
        who.superuser
            || self.candidates(&t).any(|(s, grantee, actions)| {
                actions.contains(action) && who.is(grantee) && (s.covers(&t) || t.covers(s))
            })
    }

    /// The columns of `table` where `who` may do `action`, when it may not on the whole
    /// table: family → `None` (the whole family) or the qualifiers. `None` when the whole
    /// table is allowed.
    pub fn allowed_columns(
        &self,
        who: &Subject,
        action: Action,
        table: &str,
    ) -> Option<BTreeMap<Bytes, Option<Vec<Bytes>>>> {
        if self.allows(who, action, &Scope::table(table)) {
            return None;
        }
        let mut cols: BTreeMap<Bytes, Option<Vec<Bytes>>> = BTreeMap::new();
        for (s, grantee, actions) in self.by_object.get(table).into_iter().flatten() {
            if !actions.contains(action) || !who.is(grantee) {
                continue;
            }
            if let Scope::Table {
                table: t,
                family: Some(f),
                qualifier,
            } = s
            {
                if t != table {
                    continue;
                }
                match qualifier {
                    None => {
                        cols.insert(f.clone(), None);
                    }
                    Some(q) => {
                        if let Some(quals) =
                            cols.entry(f.clone()).or_insert_with(|| Some(Vec::new()))
                        {
                            quals.push(q.clone());
                        }
                    }
                }
            }
        }
        Some(cols)
    }
}

/// The version byte of [`encode_key`].
pub const KEY_VERSION: u8 = 1;

/// A grant's meta qualifier: `u8 version (1) | u16 BE user length | user | u8 kind (0 global,
/// 1 namespace, 2 table) | kind's fields`, where a namespace is `u16 BE length | name` and a
/// table `u16 BE length | name | u8 has_family | [u16 BE length | family | u8 has_qualifier |
/// [u32 BE length | qualifier]]`.
pub fn encode_key(user: &str, scope: &Scope) -> Vec<u8> {
    let mut out = vec![KEY_VERSION];
    put16(&mut out, user.as_bytes());
    match scope {
        Scope::Global => out.push(0),
        Scope::Namespace(ns) => {
            out.push(1);
            put16(&mut out, ns.as_bytes());
        }
        Scope::Table {
            table,
            family,
            qualifier,
        } => {
            out.push(2);
            put16(&mut out, table.as_bytes());
            match family {
                None => out.push(0),
                Some(f) => {
                    out.push(1);
                    put16(&mut out, f);
                    match qualifier {
                        None => out.push(0),
                        Some(q) => {
                            out.push(1);
                            out.extend_from_slice(&(q.len() as u32).to_be_bytes());
                            out.extend_from_slice(q);
                        }
                    }
                }
            }
        }
    }
    out
}

fn put16(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len().min(u16::MAX as usize) as u16).to_be_bytes());
    out.extend_from_slice(&b[..b.len().min(u16::MAX as usize)]);
}

/// Decodes [`encode_key`]; errors say what is wrong.
pub fn decode_key(b: &[u8]) -> Result<(String, Scope), String> {
    let mut r = Reader(b);
    let v = r.u8()?;
    if v != KEY_VERSION {
        return Err(format!(
            "permission record version {v}, expected {KEY_VERSION}"
        ));
    }
    let user = r.text16("user")?;
    let scope = match r.u8()? {
        0 => Scope::Global,
        1 => Scope::Namespace(r.text16("namespace")?),
        2 => {
            let table = r.text16("table")?;
            let (family, qualifier) = match r.u8()? {
                0 => (None, None),
                1 => {
                    let f = Bytes::copy_from_slice(r.take16()?);
                    let q = match r.u8()? {
                        0 => None,
                        1 => {
                            let n = r.u32()? as usize;
                            Some(Bytes::copy_from_slice(r.take(n)?))
                        }
                        k => return Err(format!("qualifier flag {k}, expected 0 or 1")),
                    };
                    (Some(f), q)
                }
                k => return Err(format!("family flag {k}, expected 0 or 1")),
            };
            Scope::Table {
                table,
                family,
                qualifier,
            }
        }
        k => return Err(format!("scope kind {k}, expected 0, 1 or 2")),
    };
    if !r.0.is_empty() {
        return Err(format!("{} bytes after the permission record", r.0.len()));
    }
    if user.is_empty() {
        return Err("a permission record names no user".into());
    }
    Ok((user, scope))
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if self.0.len() < n {
            return Err(format!(
                "permission record ends early: {n} bytes wanted, {} left",
                self.0.len()
            ));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }

    fn u32(&mut self) -> Result<u32, String> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn take16(&mut self) -> Result<&'a [u8], String> {
        let b = self.take(2)?;
        let n = u16::from_be_bytes([b[0], b[1]]) as usize;
        self.take(n)
    }

    fn text16(&mut self, what: &str) -> Result<String, String> {
        String::from_utf8(self.take16()?.to_vec())
            .map_err(|_| format!("the permission record's {what} is not UTF-8"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subject(user: &str, groups: &[&str]) -> Subject {
        Subject {
            user: user.into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
            superuser: false,
        }
    }

    fn col(table: &str, f: &str, q: &str) -> Scope {
        Scope::Table {
            table: table.into(),
            family: Some(Bytes::copy_from_slice(f.as_bytes())),
            qualifier: Some(Bytes::copy_from_slice(q.as_bytes())),
        }
    }

    #[test]
    fn wider_scopes_cover_narrower_ones() {
        let t = Scope::table("ns:t");
        let f = Scope::family("ns:t", b"f");
        let c = col("ns:t", "f", "q");
        for inner in [&t, &f, &c] {
            assert!(Scope::Global.covers(inner));
            assert!(Scope::Namespace("ns".into()).covers(inner));
            assert!(!Scope::Namespace("default".into()).covers(inner));
            assert!(t.covers(inner));
        }
        assert!(f.covers(&c) && !c.covers(&f) && !f.covers(&t));
        assert!(!Scope::family("ns:t", b"g").covers(&c));
        assert!(Scope::Namespace("default".into()).covers(&Scope::table("t")));
        assert!(!t.covers(&Scope::table("ns:u")));
    }

    #[test]
    fn grants_reach_users_and_groups_at_covered_scopes_only() {
        let mut p = Permissions::default();
        p.grant(&Permission {
            user: "alice".into(),
            scope: Scope::family("t", b"f"),
            actions: Actions::parse("RW").expect("codes"),
        });
        p.grant(&Permission {
            user: "@ops".into(),
            scope: Scope::Namespace("default".into()),
            actions: Actions::parse("A").expect("codes"),
        });
        let alice = subject("alice", &[]);
        let bob = subject("bob", &["ops"]);
        assert!(p.allows(&alice, Action::Read, &col("t", "f", "q")));
        assert!(!p.allows(&alice, Action::Read, &Scope::table("t")));
        assert!(!p.allows(&alice, Action::Read, &Scope::family("t", b"g")));
        assert!(p.allows_some_of_table(&alice, Action::Read, "t"));
        assert!(!p.allows_some_of_table(&alice, Action::Admin, "t"));
        assert!(p.allows(&bob, Action::Admin, &Scope::table("t")));
        assert!(!p.allows(&bob, Action::Admin, &Scope::Global));
        assert!(!p.allows(&bob, Action::Read, &Scope::table("t")));
        let cols = p
            .allowed_columns(&alice, Action::Read, "t")
            .expect("partial");
        assert_eq!(cols.len(), 1);
        assert_eq!(cols.get(&b"f"[..]), Some(&None));
        let root = Subject {
            superuser: true,
            ..subject("root", &[])
        };
        assert!(p.allows(&root, Action::Admin, &Scope::Global));
    }

    #[test]
    fn revoke_takes_some_or_all_actions() {
        let mut p = Permissions::default();
        let scope = Scope::table("t");
        p.grant(&Permission {
            user: "a".into(),
            scope: scope.clone(),
            actions: Actions::parse("rwc").expect("codes"),
        });
        assert_eq!(
            p.revoke("a", &scope, Some(Actions::parse("W").expect("codes"))),
            Some(Actions::parse("RC").expect("codes"))
        );
        assert_eq!(p.revoke("a", &scope, None), Some(Actions::NONE));
        assert!(p.list().is_empty());
        assert_eq!(p.revoke("a", &scope, None), None);
    }

    #[test]
    fn action_letters_parse_and_print_as_hbase_writes_them() {
        assert_eq!(
            Actions::parse("ca rw").map_err(|e| e.contains("' '")),
            Err(true)
        );
        assert_eq!(Actions::parse("acRW").expect("codes").to_string(), "RWCA");
        assert!(Actions::parse("").is_err());
        assert!(Actions::parse("RZ").expect_err("Z").contains("'Z'"));
    }

    #[test]
    fn records_round_trip_and_damage_is_named() {
        for scope in [
            Scope::Global,
            Scope::Namespace("ns".into()),
            Scope::table("ns:t"),
            Scope::family("t", b"f\x00"),
            col("t", "f", "\u{ff}q"),
        ] {
            let key = encode_key("@group", &scope);
            assert_eq!(decode_key(&key), Ok(("@group".to_string(), scope.clone())));
            for cut in 0..key.len() {
                assert!(decode_key(&key[..cut]).is_err(), "{scope:?} cut at {cut}");
            }
        }
        let mut longer = encode_key("u", &Scope::Global);
        longer.push(0);
        assert!(decode_key(&longer).expect_err("trailing").contains("after"));
        assert!(decode_key(&[2, 0, 1, b'u', 0])
            .expect_err("version")
            .contains("version"));
    }
}

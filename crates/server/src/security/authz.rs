//! Authorization: who a call's caller is ([`Caller`] → [`Subject`]) and whether the granted
//! permissions ([`super::acl`]) let it do what it asks. One [`Authz`] per server, shared by
//! both front ends; with `security.authorization` off every check passes at once.
//!
//! Who the caller is: the user of its client certificate; else, where `security.simple_users`
//! allows it, the user the client says it is (HBase's SIMPLE authentication: the connection
//! header's user on the HBase port, the request header's `user` on the native one); else
//! nobody, and every call is refused as unauthenticated. Superusers (configured, the user
//! running the server, the user of the server's own certificate) may do everything.
//!
//! Refusals are `ServerError::PermissionDenied` / `Unauthenticated` in HBase's wording
//! (`Insufficient permissions for user 'bob' (table=t, action=WRITE)`), and each is one line in
//! the audit log.

use super::acl::{Action, Permission, Permissions, Scope, Subject};
use super::audit::{AuditLog, Event, Record};
use crate::config::{SecurityConfig, SimpleUsers};
use crate::error::ServerError;
use bytes::Bytes;
use parking_lot::RwLock;
use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::Arc;

thread_local! {
    /// Set while a check runs on the network reactor ([`quietly`]).
    static QUIET: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` with refusals not audited: the reactor's fast paths check first and, when refused,
/// hand the call to the handler pool, whose check refuses it again and writes the one audit
/// line (no file write on the reactor, no line twice).
pub fn quietly<T>(f: impl FnOnce() -> T) -> T {
    QUIET.with(|q| q.set(true));
    let out = f();
    QUIET.with(|q| q.set(false));
    out
}

fn audit_on() -> bool {
    !QUIET.with(|q| q.get())
}

/// Who sent a call, as its connection knows it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Caller {
    /// The user the call runs as: the client certificate's, or the one the client claims —
    /// or, when `real_user` is set, the one the connection's user acts for.
    pub user: Option<Arc<str>>,
    /// Set when the connection's user (a gateway) makes the call for `user` (HBase's `doAs`,
    /// the request header's `effective_user`): the connection's own user, which
    /// `security.proxy_users` must let act for `user`.
    pub real_user: Option<Arc<str>>,
    /// The connection's user (`real_user` when set, else `user`) comes from a certificate the
    /// TLS handshake checked.
    pub certified: bool,
    /// The client's address.
    pub peer: Option<IpAddr>,
    /// `native` or `hbase`.
    pub protocol: &'static str,
}

impl Caller {
    /// A caller inside the server (the master's own calls, tests): a superuser.
    pub const fn internal() -> Caller {
        Caller {
            user: None,
            real_user: None,
            certified: true,
            peer: None,
            protocol: "internal",
        }
    }

    /// Takes the user a request header claims, for a connection without a certificate
    /// (HBase's SIMPLE: the latest claim names the connection's user).
    pub fn claim(&mut self, user: &str) {
        if !self.certified && !user.is_empty() && self.user.as_deref() != Some(user) {
            self.user = Some(Arc::from(user));
        }
    }

    /// The caller of one request that acts for `effective` (its header's `effective_user`):
    /// this connection's caller itself when `effective` is empty or its own user, else one
    /// whose `user` is `effective` and whose `real_user` is the connection's.
    pub fn acting_for(&self, effective: &str) -> Caller {
        if effective.is_empty() || self.user.as_deref() == Some(effective) {
            return self.clone();
        }
        Caller {
            user: Some(Arc::from(effective)),
            real_user: self.user.clone(),
            ..self.clone()
        }
    }
}

/// What a caller may read of a table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadView {
    /// Everything.
    All,
    /// Only these families (`None`: all of it) or columns.
    Columns(BTreeMap<Bytes, Option<Vec<Bytes>>>),
}

/// A server's authorization.
pub struct Authz {
    enabled: bool,
    superusers: Vec<String>,
    /// user → the groups it is in.
    groups: HashMap<String, Vec<String>>,
    simple: SimpleUsers,
    /// Who may act for whom: a proxy user → the users, `@groups` or `*` it may act for.
    proxy_users: HashMap<String, Vec<String>>,
    permissions: RwLock<Permissions>,
    audit: Option<Arc<AuditLog>>,
}

impl Authz {
    /// From the configuration; `own_users` are superusers too (the process's user, the user
    /// of the server's certificate). The audit log is opened when authorization is on.
    pub fn new(
        config: &SecurityConfig,
        own_users: Vec<String>,
        audit_path: &std::path::Path,
    ) -> Result<Authz, String> {
        let mut groups: HashMap<String, Vec<String>> = HashMap::new();
        for (group, members) in &config.groups {
            for m in members {
                groups.entry(m.clone()).or_default().push(group.clone());
            }
        }
        let mut superusers = config.superusers.clone();
        superusers.extend(own_users);
        let audit = if config.authorization {
            Some(Arc::new(AuditLog::open(audit_path)?))
        } else {
            None
        };
        Ok(Authz {
            enabled: config.authorization,
            superusers,
            groups,
            simple: config.simple_users,
            proxy_users: config
                .proxy_users
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            permissions: RwLock::new(Permissions::default()),
            audit,
        })
    }

    /// Authorization off: every check passes.
    pub fn disabled() -> Authz {
        Authz {
            enabled: false,
            superusers: Vec::new(),
            groups: HashMap::new(),
            simple: SimpleUsers::Loopback,
            proxy_users: HashMap::new(),
            permissions: RwLock::new(Permissions::default()),
            audit: None,
        }
    }

    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// The audit log, when authorization is on (the TLS listeners write their refused
    /// handshakes to it too).
    pub fn audit_log(&self) -> Option<Arc<AuditLog>> {
        self.audit.clone()
    }

    /// Replaces the permissions (loaded from meta).
    pub fn load(&self, list: Vec<Permission>) {
        *self.permissions.write() = Permissions::from_list(list);
    }

    /// The permissions now.
    pub fn permissions(&self) -> Permissions {
        self.permissions.read().clone()
    }

    /// Changes the permissions with `f` (after meta has the change).
    pub fn update<T>(&self, f: impl FnOnce(&mut Permissions) -> T) -> T {
        f(&mut self.permissions.write())
    }

    /// The configured superusers that are users (not `@groups`).
    pub fn superuser_names(&self) -> Vec<String> {
        self.superusers
            .iter()
            .filter(|s| !s.starts_with('@'))
            .cloned()
            .collect()
    }

    /// The subject a named user would be (for checking someone else's permissions).
    pub fn subject_of(&self, user: &str) -> Subject {
        let groups = self.groups.get(user).cloned().unwrap_or_default();
        let superuser = self.is_superuser(user, &groups);
        Subject {
            user: user.to_string(),
            groups,
            superuser,
        }
    }

    fn is_superuser(&self, user: &str, groups: &[String]) -> bool {
        self.superusers.iter().any(|s| match s.strip_prefix('@') {
            Some(g) => groups.iter().any(|mine| mine == g),
            None => s == user,
        })
    }

    /// Passes when authorization is off or the server knows who `caller` is; else refused
    /// as unauthenticated (audited). The gate every call passes before anything is read: an
    /// unauthenticated caller is told nothing, not even where a region is.
    pub fn authenticate(&self, caller: &Caller) -> Result<(), ServerError> {
        if !self.enabled {
            return Ok(());
        }
        self.authenticated_user(caller).map(|_| ())
    }

    /// The subject of `caller`, or why it has none (audited).
    pub fn subject(&self, caller: &Caller) -> Result<Subject, ServerError> {
        if caller.protocol == "internal" {
            return Ok(Subject {
                user: "(server)".into(),
                groups: Vec::new(),
                superuser: true,
            });
        }
        let user = self.authenticated_user(caller)?;
        Ok(self.subject_of(user))
    }

    /// The user the server takes `caller` to be (none for the server's own calls), or why it
    /// takes none (audited): the connection's user, authenticated; and when it acts for
    /// another (`real_user`), that other, if `security.proxy_users` lets it.
    fn authenticated_user<'a>(&self, caller: &'a Caller) -> Result<&'a str, ServerError> {
        if caller.protocol == "internal" {
            return Ok("(server)");
        }
        let connection_user = caller.real_user.as_deref().or(caller.user.as_deref());
        let Some(user) = connection_user else {
            return Err(self.unauthenticated(
                caller,
                "this server checks permissions and does not know who you are: present a client certificate (TLS with a client CA), or a user where security.simple_users lets the server take your word",
            ));
        };
        if !caller.certified {
            let taken = match self.simple {
                SimpleUsers::Always => true,
                SimpleUsers::Never => false,
                SimpleUsers::Loopback => caller.peer.is_some_and(|p| p.is_loopback()),
            };
            if !taken {
                return Err(self.unauthenticated(
                    caller,
                    &format!(
                        "the server does not take your word that you are '{user}' (security.simple_users = {:?}): present a client certificate",
                        self.simple
                    ),
                ));
            }
        }
        let Some(real) = caller.real_user.as_deref() else {
            return Ok(user);
        };
        let Some(effective) = caller.user.as_deref() else {
            return Ok(real);
        };
        if !self.may_act_for(real, effective) {
            return Err(self.unauthenticated(
                caller,
                &format!(
                    "user '{real}' may not act for '{effective}': security.proxy_users has no rule letting '{real}' act for '{effective}' (HBase's hadoop.proxyuser.{real}.users / .groups)"
                ),
            ));
        }
        Ok(effective)
    }

    /// Whether `security.proxy_users` lets `proxy` act for `user`: its list names the user,
    /// one of the user's `@groups`, or `*`.
    pub fn may_act_for(&self, proxy: &str, user: &str) -> bool {
        if proxy == user {
            return true;
        }
        let Some(allowed) = self.proxy_users.get(proxy) else {
            return false;
        };
        let groups = self.groups.get(user);
        allowed.iter().any(|a| match a.strip_prefix('@') {
            _ if a == "*" => true,
            Some(g) => groups.is_some_and(|gs| gs.iter().any(|mine| mine == g)),
            None => a == user,
        })
    }

    /// Whether `security.proxy_users` has a rule for `proxy` at all.
    pub fn is_proxy_user(&self, proxy: &str) -> bool {
        self.proxy_users.contains_key(proxy)
    }

    /// Whether `user` is a superuser (configured, through a group, or one of the server's own).
    pub fn is_superuser_name(&self, user: &str) -> bool {
        self.subject_of(user).superuser
    }

    /// Passes when `caller` may do `action` at `scope`; `what` names the call in refusals.
    pub fn require(
        &self,
        caller: &Caller,
        action: Action,
        scope: &Scope,
        what: &str,
    ) -> Result<(), ServerError> {
        self.require_any(caller, &[action], scope, what)
    }

    /// Passes when `caller` may do any one of `actions` at `scope` (HBase's "ADMIN or CREATE").
    pub fn require_any(
        &self,
        caller: &Caller,
        actions: &[Action],
        scope: &Scope,
        what: &str,
    ) -> Result<(), ServerError> {
        if !self.enabled {
            return Ok(());
        }
        let who = self.subject(caller)?;
        let perms = self.permissions.read();
        if actions.iter().any(|a| perms.allows(&who, *a, scope)) {
            return Ok(());
        }
        drop(perms);
        let names: Vec<&str> = actions.iter().map(|a| a.name()).collect();
        Err(self.denied(caller, &who.user, &names.join("|"), scope, what))
    }

    /// Whether `caller` may do `action` at `scope`; unlike [`Authz::require`] a "no" is not a
    /// refusal and is not audited.
    pub fn allows(&self, caller: &Caller, action: Action, scope: &Scope) -> bool {
        if !self.enabled {
            return true;
        }
        quietly(|| self.subject(caller))
            .is_ok_and(|who| self.permissions.read().allows(&who, action, scope))
    }

    /// ADMIN or CREATE on `table`: HBase's rule for a table's DDL, flushes and compactions.
    pub fn require_table_admin(
        &self,
        caller: &Caller,
        table: &str,
        what: &str,
    ) -> Result<(), ServerError> {
        self.require_any(
            caller,
            &[Action::Admin, Action::Create],
            &Scope::table(table),
            what,
        )
    }

    /// CREATE or ADMIN on the namespace of `table` (or globally): creating it.
    pub fn require_create(&self, caller: &Caller, table: &str) -> Result<(), ServerError> {
        self.require_any(
            caller,
            &[Action::Create, Action::Admin],
            &Scope::Namespace(super::acl::namespace_of(table).to_string()),
            "create a table",
        )
    }

    /// Passes when `caller` may write every column in `columns` of `table`: (family,
    /// qualifier), the qualifier `None` for what touches the whole family (a family delete).
    pub fn require_write<'a>(
        &self,
        caller: &Caller,
        table: &str,
        columns: impl IntoIterator<Item = (&'a [u8], Option<&'a [u8]>)>,
        what: &str,
    ) -> Result<(), ServerError> {
        if !self.enabled {
            return Ok(());
        }
        let who = self.subject(caller)?;
        let perms = self.permissions.read();
        let table_scope = Scope::table(table);
        if perms.allows(&who, Action::Write, &table_scope) {
            return Ok(());
        }
        let mut any = false;
        for (f, q) in columns {
            any = true;
            let family = Scope::family(table, f);
            if perms.allows(&who, Action::Write, &family) {
                continue;
            }
            // A column's grant covers writes of that column (not a whole-family delete).
            let denied_at = match q {
                Some(q) => {
                    let column = Scope::Table {
                        table: table.to_string(),
                        family: Some(Bytes::copy_from_slice(f)),
                        qualifier: Some(Bytes::copy_from_slice(q)),
                    };
                    if perms.allows(&who, Action::Write, &column) {
                        continue;
                    }
                    column
                }
                None => family,
            };
            drop(perms);
            return Err(self.denied(caller, &who.user, "WRITE", &denied_at, what));
        }
        if any {
            return Ok(());
        }
        // A whole-row delete touches every family: it needs the whole table.
        drop(perms);
        Err(self.denied(caller, &who.user, "WRITE", &table_scope, what))
    }

    /// What `caller` may read of `table`: all of it, some families or columns (the rest of a
    /// read's cells are left out, as HBase's access filter does), or nothing (refused).
    pub fn read_view(
        &self,
        caller: &Caller,
        table: &str,
        what: &str,
    ) -> Result<ReadView, ServerError> {
        if !self.enabled {
            return Ok(ReadView::All);
        }
        let who = self.subject(caller)?;
        let perms = self.permissions.read();
        match perms.allowed_columns(&who, Action::Read, table) {
            None => Ok(ReadView::All),
            Some(cols) if !cols.is_empty() => Ok(ReadView::Columns(cols)),
            Some(_) => {
                drop(perms);
                Err(self.denied(caller, &who.user, "READ", &Scope::table(table), what))
            }
        }
    }

    /// Whether `caller` has any permission on `table` (what listing tables shows).
    pub fn sees_table(&self, caller: &Caller, table: &str) -> bool {
        if !self.enabled {
            return true;
        }
        let Ok(who) = self.subject(caller) else {
            return false;
        };
        let perms = self.permissions.read();
        Action::ALL
            .iter()
            .any(|a| perms.allows_some_of_table(&who, *a, table))
    }

    fn denied(
        &self,
        caller: &Caller,
        user: &str,
        action: &str,
        scope: &Scope,
        what: &str,
    ) -> ServerError {
        let message = format!(
            "Insufficient permissions for user '{user}' ({scope}, action={action}) to {what}"
        );
        if let Some(log) = self.audit.as_ref().filter(|_| audit_on()) {
            log.record(&Record {
                event: Event::Denied,
                user: Some(user),
                real_user: caller.real_user.as_deref(),
                address: caller.peer,
                protocol: caller.protocol,
                action,
                object: &scope.to_string(),
                reason: &message,
            });
        }
        ServerError::PermissionDenied(message)
    }

    fn unauthenticated(&self, caller: &Caller, why: &str) -> ServerError {
        if let Some(log) = self.audit.as_ref().filter(|_| audit_on()) {
            log.record(&Record {
                event: Event::AuthenticationFailed,
                user: caller.user.as_deref(),
                real_user: caller.real_user.as_deref(),
                address: caller.peer,
                protocol: caller.protocol,
                action: "",
                object: "",
                reason: why,
            });
        }
        ServerError::Unauthenticated(why.to_string())
    }

    /// Records an authentication failure the front end saw (a refused TLS handshake is in the
    /// server log; this is for failures past it).
    pub fn audit_authentication_failure(&self, caller: &Caller, why: &str) {
        let _ = self.unauthenticated(caller, why);
    }
}

/// The user running this process: `$USER`, else `$LOGNAME`, else `uid-N`. A superuser of its
/// own server, and who a cluster's servers say they are to each other without certificates.
pub fn process_user() -> Option<String> {
    for var in ["USER", "LOGNAME"] {
        if let Ok(u) = std::env::var(var) {
            if !u.is_empty() {
                return Some(u);
            }
        }
    }
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let uid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))?
        .split_whitespace()
        .next()?;
    Some(format!("uid-{uid}"))
}

/// Narrows a read's columns to what `view` lets its caller see: no columns (every family)
/// becomes the visible families and columns; a family asked for whole keeps only its visible
/// columns; columns outside the view go. False when nothing is left to read.
pub fn restrict(columns: &mut Vec<cellar_model::query::Column>, view: &ReadView) -> bool {
    use cellar_model::query::Column;
    let ReadView::Columns(visible) = view else {
        return true;
    };
    let whole = |f: &Bytes, quals: &Option<Vec<Bytes>>| -> Vec<Column> {
        match quals {
            None => vec![Column {
                family: f.clone(),
                qualifier: None,
            }],
            Some(qs) => qs
                .iter()
                .map(|q| Column {
                    family: f.clone(),
                    qualifier: Some(q.clone()),
                })
                .collect(),
        }
    };
    if columns.is_empty() {
        *columns = visible.iter().flat_map(|(f, q)| whole(f, q)).collect();
        return !columns.is_empty();
    }
    let asked = std::mem::take(columns);
    for c in asked {
        match (visible.get(&c.family), &c.qualifier) {
            (None, _) => {}
            (Some(None), _) => columns.push(c),
            (Some(Some(qs)), Some(q)) => {
                if qs.contains(q) {
                    columns.push(c);
                }
            }
            (Some(quals @ Some(_)), None) => columns.extend(whole(&c.family, quals)),
        }
    }
    !columns.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::security::acl::Actions;
    use cellar_model::query::Column;

    fn authz(simple: SimpleUsers) -> Authz {
        let config = SecurityConfig {
            authorization: true,
            superusers: vec!["@admins".into()],
            groups: [("admins".to_string(), vec!["root".to_string()])].into(),
            simple_users: simple,
            ..SecurityConfig::default()
        };
        let dir = tempfile::tempdir().expect("tmp");
        let a = Authz::new(
            &config,
            vec!["server".into()],
            &dir.path().join("audit.log"),
        )
        .expect("authz");
        a.load(vec![Permission {
            user: "alice".into(),
            scope: Scope::family("t", b"f"),
            actions: Actions::parse("RW").expect("codes"),
        }]);
        a
    }

    fn caller(user: Option<&str>, certified: bool, peer: [u8; 4]) -> Caller {
        Caller {
            user: user.map(Arc::from),
            real_user: None,
            certified,
            peer: Some(IpAddr::from(peer)),
            protocol: "native",
        }
    }

    #[test]
    fn users_are_taken_from_certificates_or_where_simple_users_allows() {
        let a = authz(SimpleUsers::Loopback);
        let never = authz(SimpleUsers::Never);
        let read = |z: &Authz, user: Option<&str>, certified: bool, peer: [u8; 4]| {
            z.require(
                &caller(user, certified, peer),
                Action::Read,
                &Scope::family("t", b"f"),
                "get",
            )
        };
        let admin = |user: &str| {
            a.require(
                &caller(Some(user), true, [10, 0, 0, 1]),
                Action::Admin,
                &Scope::Global,
                "x",
            )
        };
        assert!(read(&a, Some("alice"), true, [10, 0, 0, 1]).is_ok());
        assert!(read(&a, Some("alice"), false, [127, 0, 0, 1]).is_ok());
        let far = read(&a, Some("alice"), false, [10, 0, 0, 1]);
        assert!(
            matches!(far, Err(ServerError::Unauthenticated(_))),
            "{far:?}"
        );
        let nobody = read(&a, None, false, [127, 0, 0, 1]);
        assert!(matches!(nobody, Err(ServerError::Unauthenticated(_))));
        assert!(read(&never, Some("alice"), false, [127, 0, 0, 1]).is_err());
        // Superusers through a group, and the server's own user.
        assert!(admin("root").is_ok());
        assert!(admin("server").is_ok());
    }

    #[test]
    fn a_proxy_acts_only_for_whom_its_rule_names() {
        let dir = tempfile::tempdir().expect("tmp");
        let config = SecurityConfig {
            authorization: true,
            groups: [("ops".to_string(), vec!["carol".to_string()])].into(),
            proxy_users: [
                (
                    "gw".to_string(),
                    vec!["alice".to_string(), "@ops".to_string()],
                ),
                ("any".to_string(), vec!["*".to_string()]),
            ]
            .into(),
            ..SecurityConfig::default()
        };
        let log = dir.path().join("audit.log");
        let a = Authz::new(&config, vec!["server".into()], &log).expect("authz");
        a.load(vec![Permission {
            user: "alice".into(),
            scope: Scope::table("t"),
            actions: Actions::parse("R").expect("codes"),
        }]);
        let read = |c: &Caller| a.require(c, Action::Read, &Scope::table("t"), "get");
        let gw = caller(Some("gw"), true, [10, 0, 0, 1]);
        // Acting for alice: alice's grants, alice's name.
        let for_alice = gw.acting_for("alice");
        assert_eq!(for_alice.user.as_deref(), Some("alice"));
        assert_eq!(for_alice.real_user.as_deref(), Some("gw"));
        assert!(read(&for_alice).is_ok());
        assert_eq!(
            a.subject(&for_alice).expect("alice").user,
            "alice",
            "checked as alice"
        );
        // Through a group; bob is not named, so gw may not act for him.
        assert!(a.authenticate(&gw.acting_for("carol")).is_ok());
        let bob = a.authenticate(&gw.acting_for("bob"));
        let Err(ServerError::Unauthenticated(why)) = bob else {
            panic!("{bob:?}")
        };
        assert!(why.contains("'gw' may not act for 'bob'"), "{why}");
        // Nobody without a rule acts for anyone, a superuser included.
        let server = caller(Some("server"), true, [10, 0, 0, 1]);
        assert!(a.authenticate(&server.acting_for("alice")).is_err());
        // `*`; and acting for oneself needs no rule.
        let any = caller(Some("any"), true, [10, 0, 0, 1]);
        assert!(a.authenticate(&any.acting_for("whoever")).is_ok());
        assert_eq!(server.acting_for("server"), server);
        // A proxy's own word is taken only where simple_users allows it.
        let far = caller(Some("gw"), false, [10, 0, 0, 1]).acting_for("alice");
        assert!(a.authenticate(&far).is_err());
        // A denied call of alice's, made by gw, is audited with both names.
        assert!(a
            .require(&for_alice, Action::Write, &Scope::table("t"), "put")
            .is_err());
        let text = std::fs::read_to_string(&log).expect("audit");
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).expect("json"))
            .collect();
        assert!(lines.iter().any(|l| l["user"] == "bob"
            && l["real_user"] == "gw"
            && l["event"] == "authentication_failed"));
        assert!(lines
            .iter()
            .any(|l| l["user"] == "alice" && l["real_user"] == "gw" && l["event"] == "denied"));
    }

    #[test]
    fn refusals_name_user_scope_and_action() {
        let a = authz(SimpleUsers::Loopback);
        let bob = caller(Some("bob"), true, [127, 0, 0, 1]);
        let e = a
            .require(&bob, Action::Write, &Scope::table("t"), "put")
            .expect_err("bob has nothing");
        assert_eq!(
            e.to_string(),
            "Insufficient permissions for user 'bob' (table=t, action=WRITE) to put"
        );
        let alice = caller(Some("alice"), true, [127, 0, 0, 1]);
        let q: Option<&[u8]> = Some(b"q");
        assert!(a
            .require_write(&alice, "t", [(&b"f"[..], q)], "put")
            .is_ok());
        assert!(a
            .require_write(&alice, "t", [(&b"f"[..], q), (&b"g"[..], q)], "put")
            .is_err());
        // A column's grant covers that column, not the family's delete.
        a.load(vec![Permission {
            user: "carl".into(),
            scope: Scope::Table {
                table: "t".into(),
                family: Some(Bytes::from_static(b"f")),
                qualifier: Some(Bytes::from_static(b"q")),
            },
            actions: Actions::parse("W").expect("codes"),
        }]);
        let carl = caller(Some("carl"), true, [127, 0, 0, 1]);
        assert!(a.require_write(&carl, "t", [(&b"f"[..], q)], "put").is_ok());
        assert!(a
            .require_write(&carl, "t", [(&b"f"[..], Some(&b"o"[..]))], "put")
            .is_err());
        assert!(a
            .require_write(&carl, "t", [(&b"f"[..], None)], "delete")
            .is_err());
        assert!(a
            .require_write(&alice, "t", std::iter::empty(), "delete the row")
            .is_err());
    }

    #[test]
    fn reads_are_narrowed_to_what_may_be_seen() {
        let a = authz(SimpleUsers::Loopback);
        let alice = caller(Some("alice"), true, [127, 0, 0, 1]);
        let view = a.read_view(&alice, "t", "get").expect("some of it");
        let col = |f: &str, q: Option<&str>| Column {
            family: Bytes::copy_from_slice(f.as_bytes()),
            qualifier: q.map(|q| Bytes::copy_from_slice(q.as_bytes())),
        };
        let mut all = Vec::new();
        assert!(restrict(&mut all, &view));
        assert_eq!(all, vec![col("f", None)]);
        let mut mixed = vec![col("f", Some("q")), col("g", None)];
        assert!(restrict(&mut mixed, &view));
        assert_eq!(mixed, vec![col("f", Some("q"))]);
        let mut none = vec![col("g", None)];
        assert!(!restrict(&mut none, &view));
        let bob = caller(Some("bob"), true, [127, 0, 0, 1]);
        assert!(matches!(
            a.read_view(&bob, "t", "get"),
            Err(ServerError::PermissionDenied(_))
        ));
    }
}

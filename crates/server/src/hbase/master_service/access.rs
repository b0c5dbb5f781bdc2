//! MasterService's security calls, as HBase 2.6's Java client sends them for
//! `AccessControlClient` / `Admin.grant`, `revoke`, `getUserPermissions`,
//! `hasUserPermissions`, and the shell's `security_available?` (`getSecurityCapabilities`).
//! Grants go to the same store and checks as the native protocol's
//! ([`crate::catalog`]'s permissions, [`crate::security::Authz`]).

use super::Call;
use crate::hbase::{message, names, CallCtx, HbaseError, HbaseService, Reply, Request};
use crate::security::acl::{Action, Actions, Permission, Scope, Subject};
use bytes::Bytes;
use cellar_proto::hbase;
use cellar_proto::hbase::permission::{Action as HAction, Type as HType};

type Result<T> = std::result::Result<T, HbaseError>;

/// Grant: a user's permission at a scope, merged with what they hold there or replacing it.
#[derive(Debug, Clone)]
pub(crate) struct Grant {
    pub(crate) user: String,
    pub(crate) scope: Scope,
    pub(crate) actions: Actions,
    pub(crate) merge: bool,
}

impl Grant {
    pub(crate) fn decode(param: Bytes, _cellblock: Bytes) -> Result<Request> {
        let req: hbase::GrantRequest = message(param, "GrantRequest")?;
        let (user, scope, actions) = user_permission_from(&req.user_permission)?;
        if actions.is_empty() {
            return Err(HbaseError::do_not_retry(format!(
                "No actions associated with user '{user}'"
            )));
        }
        Ok(Grant {
            user,
            scope,
            actions,
            merge: req.merge_existing_permissions.unwrap_or(false),
        })
        .map(|call| Call::Grant(call).into())
    }

    pub(crate) fn execute(self, svc: &HbaseService, ctx: &CallCtx) -> Result<Reply> {
        let Grant {
            user,
            scope,
            actions,
            merge,
        } = self;
        if !merge {
            // Without merging, the grant replaces what the user held there.
            let held = svc
                .rs
                .authz
                .permissions()
                .list()
                .into_iter()
                .any(|p| p.user == user && p.scope == scope);
            if held {
                svc.master()?.revoke(&ctx.caller, &user, &scope, None)?;
            }
        }
        svc.master()?.grant(
            &ctx.caller,
            &Permission {
                user,
                scope,
                actions,
            },
        )?;
        Ok(Reply::message(&hbase::GrantResponse { proc_id: None }))
    }
}

/// Revoke: some of a user's actions at a scope, or (none named) all of them.
#[derive(Debug, Clone)]
pub(crate) struct Revoke {
    pub(crate) user: String,
    pub(crate) scope: Scope,
    pub(crate) actions: Option<Actions>,
}

impl Revoke {
    pub(crate) fn decode(param: Bytes, _cellblock: Bytes) -> Result<Request> {
        let req: hbase::RevokeRequest = message(param, "RevokeRequest")?;
        let (user, scope, actions) = user_permission_from(&req.user_permission)?;
        Ok(Call::Revoke(Revoke {
            user,
            scope,
            actions: (!actions.is_empty()).then_some(actions),
        })
        .into())
    }

    pub(crate) fn execute(self, svc: &HbaseService, ctx: &CallCtx) -> Result<Reply> {
        svc.master()?
            .revoke(&ctx.caller, &self.user, &self.scope, self.actions)?;
        Ok(Reply::message(&hbase::RevokeResponse { proc_id: None }))
    }
}

/// GetUserPermissions: the grants at one level (global, a namespace, a table), of one user
/// or of all.
#[derive(Debug, Clone)]
pub(crate) struct GetUserPermissions {
    pub(crate) user: Option<String>,
    pub(crate) scope: Scope,
}

impl GetUserPermissions {
    pub(crate) fn decode(param: Bytes, _cellblock: Bytes) -> Result<Request> {
        let req: hbase::GetUserPermissionsRequest = message(param, "GetUserPermissionsRequest")?;
        let user = req
            .user_name
            .as_ref()
            .filter(|u| !u.is_empty())
            .map(|u| String::from_utf8_lossy(u).into_owned());
        let kind = req.r#type.and_then(|t| HType::try_from(t).ok());
        let scope = match kind {
            Some(HType::Namespace) => {
                Scope::Namespace(text(req.namespace_name.as_deref(), "namespace")?)
            }
            Some(HType::Table) => {
                let t = req.table_name.as_ref().ok_or_else(|| {
                    HbaseError::do_not_retry(
                        "GetUserPermissionsRequest of type Table names no table",
                    )
                })?;
                Scope::Table {
                    table: names::table_from_pb(t)?,
                    family: req.column_family.clone().filter(|f| !f.is_empty()),
                    qualifier: req.column_qualifier.clone().filter(|q| !q.is_empty()),
                }
            }
            _ => Scope::Global,
        };
        Ok(Call::GetUserPermissions(GetUserPermissions { user, scope }).into())
    }

    pub(crate) fn execute(self, svc: &HbaseService, ctx: &CallCtx) -> Result<Reply> {
        let GetUserPermissions { user, scope } = self;
        let mut list =
            svc.master()?
                .user_permissions(&ctx.caller, Some(&scope), user.as_deref())?;
        // Each type lists its own level: global grants for Global, a namespace's for Namespace.
        list.retain(|p| p.scope.object() == scope.object());
        let mut out: Vec<hbase::UserPermission> = list.iter().map(user_permission_to).collect();
        if scope == Scope::Global && user.is_none() {
            // As HBase's master does: superusers are listed as global holders of everything.
            for su in svc.rs.authz.superuser_names() {
                out.push(user_permission_to(&Permission {
                    user: su,
                    scope: Scope::Global,
                    actions: Actions::of(&Action::ALL),
                }));
            }
        }
        Ok(Reply::message(&hbase::GetUserPermissionsResponse {
            user_permission: out,
        }))
    }
}

/// HasUserPermissions: whether the caller (or, for an admin, another user) holds each
/// permission asked about.
#[derive(Debug, Clone)]
pub(crate) struct HasUserPermissions {
    /// The user asked about; none: the caller.
    pub(crate) user: Option<String>,
    /// The permissions asked about; a malformed one fails the call after the caller is
    /// checked.
    pub(crate) permissions: Result<Vec<(Scope, Actions)>>,
}

impl HasUserPermissions {
    pub(crate) fn decode(param: Bytes, _cellblock: Bytes) -> Result<Request> {
        let req: hbase::HasUserPermissionsRequest = message(param, "HasUserPermissionsRequest")?;
        Ok(Call::HasUserPermissions(HasUserPermissions {
            user: req
                .user_name
                .as_ref()
                .filter(|u| !u.is_empty())
                .map(|u| String::from_utf8_lossy(u).into_owned()),
            permissions: req.permission.iter().map(permission_from).collect(),
        })
        .into())
    }

    pub(crate) fn execute(self, svc: &HbaseService, ctx: &CallCtx) -> Result<Reply> {
        let me = svc.rs.authz.subject(&ctx.caller)?;
        let who: Subject = match self.user {
            Some(u) if u != me.user => {
                // Asking about someone else needs ADMIN (globally: the check spans scopes).
                svc.rs.authz.require(
                    &ctx.caller,
                    Action::Admin,
                    &Scope::Global,
                    "check another user's permissions",
                )?;
                svc.rs.authz.subject_of(&u)
            }
            _ => me,
        };
        let perms = svc.rs.authz.permissions();
        let answers = self
            .permissions?
            .iter()
            .map(|(scope, actions)| {
                !svc.rs.authz.enabled() || actions.iter().all(|a| perms.allows(&who, a, scope))
            })
            .collect();
        Ok(Reply::message(&hbase::HasUserPermissionsResponse {
            has_user_permission: answers,
        }))
    }
}

/// getSecurityCapabilities: SIMPLE authentication, and authorization when it is on.
#[derive(Debug, Clone)]
pub(crate) struct SecurityCapabilities;

impl SecurityCapabilities {
    pub(crate) fn decode(param: Bytes, _cellblock: Bytes) -> Result<Request> {
        message::<hbase::SecurityCapabilitiesRequest>(param, "SecurityCapabilitiesRequest")?;
        Ok(Call::SecurityCapabilities(SecurityCapabilities).into())
    }

    pub(crate) fn execute(self, svc: &HbaseService) -> Result<Reply> {
        use hbase::security_capabilities_response::Capability;
        let mut caps = vec![Capability::SimpleAuthentication as i32];
        if svc.rs.authz.enabled() {
            caps.push(Capability::Authorization as i32);
        }
        Ok(Reply::message(&hbase::SecurityCapabilitiesResponse {
            capabilities: caps,
        }))
    }
}

fn text(b: Option<&[u8]>, what: &str) -> Result<String> {
    let b = b
        .filter(|b| !b.is_empty())
        .ok_or_else(|| HbaseError::do_not_retry(format!("the permission names no {what}")))?;
    String::from_utf8(b.to_vec())
        .map_err(|_| HbaseError::do_not_retry(format!("the permission's {what} is not UTF-8")))
}

fn actions_from(list: &[i32]) -> Result<Actions> {
    let mut out = Actions::NONE;
    for a in list {
        let a = match HAction::try_from(*a) {
            Ok(HAction::Read) => Action::Read,
            Ok(HAction::Write) => Action::Write,
            Ok(HAction::Exec) => Action::Exec,
            Ok(HAction::Create) => Action::Create,
            Ok(HAction::Admin) => Action::Admin,
            Err(_) => {
                return Err(HbaseError::do_not_retry(format!(
                    "unknown permission action {a}"
                )))
            }
        };
        out = out.union(Actions::of(&[a]));
    }
    Ok(out)
}

fn actions_to(actions: Actions) -> Vec<i32> {
    actions
        .iter()
        .map(|a| match a {
            Action::Read => HAction::Read,
            Action::Write => HAction::Write,
            Action::Exec => HAction::Exec,
            Action::Create => HAction::Create,
            Action::Admin => HAction::Admin,
        } as i32)
        .collect()
}

/// A permission's scope and actions.
fn permission_from(p: &hbase::Permission) -> Result<(Scope, Actions)> {
    match HType::try_from(p.r#type) {
        Ok(HType::Global) => Ok((
            Scope::Global,
            actions_from(p.global_permission.as_ref().map_or(&[][..], |g| &g.action))?,
        )),
        Ok(HType::Namespace) => {
            let n = p.namespace_permission.as_ref().ok_or_else(|| {
                HbaseError::do_not_retry("a namespace permission without its namespace")
            })?;
            Ok((
                Scope::Namespace(text(n.namespace_name.as_deref(), "namespace")?),
                actions_from(&n.action)?,
            ))
        }
        Ok(HType::Table) => {
            let t = p
                .table_permission
                .as_ref()
                .ok_or_else(|| HbaseError::do_not_retry("a table permission without its table"))?;
            let table = t
                .table_name
                .as_ref()
                .ok_or_else(|| HbaseError::do_not_retry("a table permission names no table"))?;
            let family = t.family.clone().filter(|f| !f.is_empty());
            let qualifier = t.qualifier.clone().filter(|q| !q.is_empty());
            if qualifier.is_some() && family.is_none() {
                return Err(HbaseError::do_not_retry(
                    "a permission's qualifier needs its family",
                ));
            }
            Ok((
                Scope::Table {
                    table: names::table_from_pb(table)?,
                    family,
                    qualifier,
                },
                actions_from(&t.action)?,
            ))
        }
        Err(_) => Err(HbaseError::do_not_retry(format!(
            "unknown permission type {}",
            p.r#type
        ))),
    }
}

fn user_permission_from(up: &hbase::UserPermission) -> Result<(String, Scope, Actions)> {
    let user = String::from_utf8(up.user.to_vec())
        .map_err(|_| HbaseError::do_not_retry("the permission's user is not UTF-8"))?;
    let (scope, actions) = permission_from(&up.permission)?;
    Ok((user, scope, actions))
}

fn user_permission_to(p: &Permission) -> hbase::UserPermission {
    let action = actions_to(p.actions);
    let permission = match &p.scope {
        Scope::Global => hbase::Permission {
            r#type: HType::Global as i32,
            global_permission: Some(hbase::GlobalPermission { action }),
            ..Default::default()
        },
        Scope::Namespace(ns) => hbase::Permission {
            r#type: HType::Namespace as i32,
            namespace_permission: Some(hbase::NamespacePermission {
                namespace_name: Some(Bytes::from(ns.clone())),
                action,
            }),
            ..Default::default()
        },
        Scope::Table {
            table,
            family,
            qualifier,
        } => hbase::Permission {
            r#type: HType::Table as i32,
            table_permission: Some(hbase::TablePermission {
                table_name: Some(names::table_to_pb(table)),
                family: family.clone(),
                qualifier: qualifier.clone(),
                action,
            }),
            ..Default::default()
        },
    };
    hbase::UserPermission {
        user: Bytes::from(p.user.clone()),
        permission,
    }
}

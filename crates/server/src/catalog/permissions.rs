//! Granting, revoking and listing permissions (HBase's `grant`, `revoke`, `user_permission`):
//! stored in meta first (`crate::meta`, the `@acl/` rows), then in the server's
//! [`crate::security::Authz`]. Changing a scope's grants needs ADMIN there (a global ADMIN
//! may change any); listing them too, except a user's own.

use crate::error::ServerError;
use crate::master::Master;
use crate::security::acl::{Action, Actions, Permission, Scope};
use crate::security::Caller;

impl Master {
    /// Adds `perm`'s actions to what its user holds at its scope.
    pub fn grant(&self, caller: &Caller, perm: &Permission) -> Result<(), ServerError> {
        self.check_grant_target(&perm.user, &perm.scope)?;
        self.rs
            .authz
            .require(caller, Action::Admin, &admin_scope(&perm.scope), "grant")?;
        let _admin = self.rs.admin.lock();
        let held = self
            .rs
            .authz
            .permissions()
            .list()
            .into_iter()
            .find(|p| p.user == perm.user && p.scope == perm.scope)
            .map_or(Actions::NONE, |p| p.actions);
        let merged = held.union(perm.actions);
        self.rs
            .meta()?
            .put_permission(&perm.user, &perm.scope, merged)?;
        self.rs.authz.update(|p| p.grant(perm));
        tracing::info!(user = %perm.user, scope = %perm.scope, actions = %merged, by = ?caller.user, "granted");
        Ok(())
    }

    /// Takes `actions` (all when `None`) from what `user` holds at exactly `scope`.
    pub fn revoke(
        &self,
        caller: &Caller,
        user: &str,
        scope: &Scope,
        actions: Option<Actions>,
    ) -> Result<(), ServerError> {
        self.rs
            .authz
            .require(caller, Action::Admin, &admin_scope(scope), "revoke")?;
        let _admin = self.rs.admin.lock();
        let mut current = self.rs.authz.permissions();
        let Some(left) = current.revoke(user, scope, actions) else {
            return Err(ServerError::invalid(format!(
                "user '{user}' holds no permission at {scope} to revoke"
            )));
        };
        self.rs.meta()?.put_permission(user, scope, left)?;
        self.rs.authz.update(|p| p.revoke(user, scope, actions));
        tracing::info!(user, scope = %scope, left = %left, by = ?caller.user, "revoked");
        Ok(())
    }

    /// The grants at and inside `scope` (all when `None`), of `user` when given. A caller
    /// without ADMIN there sees only its own.
    pub fn user_permissions(
        &self,
        caller: &Caller,
        scope: Option<&Scope>,
        user: Option<&str>,
    ) -> Result<Vec<Permission>, ServerError> {
        let wide = scope.cloned().unwrap_or(Scope::Global);
        let own = caller.user.as_deref().is_some_and(|me| user == Some(me));
        if own {
            // One's own grants, once the server knows one is who one says.
            self.rs.authz.authenticate(caller)?;
        } else {
            self.rs.authz.require(
                caller,
                Action::Admin,
                &admin_scope(&wide),
                "list permissions",
            )?;
        }
        Ok(self
            .rs
            .authz
            .permissions()
            .list()
            .into_iter()
            .filter(|p| wide.covers(&p.scope))
            .filter(|p| user.is_none_or(|u| p.user == u))
            .collect())
    }

    /// Gives the creator of a table every permission on it, as HBase does for a table's owner
    /// (with authorization on, and a caller known by name).
    pub fn grant_owner(&self, caller: &Caller, table: &str) -> Result<(), ServerError> {
        let Some(user) = caller.user.as_deref().filter(|_| self.rs.authz.enabled()) else {
            return Ok(());
        };
        let table = crate::names::canonical(table)?;
        let perm = Permission {
            user: user.to_string(),
            scope: Scope::table(&table),
            actions: Actions::of(&Action::ALL),
        };
        let _admin = self.rs.admin.lock();
        self.rs
            .meta()?
            .put_permission(&perm.user, &perm.scope, perm.actions)?;
        self.rs.authz.update(|p| p.grant(&perm));
        Ok(())
    }

    /// A grant names a user and an object that exists.
    fn check_grant_target(&self, user: &str, scope: &Scope) -> Result<(), ServerError> {
        crate::security::identity::check_user(user.trim_start_matches('@'))
            .map_err(|e| ServerError::invalid(format!("grant to {user:?}: {e}")))?;
        match scope {
            Scope::Global => Ok(()),
            Scope::Namespace(ns) => {
                if self.namespaces().contains_key(ns) {
                    Ok(())
                } else {
                    Err(ServerError::NamespaceNotFound(ns.clone()))
                }
            }
            Scope::Table { table, .. } => self.rs.describe_table(table).map(|_| ()),
        }
    }

    /// Drops every grant of a table or namespace that is gone (HBase does the same).
    pub(crate) fn forget_permissions_of(&self, scope: &Scope) -> Result<(), ServerError> {
        let object = scope.object();
        let gone = self.rs.authz.permissions().of_object(&object);
        if gone.is_empty() {
            return Ok(());
        }
        self.rs.meta()?.delete_permissions_of(scope)?;
        self.rs.authz.update(|p| {
            for g in &gone {
                p.revoke(&g.user, &g.scope, None);
            }
        });
        Ok(())
    }
}

/// Where ADMIN is needed to change grants at `scope`: a family's or column's are the table's.
fn admin_scope(scope: &Scope) -> Scope {
    match scope {
        Scope::Table { table, .. } => Scope::table(table),
        other => other.clone(),
    }
}

//! Namespaces, HBase's groups of tables. One exists when it was created (a meta row holding
//! its descriptor's configuration) or when a table is named in it; `default` and `hbase`
//! always exist. A created namespace outlives its tables; removing one needs it empty, and
//! the two built-in ones cannot be removed. Creating a table never needs its namespace
//! created first.

use crate::error::ServerError;
use crate::master::Master;
use crate::meta::NamespaceRecord;
use crate::names::{self, DEFAULT_NAMESPACE, SYSTEM_NAMESPACE};
use std::collections::BTreeMap;

/// A namespace's configuration: (key, value), sorted by key.
pub type NamespaceConfig = Vec<(String, String)>;

impl Master {
    /// Every namespace and its configuration, by name.
    pub fn namespaces(&self) -> BTreeMap<String, NamespaceConfig> {
        let mut all = self.rs.namespaces.read().clone();
        for ns in [DEFAULT_NAMESPACE, SYSTEM_NAMESPACE] {
            all.entry(ns.to_string()).or_default();
        }
        for (table, _) in self.rs.router.tables() {
            all.entry(names::split(&table).0.to_string()).or_default();
        }
        all
    }

    /// Creates namespace `name` with `configuration` (a key given twice keeps its last value).
    pub fn create_namespace(
        &self,
        name: &str,
        configuration: NamespaceConfig,
    ) -> Result<(), ServerError> {
        names::check_namespace(name)?;
        self.write_namespace(name, configuration, false)
    }

    /// Replaces the configuration of existing namespace `name`.
    pub fn modify_namespace(
        &self,
        name: &str,
        configuration: NamespaceConfig,
    ) -> Result<(), ServerError> {
        self.write_namespace(name, configuration, true)
    }

    /// Removes namespace `name`, which must exist, hold no table and not be built in.
    pub fn delete_namespace(&self, name: &str) -> Result<(), ServerError> {
        let _admin = self.rs.admin.lock();
        self.rs.check_running()?;
        if name == DEFAULT_NAMESPACE || name == SYSTEM_NAMESPACE {
            return Err(ServerError::NamespaceConstraint(format!(
                "Reserved namespace {name} cannot be removed."
            )));
        }
        if !self.namespaces().contains_key(name) {
            return Err(ServerError::NamespaceNotFound(name.to_string()));
        }
        let tables: Vec<String> = self
            .rs
            .router
            .tables()
            .into_iter()
            .map(|(t, _)| t)
            .filter(|t| names::split(t).0 == name)
            .collect();
        if !tables.is_empty() {
            return Err(ServerError::NamespaceConstraint(format!(
                "Only empty namespaces can be removed. Namespace {name} has {} tables: {}",
                tables.len(),
                tables.join(", ")
            )));
        }
        self.rs.meta()?.delete_namespace(name)?;
        self.rs.namespaces.write().remove(name);
        self.forget_permissions_of(&crate::security::acl::Scope::Namespace(name.to_string()))?;
        Ok(())
    }

    /// Writes namespace `name`, which must exist already or must not: meta first (the commit
    /// point), then the in-memory copy.
    fn write_namespace(
        &self,
        name: &str,
        configuration: NamespaceConfig,
        existing: bool,
    ) -> Result<(), ServerError> {
        let _admin = self.rs.admin.lock();
        self.rs.check_running()?;
        match (self.namespaces().contains_key(name), existing) {
            (true, false) => return Err(ServerError::NamespaceExists(name.to_string())),
            (false, true) => return Err(ServerError::NamespaceNotFound(name.to_string())),
            _ => {}
        }
        let configuration: NamespaceConfig = configuration
            .into_iter()
            .collect::<BTreeMap<_, _>>()
            .into_iter()
            .collect();
        self.rs.meta()?.put_namespace(&NamespaceRecord {
            name: name.to_string(),
            configuration: configuration.clone(),
        })?;
        self.rs
            .namespaces
            .write()
            .insert(name.to_string(), configuration);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::error::ServerError;
    use crate::master::Master;
    use crate::region_server::RegionServer;
    use crate::ServerConfig;

    fn open(dir: &std::path::Path) -> std::sync::Arc<Master> {
        let mut config = ServerConfig {
            data_dir: dir.to_path_buf(),
            ..ServerConfig::default()
        };
        config.split.auto = false;
        Master::start(RegionServer::open(&config, "127.0.0.1:16200".into()).expect("server opens"))
    }

    fn conf(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn created_namespaces_and_their_configuration_survive_a_restart() {
        let dir = tempfile::tempdir().expect("tempdir");
        let rs = open(dir.path());
        rs.create_namespace("kept", conf(&[("b", "2"), ("a", "1"), ("b", "3")]))
            .expect("create");
        rs.create_namespace("dropped", Vec::new()).expect("create");
        rs.modify_namespace("default", conf(&[("quota", "none")]))
            .expect("the built-in namespaces can carry configuration too");
        rs.delete_namespace("dropped").expect("empty");
        rs.region_server().shutdown().expect("shutdown");
        drop(rs);

        let rs = open(dir.path());
        let all = rs.namespaces();
        assert_eq!(
            all.keys().collect::<Vec<_>>(),
            ["default", "hbase", "kept"],
            "{all:?}"
        );
        // Sorted by key, the last value of a repeated key kept.
        assert_eq!(all["kept"], conf(&[("a", "1"), ("b", "3")]));
        assert_eq!(all["default"], conf(&[("quota", "none")]));
        assert!(matches!(
            rs.create_namespace("kept", Vec::new()),
            Err(ServerError::NamespaceExists(_))
        ));
        rs.region_server().shutdown().expect("shutdown");
    }
}

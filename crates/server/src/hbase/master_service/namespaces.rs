//! Namespaces: list, describe, create, modify and delete. As in HBase, "exists", "not found"
//! and "not empty" fail the call itself.

use super::procedures::nonce_key;
use super::{namespace_not_found, Call, Result};
use crate::hbase::{message, CallCtx, HbaseError, HbaseService, Reply, Request};
use bytes::Bytes;
use cellar_proto::hbase;

/// ListNamespaceDescriptors.
#[derive(Debug, Clone)]
pub(crate) struct ListNamespaceDescriptors;

impl ListNamespaceDescriptors {
    pub(crate) fn decode(param: Bytes, _cellblock: Bytes) -> Result<Request> {
        message::<hbase::ListNamespaceDescriptorsRequest>(param, "ListNamespaceDescriptors")?;
        Ok(Call::ListNamespaceDescriptors(ListNamespaceDescriptors).into())
    }

    pub(crate) fn execute(self, svc: &HbaseService) -> Result<Reply> {
        Ok(Reply::message(&hbase::ListNamespaceDescriptorsResponse {
            namespace_descriptor: svc
                .master()?
                .namespaces()
                .iter()
                .map(|(n, conf)| ns_descriptor(n, conf))
                .collect(),
        }))
    }
}

/// ListNamespaces.
#[derive(Debug, Clone)]
pub(crate) struct ListNamespaces;

impl ListNamespaces {
    pub(crate) fn decode(param: Bytes, _cellblock: Bytes) -> Result<Request> {
        message::<hbase::ListNamespacesRequest>(param, "ListNamespaces")?;
        Ok(Call::ListNamespaces(ListNamespaces).into())
    }

    pub(crate) fn execute(self, svc: &HbaseService) -> Result<Reply> {
        Ok(Reply::message(&hbase::ListNamespacesResponse {
            namespace_name: svc.master()?.namespaces().into_keys().collect(),
        }))
    }
}

/// GetNamespaceDescriptor.
#[derive(Debug, Clone)]
pub(crate) struct GetNamespaceDescriptor {
    pub(crate) namespace: String,
}

impl GetNamespaceDescriptor {
    pub(crate) fn decode(param: Bytes, _cellblock: Bytes) -> Result<Request> {
        let req: hbase::GetNamespaceDescriptorRequest = message(param, "GetNamespaceDescriptor")?;
        Ok(Call::GetNamespaceDescriptor(GetNamespaceDescriptor {
            namespace: req.namespace_name,
        })
        .into())
    }

    pub(crate) fn execute(self, svc: &HbaseService) -> Result<Reply> {
        let all = svc.master()?.namespaces();
        let conf = all
            .get(&self.namespace)
            .ok_or_else(|| namespace_not_found(&self.namespace))?;
        Ok(Reply::message(&hbase::GetNamespaceDescriptorResponse {
            namespace_descriptor: ns_descriptor(&self.namespace, conf),
        }))
    }
}

/// CreateNamespace or ModifyNamespace: a namespace and its configuration.
#[derive(Debug, Clone)]
pub(crate) struct PutNamespace {
    /// CreateNamespace, else ModifyNamespace.
    pub(crate) create: bool,
    /// The name; one that is not UTF-8 fails the call after the nonce lookup.
    pub(crate) name: Result<String>,
    pub(crate) configuration: Vec<(String, String)>,
    pub(crate) nonce: Option<(u64, u64)>,
}

impl PutNamespace {
    pub(crate) fn decode_create(param: Bytes, _cellblock: Bytes) -> Result<Request> {
        let req: hbase::CreateNamespaceRequest = message(param, "CreateNamespace")?;
        let nonce = nonce_key(req.nonce_group, req.nonce);
        Ok(Call::PutNamespace(PutNamespace::new(true, req.namespace_descriptor, nonce)).into())
    }

    pub(crate) fn decode_modify(param: Bytes, _cellblock: Bytes) -> Result<Request> {
        let req: hbase::ModifyNamespaceRequest = message(param, "ModifyNamespace")?;
        let nonce = nonce_key(req.nonce_group, req.nonce);
        Ok(Call::PutNamespace(PutNamespace::new(false, req.namespace_descriptor, nonce)).into())
    }

    fn new(
        create: bool,
        descriptor: hbase::NamespaceDescriptor,
        nonce: Option<(u64, u64)>,
    ) -> PutNamespace {
        let method = if create {
            "CreateNamespace"
        } else {
            "ModifyNamespace"
        };
        PutNamespace {
            create,
            name: String::from_utf8(descriptor.name.to_vec()).map_err(|_| {
                HbaseError::do_not_retry(format!("{method}: the namespace name is not UTF-8"))
            }),
            configuration: descriptor
                .configuration
                .into_iter()
                .map(|p| (p.name, p.value))
                .collect(),
            nonce,
        }
    }

    pub(crate) fn execute(self, svc: &HbaseService, ctx: &CallCtx) -> Result<Reply> {
        let procs = &svc.procedures;
        // CreateNamespaceResponse and ModifyNamespaceResponse are the same message.
        let reply = |id| hbase::CreateNamespaceResponse { proc_id: Some(id) };
        let create = self.create;
        let class = if create {
            "procedure.CreateNamespaceProcedure"
        } else {
            "procedure.ModifyNamespaceProcedure"
        };
        let put = || {
            let name = self.name?;
            if create {
                svc.master()?.create_namespace(&name, self.configuration)?;
            } else {
                svc.master()?.modify_namespace(&name, self.configuration)?;
            }
            Ok(())
        };
        procs.submit_checked(class, ctx, self.nonce, reply, put, Ok)
    }
}

/// DeleteNamespace.
#[derive(Debug, Clone)]
pub(crate) struct DeleteNamespace {
    pub(crate) namespace: String,
    pub(crate) nonce: Option<(u64, u64)>,
}

impl DeleteNamespace {
    pub(crate) fn decode(param: Bytes, _cellblock: Bytes) -> Result<Request> {
        let req: hbase::DeleteNamespaceRequest = message(param, "DeleteNamespace")?;
        Ok(Call::DeleteNamespace(DeleteNamespace {
            namespace: req.namespace_name,
            nonce: nonce_key(req.nonce_group, req.nonce),
        })
        .into())
    }

    pub(crate) fn execute(self, svc: &HbaseService, ctx: &CallCtx) -> Result<Reply> {
        let procs = &svc.procedures;
        let reply = |id| hbase::DeleteNamespaceResponse { proc_id: Some(id) };
        // HBase checks before its procedure runs (its prepare latch): a namespace that
        // still holds tables, or a reserved one, is refused by the call itself.
        let delete = || Ok(svc.master()?.delete_namespace(&self.namespace)?);
        procs.submit_checked(
            "procedure.DeleteNamespaceProcedure",
            ctx,
            self.nonce,
            reply,
            delete,
            Ok,
        )
    }
}

/// `default`, `hbase` and every namespace a table lives in (Cellar has no namespace records).
fn ns_descriptor(name: &str, configuration: &[(String, String)]) -> hbase::NamespaceDescriptor {
    hbase::NamespaceDescriptor {
        name: Bytes::copy_from_slice(name.as_bytes()),
        configuration: configuration
            .iter()
            .map(|(k, v)| hbase::NameStringPair {
                name: k.clone(),
                value: v.clone(),
            })
            .collect(),
    }
}

//! Cellar's thin bindings to UCX's UCP API (`docs/design/0005-transport.md`).
//!
//! UCX is loaded when asked for ([`Ucx::load`]: `dlopen` of `libucp.so.0`), not linked: a
//! build needs no UCX, a machine without it runs everything else as before, and asking for
//! it there is an error naming the library and the package. Once loaded it stays loaded for
//! the life of the process (`RTLD_NODELETE`): UCX's libraries keep each other's state across
//! contexts (`libucs` outlives `libucp`, whose constructor and destructor edit `libucs`'s
//! global lists without a lock), and a client that unloaded and reloaded it between
//! connections raced other threads still inside UCX. The declarations are Cellar's
//! own (`ffi.rs`), from UCX 1.13's headers; the existing UCX crates do not work.
//!
//! What is here: a context with tag matching and wake-ups, workers (address, progress, event
//! fd, arm), endpoints to a peer's worker address (error-handling mode NONE, the only one
//! shared-memory transports offer: a peer's death is for the caller's heartbeats to find),
//! and tagged sends and receives whose buffers are borrowed until they complete. UCX picks
//! eager or rendezvous (zero copy) by size (`UCX_RNDV_THRESH`); transports come from the
//! environment as UCX reads it (`UCX_TLS`, `UCX_NET_DEVICES`).

// Policy: nothing received from a peer may panic the transport, so no slice indexing outside
// tests; where an index is in bounds by construction, an `allow` on the smallest item says why.
#![cfg_attr(not(test), deny(clippy::indexing_slicing))]

mod ffi;
pub mod link;
pub mod pool;

use ffi::Handle;
pub use pool::{PoolBuf, PoolStats, RecvPool};
use std::ffi::{c_void, CStr};
use std::marker::PhantomData;
use std::os::raw::c_int;
use std::ptr::null_mut;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The library names tried, in order.
const LIBRARIES: [&str; 2] = ["libucp.so.0", "libucp.so"];
/// The UCP API version Cellar's declarations follow.
const API_MAJOR: u32 = 1;
const API_MINOR: u32 = 13;
/// The oldest library accepted: `ucp_tag_send_nbx` and friends appeared in 1.10.
const MIN_MINOR: u32 = 10;
/// The scratch buffer a discarded message is received (and truncated) into.
pub const DISCARD_BYTES: usize = 64;
/// How long dropping an endpoint may progress its worker to flush it.
const CLOSE_LIMIT: Duration = Duration::from_secs(2);

#[derive(Debug, Clone, thiserror::Error)]
pub enum UcxError {
    #[error("UCX is not available: {0}; install UCX (Debian: apt-get install libucx0)")]
    NotInstalled(String),
    #[error("UCX {what} failed: {reason}")]
    Call { what: &'static str, reason: String },
    #[error("UCX: {0}")]
    Invalid(String),
}

pub type Result<T> = std::result::Result<T, UcxError>;

/// The loaded library and the functions Cellar calls.
pub struct Ucx {
    f: Fns,
    version: (u32, u32, u32),
    // Last: the function pointers above point into it.
    _lib: libloading::Library,
}

struct Fns {
    config_read: ffi::ConfigRead,
    config_release: ffi::ConfigRelease,
    config_modify: ffi::ConfigModify,
    init_version: ffi::InitVersion,
    cleanup: ffi::Cleanup,
    context_query: ffi::ContextQuery,
    worker_create: ffi::WorkerCreate,
    worker_destroy: ffi::WorkerDestroy,
    worker_get_address: ffi::WorkerGetAddress,
    worker_release_address: ffi::WorkerReleaseAddress,
    worker_progress: ffi::WorkerProgress,
    worker_get_efd: ffi::WorkerGetEfd,
    worker_arm: ffi::WorkerArm,
    ep_create: ffi::EpCreate,
    ep_close_nbx: ffi::EpCloseNbx,
    tag_send_nbx: ffi::TagSendNbx,
    tag_recv_nbx: ffi::TagRecvNbx,
    tag_probe_nb: ffi::TagProbeNb,
    tag_msg_recv_nbx: ffi::TagMsgRecvNbx,
    request_check_status: ffi::RequestCheckStatus,
    tag_recv_request_test: ffi::TagRecvRequestTest,
    request_cancel: ffi::RequestCancel,
    request_free: ffi::RequestFree,
    status_string: ffi::StatusString,
}

impl std::fmt::Debug for Ucx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (a, b, c) = self.version;
        write!(f, "Ucx({a}.{b}.{c})")
    }
}

/// The process's UCX, loaded on first use ([`Ucx::load`]), or why it could not be.
static LOADED: OnceLock<Result<Arc<Ucx>>> = OnceLock::new();

impl Ucx {
    /// The system's UCX: loaded on the first call, the same library (or the same error) on
    /// every later one.
    pub fn load() -> Result<Arc<Ucx>> {
        LOADED.get_or_init(|| Ucx::load_from(&LIBRARIES)).clone()
    }

    /// Loads UCX from the first of `names` that opens. The library is never unloaded, even
    /// when every `Ucx` of it is gone (the module's docs say why).
    pub fn load_from(names: &[&str]) -> Result<Arc<Ucx>> {
        let mut why = Vec::new();
        for name in names {
            let flags = libloading::os::unix::RTLD_LAZY
                | libloading::os::unix::RTLD_LOCAL
                | libc::RTLD_NODELETE;
            // SAFETY: loading UCX runs its constructors, which only set up its own state.
            let opened = unsafe { libloading::os::unix::Library::open(Some(*name), flags) };
            match opened.map(libloading::Library::from) {
                Ok(lib) => return Ucx::bind(lib, name).map(Arc::new),
                Err(e) => why.push(format!("{name}: {e}")),
            }
        }
        Err(UcxError::NotInstalled(format!(
            "cannot load {}",
            why.join("; ")
        )))
    }

    fn bind(lib: libloading::Library, name: &str) -> Result<Ucx> {
        fn sym<T: Copy>(lib: &libloading::Library, lib_name: &str, s: &str) -> Result<T> {
            // SAFETY: each symbol is declared with its C signature in `ffi.rs`.
            unsafe { lib.get::<T>(s.as_bytes()) }
                .map(|f| *f)
                .map_err(|e| UcxError::NotInstalled(format!("{lib_name} lacks {s}: {e}")))
        }
        let get_version: ffi::GetVersion = sym(&lib, name, "ucp_get_version")?;
        let (mut major, mut minor, mut release) = (0, 0, 0);
        // SAFETY: three out-parameters.
        unsafe { get_version(&mut major, &mut minor, &mut release) };
        if major != API_MAJOR || minor < MIN_MINOR {
            return Err(UcxError::NotInstalled(format!(
                "{name} is UCX {major}.{minor}.{release}; Cellar needs {API_MAJOR}.{MIN_MINOR} or later"
            )));
        }
        let f = Fns {
            config_read: sym(&lib, name, "ucp_config_read")?,
            config_release: sym(&lib, name, "ucp_config_release")?,
            config_modify: sym(&lib, name, "ucp_config_modify")?,
            init_version: sym(&lib, name, "ucp_init_version")?,
            cleanup: sym(&lib, name, "ucp_cleanup")?,
            context_query: sym(&lib, name, "ucp_context_query")?,
            worker_create: sym(&lib, name, "ucp_worker_create")?,
            worker_destroy: sym(&lib, name, "ucp_worker_destroy")?,
            worker_get_address: sym(&lib, name, "ucp_worker_get_address")?,
            worker_release_address: sym(&lib, name, "ucp_worker_release_address")?,
            worker_progress: sym(&lib, name, "ucp_worker_progress")?,
            worker_get_efd: sym(&lib, name, "ucp_worker_get_efd")?,
            worker_arm: sym(&lib, name, "ucp_worker_arm")?,
            ep_create: sym(&lib, name, "ucp_ep_create")?,
            ep_close_nbx: sym(&lib, name, "ucp_ep_close_nbx")?,
            tag_send_nbx: sym(&lib, name, "ucp_tag_send_nbx")?,
            tag_recv_nbx: sym(&lib, name, "ucp_tag_recv_nbx")?,
            tag_probe_nb: sym(&lib, name, "ucp_tag_probe_nb")?,
            tag_msg_recv_nbx: sym(&lib, name, "ucp_tag_msg_recv_nbx")?,
            request_check_status: sym(&lib, name, "ucp_request_check_status")?,
            tag_recv_request_test: sym(&lib, name, "ucp_tag_recv_request_test")?,
            request_cancel: sym(&lib, name, "ucp_request_cancel")?,
            request_free: sym(&lib, name, "ucp_request_free")?,
            status_string: sym(&lib, name, "ucs_status_string")?,
        };
        Ok(Ucx {
            f,
            version: (major, minor, release),
            _lib: lib,
        })
    }

    /// The library's version (major, minor, release).
    pub fn version(&self) -> (u32, u32, u32) {
        self.version
    }

    fn describe(&self, status: ffi::Status) -> String {
        // SAFETY: UCX returns a static string for every status.
        let s = unsafe { (self.f.status_string)(status) };
        if s.is_null() {
            return format!("status {status}");
        }
        // SAFETY: non-null, NUL-terminated, static.
        unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned()
    }

    fn check(&self, what: &'static str, status: ffi::Status) -> Result<()> {
        if status == ffi::UCS_OK {
            Ok(())
        } else {
            Err(UcxError::Call {
                what,
                reason: self.describe(status),
            })
        }
    }
}

/// A UCP context with tag matching and wake-ups, for workers on any threads (`Clone`,
/// `Send`, `Sync`). Workers keep it alive.
///
/// Thread safety, by construction: each worker runs on a thread of its own (a link's progress
/// thread), and workers of one UCP context share the context's state (memory registrations
/// and their cache, transport resources), so the context is created with `mt_workers_shared`:
/// UCX then guards that state with a lock of its own. UCX is asked what it granted
/// (`ucp_context_query`): where it reports less than UCS_THREAD_MODE_MULTI (a UCX built
/// without thread support), no two workers share a context: each gets a private one
/// ([`Context::workers_shared`]). Worker creation and destruction are serialized under the
/// context's lock either way.
#[derive(Clone)]
pub struct Context {
    inner: Arc<ContextInner>,
}

struct ContextInner {
    ucx: Arc<Ucx>,
    h: Handle,
    /// UCX made the context thread-safe (UCS_THREAD_MODE_MULTI): workers on different threads
    /// may share it.
    shared: bool,
    /// Worker creation and destruction in this context, one at a time.
    create: Mutex<()>,
}

// SAFETY: the handle is used only to create workers and to destroy them (both under `create`)
// and cleaned up once, when the last worker holding the Arc is gone. Workers of it run on
// different threads only when UCX reported the context thread-safe (`shared`); otherwise it
// has at most one worker.
unsafe impl Send for ContextInner {}
// SAFETY: as above: the only uses through `&ContextInner` are worker creation and destruction,
// under `create`.
unsafe impl Sync for ContextInner {}

impl Drop for ContextInner {
    fn drop(&mut self) {
        // SAFETY: every worker of the context is destroyed (they hold this Arc).
        unsafe { (self.ucx.f.cleanup)(self.h) };
    }
}

/// Sets Cellar's defaults for UCX settings UCX reads from the environment only, where the
/// environment does not set them. Call it first thing in `main`, before any thread starts
/// (changing the environment races with threads reading it).
///
/// Every connection has a UCX worker of its own, and UCX's shared-memory transports grow a
/// worker's receive buffers 512 segments of 8 KiB at a time: 4.5 MiB of a server's memory per
/// connection (`rpc_bench ucx-memory`). 64 at a time is plenty for a worker with one peer and
/// costs 1.5 MiB (UCX grows them further under load). `ucp_config_modify` accepts these names
/// but UCX 1.13 does not apply them to the transports, hence the environment.
pub fn set_process_defaults() {
    for name in ["UCX_POSIX_RX_BUFS_GROW", "UCX_SYSV_RX_BUFS_GROW"] {
        if std::env::var_os(name).is_none() {
            std::env::set_var(name, "64");
        }
    }
}

/// UCX's transport list (`UCX_TLS`) without the transports that copy straight from another
/// process's memory (`cma`, `knem`, `xpmem`). Endpoints use error-handling mode NONE, the only
/// one UCX's shared-memory transports support, and in that mode a peer that dies in the middle
/// of such a copy aborts this whole process (UCX 1.13: `process_vm_readv(...) returned -1: No
/// such process`, then a fatal error), where a server must go on serving everyone else. Large
/// messages between processes of one host then travel through the shared-memory segments
/// (`posix`, `sysv`), which a dead peer cannot make fail. `sm`/`shm` stand for those two.
pub fn transports_without_peer_copy(user: Option<&str>) -> String {
    const PEER_COPY: [&str; 3] = ["cma", "knem", "xpmem"];
    let list = user.map(str::trim).filter(|l| !l.is_empty());
    // Unset: every transport but CMA (Debian's UCX has no KNEM or XPMEM, and UCX warns about
    // excluding a transport it does not have).
    let Some(list) = list else {
        return "^cma".into();
    };
    if let Some(excluded) = list.strip_prefix('^') {
        let mut names: Vec<&str> = excluded.split(',').map(str::trim).collect();
        for t in PEER_COPY {
            if !names.contains(&t) {
                names.push(t);
            }
        }
        return format!("^{}", names.join(","));
    }
    let mut names: Vec<&str> = Vec::new();
    for name in list.split(',').map(str::trim) {
        let expanded: &[&str] = match name {
            "all" => return "^cma".into(),
            "sm" | "shm" => &["posix", "sysv"],
            n if PEER_COPY.contains(&n) => &[],
            n => &[n][..],
        };
        for n in expanded {
            if !names.contains(n) {
                names.push(n);
            }
        }
    }
    names.join(",")
}

impl Context {
    /// Reads UCX's configuration from the environment (`UCX_*`) and creates a context whose
    /// workers may run on different threads.
    pub fn new(ucx: &Arc<Ucx>) -> Result<Context> {
        Ok(Context {
            inner: Arc::new(ContextInner::new(ucx, true)?),
        })
    }

    /// Whether the workers of this context share one UCP context (UCX made it thread-safe), or
    /// each gets a private one (UCX offers no thread-safe context).
    pub fn workers_shared(&self) -> bool {
        self.inner.shared
    }

    /// A new worker: one thread at a time uses it. In this context if UCX made it
    /// thread-safe, else in a private context of its own.
    pub fn worker(&self) -> Result<Worker> {
        if self.inner.shared {
            return self.inner.worker();
        }
        Arc::new(ContextInner::new(&self.inner.ucx, false)?).worker()
    }
}

impl ContextInner {
    /// A UCP context; with `mt`, one that workers on several threads may share, if UCX
    /// grants it (`shared`).
    fn new(ucx: &Arc<Ucx>, mt: bool) -> Result<ContextInner> {
        let f = &ucx.f;
        let mut config: Handle = null_mut();
        // SAFETY: null prefix and file mean UCX's defaults and environment.
        ucx.check("reading its configuration", unsafe {
            (f.config_read)(std::ptr::null(), std::ptr::null(), &mut config)
        })?;
        let tls = transports_without_peer_copy(std::env::var("UCX_TLS").ok().as_deref());
        let (name, value) = (
            c"TLS",
            std::ffi::CString::new(tls.clone()).unwrap_or_default(),
        );
        // SAFETY: `config` was read above; both strings are NUL-terminated and UCX copies them.
        let modified = unsafe { (f.config_modify)(config, name.as_ptr(), value.as_ptr()) };
        if let Err(e) = ucx.check("choosing its transports", modified) {
            // SAFETY: read above; released once.
            unsafe { (f.config_release)(config) };
            return Err(UcxError::Invalid(format!("UCX_TLS={tls}: {e}")));
        }
        let params = ffi::UcpParams {
            field_mask: ffi::UCP_PARAM_FIELD_FEATURES | ffi::UCP_PARAM_FIELD_MT_WORKERS_SHARED,
            features: ffi::UCP_FEATURE_TAG | ffi::UCP_FEATURE_WAKEUP,
            request_size: 0,
            request_init: std::ptr::null(),
            request_cleanup: std::ptr::null(),
            tag_sender_mask: 0,
            mt_workers_shared: c_int::from(mt),
            estimated_num_eps: 0,
            estimated_num_ppn: 0,
            name: std::ptr::null(),
        };
        let mut h: Handle = null_mut();
        // SAFETY: `params` and `config` are valid for the call.
        let status = unsafe { (f.init_version)(API_MAJOR, API_MINOR, &params, config, &mut h) };
        // SAFETY: read above; released once.
        unsafe { (f.config_release)(config) };
        ucx.check("creating a context", status)?;
        let mut inner = ContextInner {
            ucx: Arc::clone(ucx),
            h,
            shared: false,
            create: Mutex::new(()),
        };
        if mt {
            let mut attr = ffi::ContextAttr {
                field_mask: ffi::UCP_ATTR_FIELD_THREAD_MODE,
                request_size: 0,
                thread_mode: -1,
                memory_types: 0,
                name: [0; 32],
            };
            // SAFETY: a live context; `attr` is an out-parameter of the header's layout, and
            // UCX fills only the fields its mask names.
            let status = unsafe { (f.context_query)(h, &mut attr) };
            inner.shared = status == ffi::UCS_OK && attr.thread_mode == ffi::UCS_THREAD_MODE_MULTI;
        }
        Ok(inner)
    }

    /// A worker in this context, created under its lock.
    fn worker(self: &Arc<Self>) -> Result<Worker> {
        let c = self;
        let _serial = c.create.lock().unwrap_or_else(|p| p.into_inner());
        let params = ffi::WorkerParams {
            field_mask: ffi::UCP_WORKER_PARAM_FIELD_THREAD_MODE,
            thread_mode: ffi::UCS_THREAD_MODE_SERIALIZED,
            cpu_mask: [0; 16],
            events: 0,
            user_data: null_mut(),
            event_fd: 0,
            flags: 0,
            name: std::ptr::null(),
            am_alignment: 0,
            client_id: 0,
        };
        let mut h: Handle = null_mut();
        // SAFETY: a live context and valid parameters.
        c.ucx.check("creating a worker", unsafe {
            (c.ucx.f.worker_create)(c.h, &params, &mut h)
        })?;
        Ok(Worker {
            ctx: Arc::clone(c),
            h,
        })
    }
}

/// A UCP worker: progress, wake-ups, endpoints and receives. `Send`, not `Sync`: one
/// thread at a time.
pub struct Worker {
    ctx: Arc<ContextInner>,
    h: Handle,
}

// SAFETY: created in UCS_THREAD_MODE_SERIALIZED; `&mut`-free methods still run on one
// thread at a time because `Worker` is not `Sync`. Its context is thread-safe, or its own
// (`Context::worker`), so moving it to another thread shares nothing unguarded.
unsafe impl Send for Worker {}

impl Drop for Worker {
    fn drop(&mut self) {
        // Destroyed under the context's lock, as it was created: no other worker of the
        // context is being created or destroyed meanwhile.
        let _serial = self.ctx.create.lock().unwrap_or_else(|p| p.into_inner());
        // SAFETY: endpoints and requests borrow the worker, so none is left; `drop` runs on the
        // one thread that owns it (`Worker` is not `Sync`).
        unsafe { (self.ctx.ucx.f.worker_destroy)(self.h) };
    }
}

impl Worker {
    fn ucx(&self) -> &Ucx {
        &self.ctx.ucx
    }

    /// The worker's address, for a peer to connect to (sent over another channel).
    pub fn address(&self) -> Result<Vec<u8>> {
        let (mut addr, mut len): (Handle, usize) = (null_mut(), 0);
        // SAFETY: out-parameters; the address is copied and released below.
        self.ucx().check("getting the worker address", unsafe {
            (self.ucx().f.worker_get_address)(self.h, &mut addr, &mut len)
        })?;
        // SAFETY: UCX returned `len` bytes at `addr`.
        let bytes = unsafe { std::slice::from_raw_parts(addr.cast::<u8>(), len) }.to_vec();
        // SAFETY: obtained above, released once.
        unsafe { (self.ucx().f.worker_release_address)(self.h, addr) };
        Ok(bytes)
    }

    /// Runs UCX's progress engine once; the number of events it handled.
    pub fn progress(&self) -> u32 {
        // SAFETY: a live worker, used from one thread at a time.
        unsafe { (self.ucx().f.worker_progress)(self.h) }
    }

    /// The file descriptor that becomes readable when the worker has events (after
    /// [`Worker::arm`] returned true).
    pub fn event_fd(&self) -> Result<std::os::fd::RawFd> {
        let mut fd: c_int = -1;
        // SAFETY: an out-parameter.
        self.ucx().check("getting the event fd", unsafe {
            (self.ucx().f.worker_get_efd)(self.h, &mut fd)
        })?;
        Ok(fd)
    }

    /// Arms the event fd: true if the caller may now sleep on it, false if events are
    /// pending (progress first).
    pub fn arm(&self) -> Result<bool> {
        // SAFETY: a live worker.
        match unsafe { (self.ucx().f.worker_arm)(self.h) } {
            ffi::UCS_OK => Ok(true),
            ffi::UCS_ERR_BUSY => Ok(false),
            s => Err(UcxError::Call {
                what: "arming the worker",
                reason: self.ucx().describe(s),
            }),
        }
    }

    /// An endpoint to the worker whose [`Worker::address`] is `address`.
    pub fn connect(&self, address: &[u8]) -> Result<Endpoint<'_>> {
        if address.is_empty() {
            return Err(UcxError::Invalid("an empty worker address".into()));
        }
        let params = ffi::EpParams {
            field_mask: ffi::UCP_EP_PARAM_FIELD_REMOTE_ADDRESS
                | ffi::UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE,
            address: address.as_ptr().cast(),
            err_mode: ffi::UCP_ERR_HANDLING_MODE_NONE,
            err_handler: ffi::ErrHandler {
                cb: std::ptr::null(),
                arg: null_mut(),
            },
            user_data: null_mut(),
            flags: 0,
            sockaddr: ffi::SockAddr {
                addr: std::ptr::null(),
                addrlen: 0,
            },
            conn_request: null_mut(),
            name: std::ptr::null(),
            local_sockaddr: ffi::SockAddr {
                addr: std::ptr::null(),
                addrlen: 0,
            },
        };
        let mut h: Handle = null_mut();
        // SAFETY: UCX copies what it needs of the address during the call.
        self.ucx().check("connecting an endpoint", unsafe {
            (self.ucx().f.ep_create)(self.h, &params, &mut h)
        })?;
        Ok(Endpoint { worker: self, h })
    }

    /// Starts receiving a message whose tag matches `tag` under `mask` into `buf`.
    pub fn recv<'b>(&'b self, tag: u64, mask: u64, buf: &'b mut [u8]) -> Result<Request<'b>> {
        let mut info = Box::new(ffi::TagRecvInfo::default());
        let mut param = ffi::RequestParam::none();
        param.op_attr_mask = ffi::UCP_OP_ATTR_FIELD_RECV_INFO;
        param.recv_info = (&mut *info as *mut ffi::TagRecvInfo).cast::<c_void>();
        // SAFETY: `buf` outlives the request (lifetime 'b); `info` is boxed and kept in it.
        let p = unsafe {
            (self.ucx().f.tag_recv_nbx)(
                self.h,
                buf.as_mut_ptr().cast(),
                buf.len(),
                tag,
                mask,
                &param,
            )
        };
        Ok(Request {
            op: Op::start(self, p, Some(info), "receiving")?,
            _buf: PhantomData,
        })
    }

    /// Takes the next message whose tag matches `tag` under `mask` out of the worker's
    /// unexpected queue, if one has arrived.
    pub fn probe(&self, tag: u64, mask: u64) -> Option<Probed> {
        let mut info = ffi::TagRecvInfo::default();
        // SAFETY: `remove` = 1: the message is ours to receive; `info` is an out-parameter.
        let msg = unsafe { (self.ucx().f.tag_probe_nb)(self.h, tag, mask, 1, &mut info) };
        (!msg.is_null()).then_some(Probed {
            msg,
            tag: info.sender_tag,
            len: info.length,
        })
    }

    /// Takes a probed message out of UCX without receiving its bytes: it is received into a
    /// scratch buffer of [`DISCARD_BYTES`] and truncated, so a peer's announced length never
    /// becomes an allocation. UCX drops what does not fit (a rendezvous message's data is
    /// never fetched: the sender is told the receive is done). The operation completes once
    /// UCX has let go of the message; a truncation is its expected outcome, not an error.
    pub fn discard_probed(&self, probed: Probed) -> Result<Owned<'_, Box<[u8]>>> {
        let mut buf: Box<[u8]> = vec![0u8; DISCARD_BYTES].into_boxed_slice();
        let mut info = Box::new(ffi::TagRecvInfo::default());
        let mut param = ffi::RequestParam::none();
        param.op_attr_mask = ffi::UCP_OP_ATTR_FIELD_RECV_INFO;
        param.recv_info = (&mut *info as *mut ffi::TagRecvInfo).cast::<c_void>();
        // SAFETY: `buf` holds `buf.len()` bytes whose memory stays put while the operation
        // holds it (a boxed slice: the value moves, the memory does not); `info` is boxed; UCX
        // writes at most `buf.len()` bytes, whatever the message's length.
        let p = unsafe {
            (self.ucx().f.tag_msg_recv_nbx)(
                self.h,
                buf.as_mut_ptr().cast(),
                buf.len(),
                probed.msg,
                &param,
            )
        };
        // A receive that completed at once may return its truncation as an error status.
        let truncated = isize::from(ffi::UCS_ERR_MESSAGE_TRUNCATED);
        let p = if !p.is_null() && !is_request(p) && p as isize == truncated {
            null_mut()
        } else {
            p
        };
        let mut op = Op::start(self, p, Some(info), "discarding")?;
        op.truncation_ok = true;
        Ok(Owned { op, buf: Some(buf) })
    }

    /// Receives a probed message into a buffer of `pool` (reused across messages, so its
    /// memory is registered once where a transport needs that: `pool.rs`). The buffer is the
    /// message's length: a caller that must bound what it takes in decides from
    /// [`Probed::len`] first, and [`Worker::discard_probed`]s what it will not take.
    pub fn recv_probed(&self, probed: Probed, pool: &RecvPool) -> Result<Owned<'_, PoolBuf>> {
        let mut buf = pool.take(probed.len);
        let mut info = Box::new(ffi::TagRecvInfo::default());
        let mut param = ffi::RequestParam::none();
        param.op_attr_mask = ffi::UCP_OP_ATTR_FIELD_RECV_INFO;
        param.recv_info = (&mut *info as *mut ffi::TagRecvInfo).cast::<c_void>();
        // SAFETY: `buf` holds at least `probed.len` bytes whose memory stays put while the
        // operation holds it (a boxed slice; the value moves, the memory does not); `info` is
        // boxed.
        let p = unsafe {
            (self.ucx().f.tag_msg_recv_nbx)(
                self.h,
                buf.as_mut_ptr().cast(),
                probed.len,
                probed.msg,
                &param,
            )
        };
        // Completed at once (null): UCX filled `info`.
        let op = Op::start(self, p, Some(info), "receiving")?;
        Ok(Owned { op, buf: Some(buf) })
    }

    /// Progresses until `req` completes, or `limit` passes (false).
    fn finish(&self, req: Handle, limit: Option<Duration>) -> bool {
        let deadline = limit.map(|l| Instant::now() + l);
        loop {
            // SAFETY: a live request of this worker.
            if unsafe { (self.ucx().f.request_check_status)(req) } != ffi::UCS_INPROGRESS {
                return true;
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return false;
            }
            self.progress();
        }
    }
}

/// A connection to a peer worker; sends go through it.
pub struct Endpoint<'w> {
    worker: &'w Worker,
    h: Handle,
}

impl<'w> Endpoint<'w> {
    /// `ucp_tag_send_nbx` of `len` bytes at `data`, which must stay put until the returned
    /// operation completes.
    fn start_send(&self, tag: u64, data: *const u8, len: usize) -> Result<Op<'w>> {
        let param = ffi::RequestParam::none();
        // SAFETY: the callers keep `data` valid and in place until the operation completes.
        let p =
            unsafe { (self.worker.ucx().f.tag_send_nbx)(self.h, data.cast(), len, tag, &param) };
        Op::start(self.worker, p, None, "sending")
    }

    /// Starts sending `data` with `tag`.
    pub fn send<'b>(&'b self, tag: u64, data: &'b [u8]) -> Result<Request<'b>> {
        Ok(Request {
            op: self.start_send(tag, data.as_ptr(), data.len())?,
            _buf: PhantomData,
        })
    }

    /// Starts sending `data`, which the returned operation keeps until it completes (its
    /// bytes stay where they are while it moves, or are leaked if it is dropped unfinished).
    pub fn send_owned(&self, tag: u64, data: bytes::Bytes) -> Result<Owned<'w, bytes::Bytes>> {
        Ok(Owned {
            op: self.start_send(tag, data.as_ptr(), data.len())?,
            buf: Some(data),
        })
    }

    /// Starts sending `head` followed by `tail` as one message, which UCX gathers from both
    /// buffers (`ucp_dt_make_iov`) instead of Cellar copying them into one. The operation
    /// keeps both (and the gather list) until it completes. An empty tail sends `head` alone.
    pub fn send_gathered(
        &self,
        tag: u64,
        head: bytes::Bytes,
        tail: bytes::Bytes,
    ) -> Result<Owned<'w, Gathered>> {
        if tail.is_empty() {
            return Ok(Owned {
                op: self.start_send(tag, head.as_ptr(), head.len())?,
                buf: Some(Gathered {
                    parts: [head, tail],
                    _iov: None,
                }),
            });
        }
        let iov = Box::new([
            ffi::DtIov {
                buffer: head.as_ptr().cast(),
                length: head.len(),
            },
            ffi::DtIov {
                buffer: tail.as_ptr().cast(),
                length: tail.len(),
            },
        ]);
        let mut param = ffi::RequestParam::none();
        param.op_attr_mask = ffi::UCP_OP_ATTR_FIELD_DATATYPE;
        param.datatype = ffi::UCP_DATATYPE_IOV;
        // SAFETY: the gather list and both buffers stay where they are (boxed, and `Bytes`'
        // memory) until the operation completes: `Owned` keeps them, or leaks them if it is
        // dropped unfinished. For an IOV datatype the count is the list's length.
        let p = unsafe {
            (self.worker.ucx().f.tag_send_nbx)(self.h, iov.as_ptr().cast(), iov.len(), tag, &param)
        };
        Ok(Owned {
            op: Op::start(self.worker, p, None, "sending")?,
            buf: Some(Gathered {
                parts: [head, tail],
                _iov: Some(iov),
            }),
        })
    }

    /// Starts closing the endpoint (pending sends go out first) without waiting.
    pub fn close(self) -> Closing<'w> {
        let worker = self.worker;
        let h = self.h;
        std::mem::forget(self);
        let param = ffi::RequestParam::none();
        // SAFETY: a live endpoint, closed once (its Drop will not run).
        let p = unsafe { (worker.ucx().f.ep_close_nbx)(h, &param) };
        Closing {
            worker,
            h: if is_request(p) { p } else { null_mut() },
        }
    }
}

impl Drop for Endpoint<'_> {
    fn drop(&mut self) {
        let param = ffi::RequestParam::none();
        // SAFETY: a live endpoint, closed once (a flush close: pending sends go out first).
        let p = unsafe { (self.worker.ucx().f.ep_close_nbx)(self.h, &param) };
        if is_request(p) {
            // A flush close may wait for the peer; past the limit the request is released
            // unfinished, which UCX allows (it frees it when the close completes or the
            // worker is destroyed). No buffer of Cellar's is involved.
            self.worker.finish(p, Some(CLOSE_LIMIT));
            // SAFETY: a request of this worker, released once.
            unsafe { (self.worker.ucx().f.request_free)(p) };
        }
    }
}

/// The buffers of a gathered send ([`Endpoint::send_gathered`]), kept until it completes.
pub struct Gathered {
    parts: [bytes::Bytes; 2],
    _iov: Option<Box<[ffi::DtIov; 2]>>,
}

impl Gathered {
    /// Bytes sent.
    pub fn len(&self) -> usize {
        self.parts[0].len() + self.parts[1].len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What a completed receive got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Received {
    pub tag: u64,
    pub len: usize,
}

/// An operation in progress: its request handle, or its outcome once complete.
struct Op<'w> {
    worker: &'w Worker,
    /// Null once completed and freed (or completed at once).
    h: Handle,
    info: Option<Box<ffi::TagRecvInfo>>,
    what: &'static str,
    /// Set once completed: `Err` with UCX's reason if it failed.
    outcome: Option<std::result::Result<(), String>>,
    /// A truncated receive is a success (a discard).
    truncation_ok: bool,
}

/// Whether a status pointer is a request (not null, not an error code).
fn is_request(p: Handle) -> bool {
    !p.is_null() && (p as usize) < (ffi::UCS_ERR_LAST as usize)
}

impl<'w> Op<'w> {
    fn start(
        worker: &'w Worker,
        p: Handle,
        info: Option<Box<ffi::TagRecvInfo>>,
        what: &'static str,
    ) -> Result<Op<'w>> {
        if !p.is_null() && !is_request(p) {
            // The pointer is an error status (UCS_PTR_STATUS).
            return Err(UcxError::Call {
                what,
                reason: worker.ucx().describe(p as isize as ffi::Status),
            });
        }
        Ok(Op {
            worker,
            h: p,
            info,
            what,
            outcome: p.is_null().then_some(Ok(())),
            truncation_ok: false,
        })
    }

    fn test(&mut self) -> Result<bool> {
        if self.outcome.is_none() {
            let f = &self.worker.ucx().f;
            let status = match self.info.as_deref_mut() {
                // SAFETY: a live receive request and its info.
                Some(info) => unsafe { (f.tag_recv_request_test)(self.h, info) },
                // SAFETY: a live request.
                None => unsafe { (f.request_check_status)(self.h) },
            };
            if status == ffi::UCS_INPROGRESS {
                return Ok(false);
            }
            // SAFETY: completed, freed once.
            unsafe { (f.request_free)(self.h) };
            self.h = null_mut();
            let truncated = self.truncation_ok && status == ffi::UCS_ERR_MESSAGE_TRUNCATED;
            self.outcome = Some(if status == ffi::UCS_OK || truncated {
                Ok(())
            } else {
                Err(self.worker.ucx().describe(status))
            });
        }
        match &self.outcome {
            Some(Err(reason)) => Err(UcxError::Call {
                what: self.what,
                reason: reason.clone(),
            }),
            _ => Ok(true),
        }
    }

    fn received(&self) -> Option<Received> {
        self.info.as_deref().map(|i| Received {
            tag: i.sender_tag,
            len: i.length,
        })
    }

    fn wait(&mut self, limit: Duration) -> Result<()> {
        let deadline = Instant::now() + limit;
        while !self.test()? {
            if Instant::now() >= deadline {
                return Err(UcxError::Call {
                    what: self.what,
                    reason: format!("not complete within {} ms", limit.as_millis()),
                });
            }
            self.worker.progress();
        }
        Ok(())
    }
}

/// A send or receive in progress; its buffer stays borrowed until it completes. Dropping it
/// unfinished cancels it (receives; UCX cannot cancel a send) and progresses the worker until
/// UCX lets go of the buffer, however long that takes: a rendezvous send to a dead peer never
/// completes, so long-lived operations use [`Owned`] buffers instead.
pub struct Request<'b> {
    op: Op<'b>,
    _buf: PhantomData<&'b mut [u8]>,
}

impl Request<'_> {
    /// Whether it has completed (without progressing the worker); an error if it failed.
    pub fn test(&mut self) -> Result<bool> {
        self.op.test()
    }

    /// Progresses the worker until the request completes or `limit` passes (then an error;
    /// the request is cancelled when dropped). A receive says what it got.
    pub fn wait(mut self, limit: Duration) -> Result<Option<Received>> {
        self.op.wait(limit)?;
        Ok(self.op.received())
    }
}

impl Drop for Request<'_> {
    fn drop(&mut self) {
        let op = &self.op;
        if op.h.is_null() {
            return;
        }
        let f = &op.worker.ucx().f;
        // SAFETY: a live request of this worker; cancelled, then completed before its
        // buffer is released.
        unsafe { (f.request_cancel)(op.worker.h, op.h) };
        op.worker.finish(op.h, None);
        // SAFETY: completed, freed once.
        unsafe { (f.request_free)(op.h) };
    }
}

/// A send or receive whose buffer it owns (`Bytes` to send, a pool's buffer received into): the
/// buffer's memory stays put while the value moves. Dropped unfinished, the request is
/// released and the buffer leaked rather than freed under UCX: never a wait, never a
/// use after free (a send to a dead peer costs its bytes, once).
pub struct Owned<'w, B> {
    op: Op<'w>,
    buf: Option<B>,
}

impl<B> Owned<'_, B> {
    /// Whether it has completed (without progressing the worker); an error if it failed.
    pub fn test(&mut self) -> Result<bool> {
        self.op.test()
    }

    /// The buffer and, for a receive, what arrived; `None` until complete.
    pub fn take(&mut self) -> Option<(B, Option<Received>)> {
        self.op.outcome.as_ref()?;
        let got = self.op.received();
        self.buf.take().map(|b| (b, got))
    }
}

impl<B> Drop for Owned<'_, B> {
    fn drop(&mut self) {
        if self.op.h.is_null() {
            return;
        }
        // SAFETY: a live request, released once; UCX completes it on its own later.
        unsafe { (self.op.worker.ucx().f.request_free)(self.op.h) };
        if let Some(buf) = self.buf.take() {
            std::mem::forget(buf);
        }
    }
}

/// A message waiting in the worker, found by [`Worker::probe`]: its tag and length, to be
/// received with [`Worker::recv_probed`].
pub struct Probed {
    msg: Handle,
    pub tag: u64,
    pub len: usize,
}

/// An endpoint being closed ([`Endpoint::close`]): poll [`Closing::test`] while the worker
/// progresses; dropped unfinished, UCX finishes it.
pub struct Closing<'w> {
    worker: &'w Worker,
    h: Handle,
}

impl Closing<'_> {
    /// Whether the close has completed.
    pub fn test(&mut self) -> bool {
        if self.h.is_null() {
            return true;
        }
        // SAFETY: a live request of this worker.
        if unsafe { (self.worker.ucx().f.request_check_status)(self.h) } == ffi::UCS_INPROGRESS {
            return false;
        }
        // SAFETY: completed, freed once.
        unsafe { (self.worker.ucx().f.request_free)(self.h) };
        self.h = null_mut();
        true
    }
}

impl Drop for Closing<'_> {
    fn drop(&mut self) {
        if !self.h.is_null() {
            // SAFETY: a live request, released once (UCX frees it when the close is done).
            unsafe { (self.worker.ucx().f.request_free)(self.h) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transports_that_copy_from_a_peer_are_left_out() {
        let t = |u: Option<&str>| transports_without_peer_copy(u);
        assert_eq!(t(None), "^cma");
        assert_eq!(t(Some("")), "^cma");
        assert_eq!(t(Some("all")), "^cma");
        assert_eq!(t(Some("sm,self")), "posix,sysv,self");
        assert_eq!(t(Some("tcp,self")), "tcp,self");
        assert_eq!(t(Some("rc,sm,cma,self")), "rc,posix,sysv,self");
        assert_eq!(t(Some("^ud")), "^ud,cma,knem,xpmem");
    }

    #[test]
    fn a_missing_library_is_a_clear_error() {
        let err = Ucx::load_from(&["libcellar-no-such-ucp.so.0"]).expect_err("no such library");
        let msg = err.to_string();
        assert!(msg.contains("libcellar-no-such-ucp.so.0"), "{msg}");
        assert!(msg.contains("libucx0"), "{msg}");
    }

    /// Two workers made from one context on two threads either share a UCP context that UCX
    /// itself makes thread-safe (`ucp_context_query` reports UCS_THREAD_MODE_MULTI), or do
    /// not share one at all. Asked of UCX directly, through its own symbol.
    #[test]
    fn workers_on_different_threads_share_only_a_thread_safe_context() {
        #[repr(C)]
        struct Attr {
            field_mask: u64,
            request_size: usize,
            thread_mode: c_int,
            memory_types: u64,
            name: [std::os::raw::c_char; 32],
        }
        type Query = unsafe extern "C" fn(Handle, *mut Attr) -> ffi::Status;
        const FIELD_THREAD_MODE: u64 = 1 << 1;
        const THREAD_MODE_MULTI: c_int = 2;
        let Ok(ucx) = Ucx::load() else {
            eprintln!("skipped: UCX is not installed");
            return;
        };
        let ctx = Context::new(&ucx).expect("context");
        let other = {
            let ctx = ctx.clone();
            std::thread::spawn(move || ctx.worker().expect("worker on another thread"))
                .join()
                .expect("thread")
        };
        let here = ctx.worker().expect("worker");
        if !Arc::ptr_eq(&here.ctx, &other.ctx) {
            return;
        }
        // SAFETY: the symbol's C signature is declared above, from ucp.h.
        let query: Query =
            *unsafe { ucx._lib.get::<Query>(b"ucp_context_query") }.expect("ucp_context_query");
        let mut attr = Attr {
            field_mask: FIELD_THREAD_MODE,
            request_size: 0,
            thread_mode: -1,
            memory_types: 0,
            name: [0; 32],
        };
        // SAFETY: a live context and an out-parameter of the declared layout.
        let status = unsafe { query(here.ctx.h, &mut attr) };
        assert_eq!(status, ffi::UCS_OK);
        assert_eq!(
            attr.thread_mode, THREAD_MODE_MULTI,
            "a context whose workers run on different threads must be thread-safe \
             (UCS_THREAD_MODE_MULTI = 2; UCX reports {})",
            attr.thread_mode
        );
    }

    #[test]
    fn error_pointers_are_not_requests() {
        assert!(!is_request(null_mut()));
        assert!(!is_request(-3isize as usize as Handle));
        assert!(is_request(0x1000usize as Handle));
    }
}

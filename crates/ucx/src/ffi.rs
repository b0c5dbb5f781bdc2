//! The parts of UCX's UCP C API (`ucp/api/ucp.h`, `ucp_def.h`, `ucs/type/status.h`) Cellar
//! uses: struct layouts, constants and function signatures, declared here from the headers'
//! definitions (UCX 1.13; every parameter struct starts with a `field_mask` naming the
//! fields set, so a newer library reads only those).

use std::ffi::c_void;
use std::os::raw::{c_char, c_int, c_uint};

/// `ucs_status_t`: a packed `int8_t` enum.
pub type Status = i8;
pub const UCS_OK: Status = 0;
pub const UCS_INPROGRESS: Status = 1;
pub const UCS_ERR_BUSY: Status = -15;
/// `UCS_ERR_MESSAGE_TRUNCATED`: a message longer than the buffer it was received into.
pub const UCS_ERR_MESSAGE_TRUNCATED: Status = -9;
/// `UCS_ERR_LAST`: a status pointer at or above this (as unsigned) is an error code.
pub const UCS_ERR_LAST: isize = -100;

pub type Handle = *mut c_void;

/// `ucp_params_t`.
#[repr(C)]
pub struct UcpParams {
    pub field_mask: u64,
    pub features: u64,
    pub request_size: usize,
    pub request_init: *const c_void,
    pub request_cleanup: *const c_void,
    pub tag_sender_mask: u64,
    pub mt_workers_shared: c_int,
    pub estimated_num_eps: usize,
    pub estimated_num_ppn: usize,
    pub name: *const c_char,
}
pub const UCP_PARAM_FIELD_FEATURES: u64 = 1 << 0;
pub const UCP_PARAM_FIELD_MT_WORKERS_SHARED: u64 = 1 << 5;
pub const UCP_FEATURE_TAG: u64 = 1 << 0;
pub const UCP_FEATURE_WAKEUP: u64 = 1 << 4;

/// `ucp_worker_params_t` (`cpu_mask` is `ucs_cpu_set_t`: 1024 bits).
#[repr(C)]
pub struct WorkerParams {
    pub field_mask: u64,
    pub thread_mode: c_int,
    pub cpu_mask: [u64; 16],
    pub events: c_uint,
    pub user_data: *mut c_void,
    pub event_fd: c_int,
    pub flags: u64,
    pub name: *const c_char,
    pub am_alignment: usize,
    pub client_id: u64,
}
pub const UCP_WORKER_PARAM_FIELD_THREAD_MODE: u64 = 1 << 0;
/// `UCS_THREAD_MODE_SERIALIZED`: several threads, one at a time.
pub const UCS_THREAD_MODE_SERIALIZED: c_int = 1;
/// `UCS_THREAD_MODE_MULTI`: several threads at once.
pub const UCS_THREAD_MODE_MULTI: c_int = 2;

/// `ucp_context_attr_t` (`UCP_ENTITY_NAME_MAX` is 32).
#[repr(C)]
pub struct ContextAttr {
    pub field_mask: u64,
    pub request_size: usize,
    pub thread_mode: c_int,
    pub memory_types: u64,
    pub name: [c_char; 32],
}
pub const UCP_ATTR_FIELD_THREAD_MODE: u64 = 1 << 1;

/// `ucs_sock_addr_t`.
#[repr(C)]
pub struct SockAddr {
    pub addr: *const c_void,
    pub addrlen: u32,
}

/// `ucp_err_handler_t`.
#[repr(C)]
pub struct ErrHandler {
    pub cb: *const c_void,
    pub arg: *mut c_void,
}

/// `ucp_ep_params_t`.
#[repr(C)]
pub struct EpParams {
    pub field_mask: u64,
    pub address: *const c_void,
    pub err_mode: c_int,
    pub err_handler: ErrHandler,
    pub user_data: *mut c_void,
    pub flags: c_uint,
    pub sockaddr: SockAddr,
    pub conn_request: *mut c_void,
    pub name: *const c_char,
    pub local_sockaddr: SockAddr,
}
pub const UCP_EP_PARAM_FIELD_REMOTE_ADDRESS: u64 = 1 << 0;
pub const UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE: u64 = 1 << 1;
/// `UCP_ERR_HANDLING_MODE_NONE`: the only mode shared-memory transports offer; peers'
/// failures are Cellar's to detect (heartbeats).
pub const UCP_ERR_HANDLING_MODE_NONE: c_int = 0;

/// `ucp_tag_recv_info_t`.
#[repr(C)]
#[derive(Default, Clone, Copy)]
pub struct TagRecvInfo {
    pub sender_tag: u64,
    pub length: usize,
}

/// `ucp_request_param_t`.
#[repr(C)]
pub struct RequestParam {
    pub op_attr_mask: u32,
    pub flags: u32,
    pub request: *mut c_void,
    pub cb: *const c_void,
    pub datatype: u64,
    pub user_data: *mut c_void,
    pub reply_buffer: *mut c_void,
    pub memory_type: c_int,
    pub recv_info: *mut c_void,
    pub memh: *mut c_void,
}
pub const UCP_OP_ATTR_FIELD_DATATYPE: u32 = 1 << 3;
pub const UCP_OP_ATTR_FIELD_RECV_INFO: u32 = 1 << 7;
/// `ucp_dt_make_iov()`: the buffer is an array of [`DtIov`], the count its length.
pub const UCP_DATATYPE_IOV: u64 = 2;

/// `ucp_dt_iov_t`.
#[repr(C)]
pub struct DtIov {
    pub buffer: *const c_void,
    pub length: usize,
}

impl RequestParam {
    pub fn none() -> RequestParam {
        RequestParam {
            op_attr_mask: 0,
            flags: 0,
            request: std::ptr::null_mut(),
            cb: std::ptr::null(),
            datatype: 0,
            user_data: std::ptr::null_mut(),
            reply_buffer: std::ptr::null_mut(),
            memory_type: 0,
            recv_info: std::ptr::null_mut(),
            memh: std::ptr::null_mut(),
        }
    }
}

pub type ConfigRead = unsafe extern "C" fn(*const c_char, *const c_char, *mut Handle) -> Status;
pub type ConfigRelease = unsafe extern "C" fn(Handle);
pub type ConfigModify = unsafe extern "C" fn(Handle, *const c_char, *const c_char) -> Status;
pub type InitVersion =
    unsafe extern "C" fn(c_uint, c_uint, *const UcpParams, Handle, *mut Handle) -> Status;
pub type Cleanup = unsafe extern "C" fn(Handle);
pub type ContextQuery = unsafe extern "C" fn(Handle, *mut ContextAttr) -> Status;
pub type GetVersion = unsafe extern "C" fn(*mut c_uint, *mut c_uint, *mut c_uint);
pub type WorkerCreate = unsafe extern "C" fn(Handle, *const WorkerParams, *mut Handle) -> Status;
pub type WorkerDestroy = unsafe extern "C" fn(Handle);
pub type WorkerGetAddress = unsafe extern "C" fn(Handle, *mut Handle, *mut usize) -> Status;
pub type WorkerReleaseAddress = unsafe extern "C" fn(Handle, Handle);
pub type WorkerProgress = unsafe extern "C" fn(Handle) -> c_uint;
pub type WorkerGetEfd = unsafe extern "C" fn(Handle, *mut c_int) -> Status;
pub type WorkerArm = unsafe extern "C" fn(Handle) -> Status;
pub type EpCreate = unsafe extern "C" fn(Handle, *const EpParams, *mut Handle) -> Status;
pub type EpCloseNbx = unsafe extern "C" fn(Handle, *const RequestParam) -> Handle;
pub type TagSendNbx =
    unsafe extern "C" fn(Handle, *const c_void, usize, u64, *const RequestParam) -> Handle;
pub type TagRecvNbx =
    unsafe extern "C" fn(Handle, *mut c_void, usize, u64, u64, *const RequestParam) -> Handle;
pub type TagProbeNb = unsafe extern "C" fn(Handle, u64, u64, c_int, *mut TagRecvInfo) -> Handle;
pub type TagMsgRecvNbx =
    unsafe extern "C" fn(Handle, *mut c_void, usize, Handle, *const RequestParam) -> Handle;
pub type RequestCheckStatus = unsafe extern "C" fn(Handle) -> Status;
pub type TagRecvRequestTest = unsafe extern "C" fn(Handle, *mut TagRecvInfo) -> Status;
pub type RequestCancel = unsafe extern "C" fn(Handle, Handle);
pub type RequestFree = unsafe extern "C" fn(Handle);
pub type StatusString = unsafe extern "C" fn(Status) -> *const c_char;

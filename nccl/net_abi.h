/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * The NCCL network plugin ABI, versions 8 to 11, declared from NCCL's
 * documented plugin interface (the ext-net README and the layouts of the
 * released tables) rather than from NCCL's headers.  Checked against NCCL's
 * sources as of 2.28/2.29 (ext-net/example/nccl/net_v8.h ... net_v11.h,
 * net_device.h, err.h, common.h; src/include/plugin/net/net_v11.h and
 * nccl_net.h).  Names are our own; only the layouts and values matter, and
 * the static assertions at the end pin them for LP64 (x86_64, aarch64).
 *
 * NCCL looks the tables up by name: ncclNetPlugin_v8 ... ncclNetPlugin_v11.
 */
#ifndef DEVMEMTCP_NCCL_NET_ABI_H
#define DEVMEMTCP_NCCL_NET_ABI_H

#include <stddef.h>
#include <stdint.h>

/* ncclResult_t: every plugin function returns one of these (an int). */
typedef enum {
	NCCL_OK = 0,
	NCCL_ERR_CUDA = 1,		/* ncclUnhandledCudaError */
	NCCL_ERR_SYSTEM = 2,		/* ncclSystemError: a system call failed */
	NCCL_ERR_INTERNAL = 3,		/* ncclInternalError: misuse by the caller */
	NCCL_ERR_INVALID_ARGUMENT = 4,	/* ncclInvalidArgument */
	NCCL_ERR_INVALID_USAGE = 5,	/* ncclInvalidUsage: e.g. sizes mismatch */
	NCCL_ERR_REMOTE = 6,		/* ncclRemoteError: the peer went away */
	NCCL_ERR_IN_PROGRESS = 7,	/* ncclInProgress */
} nccl_result_t;

/* ncclDebugLogLevel */
enum nccl_log_level {
	NCCL_LOG_NONE = 0,
	NCCL_LOG_VERSION = 1,
	NCCL_LOG_WARN = 2,
	NCCL_LOG_INFO = 3,
	NCCL_LOG_ABORT = 4,
	NCCL_LOG_TRACE = 5,
};

/* ncclDebugLogSubSys: the flags argument of the logger. */
#define NCCL_SUBSYS_INIT 0x1
#define NCCL_SUBSYS_NET 0x10
#define NCCL_SUBSYS_ENV 0x80
#define NCCL_SUBSYS_ALL (~0ul)

/* ncclDebugLogger_t.  NCCL's INFO() passes the function name as file. */
typedef void (*nccl_logger_t)(enum nccl_log_level level, unsigned long flags,
			      const char *file, int line, const char *fmt, ...);

/* ncclProfilerCallback_t (v10 and later). */
typedef nccl_result_t (*nccl_profiler_cb_t)(void **event_handle, int type,
					    void *phandle, int64_t plugin_id,
					    void *ext_data);

#define NCCL_NET_HANDLE_MAXSIZE 128
#define NCCL_NET_MAX_REQUESTS 32	/* per comm, times maxRecvs for sends */
#define NCCL_MAX_NET_SIZE_BYTES (1ull << 40)	/* largest maxP2pBytes NCCL takes */
/* Hints NCCL may leave in *request on entry to isend/irecv (v9+). */
#define NCCL_NET_OPTIONAL_RECV_COMPLETION 0x1
#define NCCL_NET_MULTI_REQUEST 0x2

/* ptrSupport bits */
#define NCCL_PTR_HOST 0x1
#define NCCL_PTR_CUDA 0x2
#define NCCL_PTR_DMABUF 0x4

/* ncclNetDeviceType */
enum nccl_net_device_type {
	NCCL_NET_DEVICE_HOST = 0,
	NCCL_NET_DEVICE_UNPACK = 1,
};
#define NCCL_NET_DEVICE_INVALID_VERSION 0x0

#define NCCL_NET_MAX_DEVS_PER_NIC 4
#define NCCL_NET_TRAFFIC_CLASS_UNDEF (-1)

/* ncclNetDeviceHandle_v7_t, unchanged up to v11 */
struct nccl_net_device_handle {
	enum nccl_net_device_type type;
	int version;
	void *handle;
	size_t size;
	int needs_proxy_progress;
};

/*
 * NCCL's device-side unpack (netDeviceType NCCL_NET_DEVICE_UNPACK, version
 * 0x7, the same in every release from 2.19 to 2.30): a receive comm's device
 * handle points at an unpack handle in memory the GPU can reach; its meta
 * is a queue of NCCL_UNPACK_QUEUE_DEPTH slots, one per receive in posting
 * order (slot = receive number % depth, the number counted from 0 per
 * comm), each a count and up to NCCL_UNPACK_SLOT_ENTRIES entries.  NCCL's
 * Simple-protocol kernel copies each entry's len bytes from bounce_buf +
 * src_off to the receive's buffer + dst_off before it reads the step; it
 * keeps the comm's receive count in head.  Declared from the layout NCCL
 * publishes in src/device/network/unpack/unpack_defs.h (union loadMeta,
 * struct netUnpackMeta, struct unpackNetDeviceHandle) and net_device.h
 * (NCCL_NET_DEVICE_UNPACK_VERSION); the assertions below and the
 * nccl-unpack-layout test pin the offsets.
 */
#define NCCL_NET_DEVICE_UNPACK_VERSION 0x7
#define NCCL_UNPACK_QUEUE_DEPTH 16		/* NCCL_NET_DEVICE_UNPACK_MAX_QUEUE_DEPTH */
#define NCCL_UNPACK_SLICE_SIZE (4u << 20)	/* NET_UNPACK_MAX_SLICE_SIZE */
#define NCCL_UNPACK_PAGE_SIZE 4096u		/* SLICE_PAGE_SIZE */
#define NCCL_UNPACK_SLOT_ENTRIES \
	(NCCL_UNPACK_SLICE_SIZE / NCCL_UNPACK_PAGE_SIZE * 2)	/* NET_UNPACK_MAX_SLICE_PAGES */

/* union loadMeta: one copy */
struct nccl_unpack_entry {
	uint32_t src_off;	/* from bounce_buf: 32 bits */
	uint32_t len;
	uint64_t dst_off;	/* from the receive's buffer */
} __attribute__((aligned(16)));

/* struct netUnpackMeta */
struct nccl_unpack_meta {
	struct nccl_unpack_entry mem[NCCL_UNPACK_QUEUE_DEPTH][NCCL_UNPACK_SLOT_ENTRIES];
	uint64_t cnt[NCCL_UNPACK_QUEUE_DEPTH];
};

/* struct unpackNetDeviceHandle: what nccl_net_device_handle.handle points
 * at (a device address) */
struct nccl_unpack_handle {
	struct nccl_unpack_meta *meta;	/* device address */
	void *bounce_buf;		/* device address src_off counts from */
	uint64_t head;			/* written by NCCL's kernel */
};

/* ncclNetVDeviceProps_v9_t .. _v11_t */
struct nccl_net_vdevice_props {
	int ndevs;
	int devs[NCCL_NET_MAX_DEVS_PER_NIC];
};

/* ncclNetCommConfig_v10_t / _v11_t */
struct nccl_net_comm_config {
	int traffic_class;	/* NCCL_NET_TRAFFIC_CLASS_UNDEF: not set */
};

/* ncclNetCommAttr_v11_t and ncclNetAttr_v11_t (setNetAttr hints) */
struct nccl_net_comm_attr {
	int32_t max_concurrent_peers;
	int32_t min_concurrent_peers;
	int32_t max_flows_per_peer;
	int32_t min_flows_per_peer;
};

struct nccl_net_attr {
	struct nccl_net_comm_attr send;
	struct nccl_net_comm_attr recv;
	uint32_t op;
	uint32_t algo;
	uint32_t proto;
};

/* ncclNetProperties_v8_t */
struct nccl_net_props_v8 {
	char *name;
	char *pci_path;
	uint64_t guid;
	int ptr_support;
	int reg_is_global;
	int speed;		/* Mbps */
	int port;
	float latency;		/* us */
	int max_comms;
	int max_recvs;		/* largest n of a grouped irecv */
	enum nccl_net_device_type net_device_type;
	int net_device_version;
};

/* ncclNetProperties_v9_t and _v10_t (same layout) */
struct nccl_net_props_v9 {
	char *name;
	char *pci_path;
	uint64_t guid;
	int ptr_support;
	int reg_is_global;
	int force_flush;
	int speed;
	int port;
	float latency;
	int max_comms;
	int max_recvs;
	enum nccl_net_device_type net_device_type;
	int net_device_version;
	struct nccl_net_vdevice_props vprops;
	size_t max_p2p_bytes;
	size_t max_coll_bytes;
};

/* ncclNetProperties_v11_t */
struct nccl_net_props_v11 {
	char *name;
	char *pci_path;
	uint64_t guid;
	int ptr_support;
	int reg_is_global;
	int force_flush;
	int speed;
	int port;
	float latency;
	int max_comms;
	int max_recvs;
	enum nccl_net_device_type net_device_type;
	int net_device_version;
	struct nccl_net_vdevice_props vprops;
	size_t max_p2p_bytes;
	size_t max_coll_bytes;
	int max_multi_request_size;
};

typedef struct nccl_net_device_handle nccl_dev_handle_t;

/* ncclNet_v8_t */
struct nccl_net_v8 {
	const char *name;
	nccl_result_t (*init)(nccl_logger_t log);
	nccl_result_t (*devices)(int *ndev);
	nccl_result_t (*get_properties)(int dev, struct nccl_net_props_v8 *props);
	nccl_result_t (*listen)(int dev, void *handle, void **listen_comm);
	nccl_result_t (*connect)(int dev, void *handle, void **send_comm,
				 nccl_dev_handle_t **send_dev_comm);
	nccl_result_t (*accept)(void *listen_comm, void **recv_comm,
				nccl_dev_handle_t **recv_dev_comm);
	nccl_result_t (*reg_mr)(void *comm, void *data, size_t size, int type,
				void **mhandle);
	nccl_result_t (*reg_mr_dmabuf)(void *comm, void *data, size_t size,
				       int type, uint64_t offset, int fd,
				       void **mhandle);
	nccl_result_t (*dereg_mr)(void *comm, void *mhandle);
	nccl_result_t (*isend)(void *send_comm, void *data, int size, int tag,
			       void *mhandle, void **request);
	nccl_result_t (*irecv)(void *recv_comm, int n, void **data, int *sizes,
			       int *tags, void **mhandles, void **request);
	nccl_result_t (*iflush)(void *recv_comm, int n, void **data, int *sizes,
				void **mhandles, void **request);
	nccl_result_t (*test)(void *request, int *done, int *sizes);
	nccl_result_t (*close_send)(void *send_comm);
	nccl_result_t (*close_recv)(void *recv_comm);
	nccl_result_t (*close_listen)(void *listen_comm);
	nccl_result_t (*get_device_mr)(void *comm, void *mhandle, void **dptr_mhandle);
	nccl_result_t (*irecv_consumed)(void *recv_comm, int n, void *request);
};

/* ncclNet_v9_t: size_t sizes, makeVDevice */
struct nccl_net_v9 {
	const char *name;
	nccl_result_t (*init)(nccl_logger_t log);
	nccl_result_t (*devices)(int *ndev);
	nccl_result_t (*get_properties)(int dev, struct nccl_net_props_v9 *props);
	nccl_result_t (*listen)(int dev, void *handle, void **listen_comm);
	nccl_result_t (*connect)(int dev, void *handle, void **send_comm,
				 nccl_dev_handle_t **send_dev_comm);
	nccl_result_t (*accept)(void *listen_comm, void **recv_comm,
				nccl_dev_handle_t **recv_dev_comm);
	nccl_result_t (*reg_mr)(void *comm, void *data, size_t size, int type,
				void **mhandle);
	nccl_result_t (*reg_mr_dmabuf)(void *comm, void *data, size_t size,
				       int type, uint64_t offset, int fd,
				       void **mhandle);
	nccl_result_t (*dereg_mr)(void *comm, void *mhandle);
	nccl_result_t (*isend)(void *send_comm, void *data, size_t size, int tag,
			       void *mhandle, void **request);
	nccl_result_t (*irecv)(void *recv_comm, int n, void **data, size_t *sizes,
			       int *tags, void **mhandles, void **request);
	nccl_result_t (*iflush)(void *recv_comm, int n, void **data, int *sizes,
				void **mhandles, void **request);
	nccl_result_t (*test)(void *request, int *done, int *sizes);
	nccl_result_t (*close_send)(void *send_comm);
	nccl_result_t (*close_recv)(void *recv_comm);
	nccl_result_t (*close_listen)(void *listen_comm);
	nccl_result_t (*get_device_mr)(void *comm, void *mhandle, void **dptr_mhandle);
	nccl_result_t (*irecv_consumed)(void *recv_comm, int n, void *request);
	nccl_result_t (*make_vdevice)(int *d, struct nccl_net_vdevice_props *props);
};

/* ncclNet_v10_t: profiler callback at init, comm config at connect, a
 * profiler handle per isend/irecv */
struct nccl_net_v10 {
	const char *name;
	nccl_result_t (*init)(nccl_logger_t log, nccl_profiler_cb_t prof);
	nccl_result_t (*devices)(int *ndev);
	nccl_result_t (*get_properties)(int dev, struct nccl_net_props_v9 *props);
	nccl_result_t (*listen)(int dev, void *handle, void **listen_comm);
	nccl_result_t (*connect)(int dev, struct nccl_net_comm_config *config,
				 void *handle, void **send_comm,
				 nccl_dev_handle_t **send_dev_comm);
	nccl_result_t (*accept)(void *listen_comm, void **recv_comm,
				nccl_dev_handle_t **recv_dev_comm);
	nccl_result_t (*reg_mr)(void *comm, void *data, size_t size, int type,
				void **mhandle);
	nccl_result_t (*reg_mr_dmabuf)(void *comm, void *data, size_t size,
				       int type, uint64_t offset, int fd,
				       void **mhandle);
	nccl_result_t (*dereg_mr)(void *comm, void *mhandle);
	nccl_result_t (*isend)(void *send_comm, void *data, size_t size, int tag,
			       void *mhandle, void *phandle, void **request);
	nccl_result_t (*irecv)(void *recv_comm, int n, void **data, size_t *sizes,
			       int *tags, void **mhandles, void **phandles,
			       void **request);
	nccl_result_t (*iflush)(void *recv_comm, int n, void **data, int *sizes,
				void **mhandles, void **request);
	nccl_result_t (*test)(void *request, int *done, int *sizes);
	nccl_result_t (*close_send)(void *send_comm);
	nccl_result_t (*close_recv)(void *recv_comm);
	nccl_result_t (*close_listen)(void *listen_comm);
	nccl_result_t (*get_device_mr)(void *comm, void *mhandle, void **dptr_mhandle);
	nccl_result_t (*irecv_consumed)(void *recv_comm, int n, void *request);
	nccl_result_t (*make_vdevice)(int *d, struct nccl_net_vdevice_props *props);
};

/* ncclNet_v11_t: init per communicator with a context that listen and
 * connect receive, finalize per context, setNetAttr */
struct nccl_net_v11 {
	const char *name;
	nccl_result_t (*init)(void **ctx, uint64_t comm_id,
			      struct nccl_net_comm_config *config,
			      nccl_logger_t log, nccl_profiler_cb_t prof);
	nccl_result_t (*devices)(int *ndev);
	nccl_result_t (*get_properties)(int dev, struct nccl_net_props_v11 *props);
	nccl_result_t (*listen)(void *ctx, int dev, void *handle,
				void **listen_comm);
	nccl_result_t (*connect)(void *ctx, int dev, void *handle,
				 void **send_comm,
				 nccl_dev_handle_t **send_dev_comm);
	nccl_result_t (*accept)(void *listen_comm, void **recv_comm,
				nccl_dev_handle_t **recv_dev_comm);
	nccl_result_t (*reg_mr)(void *comm, void *data, size_t size, int type,
				void **mhandle);
	nccl_result_t (*reg_mr_dmabuf)(void *comm, void *data, size_t size,
				       int type, uint64_t offset, int fd,
				       void **mhandle);
	nccl_result_t (*dereg_mr)(void *comm, void *mhandle);
	nccl_result_t (*isend)(void *send_comm, void *data, size_t size, int tag,
			       void *mhandle, void *phandle, void **request);
	nccl_result_t (*irecv)(void *recv_comm, int n, void **data, size_t *sizes,
			       int *tags, void **mhandles, void **phandles,
			       void **request);
	nccl_result_t (*iflush)(void *recv_comm, int n, void **data, int *sizes,
				void **mhandles, void **request);
	nccl_result_t (*test)(void *request, int *done, int *sizes);
	nccl_result_t (*close_send)(void *send_comm);
	nccl_result_t (*close_recv)(void *recv_comm);
	nccl_result_t (*close_listen)(void *listen_comm);
	nccl_result_t (*get_device_mr)(void *comm, void *mhandle, void **dptr_mhandle);
	nccl_result_t (*irecv_consumed)(void *recv_comm, int n, void *request);
	nccl_result_t (*make_vdevice)(int *d, struct nccl_net_vdevice_props *props);
	nccl_result_t (*finalize)(void *ctx);
	nccl_result_t (*set_net_attr)(void *ctx, struct nccl_net_attr *attr);
};

/* The layouts NCCL reads, for LP64.  A mismatch here means a field was
 * added, dropped or reordered: NCCL would call the wrong function. */
#if defined(__LP64__)
#define NCCL_ABI_CHECK(type, field, off)                                       \
	_Static_assert(offsetof(type, field) == (off), #type "." #field)
_Static_assert(sizeof(nccl_result_t) == 4, "ncclResult_t is an int");
_Static_assert(sizeof(enum nccl_net_device_type) == 4, "ncclNetDeviceType is an int");
_Static_assert(sizeof(struct nccl_net_device_handle) == 32, "ncclNetDeviceHandle_v7_t");
NCCL_ABI_CHECK(struct nccl_net_device_handle, needs_proxy_progress, 24);
_Static_assert(sizeof(struct nccl_net_vdevice_props) == 20, "ncclNetVDeviceProps_t");
_Static_assert(sizeof(struct nccl_net_comm_config) == 4, "ncclNetCommConfig_t");
_Static_assert(sizeof(struct nccl_net_attr) == 44, "ncclNetAttr_v11_t");

_Static_assert(sizeof(struct nccl_unpack_entry) == 16, "union loadMeta");
NCCL_ABI_CHECK(struct nccl_unpack_entry, len, 4);
NCCL_ABI_CHECK(struct nccl_unpack_entry, dst_off, 8);
_Static_assert(NCCL_UNPACK_SLOT_ENTRIES == 2048, "NET_UNPACK_MAX_SLICE_PAGES");
NCCL_ABI_CHECK(struct nccl_unpack_meta, cnt, 16 * 2048 * 16);
_Static_assert(sizeof(struct nccl_unpack_meta) == 16 * 2048 * 16 + 16 * 8,
	       "struct netUnpackMeta");
_Static_assert(sizeof(struct nccl_unpack_handle) == 24, "struct unpackNetDeviceHandle");
NCCL_ABI_CHECK(struct nccl_unpack_handle, bounce_buf, 8);
NCCL_ABI_CHECK(struct nccl_unpack_handle, head, 16);

_Static_assert(sizeof(struct nccl_net_props_v8) == 64, "ncclNetProperties_v8_t");
NCCL_ABI_CHECK(struct nccl_net_props_v8, guid, 16);
NCCL_ABI_CHECK(struct nccl_net_props_v8, speed, 32);
NCCL_ABI_CHECK(struct nccl_net_props_v8, latency, 40);
NCCL_ABI_CHECK(struct nccl_net_props_v8, max_recvs, 48);
NCCL_ABI_CHECK(struct nccl_net_props_v8, net_device_version, 56);

_Static_assert(sizeof(struct nccl_net_props_v9) == 104, "ncclNetProperties_v9_t");
NCCL_ABI_CHECK(struct nccl_net_props_v9, force_flush, 32);
NCCL_ABI_CHECK(struct nccl_net_props_v9, latency, 44);
NCCL_ABI_CHECK(struct nccl_net_props_v9, max_recvs, 52);
NCCL_ABI_CHECK(struct nccl_net_props_v9, net_device_version, 60);
NCCL_ABI_CHECK(struct nccl_net_props_v9, vprops, 64);
NCCL_ABI_CHECK(struct nccl_net_props_v9, max_p2p_bytes, 88);
NCCL_ABI_CHECK(struct nccl_net_props_v9, max_coll_bytes, 96);

_Static_assert(sizeof(struct nccl_net_props_v11) == 112, "ncclNetProperties_v11_t");
NCCL_ABI_CHECK(struct nccl_net_props_v11, max_coll_bytes, 96);
NCCL_ABI_CHECK(struct nccl_net_props_v11, max_multi_request_size, 104);

_Static_assert(sizeof(struct nccl_net_v8) == 19 * 8, "ncclNet_v8_t: name + 18 functions");
NCCL_ABI_CHECK(struct nccl_net_v8, isend, 80);
NCCL_ABI_CHECK(struct nccl_net_v8, test, 104);
NCCL_ABI_CHECK(struct nccl_net_v8, irecv_consumed, 144);
_Static_assert(sizeof(struct nccl_net_v9) == 20 * 8, "ncclNet_v9_t: + makeVDevice");
NCCL_ABI_CHECK(struct nccl_net_v9, make_vdevice, 152);
_Static_assert(sizeof(struct nccl_net_v10) == 20 * 8, "ncclNet_v10_t");
NCCL_ABI_CHECK(struct nccl_net_v10, make_vdevice, 152);
_Static_assert(sizeof(struct nccl_net_v11) == 22 * 8, "ncclNet_v11_t: + finalize, setNetAttr");
NCCL_ABI_CHECK(struct nccl_net_v11, finalize, 160);
NCCL_ABI_CHECK(struct nccl_net_v11, set_net_attr, 168);
#undef NCCL_ABI_CHECK
#endif

#endif

/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * libdevmemtcp - receive TCP payload straight into device memory (and send
 * from it) with Linux Device Memory TCP.
 *
 * This is the only installed header.  See devmemtcp(7) for the model.
 *
 * Conventions:
 *  - every function returns >= 0 on success or a negative errno; errno is
 *    never relied on and left untouched;
 *  - a failing function records a message (the kernel's extack text, if any,
 *    plus the library's explanation of the fix) on the object it acted on:
 *    devmemtcp_ctx_errmsg() for constructors, devmemtcp_<object>_errmsg()
 *    for operations on an object;
 *  - options structs start with "size_t sz" and are initialised with
 *    DEVMEMTCP_OPTS(); fields past sz are not read (an older caller's
 *    struct is smaller); non-zero bytes after the last field this version
 *    knows (reserved fields, or a newer caller's fields) give -EINVAL.
 */
#ifndef DEVMEMTCP_H
#define DEVMEMTCP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DEVMEMTCP_VERSION_MAJOR 0
#define DEVMEMTCP_VERSION_MINOR 1
#define DEVMEMTCP_VERSION_MICRO 0

/* Declare and zero an options struct of type "struct devmemtcp_<type>" and
 * set its sz, e.g. DEVMEMTCP_OPTS(rx_opts, o, .ctrl_size = 8192).  The
 * structs have no tail padding (reserved fields take its place), so every
 * byte the library checks is a field the initializer zeroes. */
#define DEVMEMTCP_OPTS(TYPE, NAME, ...)                                        \
	struct devmemtcp_##TYPE NAME = { .sz = sizeof(struct devmemtcp_##TYPE), \
					 __VA_ARGS__ }

const char *devmemtcp_version(void);

/* ------------------------------------------------------------------------ */
/* Library context: logging and the message of the last failed constructor.  */

enum devmemtcp_log_level {
	/* log_level: nothing at all, whatever DEVMEMTCP_LOG says */
	DEVMEMTCP_LOG_OFF = -1,
	/* 0 is the default (see struct devmemtcp_ctx_opts), not "none" */
	DEVMEMTCP_LOG_NONE = 0,
	DEVMEMTCP_LOG_ERR = 3,
	DEVMEMTCP_LOG_WARN = 4,
	DEVMEMTCP_LOG_INFO = 6,
	DEVMEMTCP_LOG_DEBUG = 7,
};

typedef void (*devmemtcp_log_fn)(void *user, int level, const char *msg);

struct devmemtcp_ctx_opts {
	size_t sz;
	/* Receives every message at or below log_level.  NULL: stderr. */
	devmemtcp_log_fn log_fn;
	void *log_user;
	/* 0: the DEVMEMTCP_LOG environment variable (none, err, warn, info,
	 * debug) when set, else DEVMEMTCP_LOG_ERR with a log_fn and nothing
	 * without one: the library is silent unless asked.
	 * DEVMEMTCP_LOG_OFF: nothing, whatever the environment says. */
	int log_level;
	uint32_t reserved;	/* zero */
};

struct devmemtcp_ctx;

int devmemtcp_ctx_new(const struct devmemtcp_ctx_opts *opts,
		      struct devmemtcp_ctx **ctx);
void devmemtcp_ctx_free(struct devmemtcp_ctx *ctx);
/* Message of the last failed call made with this context ("" if none);
 * ctx NULL: the calling thread's last failure of a call that has no object
 * to keep it (devmemtcp_ctx_new, devmemtcp_flow_parse). */
const char *devmemtcp_ctx_errmsg(const struct devmemtcp_ctx *ctx);

/* ------------------------------------------------------------------------ */
/* Netdev queries (generic netlink family "netdev").                        */

enum devmemtcp_queue_type {
	DEVMEMTCP_QUEUE_RX = 0,
	DEVMEMTCP_QUEUE_TX = 1,
};

struct devmemtcp_queue {
	uint32_t id;
	uint32_t type;		/* enum devmemtcp_queue_type */
	uint32_t ifindex;
	uint32_t napi_id;	/* 0 when not reported */
	uint32_t dmabuf_id;	/* binding id, 0 when no dma-buf is bound */
	uint8_t io_uring;	/* an io_uring zcrx provider is installed */
	uint8_t xsk;		/* an AF_XDP socket uses the queue */
	uint8_t reserved[6];
};

/* Fill up to max entries with the RX and TX queues of ifindex; returns the
 * number of queues the device has (which may exceed max). */
int devmemtcp_queue_list(struct devmemtcp_ctx *ctx, int ifindex,
			 struct devmemtcp_queue *queues, size_t max);

struct devmemtcp_qstats {
	size_t sz;
	uint64_t rx_packets;
	uint64_t rx_bytes;
	uint64_t rx_alloc_fail;
	uint64_t rx_hw_drops;
	uint64_t tx_packets;
	uint64_t tx_bytes;
};

/* Per-queue statistics of (ifindex, type, queue), or of the whole device
 * when queue < 0.  Counters the driver does not report read UINT64_MAX. */
int devmemtcp_qstats_get(struct devmemtcp_ctx *ctx, int ifindex, int type,
			 int queue, struct devmemtcp_qstats *stats);

/* ------------------------------------------------------------------------ */
/* Buffers: a dma-buf plus a segment table mapping dma-buf offsets to       */
/* device (or CPU) addresses.                                               */

enum devmemtcp_provider {
	DEVMEMTCP_PROVIDER_UDMABUF = 1,	/* host memory through /dev/udmabuf */
	DEVMEMTCP_PROVIDER_IMPORT = 2,	/* the caller's dma-buf fd */
	DEVMEMTCP_PROVIDER_CUDA = 3,	/* NVIDIA GPU memory (libcuda at run time) */
	DEVMEMTCP_PROVIDER_DRM = 4,	/* a GEM buffer exported with PRIME */
};

/* One contiguous run of the dma-buf offset space: bytes [offset, offset+len)
 * of the dma-buf live at device address addr. */
struct devmemtcp_segment {
	uint64_t offset;
	uint64_t len;
	uint64_t addr;
};

enum devmemtcp_buf_flags {
	DEVMEMTCP_BUF_HUGETLB = 1u << 0,	/* udmabuf: back with 2 MiB pages */
	DEVMEMTCP_BUF_KEEP_FD = 1u << 1,	/* import: do not take ownership of fd */
};

struct devmemtcp_buf_opts {
	size_t sz;
	uint32_t provider;	/* enum devmemtcp_provider */
	uint32_t flags;		/* enum devmemtcp_buf_flags */
	uint64_t size;		/* bytes; rounded up to the page size */
	/* import: the dma-buf fd and its segment table (NULL: one segment
	 * mapping offset 0.. to address 0..). */
	int fd;
	const struct devmemtcp_segment *segments;
	size_t nsegments;
	/* CUDA: device ordinal; ptr != 0 imports that existing allocation
	 * instead of allocating; chunk_size > 0 builds the range from
	 * physical chunks of that size. */
	int cuda_device;
	uint64_t cuda_ptr;
	uint64_t cuda_chunk_size;
	/* DRM: the node to allocate on (NULL: the first DRM device that can
	 * allocate dumb buffers; a render node stands for its device's
	 * primary node, where the kernel allows dumb buffers). */
	const char *drm_path;
	/* DRM: drm_handle != 0 exports that GEM handle of the caller's DRM fd
	 * drm_fd instead of allocating (the caller keeps both).  A PRIME fd
	 * goes through DEVMEMTCP_PROVIDER_IMPORT. */
	int drm_fd;
	uint32_t drm_handle;
};

struct devmemtcp_buf;

int devmemtcp_buf_new(struct devmemtcp_ctx *ctx,
		      const struct devmemtcp_buf_opts *opts,
		      struct devmemtcp_buf **buf);
/* Drops the creator's reference: bindings and receive handles that use
 * the buffer keep their own until they close. */
void devmemtcp_buf_free(struct devmemtcp_buf *buf);
const char *devmemtcp_buf_errmsg(const struct devmemtcp_buf *buf);

int devmemtcp_buf_fd(const struct devmemtcp_buf *buf);
uint64_t devmemtcp_buf_size(const struct devmemtcp_buf *buf);
int devmemtcp_buf_provider(const struct devmemtcp_buf *buf);
/* Number of segments; *segs points at the buffer's own sorted table. */
size_t devmemtcp_buf_segments(const struct devmemtcp_buf *buf,
			      const struct devmemtcp_segment **segs);
/* Device address of dma-buf offset off: 0 and *addr set, or -ERANGE. */
int devmemtcp_buf_addr(const struct devmemtcp_buf *buf, uint64_t off,
		       uint64_t *addr);
/* CPU access to host-backed buffers (udmabuf, DRM), bracketed with
 * DMA_BUF_IOCTL_SYNC; -EOPNOTSUPP for device memory. */
int devmemtcp_buf_read(struct devmemtcp_buf *buf, uint64_t off, void *dst,
		       size_t len);
int devmemtcp_buf_write(struct devmemtcp_buf *buf, uint64_t off,
			const void *src, size_t len);

/* ------------------------------------------------------------------------ */
/* Bindings: a dma-buf bound to NIC queues.  Each binding owns its netlink  */
/* socket; devmemtcp_binding_close() unbinds, nothing else does.            */

struct devmemtcp_bind_opts {
	size_t sz;
	/* RX niov size in bytes (power of two >= page size), 0: page size.
	 * Needs a kernel with NETDEV_A_DMABUF_RX_PAGE_SIZE. */
	uint32_t rx_page_size;
	/* Skip the queue-get check that every queue shows the binding. */
	bool no_verify;
	/* Bind through devmemtcp-broker(8) even with CAP_NET_ADMIN (without
	 * it, bind-rx goes through the broker whenever one is installed, and
	 * bind-tx when the kernel refuses it with EPERM). */
	bool broker;
	uint8_t reserved[2];	/* zero */
};

struct devmemtcp_binding;

int devmemtcp_bind_rx(struct devmemtcp_ctx *ctx, int ifindex,
		      const uint32_t *queues, size_t nqueues,
		      struct devmemtcp_buf *buf,
		      const struct devmemtcp_bind_opts *opts,
		      struct devmemtcp_binding **binding);
void devmemtcp_binding_close(struct devmemtcp_binding *binding);
uint32_t devmemtcp_binding_id(const struct devmemtcp_binding *binding);
struct devmemtcp_buf *
devmemtcp_binding_buf(const struct devmemtcp_binding *binding);

/* ------------------------------------------------------------------------ */
/* Receive.                                                                  */

enum devmemtcp_frag_flags {
	/* Bytes copied into the caller's linear buffer at .offset (headers or
	 * payload the NIC did not split, or a steering miss); no token. */
	DEVMEMTCP_FRAG_LINEAR = 1u << 0,
	/* From a binding this receiver does not know: a steering error.  The
	 * token is valid and must still be released; addr is 0. */
	DEVMEMTCP_FRAG_FOREIGN = 1u << 1,
};

struct devmemtcp_frag {
	uint64_t offset;	/* dma-buf offset (linear: offset in the caller's buffer) */
	uint64_t addr;		/* device address of the bytes, 0 if unknown */
	uint32_t len;
	uint32_t token;
	uint32_t binding_id;
	uint32_t flags;		/* enum devmemtcp_frag_flags */
};

struct devmemtcp_rx_opts {
	size_t sz;
	/* Initial control buffer in bytes (0: room for 64 fragments); grown
	 * on MSG_CTRUNC or ETOOSMALL. */
	size_t ctrl_size;
	/* Released tokens are queued and sent to the kernel in batches of at
	 * most this many fragments (0 and max: 1024, the kernel's limit).
	 * Pending releases are always flushed before a blocking receive. */
	uint32_t release_batch;
	uint32_t reserved;	/* zero */
	/* Receive through this io_uring zero-copy receive handle instead of
	 * recvmsg(MSG_SOCK_DEVMEM) (devmemtcp_zcrx_new(3)); NULL: devmem. */
	struct devmemtcp_zcrx *zcrx;
};

struct devmemtcp_rx_stats {
	size_t sz;
	uint64_t bytes;			/* dmabuf + linear */
	uint64_t dmabuf_bytes;
	uint64_t linear_bytes;
	uint64_t frags;			/* dma-buf fragments */
	uint64_t recv_calls;
	uint64_t steering_misses;	/* receives with plain data only */
	uint64_t foreign_frags;		/* fragments of unknown bindings */
	uint64_t tokens_outstanding;	/* received, not yet released */
	uint64_t tokens_outstanding_max;
	uint64_t tokens_released;
	uint64_t dontneed_calls;
	uint64_t partial_returns;	/* DONTNEED freed fewer than asked */
	uint64_t ctrl_grows;
	uint64_t deferred_pending;	/* fragments waiting on a completion */
};

struct devmemtcp_rx;

/* Wrap the connected TCP socket fd (not closed by devmemtcp_rx_free);
 * -EPROTOTYPE for other sockets, -ENOTCONN when it is not connected. */
int devmemtcp_rx_new(struct devmemtcp_ctx *ctx, int fd,
		     const struct devmemtcp_rx_opts *opts,
		     struct devmemtcp_rx **rx);
/* Releases every token still held (waiting for deferred completions). */
void devmemtcp_rx_free(struct devmemtcp_rx *rx);
const char *devmemtcp_rx_errmsg(const struct devmemtcp_rx *rx);
int devmemtcp_rx_fd(const struct devmemtcp_rx *rx);

/* Fragments of binding_id map to addresses through buf.  Fragments of
 * unregistered ids are flagged DEVMEMTCP_FRAG_FOREIGN. */
int devmemtcp_rx_add_buf(struct devmemtcp_rx *rx, uint32_t binding_id,
			 const struct devmemtcp_buf *buf);

/*
 * Receive up to len bytes with recvmsg(MSG_SOCK_DEVMEM).  linear (len bytes)
 * receives bytes that did not land in device memory.  Fills up to max_frags
 * entries in stream order; returns their number, 0 at end of stream, or a
 * negative errno (-EAGAIN on a non-blocking socket with nothing to read).
 */
int devmemtcp_rx_recv(struct devmemtcp_rx *rx, struct devmemtcp_frag *frags,
		      size_t max_frags, void *linear, size_t len);

/* Defined: devmemtcp_rx_release, _release_after, _flush, _release_all,
 * _add_buf, _stats and devmemtcp_gpu_release_after may be called from any
 * thread while another thread is in devmemtcp_rx_recv on the same handle,
 * so callers can test for it instead of serialising those calls. */
#define DEVMEMTCP_RELEASE_ANY_THREAD 1

/* Queue the tokens of n fragments for release (linear entries are
 * skipped).  -EINVAL if a token is not outstanding: nothing is queued.  A
 * failed SO_DEVMEM_DONTNEED returns its errno, but the tokens stay queued
 * for the next flush.  Any thread may release (and flush) while another
 * thread receives on the handle: see devmemtcp_rx_release(3). */
int devmemtcp_rx_release(struct devmemtcp_rx *rx,
			 const struct devmemtcp_frag *frags, size_t n);

/* Deferred release: done(arg, wait) returns 1 once the bytes of the n
 * fragments were consumed (blocking when wait is true), 0 if not yet, or a
 * negative errno.  After it returned 1 it is not called again, and arg
 * belongs to the caller again. */
typedef int (*devmemtcp_done_fn)(void *arg, bool wait);
int devmemtcp_rx_release_after(struct devmemtcp_rx *rx,
			       const struct devmemtcp_frag *frags, size_t n,
			       devmemtcp_done_fn done, void *arg);

/* Hand queued releases to the kernel now (after polling completions);
 * returns the number of tokens released. */
int devmemtcp_rx_flush(struct devmemtcp_rx *rx);
/* Release every outstanding token now (deferred ones after waiting). */
int devmemtcp_rx_release_all(struct devmemtcp_rx *rx);

int devmemtcp_rx_stats(const struct devmemtcp_rx *rx,
		       struct devmemtcp_rx_stats *stats);

/* ------------------------------------------------------------------------ */
/* io_uring zero-copy receive (zcrx): the second receive backend.           */

/*
 * A zcrx handle owns one RX queue of an interface and the io_uring that
 * receives on it (Linux 6.15; dma-buf areas 6.16).  Sockets join it through
 * devmemtcp_rx_new() with opts.zcrx; their fragments and releases are those
 * of devmem.  One thread drives the ring: the first that receives on one of
 * its sockets or waits on it.
 */
enum devmemtcp_zcrx_flags {
	/* Register a host-memory buffer (udmabuf) as a dma-buf area instead of
	 * a user-memory area; device memory always is a dma-buf area.  The
	 * kernel cannot copy into a dma-buf area: bytes it did not place
	 * zero-copy (a steering miss) fail the receive. */
	DEVMEMTCP_ZCRX_DMABUF_AREA = 1u << 0,
};

struct devmemtcp_zcrx_opts {
	size_t sz;
	uint32_t flags;		/* enum devmemtcp_zcrx_flags */
	/* Refill ring entries, a power of two (0: one per buffer of the area,
	 * at most 32768). */
	uint32_t rq_entries;
	/* Completion queue entries, a power of two (0: twice the area's
	 * buffers, from 256 to 65536). */
	uint32_t cq_entries;
	uint32_t reserved;	/* zero */
};

struct devmemtcp_zcrx_stats {
	size_t sz;
	uint64_t sockets;		/* registered now */
	uint64_t syscalls;		/* system calls since setup */
	uint64_t enter_calls;		/* ... of which io_uring_enter */
	uint64_t completions;		/* CQEs read */
	uint64_t frags;			/* data completions */
	uint64_t bytes;
	uint64_t held;			/* buffers handed out, not yet released */
	uint64_t held_max;
	uint64_t refills;		/* entries written to the refill ring */
	uint64_t refill_queued;		/* releases that waited in the queue */
	uint64_t refill_waiting;	/* ... that wait there now */
	uint64_t refill_queue_max;	/* most releases waiting at once */
	uint64_t refill_ring_max;	/* most entries seen in the refill ring */
	uint64_t rearms;		/* receives armed again after they ended */
	uint64_t steering_misses;	/* receives of flows on another queue */
	int64_t copy_count;		/* kernel copy fallbacks, -1: not reported */
	int64_t copy_bytes;
	uint32_t area_buffers;		/* buffers of the area */
	uint32_t buffer_size;		/* bytes per buffer */
	uint32_t rq_entries;
	uint32_t dmabuf_area;		/* 1: dma-buf area, 0: user memory */
};

struct devmemtcp_zcrx;

/*
 * Register RX queue `queue` of ifindex (in the calling thread's network
 * namespace) for zero-copy receive into buf.  Set the NIC up first with
 * devmemtcp_nic_open() without a buffer (header split, RSS, the flows'
 * rules).  Needs CAP_NET_ADMIN; -EOPNOTSUPP before Linux 6.15.
 */
int devmemtcp_zcrx_new(struct devmemtcp_ctx *ctx, int ifindex, uint32_t queue,
		       struct devmemtcp_buf *buf,
		       const struct devmemtcp_zcrx_opts *opts,
		       struct devmemtcp_zcrx **zcrx);
/* Close the ring and wait until the queue is released.  Free the sockets'
 * receive handles first. */
void devmemtcp_zcrx_free(struct devmemtcp_zcrx *zcrx);
const char *devmemtcp_zcrx_errmsg(const struct devmemtcp_zcrx *zcrx);
/*
 * Drive the ring (from the ring's thread) until one of its sockets has
 * fragments or its end to receive, or timeout_ms passed (< 0: no limit).
 * Returns the number of such sockets, 0 on timeout.
 */
int devmemtcp_zcrx_wait(struct devmemtcp_zcrx *zcrx, int timeout_ms);
int devmemtcp_zcrx_stats(const struct devmemtcp_zcrx *zcrx,
			 struct devmemtcp_zcrx_stats *stats);

/* ------------------------------------------------------------------------ */
/* NIC setup and probe: header split, RSS, ntuple rules, put back on close. */

/*
 * A flow to steer to the devmem queues: TCP over IPv4 or IPv6, each field
 * with a mask (bits set = compared; an all-zero mask matches anything).
 * devmemtcp_flow_parse() fills one from text.
 */
enum devmemtcp_flow_flags {
	/* .queue selects the handle's queue (an index into its queue list);
	 * otherwise flows go to the RSS context over all devmem queues, or
	 * round-robin to the queues where there is no context. */
	DEVMEMTCP_FLOW_QUEUE = 1u << 0,
};

struct devmemtcp_flow {
	int family;		/* AF_INET or AF_INET6 */
	uint32_t flags;		/* enum devmemtcp_flow_flags */
	uint8_t src_addr[16];	/* network byte order; IPv4 uses 4 bytes */
	uint8_t src_mask[16];
	uint8_t dst_addr[16];
	uint8_t dst_mask[16];
	uint16_t src_port;	/* host byte order */
	uint16_t src_port_mask;
	uint16_t dst_port;
	uint16_t dst_port_mask;
	uint32_t queue;
};

/*
 * Parse "[tcp4|tcp6] [src-ip ADDR[/LEN]] [dst-ip ADDR[/LEN]] [src-port N]
 * [dst-port N] [queue I]" (ethtool -N words, each once; at least one match
 * field; LEN >= 1, ports 1..65535).  0, or -EINVAL with the message in
 * devmemtcp_ctx_errmsg(NULL).
 */
int devmemtcp_flow_parse(const char *text, struct devmemtcp_flow *flow);

enum devmemtcp_nic_flags {
	/* A dead process's journal is found: undo its changes first instead
	 * of failing with -ESTALE. */
	DEVMEMTCP_NIC_RECOVER = 1u << 0,
	/* Never create an RSS context; rules steer to single queues. */
	DEVMEMTCP_NIC_NO_RSS_CONTEXT = 1u << 1,
	/* Leave the default RSS table alone (the caller keeps other traffic
	 * off the devmem queues some other way). */
	DEVMEMTCP_NIC_KEEP_RSS = 1u << 2,
	/* Accept ntuple rules of others that match some of a flow's packets
	 * before its rule does (by default refused with EEXIST). */
	DEVMEMTCP_NIC_ALLOW_SHADOW = 1u << 3,
	/* devmemtcp_nic_recover(): undo the setups of live owners too (their
	 * bindings stay until they exit). */
	DEVMEMTCP_NIC_RECOVER_ALL = 1u << 4,
	/* Set up through devmemtcp-broker(8) even with CAP_NET_ADMIN; a
	 * process without CAP_NET_ADMIN goes through it whenever one is
	 * installed (devmemtcp(7), "Privileges"). */
	DEVMEMTCP_NIC_BROKER = 1u << 5,
};

struct devmemtcp_nic_opts {
	size_t sz;
	uint32_t flags;			/* enum devmemtcp_nic_flags */
	/* Devmem RX queues: the ids in queues[0..nqueues), or, when queues is
	 * NULL, the last nqueues RX queues (0: 1). */
	const uint32_t *queues;
	uint32_t nqueues;
	const struct devmemtcp_flow *flows;
	size_t nflows;
	/* bind-rx this buffer to the queues (NULL: no binding). */
	struct devmemtcp_buf *buf;
	const struct devmemtcp_bind_opts *bind_opts;
	/* Journal and lock directory; NULL: $DEVMEMTCP_RUN_DIR, else
	 * /run/devmemtcp. */
	const char *run_dir;
};

struct devmemtcp_nic;

/*
 * Prepare ifname for devmem: journal + lock, snapshot, header split on and
 * hds-thresh 0, RSS kept off the devmem queues (and an RSS context over
 * them), one ntuple rule per flow, optional bind-rx verified with
 * queue-get.  On failure every finished step is undone and the message on
 * ctx names the step and the fix.
 */
int devmemtcp_nic_open(struct devmemtcp_ctx *ctx, const char *ifname,
		       const struct devmemtcp_nic_opts *opts,
		       struct devmemtcp_nic **nic);
/* Undo everything this handle changed, in reverse order, and free it.
 * Returns 0, or the first undo error (message on the context). */
int devmemtcp_nic_close(struct devmemtcp_nic *nic);
const char *devmemtcp_nic_errmsg(const struct devmemtcp_nic *nic);
/* The devmem queue ids; returns their number. */
int devmemtcp_nic_queues(const struct devmemtcp_nic *nic,
			 const uint32_t **queues);
/* The binding made by open (NULL without opts->buf); owned by the handle. */
struct devmemtcp_binding *
devmemtcp_nic_binding(const struct devmemtcp_nic *nic);
/* Steer one more flow; returns its id (>= 0) for removal. */
int devmemtcp_nic_add_flow(struct devmemtcp_nic *nic,
			   const struct devmemtcp_flow *flow);
int devmemtcp_nic_remove_flow(struct devmemtcp_nic *nic, int flow_id);

struct devmemtcp_nic_stats {
	size_t sz;
	uint64_t setup_round_trips;	/* netlink requests made by open */
	uint64_t setup_ioctls;		/* SIOCETHTOOL calls made by open */
	uint64_t round_trips;		/* since open, all */
	uint64_t ioctls;
	uint32_t steps;			/* changes applied by open */
	uint32_t rules;			/* ntuple rules owned now */
	uint32_t rss_context;		/* 0: none created */
};
int devmemtcp_nic_stats(const struct devmemtcp_nic *nic,
			struct devmemtcp_nic_stats *stats);

/*
 * Undo the changes of a dead process recorded in the journal of ifname.
 * Returns 1 when something was undone, 0 when there was no journal,
 * -EBUSY when its owner is still alive.  opts: only run_dir is used.
 */
int devmemtcp_nic_recover(struct devmemtcp_ctx *ctx, const char *ifname,
			  const struct devmemtcp_nic_opts *opts);

#define DEVMEMTCP_PROBE_MAX_PROBLEMS 16

struct devmemtcp_probe_problem {
	char what[160];		/* "header split is off" */
	char fix[320];		/* "ethtool -G eth0 tcp-data-split on" */
};

#define DEVMEMTCP_PROBE_MAX_DRM 8

struct devmemtcp_probe_drm {
	char node[64];		/* "/dev/dri/card0" */
	char driver[32];	/* "vgem"; "" when error is set */
	int error;		/* 0, or why the node could not be queried
				 * (negative errno: -EACCES, -ENOTTY, ...) */
};

enum devmemtcp_probe_flags {
	/* Bind a small udmabuf to the last RX queue and release it. */
	DEVMEMTCP_PROBE_TRY_BIND = 1u << 0,
};

struct devmemtcp_probe_opts {
	size_t sz;
	uint32_t flags;		/* enum devmemtcp_probe_flags */
	uint32_t reserved;	/* zero */
	/* Where the owners' files are (as devmemtcp_nic_opts.run_dir). */
	const char *run_dir;
};

#define DEVMEMTCP_PROBE_MAX_OWNERS 16
#define DEVMEMTCP_PROBE_MAX_QRANGES 16

/* One owner of the interface (a devmemtcp_nic handle), from its file. */
struct devmemtcp_probe_owner {
	int32_t pid;
	char comm[16];
	uint8_t alive;		/* 0: it died; its setup is undone by the next open or close */
	uint8_t reserved[3];
	uint32_t nqueues;
	uint32_t queues[16];	/* the first 16 */
	uint32_t nflows;
	uint32_t rss_context;	/* 0: none */
	uint32_t binding;	/* dma-buf binding on its queues (queue-get), 0: none */
};

/* How far an interface is from a device over PCIe, nearest first. */
enum devmemtcp_pci_distance {
	DEVMEMTCP_PCI_SAME_SWITCH = 0,	/* below one PCIe switch */
	DEVMEMTCP_PCI_SAME_ROOT_PORT = 1,	/* below one root port, not one switch */
	DEVMEMTCP_PCI_SAME_NUMA = 2,	/* same NUMA node (or no NUMA information) */
	DEVMEMTCP_PCI_OTHER = 3,	/* another NUMA node: across the sockets' link */
};

/* One interface as devmemtcp_nic_rank() ranks it. */
struct devmemtcp_nic_rank {
	char ifname[16];
	char pci[16];		/* its PCI function, "0000:1b:00.0" */
	int distance;		/* enum devmemtcp_pci_distance */
	int numa_node;		/* -1 when unknown */
};

/* The network interfaces that sit on PCI, nearest to the PCI device
 * pci_dev ("0000:1b:00.0") first (devmemtcp_nic_rank(3)); at most max in
 * ranks.  Returns how many there are (may exceed max), or a negative errno. */
int devmemtcp_nic_rank(struct devmemtcp_ctx *ctx, const char *pci_dev,
		       struct devmemtcp_nic_rank *ranks, size_t max);

/* The same, from CUDA device gpu (an ordinal, as CUDA_VISIBLE_DEVICES
 * numbers them): ranks[0] is the NIC to receive into that GPU with. */
int devmemtcp_nic_near_gpu(struct devmemtcp_ctx *ctx, int gpu,
			   struct devmemtcp_nic_rank *ranks, size_t max);

/* What devmemtcp_nic_probe() found.  Numbers are -1 when unknown. */
struct devmemtcp_probe {
	size_t sz;
	char ifname[16];
	int ifindex;
	char kernel[65];		/* uname release */
	bool has_netdev_family;
	bool has_bind_rx;
	bool has_bind_tx;
	char driver[32];
	char driver_version[32];
	char bus_info[32];
	int rx_queues;
	int tx_queues;
	int tcp_data_split;		/* -1 unsupported, 0 auto, 1 off, 2 on */
	int64_t hds_thresh;
	int64_t hds_thresh_max;
	int ntuple;			/* -1 unsupported, 0 off, 1 on */
	int ntuple_fixed;		/* the feature cannot be changed */
	int ntuple_rules;
	int ntuple_table_size;
	int rss_table_size;		/* -1: no RSS */
	int rss_contexts;		/* -1 unknown, 0 no, 1 yes */
	int rss_context_count;		/* besides the default */
	bool xdp;			/* an XDP program is attached */
	int xsk_queues;			/* queues used by AF_XDP */
	int dmabuf_queues;		/* queues with a dma-buf bound */
	int io_uring_queues;		/* queues with io_uring zcrx */
	int64_t udmabuf_limit_mb;	/* -1: udmabuf not loaded */
	bool cap_net_admin;
	int64_t optmem_max;
	int try_bind;			/* 1 bound, 0 not tried, <0 errno */
	char try_bind_msg[256];
	uint32_t nproblems;
	struct devmemtcp_probe_problem problems[DEVMEMTCP_PROBE_MAX_PROBLEMS];
	/* DRM device nodes (for DEVMEMTCP_PROVIDER_DRM): how many there are,
	 * -1 when the library was built without libdrm; the first
	 * DEVMEMTCP_PROBE_MAX_DRM of them: card nodes, then render nodes, each
	 * by number. */
	int drm_nodes;
	struct devmemtcp_probe_drm drm[DEVMEMTCP_PROBE_MAX_DRM];
	/* io_uring zero-copy receive on this kernel: 1 yes, 0 no, -1 unknown */
	int zcrx;
	int zcrx_dmabuf;		/* dma-buf areas (6.16) */
	char zcrx_msg[160];		/* why not, or "" */
	/* 1: queue-get reports AF_XDP and io_uring use of a queue; 0: this
	 * kernel's does not (before 6.15 neither, before 6.17 not AF_XDP):
	 * such queues are found only when bind-rx refuses them. */
	int queue_use_reported;
	/* The owners (devmemtcp(7), "Sharing a NIC"); -1 when the run
	 * directory cannot be read (not root, say). */
	int nowners;
	struct devmemtcp_probe_owner owners[DEVMEMTCP_PROBE_MAX_OWNERS];
	/* devmemtcp-broker(8) (devmemtcp(7), "Privileges"): 1 when this
	 * process would set up through it (no CAP_NET_ADMIN and a broker
	 * installed), else 0. */
	int broker;
	/* 1: the broker answered; 0: none is installed; < 0: the errno of
	 * reaching or asking it (broker_msg says why). */
	int broker_state;
	/* What its policy lets this user do on ifname: 1 allowed, 0 not, -1
	 * unknown; the rest is valid when allowed is 1. */
	int broker_allowed;
	uint32_t broker_queues;		/* the most queues it may own on ifname */
	uint32_t broker_queues_used;	/* owned now through the broker */
	uint32_t broker_tx;		/* 1: bind-tx through the broker */
	uint64_t broker_udmabuf;	/* largest udmabuf it makes, 0: none */
	char broker_msg[256];		/* the flows allowed and the rule, or why not */
	/* The queue ids the rule lets this user own on ifname (broker_queues
	 * of them at once), as ranges [first, last] in increasing order; 0
	 * ranges: any id.  Valid when broker_allowed is 1. */
	uint32_t broker_nqranges;
	uint32_t broker_qranges[DEVMEMTCP_PROBE_MAX_QRANGES][2];
};

/* Collect the report of ifname.  Returns the number of problems (>= 0), or
 * a negative errno when ifname cannot be inspected at all. */
int devmemtcp_nic_probe(struct devmemtcp_ctx *ctx, const char *ifname,
			const struct devmemtcp_probe_opts *opts,
			struct devmemtcp_probe *report);

/* ------------------------------------------------------------------------ */
/* Transmit from device memory.                                             */

/*
 * bind-tx: make buf sendable through ifindex (Linux 6.16 and newer).  The
 * binding owns its netlink socket like an RX binding; close it with
 * devmemtcp_binding_close().  opts: rx_page_size must be 0.
 */
int devmemtcp_bind_tx(struct devmemtcp_ctx *ctx, int ifindex,
		      struct devmemtcp_buf *buf,
		      const struct devmemtcp_bind_opts *opts,
		      struct devmemtcp_binding **binding);

/* Bytes [offset, offset + len) of the bound dma-buf. */
struct devmemtcp_tx_piece {
	uint64_t offset;
	uint64_t len;
};

enum devmemtcp_tx_done_flags {
	/* The kernel copied these bytes instead of sending them zero-copy
	 * (SO_EE_CODE_ZEROCOPY_COPIED); the range is free all the same. */
	DEVMEMTCP_TX_DONE_COPIED = 1u << 0,
};

/* A dma-buf range whose send completed: the range may be rewritten. */
struct devmemtcp_tx_done {
	uint64_t offset;
	uint64_t len;
	uint32_t seq;		/* zero-copy sequence number of its sendmsg */
	uint32_t flags;		/* enum devmemtcp_tx_done_flags */
};

/* Called with ranges as their completions are read (from
 * devmemtcp_tx_reap, _wait and _send); they are not queued then. */
typedef void (*devmemtcp_tx_done_fn)(void *user,
				     const struct devmemtcp_tx_done *done,
				     size_t n);

struct devmemtcp_tx_opts {
	size_t sz;
	devmemtcp_tx_done_fn done_fn;	/* NULL: queue for devmemtcp_tx_reap() */
	void *done_user;
	/* iovecs per sendmsg (0 and max: 1024, UIO_MAXIOV) */
	uint32_t max_iovs;
	/* bytes per sendmsg (0: 4 MiB); one completion covers one sendmsg */
	uint64_t max_call_bytes;
};

enum devmemtcp_tx_flags {
	/* Do not block: return the bytes sent so far (or -EAGAIN). */
	DEVMEMTCP_TX_DONTWAIT = 1u << 0,
	/* More data follows (MSG_MORE). */
	DEVMEMTCP_TX_MORE = 1u << 1,
};

struct devmemtcp_tx_stats {
	size_t sz;
	uint64_t bytes_sent;
	uint64_t send_calls;		/* devmemtcp_tx_send calls */
	uint64_t sendmsg_calls;		/* sendmsg calls that moved bytes */
	uint64_t partial_sends;		/* sendmsg sent fewer bytes than given */
	uint64_t nobufs_waits;		/* ENOBUFS: waited for completions */
	uint64_t notifications;		/* zero-copy error-queue messages */
	uint64_t completions;		/* sendmsg calls completed */
	uint64_t copied_completions;	/* ... of which the kernel copied */
	uint64_t ranges_done;		/* ranges reported free */
	uint64_t bytes_done;
	uint64_t sends_in_flight;	/* sendmsg calls not yet completed */
	uint64_t bytes_in_flight;
	uint64_t unknown_completions;	/* sequence numbers not in flight */
};

struct devmemtcp_tx;

/*
 * Send from the binding's buffer on the connected TCP socket fd (not
 * closed by devmemtcp_tx_free).  Turns SO_ZEROCOPY on.  The handle must be
 * the only MSG_ZEROCOPY sender on fd: it counts the sequence numbers.
 */
int devmemtcp_tx_new(struct devmemtcp_ctx *ctx, int fd,
		     const struct devmemtcp_binding *binding,
		     const struct devmemtcp_tx_opts *opts,
		     struct devmemtcp_tx **tx);
/* Ranges still in flight are forgotten; wait for them first. */
void devmemtcp_tx_free(struct devmemtcp_tx *tx);
const char *devmemtcp_tx_errmsg(const struct devmemtcp_tx *tx);
/* The socket: poll it for POLLERR to learn that completions arrived. */
int devmemtcp_tx_fd(const struct devmemtcp_tx *tx);

/*
 * Send the n pieces in order as one byte stream with sendmsg(MSG_ZEROCOPY)
 * and an SCM_DEVMEM_DMABUF cmsg, split into calls of at most max_iovs
 * iovecs and max_call_bytes bytes.  Blocks until every byte is queued
 * unless DEVMEMTCP_TX_DONTWAIT (or the socket is non-blocking).  Returns
 * the bytes sent (fewer only when not blocking: resume after that many
 * bytes), or a negative errno.  Until a range is reported done it must
 * not be rewritten.
 */
ssize_t devmemtcp_tx_send(struct devmemtcp_tx *tx,
			  const struct devmemtcp_tx_piece *pieces, size_t n,
			  unsigned int flags);

/*
 * Read the completions queued on the socket without blocking.  Without a
 * callback, moves up to max completed ranges into out and returns their
 * number; with one, returns the number of ranges handed to it.
 */
int devmemtcp_tx_reap(struct devmemtcp_tx *tx, struct devmemtcp_tx_done *out,
		      size_t max);

/*
 * Block until at least one send completes (timeout_ms < 0: no limit).
 * Returns the number of ranges completed (queued or handed to the
 * callback), 0 when nothing is in flight, -ETIMEDOUT.
 */
int devmemtcp_tx_wait(struct devmemtcp_tx *tx, int timeout_ms);

int devmemtcp_tx_stats(const struct devmemtcp_tx *tx,
		       struct devmemtcp_tx_stats *stats);

/* ------------------------------------------------------------------------ */
/* GPU: gather received fragments into contiguous device memory.            */

/*
 * A GPU handle: the CUDA device's primary context, the gather kernels and
 * pinned descriptor memory.  Streams are CUstream (or cudaStream_t) values
 * passed as void *; NULL is the legacy default stream.  Device addresses
 * are uint64_t (CUdeviceptr).  See devmemtcp_gpu_new(3).
 */
enum devmemtcp_gpu_flags {
	/* Copy each launch's descriptors to device memory first
	 * (cuMemcpyHtoDAsync) instead of letting the kernel read them from
	 * pinned host memory. */
	DEVMEMTCP_GPU_DESC_COPY = 1u << 0,
	/* Gathers go to a kernel that stays resident (one block per SM) and
	 * takes them through pinned memory, ordered on the caller's stream
	 * by stream memory operations: no launch per gather.  It stops after
	 * 1 ms without work and restarts on the next gather.  See
	 * devmemtcp_gpu_new(3) for what it holds and costs. */
	DEVMEMTCP_GPU_PERSISTENT = 1u << 1,
	/* Inline gathers (up to 1024 pieces) go through a CUDA graph per
	 * stream instead of a launch with programmatic dependence: less CPU
	 * per call, but back-to-back gathers no longer overlap on the GPU.
	 * See devmemtcp_gpu_new(3). */
	DEVMEMTCP_GPU_GRAPHS = 1u << 2,
};

struct devmemtcp_gpu_opts {
	size_t sz;
	int cuda_device;	/* device ordinal */
	uint32_t flags;		/* enum devmemtcp_gpu_flags */
	/* Descriptors per kernel launch (0: 262144); a gather with more
	 * pieces is split into several launches. */
	uint32_t max_frags;
	/* Launches whose descriptors may be in flight at once (0: 4); the
	 * next gather waits for the oldest when all are busy. */
	uint32_t slots;
	/* Coalescing (0: off, each gather is queued by its call): gathers
	 * wait in a batch of up to this many bytes that one launch queues,
	 * when it is full, when a gather goes to another stream, when
	 * devmemtcp_gpu_flush() or another call of the handle that queues on
	 * a stream is made, or when a gather call finds the batch's first
	 * gather older than coalesce_us.  The caller must flush before it
	 * queues anything else on the stream or waits for more data: see
	 * devmemtcp_gpu_flush(3).  At most 64 MiB. */
	uint32_t coalesce_bytes;
	/* The age of a batch's first gather at which the next gather call
	 * queues the batch (0: 20 us). */
	uint32_t coalesce_us;
};

/* A device address range: a gather destination or a no-copy view entry. */
struct devmemtcp_gpu_iov {
	uint64_t addr;
	uint64_t len;
};

struct devmemtcp_gpu;
struct devmemtcp_gpu_fence;

int devmemtcp_gpu_new(struct devmemtcp_ctx *ctx,
		      const struct devmemtcp_gpu_opts *opts,
		      struct devmemtcp_gpu **gpu);
/* Waits for the handle's launches; fences still pending keep what they
 * need alive until they complete. */
void devmemtcp_gpu_free(struct devmemtcp_gpu *gpu);
const char *devmemtcp_gpu_errmsg(const struct devmemtcp_gpu *gpu);

/*
 * Queue on stream a copy of the bytes of n fragments, in order, into the
 * destinations, filling each before the next.  Linear fragments leave a
 * hole of their length (devmemtcp_gpu_gather_recv() fills it); every other
 * fragment needs its device address.  Returns 0, or a negative errno with
 * nothing queued (-ENOSPC: the destinations hold fewer bytes than the
 * fragments).
 */
int devmemtcp_gpu_gather(struct devmemtcp_gpu *gpu,
			 const struct devmemtcp_frag *frags, size_t n,
			 const struct devmemtcp_gpu_iov *dsts, size_t ndst,
			 void *stream);

/*
 * devmemtcp_gpu_gather, then the fragments' tokens go back through rx as
 * soon as the gather has read them: its last kernel signals it, no stream
 * operation is queued, and work queued on stream after the gather does not
 * hold them.  On failure nothing is deferred (the gather may be queued:
 * see devmemtcp_gpu_gather_release(3)).
 */
int devmemtcp_gpu_gather_release(struct devmemtcp_gpu *gpu,
				 struct devmemtcp_rx *rx,
				 const struct devmemtcp_frag *frags, size_t n,
				 const struct devmemtcp_gpu_iov *dsts,
				 size_t ndst, void *stream);

/*
 * What one devmemtcp_rx_recv() returned, all of it: the device fragments
 * as devmemtcp_gpu_gather() places them, and the linear ones from linear
 * (the buffer given to devmemtcp_rx_recv, len bytes; NULL: holes), copied
 * by the same launch; with rx, the tokens as devmemtcp_gpu_gather_release()
 * returns them (rx NULL: none).  See devmemtcp_gpu_gather_recv(3).
 */
int devmemtcp_gpu_gather_recv(struct devmemtcp_gpu *gpu,
			      struct devmemtcp_rx *rx,
			      const struct devmemtcp_frag *frags, size_t n,
			      const void *linear, size_t len,
			      const struct devmemtcp_gpu_iov *dsts, size_t ndst,
			      void *stream);

/* Coalescing (opts.coalesce_bytes): queue the gathers waiting in the
 * handle's batch now.  Returns how many gathers the launch carried (0:
 * none waited), or a negative errno. */
int devmemtcp_gpu_flush(struct devmemtcp_gpu *gpu);

/*
 * No-copy view: the device ranges holding the fragments' bytes, in order,
 * with fragments adjacent in device memory merged; linear fragments are
 * not part of it.  Fills up to max entries; returns the number needed
 * (which may exceed max).  gpu may be NULL (no message is kept then).
 */
int devmemtcp_gpu_view(struct devmemtcp_gpu *gpu,
		       const struct devmemtcp_frag *frags, size_t n,
		       struct devmemtcp_gpu_iov *iov, size_t max);

/* A fence completes when the work queued on stream so far has finished. */
int devmemtcp_gpu_fence_new(struct devmemtcp_gpu *gpu, void *stream,
			    struct devmemtcp_gpu_fence **fence);
/* A devmemtcp_done_fn: 1 once the fence completed (and it is freed), 0 if
 * not yet (wait: block until it completes), or a negative errno. */
int devmemtcp_gpu_fence_done(void *fence, bool wait);

/* Release the fragments' tokens through rx once the work queued on stream
 * so far (the gather that read them, a consumer kernel) has finished. */
int devmemtcp_gpu_release_after(struct devmemtcp_gpu *gpu,
				struct devmemtcp_rx *rx,
				const struct devmemtcp_frag *frags, size_t n,
				void *stream);

#ifdef __cplusplus
}
#endif

#endif /* DEVMEMTCP_H */

/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * Private to the NCCL network plugin (libnccl-net-devmemtcp.so).
 *
 * A connection is two TCP sockets from the sender to the receiver: a
 * control socket carrying one 16-byte header per message (size and tag)
 * and a data socket carrying only payload, back to back.  Keeping headers
 * off the data socket lets the receiver steer the data socket alone to a
 * devmem queue, where its bytes land in a bound dma-buf, while headers are
 * read with ordinary recv().  The format is the same whether either side
 * uses devmem or not.
 */
#ifndef DEVMEMTCP_NCCL_PLUGIN_H
#define DEVMEMTCP_NCCL_PLUGIN_H

#include <net/if.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "net_abi.h"
#include "wire.h"

#define DMTN_NAME "DevmemTCP"
#define DMTN_MAX_DEVS 16
#define DMTN_MAX_BRK_IDS 256	/* queue ids of a broker rule we try */
#define DMTN_MAX_RECVS 8		/* largest grouped receive we take */
/* NCCL keeps at most NCCL_NET_MAX_REQUESTS grouped receives in flight,
 * so a send comm sees up to 32 * maxRecvs sends at once; twice that. */
#define DMTN_NREQS 512

#ifndef ARRAY_SIZE
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#endif

/* ---- logging through NCCL's logger ---------------------------------------- */

void dmtn_log(enum nccl_log_level level, unsigned long flags, const char *fn,
	      int line, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
#define DMTN_INFO(flags, ...)                                                  \
	dmtn_log(NCCL_LOG_INFO, (flags), __func__, __LINE__, __VA_ARGS__)
#define DMTN_WARN(...)                                                         \
	dmtn_log(NCCL_LOG_WARN, NCCL_SUBSYS_ALL, __FILE__, __LINE__, __VA_ARGS__)
/* Connection setup and path choices: shown by NCCL_DEBUG=INFO with the
 * default NCCL_DEBUG_SUBSYS, which includes INIT. */
#define DMTN_INIT_NET (NCCL_SUBSYS_INIT | NCCL_SUBSYS_NET)

/* ---- configuration (environment, read once at init) --------------------- */

enum dmtn_mem {
	DMTN_MEM_AUTO = 0,	/* CUDA when a CUDA context is current, else host */
	DMTN_MEM_HOST = 1,	/* udmabuf */
	DMTN_MEM_CUDA = 2,
};

struct dmtn_cfg {
	bool devmem;		/* NCCL_DEVMEMTCP_ENABLE */
	bool rx;		/* NCCL_DEVMEMTCP_RX (default 1) */
	bool tx;		/* NCCL_DEVMEMTCP_TX (default 1) */
	bool cuda_ptr;		/* NCCL_DEVMEMTCP_CUDA_PTR */
	bool recover;		/* NCCL_DEVMEMTCP_RECOVER (default 1) */
	uint32_t nqueues;	/* NCCL_DEVMEMTCP_NQUEUES */
	uint64_t buf_size;	/* NCCL_DEVMEMTCP_BUFFER_SIZE */
	uint64_t linear_size;	/* NCCL_DEVMEMTCP_LINEAR_SIZE */
	enum dmtn_mem mem;	/* NCCL_DEVMEMTCP_MEM */
	int max_recvs;		/* NCCL_DEVMEMTCP_MAX_RECVS */
	bool threads;		/* NCCL_DEVMEMTCP_THREADS: a helper per comm */
	int family;		/* NCCL_DEVMEMTCP_FAMILY: AF_INET, AF_INET6, 0 any */
	bool unpack;		/* NCCL_DEVMEMTCP_UNPACK: offer device unpack */
	uint16_t port_lo, port_hi;	/* NCCL_DEVMEMTCP_PORT_RANGE, 0: any */
	char ifname[256];	/* NCCL_DEVMEMTCP_IFNAME */
};

int dmtn_cfg_read(struct dmtn_cfg *cfg);
/* NCCL-style interface list: "eth" prefix, "=eth0" exact, "^" excludes. */
bool dmtn_ifname_match(const char *list, const char *name);

/* ---- devices: one per interface ----------------------------------------- */

struct dmtn_nic;

struct dmtn_dev {
	char name[IF_NAMESIZE];
	int ifindex;
	struct sockaddr_storage addr;
	socklen_t addrlen;
	char *pci_path;		/* NULL for virtual interfaces */
	int speed;		/* Mbps */
	bool devmem;		/* devmem enabled and the interface may do it */
	struct dmtn_nic *nic;	/* devmem RX setup, made on first listen */
	/* the RX queue ids devmemtcp-broker's rule names for this user, the
	 * highest first (none: any, the library picks the last free ones) */
	uint32_t brk_ids[DMTN_MAX_BRK_IDS];
	uint32_t nbrk_ids;
};

struct dmtn_global {
	pthread_mutex_t lock;
	bool initialized;
	bool legacy;		/* initialised through a table without finalize */
	int contexts;		/* live v11 contexts */
	pid_t pid;		/* the process that set the devices up */
	nccl_logger_t log;
	struct dmtn_cfg cfg;
	int ndev;
	struct dmtn_dev dev[DMTN_MAX_DEVS];
	/* device unpack (unpack.c): offered on devmem devices when true */
	bool unpack;
	char unpack_why[320];	/* why (not) */
	int nccl_version;	/* ncclGetVersion's, -1 unknown */
	/* the bounce address of every unpack queue of the process */
	uint64_t unpack_base;
	bool unpack_base_set;
};

extern struct dmtn_global dmtn;

int dmtn_devices_find(const struct dmtn_cfg *cfg, struct dmtn_dev *devs,
		      int max);
/* Does device d offer NCCL's device unpack? */
static inline bool dmtn_dev_unpack(const struct dmtn_dev *d)
{
	return dmtn.unpack && d->devmem && dmtn.cfg.rx;
}
void dmtn_devices_free(struct dmtn_dev *devs, int n);
/* The sysfs path of the PCI device ifname sits on (malloc'd), or NULL. */
char *dmtn_pci_path(const char *ifname);

/* ---- v11 contexts ------------------------------------------------------- */

#define DMTN_CTX_MAGIC 0x444d5443u	/* "DMTC" */

struct dmtn_ctx {
	uint32_t magic;
	uint64_t comm_id;
	int traffic_class;	/* NCCL_NET_TRAFFIC_CLASS_UNDEF: none */
};

/* ---- memory registrations ----------------------------------------------- */

struct dmtn_comm;

#define DMTN_MR_MAGIC 0x444d5452u	/* "DMTR" */

struct devmemtcp_buf;
struct devmemtcp_binding;

struct dmtn_mr {
	uint32_t magic;
	struct dmtn_comm *comm;
	uintptr_t base;
	size_t size;
	int type;		/* NCCL_PTR_HOST or NCCL_PTR_CUDA */
	int cuda_dev;		/* device ordinal of CUDA memory */
	/* dma-buf registrations (regMrDmaBuf) on a devmem TX comm */
	uint64_t dmabuf_offset;	/* dma-buf offset of base */
	struct devmemtcp_buf *dmabuf;
	struct devmemtcp_binding *tx_binding;
	/* registered on a receive comm before its first receive: one of
	 * NCCL's own buffers of the connection, which its kernel reads */
	bool setup;
};

/* ---- requests ----------------------------------------------------------- */

enum dmtn_req_kind {
	DMTN_REQ_SEND = 1,
	DMTN_REQ_RECV = 2,
	DMTN_REQ_FLUSH = 3,
};

/* What NCCL sees of a request (r->state, read and written with atomics:
 * with a helper thread, ACTIVE becomes DONE there). */
enum dmtn_req_state {
	DMTN_REQ_FREE = 0,
	DMTN_REQ_ACTIVE,	/* posted: bytes or a completion still pending */
	DMTN_REQ_DONE,
	DMTN_REQ_CONSUME,	/* done and reported: its unpack entries wait
				 * for irecvConsumed */
};

#define DMTN_REQ_MAGIC 0x444d5451u	/* "DMTQ" */

struct dmtn_rbuf {
	char *data;
	size_t cap;		/* posted size */
	size_t size;		/* message size, once matched */
	size_t done;		/* bytes moved */
	int tag;
	bool matched;
	bool complete;
	struct dmtn_mr *mr;
};

struct dmtn_gpu_fence;

struct dmtn_req {
	uint32_t magic;
	enum dmtn_req_kind kind;
	enum dmtn_req_state state;
	struct dmtn_comm *comm;
	int n;
	struct dmtn_rbuf buf[DMTN_MAX_RECVS];
	/* the mover's (the helper thread's, or NCCL's proxy's without one) */
	bool moved;		/* every byte moved */
	bool wait;		/* ... and a completion is still pending */
	uint64_t hseq;		/* send: the number of its header */
	bool devmem_tx;		/* send: sent with devmem TX */
	uint64_t tx_end;	/* devmem TX bytes of the comm at its end */
	void *fence;		/* devmemtcp_gpu_fence of its last gather */
	int fence_dev;
	/* receive on a comm with a device unpack queue */
	bool unpack;
	uint64_t useq;		/* its number: slot useq % depth */
	uint32_t nent;		/* entries in its slot */
};

/* ---- comms -------------------------------------------------------------- */

enum dmtn_comm_kind {
	DMTN_COMM_LISTEN = 1,
	DMTN_COMM_SEND = 2,
	DMTN_COMM_RECV = 3,
};

#define DMTN_COMM_MAGIC 0x444d544bu	/* "DMTK" */

/*
 * A connection a listen accepted and has not paired yet: a control
 * connection reading or holding its hello, or a data connection waiting
 * for a hello that names it.  Either waits DMTN_PENDING_MS at most.
 */
#define DMTN_PENDING_CTRL 16
#define DMTN_PENDING_DATA 32
#define DMTN_PENDING_MS 10000
struct dmtn_pending {
	int fd;			/* -1: a free entry */
	uint64_t since;		/* accepted at, ms of CLOCK_MONOTONIC */
	struct sockaddr_storage peer;
	size_t got;		/* control: hello bytes read */
	struct dmtn_hello hello;
	bool hello_ok;		/* control: a whole hello with the nonce */
};

struct dmtn_devmem_rx;
struct dmtn_devmem_tx;
struct dmtn_flow;

struct dmtn_stats {
	uint64_t msgs;
	uint64_t bytes;
	uint64_t devmem_bytes;	/* through devmem RX or TX */
	uint64_t linear_bytes;	/* devmem RX: bytes that arrived as plain data */
	uint64_t bounce_bytes;	/* CUDA memory copied through host memory */
	uint64_t unpack_bytes;	/* devmem RX: left to NCCL's unpack kernel */
	uint64_t gather_bytes;	/* devmem RX: gathered by the plugin */
	uint64_t max_call;	/* devmem RX: most bytes one receive call took
				 * (NCCL_DEVMEMTCP_LINEAR_SIZE bounds it) */
};

struct dmtn_comm {
	uint32_t magic;
	enum dmtn_comm_kind kind;
	int dev;
	int traffic_class;
	nccl_result_t error;	/* sticky: every later call returns it */

	/* listen */
	int ctrl_lfd, data_lfd;
	uint64_t nonce;
	struct dmtn_pending pend_ctrl[DMTN_PENDING_CTRL];
	struct dmtn_pending pend_data[DMTN_PENDING_DATA];
	unsigned int pending_ms;
	struct dmtn_flow *flow;	/* devmem steering of the data port */

	/* connect in progress */
	int stage;
	struct dmtn_hello hello_out;
	size_t hello_sent;

	/* send and recv */
	int ctrl_fd, data_fd;
	char peer[INET6_ADDRSTRLEN + 8];
	struct dmtn_req reqs[DMTN_NREQS];
	int free_reqs[DMTN_NREQS];
	int nfree;
	/* requests in posting order: q[q_done % N] is the oldest not done,
	 * q[q_sent % N] the oldest send whose bytes still move, or the
	 * oldest receive not yet given all its messages; q_tail is where the
	 * next one goes (written by NCCL's thread, atomic); q_hdr: the
	 * oldest send whose header is not queued yet */
	struct dmtn_req *q[DMTN_NREQS];
	unsigned int q_done, q_sent, q_tail, q_hdr;
	uint64_t hdr_queued, hdr_sent;	/* headers queued, written out */
	/* send: headers not yet written */
	uint8_t ctrl_out[DMTN_NREQS * sizeof(struct dmtn_msg)];
	size_t ctrl_out_len, ctrl_out_off;
	/* recv: headers read ahead, and the message being read */
	uint8_t ctrl_in[sizeof(struct dmtn_msg)];
	size_t ctrl_in_len;
	struct dmtn_msg hdrs[DMTN_NREQS];
	unsigned int h_head, h_tail;
	struct dmtn_req *cur_req;
	int cur_buf;
	bool eof;
	/* host bounce for CUDA memory on the plain path */
	char *bounce;
	size_t bounce_size, bounce_len, bounce_off;

	struct dmtn_devmem_rx *drx;
	struct dmtn_devmem_tx *dtx;
	struct dmtn_unpack *unpack;	/* NCCL's device unpack queue */
	/* the helper thread that moves the comm's bytes (xfer.c), or none:
	 * NCCL's proxy thread moves them in isend, irecv and test */
	bool helper_on;
	pthread_t helper;
	pthread_mutex_t mu;	/* held by the helper while it moves */
	int wake_fd;		/* eventfd: a request was posted, or stop */
	bool stop, sleeping;	/* atomic */
	uint64_t moves;		/* the mover's progress count */
	bool recv_started;	/* a receive was posted (registrations after
				 * it are not NCCL's own buffers) */
	struct dmtn_stats st;
};

/* ---- functions shared between the files --------------------------------- */

/* conn.c */
nccl_result_t dmtn_listen(int dev, void *handle, void **listen_comm);
nccl_result_t dmtn_connect(int dev, int traffic_class, void *handle,
			   void **send_comm);
nccl_result_t dmtn_accept(void *listen_comm, void **recv_comm,
			  nccl_dev_handle_t **dev_handle);
nccl_result_t dmtn_close_listen(void *listen_comm);
/* A comm of kind on device dev, no socket yet; NULL without memory. */
struct dmtn_comm *dmtn_comm_new(enum dmtn_comm_kind kind, int dev);
void dmtn_comm_free(struct dmtn_comm *c);
/* Free the comms of connects NCCL left in progress (at teardown). */
void dmtn_stage_teardown(void);
/* xfer.c: end c's helper thread, if it has one. */
void dmtn_helper_stop(struct dmtn_comm *c);

/* xfer.c */
nccl_result_t dmtn_reg_mr(void *comm, void *data, size_t size, int type,
			  void **mhandle);
nccl_result_t dmtn_reg_mr_dmabuf(void *comm, void *data, size_t size,
				 int type, uint64_t offset, int fd,
				 void **mhandle);
nccl_result_t dmtn_dereg_mr(void *comm, void *mhandle);
nccl_result_t dmtn_isend(void *send_comm, void *data, size_t size, int tag,
			 void *mhandle, void **request);
nccl_result_t dmtn_irecv(void *recv_comm, int n, void **data,
			 const size_t *sizes, const int *tags, void **mhandles,
			 void **request);
nccl_result_t dmtn_iflush(void *recv_comm, int n, void **data, int *sizes,
			  void **mhandles, void **request);
nccl_result_t dmtn_test(void *request, int *done, int *sizes);
nccl_result_t dmtn_irecv_consumed(void *recv_comm, int n, void *request);
nccl_result_t dmtn_close_send(void *send_comm);
nccl_result_t dmtn_close_recv(void *recv_comm);
struct dmtn_comm *dmtn_comm_get(void *p, enum dmtn_comm_kind kind,
				const char *fn);

/* devmem.c: everything that touches libdevmemtcp */
struct devmemtcp_nic_rank;
/* Without NCCL_DEVMEMTCP_IFNAME: of the n devices, keep those nearest the
 * GPU whose CUDA context is current (devmemtcp_nic_near_gpu), nearest
 * first; all of them when no context is current or none is ranked.
 * Returns how many are kept (the others' pci_path freed). */
int dmtn_devices_near_gpu(struct dmtn_dev *devs, int n);
/* Of the n devices, those among ranks[0..nr) (nearest first) at the best
 * distance any of them has, in rank order, moved to the front; returns
 * how many (the others' pci_path freed), 0 when none is ranked (devs
 * untouched). */
int dmtn_devices_nearest(struct dmtn_dev *devs, int n,
			 const struct devmemtcp_nic_rank *ranks, int nr);
bool dmtn_devmem_probe(struct dmtn_dev *d);
int dmtn_devmem_steer(struct dmtn_dev *d, int data_port,
		      struct dmtn_flow **flow);
void dmtn_flow_put(struct dmtn_flow *flow);
int dmtn_devmem_rx_open(struct dmtn_comm *c, struct dmtn_flow *flow);
void dmtn_devmem_rx_close(struct dmtn_comm *c);
/* The GPU and device address of the buffer c receives into: *dev -1 when
 * it is host memory or c has no devmem RX. */
void dmtn_devmem_rx_gpu(const struct dmtn_comm *c, int *dev, uint64_t *base);
/* Hand released tokens to the kernel now. */
void dmtn_devmem_rx_flush(struct dmtn_comm *c);
/* Move bytes of the current message into b; returns the bytes moved (> 0),
 * 0 when nothing is readable now, or an nccl error as a negative number. */
ssize_t dmtn_devmem_recv(struct dmtn_comm *c, struct dmtn_req *r,
			 struct dmtn_rbuf *b);
/* Record the fence a receive with gathers waits for; 0 or -EIO. */
int dmtn_devmem_fence(struct dmtn_req *r);
/* 1 when a request whose bytes moved and that waits for devmem
 * completions (r->wait) is done, 0 not yet, < 0 failed. */
int dmtn_devmem_req_done(struct dmtn_req *r);
int dmtn_devmem_mr(struct dmtn_comm *c, struct dmtn_mr *mr, int fd);
void dmtn_devmem_mr_free(struct dmtn_mr *mr);
/* Can sends from mr use devmem TX on c (the first use picks the
 * registration the comm's TX handle sends from)? */
bool dmtn_devmem_tx_ready(struct dmtn_comm *c, struct dmtn_mr *mr);
ssize_t dmtn_devmem_send(struct dmtn_comm *c, struct dmtn_req *r,
			 struct dmtn_mr *mr);
int dmtn_devmem_tx_reap(struct dmtn_comm *c);
void dmtn_devmem_tx_close(struct dmtn_comm *c);
void dmtn_devmem_teardown(struct dmtn_dev *d);

/* cuda.c: the few CUDA driver calls, libcuda.so.1 loaded on first use */
int dmtn_cuda_ptr_device(const void *ptr, int *dev);
int dmtn_cuda_current_device(int *dev);
int dmtn_cuda_copy_htod(int dev, uint64_t dst, const void *src, size_t n);
int dmtn_cuda_copy_dtoh(int dev, void *dst, uint64_t src, size_t n);
int dmtn_cuda_stream_new(int dev, void **stream);
void dmtn_cuda_stream_free(int dev, void *stream);
/* Pinned host memory the GPU dev reaches at *dptr (its primary context). */
int dmtn_cuda_host_alloc(int dev, size_t size, void **host, uint64_t *dptr);
void dmtn_cuda_host_free(int dev, void *host);
const char *dmtn_cuda_why(void);

#endif

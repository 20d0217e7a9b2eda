/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * devmemtcp-emu: an emulated devmem NIC, a test tool (test builds only,
 * never installed, never linked into the library).  Preloaded with
 * LD_PRELOAD beside a real virtual interface (a veth pair the test makes),
 * it answers what the interface lacks at the libc boundary, as the
 * simulated NIC (sim/module) does by default: the ethtool rings, header
 * split, channels, RSS and ntuple requests (netlink and SIOCETHTOOL), the
 * netdev family's queue-get, qstats-get, bind-rx and bind-tx with the
 * kernel's extack texts, udmabuf where the machine has none, and the data
 * path: real TCP payload read from the real socket into the bound dma-buf
 * at the places a page pool would choose, handed out as devmem control
 * messages with real token accounting, and devmem TX from the dma-buf.
 * tests/emu/README.md says what it models and what it cannot.
 *
 * The NIC state lives in a file every process maps ($DEVMEMTCP_EMU), under
 * one robust process-shared mutex: the NICs, the bindings, each binding's
 * page pool (a file of its own) and each process's tokens (a file per
 * process, so that the tokens of a killed process can be given back).
 */
#ifndef DEVMEMTCP_EMU_H
#define DEVMEMTCP_EMU_H

#include <linux/ethtool.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/vfs.h>

#define EMU_MAGIC 0x64656d75	/* "demu" */
#define EMU_VERSION 2

#define EMU_MAX_NICS 8
#define EMU_MAX_QUEUES 64
#define EMU_MAX_RULES 64
#define EMU_MAX_CTX 8		/* context ids 1..7, as the sim */
#define EMU_INDIR 128
#define EMU_KEY 40
#define EMU_MAX_BINDINGS 64
#define EMU_MAX_PROCS 256
#define EMU_RING_MIN 64
#define EMU_RING_MAX 4096
#define EMU_RING_DEFAULT 1024
#define EMU_HDS_MAX 1024
#define EMU_CACHE 128		/* PP_ALLOC_CACHE_SIZE */
#define EMU_REFILL 64		/* PP_ALLOC_CACHE_REFILL */
#define EMU_PROC_SOCKS 64	/* devmem sockets per process */
#define EMU_MAX_TOK (1u << 19)	/* outstanding tokens per socket */
#define EMU_MAX_PENDING 4096	/* buffers received, not yet read, per socket */
#define EMU_MSG_MAX 256
#define EMU_RSS_HASH_TOP 1u		/* ETH_RSS_HASH_TOP: Toeplitz */

/* ---- the shared state ---------------------------------------------------- */

struct emu_qstats {
	uint64_t packets, bytes, alloc_fail, drops, bufs, pages;
};

struct emu_rule {
	uint32_t used;
	uint32_t rss_ctx;
	struct ethtool_rx_flow_spec fs;
};

struct emu_nic {
	uint32_t used;
	char ifname[16];
	int32_t ifindex;
	uint64_t netns_ino, netns_dev;
	uint32_t nq;			/* RX (and TX) queues */
	uint32_t rx_ring, tx_ring;
	uint8_t hds;			/* the driver's header split */
	uint8_t hds_cfg;		/* the core's hds_config: what was set */
	uint8_t ntuple;
	uint8_t rxfh_configured;
	uint32_t hds_thresh;
	uint8_t key[EMU_KEY];
	uint32_t indir[EMU_INDIR];
	uint8_t ctx_used[EMU_MAX_CTX];
	uint32_t ctx_indir[EMU_MAX_CTX][EMU_INDIR];
	struct emu_rule rules[EMU_MAX_RULES];
	uint32_t nrules;
	/* the sim's module parameters: the RX buffer layout */
	uint32_t rx_buf_size;		/* 0: one NIC page per buffer */
	uint8_t rx_pack, rx_mix;
	uint32_t tso_segs;		/* segments per TSO frame on the wire (45: 64 KiB) */
	/* fault knobs (debugfs of the sim) */
	uint64_t corrupt_offset;	/* 1-based byte of the next connection */
	uint32_t fail_alloc;		/* the next N page allocations fail */
	uint32_t qbinding[EMU_MAX_QUEUES];	/* RX binding id, 0: none */
	uint32_t qpage[EMU_MAX_QUEUES];		/* NIC page size */
	uint32_t mix_seed[EMU_MAX_QUEUES];
	struct emu_qstats rxq[EMU_MAX_QUEUES], txq[EMU_MAX_QUEUES];
};

enum emu_mem_kind {
	EMU_MEM_CPU = 1,		/* mappable: memfd, udmabuf, vgem */
	EMU_MEM_CUDA = 2,		/* through the CUDA shim */
};

struct emu_binding {
	uint32_t used;
	uint32_t id;
	uint8_t tx;
	uint8_t unbound;		/* its netlink socket is gone */
	uint8_t mem_kind;
	uint8_t hugetlb;
	int32_t nic;
	uint64_t qmask;
	uint32_t page_size, npages;
	uint64_t size;
	uint64_t dmabuf_dev, dmabuf_ino;
	int32_t owner_pid;
	uint64_t owner_start;
	uint64_t sock_ino;		/* the netlink socket that owns it */
	int32_t mem_fd;			/* the emulator's own dup in the owner */
	uint64_t held;			/* page references of tokens and unread buffers */
};

struct emu_stats {
	uint64_t unmodelled;
	char unmodelled_msg[EMU_MSG_MAX];
	uint64_t recvs, frags, bytes, linear_bytes, plain_bytes;
	uint64_t dontneed_calls, tokens_freed, tokens_unknown;
	uint64_t starvations, starved_ns, alloc_fail;
	uint64_t tx_sends, tx_bytes;
	uint64_t reaped_procs, reaped_tokens, reaped_bindings;
	/* CUDA memory: buffers placed, driver calls that issue copies or
	 * kernels, host-to-device transfers (contiguous ranges: a batch's
	 * entries, a 2D copy's rows), the bytes they carry */
	uint64_t copies, copy_calls, copy_xfers, copy_bytes;
};

struct emu_proc {
	int32_t pid;
	uint32_t used;
	uint64_t start;
};

struct emu_shm {
	uint32_t magic, version;
	uint64_t size;
	pthread_mutex_t lock;
	uint32_t next_binding;		/* cyclic, from 1, as the kernel's */
	uint32_t pool_gen;		/* bumped when pages go back */
	struct emu_stats st;
	struct emu_nic nics[EMU_MAX_NICS];
	struct emu_binding bindings[EMU_MAX_BINDINGS];
	struct emu_proc procs[EMU_MAX_PROCS];
};

/* A binding's page pool (its own file): per queue the alloc cache and the
 * recycle ring, the gen_pool of free NIC pages, each page's references. */
struct emu_pq {
	uint32_t qid;
	uint32_t ncache;
	uint32_t cache[EMU_CACHE];
	uint32_t rhead, rcount;
	uint32_t frag_page;		/* the fragment allocator's page, or ~0 */
	uint32_t frag_off;
	uint32_t mix;			/* rx_mix PRNG state */
};

struct emu_pool {
	uint32_t magic, id;
	uint32_t npages, page_size, nq, ring;
	uint64_t size;
	struct emu_pq q[EMU_MAX_QUEUES];
	/* then: uint32_t ring[nq][ring]; uint64_t freebits[]; uint32_t refs[npages] */
};

/* A process's tokens (its own file): per socket the token table and the
 * buffers received for it but not read yet, each holding a page. */
struct emu_tok {
	uint32_t binding;
	uint32_t page;
};

struct emu_tsock {
	uint64_t ino;
	uint32_t used;
	uint32_t hint;			/* lowest token word that may be free */
	uint32_t count;			/* tokens out */
	uint32_t npend, phead;		/* a ring, oldest first */
	struct emu_tok pend[EMU_MAX_PENDING];
};

struct emu_procfile {
	uint32_t magic;
	int32_t pid;
	uint64_t start;
	struct emu_tsock socks[EMU_PROC_SOCKS];
	/* then per socket: uint64_t bits[EMU_MAX_TOK / 64]; struct emu_tok tok[EMU_MAX_TOK] */
};

/* ---- process-local ------------------------------------------------------- */

struct emu_real {
	int (*socket)(int, int, int);
	int (*close)(int);
	ssize_t (*sendto)(int, const void *, size_t, int, const struct sockaddr *, socklen_t);
	ssize_t (*sendmsg)(int, const struct msghdr *, int);
	ssize_t (*recvmsg)(int, struct msghdr *, int);
	ssize_t (*recvfrom)(int, void *, size_t, int, struct sockaddr *, socklen_t *);
	ssize_t (*recv)(int, void *, size_t, int);
	int (*setsockopt)(int, int, int, const void *, socklen_t);
	int (*ioctl)(int, unsigned long, ...);
	int (*open)(const char *, int, ...);
	int (*open64)(const char *, int, ...);
	FILE *(*fopen)(const char *, const char *);
	FILE *(*fopen64)(const char *, const char *);
	int (*poll)(struct pollfd *, nfds_t, int);
	int (*ppoll)(struct pollfd *, nfds_t, const struct timespec *, const sigset_t *);
	int (*dup2)(int, int);
	int (*dup3)(int, int, int);
	int (*fstatfs)(int, struct statfs *);
	int (*fstatfs64)(int, struct statfs64 *);
	long (*syscall)(long, ...);
};

extern struct emu_real emu_real;
extern struct emu_shm *emu_sh;		/* NULL: the emulation is off */
extern char emu_path[4096];

/* ---- emu-state.c ------------------------------------------------------- */

/* Resolve the real functions (once). */
void emu_real_init(void);
/* Map $DEVMEMTCP_EMU when set (once); true when the emulation is on. */
bool emu_on(void);
void emu_lock(void);
void emu_unlock(void);
/* A request the emulator does not model: counted, printed, and failed
 * with -EOPNOTSUPP by the caller. */
int emu_unmodelled(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void emu_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The NIC (index) with ifindex in the network namespace netns, or -1. */
int emu_nic_by_index(uint64_t netns, int ifindex);
int emu_nic_by_name(uint64_t netns, const char *name);
/* The calling thread's network namespace (inode). */
uint64_t emu_thread_netns(void);
uint64_t emu_fd_netns(int fd);
/* Process start time (field 22 of /proc/PID/stat), 0 when gone. */
uint64_t emu_proc_start(pid_t pid);
bool emu_proc_alive(pid_t pid, uint64_t start);
/* Give back what dead processes held, unbind dead owners' bindings, free
 * bindings nobody holds (locked). */
void emu_reap_locked(void);
struct emu_binding *emu_binding_get(uint32_t id);
/* Free b when it is unbound and nothing holds its pages (locked). */
void emu_binding_maybe_free(struct emu_binding *b);
/* The pool of binding b, mapped in this process (locked). */
struct emu_pool *emu_pool_map(const struct emu_binding *b, bool create);
uint32_t *emu_pool_ring(struct emu_pool *p, uint32_t qi);
uint64_t *emu_pool_free(struct emu_pool *p);
uint32_t *emu_pool_refs(struct emu_pool *p);
size_t emu_pool_bytes(uint32_t npages, uint32_t nq, uint32_t ring);
void emu_pool_unlink(uint32_t id);
/* Put one reference of page (locked): a page with none left goes back to
 * its queue's ring or the gen_pool. */
void emu_page_put(struct emu_binding *b, struct emu_pool *p, uint32_t qi,
		  uint32_t page);
/* The pool's index of queue id q, or -1. */
int emu_pool_qi(const struct emu_pool *p, uint32_t q);
int emu_page_alloc(struct emu_pool *p, uint32_t qi, uint32_t refs, uint32_t *page);
uint32_t emu_pool_avail(struct emu_pool *p, uint32_t qi);
/* fd (-1: at exit), the netlink socket ino, is closing: unbind its
 * bindings unless another descriptor of it lives on. */
void emu_nl_socket_closing(int fd, uint64_t ino);
/* This process's token file (created on first use). */
struct emu_procfile *emu_proc_self(void);
uint64_t *emu_tsock_bits(struct emu_procfile *pf, int slot);
struct emu_tok *emu_tsock_toks(struct emu_procfile *pf, int slot);
/* Release everything a token slot holds (locked). */
void emu_tsock_release_locked(struct emu_procfile *pf, int slot);
/* After fork: forget the parent's process-local state. */
void emu_forget_process(void);
uint64_t emu_now_ns(void);
bool emu_cap_net_admin(void);

/* ---- emu-nl.c ---------------------------------------------------------- */

/* sendto/sendmsg of a netlink request: 1 handled (*ret set), 0 pass. */
int emu_nl_send(int fd, const void *buf, size_t len, ssize_t *ret);
/* recvmsg/recvfrom on a netlink socket with emulated replies queued: 1
 * handled (*ret set), 0 pass. */
int emu_nl_recv(int fd, struct msghdr *msg, int flags, ssize_t *ret);
bool emu_nl_pending(int fd);
void emu_nl_close(int fd);
void emu_nl_forget(void);

/* ---- emu-ioctl.c ------------------------------------------------------- */

/* 1 handled (*ret set, errno set on -1), 0 pass. */
int emu_ioctl(int fd, unsigned long req, void *arg, int *ret);
int emu_open_udmabuf(const char *path, int flags, int *ret);
bool emu_is_dmabuf_fd(int fd);
void emu_fd_closed(int fd);
/* fopen of the sim's sysfs parameters and debugfs knobs; NULL: pass. */
void *emu_fopen(const char *path, const char *mode, bool *handled);

/* ---- emu-mem.c --------------------------------------------------------- */

struct emu_mem;
/* The memory of binding b in this process, or NULL with *err set
 * (locked: reads the binding). */
struct emu_mem *emu_mem_get(const struct emu_binding *b, int *err);
/* Bind time: what the dma-buf fd is (0 or -errno with msg). */
int emu_mem_probe(int fd, uint64_t *size, uint8_t *kind, uint8_t *hugetlb,
		  uint64_t *dev, uint64_t *ino, char *msg, size_t len);
/* One piece of a receive: its dma-buf offset, where its bytes are
 * received (host), its length, and the bytes from off on that belong to
 * its buffer alone while the receive runs (>= len: the rest of its NIC
 * page or fixed-size buffer, or of a page the fragment allocator left),
 * which a copy may write. */
struct emu_piece {
	uint64_t off;
	uint8_t *host;
	uint32_t len;
	uint32_t slot;
};
bool emu_mem_is_cpu(const struct emu_mem *m);
uint8_t *emu_mem_cpu(const struct emu_mem *m);
/* The most bytes one receive may place. */
size_t emu_mem_max_pull(const struct emu_mem *m);
/* Where each piece's bytes are received (p[i].host), then, once they are,
 * the copies into device memory (CUDA; finished when it returns). */
int emu_mem_place(struct emu_mem *m, struct emu_piece *p, size_t n);
/* What the copies of one receive cost the driver. */
struct emu_copy_count {
	uint64_t calls;		/* driver calls issuing copies or kernels */
	uint64_t xfers;		/* host-to-device transfers (contiguous ranges) */
	uint64_t bytes;		/* bytes they carry */
};
int emu_mem_commit(struct emu_mem *m, struct emu_copy_count *c);
int emu_mem_read(struct emu_mem *m, uint64_t off, void *dst, size_t len);
bool emu_udmabuf_of(int fd, uint64_t *size, bool *huge);
void emu_mem_forget(void);

/* ---- emu-rx.c / emu-tx.c ----------------------------------------------- */

/* recvmsg(MSG_SOCK_DEVMEM) on a socket: 1 handled, 0 pass. */
int emu_rx_recvmsg(int fd, struct msghdr *msg, int flags, ssize_t *ret);
int emu_rx_dontneed(int fd, const void *val, socklen_t len, int *ret);
bool emu_rx_pending(int fd);
void emu_sock_closed(int fd);
void emu_rx_forget(void);
int emu_tx_sendmsg(int fd, const struct msghdr *msg, int flags, ssize_t *ret);
int emu_tx_errqueue(int fd, struct msghdr *msg, int flags, ssize_t *ret);
void emu_tx_closed(int fd);
bool emu_tx_pollerr(int fd);
/* fd has devmem sends waiting for the peer's ACK. */
bool emu_tx_waiting(int fd);
/* emu-hooks.c: poll() for fds the emulator may make ready while it waits
 * (devmem sends completing with the peer's ACKs): the real poll in short
 * slices, the emulator's readiness checked between them. */
int emu_poll_wait(struct pollfd *fds, nfds_t n, int timeout);
/* emu-hooks.c: POLLIN/POLLERR the emulator knows of, ORed into revents;
 * the number of fds it made ready. */
int emu_poll_ready(struct pollfd *fds, nfds_t n);

/* ---- the steering (emu-rx.c) --------------------------------------------- */

struct emu_flow {
	int family;
	uint8_t saddr[16], daddr[16];	/* as on the wire: peer -> local */
	uint16_t sport, dport;		/* network order */
};

/* The default spread over nq RX queues (ethtool_rxfh_indir_default). */
void emu_fill_indir(uint32_t *indir, uint32_t nq);
int emu_steer_locked(const struct emu_nic *n, const struct emu_flow *fl);
uint32_t emu_toeplitz(const uint8_t *key, const struct emu_flow *fl);

/* The per-process timing of the emulation's own work, for benchmarks
 * (exported: devmemtcp_emu_timing). */
struct emu_timing {
	uint64_t recvs;			/* emulated devmem receives */
	uint64_t emu_ns;		/* planning, placing, tokens, cmsgs */
	uint64_t copy_ns;		/* payload into device memory */
	uint64_t sys_ns;		/* the real socket's syscalls */
	uint64_t wait_ns;		/* waiting for data or pages */
	uint64_t bytes;
	/* CUDA memory (struct emu_copy_count): driver calls, transfers and
	 * their bytes */
	uint64_t copy_calls, copy_xfers, copy_bytes;
};
extern __thread struct emu_timing *emu_tls_timing;
void emu_timing_add(const struct emu_timing *t);

#endif

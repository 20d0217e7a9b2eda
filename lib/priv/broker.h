/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * Private: the devmemtcp-broker protocol and its client.  This layer owns
 * the wire format of the requests and replies (broker_msg.c: building,
 * and checking every field of what arrives: pure functions, fuzzed) and
 * the client side (broker_client.c: the connection, one request and its
 * reply with the fds they carry).  It calls the helpers of internal.h,
 * the interface name check of nic.h and a buffer's fd (its .c files
 * include those; this header needs only the public header, so the broker
 * program sees nothing private but what it declares); the broker's table
 * of privileged operations (broker_ops.c) calls it, and the broker
 * program (broker/) serves it, calling only the public API and the
 * functions of serve.c declared at the end of this header.
 *
 * The protocol (devmemtcp-broker(8)): a UNIX seqpacket socket, one
 * request and one reply per message.  Every message starts with struct
 * dmt_brk_hdr: magic, version, type, the message's length and a sequence
 * number the reply echoes.  A request body has a fixed part per type,
 * then (open, bind-rx) arrays whose counts the fixed part gives; a
 * request carries at most one fd (SCM_RIGHTS): the dma-buf of open with
 * DMT_BRK_OPEN_BIND, bind-rx and bind-tx, the memfd of udmabuf.  A reply
 * is one fixed-size struct dmt_brk_reply: the errno and message of the
 * library call the broker made (or its own refusal), the type's answer
 * and the fds it carries (the netlink socket that holds a binding, a
 * dma-buf).  All integers are in host order (both ends are on one
 * machine); every u64 sits on an 8-byte offset so that 32- and 64-bit
 * programs agree on the layout.  Credentials come from the socket
 * (SO_PEERCRED), never from a message.
 */
#ifndef DEVMEMTCP_BROKER_H
#define DEVMEMTCP_BROKER_H

#include <stdbool.h>
#include <stdint.h>
#include <net/if.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "devmemtcp.h"

struct dmt_err;		/* core/internal.h */

#define DMT_BRK_SOCKET "/run/devmemtcp-broker.sock"
#define DMT_BRK_CONF DMT_SYSCONFDIR "/devmemtcp/broker.conf"	/* meson.build */
#define DMT_BRK_MAGIC 0x424d5444u	/* "DTMB" */
/* 2: the policy answer names the queue ids (version 1's replies were
 * DMT_BRK_REPLY_V1_SIZE bytes, without them) */
#define DMT_BRK_VERSION 2
#define DMT_BRK_MSG_MAX 8192		/* any request */
#define DMT_BRK_MAX_QUEUES 64		/* queue ids in a request or reply */
#define DMT_BRK_MAX_FLOWS 64		/* flows in an open */
#define DMT_BRK_MAX_PORTS 16		/* port ranges in a policy answer */
#define DMT_BRK_MAX_QRANGES 16		/* queue id ranges in a policy answer */
#define DMT_BRK_REPLY_TIMEOUT_MS 30000	/* the NIC lock alone may take 10 s */
#define DMT_BRK_ERRMSG_MAX 1024		/* a reply's message: DMT_ERRMSG_MAX
					 * (core/internal.h, checked in broker_msg.c) */
#define DMT_BRK_QUEUE_IDS 4096		/* queue ids are below this: DMT_MAX_QUEUES
					 * (core/internal.h, checked in broker_msg.c) */

enum dmt_brk_type {
	DMT_BRK_OPEN = 1,	/* devmemtcp_nic_open for the client */
	DMT_BRK_CLOSE,		/* devmemtcp_nic_close of its handle */
	DMT_BRK_ADD_FLOW,
	DMT_BRK_REMOVE_FLOW,
	DMT_BRK_BIND_RX,	/* bind-rx on queues of its handles */
	DMT_BRK_BIND_TX,
	DMT_BRK_UDMABUF,	/* UDMABUF_CREATE over its memfd */
	DMT_BRK_POLICY,		/* what the policy lets it do on an interface */
	DMT_BRK_TYPE_END,
};
#define DMT_BRK_REPLY 0x8000u	/* in the reply's type */

struct dmt_brk_hdr {
	uint32_t magic;
	uint16_t version;
	uint16_t type;
	uint32_t len;		/* bytes of the whole message */
	uint32_t seq;
};

/* struct devmemtcp_flow on the wire */
struct dmt_brk_flow {
	uint32_t family;	/* AF_INET or AF_INET6 */
	uint32_t flags;		/* DEVMEMTCP_FLOW_QUEUE */
	uint8_t src_addr[16];
	uint8_t src_mask[16];
	uint8_t dst_addr[16];
	uint8_t dst_mask[16];
	uint16_t src_port;
	uint16_t src_port_mask;
	uint16_t dst_port;
	uint16_t dst_port_mask;
	uint32_t queue;
	uint32_t reserved;	/* zero */
};

enum dmt_brk_open_flags {
	DMT_BRK_OPEN_NO_RSS_CONTEXT = 1u << 0,
	DMT_BRK_OPEN_ALLOW_SHADOW = 1u << 1,
	DMT_BRK_OPEN_BIND = 1u << 2,	/* the fd is a dma-buf: bind-rx it */
	DMT_BRK_OPEN_NO_VERIFY = 1u << 3,
	DMT_BRK_OPEN_KEEP_RSS = 1u << 4,	/* always refused: see broker(8) */
};
#define DMT_BRK_OPEN_KNOWN 0x1fu

/* DMT_BRK_OPEN; followed by uint32_t ids[nids], struct dmt_brk_flow
 * flows[nflows]. */
struct dmt_brk_open {
	char ifname[IF_NAMESIZE];	/* NUL-terminated, zero after */
	uint32_t flags;			/* DMT_BRK_OPEN_* */
	uint32_t nqueues;		/* without ids: this many (0: 1) */
	uint32_t nids;
	uint32_t nflows;
	uint32_t rx_page_size;
	uint32_t reserved;
};

/* DMT_BRK_CLOSE (flow_id 0), DMT_BRK_REMOVE_FLOW */
struct dmt_brk_handle {
	uint32_t handle;
	uint32_t flow_id;
};

/* DMT_BRK_ADD_FLOW */
struct dmt_brk_add_flow {
	uint32_t handle;
	uint32_t reserved;
	struct dmt_brk_flow flow;
};

/* DMT_BRK_BIND_RX (followed by uint32_t queues[nqueues]) and
 * DMT_BRK_BIND_TX (nqueues, rx_page_size 0); the fd is the dma-buf. */
#define DMT_BRK_BIND_NO_VERIFY 1u
struct dmt_brk_bind {
	uint32_t ifindex;
	uint32_t nqueues;
	uint32_t rx_page_size;
	uint32_t flags;			/* DMT_BRK_BIND_NO_VERIFY */
};

/* DMT_BRK_UDMABUF: the fd is a sealed memfd whose pages are allocated. */
struct dmt_brk_udmabuf {
	uint32_t flags;			/* zero */
	uint32_t reserved;
};

/* DMT_BRK_POLICY */
struct dmt_brk_policy {
	char ifname[IF_NAMESIZE];
};

struct dmt_brk_open_reply {
	uint32_t handle;
	uint32_t binding_id;		/* 0: no binding (no fd) */
	uint32_t nqueues;
	uint32_t steps;
	uint32_t rules;
	uint32_t rss_context;
	uint64_t setup_round_trips;
	uint64_t setup_ioctls;
	uint32_t queues[DMT_BRK_MAX_QUEUES];
};

struct dmt_brk_policy_reply {
	uint32_t allowed;		/* 1: a rule lets the caller use ifname */
	uint32_t max_queues;
	uint32_t used_queues;		/* owned now through the broker */
	uint32_t tx;			/* bind-tx allowed */
	uint64_t udmabuf_max;		/* bytes, 0: none */
	uint32_t any_port;
	uint32_t nports;
	uint16_t ports[DMT_BRK_MAX_PORTS][2];	/* destination port ranges */
	uint32_t line;			/* of the rule in the file, 0: none */
	uint32_t uid;			/* as the broker saw the caller */
	char conf[256];			/* the policy file */
	/* version 2: the queue ids the rule names, as ranges [first, last]
	 * in increasing order; 0 ranges: any id */
	uint32_t nqranges;
	uint32_t reserved;		/* zero */
	uint16_t qranges[DMT_BRK_MAX_QRANGES][2];
};

struct dmt_brk_reply {
	struct dmt_brk_hdr hdr;
	int32_t err;			/* 0 or a negative errno */
	uint32_t nfds;			/* fds that came with it */
	char msg[DMT_BRK_ERRMSG_MAX];	/* NUL-terminated, "" on success */
	union {
		struct dmt_brk_open_reply open;
		uint32_t flow_id;	/* add-flow */
		uint32_t binding_id;	/* bind-rx, bind-tx */
		uint64_t size;		/* udmabuf */
		struct dmt_brk_policy_reply policy;
	} u;
};

/* A reply of protocol version 1 (whose policy answer ended at conf): the
 * broker answers a version-1 request in this size and version, so that an
 * older library reads why it is refused. */
#define DMT_BRK_REPLY_V1_SIZE 1408

/* ---- broker_msg.c: building and checking (pure) ---- */

/* A request as the broker takes it, every field checked. */
struct dmt_brk_req {
	uint16_t type;
	uint16_t version;		/* the header's, when it has the magic */
	uint32_t seq;
	int fd;				/* the fd it carried, -1 none */
	union {
		struct {
			char ifname[IF_NAMESIZE];
			uint32_t flags;
			uint32_t nqueues;
			uint32_t nids;
			uint32_t ids[DMT_BRK_MAX_QUEUES];
			uint32_t nflows;
			struct devmemtcp_flow flows[DMT_BRK_MAX_FLOWS];
			uint32_t rx_page_size;
		} open;
		struct {
			uint32_t handle;
			uint32_t flow_id;
			struct devmemtcp_flow flow;
		} h;			/* close, add-flow, remove-flow */
		struct {
			uint32_t ifindex;
			uint32_t nqueues;
			uint32_t queues[DMT_BRK_MAX_QUEUES];
			uint32_t rx_page_size;
			uint32_t flags;
		} bind;
		struct {
			char ifname[IF_NAMESIZE];
		} policy;
	} u;
};

/* "open", "bind-rx", ... ("request type N" for others, in buf). */
const char *dmt_brk_type_name(unsigned int type, char *buf, size_t len);

/*
 * Check the len bytes of msg (a whole message as recvmsg gave it; trunc
 * when it did not fit) with nfds fds received and fd the first of them
 * (-1 none), and fill req.  0, or a negative errno with why (for the
 * reply): -EMSGSIZE too long, -EPROTO not this protocol, -EPROTONOSUPPORT
 * another version, -EINVAL a field out of range.  Any type is answered:
 * req->type and req->seq are set whenever the header was readable,
 * req->version when it has the magic too (else 0).
 * req->fd is fd when the request takes one, else -1 (the caller closes
 * what it received either way).  nfds DMT_BRK_NFDS_SOME: fds came but
 * are not counted (the broker peeked at the message, leaving them in the
 * socket): refused for a type that takes none, else taken with fd -1.
 */
#define DMT_BRK_NFDS_SOME (-1)
int dmt_brk_req_parse(const void *msg, size_t len, bool trunc, int nfds, int fd,
		      struct dmt_brk_req *req, char *why, size_t whylen);

/* The wire form of a flow and back; from_wire checks it (-EINVAL with
 * why): family, known flags, reserved zero. */
void dmt_brk_flow_to_wire(const struct devmemtcp_flow *f, struct dmt_brk_flow *w);
int dmt_brk_flow_from_wire(const struct dmt_brk_flow *w, struct devmemtcp_flow *f,
			   char *why, size_t whylen);

/* The header of a request of type with body bytes after it. */
void dmt_brk_hdr_init(struct dmt_brk_hdr *h, unsigned int type, size_t body,
		      uint32_t seq);

/* Make r (its body filled) the reply to q: the header, in the version
 * and size q's sender reads (a version-1 refusal as version 1 does).
 * Returns the bytes to send. */
size_t dmt_brk_reply_init(struct dmt_brk_reply *r, const struct dmt_brk_req *q);

/*
 * Check a reply to a request (type, seq) of len bytes that came with nfds
 * fds: magic, version, type, seq, length, the errno in range, the message
 * terminated, nfds as the reply says and at most max_fds, the type's
 * counts and ranges in range.  0, -EPROTONOSUPPORT with why (both
 * versions) when a broker of another protocol version answered, or
 * -EPROTO with why.
 */
int dmt_brk_reply_check(const struct dmt_brk_reply *r, size_t len, unsigned int type,
			uint32_t seq, int nfds, int max_fds, char *why, size_t whylen);

/* ---- the socket, both ends (broker_msg.c) ---- */

#define DMT_BRK_MAX_FDS 1	/* in any message */

/* sendmsg of one message with nfds fds (SCM_RIGHTS), MSG_NOSIGNAL |
 * flags: 0 or a negative errno. */
int dmt_brk_send(int sock, const void *msg, size_t len, const int *fds, int nfds,
		 int flags);
/* The SCM_RIGHTS fds of a received message into fds[0..max), closing
 * the ones past max; returns how many came. */
int dmt_brk_take_fds(const struct msghdr *msg, int *fds, int max);

/* ---- broker_client.c: the library's side ---- */

/* The socket: $DEVMEMTCP_BROKER_SOCKET, else DMT_BRK_SOCKET. */
const char *dmt_brk_path(void);
/* This process has CAP_NET_ADMIN in its effective set. */
bool dmt_cap_net_admin(void);
/* A broker socket exists at dmt_brk_path() (not that it answers). */
bool dmt_brk_present(void);

/* One connection to the broker (a handle opened through it lives as long
 * as its connection). */
struct dmt_brk;

/* Connect (-ENOENT etc. with a message naming the socket and the fix). */
int dmt_brk_connect(struct dmt_err *err, struct dmt_brk **b);
void dmt_brk_close(struct dmt_brk *b);

/*
 * Send a request (hdr filled by dmt_brk_hdr_init; fd >= 0 goes with it)
 * and read its reply into *r (checked); the fds of the reply into
 * rfds[0..max_fds), the rest -1.  Returns the reply's errno (0 or
 * negative) with its message on err, or the transport's (-EPIPE,
 * -ETIMEDOUT, -EPROTO ...) with a message naming the broker.
 */
int dmt_brk_call(struct dmt_brk *b, struct dmt_err *err, struct dmt_brk_hdr *req,
		 int fd, struct dmt_brk_reply *r, int *rfds, int max_fds);

/*
 * The calls the library makes through the broker.  Each records its
 * failure on err (not logged) and returns a negative errno.
 */
/* open: *b is the handle's connection (closed by dmt_brk_close), *nl_fd
 * the netlink socket of the binding (-1 without a buffer). */
int dmt_brk_open(struct dmt_err *err, const char *ifname,
		 const struct devmemtcp_nic_opts *opts, struct dmt_brk **b,
		 struct dmt_brk_open_reply *r, int *nl_fd);
int dmt_brk_handle_call(struct dmt_brk *b, struct dmt_err *err, unsigned int type,
			uint32_t handle, uint32_t flow_id,
			const struct devmemtcp_flow *flow);
/* bind-rx (tx false) or bind-tx of the dma-buf fd: the binding's netlink
 * socket in *nl_fd and its id in *id. */
int dmt_brk_bind(struct dmt_err *err, bool tx, int ifindex, const uint32_t *queues,
		 size_t nqueues, int fd, uint32_t rx_page_size, bool verify,
		 int *nl_fd, uint32_t *id);
/* UDMABUF_CREATE over memfd (sealed, its pages allocated): *dmabuf_fd. */
int dmt_brk_udmabuf(struct dmt_err *err, int memfd, int *dmabuf_fd);
int dmt_brk_policy(struct dmt_err *err, const char *ifname,
		   struct dmt_brk_policy_reply *r);

/* ---- serve.c: what the broker program calls besides the public API ---- */

/* devmemtcp_nic_open with another process (pid, its start time) recorded
 * as the owner. */
int dmt_serve_nic_open(struct devmemtcp_ctx *ctx, const char *ifname,
		       const struct devmemtcp_nic_opts *opts, pid_t pid,
		       uint64_t start, struct devmemtcp_nic **nic);
/* The handle's binding, the caller's from now on; NULL when it has none. */
struct devmemtcp_binding *dmt_serve_take_binding(struct devmemtcp_nic *nic);
/* A copy of b's netlink socket (close-on-exec, above 2) in *fd and its id
 * in *id; b is closed, so the binding lives as long as the copy.  -errno
 * (*fd -1) when the copy failed. */
int dmt_serve_hand_over(struct devmemtcp_binding *b, int *fd, uint32_t *id);
/* Free the handle, leaving its setup and its file as they are. */
void dmt_serve_forget(struct devmemtcp_nic *nic);
/* Number the handles of this process above base. */
void dmt_serve_handle_base(unsigned int base);
/* The start time of pid (/proc/PID/stat); *zombie when it has ended. */
int dmt_serve_proc_start(pid_t pid, uint64_t *start, bool *zombie);
/* The run directory: $DEVMEMTCP_RUN_DIR, or /run/devmemtcp. */
const char *dmt_serve_run_dir(void);
/* The names of its files (*names malloc'd, each name too); -errno when it
 * cannot be opened or read. */
int dmt_serve_run_dir_names(char ***names, size_t *n);
/* UDMABUF_CREATE on dev (/dev/udmabuf) over memfd: the dma-buf's fd
 * (close-on-exec), or -1 with errno set. */
int dmt_serve_udmabuf(int dev, int memfd, uint64_t size);
/* A test hook's environment variable (NULL in a build without hooks). */
const char *dmt_serve_hook_env(const char *name);

#endif

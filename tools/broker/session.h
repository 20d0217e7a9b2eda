/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * devmemtcp-broker's clients and what they hold: one connection per
 * client (its peer's credentials taken when it connected), the handles
 * (devmemtcp_nic) set up for it, and the requests it sends, each read,
 * checked (lib/broker_msg.c), measured against the policy (policy.h) and
 * answered.  What a request does to the system goes through struct
 * brk_ops (nicops.c: the library; the fuzz harness: fakes), so that this
 * file is all the broker's logic that a hostile client can reach.
 *
 * A handle belongs to its connection.  When the connection ends, or the
 * client asks to close it, a handle whose queues still carry a dma-buf
 * binding (the client kept the netlink socket, or handed it on) lingers:
 * its rules and RSS context stay, so that no other traffic reaches the
 * binding's memory, until queue-get shows the binding gone; then it is
 * closed like any other.
 */
#ifndef DEVMEMTCP_BROKER_SESSION_H
#define DEVMEMTCP_BROKER_SESSION_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "broker.h"
#include "policy.h"

#define BRK_MAX_CLIENTS 256
#define BRK_MAX_CLIENTS_PER_UID 32
#define BRK_MAX_HANDLES_PER_CLIENT 16
#define BRK_MAX_UDMABUFS_PER_CLIENT 64
#define BRK_MAX_GROUPS 256

struct brk;

/* Who is at the other end: from the socket (SO_PEERCRED, SO_PEERGROUPS)
 * and /proc, never from a message. */
struct brk_peer {
	pid_t pid;
	uint64_t start;		/* field 22 of /proc/PID/stat */
	uint32_t uid;
	uint32_t gid;
	uint32_t ngroups;
	uint32_t groups[BRK_MAX_GROUPS];	/* gid first */
	char comm[16];
	int refused;		/* 0, or why it may do nothing (-EXDEV ...) */
	char why[256];		/* ... in words, for its first reply */
};

/* What requests do to the system.  Each returns 0 or a negative errno
 * with the message in msg (DMT_ERRMSG_MAX bytes); fds handed out (*nl_fd,
 * *dmabuf) are the caller's to send and close. */
struct brk_ops {
	/* devmemtcp_nic_open for the owner (pid, start); with dmabuf >= 0
	 * bound to that dma-buf, the binding's netlink socket in *nl_fd. */
	int (*open)(struct brk *b, const char *ifname, const struct devmemtcp_nic_opts *o,
		    int dmabuf, pid_t pid, uint64_t start, void **nic,
		    struct dmt_brk_open_reply *r, int *nl_fd, char *msg);
	int (*close)(struct brk *b, void *nic, char *msg);
	/* leave the setup to its owner's close or death (the broker exits) */
	void (*forget)(struct brk *b, void *nic);
	int (*add_flow)(struct brk *b, void *nic, const struct devmemtcp_flow *f, char *msg);
	int (*remove_flow)(struct brk *b, void *nic, int id, char *msg);
	int (*bind)(struct brk *b, bool tx, int ifindex, const uint32_t *queues, size_t n,
		    int dmabuf, uint32_t rx_page_size, bool verify, int *nl_fd, uint32_t *id,
		    char *msg);
	/* UDMABUF_CREATE over memfd of at most max bytes */
	int (*udmabuf)(struct brk *b, int memfd, uint64_t max, int *dmabuf, uint64_t *size,
		       char *msg);
	/* 1: a queue of these has a dma-buf bound, 0: none, < 0: unknown */
	int (*bound)(struct brk *b, int ifindex, const uint32_t *queues, size_t n);
	/* the ifindex of a name, the name of an ifindex (0 / -ENODEV) */
	int (*ifindex)(struct brk *b, const char *ifname);
	int (*ifname)(struct brk *b, int ifindex, char *name);
	/* the process (pid, start) still runs */
	bool (*alive)(pid_t pid, uint64_t start);
	/* a line of the log (level: DEVMEMTCP_LOG_*) */
	void (*log)(struct brk *b, int level, const char *msg);
};

struct brk_client {
	struct brk_client *next;
	int fd;
	struct brk_peer peer;
	uint32_t nhandles;
	uint32_t nbufs;
};

struct brk_handle {
	struct brk_handle *next;
	uint32_t id;
	struct brk_client *client;	/* NULL: lingering */
	pid_t pid;
	uint64_t start;
	uint32_t uid;
	char ifname[IF_NAMESIZE];
	int ifindex;
	uint32_t nqueues;
	uint32_t queues[DMT_BRK_MAX_QUEUES];
	void *nic;
};

struct brk {
	const struct brk_ops *ops;
	void *priv;			/* the ops' */
	const struct dmt_policy *policy;
	const char *conf;		/* the policy file, for messages */
	struct brk_client *clients;
	uint32_t nclients;
	struct brk_handle *handles;
	uint32_t nhandles;
	uint32_t next_id;
	int log_level;
};

void brk_init(struct brk *b, const struct brk_ops *ops, void *priv,
	      const struct dmt_policy *policy, const char *conf);
/* A new connection fd (non-blocking) from peer: 0, or -EUSERS (too many:
 * fd is the caller's to close). */
int brk_accept(struct brk *b, int fd, const struct brk_peer *peer,
	       struct brk_client **c);
/* Read and answer one request of c: 0, or < 0 when c must go (it closed,
 * broke the protocol or stopped reading its replies). */
int brk_serve(struct brk *b, struct brk_client *c);
/* c is gone: close its connection; its handles close or linger. */
void brk_drop(struct brk *b, struct brk_client *c);
/* Close the lingering handles whose binding is gone; how many remain. */
uint32_t brk_settle(struct brk *b);
/* Nobody connected and nothing held. */
bool brk_idle(const struct brk *b);
/* Exit: drop every client; what still has a binding is left to its
 * owner (forget), the rest closed. */
void brk_fini(struct brk *b);
void brk_log(struct brk *b, int level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif

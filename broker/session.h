/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * devmemtcp-broker's clients and what they hold: one connection per
 * client (its peer's credentials taken when it connected), the handles
 * (devmemtcp_nic) set up for it, and the requests it sends, each read,
 * checked (lib/priv/broker_msg.c), measured against the policy (policy.h) and
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
 *
 * The event loop never touches a descriptor a client sent: closing one
 * can sleep as long as the sender likes (a TCP socket that lingers, a
 * FUSE file's flush), and so can looking at one (fstat, lseek, the
 * import).  It reads each message with MSG_PEEK and no room for
 * descriptors, which leaves them in the socket; a message that carries
 * some is refused there or carried out by a helper thread as a job
 * (struct brk_job): the helper takes the message with its descriptors
 * and does the request; a refused message is taken by a helper without
 * room for them, so that they are never installed and the kernel drops
 * them on that helper; what was installed is closed by a helper after
 * the reply.  A connection socket that still holds a client's
 * descriptors is closed by a helper too.  Each uid has at most
 * BRK_MAX_WORK_PER_UID jobs under way (its connections are not read
 * meanwhile), so that one user's descriptors can hold up at most that
 * many of the BRK_WORKERS helpers.  Requests that carry no descriptor
 * (the NIC calls on a handle, an open without a buffer, the policy) are
 * done on the loop.  Helpers run brk_job_run, which touches only its job
 * and the ops; everything else here is the loop's alone.
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
#define BRK_MAX_UDMABUFS_PER_UID 64	/* alive at once (each is an fd here) */
#define BRK_MAX_GROUPS 256
#define BRK_WORKERS 8			/* helper threads */
#define BRK_MAX_WORK_PER_UID 2		/* jobs of one uid under way */
#define BRK_MAX_FDS_IN 253		/* SCM_MAX_FD: the most a message carries */

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
 * with the message in msg (DMT_BRK_ERRMSG_MAX bytes); fds handed out (*nl_fd,
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
	/* the size of memfd as UDMABUF_CREATE takes it, at most max */
	int (*udmabuf_size)(struct brk *b, int memfd, uint64_t max, uint64_t *size, char *msg);
	/* UDMABUF_CREATE over memfd of size bytes: *dmabuf for the client,
	 * *keep the broker's, to tell when the client's copies are gone */
	int (*udmabuf)(struct brk *b, int memfd, uint64_t size, int *dmabuf, int *keep,
		       char *msg);
	/* 1: a udmabuf (its keep fd) is held by anyone else, 0: by nobody
	 * but the broker, < 0: unknown */
	int (*buf_alive)(struct brk *b, int keep);
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

/* A udmabuf the broker made, while anyone but the broker holds it. */
struct brk_buf {
	struct brk_buf *next;
	int keep;		/* the broker's copy (-1: being made) */
	uint64_t size;
};

/* A uid with connections, work or udmabufs: what it has. */
struct brk_user {
	struct brk_user *next;
	uint32_t uid;
	uint32_t conns;		/* connections, those a helper still closes too */
	uint32_t work;		/* jobs not finished */
	uint32_t running;	/* of them with a helper */
	uint32_t nbufs;		/* udmabufs alive and being made */
	uint64_t buf_bytes;	/* their bytes */
	struct brk_buf *bufs;
};

struct brk_client {
	struct brk_client *next;
	int fd;
	struct brk_peer peer;
	struct brk_user *user;
	uint32_t nhandles;
	bool busy;		/* a job of its message is under way: not read */
	bool gone;		/* dropped once it is not busy */
};

/* What a helper does for the loop. */
enum brk_step {
	BRK_STEP_RECV,		/* take the message with its fds, carry it out */
	BRK_STEP_MAKE,		/* UDMABUF_CREATE, its bytes counted for the user */
	BRK_STEP_DISCARD,	/* take the refused message, fds not installed */
	BRK_STEP_CLOSE,		/* close fds */
};

struct brk_job {
	struct brk_job *next;
	enum brk_step step;
	struct brk_user *user;
	struct brk_client *c;		/* RECV, DISCARD: whose message */
	struct brk_handle *h;		/* RECV of an open: the handle made */
	int sock;			/* RECV, DISCARD: c's connection */
	pid_t pid;			/* RECV: the client, for an open */
	uint64_t start;
	uint64_t max;			/* RECV of a udmabuf: the policy's size */
	uint64_t size;			/* MAKE: the memfd's */
	int keep;			/* MAKE: the broker's copy of the dma-buf */
	struct brk_buf *buf;		/* MAKE: where it is counted */
	int ifindex;			/* RECV of an open: the interface's */
	uint32_t npins;			/* RECV of a bind: the handles whose */
	struct brk_handle *pins[DMT_BRK_MAX_QUEUES];	/* queues it binds */
	bool drop;			/* the client goes after the reply */
	bool conn;			/* CLOSE: fds[0] is a connection of user */
	int rfd;			/* what goes with the reply, -1 none */
	int nfds;			/* RECV: what came; CLOSE: what to close */
	int fds[BRK_MAX_FDS_IN + 1];	/* + the reply's */
	void *nic;			/* RECV of an open: the handle's */
	struct dmt_brk_req q;
	struct dmt_brk_reply r;
};

struct brk_handle {
	struct brk_handle *next;
	uint32_t id;			/* 0 while opening */
	bool opening;			/* a helper opens it: nqueues reserved */
	uint32_t pins;			/* binds under way on its queues */
	bool deferred;			/* released once they are done */
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
	struct brk_user *users;
	struct brk_job *queue;		/* jobs waiting for a helper */
	uint32_t recv_running;		/* RECV, MAKE jobs with a helper (exit waits) */
	uint32_t nbufs;			/* udmabufs made that live (all users) */
};

void brk_init(struct brk *b, const struct brk_ops *ops, void *priv,
	      const struct dmt_policy *policy, const char *conf);
/* A new connection fd (non-blocking) from peer, which is the session's
 * from now on: 0, or -EUSERS (too many: closed) or -ENOMEM. */
int brk_accept(struct brk *b, int fd, const struct brk_peer *peer,
	       struct brk_client **c);
/* Whether c may be read now: it is not busy and its uid is under its
 * bound on work under way. */
bool brk_readable(const struct brk *b, const struct brk_client *c);
/* Read and answer one request of c (or hand it to a job): 0, or < 0
 * when c must go (it closed, broke the protocol or stopped reading its
 * replies). */
int brk_serve(struct brk *b, struct brk_client *c);
/* c is gone: close its connection (a helper does when it still holds a
 * client's fds); its handles close or linger.  A busy c goes once its job
 * is done. */
void brk_drop(struct brk *b, struct brk_client *c);
/* The next job a helper may start (at most BRK_MAX_WORK_PER_UID of a uid
 * at once), NULL none. */
struct brk_job *brk_job_next(struct brk *b);
/* On a helper: the job's step.  Touches the job and b->ops only. */
void brk_job_run(const struct brk *b, struct brk_job *j);
/* Back on the loop: the reply, the next step or the end of the job. */
void brk_job_done(struct brk *b, struct brk_job *j);
/* Close the lingering handles whose binding is gone and forget the
 * udmabufs nobody else holds; how many of both remain. */
uint32_t brk_settle(struct brk *b);
/* Nobody connected, nothing held (handles, udmabufs made that live), no
 * request under way. */
bool brk_idle(const struct brk *b);
/* Exit: drop every client; what still has a binding is left to its
 * owner (forget), the rest closed.  Jobs still queued are forgotten (the
 * fds they hold go with the process); those with a helper are the
 * caller's to have waited for (recv_running) or to leave. */
void brk_fini(struct brk *b);
/* How many of a client's fds wait in connection socket fd (the kernel's
 * scm_fds), < 0 unknown. */
int brk_fds_queued(int fd);
void brk_log(struct brk *b, int level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif

/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * Private: transactional NIC setup (lib/nic/) for the owners of an
 * interface.  This layer owns what devmemtcp_nic handles change on an
 * interface (header split, hds-thresh, the default RSS table, RSS
 * contexts, ntuple rules, the bind-rx binding), the files and the lock
 * under the run directory (journal.c the formats, rundir.c the files and
 * the lock), the handle (nic.c open and close, handle.c its owner file,
 * rules.c its flows), the owners' model (owners.c, undo.c, shared.c), the
 * pure planners (plan.c) and the undo of all of it.  It may call the
 * ethtool family (ethtool.h) for every NIC setting and the netdev family
 * (netdev.h) for bind-rx and queue listing; it is called through the
 * public API and the local table of privileged operations (priv.c:
 * dmt_nic_open_self), and by the broker's serve.c (dmt_nic_open_as()).
 *
 * The files are the source of truth for undo: each owner writes what it is
 * about to change before changing it (IF.owner.PID.START.N), the first
 * owner records the baseline of the shared settings (IF.base), and any
 * later operation undoes what a dead owner left, where the device still
 * shows it and queue-get shows none of its queues bound (HACKING.md, "The
 * NIC layer").
 */
#ifndef DEVMEMTCP_NIC_H
#define DEVMEMTCP_NIC_H

#include <stdbool.h>
#include <limits.h>
#include <stdint.h>
#include <sys/types.h>

#include "ethtool.h"
#include "core/internal.h"
#include "nl/nl.h"

#define DMT_RUN_DIR "/run/devmemtcp"
#define DMT_NTUPLE_FEATURE "rx-ntuple-filter"

/* ---- the many-owners journals (HACKING.md, "The NIC layer") ---- */

#define DMT_FORMAT_VERSION 2
#define DMT_LIST_MAX 4096	/* entries of any list, rules of an owner */
#define DMT_PID_MAX 4194304

/* The shared settings: tcp-data-split, hds-thresh, rx-ntuple-filter, the
 * default RSS table. */
struct dmt_shared {
	int tds;		/* DMT_ETHTOOL_TCP_DATA_SPLIT_*, -1 unreported */
	int64_t hds;		/* -1 unreported */
	int ntuple;		/* 0 or 1 */
	uint32_t rss_size;	/* 0: no table */
	uint32_t *rss;
};

/* Bits of dmt_base.theirs: settings an administrator took over. */
enum {
	DMT_S_TDS = 1u << 0,
	DMT_S_HDS = 1u << 1,
	DMT_S_NTUPLE = 1u << 2,
	DMT_S_RSS = 1u << 3,
};

/* <ifname>.base */
struct dmt_base {
	char ifname[IF_NAMESIZE];
	int ifindex;
	uint64_t netns;
	struct dmt_shared baseline;	/* before the first owner */
	bool rss_default;		/* the baseline table was the driver's spread */
	struct dmt_shared applied;	/* what the owners last wrote */
	bool has_applying;
	struct dmt_shared applying;	/* being written: also ours */
	uint32_t theirs;		/* DMT_S_* */
};

/* An ntuple rule of an owner. */
struct dmt_orule {
	uint32_t id;		/* flow id given to the caller */
	bool placed;		/* location known (the insert returned) */
	uint32_t location;
	uint32_t rss_context;	/* the context the rule steers to, 0 none */
	struct ethtool_rx_flow_spec fs;
	uint32_t nbefore;	/* pending: the locations used before */
	uint32_t *before;
};

enum dmt_ctx_state { DMT_CTX_NONE, DMT_CTX_PENDING, DMT_CTX_PLACED };

/* <ifname>.owner.<pid>.<start>.<handle> */
struct dmt_owner {
	pid_t pid;
	uint64_t start;		/* field 22 of /proc/PID/stat */
	uint32_t handle;
	char comm[64];
	char ifname[IF_NAMESIZE];
	int ifindex;
	uint64_t netns;
	bool closed;		/* a failed open or close left it: dead */
	bool keep_rss;		/* its queues stay in the default table */
	uint32_t nqueues;
	uint32_t *queues;
	enum dmt_ctx_state ctx;
	uint32_t ctx_id;	/* placed */
	uint32_t nctx_before;	/* pending: the contexts that existed */
	uint32_t *ctx_before;
	uint32_t ctx_size;
	uint32_t *ctx_indir;	/* the table we gave it */
	uint32_t nrules;
	struct dmt_orule *rules;
};

/* A copy of src with its own table (0 or -ENOMEM, then dst has none). */
int dmt_shared_copy(struct dmt_shared *dst, const struct dmt_shared *src);
void dmt_shared_free(struct dmt_shared *s);
void dmt_base_free(struct dmt_base *b);
void dmt_owner_free(struct dmt_owner *o);
/*
 * Text forms: *out malloc'd and NUL-terminated.  The parsers accept only
 * what the formatters write (one canonical text per value), so
 * format(parse(x)) == x for every accepted x; anything else is -EBADMSG
 * (line number in *bad_line when not NULL), or -ENOMEM.  Pure functions:
 * no file, no device, no global state.
 */
int dmt_base_format(const struct dmt_base *b, char **out, size_t *len);
int dmt_base_parse(const char *text, size_t len, struct dmt_base *b,
		   int *bad_line);
int dmt_owner_format(const struct dmt_owner *o, char **out, size_t *len);
int dmt_owner_parse(const char *text, size_t len, struct dmt_owner *o,
		    int *bad_line);
/* "eth1.owner.1234.987654.1" */
void dmt_owner_name(const struct dmt_owner *o, char *name, size_t len);
/* A valid interface name: 1..15 bytes, printable, no '/', ':' or blank,
 * not "." or "..". */
bool dmt_ifname_valid(const char *s, size_t n);

/*
 * The run directory (default /run/devmemtcp), opened once per operation
 * with O_DIRECTORY|O_NOFOLLOW: owned by root or by us and writable by its
 * owner only, or refused with -EACCES and a message naming it and the fix.
 * Every file in it is opened with openat(O_NOFOLLOW|O_CLOEXEC|O_NONBLOCK),
 * must be a regular file of the directory's owner that others cannot
 * write, of at most DMT_FILE_MAX bytes; files are replaced through an
 * O_EXCL temporary file of mode 0600 (fsync, renameat, fsync of the
 * directory).  Messages go to err.
 */
#define DMT_FILE_MAX (1 << 20)
#define DMT_LOCK_WAIT_MS 10000

struct dmt_rundir {
	int fd;
	uid_t uid;		/* the directory's owner */
	char path[PATH_MAX];
};

/* create: make the last component (0700) when it is missing. */
int dmt_rundir_open(struct dmt_rundir *rd, const char *path, bool create,
		    struct dmt_err *err);
void dmt_rundir_close(struct dmt_rundir *rd);
/* *text malloc'd and NUL-terminated; -ENOENT (no message) when absent. */
int dmt_file_read(const struct dmt_rundir *rd, const char *name, char **text,
		  size_t *len, struct dmt_err *err);
int dmt_file_write(const struct dmt_rundir *rd, const char *name,
		   const char *text, size_t len, struct dmt_err *err);
/* Does name hold exactly text?  1 yes, 0 no, -ENOENT (no message) when
 * absent, or another negative errno.  Allocates nothing. */
int dmt_file_same(const struct dmt_rundir *rd, const char *name,
		  const char *text, size_t len, struct dmt_err *err);
/* text, as dmt_owner_format() wrote it, written as name with "state
 * closed": the owner is dead from then on although its process lives.
 * Allocates nothing, for when memory has run out. */
int dmt_owner_write_closed(const struct dmt_rundir *rd, const char *name,
			   const char *text, size_t len, struct dmt_err *err);
/* 0 also when absent. */
int dmt_file_remove(const struct dmt_rundir *rd, const char *name);
/* The names in the run directory that start with prefix (*names and each
 * name malloc'd), sorted. */
int dmt_rundir_list(const struct dmt_rundir *rd, const char *prefix,
		    char ***names, size_t *n, struct dmt_err *err);

/*
 * Take <ifname>.lock (flock on an O_RDWR descriptor of a file of mode
 * 0600), waiting at most dmt_lock_wait_ms(); record our pid and comm in
 * it.  -EBUSY with the holder's pid and comm filled in.
 */
int dmt_lock_take(const struct dmt_rundir *rd, const char *ifname, int *fd,
		  pid_t *holder, char *holder_comm, size_t comm_len,
		  struct dmt_err *err);
void dmt_lock_release(int fd);
/* DMT_LOCK_WAIT_MS, or what a test asks for. */
int dmt_lock_wait_ms(void);
#if DMT_TEST_HOOKS
extern int dmt_test_lock_wait_ms;
#endif

/* ---- the owners of an interface (owners.c) ---- */

/* Field 22 of /proc/PID/stat, and in *zombie whether the process has
 * ended: a zombie with no thread left (field 20).  A zombie leader whose
 * other threads live is not: they hold its descriptors, and so any
 * binding's netlink socket.  0, -ENOENT when there is no such process, or
 * another negative errno. */
int dmt_proc_start(pid_t pid, uint64_t *start, bool *zombie);
/* An owner is alive when its file does not say closed and its process
 * exists (dmt_proc_start: not ended) with the recorded start time; when
 * that cannot be read, alive.  Its bindings may outlive it (a child that
 * inherited the netlink socket, one it was passed to): what queue-get
 * shows bound is kept whether or not its owner lives. */
bool dmt_owner_alive(const struct dmt_owner *o);

/* Do a and b match some packet in common?  (TCP/IPv4 and TCP/IPv6 rules
 * and IP rules of the same family; other flow types never match TCP.) */
bool dmt_spec_overlap(const struct ethtool_rx_flow_spec *a,
		      const struct ethtool_rx_flow_spec *b);


/* One operation on an interface under its lock: what it found in the run
 * directory and on the device, and what it reports. */
struct dmt_op {
	struct devmemtcp_ctx *ctx;
	struct dmt_eth *e;
	struct dmt_nl *nl;		/* queue-get; NULL with a fake NIC */
	struct dmt_err *err;		/* the message of a failure */
	struct dmt_rundir rd;
	int lock_fd;
	bool locked;
	/* found by dmt_op_load */
	bool have_base;
	struct dmt_base base;
	size_t nowners;			/* the other owners' files */
	struct dmt_owner *owners;
	bool *alive;
	uint32_t nrx;
	/* the device's rules, read once per operation (nrules < 0: not yet) */
	struct dmt_rule *rules;
	long nrules;
	/* queue-get's RX queues, read once per operation (nqget < 0: not
	 * yet): which carry a binding */
	struct devmemtcp_queue *qget;
	int nqget;
	/* the device's RSS contexts and their tables, read once per
	 * operation until one is made or deleted (nctxs < 0: not yet) */
	struct dmt_rss *ctxs;
	long nctxs;
	/* the shared settings as the device showed them in this operation,
	 * read once until a change: nothing else changes them while we hold
	 * the lock but an administrator, whose change we may see late */
	bool have_rings, have_feat, have_rss;
	int rss_err;
	struct dmt_rings rings;
	struct dmt_feature feat;
	struct dmt_rss rss;
	/* the test hooks and what was done */
	int step, fail_step, crash_step;
	const char *hook_name;		/* of fail_step, for its message */
	char doing[96];
	uint32_t changes;		/* device changes made */
	bool undid;			/* something of a dead owner or a baseline */
	char report[DMT_ERRMSG_MAX];	/* items left alone, logged at the end */
};

/* Open the run directory and take the lock (the test delay sleeps after
 * it).  Messages on op->err. */
int dmt_op_begin(struct dmt_op *op, struct devmemtcp_ctx *ctx,
		 struct dmt_eth *e, struct dmt_nl *nl, const char *run_dir,
		 struct dmt_err *err);
/* Log what was left alone, unlock, free. */
void dmt_op_end(struct dmt_op *op);
/* Read IF.base and the owner files but me_name; check each against the
 * device (ifname, ifindex, netns: ESTALE, EXDEV); which are alive. */
int dmt_op_load(struct dmt_op *op, const char *me_name);
/* Read and check one owner's file into *o: -ENOENT (no message) when it
 * is gone. */
int dmt_op_load_owner(struct dmt_op *op, const char *name, struct dmt_owner *o);
/* Undo what dead owners (all: every other owner) left and remove their
 * files; a file whose undo failed stays with what is left.  An owner with
 * a queue that queue-get shows bound is left whole, dead or not: the
 * binding lives on in another process (a child that inherited its netlink
 * socket, one it was passed to), and so its steering stays until the
 * binding is gone (reported). */
int dmt_op_clean(struct dmt_op *op, bool all);
/* Bring the shared settings to what the remaining owners (and me, when
 * not NULL; more_rules: me about to add rules) and the bound queues need
 * (dmt_derive_shared); with nobody left and no queue bound, restore the
 * baseline and remove IF.base. */
int dmt_op_reconcile(struct dmt_op *op, const struct dmt_owner *me,
		     bool more_rules);
/* Undo o's rules and context where the device shows they are ours;
 * *gone when nothing of o is left on the device. */
int dmt_op_undo_owner(struct dmt_op *op, struct dmt_owner *o, bool *gone);
/* Before each change: the test hooks (fail: -EIO, crash: SIGKILL), and
 * what is being done for messages. */
int dmt_op_step(struct dmt_op *op, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* The device's rules (read once; NULL list allowed when none). */
int dmt_op_rules(struct dmt_op *op);
/* queue-get (read once; none without the netdev family), in op->qget. */
int dmt_op_queue_get(struct dmt_op *op);
/* The device's RSS contexts in op->ctxs (read once; none where the driver
 * has no RSS); after a context is made or deleted, _changed() drops them. */
int dmt_op_contexts(struct dmt_op *op);
void dmt_op_contexts_changed(struct dmt_op *op);
/* The device's rings, rx-ntuple-filter and default RSS table, read once
 * per operation until a change (*rss valid until the next change). */
int dmt_op_dev_rings(struct dmt_op *op, struct dmt_rings *r);
int dmt_op_dev_ntuple(struct dmt_op *op, struct dmt_feature *f);
int dmt_op_dev_rss(struct dmt_op *op, const struct dmt_rss **rss);
/* "; "-joined report of an item left alone. */
void dmt_op_report(struct dmt_op *op, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Write o's file (name from its identity); *text (malloc'd, *len bytes)
 * gets what was written when text is not NULL. */
int dmt_op_save_owner(struct dmt_op *op, const struct dmt_owner *o,
		      char **text, size_t *len);
/* The RX queue count (channels, else queue-get, else sysfs). */
int dmt_op_count_rx(struct dmt_op *op);
/*
 * Plan the queues of a new owner: req[0..nreq) (checked: range,
 * duplicates, not owned by an owner: -EBUSY naming it, not in use outside
 * the library where queue-get says so, not fed by an ntuple rule or an RSS
 * context that no owner made: -EBUSY naming it and the fix), else the k
 * highest free ones.  One queue stays for other traffic unless allow_all.
 * Returns the count, or -ERANGE/-EINVAL/-EBUSY/-ENOSPC (or the error of
 * reading the device) with the message in why.
 */
int dmt_op_plan_queues(struct dmt_op *op, const uint32_t *req, uint32_t nreq,
		       uint32_t k, bool allow_all, uint32_t *out, char *why,
		       size_t whylen);

/* Inode of this thread's network namespace (/proc/thread-self/ns/net), 0
 * when unknown. */
uint64_t dmt_netns_id(void);

/* The run directory: opt_dir, $DEVMEMTCP_RUN_DIR, or /run/devmemtcp. */
const char *dmt_run_dir(const char *opt_dir);

/* ---- plan (pure functions, unit-tested) ---- */

/*
 * The devmem queues: req[0..nreq) when req is set, else the last k of nrx.
 * Validates range, duplicates and that at least one queue is left for
 * other traffic (unless allow_all).  Message in why.
 */
int dmt_plan_queues(uint32_t nrx, const uint32_t *req, uint32_t nreq,
		    uint32_t k, bool allow_all, uint32_t *out, char *why,
		    size_t whylen);
/*
 * New default table keeping traffic off the devmem queues: a default
 * (i % nrx) table becomes an even spread over the other queues; a custom
 * table keeps its entries that point elsewhere and has the others
 * replaced round-robin.  Returns 1 when out differs from cur, 0 when no
 * change is needed, -EINVAL when no other queue exists.
 */
int dmt_plan_rss(const uint32_t *cur, uint32_t n, uint32_t nrx,
		 const uint32_t *queues, uint32_t k, uint32_t *out);
/* Is cur the driver default spread over nrx queues? */
bool dmt_rss_is_default(const uint32_t *cur, uint32_t n, uint32_t nrx);
/* Table of size n spread over queues (the RSS context). */
void dmt_plan_ctx(uint32_t n, const uint32_t *queues, uint32_t k,
		  uint32_t *out);
/* Is v one of set[0..n)? */
bool dmt_in_list(uint32_t v, const uint32_t *set, uint32_t n);
/*
 * The shared settings the owners need, from the baseline and the owners
 * (dmt_base.baseline, nrx RX queues): header split on and hds-thresh 0
 * while any owner exists, the default table kept off the queues of
 * owners without keep_rss, ntuple on while an owner has (or, more_rules,
 * is about to have) a rule or the baseline had it on; the baseline when
 * there is no owner.  bound[0..nbound) are the RX queues queue-get shows
 * bound (a dma-buf, io_uring, AF_XDP): whoever owns them, or nobody, they
 * are kept off the default table too (but a keep_rss owner's, which stay
 * there by its choice), and while one is, header split stays on as for
 * an owner.  With no queue left for the rest the table stays as the
 * owners last set it (b->applied).  t->rss malloc'd.  0 or -ENOMEM.
 */
int dmt_derive_shared(const struct dmt_base *b, uint32_t nrx,
		      const struct dmt_owner *const *owners, size_t n,
		      const uint32_t *bound, uint32_t nbound, bool more_rules,
		      struct dmt_shared *t);

/* ---- the handle ---- */

struct devmemtcp_binding;

/*
 * The calls on a handle, by the implementation that made it: this
 * layer's for a setup made here, devmemtcp-broker's (lib/priv/) for one
 * the broker made.  close runs after the binding is closed and frees the
 * handle; flows counts the handle's flows (devmemtcp_nic_stats).
 */
struct dmt_nic_ops {
	int (*close)(struct devmemtcp_nic *nic);
	/* free the handle only (a forked child's copy of a parent's handle:
	 * core/fork.h), closing its descriptors and changing nothing */
	void (*free)(struct devmemtcp_nic *nic);
	int (*add_flow)(struct devmemtcp_nic *nic, const struct devmemtcp_flow *flow);
	int (*remove_flow)(struct devmemtcp_nic *nic, int flow_id);
	uint32_t (*flows)(const struct devmemtcp_nic *nic);
};

struct devmemtcp_nic {
	struct devmemtcp_ctx *ctx;
	struct dmt_err err;		/* last failed operation on the handle */
	struct dmt_err eerr;		/* the detail of the layers below */
	struct dmt_nl *nl;
	struct dmt_eth eth;
	char run_dir[PATH_MAX];
	struct dmt_owner me;		/* this owner's journal */
	char name[NAME_MAX + 1];	/* its file */
	bool saved;			/* the file exists */
	bool marked;			/* it says closed */
	bool stale;			/* someone else undid (some of) it */
	char *text;			/* what it says */
	size_t text_len;
	uint32_t nrx;
	uint32_t flags;
	bool use_ctx;
	bool tds_unreported;	/* rings shown without tcp-data-split */
	uint32_t next_flow_id;
	uint32_t rr;
	struct devmemtcp_binding *binding;
	int fail_step, crash_step;
	uint64_t setup_rt, setup_ioctls;
	uint32_t setup_steps;
	/* the calls on the handle, by the implementation that made it */
	const struct dmt_nic_ops *ops;
	void *remote;			/* that implementation's state, or NULL */
	unsigned int fork_gen;		/* core/fork.h */
};

/* devmemtcp_nic_open's checks of its arguments (both implementations). */
int dmt_nic_check_open(struct devmemtcp_ctx *ctx,
		       const struct devmemtcp_nic_opts *opts,
		       struct devmemtcp_nic **nicp);
/* devmemtcp_nic_open of a setup made here, for this process: the local
 * implementation of the privileged operations' nic_open. */
int dmt_nic_open_self(struct devmemtcp_ctx *ctx, const char *ifname,
		      const struct devmemtcp_nic_opts *opts,
		      struct devmemtcp_nic **nicp);
/* An empty handle whose calls go to ops, with state bytes (zeroed) at
 * nic->remote for the implementation that made it; -ENOMEM with the
 * message on ctx->err. */
int dmt_nic_new_remote(struct devmemtcp_ctx *ctx, const struct dmt_nic_ops *ops,
		       size_t state, struct devmemtcp_nic **nicp);
/* Free the handle (its binding, sockets and journal in memory). */
void dmt_nic_free(struct devmemtcp_nic *nic);

/* devmemtcp_nic_open() with another process as the owner (pid, and its
 * start time: field 22 of /proc/PID/stat): for the broker, which sets up
 * on behalf of a client.  Not exported. */
int dmt_nic_open_as(struct devmemtcp_ctx *ctx, const char *ifname,
		    const struct devmemtcp_nic_opts *opts, pid_t pid,
		    uint64_t start, struct devmemtcp_nic **nic);

/* For the broker: number its handles above base (the largest number of
 * the owners' files it found), so that a restarted broker does not give
 * a client the file name of a setup the previous one left for it. */
void dmt_nic_handle_base(unsigned int base);
/* For the broker: the handle's binding, which is the caller's from now
 * on (the broker hands its netlink socket to the client and closes its
 * own copy); NULL when it has none. */
struct devmemtcp_binding *dmt_nic_take_binding(struct devmemtcp_nic *nic);
/* For the broker: free the handle and leave its setup (and its file) as
 * it is, for its owner's next close or the next operation after the
 * owner died (the broker exiting while a client still holds a binding). */
void dmt_nic_forget(struct devmemtcp_nic *nic);

/* Between the files of the owners' model: owners.c (processes, the
 * operation, queues), undo.c (undoing an owner, dead owners) and
 * shared.c (the shared settings on the device). */
int dmt_shared_copy_table(struct dmt_shared *dst, const struct dmt_shared *src);
bool dmt_shared_same_table(const struct dmt_shared *a, const struct dmt_shared *b);
int dmt_op_save_base(struct dmt_op *op);
bool dmt_op_queue_bound(const struct dmt_op *op, uint32_t q, char *what, size_t len);
int dmt_op_bound_queues(struct dmt_op *op, uint32_t **list, uint32_t *n);
long dmt_op_find_rule(const struct dmt_op *op, uint32_t loc);
void dmt_op_forget_rule(struct dmt_op *op, long i);
bool dmt_rule_is(const struct dmt_rule *d, const struct dmt_orule *r);
bool dmt_table_is(const struct dmt_rss *rss, const struct dmt_owner *o);

/* Between the files of the setup: nic.c (open, close, the transaction),
 * handle.c (the handle's owner file) and rules.c (flows as rules). */
uint64_t dmt_nic_nl_rt(const struct devmemtcp_nic *nic);
int dmt_nic_save(struct devmemtcp_nic *nic, struct dmt_op *op);
int dmt_nic_mark_closed(struct devmemtcp_nic *nic, struct dmt_op *op);
void dmt_nic_stale_msg(const struct devmemtcp_nic *nic, const struct dmt_op *op,
		       char *buf, size_t len);
int dmt_nic_own_file(struct devmemtcp_nic *nic, struct dmt_op *op);
void dmt_nic_finish_hint(const struct devmemtcp_nic *nic, char *buf, size_t len);
int dmt_nic_report(struct devmemtcp_nic *nic, int code, const char *what);
int dmt_nic_check_flows(struct devmemtcp_nic *nic,
			const struct devmemtcp_flow *flows, size_t n);
int dmt_nic_add_rule(struct devmemtcp_nic *nic, struct dmt_op *op,
		     const struct devmemtcp_flow *flow, size_t index);
int dmt_nic_local_add_flow(struct devmemtcp_nic *nic, const struct devmemtcp_flow *flow);
int dmt_nic_local_remove_flow(struct devmemtcp_nic *nic, int flow_id);
int dmt_nic_leave(struct devmemtcp_nic *nic, struct dmt_op *op,
		  const struct dmt_err *unread);
uint64_t dmt_nic_binding_rt(const struct devmemtcp_nic *nic);
int dmt_nic_handle_op(struct devmemtcp_nic *nic, struct dmt_op *op);
int dmt_nic_check_own_file(struct devmemtcp_nic *nic, struct dmt_op *op);

/* Test hooks: fail (or SIGKILL the process at) the n-th change of the
 * next opens (also DEVMEMTCP_NIC_FAIL_STEP, DEVMEMTCP_NIC_CRASH_STEP) or
 * closes (DEVMEMTCP_TEST_NIC_CLOSE_FAIL_STEP, _CRASH_STEP); 0 off. */
#if DMT_TEST_HOOKS
extern int dmt_nic_fail_step;
extern int dmt_nic_crash_step;
extern int dmt_test_nic_close_fail_step;
extern int dmt_test_nic_close_crash_step;
/* Answers the NIC layer's queue-get in place of the kernel (the unit
 * tests' fake NIC: which of its queues carry a binding); NULL: the
 * kernel's. */
extern int (*dmt_test_queue_list)(int ifindex, struct devmemtcp_queue *q,
				  size_t max);
#endif

#endif

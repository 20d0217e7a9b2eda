/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * Private: transactional NIC setup (layer 4) and its journal.  This layer
 * owns what a devmemtcp_nic handle changes on an interface (header split,
 * hds-thresh, the default RSS table, an RSS context, ntuple rules, the
 * bind-rx binding), the journal and lock under the run directory
 * (journal.c), and the undo of all of it.  It may call the ethtool layer
 * (ethtool.h) for every NIC setting and the netdev layer (netdev.h) for
 * bind-rx and queue listing; it is called only through the public API.
 *
 * The journal is the source of truth for undo: the handle fills it before
 * each change (prior state, then the change it is about to make), writes it
 * to <run_dir>/<ifname>.journal atomically, and undoes from it on close, on
 * a failed open and in devmemtcp_nic_recover() after a crash.
 */
#ifndef DEVMEMTCP_NIC_H
#define DEVMEMTCP_NIC_H

#include <stdbool.h>
#include <limits.h>
#include <stdint.h>
#include <sys/types.h>

#include "ethtool.h"
#include "internal.h"

#define DMT_JOURNAL_VERSION 1
#define DMT_RUN_DIR "/run/devmemtcp"
#define DMT_NTUPLE_FEATURE "rx-ntuple-filter"

/* Changes a handle made (bits of dmt_journal.changed). */
enum {
	DMT_J_RINGS = 1u << 0,	/* tcp-data-split / hds-thresh */
	DMT_J_RSS = 1u << 1,	/* default RSS table */
	DMT_J_NTUPLE = 1u << 2,	/* rx-ntuple-filter turned on */
	DMT_J_CTX = 1u << 3,	/* RSS context created (ctx_id 0: pending) */
};

struct dmt_jrule {
	uint32_t id;		/* flow id given to the caller */
	bool placed;		/* location known (insert returned) */
	uint32_t location;
	uint32_t rss_context;
	struct ethtool_rx_flow_spec fs;
};

struct dmt_journal {
	pid_t pid;
	char comm[64];
	char ifname[IF_NAMESIZE];
	int ifindex;
	uint64_t netns;		/* inode of the writer's network namespace, 0 unknown */
	uint32_t nqueues;
	uint32_t *queues;

	/* Prior state (valid when have_prior). */
	bool have_prior;
	bool has_tds;
	uint8_t tds;
	bool has_hds;
	uint32_t hds;
	bool ntuple_on;
	bool rss_default;	/* the table was the driver's default spread */
	uint32_t rss_size;	/* 0: no RSS table */
	uint32_t *rss_indir;
	uint32_t nprior_ctx;
	uint32_t *prior_ctx;	/* RSS contexts that existed before */
	uint32_t nprior_rules;
	uint32_t *prior_rules;	/* rule locations that existed before */

	/* Own changes. */
	uint32_t changed;	/* DMT_J_* */
	uint32_t rss_set_size;
	uint32_t *rss_set;	/* the default table this handle set */
	uint32_t ctx_id;
	uint32_t ctx_size;
	uint32_t *ctx_indir;
	uint32_t nrules;
	struct dmt_jrule *rules;
};

void dmt_journal_free(struct dmt_journal *j);
/* Text form; *out malloc'd, NUL-terminated. */
int dmt_journal_format(const struct dmt_journal *j, char **out, size_t *len);
/* 0, or -EBADMSG on anything it does not understand (line number in
 * *bad_line when not NULL). */
int dmt_journal_parse(const char *text, size_t len, struct dmt_journal *j,
		      int *bad_line);

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
/* 0 also when absent. */
int dmt_file_remove(const struct dmt_rundir *rd, const char *name);

/* <ifname>.journal in the run directory: write, read (-ENOENT when
 * absent), remove. */
int dmt_journal_write(const struct dmt_rundir *rd, const char *ifname,
		      const struct dmt_journal *j, struct dmt_err *err);
int dmt_journal_read(const struct dmt_rundir *rd, const char *ifname,
		     struct dmt_journal *j, struct dmt_err *err);
int dmt_journal_remove(const struct dmt_rundir *rd, const char *ifname);

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

/*
 * Undo the changes recorded in j (rules, context, RSS, ntuple, rings; in
 * that order).  recovering: the process that made them is gone, so pending
 * entries (location or context id unknown) are looked up by content.
 * Returns 0 or the first error (message on e->err); always tries every
 * step.
 */
int dmt_nic_undo(struct dmt_eth *e, struct dmt_journal *j, bool recovering);

/* Test hooks: fail (or SIGKILL the process at) the n-th change of the
 * next opens; 0 off.  Also read from DEVMEMTCP_NIC_FAIL_STEP and
 * DEVMEMTCP_NIC_CRASH_STEP. */
#if DMT_TEST_HOOKS
extern int dmt_nic_fail_step;
extern int dmt_nic_crash_step;
#endif

#endif

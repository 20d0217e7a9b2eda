/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * Private: what every layer shares, never installed.  It owns the context
 * (lib/core/ctx.c: log settings, the last message, the lock; the query
 * socket is nl's, the table of privileged operations core/privops.h),
 * the error helpers (record and log; record only; log what was
 * recorded), the options checks and a few small helpers.  Every layer
 * calls it; it calls no other layer.  The layers and which may call which:
 * tests/layers.txt.
 */
#ifndef DEVMEMTCP_INTERNAL_H
#define DEVMEMTCP_INTERNAL_H

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "devmemtcp.h"
#include "testhooks.h"

#define DEVMEMTCP_EXPORT __attribute__((visibility("default")))

/*
 * The errno policy of the API, in one place: every exported function
 * starts with DMT_KEEP_ERRNO, which puts errno back as the caller had it
 * on every return path (the library reports errors only as negative return
 * values).  tests/check-symbols.sh checks that each exported function
 * does.
 */
void dmt_errno_restore(const int *saved);
#define DMT_KEEP_ERRNO                                                         \
	const int dmt_saved_errno_ __attribute__((cleanup(dmt_errno_restore),  \
						   unused)) = errno

/*
 * Every allocation of the library goes through these, so that test builds
 * can fail any one of them (testhooks.h); otherwise they are the libc
 * calls.
 */
static inline void *dmt_malloc(size_t n)
{
	return dmt_hook_alloc_fail() ? NULL : malloc(n);
}
static inline void *dmt_calloc(size_t n, size_t size)
{
	return dmt_hook_alloc_fail() ? NULL : calloc(n, size);
}
static inline void *dmt_realloc(void *p, size_t n)
{
	return dmt_hook_alloc_fail() ? NULL : realloc(p, n);
}
static inline char *dmt_strdup(const char *s)
{
	return dmt_hook_alloc_fail() ? NULL : strdup(s);
}
static inline char *dmt_strndup(const char *s, size_t n)
{
	return dmt_hook_alloc_fail() ? NULL : strndup(s, n);
}

/* CLOCK_MONOTONIC in milliseconds: deadlines of bounded waits. */
static inline int64_t dmt_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * Walking the control buffer of a recvmsg (rx, tx error queue): the first
 * cmsg, or the one after cm, whose header and cmsg_len bytes lie inside
 * [msg_control, end).  NULL at the end, or at a cmsg whose length is
 * impossible (shorter than its header, or past the end: a truncated
 * buffer).  Lengths are compared as sizes, never by adding them to
 * pointers, so that a cmsg_len near 2^64 can neither wrap to the same
 * cmsg nor point back into the buffer (glibc's CMSG_NXTHDR can).
 */
static inline struct cmsghdr *dmt_cmsg_at(const char *p, const char *end)
{
	struct cmsghdr *cm = (struct cmsghdr *)p;
	size_t left = (size_t)(end - p);

	if (left < sizeof(*cm) || cm->cmsg_len < sizeof(*cm) ||
	    cm->cmsg_len > left)
		return NULL;
	return cm;
}

static inline struct cmsghdr *dmt_cmsg_first(const struct msghdr *msg)
{
	const char *p = msg->msg_control;

	return p ? dmt_cmsg_at(p, p + msg->msg_controllen) : NULL;
}

static inline struct cmsghdr *dmt_cmsg_next(const struct cmsghdr *cm,
					    const char *end)
{
	/* cmsg_len <= end - cm here: the rounding cannot wrap */
	size_t step = CMSG_ALIGN(cm->cmsg_len);

	if (step >= (size_t)(end - (const char *)cm))
		return NULL;
	return dmt_cmsg_at((const char *)cm + step, end);
}

#ifndef ARRAY_SIZE
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#endif

#define DMT_ERRMSG_MAX 1024

/* More queues than any NIC has: bind and NIC setup refuse such counts
 * before allocating for them. */
#define DMT_MAX_QUEUES 4096

/* The last error of an object: errno (negative) and its message. */
struct dmt_err {
	int code;
	char msg[DMT_ERRMSG_MAX];
};

struct dmt_nl;
struct dmt_priv_ops;

struct devmemtcp_ctx {
	devmemtcp_log_fn log_fn;
	void *log_user;
	int log_level;
	struct dmt_err err;
	/* Serialises queries on nl (and the messages they leave in err):
	 * threads may share a context for queries. */
	pthread_mutex_t lock;
	struct dmt_nl *nl;	/* query socket, opened on first use (nl.h) */
	unsigned int nl_gen;	/* ... in this fork generation (core/fork.h) */
	/* the privileged operations, chosen when the context was made
	 * (core/privops.h) */
	const struct dmt_priv_ops *priv;
};

/*
 * devmemtcp_ctx_new without the table of privileged operations (which
 * lib/priv/context.c chooses): the checks of opts, the allocation, the
 * log settings; the messages are devmemtcp_ctx_new's.  dmt_ctx_release
 * frees what this made (the query socket is closed first, by nl).
 */
int dmt_ctx_alloc(const struct devmemtcp_ctx_opts *opts, struct devmemtcp_ctx **ctxp);
void dmt_ctx_release(struct devmemtcp_ctx *ctx);

/*
 * Record code (a negative errno) and a message on err, log it through ctx
 * (which may be NULL: stderr at DEVMEMTCP_LOG_ERR), and return code so that
 * callers can write "return dmt_err(ctx, &x->err, -EINVAL, "...")".  err
 * NULL: the calling thread's (dmt_err_thread()).
 */
int dmt_err(const struct devmemtcp_ctx *ctx, struct dmt_err *err, int code,
	    const char *fmt, ...) __attribute__((format(printf, 4, 5)));
int dmt_verr(const struct devmemtcp_ctx *ctx, struct dmt_err *err, int code,
	     const char *fmt, va_list ap) __attribute__((format(printf, 4, 0)));
/*
 * Record code and a message on err without logging (intermediate errors
 * that a caller composes into its own message); returns code.
 */
int dmt_err_set(struct dmt_err *err, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
int dmt_verr_set(struct dmt_err *err, int code, const char *fmt, va_list ap)
	__attribute__((format(printf, 3, 0)));
/* Log the message recorded on err through ctx; returns err->code. */
int dmt_err_log(const struct devmemtcp_ctx *ctx, const struct dmt_err *err);
/* Append " (kernel: <extack>)"-style detail to an existing message. */
void dmt_err_append(struct dmt_err *err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void dmt_err_clear(struct dmt_err *err);
/*
 * The calling thread's message of a failed call that has no object to keep
 * it on (devmemtcp_ctx_new, devmemtcp_flow_parse): devmemtcp_ctx_errmsg(NULL)
 * reads it.
 */
struct dmt_err *dmt_err_thread(void);
/* Log without recording. */
void dmt_log(const struct devmemtcp_ctx *ctx, int level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* -ENOMEM, recorded and logged as "<what>: out of memory". */
static inline int dmt_err_nomem(const struct devmemtcp_ctx *ctx,
				struct dmt_err *err, const char *what)
{
	return dmt_err(ctx, err, -ENOMEM, "%s: out of memory", what);
}

#define dmt_offsetofend(T, f) (offsetof(T, f) + sizeof(((T *)0)->f))

/*
 * Where the fields of each options struct end: the bytes after it (the
 * reserved fields, or fields of a newer caller's struct) must be zero.
 * A new field moves its struct's end here.
 */
#define DMT_OPTS_END_devmemtcp_ctx_opts dmt_offsetofend(struct devmemtcp_ctx_opts, log_level)
#define DMT_OPTS_END_devmemtcp_buf_opts dmt_offsetofend(struct devmemtcp_buf_opts, drm_handle)
#define DMT_OPTS_END_devmemtcp_bind_opts dmt_offsetofend(struct devmemtcp_bind_opts, broker)
#define DMT_OPTS_END_devmemtcp_rx_opts dmt_offsetofend(struct devmemtcp_rx_opts, zcrx)
#define DMT_OPTS_END_devmemtcp_nic_opts dmt_offsetofend(struct devmemtcp_nic_opts, run_dir)
#define DMT_OPTS_END_devmemtcp_probe_opts dmt_offsetofend(struct devmemtcp_probe_opts, run_dir)
#define DMT_OPTS_END_devmemtcp_tx_opts dmt_offsetofend(struct devmemtcp_tx_opts, max_call_bytes)
#define DMT_OPTS_END_devmemtcp_zcrx_opts dmt_offsetofend(struct devmemtcp_zcrx_opts, cq_entries)
#define DMT_OPTS_END_devmemtcp_gpu_opts dmt_offsetofend(struct devmemtcp_gpu_opts, coalesce_us)

/*
 * libbpf-style options check (OPTS_VALID): opts may be NULL; otherwise sz
 * must be set and every byte of the caller's struct after the last field
 * this library knows (known_sz) must be zero, whether it lies inside our
 * struct (ours_sz: reserved) or past it (a newer caller's fields).
 * Returns 0 or -EINVAL with a message on err.
 */
int dmt_opts_check(const struct devmemtcp_ctx *ctx, struct dmt_err *err,
		   const void *opts, size_t user_sz, size_t known_sz,
		   size_t ours_sz, const char *type_name);
/* A reserved field in the middle of a struct (fields were appended after
 * it) must be zero too, when the caller's struct holds it. */
int dmt_opts_reserved(const struct devmemtcp_ctx *ctx, struct dmt_err *err,
		      const void *opts, size_t user_sz, size_t off, size_t len,
		      const char *type_name);
#define DMT_OPTS_RESERVED(ctx, err, opts, type, field)                         \
	dmt_opts_reserved(ctx, err, opts, (opts) ? (opts)->sz : 0,             \
			  offsetof(struct type, field),                         \
			  sizeof(((struct type *)0)->field), #type)
#define DMT_OPTS_CHECK(ctx, err, opts, type)                                   \
	dmt_opts_check(ctx, err, opts, (opts) ? (opts)->sz : 0,                \
		       DMT_OPTS_END_##type, sizeof(struct type), #type)
/* The caller's struct (not NULL) is new enough to hold field whole. */
#define DMT_OPT_HAS(opts, type, field)                                         \
	((opts)->sz >= dmt_offsetofend(struct type, field))
/* field of an options struct, or def when opts is NULL or too old to
 * contain the field. */
#define DMT_OPT_GET(opts, type, field, def)                                    \
	(((opts) && DMT_OPT_HAS(opts, type, field)) ? (opts)->field : (def))
/* The same, and def also when the field is zero. */
#define DMT_OPT(opts, type, field, def)                                        \
	(((opts) && DMT_OPT_HAS(opts, type, field) && (opts)->field)           \
		 ? (opts)->field                                               \
		 : (def))

/*
 * dmt_err() on ctx->err under ctx->lock, for calls that other threads may
 * make on the same context at once (the queries) when they fail outside
 * the lock.
 */
int dmt_ctx_err(struct devmemtcp_ctx *ctx, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/*
 * Copy a stats or report struct out to a caller whose struct may be older
 * (smaller) or newer (larger) than ours: the first min(*user_sz, ours)
 * bytes, keeping the caller's sz.  user points at the caller's struct,
 * whose first member is size_t sz.
 */
void dmt_copy_out(void *user, void *ours, size_t ours_sz);

/*
 * Buffers are reference counted (lib/buf/buf.c): bindings and receive handles
 * take a reference for as long as they use one, devmemtcp_buf_free() drops
 * the creator's.  get returns buf; put ignores NULL, the last one frees.
 */
struct devmemtcp_buf *dmt_buf_get(const struct devmemtcp_buf *buf);
void dmt_buf_put(struct devmemtcp_buf *buf);

/*
 * fd is a connected TCP socket (IPv4 or IPv6), for fn ("devmemtcp_rx_new")
 * which does use ("devmem TCP"): 0 with *domain set, or -ENOTSOCK/-EBADF,
 * -EPROTOTYPE, -ENOTCONN with the message on ctx->err.
 */
int dmt_tcp_check(struct devmemtcp_ctx *ctx, const char *fn, const char *use,
		  int fd, int *domain);

/* This process's name from /proc/self/comm into buf ("?" when unknown). */
const char *dmt_self_comm(char *buf, size_t len);

/* The name of ifindex for messages, or "ifindex N" when it has none, in
 * buf (DMT_IFNAME_MAX bytes); returns buf. */
#define DMT_IFNAME_MAX 32	/* IF_NAMESIZE or "ifindex -2147483648" */
const char *dmt_ifname(int ifindex, char *buf);

/* Name of an errno for messages ("EINVAL"), or its number. */
const char *dmt_errno_name(int err);

#endif

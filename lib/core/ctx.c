// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/* Library context, error recording and logging. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "config.h"
#include "internal.h"

DEVMEMTCP_EXPORT const char *devmemtcp_version(void)
{
	DMT_KEEP_ERRNO;
	return DEVMEMTCP_VERSION;
}

/* The level DEVMEMTCP_LOG asks for, or def when it is unset or unknown. */
static int level_from_env(int def)
{
	static const struct {
		const char *name;
		int level;
	} names[] = {
		{ "none", DEVMEMTCP_LOG_NONE }, { "err", DEVMEMTCP_LOG_ERR },
		{ "warn", DEVMEMTCP_LOG_WARN }, { "info", DEVMEMTCP_LOG_INFO },
		{ "debug", DEVMEMTCP_LOG_DEBUG },
	};
	const char *env = secure_getenv("DEVMEMTCP_LOG");

	if (env) {
		for (size_t i = 0; i < ARRAY_SIZE(names); i++)
			if (!strcasecmp(env, names[i].name))
				return names[i].level;
	}
	return def;
}

static void log_msg(const struct devmemtcp_ctx *ctx, int level,
		    const char *msg)
{
	/* without a context: silent unless DEVMEMTCP_LOG asks */
	int max = ctx ? ctx->log_level : level_from_env(DEVMEMTCP_LOG_NONE);

	if (level > max)
		return;
	if (ctx && ctx->log_fn)
		ctx->log_fn(ctx->log_user, level, msg);
	else
		fprintf(stderr, "devmemtcp: %s\n", msg);
}

int dmt_verr_set(struct dmt_err *err, int code, const char *fmt, va_list ap)
{
	err->code = code;
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	return code;
}

int dmt_err_set(struct dmt_err *err, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	code = dmt_verr_set(err, code, fmt, ap);
	va_end(ap);
	return code;
}

int dmt_err_log(const struct devmemtcp_ctx *ctx, const struct dmt_err *err)
{
	log_msg(ctx, DEVMEMTCP_LOG_ERR, err->msg);
	return err->code;
}

struct dmt_err *dmt_err_thread(void)
{
	static __thread struct dmt_err err;

	return &err;
}

int dmt_verr(const struct devmemtcp_ctx *ctx, struct dmt_err *err, int code,
	     const char *fmt, va_list ap)
{
	if (!err)
		err = dmt_err_thread();
	dmt_verr_set(err, code, fmt, ap);
	return dmt_err_log(ctx, err);
}

int dmt_err(const struct devmemtcp_ctx *ctx, struct dmt_err *err, int code,
	    const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	code = dmt_verr(ctx, err, code, fmt, ap);
	va_end(ap);
	return code;
}

void dmt_err_append(struct dmt_err *err, const char *fmt, ...)
{
	size_t len = strlen(err->msg);
	va_list ap;

	if (len >= sizeof(err->msg) - 1)
		return;
	va_start(ap, fmt);
	vsnprintf(err->msg + len, sizeof(err->msg) - len, fmt, ap);
	va_end(ap);
}

void dmt_err_clear(struct dmt_err *err)
{
	err->code = 0;
	err->msg[0] = '\0';
}

void dmt_log(const struct devmemtcp_ctx *ctx, int level, const char *fmt, ...)
{
	char msg[DMT_ERRMSG_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_msg(ctx, level, msg);
}

int dmt_opts_check(const struct devmemtcp_ctx *ctx, struct dmt_err *err,
		   const void *opts, size_t user_sz, size_t known_sz,
		   size_t ours_sz, const char *type_name)
{
	if (!opts)
		return 0;
	if (user_sz < sizeof(size_t))
		return dmt_err(ctx, err, -EINVAL,
			       "struct %s: sz is %zu: initialise it with DEVMEMTCP_OPTS() or set .sz = sizeof(struct %s)",
			       type_name, user_sz, type_name);
	for (size_t i = known_sz; i < user_sz; i++) {
		if (!((const unsigned char *)opts)[i])
			continue;
		if (i < ours_sz)
			return dmt_err(ctx, err, -EINVAL,
				       "struct %s has a non-zero reserved byte at offset %zu (its fields end at %zu): declare it with DEVMEMTCP_OPTS() or zero it with memset, and leave reserved fields zero",
				       type_name, i, known_sz);
		return dmt_err(ctx, err, -EINVAL,
			       "struct %s has non-zero bytes at offset %zu, beyond the %zu bytes this library version knows: upgrade libdevmemtcp or leave newer fields zero",
			       type_name, i, ours_sz);
	}
	return 0;
}

int dmt_opts_reserved(const struct devmemtcp_ctx *ctx, struct dmt_err *err,
		      const void *opts, size_t user_sz, size_t off, size_t len,
		      const char *type_name)
{
	for (size_t i = off; opts && i < off + len && i < user_sz; i++)
		if (((const unsigned char *)opts)[i])
			return dmt_err(ctx, err, -EINVAL,
				       "struct %s has a non-zero reserved byte at offset %zu: declare it with DEVMEMTCP_OPTS() or zero it with memset, and leave reserved fields zero",
				       type_name, i);
	return 0;
}

int dmt_tcp_check(struct devmemtcp_ctx *ctx, const char *fn, const char *use,
		  int fd, int *domain)
{
	int type = 0, proto = 0, ret;
	struct sockaddr_storage peer;
	socklen_t len = sizeof(type);
	char what[32] = "";

	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len)) {
		ret = -errno;
		return dmt_err(ctx, &ctx->err, ret,
			       "%s: fd %d is not a socket (%s): pass a connected TCP socket",
			       fn, fd, strerror(-ret));
	}
	*domain = 0;
	len = sizeof(*domain);
	getsockopt(fd, SOL_SOCKET, SO_DOMAIN, domain, &len);
	len = sizeof(proto);
	getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &proto, &len);
	if (type == SOCK_DGRAM)
		snprintf(what, sizeof(what), "a datagram socket");
	else if (type != SOCK_STREAM)
		snprintf(what, sizeof(what), "socket type %d", type);
	else if (*domain == AF_UNIX)
		snprintf(what, sizeof(what), "an AF_UNIX socket");
	else if (*domain != AF_INET && *domain != AF_INET6)
		snprintf(what, sizeof(what), "address family %d", *domain);
	else if (proto != IPPROTO_TCP)
		snprintf(what, sizeof(what), "protocol %d", proto);
	if (what[0])
		return dmt_err(ctx, &ctx->err, -EPROTOTYPE,
			       "%s: fd %d is not a TCP socket (%s): %s needs a connected TCP socket (IPv4 or IPv6)",
			       fn, fd, what, use);
	len = sizeof(peer);
	if (getpeername(fd, (struct sockaddr *)&peer, &len)) {
		ret = -errno;
		return dmt_err(ctx, &ctx->err, ret,
			       "%s: fd %d is not connected (%s): connect() it first, or pass the socket accept() returns",
			       fn, fd, strerror(-ret));
	}
	return 0;
}

void dmt_errno_restore(const int *saved)
{
	errno = *saved;
}

void dmt_copy_out(void *user, void *ours, size_t ours_sz)
{
	size_t user_sz = *(size_t *)user;

	*(size_t *)ours = user_sz;
	memcpy(user, ours, user_sz < ours_sz ? user_sz : ours_sz);
}

const char *dmt_self_comm(char *buf, size_t len)
{
	FILE *f = fopen("/proc/self/comm", "re");

	snprintf(buf, len, "?");
	if (f) {
		if (fgets(buf, (int)len, f))
			buf[strcspn(buf, "\n")] = '\0';
		fclose(f);
	}
	return buf;
}

const char *dmt_errno_name(int err)
{
	/* the kernel's own numbers that reach user space, and, without
	 * strerrorname_np, the ones this library returns most */
	static const struct {
		int code;
		const char *name;
	} names[] = {
		{ 512, "ERESTARTSYS" },	    { 515, "ENOIOCTLCMD" },
		{ 524, "ENOTSUPP" },	    { 525, "ETOOSMALL" },
		/* a message with ENOMEM must say so in words */
		{ ENOMEM, "ENOMEM (out of memory)" },
#if !HAVE_STRERRORNAME_NP
		{ EPERM, "EPERM" },	    { ENOENT, "ENOENT" },
		{ EIO, "EIO" },		    { EBADF, "EBADF" },
		{ EACCES, "EACCES" },
		{ EFAULT, "EFAULT" },	    { EBUSY, "EBUSY" },
		{ EEXIST, "EEXIST" },	    { ENODEV, "ENODEV" },
		{ EINVAL, "EINVAL" },	    { E2BIG, "E2BIG" },
		{ EFBIG, "EFBIG" },	    { ERANGE, "ERANGE" },
		{ ENODATA, "ENODATA" },	    { EOPNOTSUPP, "EOPNOTSUPP" },
		{ ENOSPC, "ENOSPC" },	    { EAGAIN, "EAGAIN" },
		{ ENOTCONN, "ENOTCONN" },   { ENOTSOCK, "ENOTSOCK" },
		{ ENOBUFS, "ENOBUFS" },	    { EMSGSIZE, "EMSGSIZE" },
		{ EPROTOTYPE, "EPROTOTYPE" }, { EPROTO, "EPROTO" },
		{ ESTALE, "ESTALE" },	    { ETIMEDOUT, "ETIMEDOUT" },
#endif
	};
	static __thread char buf[32];
	const char *name;

	if (err < 0)
		err = -err;
	for (size_t i = 0; i < ARRAY_SIZE(names); i++)
		if (names[i].code == err)
			return names[i].name;
#if HAVE_STRERRORNAME_NP
	name = strerrorname_np(err);
	if (name)
		return name;
#endif
	snprintf(buf, sizeof(buf), "errno %d", err);
	name = buf;
	return name;
}

int dmt_ctx_alloc(const struct devmemtcp_ctx_opts *opts, struct devmemtcp_ctx **ctxp)
{
	struct devmemtcp_ctx *ctx;
	int ret, level;

	if (!ctxp)
		return dmt_err(NULL, NULL, -EINVAL,
			       "devmemtcp_ctx_new: ctx pointer is NULL: pass the address of a struct devmemtcp_ctx *");
	*ctxp = NULL;
	ret = DMT_OPTS_CHECK(NULL, NULL, opts, devmemtcp_ctx_opts);
	if (ret)
		return ret;
	level = DMT_OPT(opts, devmemtcp_ctx_opts, log_level, 0);
	if (level < DEVMEMTCP_LOG_OFF || level > DEVMEMTCP_LOG_DEBUG)
		return dmt_err(NULL, NULL, -EINVAL,
			       "devmemtcp_ctx_new: log_level %d is not a log level: use DEVMEMTCP_LOG_OFF (-1), 0 (the default) or 1 to 7 (DEVMEMTCP_LOG_ERR 3 to DEVMEMTCP_LOG_DEBUG 7)",
			       level);
	ctx = dmt_calloc(1, sizeof(*ctx));
	if (!ctx)
		return dmt_err_nomem(NULL, NULL, "devmemtcp_ctx_new");
	ctx->log_fn = DMT_OPT(opts, devmemtcp_ctx_opts, log_fn, NULL);
	ctx->log_user = DMT_OPT(opts, devmemtcp_ctx_opts, log_user, NULL);
	/* silent unless asked: by DEVMEMTCP_LOG, or by a callback */
	ctx->log_level = DMT_OPT(opts, devmemtcp_ctx_opts, log_level,
				 level_from_env(ctx->log_fn ? DEVMEMTCP_LOG_ERR
							    : DEVMEMTCP_LOG_NONE));
	pthread_mutex_init(&ctx->lock, NULL);
	*ctxp = ctx;
	return 0;
}

void dmt_ctx_release(struct devmemtcp_ctx *ctx)
{
	pthread_mutex_destroy(&ctx->lock);
	free(ctx);
}

DEVMEMTCP_EXPORT const char *devmemtcp_ctx_errmsg(const struct devmemtcp_ctx *ctx)
{
	DMT_KEEP_ERRNO;
	return ctx ? ctx->err.msg : dmt_err_thread()->msg;
}

int dmt_ctx_err(struct devmemtcp_ctx *ctx, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	pthread_mutex_lock(&ctx->lock);
	code = dmt_verr(ctx, &ctx->err, code, fmt, ap);
	pthread_mutex_unlock(&ctx->lock);
	va_end(ap);
	return code;
}

const char *dmt_ifname(int ifindex, char *buf)
{
	if (ifindex > 0 && if_indextoname((unsigned int)ifindex, buf))
		return buf;
	snprintf(buf, DMT_IFNAME_MAX, "ifindex %d", ifindex);
	return buf;
}

// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * What the devmemtcp subcommands share: parsing sizes and addresses, the
 * clock for rates, and creating the context and the buffer so that every
 * command reports a failure the same way ("devmemtcp CMD: why").  Nothing
 * here knows about a particular command.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"

double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int parse_uint(const char *s, unsigned long long min, unsigned long long max,
	       unsigned long long *v)
{
	char *end;

	if (*s < '0' || *s > '9')
		return -1;
	errno = 0;
	*v = strtoull(s, &end, 10);
	return errno || *end || *v < min || *v > max ? -1 : 0;
}

long long parse_size(const char *s)
{
	unsigned long long v;
	unsigned int shift = 0;
	char *end;

	if (*s < '0' || *s > '9')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -2;
	switch (*end) {
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	}
	if (shift && *end == 'i')
		end++;
	if (*end == 'B')
		end++;
	if (*end)
		return -1;
	if (v > (unsigned long long)LLONG_MAX >> shift)
		return -2;
	return (long long)(v << shift);
}

int bad_value(const char *cmd, const char *opt, const char *arg,
	      const char *what)
{
	fprintf(stderr, "%s: %s: \"%s\" is not %s\n", cmd, opt, arg, what);
	return 2;
}

int usage_error(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " (see '%s --help')\n", cmd);
	return 2;
}

/* The option of opts that getopt_long() returns as c, or NULL. */
static const struct option *option_of(const struct option *opts, int c)
{
	for (; opts->name; opts++)
		if (opts->val == c)
			return opts;
	return NULL;
}

int getopt_error(const char *cmd, int c, const struct option *opts,
		 char **argv)
{
	const struct option *opt = option_of(opts, optopt);

	if (c == ':') {
		if (opt)
			return usage_error(cmd, "--%s needs a value", opt->name);
		return usage_error(cmd, "-%c needs a value", optopt);
	}
	if (optopt)
		return usage_error(cmd, "unknown option \"-%c\"", optopt);
	return usage_error(cmd, "unknown option \"%s\"", argv[optind - 1]);
}

int tool_getopt(const char *cmd, int argc, char **argv, const char *optstring,
		const struct option *opts, tool_option_fn *fn, void *o)
{
	const char *bare = NULL;	/* the word after an option without value */
	const struct option *bare_opt = NULL;
	const struct option *opt;
	int c, status;

	optind = 1;
	opterr = 0;	/* we name the bad option ourselves */
	while ((c = getopt_long(argc, argv, optstring, opts, NULL)) != -1) {
		if (c == '?' || c == ':')
			return getopt_error(cmd, c, opts, argv);
		/* "-v 7": 7 is not -v's value, which goes with the option */
		opt = option_of(opts, c);
		if (opt && opt->has_arg == optional_argument && !optarg &&
		    optind < argc && argv[optind][0] != '-') {
			bare = argv[optind];
			bare_opt = opt;
		}
		status = fn(c, optarg, o);
		if (status >= 0)
			return status;
	}
	if (optind < argc && argv[optind] == bare)
		return usage_error(cmd, "unexpected argument \"%s\": an optional value goes with the option (--%s=%s or -%c%s)",
				   bare, bare_opt->name, bare, bare_opt->val,
				   bare);
	if (optind < argc)
		return usage_error(cmd, "unexpected argument \"%s\"", argv[optind]);
	return -1;
}

int tool_addr_check(const char *addr)
{
	struct in6_addr a;

	return inet_pton(AF_INET, addr, &a) == 1 || inet_pton(AF_INET6, addr, &a) == 1 ? 0 : -1;
}

const struct tool_fix_entry tool_fixes[] = {
	/* bind-rx without header split (recv without --setup) */
	{ "(or use devmemtcp_nic_open())", "(or pass --setup)" },
	/* probe's fixes of the shared settings */
	{ "(devmemtcp_nic_open() does it and undoes it)",
	  "(devmemtcp recv --setup does it and undoes it)" },
	/* recv --setup on a NIC without RSS; probe's RSS fix */
	{ "pass DEVMEMTCP_NIC_KEEP_RSS if you steer it some other way",
	  "steer it some other way and run devmemtcp recv without --setup" },
	{ "steer other traffic away yourself (DEVMEMTCP_NIC_KEEP_RSS)",
	  "steer other traffic away yourself and run devmemtcp recv without --setup" },
	/* recv --setup behind a foreign rule: the program has no way to
	 * accept the shadow, deleting the rule is the fix */
	{ " or pass DEVMEMTCP_NIC_ALLOW_SHADOW", "" },
	{ NULL, NULL },
};

const char *tool_fix(const char *msg, char *buf, size_t len)
{
	size_t n = 0;

	if (!len)
		return buf;
	while (*msg && n + 1 < len) {
		const struct tool_fix_entry *f;

		for (f = tool_fixes; f->lib; f++)
			if (!strncmp(msg, f->lib, strlen(f->lib)))
				break;
		if (f->lib) {
			n += (size_t)snprintf(buf + n, len - n, "%s", f->tool);
			if (n >= len)
				n = len - 1;
			msg += strlen(f->lib);
		} else {
			buf[n++] = *msg++;
		}
	}
	buf[n] = '\0';
	return buf;
}

int tool_sockaddr(const char *cmd, const char *addr, int port,
		  struct sockaddr_storage *sa, socklen_t *len)
{
	struct sockaddr_in6 *sa6 = (struct sockaddr_in6 *)sa;
	struct sockaddr_in *sa4 = (struct sockaddr_in *)sa;

	memset(sa, 0, sizeof(*sa));
	if (addr && inet_pton(AF_INET, addr, &sa4->sin_addr) == 1) {
		sa4->sin_family = AF_INET;
		sa4->sin_port = htons((uint16_t)port);
		*len = sizeof(*sa4);
		return 0;
	}
	sa6->sin6_addr = in6addr_any;
	if (addr && inet_pton(AF_INET6, addr, &sa6->sin6_addr) != 1) {
		fprintf(stderr, "%s: bad address '%s'\n", cmd, addr);
		return -1;
	}
	sa6->sin6_family = AF_INET6;
	sa6->sin6_port = htons((uint16_t)port);
	*len = sizeof(*sa6);
	return 0;
}

/* Errors reach the user through the commands, which print the failed
 * call's message; everything else the user asked for with DEVMEMTCP_LOG
 * is printed here. */
static void tool_log(void *user, int level, const char *msg)
{
	if (level > DEVMEMTCP_LOG_ERR)
		fprintf(stderr, "%s: %s\n", (const char *)user, msg);
}

int tool_ctx_new(const char *cmd, struct devmemtcp_ctx **ctx)
{
	DEVMEMTCP_OPTS(ctx_opts, co, .log_fn = tool_log, .log_user = (void *)cmd);
	int ret = devmemtcp_ctx_new(&co, ctx);

	if (ret)
		fprintf(stderr, "%s: %s\n", cmd, strerror(-ret));
	return ret;
}

int tool_mem_parse(const char *cmd, const char *arg, struct tool_mem *m)
{
	if (!strcmp(arg, "udmabuf")) {
		*m = (struct tool_mem){ DEVMEMTCP_PROVIDER_UDMABUF, NULL };
		return 0;
	}
	if (!strcmp(arg, "drm") || !strncmp(arg, "drm:", 4)) {
		*m = (struct tool_mem){ DEVMEMTCP_PROVIDER_DRM,
					arg[3] && arg[4] ? arg + 4 : NULL };
		return 0;
	}
	fprintf(stderr, "%s: bad provider '%s': use %s\n", cmd, arg, TOOL_MEM_HELP);
	return -1;
}

const char *tool_mem_name(const struct tool_mem *m)
{
	return m->provider == DEVMEMTCP_PROVIDER_DRM ? "DRM buffer" : "udmabuf";
}

int tool_buf_new(const char *cmd, struct devmemtcp_ctx *ctx,
		 const struct tool_mem *m, uint64_t size,
		 struct devmemtcp_buf **buf)
{
	DEVMEMTCP_OPTS(buf_opts, bo, .provider = DEVMEMTCP_PROVIDER_UDMABUF,
		       .size = size);
	int ret;

	if (m->provider == DEVMEMTCP_PROVIDER_DRM) {
		bo.provider = DEVMEMTCP_PROVIDER_DRM;
		bo.drm_path = m->drm_path;
	}
	ret = devmemtcp_buf_new(ctx, &bo, buf);
	if (ret)
		fprintf(stderr, "%s: %s\n", cmd, devmemtcp_ctx_errmsg(ctx));
	return ret;
}

// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * What the devmemtcp subcommands share: parsing sizes and addresses, the
 * clock for rates, and creating the context and the buffer so that every
 * command reports a failure the same way ("devmemtcp CMD: why").  Nothing
 * here knows about a particular command.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
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

long long parse_size(const char *s)
{
	char *end;
	long long v = strtoll(s, &end, 0);

	if (end == s || v < 0)
		return -1;
	switch (*end) {
	case 'k': case 'K': v <<= 10; end++; break;
	case 'm': case 'M': v <<= 20; end++; break;
	case 'g': case 'G': v <<= 30; end++; break;
	}
	if (*end == 'i' || *end == 'B')
		end++;
	if (*end == 'B')
		end++;
	return *end ? -1 : v;
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

/* The library's messages are printed by the commands themselves. */
static void quiet_log(void *user, int level, const char *msg)
{
}

int tool_ctx_new(const char *cmd, bool quiet, struct devmemtcp_ctx **ctx)
{
	DEVMEMTCP_OPTS(ctx_opts, co, .log_fn = quiet_log);
	int ret = devmemtcp_ctx_new(quiet ? &co : NULL, ctx);

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

/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * The devmemtcp program's internal interface: the subcommands' entry points,
 * which devmemtcp.c dispatches to, and the few helpers they share (common.c):
 * size and address parsing, a clock for rates, and creating the context and
 * the buffer with the error printed the same way by every command.  The
 * commands use the public API only; nothing here is installed.
 */
#ifndef DEVMEMTCP_TOOL_COMMON_H
#define DEVMEMTCP_TOOL_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "devmemtcp.h"

int cmd_recv(int argc, char **argv);	/* cmd-recv.c */
int cmd_send(int argc, char **argv);	/* cmd-tx.c */
int cmd_probe(int argc, char **argv);	/* cmd-nic.c */
int cmd_restore(int argc, char **argv);	/* cmd-nic.c */

/* CLOCK_MONOTONIC in seconds, for rates. */
double now_s(void);

/* Parse "123", "64K", "16M", "1G" into bytes; -1 on error. */
long long parse_size(const char *s);

/*
 * An IPv4 or IPv6 address and a port into *sa; addr NULL: the IPv6 wildcard
 * (which also accepts IPv4 connections).  Prints "CMD: bad address" and
 * returns -1 when addr is neither.
 */
int tool_sockaddr(const char *cmd, const char *addr, int port,
		  struct sockaddr_storage *sa, socklen_t *len);

/*
 * devmemtcp_ctx_new(), printing "CMD: <strerror>" on failure; returns its
 * result.  quiet: the library logs nothing, the command prints the message
 * (devmemtcp_ctx_errmsg()) where it wants it; otherwise the library also
 * logs its errors to stderr.
 */
int tool_ctx_new(const char *cmd, bool quiet, struct devmemtcp_ctx **ctx);

/* Where a command's buffer comes from (--provider udmabuf|drm[:NODE]). */
struct tool_mem {
	uint32_t provider;	/* 0: udmabuf; DEVMEMTCP_PROVIDER_UDMABUF or _DRM */
	const char *drm_path;	/* DRM: the node; NULL: the first that can */
};
#define TOOL_MEM_HELP "udmabuf (default) or drm[:NODE] (a DRM dumb buffer)"

/* Parse --provider's argument into *m; -1 (printed) when it is neither. */
int tool_mem_parse(const char *cmd, const char *arg, struct tool_mem *m);
/* "udmabuf" or "DRM buffer", for messages. */
const char *tool_mem_name(const struct tool_mem *m);
/* A buffer of size bytes from m, printing "CMD: <the context's message>"
 * on failure. */
int tool_buf_new(const char *cmd, struct devmemtcp_ctx *ctx,
		 const struct tool_mem *m, uint64_t size,
		 struct devmemtcp_buf **buf);

#endif

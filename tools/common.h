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

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "devmemtcp.h"

int cmd_recv(int argc, char **argv);	/* cmd-recv.c */
int cmd_send(int argc, char **argv);	/* cmd-tx.c */
int cmd_probe(int argc, char **argv);	/* cmd-nic.c */
int cmd_restore(int argc, char **argv);	/* cmd-nic.c */
int cmd_selftest(int argc, char **argv);	/* cmd-selftest.c */

/* CLOCK_MONOTONIC in seconds, for rates. */
double now_s(void);

/* Parse "123", "64K", "16M", "1G" (K, M, G may be followed by "i", "B" or
 * "iB") into bytes: >= 0, -1 on junk, -2 when it does not fit 2^63 - 1. */
long long parse_size(const char *s);
/* A decimal number in [min, max], nothing else (no sign, no junk): 0 with
 * *v set, or -1. */
int parse_uint(const char *s, unsigned long long min, unsigned long long max,
	       unsigned long long *v);

/*
 * Usage errors, printed as one line on stderr; all return 2, the exit
 * status of a usage error.  bad_value: "CMD: OPT: "ARG" is not WHAT".
 * usage_error: "CMD: <message> (see 'CMD --help')".  getopt_error: the
 * unknown option or the missing value getopt_long() (with opterr 0 and
 * optstring starting with ':') returned as c.
 */
int bad_value(const char *cmd, const char *opt, const char *arg,
	      const char *what);
int usage_error(const char *cmd, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
int getopt_error(const char *cmd, int c, const struct option *opts,
		 char **argv);

/*
 * A command's options: getopt_long() over argv (optstring starting with
 * ':'), each option given to fn (which returns -1 to go on, else the exit
 * status), then no argument may be left; a word right after an option whose
 * value is optional is named as that value written apart.  Returns -1 to go
 * on, else the exit status (2 for a usage error, printed).
 */
typedef int tool_option_fn(int c, const char *arg, void *o);
int tool_getopt(const char *cmd, int argc, char **argv, const char *optstring,
		const struct option *opts, tool_option_fn *fn, void *o);

/*
 * An IPv4 or IPv6 address and a port into *sa; addr NULL: the IPv6 wildcard
 * (which also accepts IPv4 connections).  Prints "CMD: bad address" and
 * returns -1 when addr is neither.
 */
int tool_sockaddr(const char *cmd, const char *addr, int port,
		  struct sockaddr_storage *sa, socklen_t *len);

/* An IPv4 or IPv6 address, as tool_sockaddr() takes it: 0, else -1. */
int tool_addr_check(const char *addr);

/*
 * The library's messages name the fixes of a program that calls it
 * (devmemtcp_nic_open(), DEVMEMTCP_NIC_* flags); on the command line the
 * fix is an option of this program.  tool_fix() writes msg into buf (len
 * bytes) with those parts said the command line's way, and returns buf.
 * tool_fixes lists them (the unit test tool-fix checks each is still what
 * the library says).
 */
const char *tool_fix(const char *msg, char *buf, size_t len);
struct tool_fix_entry {
	const char *lib;	/* what the library says */
	const char *tool;	/* what the command line says instead */
};
extern const struct tool_fix_entry tool_fixes[];

/*
 * devmemtcp_ctx_new(), printing "CMD: <strerror>" on failure; returns its
 * result.  Errors are printed once, by the command, from the objects'
 * messages; the library's log prints only what DEVMEMTCP_LOG asks for
 * beyond errors (warn, info, debug).
 */
int tool_ctx_new(const char *cmd, struct devmemtcp_ctx **ctx);

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

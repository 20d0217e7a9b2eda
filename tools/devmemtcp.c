// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * devmemtcp: the command-line front end of libdevmemtcp.  This file owns
 * the program's entry point: the list of subcommands, the top-level usage
 * text, --help and --version, and dispatching to cmd_<name>() (one file per
 * subcommand; common.c holds what they share).
 */
#include <stdio.h>
#include <string.h>

#include "common.h"

static const struct {
	const char *name;
	int (*fn)(int, char **);
	const char *help;
} cmds[] = {
	{ "recv", cmd_recv, "bind a dma-buf, accept one connection, receive into device memory" },
	{ "send", cmd_send, "send from a dma-buf (devmem TX)" },
	{ "probe", cmd_probe, "explain what an interface lacks for devmem TCP" },
	{ "restore", cmd_restore, "undo NIC changes left by a crashed process" },
	{ "selftest", cmd_selftest, "qualify a NIC against a peer and print one report" },
};

static void usage(FILE *f)
{
	fprintf(f, "usage: devmemtcp COMMAND [OPTIONS]\n\n"
		   "Device Memory TCP from the command line (libdevmemtcp %s).\n\n"
		   "Commands:\n", devmemtcp_version());
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		fprintf(f, "  %-8s %s\n", cmds[i].name, cmds[i].help);
	fprintf(f, "\n'devmemtcp COMMAND --help' describes a command's options.\n"
		   "See devmemtcp(1) and devmemtcp(7).\n");
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
	    !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "--version")) {
		/* the program's version, and the library's it runs with */
		printf("devmemtcp %s (libdevmemtcp %s)\n", DMT_TOOL_VERSION, devmemtcp_version());
		return 0;
	}
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (!strcmp(argv[1], cmds[i].name))
			return cmds[i].fn(argc - 1, argv + 1);
	fprintf(stderr, "devmemtcp: unknown command '%s'\n\n", argv[1]);
	usage(stderr);
	return 2;
}

// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/* devmemtcp: command-line front end of libdevmemtcp. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "devmemtcp.h"
#include "cmds.h"

/* Subcommands built from other files may be left out of a build. */
__attribute__((weak)) int cmd_send(int argc, char **argv)
{
	fprintf(stderr, "devmemtcp: 'send' is not built into this program\n");
	return 2;
}

__attribute__((weak)) int cmd_probe(int argc, char **argv)
{
	fprintf(stderr, "devmemtcp: 'probe' is not built into this program\n");
	return 2;
}

__attribute__((weak)) int cmd_restore(int argc, char **argv)
{
	fprintf(stderr, "devmemtcp: 'restore' is not built into this program\n");
	return 2;
}

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

static const struct {
	const char *name;
	int (*fn)(int, char **);
	const char *help;
} cmds[] = {
	{ "recv", cmd_recv, "bind a dma-buf, accept one connection, receive into device memory" },
	{ "send", cmd_send, "send from a dma-buf (devmem TX)" },
	{ "probe", cmd_probe, "explain what an interface lacks for devmem TCP" },
	{ "restore", cmd_restore, "undo NIC changes left by a crashed process" },
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
		printf("devmemtcp %s\n", devmemtcp_version());
		return 0;
	}
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (!strcmp(argv[1], cmds[i].name))
			return cmds[i].fn(argc - 1, argv + 1);
	fprintf(stderr, "devmemtcp: unknown command '%s'\n\n", argv[1]);
	usage(stderr);
	return 2;
}

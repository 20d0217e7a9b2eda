// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * emuctl - control the emulated devmem NIC, a test tool (tests/emu/README.md;
 * never installed).  The state file is $DEVMEMTCP_EMU, except for create.
 *
 *   emuctl create FILE
 *   emuctl add IFNAME [--netns NAME] [--queues N] [--rx-buf-size N] [--pack] [--mix]
 *   emuctl layout IFNAME [--netns NAME] [--rx-buf-size N] [--pack] [--mix]
 *   emuctl tso IFNAME SEGMENTS [--netns NAME]  segments per TSO frame on the
 *                                         wire (45: 64 KiB, a fast sender's)
 *   emuctl show IFNAME [--netns NAME]     the NIC's state (compare before/after)
 *   emuctl stats                          counters, key=value
 *   emuctl check                          exit 1 when a binding or a page is
 *                                         left, or a request was not modelled
 *   emuctl knob IFNAME NAME VALUE         corrupt_offset, fail_alloc
 *   emuctl qstat IFNAME QUEUE WHAT        alloc_fail, bytes, bufs, pages
 */
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "emu-ctl.h"

static void usage(void)
{
	fprintf(stderr,
		"usage: emuctl create FILE\n"
		"       emuctl add IFNAME [--netns NAME] [--queues N] [--rx-buf-size N] [--pack] [--mix]\n"
		"       emuctl layout IFNAME [--netns NAME] [--rx-buf-size N] [--pack] [--mix]\n"
		"       emuctl tso IFNAME SEGMENTS [--netns NAME]\n"
		"       emuctl show IFNAME [--netns NAME]\n"
		"       emuctl stats | check\n"
		"       emuctl knob IFNAME NAME VALUE\n"
		"       emuctl qstat IFNAME QUEUE WHAT\n"
		"(the state file is $DEVMEMTCP_EMU; a test tool, see tests/emu/README.md)\n");
	exit(2);
}

static int enter_netns(const char *name)
{
	char path[256];
	int fd;

	snprintf(path, sizeof(path), "/var/run/netns/%s", name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || setns(fd, CLONE_NEWNET)) {
		perror(path);
		return -1;
	}
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	unsigned int nq = 16, bufsz = 0;
	int pack = 0, mix = 0, ret;
	const char *verb, *ifname;

	if (argc < 2)
		usage();
	verb = argv[1];
	if (!strcmp(verb, "create"))
		return argc == 3 && !devmemtcp_emu_create(argv[2]) ? 0 : 1;
	if (!strcmp(verb, "stats"))
		return devmemtcp_emu_stats(stdout) ? 1 : 0;
	if (!strcmp(verb, "check"))
		return devmemtcp_emu_check(stdout) ? 1 : 0;
	if (argc < 3)
		usage();
	ifname = argv[2];
	if (!strcmp(verb, "knob"))
		return argc == 5 && !devmemtcp_emu_knob(ifname, argv[3], strtoull(argv[4], NULL, 0)) ? 0 : 1;
	if (!strcmp(verb, "tso")) {
		if (argc == 6 && !strcmp(argv[4], "--netns") && enter_netns(argv[5]))
			return 1;
		return argc >= 4 && !devmemtcp_emu_set_tso(ifname, (uint32_t)atoi(argv[3])) ? 0 : 1;
	}
	if (!strcmp(verb, "qstat")) {
		if (argc != 5)
			usage();
		printf("%llu\n", (unsigned long long)devmemtcp_emu_qstat(ifname, (uint32_t)atoi(argv[3]), argv[4]));
		return 0;
	}
	for (int i = 3; i < argc; i++) {
		if (!strcmp(argv[i], "--netns") && i + 1 < argc) {
			if (enter_netns(argv[++i]))
				return 1;
		} else if (!strcmp(argv[i], "--queues") && i + 1 < argc) {
			nq = (unsigned int)atoi(argv[++i]);
		} else if (!strcmp(argv[i], "--rx-buf-size") && i + 1 < argc) {
			bufsz = (unsigned int)atoi(argv[++i]);
		} else if (!strcmp(argv[i], "--pack")) {
			pack = 1;
		} else if (!strcmp(argv[i], "--mix")) {
			mix = 1;
		} else {
			usage();
		}
	}
	if (!strcmp(verb, "add"))
		ret = devmemtcp_emu_add_nic(ifname, nq, bufsz, pack, mix);
	else if (!strcmp(verb, "layout"))
		ret = devmemtcp_emu_set_layout(ifname, bufsz, pack, mix);
	else if (!strcmp(verb, "show"))
		ret = devmemtcp_emu_show(ifname, stdout);
	else
		usage();
	return ret ? 1 : 0;
}

// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The harness for the shell tests in the guest (one implementation with the
 * C tests):
 *   vm-harness up [TX_IF RX_IF]   build the vm topology (harness.h) unless it
 *                                 is there; prints "built" or "there"
 *   vm-harness down               delete it (the devices come back)
 *   vm-harness kernel-at-least X.Y   exit 0 when the running kernel is X.Y or newer
 *   vm-harness wait-listen PORT   wait (at most 60 s) until a TCP socket of this
 *                                 network namespace listens on PORT; exit 1 if none
 *                                 did (a receiver started in the background is
 *                                 ready only then: a fixed sleep raced it)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

/* true when /proc/net/tcp or tcp6 shows a socket in LISTEN (0A) on port */
static bool listening(unsigned int port)
{
	static const char *const files[] = { "/proc/net/tcp", "/proc/net/tcp6" };
	char line[512];

	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		FILE *f = fopen(files[i], "re");

		if (!f)
			continue;
		while (fgets(line, sizeof(line), f)) {
			unsigned int lport, state;
			char *colon = strchr(line, ':');

			/* "  0: ADDR:PORT REMADDR:PORT ST ..." */
			colon = colon ? strchr(colon + 1, ':') : NULL;
			if (colon && sscanf(colon + 1, "%x %*s %x", &lport, &state) == 2 &&
			    lport == port && state == 0x0A) {
				fclose(f);
				return true;
			}
		}
		fclose(f);
	}
	return false;
}

int main(int argc, char **argv)
{
	int major, minor, r;

	if (argc >= 2 && !strcmp(argv[1], "up") && (argc == 2 || argc == 4)) {
		r = vm_topology(argc == 4 ? argv[2] : VM_TX_IF, argc == 4 ? argv[3] : VM_RX_IF);
		if (r >= 0)
			printf("%s\n", r ? "built" : "there");
		return r < 0 ? T_EXIT_FAIL : T_EXIT_PASS;
	}
	if (argc == 2 && !strcmp(argv[1], "down")) {
		vm_topology_remove();
		return T_EXIT_PASS;
	}
	if (argc == 3 && !strcmp(argv[1], "kernel-at-least") &&
	    sscanf(argv[2], "%d.%d", &major, &minor) == 2)
		return t_kernel_version() >= major * 100 + minor ? 0 : 1;
	if (argc == 3 && !strcmp(argv[1], "wait-listen")) {
		unsigned int port = (unsigned int)strtoul(argv[2], NULL, 10);

		for (int i = 0; i < 600; i++) {
			if (listening(port))
				return T_EXIT_PASS;
			usleep(100 * 1000);
		}
		fprintf(stderr, "vm-harness: nothing listens on TCP port %u after 60 s\n", port);
		return T_EXIT_FAIL;
	}
	fprintf(stderr, "usage: %s up [TX_IF RX_IF] | down | kernel-at-least X.Y | wait-listen PORT\n", argv[0]);
	return 2;
}

// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The harness for the shell tests in the guest (one implementation with the
 * C tests):
 *   vm-harness up [TX_IF RX_IF]   build the vm topology (harness.h) unless it
 *                                 is there; prints "built" or "there"
 *   vm-harness down               delete it (the devices come back)
 *   vm-harness kernel-at-least X.Y   exit 0 when the running kernel is X.Y or newer
 */
#include <stdio.h>
#include <string.h>

#include "harness.h"

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
	fprintf(stderr, "usage: %s up [TX_IF RX_IF] | down | kernel-at-least X.Y\n", argv[0]);
	return 2;
}

/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * Helpers for the vm suite, run as root inside the QEMU guest with the
 * simulated NIC loaded: the pair dsim0/dsim1 is moved into the network
 * namespaces "dmtA" (sender, 10.77.0.1, fd77::1) and "dmtB" (receiver,
 * 10.77.0.2, fd77::2); threads switch namespaces with setns().
 */
#ifndef DEVMEMTCP_VMLIB_H
#define DEVMEMTCP_VMLIB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define VM_TX_IF "dsim0"
#define VM_RX_IF "dsim1"
#define VM_TX_ADDR4 "10.77.0.1"
#define VM_RX_ADDR4 "10.77.0.2"
#define VM_TX_ADDR6 "fd77::1"
#define VM_RX_ADDR6 "fd77::2"

/* Create the namespaces and addresses once (idempotent); 0 or -1. */
int vm_topology(void);
/* Move the calling thread into namespace "dmtA" or "dmtB". */
int vm_enter(const char *ns);
/* Kernel release as a number: 6.12 -> 612. */
int vm_kernel_version(void);

/* A listening TCP socket on addr:port in the current namespace. */
int vm_listen(const char *addr, int port);

/* Send bytes of the pattern (period) to addr:port from namespace "dmtA"
 * in a thread; join with vm_send_wait(), which returns 0 when all bytes
 * were written. */
struct vm_sender;
struct vm_sender *vm_send_start(const char *addr, int port, uint64_t bytes,
				unsigned int period);
int vm_send_wait(struct vm_sender *s);

/* Write a debugfs knob of the simulated NIC, e.g. ("dsim1", "corrupt_offset", 5). */
int vm_sim_knob(const char *ifname, const char *knob, unsigned long long v);

#define VM_CHECK(cond, ...)                                                    \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__,          \
				__LINE__, #cond);                              \
			fprintf(stderr, __VA_ARGS__);                          \
			fprintf(stderr, "\n");                                 \
			return 1;                                              \
		}                                                              \
	} while (0)

#endif

/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * The emulated NIC's control calls (emu-ctl.c), for emuctl and tests.
 * Each returns 0 or a negative errno (devmemtcp_emu_check: 1 when
 * something is left) and prints why it failed on stderr.
 */
#ifndef DEVMEMTCP_EMU_CTL_H
#define DEVMEMTCP_EMU_CTL_H

#include <stdint.h>
#include <stdio.h>

/* A new state file at path (the emulation's $DEVMEMTCP_EMU). */
int devmemtcp_emu_create(const char *path);
/* Emulate ifname of this thread's network namespace with nq queues and
 * the sim's layout parameters. */
int devmemtcp_emu_add_nic(const char *ifname, uint32_t nq, uint32_t rx_buf_size, int pack,
			  int mix);
int devmemtcp_emu_set_layout(const char *ifname, uint32_t rx_buf_size, int pack, int mix);
/* Segments per TSO frame on the emulated wire (1-45; 45 by default). */
int devmemtcp_emu_set_tso(const char *ifname, uint32_t segs);
int devmemtcp_emu_show(const char *ifname, FILE *out);
int devmemtcp_emu_stats(FILE *out);
int devmemtcp_emu_check(FILE *out);
int devmemtcp_emu_knob(const char *ifname, const char *knob, unsigned long long v);
uint64_t devmemtcp_emu_qstat(const char *ifname, uint32_t q, const char *what);

#endif

/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/* Subcommands of the devmemtcp program, one file each. */
#ifndef DEVMEMTCP_CMDS_H
#define DEVMEMTCP_CMDS_H

#include <stddef.h>

int cmd_recv(int argc, char **argv);	/* cmd-recv.c */
int cmd_send(int argc, char **argv);	/* cmd-tx.c */
int cmd_probe(int argc, char **argv);	/* cmd-nic.c */
int cmd_restore(int argc, char **argv);	/* cmd-nic.c */

struct devmemtcp_ctx;
/* NIC preparation for 'recv --setup' (header split, RSS away from the
 * queues, an ntuple rule for dst port), implemented in cmd-nic.c with the
 * devmemtcp_nic_* API; returns a handle for recv_nic_release() or NULL
 * with *err set and the message on ctx. */
void *recv_nic_prepare(struct devmemtcp_ctx *ctx, const char *ifname,
		       const unsigned int *queues, size_t n, int port, int *err);
void recv_nic_release(void *handle);

/* Parse "123", "64K", "16M", "1G" into bytes; -1 on error. */
long long parse_size(const char *s);

#endif

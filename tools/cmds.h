/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/* Subcommands of the devmemtcp program, one file each. */
#ifndef DEVMEMTCP_CMDS_H
#define DEVMEMTCP_CMDS_H

#include <stddef.h>

int cmd_recv(int argc, char **argv);	/* cmd-recv.c */
int cmd_send(int argc, char **argv);	/* cmd-tx.c */
int cmd_probe(int argc, char **argv);	/* cmd-nic.c */
int cmd_restore(int argc, char **argv);	/* cmd-nic.c */

/* CLOCK_MONOTONIC in seconds, for rates. */
double now_s(void);

/* Parse "123", "64K", "16M", "1G" into bytes; -1 on error. */
long long parse_size(const char *s);

#endif

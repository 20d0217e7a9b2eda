/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * The requests of devmemtcp-broker done through the library (nicops.c);
 * b->priv is the broker's struct devmemtcp_ctx.  The log entry is left
 * to the program.
 */
#ifndef DEVMEMTCP_BROKER_NICOPS_H
#define DEVMEMTCP_BROKER_NICOPS_H

#include "session.h"

extern const struct brk_ops brk_nic_ops;

#endif

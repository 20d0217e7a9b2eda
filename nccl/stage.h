/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * Private to the NCCL network plugin: the connects in progress of the
 * process, found from the connector bytes of a handle (stage.c says why
 * and how).  The comms are opaque here: nothing but the table and its
 * lock, so that the nccl-handshake fuzz harness drives it as connect does.
 */
#ifndef DEVMEMTCP_NCCL_STAGE_H
#define DEVMEMTCP_NCCL_STAGE_H

#include <stdbool.h>
#include <stdint.h>

#include "wire.h"

/* Keep comm, a connect just started with the NCCL_NET_HANDLE_MAXSIZE
 * bytes at handle (zero connector bytes), and write its slot and key into
 * them.  The caller holds it (as after dmtn_stage_claim).  0 and the slot
 * in *slot, or -ENOSPC (too many in progress), -ENOMEM, or the errno of
 * getrandom. */
int dmtn_stage_add(void *comm, void *handle, uint64_t *slot);
/* The comm the connector bytes of handle name (p: handle parsed), held
 * by the caller until dmtn_stage_release; NULL when they name none: a slot
 * out of the table, a free one, another key, other peer bytes, or a comm
 * another call holds. */
void *dmtn_stage_claim(const struct dmtn_peer *p, const void *handle);
/* The caller is done with the comm of slot: still in progress, or
 * finished (a comm returned or an error): then the slot is freed and the
 * connector bytes of handle are zeroed, as listen wrote them. */
void dmtn_stage_release(void *handle, uint64_t slot, bool finished);
/* Hand every comm nobody holds to free_fn and forget it (teardown). */
void dmtn_stage_drain(void (*free_fn)(void *comm));

#endif

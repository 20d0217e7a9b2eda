/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * Private to the NCCL network plugin: NCCL's device-side unpack queue of a
 * receive comm (unpack.c says how it is filled and when tokens go back),
 * and the choice, at init, of whether to offer it.
 */
#ifndef DEVMEMTCP_NCCL_UNPACK_H
#define DEVMEMTCP_NCCL_UNPACK_H

#include <stdbool.h>
#include <stdint.h>

#include "net_abi.h"

struct dmtn_comm;
struct dmtn_req;

/* A release series whose queue is net_abi.h's, and the tags it was checked
 * against; the table ends with major 0. */
struct dmtn_unpack_release {
	int major, minor;
	const char *checked;
};
extern const struct dmtn_unpack_release dmtn_unpack_releases[];
/* The row of NCCL version code (ncclGetVersion), or NULL. */
const struct dmtn_unpack_release *dmtn_unpack_release_of(int code);
/* The version code of the NCCL in this process, -1 when there is none. */
int dmtn_nccl_version(void);
/* Does NCCL_PROTO=proto leave NCCL the Simple protocol alone, for every
 * function?  (NULL or empty: no, NCCL's default uses LL and LL128.) */
bool dmtn_nccl_proto_simple_only(const char *proto);
/* Set dmtn.unpack and dmtn.unpack_why (init, under dmtn.lock). */
void dmtn_unpack_decide(void);

/* accept: fill NCCL's device handle h (type UNPACK) with a queue for c. */
int dmtn_unpack_attach(struct dmtn_comm *c, nccl_dev_handle_t *h);
void dmtn_unpack_free(struct dmtn_comm *c);
/* NCCL is closing c: held fragments may go back. */
void dmtn_unpack_closing(struct dmtn_comm *c);
/* Every slot is taken by a receive NCCL has not consumed: post later. */
bool dmtn_unpack_full(const struct dmtn_comm *c);
/* Number receive r (its slot). */
void dmtn_unpack_post(struct dmtn_comm *c, struct dmtn_req *r);
/* One entry of receive r: len bytes at device address addr to dst_off of
 * its buffer; false when it does not fit the queue (the caller places
 * those bytes itself). */
bool dmtn_unpack_add(struct dmtn_comm *c, struct dmtn_req *r, uint64_t addr,
		     uint32_t len, uint64_t dst_off);
/* Publish r's count: its last entry is written. */
void dmtn_unpack_complete(struct dmtn_comm *c, struct dmtn_req *r);
/* irecvConsumed of r: 0, or -EINVAL when r is not the oldest. */
int dmtn_unpack_consumed(struct dmtn_comm *c, struct dmtn_req *r);
/* The devmemtcp_done_fn and its argument for r's fragments. */
int dmtn_unpack_done(void *arg, bool wait);
void *dmtn_unpack_ticket(struct dmtn_comm *c, const struct dmtn_req *r);

#endif

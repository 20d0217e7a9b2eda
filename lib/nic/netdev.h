/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * Private: the netdev layer, the genl family "netdev".  It owns queue-get,
 * qstats-get and the bindings: bind-rx and bind-tx, the explanation of
 * their failures, and the socket whose closing unbinds.  It calls the nl
 * layer and the buffer's fd, size and page-grid check (buf.h); the rest
 * of nic (setup, probe, zcrx's control plane), priv's tables and tx call
 * it, and it calls none of them.
 */
#ifndef DEVMEMTCP_NETDEV_H
#define DEVMEMTCP_NETDEV_H

#include <stdbool.h>
#include <stdint.h>

#include "core/internal.h"
#include "nl/nl.h"

struct devmemtcp_binding {
	struct devmemtcp_ctx *ctx;
	struct dmt_err err;
	struct dmt_nl *nl;	/* owned: closing it unbinds */
	bool tx;
	int ifindex;
	uint32_t id;
	struct devmemtcp_buf *buf;
	uint32_t *queues;
	size_t nqueues;
	unsigned int fork_gen;	/* core/fork.h: a parent's binding is closed
				 * in a child by closing its copy of nl only */
};

/* Queue dump of ifindex over nl (see devmemtcp_queue_list). */
int dmt_queue_list(struct dmt_nl *nl, int ifindex,
		   struct devmemtcp_queue *queues, size_t max);

/* Build the bind request into buf (exposed for unit tests). */
struct nlmsghdr *dmt_bind_msg(void *buf, uint16_t family, bool tx,
			      int ifindex, const uint32_t *queues,
			      size_t nqueues, int fd, uint32_t rx_page_size);

/* Explain a failed bind: errno + the kernel's extack text → a sentence that
 * names the fix, recorded on err (not logged).  Returns the errno recorded,
 * which is the kernel's except where the documented one differs (an
 * rx-page-size the kernel does not know: -EOPNOTSUPP). */
int dmt_bind_explain(struct dmt_err *err, bool tx, int ifindex, int code,
		     const char *extack);

/*
 * A binding over fd, the netlink socket devmemtcp-broker made it on and
 * sent (taken over; closed on failure), with its id: what a direct bind
 * would have returned.  The message of a failure on err, not logged.
 */
int dmt_binding_adopt(struct devmemtcp_ctx *ctx, struct dmt_err *err, bool tx,
		      int ifindex, const uint32_t *queues, size_t nqueues,
		      struct devmemtcp_buf *buf, int fd, uint32_t id,
		      struct devmemtcp_binding **bindingp);

struct dmt_bind_call;

/* bind-rx or bind-tx of a->buf (its arguments checked) over a netlink
 * socket of the binding's own, the local implementation of the
 * privileged operations' bind (core/privops.h); a->sent says whether the
 * request reached the kernel.  The message of a failure on err. */
int dmt_bind_local(struct devmemtcp_ctx *ctx, struct dmt_err *err,
		   struct dmt_bind_call *a, struct devmemtcp_binding **bindingp);

/* Parse one queue-get reply into q; exposed for unit tests. */
int dmt_queue_parse(const struct nlmsghdr *nlh, struct devmemtcp_queue *q);

#endif

/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * The harness for the devmem TX tests of the vm suite (tests/vm/test-tx-*.c):
 * arguments, the opening every such test shares, the receivers (library
 * devmem RX, or a plain socket) that validate every byte against the stream
 * pattern, and a sender that reuses a ring of dma-buf slots only after the
 * library reported them free, checking each report against the peer's ACKs.
 *
 * Arguments (all optional):
 *   --tx-if IF --tx-addr A --tx-ns NS    sending device (default dsim0,
 *                                        10.77.0.1, no netns change)
 *   --rx-if IF --rx-addr A --rx-ns NS    receiving device (dsim1, 10.77.0.2)
 *   --setup         the vm topology (harness.h) with these devices, built
 *                   unless it is there, and then deleted at exit; a --tx-addr
 *                   or --rx-addr that is not the topology's is added
 *   --bytes N       transfer size (K/M/G suffixes)
 *   --port P        first TCP port
 *   --quick         skip the throughput comparison
 * Exit: T_EXIT_PASS, T_EXIT_FAIL, T_EXIT_SKIP (the reason printed).
 */
#ifndef DEVMEMTCP_HARNESS_TX_H
#define DEVMEMTCP_HARNESS_TX_H

#include <sys/types.h>

#include "devmemtcp.h"
#include "harness.h"

struct tx_args {
	const char *tx_if, *rx_if, *tx_addr, *rx_addr, *tx_ns, *rx_ns;
	uint64_t bytes;
	int port;
	bool setup;
	bool quick;
};

/* What a test hands to tx_main(), and what its run() gets. */
struct tx_test {
	struct tx_args a;
	struct devmemtcp_ctx *ctx;	/* in the sender's namespace */
	struct devmemtcp_buf *buf;	/* buf_size bytes of the tx_desc's provider */
	struct devmemtcp_binding *b;	/* bind-tx of buf on a.tx_if */
};

struct tx_desc {
	uint64_t bytes;			/* default --bytes */
	int port;			/* default --port */
	uint64_t buf_size;
	int (*run)(struct tx_test *t);
	uint32_t provider;		/* 0: udmabuf; DEVMEMTCP_PROVIDER_DRM */
};

/*
 * The main() of every TX test: arguments, --setup, the sender's namespace,
 * a context, a buffer (a udmabuf, or d->provider's) and bind-tx on it, then
 * d->run().  On a kernel
 * without devmem TX the test is that the library says so clearly
 * (-EOPNOTSUPP and "needs Linux 6.16"): then run() is not called.
 */
int tx_main(int argc, char **argv, const struct tx_desc *d);

/* ---- receivers: a child process in the receiver's namespace ------------ */

/* What a receiver reports for each connection. */
struct rx_result {
	int ok;			/* 1: every byte as expected */
	uint64_t bytes;
	uint64_t dmabuf_bytes;
	uint64_t linear_bytes;
	uint64_t frags;
	uint64_t tokens_released;
	uint64_t bad_pos;	/* first bad stream position */
	double secs;		/* first byte to end of stream */
	char msg[512];
};

enum rx_mode {
	RX_DEVMEM,	/* library RX on a bound queue (header split on) */
	RX_PLAIN,	/* an ordinary socket */
};

struct rx_spec {
	enum rx_mode mode;
	bool validate;
	int port;
};

struct rx_proc {
	pid_t pid;
	int res_fd;
};

/* Start a receiver that takes one connection per spec, in order, on
 * a->rx_addr, and returns once it listens.  0 or T_EXIT_*. */
int rx_start(const struct tx_args *a, const struct rx_spec *specs, size_t nspecs,
	     struct rx_proc *p);
/* The result of the receiver's next connection; 0 or T_EXIT_FAIL. */
int rx_next(struct rx_proc *p, struct rx_result *r);
/* Wait for the receiver to end; 0 or T_EXIT_FAIL when it did not exit 0. */
int rx_wait(struct rx_proc *p);

/* ---- the sender: a ring of dma-buf slots reused after completion -------- */

struct slot_piece {
	uint64_t off;		/* dma-buf offset */
	uint64_t len;
	uint64_t pos;		/* stream position of its first byte */
};

struct slot {
	bool busy;
	uint64_t bytes;		/* stream bytes in flight from this slot */
	uint64_t done;		/* of which reported free */
	struct slot_piece *pieces;
	size_t npieces;
};

struct sender {
	struct devmemtcp_tx *tx;
	int fd;
	uint64_t slot_size;
	size_t nslots;
	struct slot *slots;
	uint64_t reported;	/* bytes reported free */
	uint64_t early;		/* bytes reported before the peer ACKed them */
	uint64_t copied_ranges;
	uint64_t ranges;
	char why[256];		/* of the last early report */
	char broken[256];	/* a report that must not happen (first one) */
};

/* 0 or T_EXIT_FAIL (printed).  call_bytes: max_call_bytes of the handle. */
int sender_open(struct sender *s, struct devmemtcp_ctx *ctx, int fd,
		struct devmemtcp_binding *b, uint64_t slot_size, size_t nslots,
		size_t max_pieces, uint64_t call_bytes);
/* Wait until slot k may be rewritten. */
int sender_claim(struct sender *s, size_t k);
/* Send the pieces of slot k (already written), all of them. */
int sender_send(struct sender *s, size_t k);
/* Wait for every completion, then check the accounting. */
int sender_finish(struct sender *s, uint64_t total);
void sender_close(struct sender *s);

/* Fill slot k with pieces of the stream from *pos on (not past total),
 * advancing *pos, and write their bytes at their offsets into stage, the
 * image of the whole slot. */
typedef void tx_fill_fn(struct slot *sl, size_t k, uint8_t *stage, uint64_t *pos,
			uint64_t total, void *arg);

/* tx_fill_fn with arg a struct tx_spaced: pieces of len bytes (the last
 * one shorter) with gap bytes between them, from offset first of the slot,
 * at most max per slot; the slot's other bytes are 0xee. */
struct tx_spaced {
	uint64_t slot, first, len, gap;
	size_t max;
};
void tx_fill_spaced(struct slot *sl, size_t k, uint8_t *stage, uint64_t *pos,
		    uint64_t total, void *arg);

/* One connection to a receiver for spec: t->a.bytes sent slot by slot
 * through a ring of nslots slots of slot_size bytes, each slot filled by
 * fill() and written whole to the dma-buf; the receiver's result in *r
 * once it has ended. */
int tx_ring_transfer(struct tx_test *t, const struct rx_spec *spec, uint64_t slot_size,
		     size_t nslots, size_t max_pieces, tx_fill_fn *fill, void *arg,
		     struct rx_result *r);

#endif

/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * Private to the NCCL network plugin: what a peer sends, and the pure
 * functions that check it.  A peer sends three things: the listen handle
 * (carried by NCCL's bootstrap, which is not authenticated, into the local
 * connect), the hello at the start of the control socket, and a header per
 * message after it; the data socket carries payload only.  Nothing a peer
 * sends is used as a pointer, nor as an index without its bounds, and
 * every field is checked.  No I/O and no state here: the fuzz harnesses
 * (tests/fuzz, nccl-handshake and nccl-msg) call these functions directly.
 */
#ifndef DEVMEMTCP_NCCL_WIRE_H
#define DEVMEMTCP_NCCL_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "net_abi.h"

#define DMTN_HANDLE_MAGIC 0x444d544eu	/* "DMTN" */
#define DMTN_HELLO_MAGIC 0x444d5448u	/* "DMTH" */
#define DMTN_MSG_MAGIC 0x444d544du	/* "DMTM" */
#define DMTN_PROTO_VERSION 1

/*
 * What listen writes for NCCL to pass to the peer's connect: the peer's
 * part (magic to nonce), then 16 bytes the connector keeps for itself
 * (listen writes them zero; conn.c says what goes there), then zeros up to
 * NCCL_NET_HANDLE_MAXSIZE.  Integers in host order but the ports (network
 * order); both ranks run the same plugin on the same architecture.
 */
struct dmtn_handle {
	uint32_t magic;
	uint16_t version;
	uint16_t family;	/* AF_INET or AF_INET6 */
	uint8_t addr[16];	/* IPv4: the first 4 bytes, then zeros */
	uint16_t ctrl_port;	/* network byte order */
	uint16_t data_port;
	uint32_t scope_id;	/* 0: link-local addresses are not used */
	uint64_t nonce;		/* random, never 0 */
	/* the connector's own */
	uint64_t stage_key;
	uint64_t stage_slot;
};
/* The bytes the peer writes; the connector's own follow them. */
#define DMTN_HANDLE_PEER_BYTES offsetof(struct dmtn_handle, stage_key)
_Static_assert(sizeof(struct dmtn_handle) == 56 && DMTN_HANDLE_PEER_BYTES == 40,
	       "the handle's layout is a wire format");
_Static_assert(sizeof(struct dmtn_handle) <= NCCL_NET_HANDLE_MAXSIZE,
	       "the handle must fit NCCL_NET_HANDLE_MAXSIZE");

/*
 * What the connector writes first on the control socket.  The data socket
 * carries payload only (on a devmem receiver its bytes land in device
 * memory, where a hello could not be read), so the hello names it by its
 * source port.
 */
struct dmtn_hello {
	uint32_t magic;
	uint16_t version;
	uint16_t data_port;	/* the data socket's source port, network order */
	uint64_t nonce;
};

/* One per message on the control socket. */
struct dmtn_msg {
	uint32_t magic;
	int32_t tag;
	uint64_t size;
};
_Static_assert(sizeof(struct dmtn_hello) == 16 && sizeof(struct dmtn_msg) == 16,
	       "wire structs have no padding");

/* A handle that passed dmtn_handle_parse: where to connect. */
struct dmtn_peer {
	struct sockaddr_storage ctrl, data;	/* address and port of each */
	socklen_t addrlen;
	uint16_t ctrl_port, data_port;		/* network byte order */
	uint64_t nonce;
	uint64_t stage_key, stage_slot;		/* the connector's bytes */
};

enum dmtn_handle_verdict {
	DMTN_HANDLE_OK = 0,
	DMTN_HANDLE_FOREIGN = 1,	/* magic or version: not this plugin's */
	DMTN_HANDLE_INVALID = 2,	/* a field listen never writes */
};

/*
 * Check the NCCL_NET_HANDLE_MAXSIZE bytes at handle: magic and version,
 * family, an IPv4 address with nothing after it, a unicast address that is
 * not link-local, scope id 0, two different ports neither of them 0, a
 * nonce that is not 0, zeros after the connector's bytes.  Fills *peer on
 * DMTN_HANDLE_OK; otherwise why (len bytes) says what is wrong.
 */
enum dmtn_handle_verdict dmtn_handle_parse(const void *handle,
					   struct dmtn_peer *peer, char *why,
					   size_t len);
/* What listen writes (NCCL_NET_HANDLE_MAXSIZE bytes): addr is the
 * device's address (AF_INET or AF_INET6, never link-local), the ports in
 * network order; the connector's bytes zero. */
void dmtn_handle_write(void *handle, const struct sockaddr *addr,
		       uint16_t ctrl_port, uint16_t data_port, uint64_t nonce);

/* A whole hello, for the listen whose handle carries nonce: 0, or -1 with
 * why (len bytes) saying what is wrong. */
int dmtn_hello_check(const struct dmtn_hello *h, uint64_t nonce, char *why,
		     size_t len);

/* The message header at bytes (16 of them, as read from the control
 * socket) into *m: 0, or -1 when its magic is not DMTN_MSG_MAGIC. */
int dmtn_msg_parse(const void *bytes, struct dmtn_msg *m);

#endif

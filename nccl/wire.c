// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The checks of what a peer sends (wire.h): pure functions, fuzzed.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "wire.h"

/* Why an address listen would never write is refused, or NULL. */
static const char *addr_refused(int family, const uint8_t *a)
{
	if (family == AF_INET6) {
		const struct in6_addr *a6 = (const struct in6_addr *)a;

		if (IN6_IS_ADDR_UNSPECIFIED(a6) || IN6_IS_ADDR_MULTICAST(a6))
			return "is not a unicast address";
		if (IN6_IS_ADDR_LINKLOCAL(a6))
			return "is link-local (listen never uses one: its scope is the listener's)";
		if (!IN6_IS_ADDR_V4MAPPED(a6))
			return NULL;
		a += 12;	/* an IPv4 address all the same */
	}
	/* 0.0.0.0/8 ("this network"), multicast, 240.0.0.0/4 with broadcast */
	if (a[0] == 0 || a[0] >= 224)
		return "is not a unicast address";
	return NULL;
}

static void sockaddr_fill(struct sockaddr_storage *ss, int family,
			  const uint8_t *addr, uint16_t port)
{
	memset(ss, 0, sizeof(*ss));
	if (family == AF_INET) {
		struct sockaddr_in *s4 = (struct sockaddr_in *)ss;

		s4->sin_family = AF_INET;
		s4->sin_port = port;
		memcpy(&s4->sin_addr, addr, 4);
	} else {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;

		s6->sin6_family = AF_INET6;
		s6->sin6_port = port;
		memcpy(&s6->sin6_addr, addr, 16);
	}
}

enum dmtn_handle_verdict dmtn_handle_parse(const void *handle,
					   struct dmtn_peer *peer, char *why,
					   size_t len)
{
	const uint8_t *bytes = handle;
	struct dmtn_handle h;
	char text[INET6_ADDRSTRLEN];
	const char *refused;
	size_t alen;

	memcpy(&h, handle, sizeof(h));
	if (h.magic != DMTN_HANDLE_MAGIC || h.version != DMTN_PROTO_VERSION) {
		snprintf(why, len, "magic %#x, version %u", h.magic, h.version);
		return DMTN_HANDLE_FOREIGN;
	}
	if (h.family != AF_INET && h.family != AF_INET6) {
		snprintf(why, len, "address family %u is neither AF_INET (%d) nor AF_INET6 (%d)",
			 h.family, AF_INET, AF_INET6);
		return DMTN_HANDLE_INVALID;
	}
	alen = h.family == AF_INET ? 4 : 16;
	for (size_t i = alen; i < sizeof(h.addr); i++) {
		if (h.addr[i]) {
			snprintf(why, len, "IPv4 address with byte %zu of the address field set (%#x)",
				 i, h.addr[i]);
			return DMTN_HANDLE_INVALID;
		}
	}
	refused = addr_refused(h.family, h.addr);
	if (refused) {
		inet_ntop(h.family, h.addr, text, sizeof(text));
		snprintf(why, len, "address %s %s", text, refused);
		return DMTN_HANDLE_INVALID;
	}
	if (h.scope_id) {
		snprintf(why, len, "scope id %u (listen writes 0)", h.scope_id);
		return DMTN_HANDLE_INVALID;
	}
	if (!h.ctrl_port || !h.data_port || h.ctrl_port == h.data_port) {
		snprintf(why, len, "control port %u and data port %u (two ports, neither 0)",
			 ntohs(h.ctrl_port), ntohs(h.data_port));
		return DMTN_HANDLE_INVALID;
	}
	if (!h.nonce) {
		snprintf(why, len, "nonce 0 (listen never writes it)");
		return DMTN_HANDLE_INVALID;
	}
	for (size_t i = sizeof(h); i < NCCL_NET_HANDLE_MAXSIZE; i++) {
		if (bytes[i]) {
			snprintf(why, len, "reserved byte %zu is %#x, not 0", i,
				 bytes[i]);
			return DMTN_HANDLE_INVALID;
		}
	}
	sockaddr_fill(&peer->ctrl, h.family, h.addr, h.ctrl_port);
	sockaddr_fill(&peer->data, h.family, h.addr, h.data_port);
	peer->addrlen = h.family == AF_INET ? sizeof(struct sockaddr_in)
					    : sizeof(struct sockaddr_in6);
	peer->ctrl_port = h.ctrl_port;
	peer->data_port = h.data_port;
	peer->nonce = h.nonce;
	peer->stage_key = h.stage_key;
	peer->stage_slot = h.stage_slot;
	return DMTN_HANDLE_OK;
}

void dmtn_handle_write(void *handle, const struct sockaddr *addr,
		       uint16_t ctrl_port, uint16_t data_port, uint64_t nonce)
{
	struct dmtn_handle h = {
		.magic = DMTN_HANDLE_MAGIC,
		.version = DMTN_PROTO_VERSION,
		.family = (uint16_t)addr->sa_family,
		.ctrl_port = ctrl_port,
		.data_port = data_port,
		.nonce = nonce,
	};

	if (addr->sa_family == AF_INET)
		memcpy(h.addr, &((const struct sockaddr_in *)addr)->sin_addr, 4);
	else
		memcpy(h.addr, &((const struct sockaddr_in6 *)addr)->sin6_addr, 16);
	memset(handle, 0, NCCL_NET_HANDLE_MAXSIZE);
	memcpy(handle, &h, sizeof(h));
}

int dmtn_hello_check(const struct dmtn_hello *h, uint64_t nonce, char *why,
		     size_t len)
{
	if (h->magic != DMTN_HELLO_MAGIC || h->version != DMTN_PROTO_VERSION) {
		snprintf(why, len, "its hello has magic %#x, version %u: not a connect of this plugin (magic %#x, version %u)",
			 h->magic, h->version, DMTN_HELLO_MAGIC,
			 DMTN_PROTO_VERSION);
		return -1;
	}
	if (!h->data_port) {
		snprintf(why, len, "its hello names data port 0");
		return -1;
	}
	if (h->nonce != nonce) {
		snprintf(why, len, "its hello carries another nonce than this listen's handle (a stale peer, or not a peer)");
		return -1;
	}
	return 0;
}

int dmtn_msg_parse(const void *bytes, struct dmtn_msg *m)
{
	memcpy(m, bytes, sizeof(*m));
	return m->magic == DMTN_MSG_MAGIC ? 0 : -1;
}

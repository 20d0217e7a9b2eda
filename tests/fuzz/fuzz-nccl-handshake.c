// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The NCCL plugin's handshake as a peer sends it: the listen handle (it
 * reaches connect from the peer through NCCL's bootstrap, which nothing
 * authenticates), the hello at the start of a control connection, a
 * message header (nccl/wire.c), and the table of connects in progress
 * that connect finds through the connector bytes of a handle
 * (nccl/stage.c), driven as connect drives it.
 *
 * Input: 128 bytes of handle, 16 of hello and 8 of the listen's nonce, 16
 * of message header, then a program on 8 handle buffers (a proxy's
 * connects): listen writes one, connect is called with one (a new connect
 * or the one its connector bytes name, finished or not), one is copied
 * to another, its connector bytes or a byte of its peer part are
 * overwritten (what a peer or a changed bootstrap message can do), the
 * table is drained (teardown).  A model of the table says what each
 * connect must find.
 */
#include <arpa/inet.h>
#include <netinet/in.h>

#include "fuzz.h"
#include "stage.h"
#include "wire.h"

#define NBUF 8
#define MAX_LIVE 64
#define CONN_OFF offsetof(struct dmtn_handle, stage_key)

/* ---- the pure checks ------------------------------------------------------- */

static void check_why(const char *why, size_t len)
{
	size_t n = strnlen(why, len);

	FZ_CHECK(n > 0 && n < len);
}

static bool addr_unicast(int family, const uint8_t *a)
{
	if (family == AF_INET6) {
		const struct in6_addr *a6 = (const struct in6_addr *)a;

		if (IN6_IS_ADDR_UNSPECIFIED(a6) || IN6_IS_ADDR_MULTICAST(a6) ||
		    IN6_IS_ADDR_LINKLOCAL(a6))
			return false;
		if (!IN6_IS_ADDR_V4MAPPED(a6))
			return true;
		a += 12;
	}
	return a[0] != 0 && a[0] < 224;
}

/* dmtn_handle_parse on the 128 bytes at h, and what it promises. */
static enum dmtn_handle_verdict check_handle(const uint8_t *h,
					     struct dmtn_peer *peer)
{
	char why[160];
	uint8_t again[NCCL_NET_HANDLE_MAXSIZE];
	struct dmtn_handle raw;
	enum dmtn_handle_verdict v;
	const uint8_t *a;

	memset(why, 0x55, sizeof(why));
	memset(peer, 0xa5, sizeof(*peer));
	v = dmtn_handle_parse(h, peer, why, sizeof(why));
	FZ_CHECK(v == DMTN_HANDLE_OK || v == DMTN_HANDLE_FOREIGN ||
		 v == DMTN_HANDLE_INVALID);
	memcpy(&raw, h, sizeof(raw));
	if (v != DMTN_HANDLE_OK) {
		check_why(why, sizeof(why));
		FZ_CHECK((v == DMTN_HANDLE_FOREIGN) ==
			 (raw.magic != DMTN_HANDLE_MAGIC ||
			  raw.version != DMTN_PROTO_VERSION));
		return v;
	}
	/* every field as listen writes it */
	FZ_CHECK(raw.family == AF_INET || raw.family == AF_INET6);
	FZ_CHECK(peer->ctrl.ss_family == raw.family &&
		 peer->data.ss_family == raw.family);
	FZ_CHECK(peer->addrlen == (raw.family == AF_INET
					   ? sizeof(struct sockaddr_in)
					   : sizeof(struct sockaddr_in6)));
	FZ_CHECK(peer->ctrl_port && peer->data_port &&
		 peer->ctrl_port != peer->data_port);
	FZ_CHECK(peer->nonce && peer->nonce == raw.nonce && !raw.scope_id);
	FZ_CHECK(peer->stage_key == raw.stage_key &&
		 peer->stage_slot == raw.stage_slot);
	for (size_t i = sizeof(raw); i < NCCL_NET_HANDLE_MAXSIZE; i++)
		FZ_CHECK(h[i] == 0);
	if (raw.family == AF_INET) {
		const struct sockaddr_in *c = (const struct sockaddr_in *)&peer->ctrl;
		const struct sockaddr_in *d = (const struct sockaddr_in *)&peer->data;

		for (size_t i = 4; i < sizeof(raw.addr); i++)
			FZ_CHECK(raw.addr[i] == 0);
		FZ_CHECK(c->sin_port == raw.ctrl_port && d->sin_port == raw.data_port);
		FZ_CHECK(!memcmp(&c->sin_addr, raw.addr, 4) &&
			 !memcmp(&d->sin_addr, raw.addr, 4));
		a = (const uint8_t *)&c->sin_addr;
	} else {
		const struct sockaddr_in6 *c = (const struct sockaddr_in6 *)&peer->ctrl;
		const struct sockaddr_in6 *d = (const struct sockaddr_in6 *)&peer->data;

		FZ_CHECK(c->sin6_port == raw.ctrl_port && d->sin6_port == raw.data_port);
		FZ_CHECK(!memcmp(&c->sin6_addr, raw.addr, 16) &&
			 !memcmp(&d->sin6_addr, raw.addr, 16));
		FZ_CHECK(!c->sin6_scope_id && !d->sin6_scope_id);
		a = (const uint8_t *)&c->sin6_addr;
	}
	FZ_CHECK(addr_unicast(raw.family, a));
	/* what listen would write for it is the same bytes */
	dmtn_handle_write(again, (const struct sockaddr *)&peer->ctrl,
			  peer->ctrl_port, peer->data_port, peer->nonce);
	memcpy(again + CONN_OFF, h + CONN_OFF, 16);
	FZ_CHECK(!memcmp(again, h, sizeof(again)));
	return v;
}

static void check_hello(const uint8_t *bytes, uint64_t nonce)
{
	struct dmtn_hello h;
	char why[160];
	bool good;

	memcpy(&h, bytes, sizeof(h));
	good = h.magic == DMTN_HELLO_MAGIC && h.version == DMTN_PROTO_VERSION &&
	       h.data_port && h.nonce == nonce;
	memset(why, 0x55, sizeof(why));
	if (dmtn_hello_check(&h, nonce, why, sizeof(why))) {
		FZ_CHECK(!good);
		check_why(why, sizeof(why));
	} else {
		FZ_CHECK(good);
	}
}

static void check_msg(const uint8_t *bytes)
{
	struct dmtn_msg m;
	uint32_t magic;

	memcpy(&magic, bytes, sizeof(magic));
	FZ_CHECK(!dmtn_msg_parse(bytes, &m) == (magic == DMTN_MSG_MAGIC));
	FZ_CHECK(!memcmp(&m, bytes, sizeof(m)));
}

/* ---- the table, against a model ----------------------------------------------- */

struct live {
	uint64_t slot, key;
	int *token;		/* the comm: a heap block, freed once */
	uint8_t peer[DMTN_HANDLE_PEER_BYTES];
};

static struct live model[MAX_LIVE];
static int nlive;
static int drained;

static struct live *model_find(uint64_t slot, uint64_t key)
{
	for (int i = 0; i < nlive; i++)
		if (model[i].slot == slot && model[i].key == key)
			return &model[i];
	return NULL;
}

static void model_forget(struct live *e)
{
	*e = model[--nlive];
}

static void drain_one(void *comm)
{
	int *token = comm;
	int i;

	for (i = 0; i < nlive && model[i].token != token; i++)
		;
	FZ_CHECK(i < nlive);	/* a comm of the table, given once */
	free(token);
	model_forget(&model[i]);
	drained++;
}

static void drain(void)
{
	int before = nlive;

	drained = 0;
	dmtn_stage_drain(drain_one);
	FZ_CHECK(drained == before && nlive == 0);
}

/* listen writes buffer b: an address listen could have (10.x.y.z or
 * 2001:db8::x), two ports, a nonce. */
static void op_listen(struct fz *f, uint8_t *b)
{
	struct sockaddr_storage ss = { 0 };
	struct dmtn_peer peer;
	uint16_t cport = fz_u16(f) | 1, dport = fz_u16(f) & ~1;
	uint64_t nonce = fz_u64(f) | 1;

	if (!dport)
		dport = 2;
	if (fz_u8(f) & 1) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;

		s6->sin6_family = AF_INET6;
		s6->sin6_addr.s6_addr[0] = 0x20;
		s6->sin6_addr.s6_addr[1] = 0x01;
		s6->sin6_addr.s6_addr[2] = 0x0d;
		s6->sin6_addr.s6_addr[3] = 0xb8;
		s6->sin6_addr.s6_addr[15] = fz_u8(f);
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
		uint32_t a = fz_u32(f);

		s4->sin_family = AF_INET;
		s4->sin_addr.s_addr = htonl(0x0a000000u | (a & 0xffffff));
	}
	dmtn_handle_write(b, (struct sockaddr *)&ss, cport, dport, nonce);
	FZ_CHECK(check_handle(b, &peer) == DMTN_HANDLE_OK);
	FZ_CHECK(!peer.stage_key && !peer.stage_slot);
}

/* One call of connect with buffer b, as nccl/conn.c makes it: a new
 * connect for zero connector bytes, else the one they name; then the
 * call is done with it, finished or still in progress. */
static void op_connect(struct fz *f, uint8_t *b)
{
	bool finished = fz_u8(f) & 1;
	struct dmtn_peer peer;
	struct live *e;
	uint8_t before[DMTN_HANDLE_PEER_BYTES];
	uint64_t slot;

	if (check_handle(b, &peer) != DMTN_HANDLE_OK)
		return;
	memcpy(before, b, sizeof(before));
	if (!peer.stage_key && !peer.stage_slot) {
		int *token;

		if (nlive == MAX_LIVE)
			return;
		token = malloc(sizeof(*token));
		FZ_CHECK(token);
		FZ_CHECK(dmtn_stage_add(token, b, &slot) == 0);
		FZ_CHECK(check_handle(b, &peer) == DMTN_HANDLE_OK);
		FZ_CHECK(peer.stage_slot == slot && slot >= 1 && peer.stage_key);
		FZ_CHECK(!memcmp(before, b, sizeof(before)));
		for (int i = 0; i < nlive; i++)
			FZ_CHECK(model[i].slot != slot);	/* a free slot */
		e = &model[nlive++];
		*e = (struct live){ slot, peer.stage_key, token, { 0 } };
		memcpy(e->peer, b, sizeof(e->peer));
	} else {
		void *c = dmtn_stage_claim(&peer, b);

		e = model_find(peer.stage_slot, peer.stage_key);
		if (e && memcmp(e->peer, b, sizeof(e->peer)))
			e = NULL;
		FZ_CHECK(c == (e ? (void *)e->token : NULL));
		if (!e)
			return;		/* connect refuses it */
		slot = e->slot;
	}
	dmtn_stage_release(b, slot, finished);
	if (!finished)
		return;
	FZ_CHECK(check_handle(b, &peer) == DMTN_HANDLE_OK);
	FZ_CHECK(!peer.stage_key && !peer.stage_slot);
	free(e->token);
	model_forget(e);
}

/* Connector bytes a peer or a changed bootstrap message could write:
 * anything, or a live slot with another key, or a live key elsewhere. */
static void op_overwrite(struct fz *f, uint8_t *b)
{
	uint64_t key = fz_u64(f), slot = fz_u64(f);
	uint8_t how = fz_u8(f);

	if (nlive && (how & 3)) {
		const struct live *e = &model[how % nlive];

		if (how & 1)
			slot = (how & 4) ? e->slot : e->slot + 1;
		if (how & 2)
			key = (how & 8) ? e->key : e->key ^ (1ull << (how % 64));
	}
	memcpy(b + CONN_OFF, &key, sizeof(key));
	memcpy(b + CONN_OFF + 8, &slot, sizeof(slot));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz f = fz_init(data, size);
	uint8_t *buf[NBUF], hello[24], msg[16];
	uint8_t *handle = malloc(NCCL_NET_HANDLE_MAXSIZE);
	struct dmtn_peer peer;
	uint64_t nonce;

	FZ_CHECK(handle);
	fz_bytes(&f, handle, NCCL_NET_HANDLE_MAXSIZE);
	check_handle(handle, &peer);
	fz_bytes(&f, hello, sizeof(hello));
	memcpy(&nonce, hello + 16, sizeof(nonce));
	check_hello(hello, nonce);
	fz_bytes(&f, msg, sizeof(msg));
	check_msg(msg);

	/* the buffers start as copies of the input's handle */
	for (int i = 0; i < NBUF; i++) {
		buf[i] = malloc(NCCL_NET_HANDLE_MAXSIZE);
		FZ_CHECK(buf[i]);
		memcpy(buf[i], handle, NCCL_NET_HANDLE_MAXSIZE);
	}
	while (fz_left(&f)) {
		uint8_t op = fz_u8(&f), *b = buf[(op >> 3) % NBUF];

		switch (op & 7) {
		case 0:
			op_listen(&f, b);
			break;
		case 1:
		case 2:
			op_connect(&f, b);
			break;
		case 3:
			memcpy(buf[fz_below(&f, NBUF)], b, NCCL_NET_HANDLE_MAXSIZE);
			break;
		case 4:
			op_overwrite(&f, b);
			break;
		case 5: {
			size_t at = fz_below(&f, DMTN_HANDLE_PEER_BYTES);

			b[at] ^= fz_u8(&f) | 1;
			break;
		}
		case 6:
			drain();
			break;
		default:
			fz_bytes(&f, b, NCCL_NET_HANDLE_MAXSIZE);
			break;
		}
	}
	drain();
	for (int i = 0; i < NBUF; i++)
		free(buf[i]);
	free(handle);
	return 0;
}

// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The receive path after recvmsg (dmt_rx_process: parse, tokens, device
 * addresses, foreign bindings, statistics) and the public release calls,
 * on control buffers laid out as the kernel lays them out: dma-buf and
 * linear fragments and other cmsgs in any order, bindings registered or
 * not, offsets inside segments, in gaps or past the buffer.  Every
 * fragment must come back as the kernel described it with the device
 * address a linear scan of the segment table gives, and every token must
 * reach the kernel (model.h) exactly when the user gave it back.
 */
#include "buf.h"
#include "fuzz.h"
#include "model.h"
#include "rx.h"

#define NBUFS 3			/* binding ids 1..NBUFS; NBUFS + 1 is foreign */
#define MAX_ENTRIES 96
#define MAX_LIVE 1024
#define MAX_DEFER 32

struct entry {
	int kind;		/* 0 dma-buf, 1 linear, 2 another cmsg */
	struct dmt_dmabuf_cmsg c;
	uint8_t other_len;
};

struct prog {
	struct fz f;
	struct model m;
	struct devmemtcp_rx *rx;
	struct devmemtcp_buf *bufs[NBUFS + 1];	/* [id]; [0] unused */
	bool registered[NBUFS + 2];
	struct devmemtcp_frag live[MAX_LIVE];
	size_t nlive;
	struct { uint32_t toks[64]; size_t n; bool done, finished; } d[MAX_DEFER];
	size_t nd, dhead;
	uint64_t frags_seen;
};

static struct prog *P;

static int done_fn(void *arg, bool wait)
{
	uintptr_t i = (uintptr_t)arg;

	FZ_CHECK(i == P->dhead && !P->d[i].finished);
	if (wait)
		P->d[i].done = true;
	if (!P->d[i].done)
		return 0;
	P->d[i].finished = true;
	P->dhead++;
	for (size_t k = 0; k < P->d[i].n; k++)
		model_set(&P->m, P->d[i].toks[k], TOK_RELEASED);
	return 1;
}

/* A buffer of the input's size with up to 8 segments and gaps between. */
static struct devmemtcp_buf *make_buf(struct prog *p)
{
	struct devmemtcp_segment segs[8];
	struct devmemtcp_buf *buf;
	uint64_t off = 0, unit = 4096;
	size_t n = 1 + fz_u8(&p->f) % 8, k = 0;

	if (dmt_buf_alloc(fz_ctx(), DEVMEMTCP_PROVIDER_IMPORT, &buf))
		abort();
	for (size_t i = 0; i < n; i++) {
		off += (fz_u8(&p->f) % 3) * unit;	/* a gap, maybe */
		segs[k].offset = off;
		segs[k].len = (1 + fz_u8(&p->f) % 8) * unit;
		segs[k].addr = fz_u64(&p->f) & ~0xfffull & 0xffffffffffffull;
		off += segs[k++].len;
	}
	buf->size = off + (fz_u8(&p->f) % 2) * unit;
	FZ_CHECK(dmt_buf_set_segments(buf, segs, k) == 0);
	return buf;
}

static uint64_t expected_addr(const struct devmemtcp_buf *b, uint64_t off)
{
	for (size_t i = 0; i < b->nsegs; i++)
		if (off >= b->segs[i].offset &&
		    off - b->segs[i].offset < b->segs[i].len)
			return b->segs[i].addr + (off - b->segs[i].offset);
	return 0;
}

static size_t layout(const struct entry *e, size_t n, char *ctrl)
{
	size_t len = 0;

	for (size_t i = 0; i < n; i++) {
		struct cmsghdr *cm = (struct cmsghdr *)(ctrl + len);
		size_t dlen = e[i].kind == 2 ? e[i].other_len : sizeof(e[i].c);

		cm->cmsg_level = e[i].kind == 2 && e[i].other_len & 1 ? SOL_IP
								  : SOL_SOCKET;
		cm->cmsg_type = e[i].kind == 0 ? SCM_DEVMEM_DMABUF
			      : e[i].kind == 1 ? SCM_DEVMEM_LINEAR
					       : 99;
		cm->cmsg_len = CMSG_LEN(dlen);
		memset(CMSG_DATA(cm), 0x77, CMSG_SPACE(dlen) - CMSG_LEN(0));
		if (e[i].kind != 2)
			memcpy(CMSG_DATA(cm), &e[i].c, sizeof(e[i].c));
		len += CMSG_SPACE(dlen);
	}
	return len;
}

static void recv_one(struct prog *p)
{
	static struct entry e[MAX_ENTRIES];
	static char ctrl[MAX_ENTRIES * CMSG_SPACE(64)] __attribute__((aligned(8)));
	struct devmemtcp_frag frags[MAX_ENTRIES];
	size_t n = fz_u8(&p->f) % MAX_ENTRIES, max = fz_u8(&p->f) % MAX_ENTRIES;
	uint8_t flags = fz_u8(&p->f);
	uint64_t got = 0, linear = 0;
	size_t devmem = 0, ndmabuf = 0, expect_n = 0;
	int want = 0, ret;
	struct msghdr msg = { 0 };

	for (size_t i = 0; i < n; i++) {
		uint8_t how = fz_u8(&p->f);

		memset(&e[i], 0, sizeof(e[i]));
		e[i].kind = how < 160 ? 0 : how < 230 ? 1 : 2;
		e[i].c.frag_size = 1 + fz_u16(&p->f) % 8192;
		if (e[i].kind == 0) {
			uint32_t id = 1 + fz_u8(&p->f) % (NBUFS + 1);

			e[i].c.dmabuf_id = id;
			e[i].c.frag_offset = (uint64_t)fz_u16(&p->f) * 64;
			e[i].c.frag_token =
				model_new_token(&p->m, how >= 155, fz_u32(&p->f));
			/* the kernel's tokens are unique while held */
			model_set(&p->m, e[i].c.frag_token, TOK_USER);
		} else if (e[i].kind == 2) {
			e[i].other_len = fz_u8(&p->f) % 64;
		}
		if (e[i].kind != 2)
			got += e[i].c.frag_size;
	}
	/* what the library must return */
	for (size_t i = 0; i < n && !want; i++) {
		if (e[i].kind == 2)
			continue;
		ndmabuf += e[i].kind == 0;
		if (devmem++ == max) {
			want = -ENOBUFS;
			/* tokens of the rest were never seen by the library:
			 * they are the kernel's until the socket closes */
			for (size_t k = i; k < n; k++)
				if (e[k].kind == 0)
					model_set(&p->m, e[k].c.frag_token,
						  TOK_FREE);
		}
	}
	if (flags & 1)
		got += 1 + flags % 7;		/* bytes not described */
	if (!want && devmem) {
		uint64_t sum = 0;

		for (size_t i = 0; i < n; i++)
			sum += e[i].kind == 2 ? 0 : e[i].c.frag_size;
		if (sum != got)
			want = -EPROTO;
	}
	if (!devmem) {
		if (!got)
			want = 0;
		else if (!max)
			want = -ENOBUFS;
		else
			expect_n = 1;
	} else if (!want) {
		expect_n = devmem;
	}
	if (want == -EPROTO && flags & 2)
		want = -ENOBUFS;		/* MSG_CTRUNC explains it */
	msg.msg_control = ctrl;
	msg.msg_controllen = layout(e, n, ctrl);
	msg.msg_flags = flags & 2 ? MSG_CTRUNC : 0;
	ret = dmt_rx_process(p->rx, &msg, got, frags, max);
	if (want < 0) {
		FZ_CHECK(ret == want);
		FZ_CHECK(devmemtcp_rx_errmsg(p->rx)[0]);
	} else {
		FZ_CHECK(ret >= 0 && (size_t)ret == expect_n);
	}
	/* fragments the library saw: the user holds their tokens, whether
	 * it got them (success) or not (an error: release_all returns them) */
	for (size_t i = 0, k = 0; i < n && ret >= 0; i++) {
		struct devmemtcp_frag *fr = &frags[k];

		if (e[i].kind == 2)
			continue;
		k++;
		if (e[i].kind == 1) {
			FZ_CHECK(fr->flags == DEVMEMTCP_FRAG_LINEAR);
			FZ_CHECK(fr->offset == linear && fr->len == e[i].c.frag_size);
			linear += fr->len;
			continue;
		}
		FZ_CHECK(fr->offset == e[i].c.frag_offset &&
			 fr->len == e[i].c.frag_size &&
			 fr->token == e[i].c.frag_token &&
			 fr->binding_id == e[i].c.dmabuf_id);
		if (p->registered[fr->binding_id]) {
			FZ_CHECK(fr->flags == 0);
			FZ_CHECK(fr->addr == expected_addr(p->bufs[fr->binding_id],
							   fr->offset));
		} else {
			FZ_CHECK(fr->flags == DEVMEMTCP_FRAG_FOREIGN && !fr->addr);
		}
		if (p->nlive < MAX_LIVE)
			p->live[p->nlive++] = *fr;
	}
	if (ret == 1 && !devmem)
		FZ_CHECK(frags[0].flags == DEVMEMTCP_FRAG_LINEAR &&
			 frags[0].len == got);
	if (ret >= 0)
		p->frags_seen += ndmabuf;
	/* a token's value costs at most 1 MiB of bitmap */
	FZ_CHECK(dmt_rx_tokens(p->rx)->nwords * sizeof(uint64_t) <= (1u << 20));
}

/* Pick up to 32 live fragments (by index, maybe repeated) into out. */
static size_t pick(struct prog *p, struct devmemtcp_frag *out, size_t *idx,
		   bool *valid)
{
	size_t n = p->nlive ? fz_u8(&p->f) % 33 : 0;

	*valid = true;
	for (size_t i = 0; i < n; i++) {
		idx[i] = fz_u16(&p->f) % p->nlive;
		out[i] = p->live[idx[i]];
		for (size_t k = 0; k < i; k++)
			if (idx[k] == idx[i] &&
			    !(out[i].flags & DEVMEMTCP_FRAG_LINEAR))
				*valid = false;
	}
	return n;
}

static void forget(struct prog *p, const size_t *idx, size_t n)
{
	bool gone[MAX_LIVE] = { false };
	size_t k = 0;

	for (size_t i = 0; i < n; i++)
		gone[idx[i]] = true;
	for (size_t i = 0; i < p->nlive; i++)
		if (!gone[i])
			p->live[k++] = p->live[i];
	p->nlive = k;
}

static void release(struct prog *p, bool defer)
{
	struct devmemtcp_frag fr[32] = { 0 };
	size_t idx[32], n;
	bool valid;
	int ret;

	if (defer && p->nd == MAX_DEFER)
		return;
	n = pick(p, fr, idx, &valid);
	/* the user gives them up before the call: it may flush them */
	for (size_t i = 0; i < n && valid; i++)
		if (!(fr[i].flags & DEVMEMTCP_FRAG_LINEAR))
			model_set(&p->m, fr[i].token,
				  defer ? TOK_DEFERRED : TOK_RELEASED);
	if (defer)
		ret = devmemtcp_rx_release_after(p->rx, fr, n, done_fn,
						 (void *)(uintptr_t)p->nd);
	else
		ret = devmemtcp_rx_release(p->rx, fr, n);
	if (!valid) {
		FZ_CHECK(ret == -EINVAL);
		FZ_CHECK(strstr(devmemtcp_rx_errmsg(p->rx), "not outstanding"));
		return;
	}
	FZ_CHECK(ret == 0);
	for (size_t i = 0; i < n && defer; i++)
		if (!(fr[i].flags & DEVMEMTCP_FRAG_LINEAR))
			p->d[p->nd].toks[p->d[p->nd].n++] = fr[i].token;
	if (defer)
		p->nd++;
	forget(p, idx, n);
}

static void release_all(struct prog *p)
{
	struct devmemtcp_rx_stats st = { .sz = sizeof(st) };

	/* the user gives up every fragment it holds */
	for (size_t i = 0; i < p->nlive; i++)
		if (!(p->live[i].flags & DEVMEMTCP_FRAG_LINEAR))
			model_set(&p->m, p->live[i].token, TOK_RELEASED);
	for (size_t t = 0; t < MODEL_LOW; t++)
		if (p->m.low[t] == TOK_USER)	/* seen in a failed receive */
			p->m.low[t] = TOK_RELEASED;
	for (size_t h = 0; h < MODEL_SLOTS; h++)
		if (p->m.used[h] && p->m.state[h] == TOK_USER)
			p->m.state[h] = TOK_RELEASED;
	p->nlive = 0;
	FZ_CHECK(devmemtcp_rx_release_all(p->rx) >= 0);
	FZ_CHECK(p->dhead == p->nd);
	FZ_CHECK(p->m.held == 0);
	FZ_CHECK(devmemtcp_rx_stats(p->rx, &st) == 0);
	FZ_CHECK(st.tokens_outstanding == 0 && st.deferred_pending == 0);
	FZ_CHECK(st.frags == p->frags_seen);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct prog *p = calloc(1, sizeof(*p));
	int ret;

	if (!p)
		abort();
	P = p;
	p->f = fz_init(data, size);
	{
		DEVMEMTCP_OPTS(rx_opts, o, .release_batch = fz_u16(&p->f) % 1100);

		FZ_CHECK(devmemtcp_rx_new(fz_ctx(), fz_tcp_socket(), &o, &p->rx) == 0);
	}
	dmt_rx_tokens(p->rx)->dontneed = model_dontneed;
	dmt_rx_tokens(p->rx)->dontneed_arg = &p->m;
	for (uint32_t id = 1; id <= NBUFS; id++) {
		p->bufs[id] = make_buf(p);
		if (fz_u8(&p->f) % 4) {
			FZ_CHECK(devmemtcp_rx_add_buf(p->rx, id, p->bufs[id]) == 0);
			p->registered[id] = true;
			FZ_CHECK(devmemtcp_rx_add_buf(p->rx, id, p->bufs[id]) == -EEXIST);
		}
	}
	for (int steps = 0; fz_left(&p->f) && steps < 512; steps++) {
		switch (fz_u8(&p->f) % 8) {
		case 0: case 1: case 2:
			recv_one(p);
			break;
		case 3: case 4:
			release(p, false);
			break;
		case 5:
			release(p, true);
			break;
		case 6:
			if (p->nd)
				p->d[fz_u8(&p->f) % p->nd].done = true;
			ret = devmemtcp_rx_flush(p->rx);
			FZ_CHECK(ret >= 0);
			break;
		case 7:
			if (fz_u8(&p->f) < 16)
				release_all(p);
			break;
		}
	}
	release_all(p);
	devmemtcp_rx_free(p->rx);
	FZ_CHECK(p->m.held == 0);
	for (uint32_t id = 1; id <= NBUFS; id++)
		devmemtcp_buf_free(p->bufs[id]);
	free(p);
	return 0;
}

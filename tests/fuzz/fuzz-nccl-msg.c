// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * What a peer sends on an NCCL plugin connection after the hello, read by
 * the receive path of nccl/xfer.c as it runs under NCCL: message headers
 * on the control socket (whole, cut, with another magic, any tag and
 * size), payload on the data socket (short, or cut by a close), either
 * socket closed by the peer, and receives posted in between (grouped ones
 * included, some too small, some with more buffers than maxRecvs), tested
 * until nothing moves.  The sockets are socket pairs; the receive buffers
 * are heap blocks of exactly their posted size.
 *
 * A model of the protocol (nccl/plugin.h, devmemtcp-nccl(7): messages go
 * in order to the receives in posting order, within a grouped receive to
 * the first free buffer with the message's tag, a message larger than its
 * buffer is ncclInvalidUsage, a tag no buffer has ncclInternalError, a
 * header with another magic ncclInternalError, a close before the bytes
 * ncclRemoteError) says which receives complete, with which sizes and
 * bytes, and the error the comm ends with; bytes past a message in its
 * buffer are never written.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/socket.h>

#include "fuzz.h"
#include "plugin.h"

#define MAX_HDRS 48
#define MAX_RECVS 12
#define MAX_CAP 320
#define MAX_DATA 8192
#define FILL 0xee

struct mhdr {
	bool good;		/* magic right */
	int32_t tag;
	uint64_t size;
};

struct mbuf {
	uint8_t *data;
	size_t cap;
	int tag;
	/* model */
	int msg;		/* message assigned, -1 none */
};

struct mrecv {
	int n;
	struct mbuf b[DMTN_MAX_RECVS];
	void *req;		/* NULL once done, or never queued */
	bool queued, done;
	int sizes[DMTN_MAX_RECVS];
};

static uint8_t pattern(size_t pos)
{
	return (uint8_t)(pos * 131 + 7);
}

static void setup_once(void)
{
	static bool done;

	if (done)
		return;
	done = true;
	dmtn.ndev = 1;
	snprintf(dmtn.dev[0].name, sizeof(dmtn.dev[0].name), "fuzz");
	dmtn.cfg.max_recvs = DMTN_MAX_RECVS;
}

static void write_all(int fd, const uint8_t *p, size_t len)
{
	while (len) {
		ssize_t n = write(fd, p, len);

		FZ_CHECK(n > 0);
		p += n;
		len -= (size_t)n;
	}
}

/*
 * The model: what the comm must end with once every queued receive was
 * tested until nothing moves.  Returns the error (NCCL_OK for none) and
 * marks each receive done or not.
 */
static nccl_result_t model(const struct mhdr *h, int nh, bool ctrl_closed,
			   size_t dlen, bool data_closed, struct mrecv *r,
			   int nr)
{
	uint64_t off = 0;
	bool any = false;
	int k, q = 0;

	for (int i = 0; i < nr; i++) {
		any |= r[i].queued;
		for (int j = 0; j < r[i].n; j++)
			r[i].b[j].msg = -1;
	}
	/* a header with another magic fails the comm as soon as headers are
	 * read (the first receive queued), before any byte moves: fewer than
	 * the 512 read ahead come before it */
	for (k = 0; k < nh; k++)
		if (!h[k].good)
			return any ? NCCL_ERR_INTERNAL : NCCL_OK;
	for (k = 0; k < nh; k++) {
		struct mrecv *v;
		int j;

		while (q < nr && !r[q].queued)
			q++;
		if (q == nr)
			break;		/* no receive for it: waits */
		v = &r[q];
		for (j = 0; j < v->n; j++)
			if (v->b[j].msg < 0 && (v->n == 1 || v->b[j].tag == h[k].tag))
				break;
		if (j == v->n)
			return NCCL_ERR_INTERNAL;
		if (h[k].size > v->b[j].cap)
			return NCCL_ERR_INVALID_USAGE;
		if (h[k].size > dlen - off)
			return data_closed ? NCCL_ERR_REMOTE : NCCL_OK;
		v->b[j].msg = k;
		off += h[k].size;
		for (j = 0; j < v->n && v->b[j].msg >= 0; j++)
			;
		if (j == v->n) {
			v->done = true;
			q++;
		}
	}
	/* every header read (a cut one too): a receive left waiting sees
	 * the close */
	while (q < nr && !r[q].queued)
		q++;
	if (q < nr && k == nh && ctrl_closed)
		return NCCL_ERR_REMOTE;
	return NCCL_OK;
}

/* The bytes of message k in the data stream start at the sum of the
 * sizes before it. */
static uint64_t msg_offset(const struct mhdr *h, int k)
{
	uint64_t off = 0;

	for (int i = 0; i < k; i++)
		off += h[i].size;
	return off;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz f = fz_init(data, size);
	struct mhdr h[MAX_HDRS];
	struct mrecv r[MAX_RECVS];
	uint8_t ctrl_bytes[MAX_HDRS * 16 + 16];
	uint8_t *stream;
	size_t clen = 0, dlen;
	int nh = 0, nr, cs[2], ds[2];
	uint8_t flags = fz_u8(&f);
	bool ctrl_closed = flags & 1, data_closed = flags & 2;
	struct dmtn_comm *c;
	nccl_result_t err = NCCL_OK, want;
	bool moved;

	setup_once();
	memset(r, 0, sizeof(r));
	/* the control stream: headers, the odd cut or foreign one */
	for (int n = fz_below(&f, MAX_HDRS + 1); nh < n;) {
		uint8_t kind = fz_u8(&f);
		struct dmtn_msg m = { DMTN_MSG_MAGIC, (int32_t)(kind >> 4) % 4,
				      fz_below(&f, MAX_CAP + 16) };

		if ((kind & 7) == 6)
			m.size = fz_u64(&f);	/* anything */
		if ((kind & 7) == 7) {
			m.magic = fz_u32(&f);
			m.tag = (int32_t)fz_u32(&f);
		}
		memcpy(ctrl_bytes + clen, &m, sizeof(m));
		clen += sizeof(m);
		h[nh++] = (struct mhdr){ m.magic == DMTN_MSG_MAGIC, m.tag, m.size };
	}
	if (fz_u8(&f) & 1) {	/* a header cut short */
		size_t cut = 1 + fz_below(&f, 15);

		fz_bytes(&f, ctrl_bytes + clen, cut);
		clen += cut;
	}
	/* the data stream: a known pattern, maybe short */
	dlen = fz_below(&f, MAX_DATA);
	stream = malloc(dlen ? dlen : 1);
	FZ_CHECK(stream);
	for (size_t i = 0; i < dlen; i++)
		stream[i] = pattern(i);
	/* the receives */
	nr = (int)fz_below(&f, MAX_RECVS + 1);
	for (int i = 0; i < nr; i++) {
		r[i].n = 1 + (int)fz_below(&f, DMTN_MAX_RECVS + 1);	/* 9: refused */
		for (int j = 0; j < r[i].n && j < DMTN_MAX_RECVS; j++) {
			struct mbuf *b = &r[i].b[j];

			b->cap = fz_below(&f, MAX_CAP);
			b->tag = (int)fz_below(&f, 4);
			b->data = malloc(b->cap ? b->cap : 1);
			FZ_CHECK(b->data);
			memset(b->data, FILL, b->cap);
		}
	}

	FZ_CHECK(!socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, cs));
	FZ_CHECK(!socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ds));
	write_all(cs[1], ctrl_bytes, clen);
	write_all(ds[1], stream, dlen);
	if (ctrl_closed)
		close(cs[1]);
	if (data_closed)
		close(ds[1]);
	c = dmtn_comm_new(DMTN_COMM_RECV, 0);
	FZ_CHECK(c);
	c->ctrl_fd = cs[0];
	c->data_fd = ds[0];

	/* post each receive, testing what is queued now and then */
	for (int i = 0; i < nr; i++) {
		void *bufs[DMTN_MAX_RECVS + 1];
		size_t caps[DMTN_MAX_RECVS + 1];
		int tags[DMTN_MAX_RECVS + 1];
		nccl_result_t ret;

		for (int j = 0; j < r[i].n; j++) {
			bool real = j < DMTN_MAX_RECVS;

			bufs[j] = real ? r[i].b[j].data : r[i].b[0].data;
			caps[j] = real ? r[i].b[j].cap : 0;
			tags[j] = real ? r[i].b[j].tag : 0;
		}
		ret = dmtn_irecv(c, r[i].n, bufs, caps, tags, NULL, &r[i].req);
		if (r[i].n > DMTN_MAX_RECVS) {
			/* more buffers than maxRecvs: refused, nothing queued */
			FZ_CHECK(ret == (err ? err : NCCL_ERR_INTERNAL) && !r[i].req);
			r[i].n = DMTN_MAX_RECVS;
			continue;
		}
		if (err) {
			FZ_CHECK(ret == err && !r[i].req);	/* sticky */
			continue;
		}
		/* queued, whether or not the progress it made failed */
		r[i].queued = true;
		if (ret) {
			FZ_CHECK(!r[i].req);
			err = ret;
			continue;
		}
		FZ_CHECK(r[i].req);
		if (fz_u8(&f) & 1) {
			for (int j = 0; j <= i; j++) {
				int done = 0, sizes[DMTN_MAX_RECVS];

				if (!r[j].req || r[j].done)
					continue;
				ret = dmtn_test(r[j].req, &done, sizes);
				if (ret) {
					FZ_CHECK(!err || ret == err);
					err = ret;
					break;
				}
				if (done) {
					r[j].done = true;
					memcpy(r[j].sizes, sizes, sizeof(sizes));
				}
			}
		}
	}
	/* test until nothing moves */
	do {
		moved = false;
		for (int i = 0; i < nr && !err; i++) {
			int done = 0, sizes[DMTN_MAX_RECVS];
			nccl_result_t ret;

			if (!r[i].req || r[i].done)
				continue;
			ret = dmtn_test(r[i].req, &done, sizes);
			if (ret) {
				err = ret;
				break;
			}
			if (done) {
				r[i].done = true;
				memcpy(r[i].sizes, sizes, sizeof(sizes));
				moved = true;
			}
		}
	} while (moved);

	/* what the model says */
	{
		bool got[MAX_RECVS];

		for (int i = 0; i < nr; i++) {
			got[i] = r[i].done;
			r[i].done = false;
		}
		want = model(h, nh, ctrl_closed, dlen, data_closed, r, nr);
		if (err || want)
			FZ_CHECK(err == want);
		for (int i = 0; i < nr; i++) {
			/* a receive the comm completed is one the model
			 * completes; without an error, the other way too */
			FZ_CHECK(!got[i] || r[i].done);
			FZ_CHECK(err || got[i] == r[i].done);
			if (!got[i])
				continue;
			for (int j = 0; j < r[i].n; j++) {
				const struct mbuf *b = &r[i].b[j];
				uint64_t len = h[b->msg].size;
				uint64_t off = msg_offset(h, b->msg);

				FZ_CHECK(r[i].sizes[j] == (int)len);
				for (size_t x = 0; x < len; x++)
					FZ_CHECK(b->data[x] == pattern(off + x));
				for (size_t x = len; x < b->cap; x++)
					FZ_CHECK(b->data[x] == FILL);
			}
		}
	}

	dmtn_close_recv(c);	/* closes cs[0] and ds[0] */
	if (!ctrl_closed)
		close(cs[1]);
	if (!data_closed)
		close(ds[1]);
	for (int i = 0; i < nr; i++)
		for (int j = 0; j < r[i].n && j < DMTN_MAX_RECVS; j++)
			free(r[i].b[j].data);
	free(stream);
	return 0;
}

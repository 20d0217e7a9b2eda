// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * io_uring zero-copy receive, its receive half (zcrx.h): the completion
 * parser, the refill ring, the fragment table, the sockets of a zcrx
 * handle and the ring's thread that drives them.  Making the ring and
 * registering the queue is the control plane's (nic/zcrx_ifq.c), the
 * unit tests' handle without io_uring zcrx_fake.c's.  Raw
 * system calls with the structs of uapi.h: Debian's liburing (2.3, 2.9)
 * predates zcrx (liburing 2.10).
 */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>
#include <netinet/in.h>

#include "buf/buf.h"
#include "core/fork.h"
#include "zcrx.h"

_Static_assert(sizeof(struct dmt_io_uring_sqe) == 64, "io_uring_sqe");
_Static_assert(sizeof(struct dmt_io_uring_cqe) == 16, "io_uring_cqe");
_Static_assert(sizeof(struct dmt_io_uring_getevents_arg) == 24, "getevents_arg");
_Static_assert(sizeof(struct dmt_zcrx_rqe) == 16, "zcrx_rqe");
_Static_assert(sizeof(struct dmt_zcrx_cqe) == 16, "zcrx_cqe");
_Static_assert(offsetof(struct dmt_io_uring_sqe, user_data) == 32, "sqe user_data");
_Static_assert(offsetof(struct dmt_io_uring_sqe, zcrx_ifq_idx) == 44, "sqe zcrx_ifq_idx");

#define SLOT_MAX (1u << 24)
#define STEER_RECHECK 4096	/* fragments between two steering checks */
#define QUEUE_RELEASE_MS 5000	/* teardown: wait this long for queue-get */

/* user_data: socket index + 1 and generation; cancels have the top bit */
#define TAG_CANCEL (1ull << 63)

static inline uint32_t load_acquire(const uint32_t *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

static inline void store_release(uint32_t *p, uint32_t v)
{
	__atomic_store_n(p, v, __ATOMIC_RELEASE);
}

/* ---- the completion parser ---------------------------------------------- */

int dmt_zcrx_cqe_parse(const void *cqe, uint64_t area_token,
		       uint64_t area_size, uint32_t buf_size,
		       struct dmt_zcrx_completion *out)
{
	struct dmt_io_uring_cqe c;
	struct dmt_zcrx_cqe z;
	uint64_t off;

	/* the ring is only 8-byte aligned in theory: copy, do not cast */
	memcpy(&c, cqe, sizeof(c));
	memcpy(&z, (const char *)cqe + sizeof(c), sizeof(z));
	*out = (struct dmt_zcrx_completion){ .user_data = c.user_data,
					     .res = c.res, .flags = c.flags };
	if (!(c.flags & DMT_IORING_CQE_F_MORE)) {
		/* the multishot receive ended: its result, no data */
		if (c.res > 0)
			return -EPROTO;
		return c.res == 0 ? DMT_ZCRX_CQE_END : DMT_ZCRX_CQE_ERROR;
	}
	if (c.res <= 0)
		return -EPROTO;
	if ((z.off & DMT_IORING_ZCRX_AREA_MASK) != area_token)
		return -EPROTO;
	off = z.off & ~DMT_IORING_ZCRX_AREA_MASK;
	if (!buf_size || (buf_size & (buf_size - 1)) || off >= area_size ||
	    (uint64_t)c.res > area_size - off ||
	    (off & (buf_size - 1)) + (uint64_t)c.res > buf_size)
		return -EPROTO;
	out->off = off;
	out->len = (uint32_t)c.res;
	return DMT_ZCRX_CQE_DATA;
}

/* ---- the handle ----------------------------------------------------------- */

struct dmt_zcrx_slot {			/* one fragment handed out */
	uint64_t off;
	uint32_t len;		/* 0: free */
	uint32_t next;		/* free list */
};

enum sock_state { SOCK_IDLE, SOCK_ARMED, SOCK_ENDED };

struct dmt_zcrx_sock {
	struct devmemtcp_zcrx *z;
	int fd;
	uint32_t idx;		/* in z->socks */
	uint32_t gen;
	bool detached;		/* its receive handle is gone */
	bool cancel_sent;
	bool starved;		/* copy fallback found no buffer: rearm after a refill */
	enum sock_state state;
	int end;		/* SOCK_ENDED: 0 or the receive's errno */
	uint64_t starved_refills;
	uint32_t *ready;	/* fragment ids not yet taken, FIFO */
	size_t rhead, rlen, rcap;
	uint64_t frags;
	uint64_t check_at;	/* steering check when frags reaches this */
	bool miss;		/* the flow arrives on another queue */
	bool warned;
	bool freeing;		/* dmt_zcrx_sock_free waits for its end */
	uint32_t seen_napi;
};

/* ---- system calls ---------------------------------------------------------- */

static int sys_enter(int fd, uint32_t submit, uint32_t wait, uint32_t flags,
		     const void *arg, size_t argsz)
{
	long r = syscall(__NR_io_uring_enter, fd, submit, wait, flags, arg, argsz);

	return r < 0 ? -errno : (int)r;
}

/* ---- the handle's memory ------------------------------------------------------- */

/* The refill ring's memory: its header, rq_entries entries and the
 * kernel's copy statistics after them. */
int dmt_zcrx_region_alloc(struct devmemtcp_zcrx *z)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t need = DMT_ZCRX_RQ_HDR_ROOM + (size_t)z->rq_entries * sizeof(struct dmt_zcrx_rqe) +
		      sizeof(struct dmt_zcrx_kstats);

	z->region_len = (need + page - 1) & ~(page - 1);
	z->region = mmap(NULL, z->region_len, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (z->region == MAP_FAILED) {
		z->region = NULL;
		return -ENOMEM;
	}
	return 0;
}

void dmt_zcrx_destroy(struct devmemtcp_zcrx *z)
{
	for (uint32_t i = 0; i < z->nsocks; i++) {
		if (z->socks[i]) {
			free(z->socks[i]->ready);
			free(z->socks[i]);
		}
	}
	free(z->socks);
	free(z->slots);
	free(z->waiting);
	if (z->sqes)
		munmap(z->sqes, z->sqes_len);
	if (z->rings)
		munmap(z->rings, z->rings_len);
	if (z->ring_fd >= 0)
		close(z->ring_fd);
	if (z->region)
		munmap(z->region, z->region_len);
	free(z->fake_mem);
	pthread_mutex_destroy(&z->lock);
	free(z);
}

/* ---- the refill ring ---------------------------------------------------------- */

/* Entries the kernel has not consumed yet. */
static uint32_t rq_used(const struct devmemtcp_zcrx *z)
{
	return z->rq_local - load_acquire(z->rq_head);
}

/* Move waiting releases into the ring while it has room; lock held.
 * The caller publishes the tail. */
static void drain_waiting(struct devmemtcp_zcrx *z)
{
	uint32_t room = z->rq_entries - rq_used(z);
	size_t n = z->nwaiting < room ? z->nwaiting : room;

	for (size_t i = 0; i < n; i++)
		z->rqes[z->rq_local++ & (z->rq_entries - 1)] =
			z->waiting[z->nwaiting - n + i];
	z->nwaiting -= n;
	z->st.refills += n;
}

static void publish(struct devmemtcp_zcrx *z)
{
	uint32_t used = rq_used(z);

	store_release(z->rq_tail, z->rq_local);
	if (used > z->st.refill_ring_max)
		z->st.refill_ring_max = used;
}

static int waiting_grow(struct devmemtcp_zcrx *z)
{
	size_t cap = z->waiting_cap ? z->waiting_cap * 2 : 1024;
	struct dmt_zcrx_rqe *w = dmt_realloc(z->waiting, cap * sizeof(*w));

	if (!w)
		return -ENOMEM;
	z->waiting = w;
	z->waiting_cap = cap;
	return 0;
}

/* One buffer back to the kernel: the ring, or the queue when it is full
 * (room for every fragment handed out is reserved with the slots, so a
 * release cannot fail); lock held. */
static void give_back(struct devmemtcp_zcrx *z, uint64_t off, uint32_t len)
{
	struct dmt_zcrx_rqe e = { .off = off | z->area_token, .len = len };

	if (z->closed)
		return;		/* the kernel took everything back */
	if (z->nwaiting)
		drain_waiting(z);
	if (!z->nwaiting && rq_used(z) < z->rq_entries) {
		z->rqes[z->rq_local++ & (z->rq_entries - 1)] = e;
		z->st.refills++;
		return;
	}
	if (z->nwaiting == z->waiting_cap && waiting_grow(z)) {
		dmt_log(z->ctx, DEVMEMTCP_LOG_ERR,
			"zcrx: out of memory: a buffer of %s queue %u is lost until the handle is freed",
			z->ifname, z->queue);
		return;
	}
	z->waiting[z->nwaiting++] = e;
	z->st.refill_queued++;
	if (z->nwaiting > z->st.refill_queue_max)
		z->st.refill_queue_max = z->nwaiting;
}

/* ---- the fragment table --------------------------------------------------------- */

static int slots_grow(struct devmemtcp_zcrx *z)
{
	uint32_t n = z->nslots ? z->nslots * 2 : 1024;
	struct dmt_zcrx_slot *s;
	struct dmt_zcrx_rqe *w;

	if (z->nslots >= SLOT_MAX)
		return -ENOSPC;
	/* the waiting queue can hold every fragment handed out */
	if (z->waiting_cap < n) {
		w = dmt_realloc(z->waiting, (size_t)n * sizeof(*w));
		if (!w)
			return -ENOMEM;
		z->waiting = w;
		z->waiting_cap = n;
	}
	s = dmt_realloc(z->slots, (size_t)n * sizeof(*s));
	if (!s)
		return -ENOMEM;
	/* the new ids go on the free list lowest first */
	for (uint32_t i = n; i-- > z->nslots;) {
		s[i] = (struct dmt_zcrx_slot){ .next = z->free_slot };
		z->free_slot = i;
	}
	z->slots = s;
	z->nslots = n;
	return 0;
}

/* A fragment id for [off, off + len), or a negative errno; lock held. */
static int64_t slot_get(struct devmemtcp_zcrx *z, uint64_t off, uint32_t len)
{
	uint32_t id;
	int ret;

	if (z->free_slot == DMT_ZCRX_NO_SLOT) {
		ret = slots_grow(z);
		if (ret)
			return ret;
	}
	id = z->free_slot;
	z->free_slot = z->slots[id].next;
	z->slots[id] = (struct dmt_zcrx_slot){ .off = off, .len = len, .next = DMT_ZCRX_NO_SLOT };
	if (++z->st.held > z->st.held_max)
		z->st.held_max = z->st.held;
	return id;
}

/* Free fragment id and give its buffer back; false if it is not in use. */
static bool slot_put(struct devmemtcp_zcrx *z, uint32_t id)
{
	struct dmt_zcrx_slot *s;

	if (id >= z->nslots || !z->slots[id].len)
		return false;
	s = &z->slots[id];
	give_back(z, s->off, s->len);
	s->len = 0;
	s->next = z->free_slot;
	z->free_slot = id;
	z->st.held--;
	return true;
}

int dmt_zcrx_refill(void *arg, const struct dmt_dmabuf_token *t, size_t n)
{
	struct dmt_zcrx_sock *s = arg;
	struct devmemtcp_zcrx *z = s->z;
	int freed = 0;

	pthread_mutex_lock(&z->lock);
	for (size_t i = 0; i < n; i++)
		for (uint32_t k = 0; k < t[i].token_count; k++)
			freed += slot_put(z, t[i].token_start + k);
	if (!z->closed)
		publish(z);
	pthread_mutex_unlock(&z->lock);
	return freed;
}

/* ---- sockets -------------------------------------------------------------------- */

static uint64_t sock_tag(const struct dmt_zcrx_sock *s)
{
	return (uint64_t)s->gen << 32 | (s->idx + 1);
}

static struct dmt_zcrx_sock *tag_sock(struct devmemtcp_zcrx *z, uint64_t tag)
{
	uint32_t idx = (uint32_t)tag - 1;

	if (tag & TAG_CANCEL || idx >= z->nsocks || !z->socks[idx] ||
	    z->socks[idx]->gen != (uint32_t)(tag >> 32))
		return NULL;
	return z->socks[idx];
}

/* Take the socket out of the table and free it; lock held. */
static void sock_remove(struct devmemtcp_zcrx *z, struct dmt_zcrx_sock *s)
{
	z->socks[s->idx] = NULL;
	free(s->ready);
	free(s);
}

/* Drop a reference; the last one frees z (called with the lock held, which
 * is released). */
void dmt_zcrx_put_unlock(struct devmemtcp_zcrx *z)
{
	bool last = --z->refs == 0;

	pthread_mutex_unlock(&z->lock);
	if (last)
		dmt_zcrx_destroy(z);
}

int dmt_zcrx_sock_new(struct devmemtcp_zcrx *z, int fd, struct dmt_err *err,
		      struct dmt_zcrx_sock **sp)
{
	struct dmt_zcrx_sock *s, **v;
	uint32_t idx;

	/* devmemtcp_rx_new checked that fd is a connected TCP socket */
	s = dmt_calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->z = z;
	s->fd = fd;
	pthread_mutex_lock(&z->lock);
	if (z->closed) {
		pthread_mutex_unlock(&z->lock);
		free(s);
		return dmt_err(z->ctx, err, -ESHUTDOWN,
			       "devmemtcp_rx_new: the zcrx handle was freed");
	}
	for (idx = 0; idx < z->nsocks && z->socks[idx]; idx++)
		;
	if (idx == z->nsocks) {
		v = dmt_realloc(z->socks, (z->nsocks + 8) * sizeof(*v));
		if (!v) {
			pthread_mutex_unlock(&z->lock);
			free(s);
			return -ENOMEM;
		}
		memset(v + z->nsocks, 0, 8 * sizeof(*v));
		z->socks = v;
		z->nsocks += 8;
	}
	s->idx = idx;
	s->gen = ++z->gen;
	z->socks[idx] = s;
	z->refs++;
	z->st.sockets++;
	pthread_mutex_unlock(&z->lock);
	*sp = s;
	return 0;
}

static bool on_ring_thread(const struct devmemtcp_zcrx *z)
{
	return z->enabled && pthread_equal(z->thread, pthread_self());
}

static int drive(struct devmemtcp_zcrx *z, struct dmt_zcrx_sock *want,
		 int timeout_ms, struct dmt_err *err);

void dmt_zcrx_sock_free(struct dmt_zcrx_sock *s)
{
	struct devmemtcp_zcrx *z;

	if (!s)
		return;
	z = s->z;
	pthread_mutex_lock(&z->lock);
	/* fragments that arrived but were never handed out */
	while (s->rlen) {
		slot_put(z, s->ready[s->rhead++ % s->rcap]);
		s->rlen--;
	}
	if (!z->closed)
		publish(z);
	s->detached = true;
	z->st.sockets--;
	/* an armed receive ends with a final completion: on the ring's thread
	 * cancel it now, else the ring's thread does (its CQE frees s) */
	if (s->state == SOCK_ARMED && !z->closed && on_ring_thread(z)) {
		struct dmt_err tmp;

		s->freeing = true;
		drive(z, s, 1000, &tmp);
		s->freeing = false;
	}
	if (s->state != SOCK_ARMED || z->closed)
		sock_remove(z, s);
	dmt_zcrx_put_unlock(z);
}

void dmt_zcrx_sock_forget(struct dmt_zcrx_sock *s)
{
	struct devmemtcp_zcrx *z;

	if (!s)
		return;
	z = s->z;
	pthread_mutex_lock(&z->lock);
	/* the fragments it brought and its armed receive are the parent's */
	z->st.sockets--;
	sock_remove(z, s);
	dmt_zcrx_put_unlock(z);
}

/* ---- the ring's thread ----------------------------------------------------------- */

static struct dmt_io_uring_sqe *sqe_get(struct devmemtcp_zcrx *z)
{
	struct dmt_io_uring_sqe *sqe;

	if (z->sq_local - load_acquire(z->sq_head) >= z->sq_entries)
		return NULL;
	sqe = &z->sqes[z->sq_local++ & z->sq_mask];
	memset(sqe, 0, sizeof(*sqe));
	return sqe;
}

/* Queue a multishot receive for every idle socket, a cancel for every
 * detached armed one; lock held.  Returns the SQEs queued. */
static uint32_t arm(struct devmemtcp_zcrx *z)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < z->nsocks; i++) {
		struct dmt_zcrx_sock *s = z->socks[i];
		struct dmt_io_uring_sqe *sqe;

		if (!s || (s->state == SOCK_IDLE && s->starved &&
			   z->st.refills == s->starved_refills))
			continue;
		if (s->state == SOCK_IDLE && !s->detached) {
			sqe = sqe_get(z);
			if (!sqe)
				break;
			sqe->opcode = DMT_IORING_OP_RECV_ZC;
			sqe->fd = s->fd;
			sqe->ioprio = DMT_IORING_RECV_MULTISHOT;
			sqe->zcrx_ifq_idx = z->zcrx_id;
			sqe->user_data = sock_tag(s);
			s->state = SOCK_ARMED;
			s->starved = false;
			n++;
		} else if (s->state == SOCK_ARMED && s->detached && !s->cancel_sent) {
			sqe = sqe_get(z);
			if (!sqe)
				break;
			sqe->opcode = DMT_IORING_OP_ASYNC_CANCEL;
			sqe->fd = -1;
			sqe->addr = sock_tag(s);
			sqe->user_data = TAG_CANCEL | s->idx;
			s->cancel_sent = true;
			n++;
		}
	}
	if (n)
		store_release(z->sq_tail, z->sq_local);
	return n;
}

/* A data completion for s (NULL: unknown or gone); lock held. */
static void on_data(struct devmemtcp_zcrx *z, struct dmt_zcrx_sock *s,
		    const struct dmt_zcrx_completion *c)
{
	int64_t id;

	z->st.frags++;
	z->st.bytes += c->len;
	/* nobody to take it, or bytes after a hole in the stream */
	if (!s || s->detached || s->state == SOCK_ENDED) {
		give_back(z, c->off, c->len);
		return;
	}
	if (s->rlen == s->rcap) {
		size_t cap = s->rcap ? s->rcap * 2 : 256;
		uint32_t *q = dmt_malloc(cap * sizeof(*q));

		if (!q)
			goto fail;
		for (size_t i = 0; i < s->rlen; i++)
			q[i] = s->ready[(s->rhead + i) % s->rcap];
		free(s->ready);
		s->ready = q;
		s->rhead = 0;
		s->rcap = cap;
	}
	id = slot_get(z, c->off, c->len);
	if (id < 0)
		goto fail;
	s->ready[(s->rhead + s->rlen++) % s->rcap] = (uint32_t)id;
	return;
fail:
	/* a byte of the stream is lost: end the socket's stream with it */
	give_back(z, c->off, c->len);
	if (s->state != SOCK_ENDED || !s->end)
		s->end = -ENOMEM;
	s->state = SOCK_ENDED;
}

/* The final completion of s's receive; lock held. */
static void on_end(struct devmemtcp_zcrx *z, struct dmt_zcrx_sock *s,
		   const struct dmt_zcrx_completion *c)
{
	if (s->detached) {
		s->state = SOCK_ENDED;	/* sweep() frees it */
		return;
	}
	if (s->state == SOCK_ENDED)	/* an earlier failure stays */
		return;
	/* the CQ was full, or the copy fallback found no free buffer: receive
	 * again (the latter once a buffer came back) */
	if (c->res == -ENOSPC || (c->res == -ENOMEM && !z->dmabuf_area)) {
		s->state = SOCK_IDLE;
		s->starved = c->res == -ENOMEM;
		s->starved_refills = z->st.refills;
		z->st.rearms++;
		return;
	}
	s->state = SOCK_ENDED;
	s->end = c->res;
}

/* Free the detached sockets whose receive ended; lock held. */
static void sweep(struct devmemtcp_zcrx *z)
{
	for (uint32_t i = 0; i < z->nsocks; i++) {
		struct dmt_zcrx_sock *s = z->socks[i];

		if (s && s->detached && !s->freeing && s->state != SOCK_ARMED)
			sock_remove(z, s);
	}
}

/* Read every completion; lock held.  Returns the number read. */
static uint32_t reap(struct devmemtcp_zcrx *z)
{
	uint32_t head = *z->cq_head, tail = load_acquire(z->cq_tail), n = 0;
	uint32_t rq = z->rq_local;

	for (; head != tail; head++, n++) {
		const uint8_t *cqe = z->cqes + (size_t)(head & z->cq_mask) * DMT_ZCRX_CQE_SIZE;
		struct dmt_zcrx_completion c;
		struct dmt_zcrx_sock *s;
		int kind;

		kind = dmt_zcrx_cqe_parse(cqe, z->area_token, z->area_size,
					  z->buf_size, &c);
		s = tag_sock(z, c.user_data);
		if (kind == DMT_ZCRX_CQE_DATA) {
			on_data(z, s, &c);
		} else if (s && kind > 0) {
			on_end(z, s, &c);
		} else if (kind < 0) {
			dmt_log(z->ctx, DEVMEMTCP_LOG_ERR,
				"zcrx: a completion the kernel should not write (user_data %#llx, res %d, flags %#x): ignored",
				(unsigned long long)c.user_data, c.res, c.flags);
			if (s) {
				s->state = SOCK_ENDED;
				s->end = -EPROTO;
			}
		}
	}
	store_release(z->cq_head, head);
	z->st.completions += n;
	if (z->rq_local != rq)	/* buffers nobody takes went back */
		publish(z);
	if (n)
		sweep(z);
	return n;
}

/* The copy fallback found no free buffer and none can come back: the
 * application holds none (the rest sits in the NIC's page pool). */
static bool starved_for_good(const struct devmemtcp_zcrx *z,
			     const struct dmt_zcrx_sock *s)
{
	return s->starved && s->state == SOCK_IDLE && !z->st.held &&
	       z->st.refills == s->starved_refills;
}

static bool sock_ready(const struct devmemtcp_zcrx *z, const struct dmt_zcrx_sock *s)
{
	return s->rlen || s->state == SOCK_ENDED || starved_for_good(z, s);
}

/* Sockets with something to take (want: that one, or 0/1). */
static int count_ready(const struct devmemtcp_zcrx *z,
		       const struct dmt_zcrx_sock *want)
{
	int n = 0;

	if (want)
		return want->detached ? want->state != SOCK_ARMED : sock_ready(z, want);
	for (uint32_t i = 0; i < z->nsocks; i++)
		n += z->socks[i] && !z->socks[i]->detached && sock_ready(z, z->socks[i]);
	return n;
}

/* The ring's thread: make this thread the ring's, or refuse. */
static int ring_claim(struct devmemtcp_zcrx *z, struct dmt_err *err)
{
	int ret;

	if (z->closed)
		return dmt_err(z->ctx, err, -ESHUTDOWN,
			       "the zcrx handle of %s queue %u was freed",
			       z->ifname, z->queue);
	if (on_ring_thread(z))
		return 0;
	if (z->enabled)
		return dmt_err(z->ctx, err, -EBUSY,
			       "the zcrx handle of %s queue %u is driven by another thread: receive on all its sockets from that one thread (io_uring single issuer)",
			       z->ifname, z->queue);
	ret = dmt_zcrx_sys_register(z->ring_fd, DMT_IORING_REGISTER_ENABLE_RINGS, NULL, 0);
	z->st.syscalls++;
	if (ret < 0)
		return dmt_err(z->ctx, err, ret, "IORING_REGISTER_ENABLE_RINGS failed: %s",
			       dmt_errno_name(ret));
	z->enabled = true;
	z->thread = pthread_self();
	return 0;
}

/* How long a receive on s may wait, as recvmsg would on its socket: 0
 * when the socket is non-blocking now, its SO_RCVTIMEO when one is set
 * (rounded up to a millisecond), else -1 (no limit).  Lock held. */
static int sock_wait_ms(struct devmemtcp_zcrx *z, const struct dmt_zcrx_sock *s)
{
	struct timeval tv = { 0, 0 };
	socklen_t len = sizeof(tv);
	int fl = fcntl(s->fd, F_GETFL);
	int64_t ms;

	z->st.syscalls++;
	if (fl >= 0 && (fl & O_NONBLOCK))
		return 0;
	z->st.syscalls++;
	if (getsockopt(s->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, &len) ||
	    (tv.tv_sec <= 0 && tv.tv_usec <= 0))
		return -1;
	ms = (int64_t)tv.tv_sec * 1000 + (tv.tv_usec + 999) / 1000;
	return ms > INT_MAX ? INT_MAX : (int)ms;
}

/*
 * Reap, arm, and wait in io_uring_enter (unlocked) until want (or, when
 * NULL, any socket) has something to take, or timeout_ms (0: one look
 * without waiting, < 0: no limit).  Lock held, on the ring's thread.
 * Returns count_ready() (0: timed out or nothing), or a negative errno.
 */
static int drive(struct devmemtcp_zcrx *z, struct dmt_zcrx_sock *want,
		 int timeout_ms, struct dmt_err *err)
{
	struct dmt_kernel_timespec ts = { 0, 0 };
	struct dmt_io_uring_getevents_arg arg = { .ts = (uint64_t)(uintptr_t)&ts };
	uint32_t flags = DMT_IORING_ENTER_GETEVENTS;
	int64_t end = timeout_ms > 0 ? dmt_now_ms() + timeout_ms : 0;
	uint32_t submit;
	int ret, n;

	if (timeout_ms > 0)
		flags |= DMT_IORING_ENTER_EXT_ARG;
	for (;;) {
		reap(z);
		if (z->nwaiting) {
			drain_waiting(z);
			publish(z);
		}
		submit = arm(z);
		n = count_ready(z, want);
		if (n && !submit)
			return n;
		if (z->fake_mem) {	/* the test is the kernel: no waiting */
			reap(z);
			return count_ready(z, want);
		}
		/* a look without waiting: only completions the kernel has
		 * queued for this thread (deferred task work) need a call */
		if (!timeout_ms && !submit &&
		    !(__atomic_load_n(z->sq_flags, __ATOMIC_ACQUIRE) &
		      (DMT_IORING_SQ_TASKRUN | DMT_IORING_SQ_CQ_OVERFLOW)))
			return n;
		if (timeout_ms > 0) {
			/* what is left: completions of other sockets do not
			 * extend the wait */
			int64_t left = end - dmt_now_ms();

			if (left <= 0 && !submit) {
				reap(z);
				return count_ready(z, want);
			}
			if (left < 0)
				left = 0;
			ts.tv_sec = left / 1000;
			ts.tv_nsec = (left % 1000) * 1000000ll;
		}
		pthread_mutex_unlock(&z->lock);
		ret = sys_enter(z->ring_fd, submit, n || !timeout_ms ? 0 : 1,
				flags, timeout_ms > 0 ? &arg : NULL,
				timeout_ms > 0 ? sizeof(arg) : 0);
		pthread_mutex_lock(&z->lock);
		z->st.enter_calls++;
		z->st.syscalls++;
		if (ret == -ETIME || (ret >= 0 && (n || !timeout_ms))) {
			reap(z);
			return count_ready(z, want);
		}
		if (ret == -EINTR)
			return ret;
		if (ret < 0 && ret != -EAGAIN && ret != -EBUSY)
			return dmt_err(z->ctx, err, ret, "io_uring_enter failed: %s",
				       dmt_errno_name(ret));
	}
}

/* Is s's flow delivered by another queue than the handle's?  One
 * getsockopt per STEER_RECHECK fragments; lock held. */
static void steering_check(struct devmemtcp_zcrx *z, struct dmt_zcrx_sock *s)
{
	unsigned int id = 0;
	socklen_t len = sizeof(id);

	if (!z->napi_id || s->frags < s->check_at)
		return;
	s->check_at = s->frags + STEER_RECHECK;
	z->st.syscalls++;
	if (getsockopt(s->fd, SOL_SOCKET, SO_INCOMING_NAPI_ID, &id, &len) || !id)
		return;
	s->seen_napi = id;
	s->miss = id != z->napi_id;
	if (s->miss && !s->warned) {
		s->warned = true;
		dmt_log(z->ctx, DEVMEMTCP_LOG_WARN,
			"fd %d: the flow arrives on another queue than %s queue %u (NAPI id %u, not %u): the kernel copies its bytes into the zcrx area (steering miss); steer it with an ntuple rule",
			s->fd, z->ifname, z->queue, id, z->napi_id);
	}
}

/* Hand out up to max ready fragments, at most len bytes (at least one). */
static int take(struct devmemtcp_zcrx *z, struct dmt_zcrx_sock *s,
		struct devmemtcp_frag *frags, size_t max, size_t len)
{
	const struct devmemtcp_buf *buf = z->buf;
	size_t n = 0, bytes = 0;

	while (n < max && s->rlen) {
		uint32_t id = s->ready[s->rhead % s->rcap];
		const struct dmt_zcrx_slot *sl = &z->slots[id];
		struct devmemtcp_frag *f = &frags[n];
		long seg;

		if (n && bytes + sl->len > len)
			break;
		f->offset = sl->off;
		f->len = sl->len;
		f->token = id;
		f->binding_id = 0;
		f->flags = 0;
		f->addr = 0;
		seg = dmt_segments_find(buf->segs, buf->nsegs, sl->off);
		if (seg >= 0)
			f->addr = buf->segs[seg].addr + (sl->off - buf->segs[seg].offset);
		bytes += sl->len;
		s->rhead = (s->rhead + 1) % s->rcap;
		s->rlen--;
		n++;
	}
	s->frags += n;
	return (int)n;
}

/* The error of a receive that ended, in words. */
static int ended(struct devmemtcp_zcrx *z, struct dmt_zcrx_sock *s,
		 struct dmt_err *err)
{
	int res = s->end;

	if (!res)
		return 0;
	if (res == -EFAULT || (res == -ENOMEM && z->dmabuf_area)) {
		s->check_at = 0;
		steering_check(z, s);
		if (s->miss || res == -EFAULT)
			return dmt_err(z->ctx, err, -EREMOTEIO,
				       "fd %d: the flow arrives on another queue than %s queue %u%s: the kernel cannot place its bytes in this zcrx area (steering miss); steer it to queue %u with an ntuple rule (devmemtcp_nic_open() flows)%s",
				       s->fd, z->ifname, z->queue,
				       res == -EFAULT ? " (one with another memory provider)" : "",
				       z->queue,
				       res == -EFAULT ? "" : ", or use a user-memory area, into which the kernel copies");
		return dmt_err(z->ctx, err, -EREMOTEIO,
			       "fd %d: the NIC did not split some payload from its headers and the kernel cannot copy it into a dma-buf area: check header split (tcp-data-split on, hds-thresh 0) or use a user-memory area",
			       s->fd);
	}
	if (res == -ENOMEM)
		return dmt_err(z->ctx, err, -ENOMEM,
			       "fd %d: out of memory while receiving: fragments were lost",
			       s->fd);
	if (res == -EINVAL || res == -EPROTONOSUPPORT || res == -ENOTSOCK)
		return dmt_err(z->ctx, err, res,
			       "fd %d: IORING_OP_RECV_ZC refused the socket (%s): it must be a connected TCP socket",
			       s->fd, dmt_errno_name(res));
	if (res == -EPROTO)
		return dmt_err(z->ctx, err, res,
			       "fd %d: the kernel wrote a completion outside the zcrx area: unexpected kernel behaviour",
			       s->fd);
	return dmt_err(z->ctx, err, res, "fd %d: zero-copy receive failed: %s",
		       s->fd, dmt_errno_name(res));
}

int dmt_zcrx_recv(struct dmt_zcrx_sock *s, struct devmemtcp_frag *frags,
		  size_t max, size_t len, struct dmt_err *err, bool *miss)
{
	struct devmemtcp_zcrx *z = s->z;
	int ret;

	pthread_mutex_lock(&z->lock);
	ret = ring_claim(z, err);
	if (ret)
		goto out;
	if (!sock_ready(z, s)) {
		ret = drive(z, s, sock_wait_ms(z, s), err);
		if (ret < 0)
			goto out;
	}
	if (s->rlen) {
		ret = take(z, s, frags, max, len);
		steering_check(z, s);
		*miss = s->miss;
		if (s->miss)
			z->st.steering_misses++;
	} else if (s->state == SOCK_ENDED) {
		ret = ended(z, s, err);
	} else if (starved_for_good(z, s)) {
		ret = dmt_err(z->ctx, err, -ENOBUFS,
			      "fd %d: the kernel must copy this flow's bytes (it arrives on another queue than %s queue %u) and found no free buffer in the area, while the application holds none: steer the flow to queue %u, or use a larger buffer",
			      s->fd, z->ifname, z->queue, z->queue);
	} else {
		ret = -EAGAIN;
	}
out:
	pthread_mutex_unlock(&z->lock);
	return ret;
}

void dmt_zcrx_unget(struct dmt_zcrx_sock *s, const struct devmemtcp_frag *frags,
		    size_t n)
{
	struct devmemtcp_zcrx *z = s->z;

	pthread_mutex_lock(&z->lock);
	/* take() left their places free just before rhead */
	for (size_t i = n; i-- > 0;) {
		s->rhead = (s->rhead + s->rcap - 1) % s->rcap;
		s->ready[s->rhead] = frags[i].token;
		s->rlen++;
	}
	s->frags -= n;
	pthread_mutex_unlock(&z->lock);
}

DEVMEMTCP_EXPORT int devmemtcp_zcrx_wait(struct devmemtcp_zcrx *z, int timeout_ms)
{
	DMT_KEEP_ERRNO;
	int ret;

	if (!z)
		return dmt_err(NULL, NULL, -EINVAL, "devmemtcp_zcrx_wait: zcrx is NULL");
	if (dmt_forked(z->fork_gen))
		return dmt_fork_refuse(z->ctx, &z->err, "devmemtcp_zcrx_wait", "zcrx handle");
	pthread_mutex_lock(&z->lock);
	ret = ring_claim(z, &z->err);
	if (!ret)
		ret = drive(z, NULL, timeout_ms, &z->err);
	pthread_mutex_unlock(&z->lock);
	return ret;
}

/* ---- teardown and the rest ------------------------------------------------------ */

DEVMEMTCP_EXPORT const char *devmemtcp_zcrx_errmsg(const struct devmemtcp_zcrx *z)
{
	DMT_KEEP_ERRNO;
	return z ? z->err.msg : "";
}

DEVMEMTCP_EXPORT int devmemtcp_zcrx_stats(const struct devmemtcp_zcrx *zc,
					  struct devmemtcp_zcrx_stats *stats)
{
	DMT_KEEP_ERRNO;
	struct devmemtcp_zcrx *z = (struct devmemtcp_zcrx *)zc;
	struct devmemtcp_zcrx_stats s;

	if (!z || !stats || stats->sz < sizeof(size_t))
		return -EINVAL;
	pthread_mutex_lock(&z->lock);
	s = z->st;
	s.copy_count = z->kstats && !z->closed ?
		(int64_t)__atomic_load_n(&z->kstats->copy_count, __ATOMIC_RELAXED) : -1;
	s.copy_bytes = z->kstats && !z->closed ?
		(int64_t)__atomic_load_n(&z->kstats->copy_bytes, __ATOMIC_RELAXED) : -1;
	s.area_buffers = z->buf_size ? (uint32_t)(z->area_size / z->buf_size) : 0;
	s.buffer_size = z->buf_size;
	s.rq_entries = z->rq_entries;
	s.refill_waiting = z->nwaiting;
	s.dmabuf_area = z->dmabuf_area;
	pthread_mutex_unlock(&z->lock);
	dmt_copy_out(stats, &s, sizeof(s));
	return 0;
}

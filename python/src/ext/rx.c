// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/* Rx: receiving, and the fragment sets whose tokens it hands back. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "zcrx.h"

#define DEFAULT_MAX_FRAGS 1024
#define DEFAULT_MAX_BYTES (4u << 20)

static void rx_destroy(struct core *c)
{
	struct rx_core *rx = (struct rx_core *)c;
	size_t nb = atomic_load(&rx->nbufs);

	if (rx->zcrx)
		dmtpy_test_point("Rx.free(zcrx)");	/* tests: without the GIL */
	/* waits for pending fences, whose done callbacks free their sets */
	devmemtcp_rx_free(rx->rx);
	core_put(rx->zcrx);	/* after the socket left it */
	if (rx->fd >= 0)
		close(rx->fd);
	for (size_t i = 0; i < nb; i++)
		core_put(&rx->bufs[i].buf->c);
	for (int i = 0; i < MAX_GPUS; i++)
		core_put(rx->gpus[i] ? &rx->gpus[i]->c : NULL);
	core_put(&rx->ctx->c);
	pthread_mutex_destroy(&rx->add_lock);
	pthread_mutex_destroy(&rx->recv_lock);
	free(rx->scratch);
	free(rx->linear);
	free(rx);
	dmtpy_test_freed("Rx");
}

/* Drop a reference on rx.  The last one of a zcrx receiver may block (its
 * socket's receive is cancelled on the ring's thread, and the ring it held
 * last waits until the kernel released the queue): not with the GIL, when
 * this thread holds it (a DLPack deleter may run on a thread without). */
static void rx_put(struct rx_core *rx)
{
	if (rx->zcrx && PyGILState_Check()) {
		Py_BEGIN_ALLOW_THREADS
		core_put(&rx->c);
		Py_END_ALLOW_THREADS
	} else {
		core_put(&rx->c);
	}
}

/* ---- fragment sets -------------------------------------------------------- */

static void set_free(struct frag_set *set)
{
	struct fence_ent *e = atomic_load(&set->fences), *next;

	for (; e; e = next) {
		next = e->next;
		free(e);
	}
	free(set);
}

/* devmemtcp_done_fn of a set with fences: 1 once every fence completed.
 * A fence that fails (a broken CUDA context) counts as complete: nothing
 * reads the bytes any more, and the receiver must not wedge on it. */
static int set_done(void *arg, bool wait)
{
	struct frag_set *set = arg;

	for (struct fence_ent *e = atomic_load(&set->fences); e; e = e->next) {
		int r;

		if (!e->fence)
			continue;
		r = devmemtcp_gpu_fence_done(e->fence, wait);
		if (r == 0)
			return 0;
		e->fence = NULL;
	}
	set_free(set);
	return 1;
}

static void set_wait(struct frag_set *set)
{
	for (struct fence_ent *e = atomic_load(&set->fences); e; e = e->next) {
		if (e->fence)
			devmemtcp_gpu_fence_done(e->fence, true);
		e->fence = NULL;
	}
}

int dmtpy_set_push_fence(struct frag_set *set, struct devmemtcp_gpu_fence *f)
{
	struct fence_ent *e = malloc(sizeof(*e));

	if (!e) {
		devmemtcp_gpu_fence_done(f, true);
		return -ENOMEM;
	}
	e->fence = f;
	e->next = atomic_load(&set->fences);
	while (!atomic_compare_exchange_weak(&set->fences, &e->next, e))
		;
	return 0;
}

static void set_unhold(struct frag_set *set)
{
	struct rx_core *rx = set->rx;
	size_t nb = atomic_load(&rx->nbufs);

	for (size_t i = 0; i < nb; i++)
		if (set->held[i])
			atomic_fetch_sub(&rx->bufs[i].buf->held, set->held[i]);
}

static void copy_msg(char *msg, size_t len, const char *src)
{
	if (msg && len)
		snprintf(msg, len, "%s", src);
}

/*
 * The tokens of set go back to the library: after gpu's stream, after the
 * set's fences, or now, from whatever thread drops the set, while another
 * may be receiving.  The set is freed here or, when deferred on its
 * fences, by set_done().  The set's receiver reference goes last.  The
 * handle's message is the last failure of any thread: it is copied at
 * once, and names this release's failure unless another failed meanwhile.
 */
static int set_release(struct frag_set *set, struct gpu_core *gpu,
		       void *stream, bool from_any_thread, char *msg,
		       size_t msglen)
{
	struct rx_core *rx = set->rx;
	bool deferred = false;
	int dev = atomic_load(&set->sync_device), ret;

	set_unhold(set);
	if (dmt_parents(rx->gen)) {
		/* a parent's fragments: the library refuses to hand their
		 * tokens back (they stay the parent's); no CUDA, no fences */
		ret = devmemtcp_rx_release(rx->rx, set->frags, set->n);
		copy_msg(msg, msglen, devmemtcp_rx_errmsg(rx->rx));
		set_free(set);
		rx_put(rx);
		return ret < 0 ? ret : 0;
	}
	if (dev >= 0)
		dmtpy_cuda_sync(dev);	/* a view had no stream to fence */
	if (gpu) {
		ret = devmemtcp_gpu_release_after(gpu->gpu, rx->rx, set->frags,
						  set->n, stream);
		if (ret < 0) {
			copy_msg(msg, msglen, devmemtcp_gpu_errmsg(gpu->gpu));
			dmtpy_cuda_sync(gpu->device);
			devmemtcp_rx_release(rx->rx, set->frags, set->n);
		}
	} else if (atomic_load(&set->fences)) {
		ret = devmemtcp_rx_release_after(rx->rx, set->frags, set->n,
						 set_done, set);
		deferred = ret >= 0;
		if (!deferred) {
			/* could not defer: wait here, then release */
			copy_msg(msg, msglen, devmemtcp_rx_errmsg(rx->rx));
			set_wait(set);
			devmemtcp_rx_release(rx->rx, set->frags, set->n);
		}
	} else {
		ret = devmemtcp_rx_release(rx->rx, set->frags, set->n);
		if (ret < 0)
			copy_msg(msg, msglen, devmemtcp_rx_errmsg(rx->rx));
	}
	/* a deleter, or a receive waiting elsewhere: the tokens go to the
	 * kernel now rather than at the next receive, which may be waiting
	 * for the very buffers they hold */
	if (from_any_thread || atomic_load(&rx->receiving))
		devmemtcp_rx_flush(rx->rx);
	if (!deferred)
		set_free(set);
	rx_put(rx);
	return ret < 0 ? ret : 0;
}

int dmtpy_set_put(struct frag_set *set, bool from_any_thread, char *msg,
		size_t msglen)
{
	if (atomic_fetch_sub_explicit(&set->refs, 1, memory_order_acq_rel) != 1)
		return 0;
	return set_release(set, NULL, NULL, from_any_thread, msg, msglen);
}

int dmtpy_set_gather_release(struct frag_set *set, struct gpu_core *g,
			   const void *linear, size_t nlinear,
			   const struct devmemtcp_gpu_iov *iov, void *stream,
			   char *msg, size_t msglen)
{
	struct rx_core *rx = set->rx;
	int ret;

	set_unhold(set);
	pthread_mutex_lock(&g->lock);
	ret = devmemtcp_gpu_gather_recv(g->gpu, rx->rx, set->frags, set->n,
					linear, nlinear, iov, 1, stream);
	if (ret)
		copy_msg(msg, msglen, devmemtcp_gpu_errmsg(g->gpu));
	pthread_mutex_unlock(&g->lock);
	if (ret) {
		/* nothing deferred; the gather may be queued */
		dmtpy_cuda_sync(g->device);
		devmemtcp_rx_release(rx->rx, set->frags, set->n);
	}
	if (atomic_load(&rx->receiving))
		devmemtcp_rx_flush(rx->rx);
	set_free(set);
	rx_put(rx);
	return ret < 0 ? ret : 0;
}

int dmtpy_set_release_gpu(struct frag_set *set, struct gpu_core *gpu,
			void *stream, char *msg, size_t msglen)
{
	atomic_store(&set->refs, 0);
	return set_release(set, gpu, stream, false, msg, msglen);
}

static long buf_index(const struct rx_core *rx, size_t nb, uint32_t id)
{
	for (size_t i = 0; i < nb; i++)
		if (rx->bufs[i].id == id)
			return (long)i;
	return -1;
}

struct buf_core *dmtpy_set_frag_buf(const struct frag_set *set, uint32_t i)
{
	const struct devmemtcp_frag *f = &set->frags[i];
	long k;

	if (f->flags & (DEVMEMTCP_FRAG_LINEAR | DEVMEMTCP_FRAG_FOREIGN))
		return NULL;
	k = buf_index(set->rx, atomic_load(&set->rx->nbufs), f->binding_id);
	return k < 0 ? NULL : set->rx->bufs[k].buf;
}

int dmtpy_set_range(const struct frag_set *set, uint64_t *addr, uint64_t *len,
		  char *why, size_t whylen)
{
	struct devmemtcp_gpu_iov iov;
	uint64_t linear = 0;
	int n;

	for (uint32_t i = 0; i < set->n; i++)
		if (set->frags[i].flags & DEVMEMTCP_FRAG_LINEAR)
			linear += set->frags[i].len;
	if (linear) {
		snprintf(why, whylen,
			 "%llu bytes arrived as linear (host) data, not in the buffer: use gather_into() or read()",
			 (unsigned long long)linear);
		return 0;
	}
	n = devmemtcp_gpu_view(NULL, set->frags, set->n, &iov, 1);
	if (n < 0) {
		snprintf(why, whylen,
			 "a fragment has no address (a binding not registered with Rx.add_buf()): nothing to view");
		return 0;
	}
	if (n != 1) {
		snprintf(why, whylen, n ? "the %u fragments are %d separate device ranges: a DLPack tensor is one range; use gather_into()"
					: "%u fragments and no bytes: nothing to view",
			 set->n, n);
		return 0;
	}
	*addr = iov.addr;
	*len = iov.len;
	return 1;
}

/* ---- the receiver's GPU handles ------------------------------------------ */

struct gpu_core *dmtpy_rx_gpu(struct rx_core *rx, int device)
{
	struct gpu_core *g;
	int ret;

	if (device < 0 || device >= MAX_GPUS) {
		PyErr_Format(PyExc_ValueError, "CUDA device %d is out of range", device);
		return NULL;
	}
	if (!rx->gpus[device]) {
		DEVMEMTCP_OPTS(gpu_opts, o, .cuda_device = device);

		g = dmtpy_gpu_core_new(rx->ctx, device, &o, &ret);
		if (!g)
			return NULL;
		/* another thread may have made one while the GIL was free */
		if (rx->gpus[device])
			core_put(&g->c);
		else
			rx->gpus[device] = g;
	}
	core_get(&rx->gpus[device]->c);
	return rx->gpus[device];
}

/* ---- receiving ------------------------------------------------------------ */

struct recv_out {
	struct frag_set *set;
	void *linear;
	size_t nlinear;
	uint64_t nbytes;
	uint64_t dmabuf;
	char msg[512];
};

static int ensure_scratch(struct rx_core *rx, size_t max_frags, size_t len)
{
	if (max_frags > rx->scratch_max) {
		void *p = realloc(rx->scratch, max_frags * sizeof(*rx->scratch));

		if (!p)
			return -ENOMEM;
		rx->scratch = p;
		rx->scratch_max = max_frags;
	}
	if (len > rx->linear_max) {
		void *p = realloc(rx->linear, len);

		if (!p)
			return -ENOMEM;
		rx->linear = p;
		rx->linear_max = len;
	}
	return 0;
}

/* A receive with a timeout: flush releases as a blocking receive does,
 * then wait for data with poll().  0 when readable, or a negative errno.
 * (Without a timeout the library's receive blocks itself while other
 * threads release.)  sock_timeout: the timeout is the socket object's
 * (settimeout(), which makes the descriptor non-blocking) or the call's:
 * wait anyway. */
static int wait_readable(struct rx_core *rx, int timeout_ms, bool sock_timeout,
			 struct recv_out *o)
{
	struct pollfd p = { .fd = rx->fd, .events = POLLIN };
	int ret;

	/* the common case: data is waiting, and the receive flushes itself */
	if (poll(&p, 1, 0) > 0)
		return 0;
	ret = devmemtcp_rx_flush(rx->rx);
	if (ret < 0) {
		copy_msg(o->msg, sizeof(o->msg), devmemtcp_rx_errmsg(rx->rx));
		return ret;
	}
	if (!sock_timeout && (fcntl(rx->fd, F_GETFL) & O_NONBLOCK))
		return -EAGAIN;
	ret = poll(&p, 1, timeout_ms);
	if (ret > 0)
		return 0;
	return ret < 0 ? -errno : -ETIMEDOUT;
}

/* Turn n fragments of the scratch array into a set; account the bytes
 * each buffer now has in live views. */
static int make_set(struct rx_core *rx, int n, struct recv_out *o)
{
	size_t nb = atomic_load(&rx->nbufs);
	struct frag_set *s;
	long last = 0;

	s = malloc(sizeof(*s) + (size_t)n * sizeof(s->frags[0]));
	if (!s)
		return -ENOMEM;
	atomic_init(&s->refs, 1);
	atomic_init(&s->fences, NULL);
	atomic_init(&s->sync_device, -1);
	memset(s->held, 0, sizeof(s->held));
	s->n = (uint32_t)n;
	memcpy(s->frags, rx->scratch, (size_t)n * sizeof(s->frags[0]));
	o->nlinear = 0;
	o->nbytes = o->dmabuf = 0;
	for (int i = 0; i < n; i++) {
		const struct devmemtcp_frag *f = &s->frags[i];

		o->nbytes += f->len;
		if (f->flags & DEVMEMTCP_FRAG_LINEAR) {
			if (f->offset + f->len > o->nlinear)
				o->nlinear = f->offset + f->len;
			continue;
		}
		o->dmabuf += f->len;
		if (f->flags & DEVMEMTCP_FRAG_FOREIGN)
			continue;
		if ((size_t)last >= nb || rx->bufs[last].id != f->binding_id)
			last = buf_index(rx, nb, f->binding_id);
		if (last >= 0)
			s->held[last] += f->len;
		else
			last = 0;
	}
	for (size_t i = 0; i < nb; i++)
		if (s->held[i])
			atomic_fetch_add(&rx->bufs[i].buf->held, s->held[i]);
	o->linear = NULL;
	if (o->nlinear) {
		o->linear = malloc(o->nlinear);
		if (o->linear)
			memcpy(o->linear, rx->linear, o->nlinear);
	}
	core_get(&rx->c);
	s->rx = rx;
	o->set = s;
	return n;
}

/* One receive into the scratch array; then, still under the receive
 * lock and without the GIL, done(rx, n, o, arg) makes of it what the call
 * returns (a fragment set, a gather).  n, or a negative errno. */
typedef int (*recv_done_fn)(struct rx_core *rx, int n, struct recv_out *o,
			    void *arg);

/*
 * A timed receive on a zcrx receiver: its bytes come through the ring, not
 * the socket, so poll() on the socket cannot tell whether it has something
 * to take; the library's zcrx receive waits as recvmsg would on the socket
 * instead (devmemtcp_rx_recv(3): not at all when the socket is
 * non-blocking, at most its SO_RCVTIMEO).  So for the call the socket is
 * blocking with SO_RCVTIMEO timeout_ms (non-blocking for a timeout of 0),
 * then as it was.  -ETIMEDOUT when nothing came.  Receive lock held.
 */
static int zcrx_recv_timed(struct rx_core *rx, size_t max_frags, size_t len,
			   int timeout_ms, struct recv_out *o, recv_done_fn done,
			   void *arg)
{
	struct timeval was = { 0, 0 }, tv = { timeout_ms / 1000, (timeout_ms % 1000) * 1000 };
	socklen_t tl = sizeof(was);
	int fl = fcntl(rx->fd, F_GETFL), want, ret, err = 0;

	if (fl < 0 || getsockopt(rx->fd, SOL_SOCKET, SO_RCVTIMEO, &was, &tl))
		goto failed;
	want = timeout_ms ? fl & ~O_NONBLOCK : fl | O_NONBLOCK;
	if ((want != fl && fcntl(rx->fd, F_SETFL, want)) ||
	    (timeout_ms && setsockopt(rx->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv))))
		goto failed;
	ret = devmemtcp_rx_recv(rx->rx, rx->scratch, max_frags, rx->linear, len);
	if (ret < 0 && ret != -EAGAIN && ret != -EINTR)
		copy_msg(o->msg, sizeof(o->msg), devmemtcp_rx_errmsg(rx->rx));
	if (timeout_ms && setsockopt(rx->fd, SOL_SOCKET, SO_RCVTIMEO, &was, sizeof(was)))
		err = errno;
	if (want != fl && fcntl(rx->fd, F_SETFL, fl) && !err)
		err = errno;
	if (ret > 0)
		ret = done(rx, ret, o, arg);
	if (ret == -EAGAIN)
		ret = -ETIMEDOUT;
	if (err && ret < 0) {
		snprintf(o->msg, sizeof(o->msg),
			 "Rx.recv: cannot restore the socket's flags or SO_RCVTIMEO after a timed zcrx receive: %s",
			 strerror(err));
		ret = -err;
	}
	return ret;
failed:
	err = errno;
	snprintf(o->msg, sizeof(o->msg),
		 "Rx.recv: cannot set the socket up for a timed zcrx receive (fcntl, SO_RCVTIMEO): %s",
		 strerror(err));
	return -err;
}

static int recv_locked(struct rx_core *rx, size_t max_frags, size_t len,
		       int timeout_ms, bool sock_timeout, struct recv_out *o,
		       recv_done_fn done, void *arg)
{
	int ret = ensure_scratch(rx, max_frags, len);

	if (ret)
		return ret;
	if (timeout_ms >= 0 && rx->zcrx)
		return zcrx_recv_timed(rx, max_frags, len, timeout_ms, o, done, arg);
	if (timeout_ms >= 0) {
		ret = wait_readable(rx, timeout_ms, sock_timeout, o);
		if (ret)
			return ret;
	}
	ret = devmemtcp_rx_recv(rx->rx, rx->scratch, max_frags, rx->linear, len);
	if (ret < 0 && ret != -EAGAIN && ret != -EINTR)
		copy_msg(o->msg, sizeof(o->msg), devmemtcp_rx_errmsg(rx->rx));
	if (ret > 0)
		ret = done(rx, ret, o, arg);
	return ret;
}

static int make_set_cb(struct rx_core *rx, int n, struct recv_out *o, void *arg)
{
	(void)arg;
	return make_set(rx, n, o);
}

/* The bytes a receive may take without live views going over a buffer's
 * cap; 0 with the error raised when one is at its cap already. */
static size_t cap_room(struct rx_core *rx, size_t len)
{
	size_t nb = atomic_load(&rx->nbufs);

	for (size_t i = 0; i < nb; i++) {
		struct buf_core *b = rx->bufs[i].buf;
		uint64_t held = atomic_load(&b->held), cap = atomic_load(&b->cap);
		char msg[512];

		if (held >= cap) {
			snprintf(msg, sizeof(msg),
				 "Rx.recv: live Fragments and their DLPack views hold %llu bytes of the buffer of binding %u, at its view_cap of %llu: release Fragments (release(), a with block, or del) and drop tensors made from them, or raise Buffer.view_cap; bytes held by views starve the NIC's queue",
				 (unsigned long long)held, rx->bufs[i].id,
				 (unsigned long long)cap);
			dmtpy_raise(-ENOBUFS, msg);
			return 0;
		}
		if (cap - held < len)
			len = (size_t)(cap - held);
	}
	return len;
}

static PyObject *new_fragments(struct recv_out *o, int n)
{
	FragmentsObject *f = PyObject_New(FragmentsObject, &Fragments_Type);

	if (!f) {
		if (o->set)
			dmtpy_set_put(o->set, false, NULL, 0);
		free(o->linear);
		return NULL;
	}
	f->set = o->set;
	f->n = n;
	f->nbytes = o->nbytes;
	f->dmabuf_bytes = o->dmabuf;
	f->linear = NULL;
	if (o->linear) {
		f->linear = PyBytes_FromStringAndSize(o->linear, (Py_ssize_t)o->nlinear);
		free(o->linear);
		if (!f->linear) {
			Py_DECREF(f);
			return NULL;
		}
	} else if (o->nlinear) {
		Py_DECREF(f);
		return PyErr_NoMemory();
	}
	return (PyObject *)f;
}

static int size_arg(PyObject *v, size_t *out, const char *name)
{
	long long x;

	if (v == Py_None)
		return 0;
	x = PyLong_AsLongLong(v);
	if (x == -1 && PyErr_Occurred())
		return -1;
	if (x <= 0 || (unsigned long long)x > INT32_MAX) {
		PyErr_Format(PyExc_ValueError, "%s must be between 1 and 2**31 - 1", name);
		return -1;
	}
	*out = (size_t)x;
	return 0;
}

static int timeout_arg(PyObject *v, int *ms)
{
	double t;

	*ms = -1;
	if (v == Py_None)
		return 0;
	t = PyFloat_AsDouble(v);
	if (t == -1.0 && PyErr_Occurred())
		return -1;
	if (t < 0) {
		PyErr_SetString(PyExc_ValueError, "timeout must be None or >= 0 seconds");
		return -1;
	}
	*ms = t > 2e6 ? 2000000000 : (int)(t * 1000.0 + 0.5);
	return 0;
}

static const char *const recv_kw[] = { "max_bytes", "max_frags", "timeout" };

/* recv()'s arguments; 0, or -1 raised.  Their conversion runs Python code
 * (__index__, __float__). */
static int recv_args(RxObject *self, PyObject *const *args, Py_ssize_t nargs,
		     PyObject *kwnames, size_t *len, size_t *max_frags,
		     int *timeout_ms)
{
	PyObject *v[3] = { Py_None, Py_None, Py_None };

	*max_frags = self->max_frags;
	*len = self->max_bytes;
	if (nargs > 3) {
		PyErr_SetString(PyExc_TypeError, "recv() takes at most 3 arguments");
		return -1;
	}
	for (Py_ssize_t i = 0; i < nargs; i++)
		v[i] = args[i];
	for (Py_ssize_t i = 0; kwnames && i < PyTuple_GET_SIZE(kwnames); i++) {
		const char *k = PyUnicode_AsUTF8(PyTuple_GET_ITEM(kwnames, i));
		int j = 0;

		while (k && j < 3 && strcmp(k, recv_kw[j]))
			j++;
		if (!k || j == 3) {
			PyErr_Format(PyExc_TypeError, "recv() got an unexpected keyword argument '%s'", k ? k : "?");
			return -1;
		}
		v[j] = args[nargs + i];
	}
	if (size_arg(v[0], len, "max_bytes") || size_arg(v[1], max_frags, "max_frags") ||
	    timeout_arg(v[2], timeout_ms))
		return -1;
	return 0;
}

/* The timeout of the socket object the receiver was made from
 * (socket.settimeout()), in ms: -1 none (blocking, non-blocking, or not a
 * socket object), -2 with an exception set. */
static int sock_timeout_ms(PyObject *sock)
{
	PyObject *t;
	double v;

	if (!sock || PyLong_Check(sock) || !PyObject_HasAttrString(sock, "gettimeout"))
		return -1;
	t = PyObject_CallMethod(sock, "gettimeout", NULL);
	if (!t)
		return -2;
	if (t == Py_None) {
		Py_DECREF(t);
		return -1;
	}
	v = PyFloat_AsDouble(t);
	Py_DECREF(t);
	if (v == -1.0 && PyErr_Occurred())
		return -2;
	if (v <= 0)
		return -1;	/* settimeout(0): non-blocking */
	return v > 2e6 ? 2000000000 : (int)(v * 1000.0) + 1;
}

/*
 * A receive as the socket would do it, with rx held by the caller: the
 * GIL released while waiting, EINTR retried after the signal handlers,
 * the timeout of recv(timeout=), else of the socket object (settimeout(),
 * which makes the descriptor non-blocking underneath), else SO_RCVTIMEO.
 * *len: at most this many bytes (cap_room when cap); 0 with an exception
 * set when none may be taken.  n, or a negative errno (not raised; -EINTR
 * raised by a signal handler: NULL from recv_raise).
 */
static int recv_wait(RxObject *self, struct rx_core *rx, size_t *len,
		     size_t max_frags, int timeout_ms, bool cap,
		     struct recv_out *o, recv_done_fn done, void *arg,
		     bool *from_sock)
{
	int n;

	*from_sock = false;
again:
	for (;;) {
		if (cap)
			*len = cap_room(rx, *len);
		if (!*len)
			return 0;
		memset(o, 0, sizeof(*o));
		atomic_fetch_add(&rx->receiving, 1);
		Py_BEGIN_ALLOW_THREADS
		dmtpy_test_point("Rx.recv");
		pthread_mutex_lock(&rx->recv_lock);
		/* a timeout given is waited for on any socket */
		n = recv_locked(rx, max_frags, *len, timeout_ms, true, o,
				done, arg);
		pthread_mutex_unlock(&rx->recv_lock);
		Py_END_ALLOW_THREADS
		atomic_fetch_sub(&rx->receiving, 1);
		if (n != -EINTR || PyErr_CheckSignals())
			break;
	}
	if (n == -EAGAIN && timeout_ms < 0) {
		/* a socket with settimeout() is non-blocking underneath: its
		 * timeout is the one to honour; a blocking descriptor's EAGAIN
		 * is SO_RCVTIMEO's expiry */
		int ms = sock_timeout_ms(self->sock);

		if (ms == -2)
			return -EINTR;	/* raised */
		if (ms >= 0) {
			timeout_ms = ms;
			*from_sock = true;
			goto again;
		}
		if (!(fcntl(rx->fd, F_GETFL) & O_NONBLOCK))
			n = -ETIMEDOUT;
	}
	return n;
}

/* Raise what recv_wait returned (n < 0, or 0 with len 0); NULL. */
static PyObject *recv_raise(int n, size_t len, bool from_sock, int timeout_ms,
			    const struct recv_out *o)
{
	if (!len || (n == -EINTR && PyErr_Occurred()))
		return NULL;
	if (n == -EAGAIN)
		return dmtpy_raise(n, "Rx.recv: the socket is non-blocking and has no data");
	if (n == -ETIMEDOUT)
		return dmtpy_raise(n, from_sock ? "Rx.recv: no data within the socket's timeout (settimeout())"
				 : timeout_ms >= 0 ? "Rx.recv: no data within the timeout"
				 : "Rx.recv: no data within the socket's SO_RCVTIMEO");
	return dmtpy_raise(n, o->msg);
}

static PyObject *Rx_recv(RxObject *self, PyObject *const *args,
			 Py_ssize_t nargs, PyObject *kwnames)
{
	/* held until the receive returns: close() from another thread, or
	 * from the arguments' conversion, takes effect then */
	struct rx_core *rx = dmt_core_get((PyObject *)self, "Rx");
	size_t max_frags, len;
	struct recv_out o;
	int timeout_ms, n;
	bool from_sock;

	if (!rx)
		return NULL;
	if (recv_args(self, args, nargs, kwnames, &len, &max_frags, &timeout_ms)) {
		rx_put(rx);
		return NULL;
	}
	n = recv_wait(self, rx, &len, max_frags, timeout_ms, true, &o,
		      make_set_cb, NULL, &from_sock);
	rx_put(rx);
	if (n < 0 || !len)
		return recv_raise(n, len, from_sock, timeout_ms, &o);
	return new_fragments(&o, n);
}

/* ---- recv_into: receive, gather and release in one call ------------------- */

struct into_arg {
	const struct dmt_dst *d;
	uint64_t offset;
	struct gpu_core *g;	/* CUDA destinations */
	void *stream;
	uint64_t nbytes;	/* out */
};

/* The scratch array's n fragments: their bytes, and whether each is in a
 * registered buffer on dst's device (checked once per run of one binding:
 * a receive's fragments are of one binding, but for a steering miss's
 * linear bytes).  0, or a negative errno with o->msg set. */
static int into_check(struct rx_core *rx, int n, const DLDevice *dev,
		      struct recv_out *o, uint64_t *nbytesp, size_t *host_bufs)
{
	const struct devmemtcp_frag *f = rx->scratch;
	size_t nb = atomic_load(&rx->nbufs), host = 0;
	uint32_t last_id = 0;
	uint64_t nbytes = 0;
	bool have = false;

	for (int i = 0; i < n; i++, f++) {
		const struct buf_core *b;
		long k;

		nbytes += f->len;
		if (f->flags & DEVMEMTCP_FRAG_LINEAR)
			continue;
		/* a GPU gather checks addresses itself */
		if (!f->addr && f->len && dev->device_type == kDLCPU)
			goto noaddr;
		if (have && f->binding_id == last_id)
			continue;
		k = buf_index(rx, nb, f->binding_id);
		if (k < 0)
			goto noaddr;
		b = rx->bufs[k].buf;
		if (b->device.device_type && (b->device.device_type != dev->device_type ||
					      b->device.device_id != dev->device_id)) {
			snprintf(o->msg, sizeof(o->msg),
				 "dst is on device (%d, %d) but the fragments on (%d, %d): give a tensor on the buffer's device",
				 dev->device_type, dev->device_id,
				 b->device.device_type, b->device.device_id);
			return -EINVAL;
		}
		if (b->host) {
			host |= 1u << k;
		} else if (dev->device_type == kDLCPU) {
			snprintf(o->msg, sizeof(o->msg),
				 "the fragments are in device memory, which the CPU cannot read: give a dst on their device");
			return -EOPNOTSUPP;
		}
		last_id = f->binding_id;
		have = true;
		continue;
noaddr:
		snprintf(o->msg, sizeof(o->msg),
			 "fragment %d (binding %u) has no address: register its binding's buffer with Rx.add_buf()",
			 i, f->binding_id);
		return -EINVAL;
	}
	*nbytesp = nbytes;
	*host_bufs = host;
	return 0;
}

static int into_done(struct rx_core *rx, int n, struct recv_out *o, void *arg)
{
	struct into_arg *a = arg;
	const struct dmt_dst *d = a->d;
	size_t host_bufs;
	int ret;

	ret = into_check(rx, n, &d->device, o, &a->nbytes, &host_bufs);
	if (!ret && a->nbytes > d->nbytes - a->offset) {
		snprintf(o->msg, sizeof(o->msg), "%d fragments of %llu bytes for %llu bytes of room",
			 n, (unsigned long long)a->nbytes,
			 (unsigned long long)(d->nbytes - a->offset));
		ret = -ENOSPC;	/* cannot happen: the receive asked for no more */
	}
	if (ret) {
		devmemtcp_rx_release(rx->rx, rx->scratch, (size_t)n);
		return ret;
	}
	if (d->device.device_type == kDLCPU) {
		size_t nb = atomic_load(&rx->nbufs);
		char *dst = (char *)(uintptr_t)(d->addr + a->offset);

		for (size_t i = 0; i < nb; i++)
			if (host_bufs & (1u << i))
				dmtpy_buf_sync(rx->bufs[i].buf, true, false);
		for (int i = 0; i < n; i++) {
			const struct devmemtcp_frag *f = &rx->scratch[i];

			memcpy(dst, f->flags & DEVMEMTCP_FRAG_LINEAR
				    ? (const char *)rx->linear + f->offset
				    : (const char *)(uintptr_t)f->addr, f->len);
			dst += f->len;
		}
		for (size_t i = 0; i < nb; i++)
			if (host_bufs & (1u << i))
				dmtpy_buf_sync(rx->bufs[i].buf, false, false);
		ret = devmemtcp_rx_release(rx->rx, rx->scratch, (size_t)n);
		if (ret < 0)
			copy_msg(o->msg, sizeof(o->msg), devmemtcp_rx_errmsg(rx->rx));
		return ret < 0 ? ret : n;
	}
	{
		struct devmemtcp_gpu_iov iov = { d->addr + a->offset, d->nbytes - a->offset };
		struct gpu_core *g = a->g;

		/* linear bytes (a steering miss) go in the same launch (the
		 * library stages them only when there are any) */
		pthread_mutex_lock(&g->lock);
		ret = devmemtcp_gpu_gather_recv(g->gpu, rx->rx, rx->scratch, (size_t)n,
						rx->linear, rx->linear_max,
						&iov, 1, a->stream);
		if (ret)
			copy_msg(o->msg, sizeof(o->msg), devmemtcp_gpu_errmsg(g->gpu));
		pthread_mutex_unlock(&g->lock);
		if (ret) {
			/* nothing deferred; the gather may be queued */
			dmtpy_cuda_sync(g->device);
			devmemtcp_rx_release(rx->rx, rx->scratch, (size_t)n);
			return ret;
		}
	}
	return n;
}

/* The destination recv_into() imported last, kept with its object. */
static void into_forget(RxObject *self)
{
	if (self->dst_obj) {
		dmtpy_dlpack_done(&self->dst);
		Py_CLEAR(self->dst_obj);
	}
	Py_CLEAR(self->stream_obj);
}

static const char *const into_kw[] = { "dst", "offset", "stream", "max_bytes",
					"max_frags", "timeout" };

static PyObject *Rx_recv_into(RxObject *self, PyObject *const *args,
			      Py_ssize_t nargs, PyObject *kwnames)
{
	PyObject *v[6] = { NULL, NULL, Py_None, Py_None, Py_None, Py_None };
	struct into_arg a = { .offset = 0 };
	struct rx_core *rx;
	size_t max_frags, len;
	struct recv_out o;
	int timeout_ms, n;
	bool from_sock;

	if (nargs > 6) {
		PyErr_SetString(PyExc_TypeError, "recv_into() takes dst and at most 5 more arguments");
		return NULL;
	}
	for (Py_ssize_t i = 0; i < nargs; i++)
		v[i] = args[i];
	for (Py_ssize_t i = 0; kwnames && i < PyTuple_GET_SIZE(kwnames); i++) {
		const char *k = PyUnicode_AsUTF8(PyTuple_GET_ITEM(kwnames, i));
		int j = 0;

		while (k && j < 6 && strcmp(k, into_kw[j]))
			j++;
		if (!k || j == 6) {
			PyErr_Format(PyExc_TypeError, "recv_into() got an unexpected keyword argument '%s'", k ? k : "?");
			return NULL;
		}
		v[j] = args[nargs + i];
	}
	if (!v[0]) {
		PyErr_SetString(PyExc_TypeError, "recv_into() missing required argument 'dst'");
		return NULL;
	}
	rx = dmt_core_get((PyObject *)self, "Rx");
	if (!rx)
		return NULL;
	max_frags = self->max_frags;
	len = self->max_bytes;
	if (v[1]) {
		a.offset = PyLong_AsUnsignedLongLong(v[1]);
		if (a.offset == (uint64_t)-1 && PyErr_Occurred())
			goto err;
	}
	if (size_arg(v[3], &len, "max_bytes") || size_arg(v[4], &max_frags, "max_frags") ||
	    timeout_arg(v[5], &timeout_ms))
		goto err;
	/* the stream and the destination: converted once, kept while the
	 * same objects come back (a stream's handle never changes; the
	 * import holds the destination's memory) */
	if (v[2] != self->stream_obj) {
		long long dl;

		if (dmtpy_stream_of(v[2], &self->stream, &dl))
			goto err;
		Py_XSETREF(self->stream_obj, Py_NewRef(v[2]));
	}
	if (v[0] != self->dst_obj) {
		struct dmt_dst d;

		if (dmtpy_dlpack_import(v[0], self->stream, v[2] != Py_None, &d))
			goto err;
		if (d.device.device_type != kDLCPU && d.device.device_type != kDLCUDA) {
			PyErr_Format(PyExc_ValueError, "dst is on DLPack device type %d: only CPU and CUDA",
				     d.device.device_type);
			dmtpy_dlpack_done(&d);
			goto err;
		}
		if (self->dst_obj)
			dmtpy_dlpack_done(&self->dst);
		self->dst = d;
		Py_XSETREF(self->dst_obj, Py_NewRef(v[0]));
	}
	a.d = &self->dst;
	if (a.offset >= self->dst.nbytes) {
		char msg[256];

		snprintf(msg, sizeof(msg),
			 "offset %llu leaves no room in dst of %llu bytes",
			 (unsigned long long)a.offset, (unsigned long long)self->dst.nbytes);
		dmtpy_raise(-ENOSPC, msg);
		goto err;
	}
	if (len > self->dst.nbytes - a.offset)
		len = (size_t)(self->dst.nbytes - a.offset);
	a.stream = self->stream;
	if (self->dst.device.device_type == kDLCUDA) {
		a.g = dmtpy_rx_gpu(rx, self->dst.device.device_id);
		if (!a.g)
			goto err;
	}
	n = recv_wait(self, rx, &len, max_frags, timeout_ms, false, &o,
		      into_done, &a, &from_sock);
	core_put(a.g ? &a.g->c : NULL);
	rx_put(rx);
	if (n < 0)
		return recv_raise(n, len, from_sock, timeout_ms, &o);
	return PyLong_FromUnsignedLongLong(n ? a.nbytes : 0);
err:
	rx_put(rx);
	return NULL;
}

static PyObject *Rx_add_buf(PyObject *self, PyObject *args)
{
	/* held through the add, without the GIL, and through reading the
	 * binding's id, which may run Python code (a Nic subclass) */
	struct rx_core *rx = dmt_core_get(self, "Rx");
	struct buf_core *buf = NULL;
	PyObject *bobj, *bufobj;
	unsigned long id;
	bool full = false;
	size_t nb;
	int ret = -1;

	if (!rx)
		return NULL;
	if (!PyArg_ParseTuple(args, "OO:add_buf", &bobj, &bufobj) ||
	    !(buf = dmtpy_buf_get(bufobj)))
		goto out;
	if (PyObject_TypeCheck(bobj, &Binding_Type) || PyObject_TypeCheck(bobj, &Nic_Type)) {
		PyObject *v = PyObject_GetAttrString(bobj,
			PyObject_TypeCheck(bobj, &Nic_Type) ? "binding_id" : "id");

		if (!v)
			goto out;
		id = PyLong_AsUnsignedLong(v);
		Py_DECREF(v);
	} else {
		id = PyLong_AsUnsignedLong(bobj);
	}
	if (id == (unsigned long)-1 && PyErr_Occurred())
		goto out;
	/* a receive may be waiting: the entry is published after the
	 * library has it, and receives read only published entries */
	Py_BEGIN_ALLOW_THREADS
	dmtpy_test_point("Rx.add_buf");
	pthread_mutex_lock(&rx->add_lock);
	nb = atomic_load(&rx->nbufs);
	full = nb == RX_MAX_BUFS;
	ret = full ? -1 : devmemtcp_rx_add_buf(rx->rx, (uint32_t)id, buf->buf);
	if (!ret) {
		rx->bufs[nb] = (struct rx_buf){ (uint32_t)id, buf };	/* our reference */
		buf = NULL;
		atomic_store(&rx->nbufs, nb + 1);
	}
	pthread_mutex_unlock(&rx->add_lock);
	Py_END_ALLOW_THREADS
	if (full)
		PyErr_Format(PyExc_ValueError, "a receiver takes at most %d buffers", RX_MAX_BUFS);
	else if (ret)
		dmtpy_raise(ret, devmemtcp_rx_errmsg(rx->rx));
out:
	core_put(buf ? &buf->c : NULL);
	rx_put(rx);
	if (ret)
		return NULL;
	Py_RETURN_NONE;
}

static PyObject *Rx_flush(PyObject *self, PyObject *unused)
{
	struct rx_core *rx = dmt_core(self, "Rx");
	char msg[512] = "";
	int ret;

	if (!rx)
		return NULL;
	ret = devmemtcp_rx_flush(rx->rx);
	if (ret < 0)
		copy_msg(msg, sizeof(msg), devmemtcp_rx_errmsg(rx->rx));
	return ret < 0 ? dmtpy_raise(ret, msg) : PyLong_FromLong(ret);
}

static const struct dmt_field rx_stats_fields[] = {
	DMT_F(struct devmemtcp_rx_stats, bytes, 'Q'),
	DMT_F(struct devmemtcp_rx_stats, dmabuf_bytes, 'Q'),
	DMT_F(struct devmemtcp_rx_stats, linear_bytes, 'Q'),
	DMT_F(struct devmemtcp_rx_stats, frags, 'Q'),
	DMT_F(struct devmemtcp_rx_stats, recv_calls, 'Q'),
	DMT_F(struct devmemtcp_rx_stats, steering_misses, 'Q'),
	DMT_F(struct devmemtcp_rx_stats, foreign_frags, 'Q'),
	DMT_F(struct devmemtcp_rx_stats, tokens_outstanding, 'Q'),
	DMT_F(struct devmemtcp_rx_stats, tokens_outstanding_max, 'Q'),
	DMT_F(struct devmemtcp_rx_stats, tokens_released, 'Q'),
	DMT_F(struct devmemtcp_rx_stats, dontneed_calls, 'Q'),
	DMT_F(struct devmemtcp_rx_stats, partial_returns, 'Q'),
	DMT_F(struct devmemtcp_rx_stats, ctrl_grows, 'Q'),
	DMT_F(struct devmemtcp_rx_stats, deferred_pending, 'Q'),
};

static PyObject *Rx_stats(PyObject *self, PyObject *unused)
{
	struct rx_core *rx = dmt_core(self, "Rx");
	struct devmemtcp_rx_stats st = { .sz = sizeof(st) };
	int ret;

	if (!rx)
		return NULL;
	ret = devmemtcp_rx_stats(rx->rx, &st);
	if (ret)
		return dmtpy_raise(ret, NULL);
	return dmtpy_fields_dict(&st, rx_stats_fields,
			       sizeof(rx_stats_fields) / sizeof(rx_stats_fields[0]));
}

static PyObject *Rx_fileno(PyObject *self, PyObject *unused)
{
	struct rx_core *rx = dmt_core(self, "Rx");

	return rx ? PyLong_FromLong(rx->fd) : NULL;
}

static int Rx_init(RxObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "ctx", "sock", "ctrl_size", "release_batch",
				  "gpu", "max_frags", "max_bytes", "zcrx", NULL };
	Py_ssize_t ctrl_size = 0, max_frags = DEFAULT_MAX_FRAGS,
		   max_bytes = DEFAULT_MAX_BYTES;
	PyObject *ctxobj, *sock, *gpuobj = Py_None, *zobj = Py_None;
	struct devmemtcp_zcrx *zh = NULL;
	struct buf_core *zbuf = NULL;
	struct core *zc = NULL;
	unsigned int batch = 0;
	struct devmemtcp_rx *h = NULL;
	struct gpu_core *g = NULL;
	struct ctx_core *ctx;
	struct rx_core *rx;
	int fd, ret;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|$nIOnnO:Rx", kwlist,
					 &ctxobj, &sock, &ctrl_size, &batch,
					 &gpuobj, &max_frags, &max_bytes, &zobj))
		return -1;
	/* held from here (sock.fileno() is Python code); the receiver keeps
	 * them, or they are dropped at err */
	ctx = dmtpy_ctx_get(ctxobj);
	if (!ctx)
		return -1;
	if (gpuobj != Py_None) {
		if (!PyObject_TypeCheck(gpuobj, &Gpu_Type) ||
		    !((GpuObject *)gpuobj)->core) {
			PyErr_SetString(PyExc_TypeError, "gpu must be an open devmemtcp.Gpu");
			goto err;
		}
		g = ((GpuObject *)gpuobj)->core;
		core_get(&g->c);
	}
	if (zobj != Py_None && !(zc = dmtpy_zcrx_get(zobj, &zh, &zbuf)))
		goto err;
	if (max_frags <= 0 || max_bytes <= 0 || max_frags > INT32_MAX ||
	    max_bytes > INT32_MAX || ctrl_size < 0) {
		PyErr_SetString(PyExc_ValueError, "max_frags and max_bytes must be between 1 and 2**31 - 1");
		goto err;
	}
	if (dmt_fresh((PyObject *)self, "Rx"))
		goto err;
	fd = dmtpy_dup_sock(sock);
	if (fd < 0)
		goto err;
	{
		DEVMEMTCP_OPTS(rx_opts, o, .ctrl_size = (size_t)ctrl_size,
			       .release_batch = batch, .zcrx = zh);

		ret = devmemtcp_rx_new(ctx->ctx, fd, &o, &h);
	}
	rx = ret ? NULL : calloc(1, sizeof(*rx));
	if (!rx) {
		devmemtcp_rx_free(h);
		dmtpy_new_failed(ret, ctx, fd);
		goto err;
	}
	core_init(&rx->c, rx_destroy);
	rx->ctx = ctx;
	rx->rx = h;
	rx->fd = fd;
	rx->gen = atomic_load(&dmtpy_fork_gen);
	atomic_init(&rx->nbufs, 0);
	atomic_init(&rx->receiving, 0);
	pthread_mutex_init(&rx->add_lock, NULL);
	pthread_mutex_init(&rx->recv_lock, NULL);
	if (zc) {
		/* its fragments (binding id 0) are in the area's buffer */
		core_get(&zbuf->c);
		rx->bufs[0] = (struct rx_buf){ 0, zbuf };
		atomic_store(&rx->nbufs, 1);
		rx->zcrx = zc;	/* our reference */
		zc = NULL;
	}
	if (g && g->device >= 0 && g->device < MAX_GPUS) {
		rx->gpus[g->device] = g;
		g = NULL;
	}
	core_put(g ? &g->c : NULL);
	self->core = rx;
	self->max_frags = (size_t)max_frags;
	self->max_bytes = (size_t)max_bytes;
	Py_XSETREF(self->sock, Py_NewRef(sock));
	return 0;
err:
	core_put(g ? &g->c : NULL);
	if (zc) {
		/* a Zcrx closed meanwhile: the last reference waits for the
		 * kernel */
		Py_BEGIN_ALLOW_THREADS
		core_put(zc);
		Py_END_ALLOW_THREADS
	}
	core_put(&ctx->c);
	return -1;
}

static PyObject *Rx_close(PyObject *self, PyObject *unused)
{
	struct rx_core *rx;

	into_forget((RxObject *)self);
	rx = ((RxObject *)self)->core;
	if (rx && rx->zcrx) {
		/* the last reference may free the ring, which waits for the
		 * kernel to release the queue: not with the GIL */
		((RxObject *)self)->core = NULL;
		Py_BEGIN_ALLOW_THREADS
		core_put(&rx->c);
		Py_END_ALLOW_THREADS
		Py_RETURN_NONE;
	}
	return dmtpy_any_close(self, unused);
}

static PyObject *Rx_exit(PyObject *self, PyObject *args)
{
	into_forget((RxObject *)self);
	return dmtpy_any_exit(self, args);
}

static void Rx_dealloc(RxObject *self)
{
	struct rx_core *rx = self->core;

	into_forget(self);
	Py_CLEAR(self->sock);
	if (rx && rx->zcrx) {
		/* collected without close(): as Rx.close() */
		self->core = NULL;
		rx_put(rx);
	}
	dmtpy_any_dealloc((PyObject *)self);
}

PyDoc_STRVAR(recv_doc,
"recv($self, /, max_bytes=None, max_frags=None, timeout=None)\n--\n\n"
"Receive the next bytes of the stream (at most max_bytes, in at most\n"
"max_frags fragments; defaults from the constructor) and return them as a\n"
"Fragments object, empty (falsy) at the end of the stream.  Blocks like the\n"
"socket does, with the GIL released; timeout (seconds; default: the\n"
"socket object's settimeout(), or SO_RCVTIMEO) raises TimeoutError (an\n"
"Error and the builtin TimeoutError, errno ETIMEDOUT) when nothing came\n"
"(on a zcrx receiver too: for the call the socket is then blocking with\n"
"that SO_RCVTIMEO, or non-blocking for a timeout of 0, and as it was\n"
"afterwards; the ring's completions for its other sockets do not extend\n"
"the wait).  The fragments' tokens hold NIC\n"
"buffers until the Fragments is released (release(), a with block, or\n"
"garbage collection) and every DLPack view of it is gone; a receive that\n"
"would let live views hold more than a buffer's view_cap takes fewer\n"
"bytes, and raises Error(ENOBUFS) when the cap is reached already.");

PyDoc_STRVAR(recv_into_doc,
"recv_into($self, /, dst, offset=0, stream=None, max_bytes=None, max_frags=None,\n"
"          timeout=None)\n--\n\n"
"Receive the next bytes of the stream straight into dst at byte offset\n"
"offset and hand the tokens back, in one call: recv(), gather_into() and\n"
"the release without a Fragments object.  Takes at most the room dst has\n"
"after offset (and max_bytes); returns the bytes received, 0 at the end\n"
"of the stream.  On a GPU one kernel packs the fragments on stream and\n"
"its last block hands the tokens back (devmemtcp_gpu_gather_release); a\n"
"host dst is filled by the CPU.  dst (anything with __dlpack__, contiguous\n"
"and writable) is imported once and kept, with the object, until another\n"
"dst is given or the receiver closes: while the same object comes back its\n"
"address is reused and the gather is ordered on stream only, so order\n"
"other streams' work on dst yourself (the first import ordered it after\n"
"the work its owner had queued).  Timeouts as recv().");

static PyMethodDef Rx_methods[] = {
	{ "close", Rx_close, METH_NOARGS, DMT_CLOSE_DOC("receiver",
		"tokens of Fragments still alive (or viewed by tensors) go back when those go; the socket's descriptor is closed then.") },
	DMT_ENTER_METHOD,
	{ "__exit__", Rx_exit, METH_VARARGS, "__exit__($self, *exc, /)\n--\n\nclose()." },
	{ "recv", (PyCFunction)(void (*)(void))Rx_recv,
	  METH_FASTCALL | METH_KEYWORDS, recv_doc },
	{ "recv_into", (PyCFunction)(void (*)(void))Rx_recv_into,
	  METH_FASTCALL | METH_KEYWORDS, recv_into_doc },
	{ "add_buf", Rx_add_buf, METH_VARARGS,
	  "add_buf($self, binding, buf, /)\n--\n\n"
	  "Fragments of binding (an id, a Binding or a Nic) map to addresses\n"
	  "through buf.  Register every buffer before receiving from it." },
	{ "flush", Rx_flush, METH_NOARGS,
	  "flush($self, /)\n--\n\n"
	  "Hand queued token releases to the kernel now (recv does it before\n"
	  "waiting); returns the number released." },
	{ "stats", Rx_stats, METH_NOARGS,
	  "stats($self, /)\n--\n\n"
	  "Receive statistics as a dict: bytes, frags, recv_calls,\n"
	  "tokens_outstanding, tokens_released, dontneed_calls, ..." },
	{ "fileno", Rx_fileno, METH_NOARGS,
	  "fileno($self, /)\n--\n\nThe receiver's own descriptor of the socket (a dup)." },
	{ NULL, NULL, 0, NULL },
};

static PyObject *Rx_get_limit(PyObject *self, void *closure)
{
	RxObject *r = (RxObject *)self;

	return PyLong_FromSize_t(closure ? r->max_bytes : r->max_frags);
}

static PyGetSetDef Rx_getset[] = {
	DMT_CLOSED_GETSET,
	{ "max_frags", Rx_get_limit, NULL, "Default fragments per recv().", NULL },
	{ "max_bytes", Rx_get_limit, NULL, "Default bytes per recv().", (void *)1 },
	{ NULL, NULL, NULL, NULL, NULL },
};

PyDoc_STRVAR(Rx_doc,
"Rx(ctx, sock, *, ctrl_size=0, release_batch=0, gpu=None, max_frags=1024,\n"
"   max_bytes=4194304, zcrx=None)\n--\n\n"
"A connected TCP socket (a socket object or a descriptor) wrapped for\n"
"devmem receive.  The receiver keeps its own duplicate of the descriptor.\n"
"Register the bound buffers with add_buf(), then call recv().  gpu: the\n"
"Gpu used by Fragments.gather_into() and by CUDA views (default: one per\n"
"device, made on first use, whose loading of the kernels may wait for the\n"
"work running on the device; one Gpu may serve every receiver).  zcrx: a\n"
"Zcrx whose queue the socket's flow is steered to: receive through io_uring\n"
"zero-copy receive instead of recvmsg(MSG_SOCK_DEVMEM), into the Zcrx's\n"
"buffer (no add_buf() needed), from the ring's thread only (see Zcrx).");

PyTypeObject Rx_Type = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "devmemtcp.Rx",
	.tp_basicsize = sizeof(RxObject),
	.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
	.tp_doc = Rx_doc,
	.tp_new = PyType_GenericNew,
	.tp_init = (initproc)Rx_init,
	.tp_dealloc = (destructor)Rx_dealloc,
	.tp_methods = Rx_methods,
	.tp_getset = Rx_getset,
};

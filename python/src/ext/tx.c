// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/* Tx: sending from a dma-buf bound for transmission. */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

struct tx_obj_core {
	struct tx_core t;
	pthread_mutex_t lock;	/* one call at a time: the handle is not shared */
};

static void tx_destroy(struct core *c)
{
	struct tx_obj_core *x = (struct tx_obj_core *)c;

	devmemtcp_tx_free(x->t.tx);
	close(x->t.fd);
	core_put(&x->t.binding->c);
	core_put(&x->t.ctx->c);
	pthread_mutex_destroy(&x->lock);
	free(x);
	dmtpy_test_freed("Tx");
}

static int Tx_init(TxObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "ctx", "sock", "binding", "max_iovs",
				  "max_call_bytes", NULL };
	unsigned int max_iovs = 0;
	unsigned long long max_call = 0;
	PyObject *ctxobj, *sock, *bobj;
	struct devmemtcp_tx *h = NULL;
	struct binding_core *b;
	struct tx_obj_core *x;
	struct ctx_core *ctx;
	int fd, ret;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "OOO|$IK:Tx", kwlist,
					 &ctxobj, &sock, &bobj, &max_iovs,
					 &max_call))
		return -1;
	/* held from here (sock.fileno() is Python code); the sender keeps
	 * them, or they are dropped at err */
	ctx = dmtpy_ctx_get(ctxobj);
	if (!ctx)
		return -1;
	if (!PyObject_TypeCheck(bobj, &Binding_Type)) {
		PyErr_SetString(PyExc_TypeError, "binding must be a devmemtcp.Binding made by Binding.tx()");
		b = NULL;
	} else {
		b = dmt_core_get(bobj, "Binding");
	}
	if (!b || dmt_fresh((PyObject *)self, "Tx"))
		goto err;
	fd = dmtpy_dup_sock(sock);
	if (fd < 0)
		goto err;
	{
		DEVMEMTCP_OPTS(tx_opts, o, .max_iovs = max_iovs,
			       .max_call_bytes = max_call);

		ret = devmemtcp_tx_new(ctx->ctx, fd, b->b, &o, &h);
	}
	x = ret ? NULL : calloc(1, sizeof(*x));
	if (!x) {
		devmemtcp_tx_free(h);
		dmtpy_new_failed(ret, ctx, fd);
		goto err;
	}
	core_init(&x->t.c, tx_destroy);
	x->t.ctx = ctx;
	x->t.binding = b;
	x->t.tx = h;
	x->t.fd = fd;
	pthread_mutex_init(&x->lock, NULL);
	self->core = &x->t;
	Py_XSETREF(self->sock, Py_NewRef(sock));
	return 0;
err:
	core_put(b ? &b->c : NULL);
	core_put(&ctx->c);
	return -1;
}

static void Tx_dealloc(TxObject *self)
{
	Py_CLEAR(self->sock);
	dmtpy_any_dealloc((PyObject *)self);
}

static struct tx_obj_core *tx_enter(PyObject *self)
{
	struct tx_obj_core *x = dmt_core(self, "Tx");

	if (x)
		core_get(&x->t.c);
	return x;
}

static PyObject *Tx_send(PyObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "pieces", "dontwait", "more", NULL };
	struct devmemtcp_tx_piece *p;
	struct tx_obj_core *x;
	int dontwait = 0, more = 0;
	PyObject *pieces, *seq;
	char msg[1024] = "";
	Py_ssize_t n;
	ssize_t ret;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "O|$pp:send", kwlist,
					 &pieces, &dontwait, &more))
		return NULL;
	seq = PySequence_Fast(pieces, "pieces must be a sequence of (offset, len)");
	if (!seq)
		return NULL;
	n = PySequence_Fast_GET_SIZE(seq);
	p = calloc((size_t)n + 1, sizeof(*p));
	for (Py_ssize_t i = 0; p && i < n; i++)
		if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i), "KK",
				      &p[i].offset, &p[i].len)) {
			free(p);
			Py_DECREF(seq);
			return NULL;
		}
	Py_DECREF(seq);
	if (!p)
		return PyErr_NoMemory();
	x = tx_enter(self);
	if (!x) {
		free(p);
		return NULL;
	}
	Py_BEGIN_ALLOW_THREADS
	pthread_mutex_lock(&x->lock);
	ret = devmemtcp_tx_send(x->t.tx, p, (size_t)n,
				(dontwait ? DEVMEMTCP_TX_DONTWAIT : 0) |
				(more ? DEVMEMTCP_TX_MORE : 0));
	if (ret < 0)
		snprintf(msg, sizeof(msg), "%s", devmemtcp_tx_errmsg(x->t.tx));
	pthread_mutex_unlock(&x->lock);
	Py_END_ALLOW_THREADS
	free(p);
	core_put(&x->t.c);
	if (ret < 0)
		return dmtpy_raise((int)ret, msg);
	return PyLong_FromSsize_t(ret);
}

static PyObject *Tx_reap(PyObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "max", NULL };
	struct devmemtcp_tx_done *d;
	struct tx_obj_core *x;
	Py_ssize_t max = 1024;
	char msg[1024] = "";
	PyObject *list;
	int n;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "|n:reap", kwlist, &max))
		return NULL;
	if (max <= 0 || max > (1 << 20)) {
		PyErr_SetString(PyExc_ValueError, "max must be between 1 and 2**20");
		return NULL;
	}
	d = malloc((size_t)max * sizeof(*d));
	if (!d)
		return PyErr_NoMemory();
	x = tx_enter(self);
	if (!x) {
		free(d);
		return NULL;
	}
	pthread_mutex_lock(&x->lock);
	n = devmemtcp_tx_reap(x->t.tx, d, (size_t)max);
	if (n < 0)
		snprintf(msg, sizeof(msg), "%s", devmemtcp_tx_errmsg(x->t.tx));
	pthread_mutex_unlock(&x->lock);
	core_put(&x->t.c);
	list = n < 0 ? dmtpy_raise(n, msg) : PyList_New(n);
	for (int i = 0; list && i < n; i++) {
		PyObject *t = PyStructSequence_New(TxDone_Type);

		if (!t) {
			Py_CLEAR(list);
			break;
		}
		PyStructSequence_SET_ITEM(t, 0, PyLong_FromUnsignedLongLong(d[i].offset));
		PyStructSequence_SET_ITEM(t, 1, PyLong_FromUnsignedLongLong(d[i].len));
		PyStructSequence_SET_ITEM(t, 2, PyLong_FromUnsignedLong(d[i].seq));
		PyStructSequence_SET_ITEM(t, 3, PyLong_FromUnsignedLong(d[i].flags));
		PyList_SET_ITEM(list, i, t);
	}
	free(d);
	return list;
}

static PyObject *Tx_wait(PyObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "timeout_ms", NULL };
	struct tx_obj_core *x;
	char msg[1024] = "";
	int timeout = -1, ret;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "|i:wait", kwlist, &timeout))
		return NULL;
	x = tx_enter(self);
	if (!x)
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	pthread_mutex_lock(&x->lock);
	ret = devmemtcp_tx_wait(x->t.tx, timeout);
	if (ret < 0)
		snprintf(msg, sizeof(msg), "%s", devmemtcp_tx_errmsg(x->t.tx));
	pthread_mutex_unlock(&x->lock);
	Py_END_ALLOW_THREADS
	core_put(&x->t.c);
	return ret < 0 ? dmtpy_raise(ret, msg) : PyLong_FromLong(ret);
}

static const struct dmt_field tx_stats_fields[] = {
	DMT_F(struct devmemtcp_tx_stats, bytes_sent, 'Q'),
	DMT_F(struct devmemtcp_tx_stats, send_calls, 'Q'),
	DMT_F(struct devmemtcp_tx_stats, sendmsg_calls, 'Q'),
	DMT_F(struct devmemtcp_tx_stats, partial_sends, 'Q'),
	DMT_F(struct devmemtcp_tx_stats, nobufs_waits, 'Q'),
	DMT_F(struct devmemtcp_tx_stats, notifications, 'Q'),
	DMT_F(struct devmemtcp_tx_stats, completions, 'Q'),
	DMT_F(struct devmemtcp_tx_stats, copied_completions, 'Q'),
	DMT_F(struct devmemtcp_tx_stats, ranges_done, 'Q'),
	DMT_F(struct devmemtcp_tx_stats, bytes_done, 'Q'),
	DMT_F(struct devmemtcp_tx_stats, sends_in_flight, 'Q'),
	DMT_F(struct devmemtcp_tx_stats, bytes_in_flight, 'Q'),
	DMT_F(struct devmemtcp_tx_stats, unknown_completions, 'Q'),
};

static PyObject *Tx_stats(PyObject *self, PyObject *unused)
{
	struct devmemtcp_tx_stats st = { .sz = sizeof(st) };
	struct tx_obj_core *x = tx_enter(self);
	int ret;

	if (!x)
		return NULL;
	pthread_mutex_lock(&x->lock);
	ret = devmemtcp_tx_stats(x->t.tx, &st);
	pthread_mutex_unlock(&x->lock);
	core_put(&x->t.c);
	if (ret)
		return dmtpy_raise(ret, NULL);
	return dmtpy_fields_dict(&st, tx_stats_fields,
			       sizeof(tx_stats_fields) / sizeof(tx_stats_fields[0]));
}

static PyObject *Tx_fileno(PyObject *self, PyObject *unused)
{
	struct tx_core *t = dmt_core(self, "Tx");

	return t ? PyLong_FromLong(t->fd) : NULL;
}

static PyMethodDef Tx_methods[] = {
	DMT_CM_METHODS(DMT_CLOSE_DOC("sender",
		"ranges still in flight are forgotten: wait() for them first.")),
	{ "send", (PyCFunction)(void (*)(void))Tx_send, METH_VARARGS | METH_KEYWORDS,
	  "send($self, pieces, /, *, dontwait=False, more=False)\n--\n\n"
	  "Send [(offset, len), ...] of the bound buffer, in order, as one byte\n"
	  "stream (zero-copy from device memory), with the GIL released.  Blocks\n"
	  "until every byte is queued unless dontwait; returns the bytes sent.  A\n"
	  "range must not be rewritten before reap()/wait() report it done." },
	{ "reap", (PyCFunction)(void (*)(void))Tx_reap, METH_VARARGS | METH_KEYWORDS,
	  "reap($self, /, max=1024)\n--\n\n"
	  "Completed ranges, without blocking: [TxDone(offset, len, seq, flags)]." },
	{ "wait", (PyCFunction)(void (*)(void))Tx_wait, METH_VARARGS | METH_KEYWORDS,
	  "wait($self, /, timeout_ms=-1)\n--\n\n"
	  "Block until a send completes; returns the number of ranges now done\n"
	  "(0: nothing in flight).  Error(ETIMEDOUT) after timeout_ms." },
	{ "stats", Tx_stats, METH_NOARGS, "stats($self, /)\n--\n\nSend statistics as a dict." },
	{ "fileno", Tx_fileno, METH_NOARGS,
	  "fileno($self, /)\n--\n\nThe sender's own descriptor of the socket (a dup)." },
	{ NULL, NULL, 0, NULL },
};

static PyGetSetDef Tx_getset[] = {
	DMT_CLOSED_GETSET,
	{ NULL, NULL, NULL, NULL, NULL },
};

PyDoc_STRVAR(Tx_doc,
"Tx(ctx, sock, binding, *, max_iovs=0, max_call_bytes=0)\n--\n\n"
"A connected TCP socket wrapped for devmem send from the buffer of a\n"
"Binding.tx() (Linux 6.16 and newer).  Turns SO_ZEROCOPY on; it must be the\n"
"only zero-copy sender on the socket.");

PyTypeObject Tx_Type = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "devmemtcp.Tx",
	.tp_basicsize = sizeof(TxObject),
	.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
	.tp_doc = Tx_doc,
	.tp_new = PyType_GenericNew,
	.tp_init = (initproc)Tx_init,
	.tp_dealloc = (destructor)Tx_dealloc,
	.tp_methods = Tx_methods,
	.tp_getset = Tx_getset,
};

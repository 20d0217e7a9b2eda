// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/* Zcrx: io_uring zero-copy receive on one RX queue (devmemtcp_zcrx_new). */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <string.h>

#include "common.h"
#include "zcrx.h"

struct zcrx_core {
	struct core c;
	struct ctx_core *ctx;
	struct buf_core *buf;
	struct devmemtcp_zcrx *z;
	uint32_t queue;
	char ifname[IF_NAMESIZE_PY];
};

typedef struct {
	PyObject_HEAD
	struct zcrx_core *core;
	PyObject *buffer;
} ZcrxObject;

static void zcrx_destroy(struct core *c)
{
	struct zcrx_core *z = (struct zcrx_core *)c;

	/* the receivers that joined it hold references: they are gone */
	devmemtcp_zcrx_free(z->z);
	core_put(&z->buf->c);
	core_put(&z->ctx->c);
	free(z);
	dmtpy_test_freed("Zcrx");
}

/* Drop a reference without the GIL: the last one waits until the kernel
 * released the queue. */
static void zcrx_put(struct zcrx_core *z)
{
	Py_BEGIN_ALLOW_THREADS
	core_put(&z->c);
	Py_END_ALLOW_THREADS
}

struct core *dmtpy_zcrx_get(PyObject *obj, struct devmemtcp_zcrx **z,
			    struct buf_core **buf)
{
	struct zcrx_core *c;

	if (!PyObject_TypeCheck(obj, &dmtpy_Zcrx_Type)) {
		PyErr_Format(PyExc_TypeError, "zcrx must be a devmemtcp.Zcrx, got %s",
			     Py_TYPE(obj)->tp_name);
		return NULL;
	}
	c = dmt_core_get(obj, "Zcrx");
	if (!c)
		return NULL;
	*z = c->z;
	*buf = c->buf;
	return &c->c;
}

/* A uint32_t argument, range-checked ("O&"). */
static int u32_arg(PyObject *o, void *out)
{
	unsigned long v = PyLong_AsUnsignedLong(o);

	if (v == (unsigned long)-1 && PyErr_Occurred()) {
		if (PyErr_ExceptionMatches(PyExc_OverflowError) ||
		    PyErr_ExceptionMatches(PyExc_ValueError)) {
			PyErr_Clear();
			PyErr_SetString(PyExc_ValueError,
					"queue, rq_entries and cq_entries are between 0 and 2**32 - 1");
		}
		return 0;
	}
	if (v > UINT32_MAX) {
		PyErr_SetString(PyExc_ValueError,
				"queue, rq_entries and cq_entries are between 0 and 2**32 - 1");
		return 0;
	}
	*(uint32_t *)out = (uint32_t)v;
	return 1;
}

static int Zcrx_init(ZcrxObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "ctx", "ifname", "queue", "buf", "dmabuf_area",
				  "rq_entries", "cq_entries", NULL };
	PyObject *ctxobj, *ifobj, *bufobj;
	uint32_t queue, rq = 0, cq = 0;
	int dmabuf_area = 0, ifindex, ret = -1;
	struct devmemtcp_zcrx *h = NULL;
	struct buf_core *buf = NULL;
	struct zcrx_core *core;
	struct ctx_core *ctx;
	char name[IF_NAMESIZE_PY] = "", msg[1024] = "";

	if (!PyArg_ParseTupleAndKeywords(args, kw, "OOO&O|$pO&O&:Zcrx", kwlist,
					 &ctxobj, &ifobj, u32_arg, &queue, &bufobj,
					 &dmabuf_area, u32_arg, &rq, u32_arg, &cq))
		return -1;
	/* held through the interface's lookup and the setup without the
	 * GIL; the Zcrx takes references of its own */
	ctx = dmtpy_ctx_get(ctxobj);
	if (!ctx || !(buf = dmtpy_buf_get(bufobj)))
		goto out;
	if (dmt_fresh((PyObject *)self, "Zcrx"))
		goto out;
	ifindex = dmtpy_ifindex_of(ifobj, name, sizeof(name));
	if (!ifindex)
		goto out;
	{
		DEVMEMTCP_OPTS(zcrx_opts, o, .rq_entries = rq, .cq_entries = cq);

		o.flags = dmabuf_area ? DEVMEMTCP_ZCRX_DMABUF_AREA : 0;
		Py_BEGIN_ALLOW_THREADS
		dmtpy_test_point("Zcrx()");
		ret = devmemtcp_zcrx_new(ctx->ctx, ifindex, queue, buf->buf, &o, &h);
		if (ret)
			snprintf(msg, sizeof(msg), "%s", devmemtcp_ctx_errmsg(ctx->ctx));
		Py_END_ALLOW_THREADS
	}
	if (ret) {
		dmtpy_raise(ret, msg);
		goto out;
	}
	core = calloc(1, sizeof(*core));
	if (!core) {
		Py_BEGIN_ALLOW_THREADS
		devmemtcp_zcrx_free(h);
		Py_END_ALLOW_THREADS
		PyErr_NoMemory();
		ret = -1;
		goto out;
	}
	core_init(&core->c, zcrx_destroy);
	core->ctx = ctx;	/* our references */
	core->buf = buf;
	ctx = NULL;
	buf = NULL;
	core->z = h;
	core->queue = queue;
	if (!name[0])
		snprintf(name, sizeof(name), "%d", ifindex);
	snprintf(core->ifname, sizeof(core->ifname), "%s", name);
	self->core = core;
	Py_XSETREF(self->buffer, Py_NewRef(bufobj));
out:
	core_put(buf ? &buf->c : NULL);
	core_put(ctx ? &ctx->c : NULL);
	return ret ? -1 : 0;
}

static PyObject *Zcrx_close(PyObject *self, PyObject *unused)
{
	struct zcrx_core *z = ((ZcrxObject *)self)->core;

	((ZcrxObject *)self)->core = NULL;
	if (z)
		zcrx_put(z);
	Py_RETURN_NONE;
}

static void Zcrx_dealloc(ZcrxObject *self)
{
	struct zcrx_core *z = self->core;

	self->core = NULL;
	Py_CLEAR(self->buffer);
	/* the last reference waits for the kernel: not with the GIL */
	if (z)
		zcrx_put(z);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Zcrx_wait(PyObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "timeout", NULL };
	PyObject *tobj = Py_None;
	struct zcrx_core *z;
	char msg[1024] = "";
	int ms = -1, ret;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "|O:wait", kwlist, &tobj))
		return NULL;
	if (tobj != Py_None) {
		double t = PyFloat_AsDouble(tobj);

		if (t == -1.0 && PyErr_Occurred())
			return NULL;
		if (!(t >= 0) || t * 1000.0 > INT_MAX) {
			PyErr_SetString(PyExc_ValueError,
					"timeout must be None or between 0 and 2**31 ms in seconds");
			return NULL;
		}
		ms = (int)ceil(t * 1000.0);
	}
	/* held through the wait without the GIL: a close() meanwhile frees
	 * the handle when the wait returns */
	z = dmt_core_get(self, "Zcrx");
	if (!z)
		return NULL;
	for (;;) {
		Py_BEGIN_ALLOW_THREADS
		dmtpy_test_point("Zcrx.wait");
		ret = devmemtcp_zcrx_wait(z->z, ms);
		if (ret < 0)
			snprintf(msg, sizeof(msg), "%s", devmemtcp_zcrx_errmsg(z->z));
		Py_END_ALLOW_THREADS
		/* a signal: its handler runs, then the wait goes on (PEP 475) */
		if (ret != -EINTR || PyErr_CheckSignals())
			break;
	}
	zcrx_put(z);
	if (ret < 0)
		return PyErr_Occurred() ? NULL : dmtpy_raise(ret, msg);
	return PyLong_FromLong(ret);
}

static const struct dmt_field zcrx_stats_fields[] = {
	DMT_F(struct devmemtcp_zcrx_stats, sockets, 'Q'),
	DMT_F(struct devmemtcp_zcrx_stats, syscalls, 'Q'),
	DMT_F(struct devmemtcp_zcrx_stats, enter_calls, 'Q'),
	DMT_F(struct devmemtcp_zcrx_stats, completions, 'Q'),
	DMT_F(struct devmemtcp_zcrx_stats, frags, 'Q'),
	DMT_F(struct devmemtcp_zcrx_stats, bytes, 'Q'),
	DMT_F(struct devmemtcp_zcrx_stats, held, 'Q'),
	DMT_F(struct devmemtcp_zcrx_stats, held_max, 'Q'),
	DMT_F(struct devmemtcp_zcrx_stats, refills, 'Q'),
	DMT_F(struct devmemtcp_zcrx_stats, refill_queued, 'Q'),
	DMT_F(struct devmemtcp_zcrx_stats, refill_waiting, 'Q'),
	DMT_F(struct devmemtcp_zcrx_stats, refill_queue_max, 'Q'),
	DMT_F(struct devmemtcp_zcrx_stats, refill_ring_max, 'Q'),
	DMT_F(struct devmemtcp_zcrx_stats, rearms, 'Q'),
	DMT_F(struct devmemtcp_zcrx_stats, steering_misses, 'Q'),
	DMT_F(struct devmemtcp_zcrx_stats, copy_count, 'q'),
	DMT_F(struct devmemtcp_zcrx_stats, copy_bytes, 'q'),
	DMT_F(struct devmemtcp_zcrx_stats, area_buffers, 'I'),
	DMT_F(struct devmemtcp_zcrx_stats, buffer_size, 'I'),
	DMT_F(struct devmemtcp_zcrx_stats, rq_entries, 'I'),
	DMT_F(struct devmemtcp_zcrx_stats, dmabuf_area, 'I'),
};

static PyObject *Zcrx_stats(PyObject *self, PyObject *unused)
{
	/* held: another thread may close it while the dict is built */
	struct zcrx_core *z = dmt_core_get(self, "Zcrx");
	struct devmemtcp_zcrx_stats st = { .sz = sizeof(st) };
	char msg[1024] = "";
	PyObject *d;
	int ret;

	if (!z)
		return NULL;
	ret = devmemtcp_zcrx_stats(z->z, &st);
	if (ret) {
		snprintf(msg, sizeof(msg), "%s", devmemtcp_zcrx_errmsg(z->z));
		zcrx_put(z);
		return dmtpy_raise(ret, msg);
	}
	d = dmtpy_fields_dict(&st, zcrx_stats_fields,
			    sizeof(zcrx_stats_fields) / sizeof(zcrx_stats_fields[0]));
	zcrx_put(z);
	return d;
}

static PyObject *Zcrx_get_queue(PyObject *self, void *closure)
{
	struct zcrx_core *z = dmt_core(self, "Zcrx");

	return z ? PyLong_FromUnsignedLong(z->queue) : NULL;
}

static PyObject *Zcrx_get_ifname(PyObject *self, void *closure)
{
	struct zcrx_core *z = dmt_core(self, "Zcrx");

	return z ? PyUnicode_FromString(z->ifname) : NULL;
}

static PyObject *Zcrx_get_buffer(PyObject *self, void *closure)
{
	PyObject *b = ((ZcrxObject *)self)->buffer;

	return Py_NewRef(b ? b : Py_None);
}

static PyMethodDef Zcrx_methods[] = {
	{ "close", Zcrx_close, METH_NOARGS,
	  "close($self, /)\n--\n\n"
	  "Close the ring and give the queue back; returns once the kernel\n"
	  "released it (without the GIL).  While a receiver made with\n"
	  "Rx(..., zcrx=self) or a call on another thread still uses the\n"
	  "handle, that happens when the last of them is gone.  Further use\n"
	  "raises ValueError.  Safe to call twice." },
	DMT_ENTER_METHOD,
	{ "__exit__", dmtpy_any_exit, METH_VARARGS, "__exit__($self, *exc, /)\n--\n\nclose()." },
	{ "wait", (PyCFunction)(void (*)(void))Zcrx_wait, METH_VARARGS | METH_KEYWORDS,
	  "wait($self, /, timeout=None)\n--\n\n"
	  "Drive the ring until one of its sockets has fragments or its end to\n"
	  "receive, or timeout seconds passed (None: no limit), with the GIL\n"
	  "released; returns the number of such sockets, 0 on timeout.  Only\n"
	  "the ring's thread may wait: see the class documentation." },
	{ "stats", Zcrx_stats, METH_NOARGS,
	  "stats($self, /)\n--\n\n"
	  "The ring's counters as a dict (devmemtcp_zcrx_stats(3)): frags,\n"
	  "bytes, held, refills, enter_calls, copy_count (-1: not reported),\n"
	  "area_buffers, buffer_size, dmabuf_area, ..." },
	{ NULL, NULL, 0, NULL },
};

static PyGetSetDef Zcrx_getset[] = {
	DMT_CLOSED_GETSET,
	{ "queue", Zcrx_get_queue, NULL, "The RX queue id.", NULL },
	{ "ifname", Zcrx_get_ifname, NULL, "The interface's name.", NULL },
	{ "buffer", Zcrx_get_buffer, NULL, "The Buffer of the area.", NULL },
	{ NULL, NULL, NULL, NULL, NULL },
};

PyDoc_STRVAR(Zcrx_doc,
"Zcrx(ctx, ifname, queue, buf, *, dmabuf_area=False, rq_entries=0,\n"
"     cq_entries=0)\n--\n\n"
"io_uring zero-copy receive (Linux 6.15; dma-buf areas 6.16): register RX\n"
"queue `queue` of ifname (a name or index, in this thread's network\n"
"namespace) with an area over buf.  The kernel then receives the payload\n"
"of the flows steered to the queue into buf, and a receiver made with\n"
"Rx(ctx, sock, zcrx=z) returns it as fragments, released as those of\n"
"devmem.  Set the NIC up first with Nic(ctx, ifname, queues=[queue],\n"
"flows=[...]) without buf.  Host memory (udmabuf) becomes a user-memory\n"
"area, into which the kernel copies what the NIC did not place (a\n"
"steering miss), or with dmabuf_area=True a dma-buf area, where such bytes\n"
"fail the receive (Error EREMOTEIO); device memory is always a dma-buf\n"
"area.  rq_entries and cq_entries size the refill ring and the completion\n"
"queue (powers of two; 0: the library's default).  Needs CAP_NET_ADMIN;\n"
"Error(EOPNOTSUPP) before Linux 6.15.\n\n"
"One thread drives the ring: the first that receives on one of its\n"
"sockets or calls wait(); receives and waits from other threads raise\n"
"Error(EBUSY).  Releases (Fragments.release(), garbage collection) may\n"
"come from any thread.  A receiver's recv(timeout=) and its socket's\n"
"settimeout() or SO_RCVTIMEO raise TimeoutError as on devmem.\n"
"Close the receivers first; close() otherwise\n"
"waits for the last of them.");

PyTypeObject dmtpy_Zcrx_Type = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "devmemtcp.Zcrx",
	.tp_basicsize = sizeof(ZcrxObject),
	.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
	.tp_doc = Zcrx_doc,
	.tp_new = PyType_GenericNew,
	.tp_init = (initproc)Zcrx_init,
	.tp_dealloc = (destructor)Zcrx_dealloc,
	.tp_methods = Zcrx_methods,
	.tp_getset = Zcrx_getset,
};

// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/* Context, Buffer, Binding and Gpu: the setup handles. */
#include <errno.h>
#include <net/if.h>
#include <string.h>
#include <sys/ioctl.h>
#include <linux/dma-buf.h>

#include "common.h"

/* ---- shared by every handle type ----------------------------------------- */

PyObject *dmtpy_any_close(PyObject *self, PyObject *unused)
{
	struct core *c = ((AnyObject *)self)->core;

	((AnyObject *)self)->core = NULL;
	core_put(c);
	Py_RETURN_NONE;
}

PyObject *dmtpy_any_enter(PyObject *self, PyObject *unused)
{
	return Py_NewRef(self);
}

PyObject *dmtpy_any_exit(PyObject *self, PyObject *args)
{
	PyObject *r = PyObject_CallMethod(self, "close", NULL);

	if (!r)
		return NULL;
	Py_DECREF(r);
	Py_RETURN_FALSE;
}

PyObject *dmtpy_any_closed(PyObject *self, void *closure)
{
	return PyBool_FromLong(((AnyObject *)self)->core == NULL);
}

void dmtpy_any_dealloc(PyObject *self)
{
	core_put(((AnyObject *)self)->core);
	Py_TYPE(self)->tp_free(self);
}

PyObject *dmtpy_fields_dict(const void *s, const struct dmt_field *f, size_t n)
{
	PyObject *d = PyDict_New(), *v;

	for (size_t i = 0; d && i < n; i++) {
		const char *p = (const char *)s + f[i].off;

		switch (f[i].kind) {
		case 'Q': v = PyLong_FromUnsignedLongLong(*(const uint64_t *)p); break;
		case 'I': v = PyLong_FromUnsignedLong(*(const uint32_t *)p); break;
		case 'i': v = PyLong_FromLong(*(const int *)p); break;
		case 'q': v = PyLong_FromLongLong(*(const int64_t *)p); break;
		case 'b': v = PyBool_FromLong(*(const bool *)p); break;
		default: v = PyUnicode_DecodeUTF8(p, (Py_ssize_t)strlen(p), "replace"); break;
		}
		if (!v || PyDict_SetItemString(d, f[i].name, v)) {
			Py_XDECREF(v);
			Py_CLEAR(d);
			break;
		}
		Py_DECREF(v);
	}
	return d;
}

/* ---- Context -------------------------------------------------------------- */

void dmtpy_ctx_destroy(struct core *c)
{
	struct ctx_core *x = (struct ctx_core *)c;

	devmemtcp_ctx_free(x->ctx);
	free(x);
	dmtpy_test_freed("Context");
}

/* The library's log_level for the argument: None leaves it to the library
 * ($DEVMEMTCP_LOG, else silent); 'none', LOG_NONE and LOG_OFF print
 * nothing whatever the environment says. */
static int log_level_of(PyObject *obj, int *level)
{
	static const char *names[] = { "none", "err", "warn", "info", "debug" };
	static const int levels[] = { DEVMEMTCP_LOG_OFF, DEVMEMTCP_LOG_ERR,
				      DEVMEMTCP_LOG_WARN, DEVMEMTCP_LOG_INFO,
				      DEVMEMTCP_LOG_DEBUG };
	bool ok = false;

	*level = 0;
	if (obj == Py_None)
		return 0;
	if (PyUnicode_Check(obj)) {
		const char *s = PyUnicode_AsUTF8(obj);

		for (size_t i = 0; s && i < 5; i++)
			if (!strcmp(s, names[i])) {
				*level = levels[i];
				ok = true;
			}
	} else if (PyLong_Check(obj)) {
		long v = PyLong_AsLong(obj);

		ok = v >= DEVMEMTCP_LOG_OFF && v <= DEVMEMTCP_LOG_DEBUG;
		*level = v == DEVMEMTCP_LOG_NONE ? DEVMEMTCP_LOG_OFF : (int)v;
	}
	if (!ok) {
		if (!PyErr_Occurred())
			PyErr_SetString(PyExc_ValueError,
					"log_level is one of 'none', 'err', 'warn', 'info', 'debug' or a LOG_* number");
		return -1;
	}
	return 0;
}

static int Context_init(ContextObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "log_level", NULL };
	PyObject *lvl = Py_None;
	struct devmemtcp_ctx *ctx;
	struct ctx_core *core;
	int level, ret;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "|O:Context", kwlist, &lvl) ||
	    log_level_of(lvl, &level))
		return -1;
	if (dmt_fresh((PyObject *)self, "Context"))
		return -1;
	{
		DEVMEMTCP_OPTS(ctx_opts, o, .log_level = level);

		ret = devmemtcp_ctx_new(&o, &ctx);
	}
	if (ret) {
		/* the calling thread's message; an allocation failure records
		 * none, and the thread's may then be an older one */
		dmtpy_raise(ret, ret == -ENOMEM ? NULL : devmemtcp_ctx_errmsg(NULL));
		return -1;
	}
	core = calloc(1, sizeof(*core));
	if (!core) {
		devmemtcp_ctx_free(ctx);
		PyErr_NoMemory();
		return -1;
	}
	core_init(&core->c, dmtpy_ctx_destroy);
	core->ctx = ctx;
	self->core = core;
	return 0;
}

static PyObject *Context_queues(PyObject *self, PyObject *args)
{
	struct ctx_core *c = dmt_core_get(self, "Context");
	struct devmemtcp_queue q[256];
	PyObject *ifobj, *list;
	char name[IF_NAMESIZE];
	int ifindex = 0, n = 0;

	if (!c)
		return NULL;
	if (PyArg_ParseTuple(args, "O:queues", &ifobj))
		ifindex = dmtpy_ifindex_of(ifobj, name, sizeof(name));
	if (ifindex) {
		Py_BEGIN_ALLOW_THREADS
		dmtpy_test_point("Context.queues");
		n = devmemtcp_queue_list(c->ctx, ifindex, q, 256);
		Py_END_ALLOW_THREADS
		if (n < 0)
			dmtpy_raise_ctx(n, c);
	}
	core_put(&c->c);
	if (!ifindex || n < 0)
		return NULL;
	if (n > 256)
		n = 256;
	list = PyList_New(n);
	for (int i = 0; list && i < n; i++) {
		PyObject *t = PyStructSequence_New(Queue_Type);

		if (!t) {
			Py_CLEAR(list);
			break;
		}
		PyStructSequence_SET_ITEM(t, 0, PyLong_FromUnsignedLong(q[i].id));
		PyStructSequence_SET_ITEM(t, 1, PyLong_FromUnsignedLong(q[i].type));
		PyStructSequence_SET_ITEM(t, 2, PyLong_FromUnsignedLong(q[i].ifindex));
		PyStructSequence_SET_ITEM(t, 3, PyLong_FromUnsignedLong(q[i].napi_id));
		PyStructSequence_SET_ITEM(t, 4, PyLong_FromUnsignedLong(q[i].dmabuf_id));
		PyStructSequence_SET_ITEM(t, 5, PyBool_FromLong(q[i].io_uring));
		PyStructSequence_SET_ITEM(t, 6, PyBool_FromLong(q[i].xsk));
		PyList_SET_ITEM(list, i, t);
	}
	return list;
}

static const struct dmt_field qstats_fields[] = {
	DMT_F(struct devmemtcp_qstats, rx_packets, 'Q'),
	DMT_F(struct devmemtcp_qstats, rx_bytes, 'Q'),
	DMT_F(struct devmemtcp_qstats, rx_alloc_fail, 'Q'),
	DMT_F(struct devmemtcp_qstats, rx_hw_drops, 'Q'),
	DMT_F(struct devmemtcp_qstats, tx_packets, 'Q'),
	DMT_F(struct devmemtcp_qstats, tx_bytes, 'Q'),
};

static PyObject *Context_qstats(PyObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "ifname", "type", "queue", NULL };
	struct ctx_core *c = dmt_core_get(self, "Context");
	struct devmemtcp_qstats st = { .sz = sizeof(st) };
	PyObject *ifobj, *typeobj = NULL;
	char name[IF_NAMESIZE];
	int ifindex, type = DEVMEMTCP_QUEUE_RX, queue = -1, ret = -1;

	if (!c)
		return NULL;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "O|Oi:qstats", kwlist,
					 &ifobj, &typeobj, &queue))
		goto out;
	if (typeobj && PyUnicode_Check(typeobj)) {
		const char *s = PyUnicode_AsUTF8(typeobj);

		if (s && !strcmp(s, "tx"))
			type = DEVMEMTCP_QUEUE_TX;
		else if (!s || strcmp(s, "rx")) {
			PyErr_SetString(PyExc_ValueError, "type is 'rx' or 'tx'");
			goto out;
		}
	} else if (typeobj) {
		type = (int)PyLong_AsLong(typeobj);
		if (type == -1 && PyErr_Occurred())
			goto out;
	}
	ifindex = dmtpy_ifindex_of(ifobj, name, sizeof(name));
	if (!ifindex)
		goto out;
	Py_BEGIN_ALLOW_THREADS
	dmtpy_test_point("Context.qstats");
	ret = devmemtcp_qstats_get(c->ctx, ifindex, type, queue, &st);
	Py_END_ALLOW_THREADS
	if (ret < 0)
		dmtpy_raise_ctx(ret, c);
out:
	core_put(&c->c);
	if (ret < 0)
		return NULL;
	return dmtpy_fields_dict(&st, qstats_fields,
			       sizeof(qstats_fields) / sizeof(qstats_fields[0]));
}

static PyMethodDef Context_methods[] = {
	DMT_CM_METHODS(DMT_CLOSE_DOC("context",
		"objects made with it keep what they need and are not affected.")),
	{ "queues", Context_queues, METH_VARARGS,
	  "queues($self, ifname, /)\n--\n\n"
	  "The RX and TX queues of an interface (name or index) as a list of\n"
	  "Queue(id, type, ifindex, napi_id, dmabuf_id, io_uring, xsk); dmabuf_id\n"
	  "is the binding bound to the queue, 0 when none." },
	{ "qstats", (PyCFunction)(void (*)(void))Context_qstats,
	  METH_VARARGS | METH_KEYWORDS,
	  "qstats($self, ifname, type='rx', queue=-1)\n--\n\n"
	  "Queue statistics (rx_packets, rx_bytes, rx_alloc_fail, ...) of one queue,\n"
	  "or of the whole device when queue < 0, as a dict.  Counters the driver\n"
	  "does not report read 2**64 - 1." },
	{ NULL, NULL, 0, NULL },
};

static PyGetSetDef Context_getset[] = {
	DMT_CLOSED_GETSET,
	{ NULL, NULL, NULL, NULL, NULL },
};

PyDoc_STRVAR(Context_doc,
"Context(log_level=None)\n--\n\n"
"The library context.  Every other object is made with one.  Errors raise\n"
"devmemtcp.Error with the library's message, and the library prints\n"
"nothing unless asked: log_level ('err', 'warn', 'info', 'debug', or\n"
"$DEVMEMTCP_LOG when None and set) sends its messages to stderr; 'none'\n"
"(LOG_NONE, LOG_OFF) prints nothing whatever $DEVMEMTCP_LOG says.  A\n"
"context manager: close() on exit.");

PyTypeObject Context_Type = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "devmemtcp.Context",
	.tp_basicsize = sizeof(ContextObject),
	.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
	.tp_doc = Context_doc,
	.tp_new = PyType_GenericNew,
	.tp_init = (initproc)Context_init,
	.tp_dealloc = dmtpy_any_dealloc,
	.tp_methods = Context_methods,
	.tp_getset = Context_getset,
};

/* ---- Buffer --------------------------------------------------------------- */

void dmtpy_buf_destroy(struct core *c)
{
	struct buf_core *b = (struct buf_core *)c;

	devmemtcp_buf_free(b->buf);
	core_put(&b->ctx->c);
	free(b);
	dmtpy_test_freed("Buffer");
}

int dmtpy_buf_sync(struct buf_core *buf, bool start, bool write)
{
	struct dma_buf_sync s = {
		.flags = (start ? DMA_BUF_SYNC_START : DMA_BUF_SYNC_END) |
			 (write ? DMA_BUF_SYNC_RW : DMA_BUF_SYNC_READ),
	};
	int fd = devmemtcp_buf_fd(buf->buf);

	if (fd < 0)
		return fd;
	return ioctl(fd, DMA_BUF_IOCTL_SYNC, &s) ? -errno : 0;
}

static int provider_of(PyObject *obj, int *provider)
{
	static const char *names[] = { "udmabuf", "import", "cuda", "drm" };

	if (PyUnicode_Check(obj)) {
		const char *s = PyUnicode_AsUTF8(obj);

		for (int i = 0; s && i < 4; i++)
			if (!strcmp(s, names[i])) {
				*provider = i + 1;
				return 0;
			}
	} else if (PyLong_Check(obj)) {
		*provider = (int)PyLong_AsLong(obj);
		if (*provider >= 1 && *provider <= 4)
			return 0;
	}
	if (!PyErr_Occurred())
		PyErr_SetString(PyExc_ValueError,
				"provider is 'udmabuf', 'import', 'cuda', 'drm' or a PROVIDER_* number");
	return -1;
}

static int segments_of(PyObject *obj, struct devmemtcp_segment **segs,
		       size_t *n)
{
	PyObject *seq = PySequence_Fast(obj, "segments must be a sequence of (offset, len, addr)");
	Py_ssize_t cnt;

	*segs = NULL;
	*n = 0;
	if (!seq)
		return -1;
	cnt = PySequence_Fast_GET_SIZE(seq);
	*segs = calloc((size_t)cnt + 1, sizeof(**segs));
	for (Py_ssize_t i = 0; *segs && i < cnt; i++) {
		struct devmemtcp_segment *s = &(*segs)[i];

		if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i), "KKK",
				      &s->offset, &s->len, &s->addr)) {
			Py_DECREF(seq);
			free(*segs);
			*segs = NULL;
			return -1;
		}
	}
	Py_DECREF(seq);
	if (!*segs) {
		PyErr_NoMemory();
		return -1;
	}
	*n = (size_t)cnt;
	return 0;
}

static int dl_device_of(PyObject *obj, DLDevice *dev)
{
	dev->device_type = 0;
	dev->device_id = 0;
	if (obj == Py_None)
		return 0;
	if (!PyArg_ParseTuple(obj, "ii", &dev->device_type, &dev->device_id)) {
		PyErr_Clear();
		PyErr_SetString(PyExc_TypeError,
				"dl_device is a (device_type, device_id) tuple, e.g. (devmemtcp.kDLCUDA, 0)");
		return -1;
	}
	return 0;
}

struct buf_args {
	unsigned long long size, ptr, chunk, view_cap;
	int provider, device, fd, hugetlb, keep_fd;
	const char *drm_path;
	PyObject *segments, *dl_device;
};

static int Buffer_init(BufferObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "ctx", "size", "provider", "hugetlb",
				  "device", "ptr", "chunk_size", "fd",
				  "segments", "keep_fd", "drm_path",
				  "dl_device", "view_cap", NULL };
	struct buf_args a = { .fd = -1, .view_cap = ~0ull };
	PyObject *ctxobj, *provobj = NULL;
	struct devmemtcp_segment *segs = NULL;
	struct devmemtcp_buf *buf = NULL;
	struct buf_core *core;
	struct ctx_core *ctx;
	size_t nsegs = 0;
	DLDevice dev;
	int ret;

	a.segments = a.dl_device = Py_None;
	a.provider = DEVMEMTCP_PROVIDER_UDMABUF;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "O|KO$piKKiOpzOK:Buffer",
					 kwlist, &ctxobj, &a.size, &provobj,
					 &a.hugetlb, &a.device, &a.ptr,
					 &a.chunk, &a.fd, &a.segments,
					 &a.keep_fd, &a.drm_path,
					 &a.dl_device, &a.view_cap))
		return -1;
	/* held from here: the other arguments' conversion is Python code, and
	 * the buffer is made without the GIL; the buffer keeps this reference */
	ctx = dmtpy_ctx_get(ctxobj);
	if (!ctx)
		return -1;
	if ((provobj && provider_of(provobj, &a.provider)) ||
	    dl_device_of(a.dl_device, &dev) ||
	    dmt_fresh((PyObject *)self, "Buffer") ||
	    (a.segments != Py_None && segments_of(a.segments, &segs, &nsegs)))
		goto err;
	{
		DEVMEMTCP_OPTS(buf_opts, o, .provider = (uint32_t)a.provider,
			       .size = a.size, .fd = a.fd, .segments = segs,
			       .nsegments = nsegs, .cuda_device = a.device,
			       .cuda_ptr = a.ptr, .cuda_chunk_size = a.chunk,
			       .drm_path = a.drm_path);

		o.flags = (a.hugetlb ? DEVMEMTCP_BUF_HUGETLB : 0) |
			  (a.keep_fd ? DEVMEMTCP_BUF_KEEP_FD : 0);
		Py_BEGIN_ALLOW_THREADS
		dmtpy_test_point("Buffer()");
		ret = devmemtcp_buf_new(ctx->ctx, &o, &buf);
		Py_END_ALLOW_THREADS
	}
	free(segs);
	if (ret) {
		dmtpy_raise_ctx(ret, ctx);
		goto err;
	}
	core = calloc(1, sizeof(*core));
	if (!core) {
		devmemtcp_buf_free(buf);
		PyErr_NoMemory();
		goto err;
	}
	core_init(&core->c, dmtpy_buf_destroy);
	core->ctx = ctx;
	core->buf = buf;
	core->provider = a.provider;
	if (a.provider == DEVMEMTCP_PROVIDER_UDMABUF)
		dev = (DLDevice){ kDLCPU, 0 };
	else if (a.provider == DEVMEMTCP_PROVIDER_CUDA)
		dev = (DLDevice){ kDLCUDA, a.device };
	core->device = dev;
	core->host = dev.device_type == kDLCPU;
	atomic_init(&core->held, 0);
	atomic_init(&core->cap, a.view_cap != ~0ull ? a.view_cap
						   : devmemtcp_buf_size(buf) / 2);
	self->core = core;
	Py_XSETREF(self->ctx, Py_NewRef(ctxobj));
	return 0;
err:
	core_put(&ctx->c);
	return -1;
}

static void Buffer_dealloc(BufferObject *self)
{
	Py_CLEAR(self->ctx);
	dmtpy_any_dealloc((PyObject *)self);
}

/* Read or write len bytes at off of b without the GIL.  0, or -1 raised. */
static int buffer_io(struct buf_core *b, const char *point, uint64_t off,
		     void *p, size_t len, bool write)
{
	int ret;

	Py_BEGIN_ALLOW_THREADS
	dmtpy_test_point(point);
	ret = write ? devmemtcp_buf_write(b->buf, off, p, len)
		    : devmemtcp_buf_read(b->buf, off, p, len);
	Py_END_ALLOW_THREADS
	if (ret)
		dmtpy_raise(ret, devmemtcp_buf_errmsg(b->buf));
	return ret ? -1 : 0;
}

static PyObject *Buffer_read(PyObject *self, PyObject *args)
{
	struct buf_core *b = dmt_core_get(self, "Buffer");
	unsigned long long off;
	PyObject *out = NULL;
	Py_ssize_t len;

	if (!b)
		return NULL;
	if (!PyArg_ParseTuple(args, "Kn:read", &off, &len))
		goto out;
	if (len < 0) {
		PyErr_SetString(PyExc_ValueError, "negative length");
		goto out;
	}
	out = PyBytes_FromStringAndSize(NULL, len);
	if (out && buffer_io(b, "Buffer.read", off, PyBytes_AS_STRING(out),
			     (size_t)len, false))
		Py_CLEAR(out);
out:
	core_put(&b->c);
	return out;
}

static PyObject *Buffer_readinto(PyObject *self, PyObject *args)
{
	struct buf_core *b = dmt_core_get(self, "Buffer");
	unsigned long long off;
	Py_buffer view;
	int ret = -1;

	if (!b)
		return NULL;
	if (PyArg_ParseTuple(args, "Kw*:readinto", &off, &view)) {
		ret = buffer_io(b, "Buffer.readinto", off, view.buf, (size_t)view.len, false);
		PyBuffer_Release(&view);
	}
	core_put(&b->c);
	return ret ? NULL : PyLong_FromSsize_t(view.len);
}

static PyObject *Buffer_write(PyObject *self, PyObject *args)
{
	struct buf_core *b = dmt_core_get(self, "Buffer");
	unsigned long long off;
	Py_buffer view;
	int ret = -1;

	if (!b)
		return NULL;
	if (PyArg_ParseTuple(args, "Ky*:write", &off, &view)) {
		ret = buffer_io(b, "Buffer.write", off, view.buf, (size_t)view.len, true);
		PyBuffer_Release(&view);
	}
	core_put(&b->c);
	return ret ? NULL : PyLong_FromSsize_t(view.len);
}

static PyObject *Buffer_addr(PyObject *self, PyObject *args)
{
	struct buf_core *b = dmt_core_get(self, "Buffer");
	unsigned long long off;
	uint64_t addr;
	int ret;

	if (!b)
		return NULL;
	if (!PyArg_ParseTuple(args, "K:addr", &off)) {
		core_put(&b->c);
		return NULL;
	}
	ret = devmemtcp_buf_addr(b->buf, off, &addr);
	if (ret == -ERANGE)
		dmtpy_raise(ret, "Buffer.addr: the offset is in no segment of the buffer");
	else if (ret)
		dmtpy_raise(ret, devmemtcp_buf_errmsg(b->buf));
	core_put(&b->c);
	return ret ? NULL : PyLong_FromUnsignedLongLong(addr);
}

/* The whole buffer as one device range, when its segments are contiguous. */
static int buffer_range(struct buf_core *b, uint64_t *addr, uint64_t *len)
{
	const struct devmemtcp_segment *s;
	size_t n = devmemtcp_buf_segments(b->buf, &s);

	if (!n || s[0].offset)
		return 0;
	for (size_t i = 1; i < n; i++)
		if (s[i].offset != s[i - 1].offset + s[i - 1].len ||
		    s[i].addr != s[i - 1].addr + s[i - 1].len)
			return 0;
	*addr = s[0].addr;
	*len = s[n - 1].offset + s[n - 1].len;
	return 1;
}

static PyObject *Buffer_dlpack(PyObject *self, PyObject *args, PyObject *kw)
{
	struct buf_core *b;
	uint64_t addr, len;
	PyObject *r = NULL;

	if (!(b = dmt_core_get(self, "Buffer")))	/* kw's values are Python code */
		return NULL;
	if (PyTuple_GET_SIZE(args))
		PyErr_SetString(PyExc_TypeError, "__dlpack__ takes keyword arguments only");
	else if (!b->device.device_type)
		PyErr_SetString(PyExc_BufferError,
				"the buffer's device is unknown: give dl_device= when importing it");
	else if (!buffer_range(b, &addr, &len))
		PyErr_SetString(PyExc_BufferError,
				"the buffer is not one contiguous device range");
	else
		r = dmtpy_dlpack_export(kw, NULL, b, NULL, addr, len);
	core_put(&b->c);
	return r;
}

static PyObject *Buffer_dlpack_device(PyObject *self, PyObject *unused)
{
	struct buf_core *b = dmt_core(self, "Buffer");

	if (!b)
		return NULL;
	return Py_BuildValue("(ii)", b->device.device_type, b->device.device_id);
}

static PyObject *Buffer_get_segments(PyObject *self, void *closure)
{
	/* held: an allocation below may run the garbage collector's callbacks */
	struct buf_core *b = dmt_core_get(self, "Buffer");
	const struct devmemtcp_segment *s;
	PyObject *list;
	size_t n;

	if (!b)
		return NULL;
	n = devmemtcp_buf_segments(b->buf, &s);
	list = PyList_New((Py_ssize_t)n);
	for (size_t i = 0; list && i < n; i++) {
		PyObject *t = Py_BuildValue("(KKK)", s[i].offset, s[i].len, s[i].addr);

		if (!t) {
			Py_CLEAR(list);
			break;
		}
		PyList_SET_ITEM(list, (Py_ssize_t)i, t);
	}
	core_put(&b->c);
	return list;
}

static PyObject *Buffer_get_int(PyObject *self, void *closure)
{
	struct buf_core *b = dmt_core(self, "Buffer");
	const char *what = closure;

	if (!b)
		return NULL;
	if (!strcmp(what, "fd"))
		return PyLong_FromLong(devmemtcp_buf_fd(b->buf));
	if (!strcmp(what, "size"))
		return PyLong_FromUnsignedLongLong(devmemtcp_buf_size(b->buf));
	if (!strcmp(what, "provider"))
		return PyLong_FromLong(devmemtcp_buf_provider(b->buf));
	if (!strcmp(what, "held"))
		return PyLong_FromUnsignedLongLong(atomic_load(&b->held));
	if (!strcmp(what, "view_cap"))
		return PyLong_FromUnsignedLongLong(atomic_load(&b->cap));
	return Py_BuildValue("(ii)", b->device.device_type, b->device.device_id);
}

static int Buffer_set_view_cap(PyObject *self, PyObject *v, void *closure)
{
	struct buf_core *b = dmt_core_get(self, "Buffer");
	unsigned long long cap = (unsigned long long)-1;
	bool bad = true;

	if (!b)
		return -1;
	if (!v)
		PyErr_SetString(PyExc_AttributeError, "view_cap cannot be deleted");
	else
		cap = PyLong_AsUnsignedLongLong(v);
	bad = !v || (cap == (unsigned long long)-1 && PyErr_Occurred());
	if (!bad)
		atomic_store(&b->cap, cap);
	core_put(&b->c);
	return bad ? -1 : 0;
}

static PyMethodDef Buffer_methods[] = {
	DMT_CM_METHODS(DMT_CLOSE_DOC("buffer",
		"its memory is freed once nothing uses it any more (a binding, a receiver, a live view)."))
	,
	{ "read", Buffer_read, METH_VARARGS,
	  "read($self, offset, size, /)\n--\n\n"
	  "size bytes at dma-buf offset, as bytes (host buffers only: a CUDA\n"
	  "buffer raises Error(EOPNOTSUPP)).  Bracketed with DMA_BUF_IOCTL_SYNC." },
	{ "readinto", Buffer_readinto, METH_VARARGS,
	  "readinto($self, offset, buffer, /)\n--\n\n"
	  "Fill a writable buffer from dma-buf offset; returns its length." },
	{ "write", Buffer_write, METH_VARARGS,
	  "write($self, offset, data, /)\n--\n\n"
	  "Write bytes-like data at dma-buf offset (host buffers only)." },
	{ "addr", Buffer_addr, METH_VARARGS,
	  "addr($self, offset, /)\n--\n\n"
	  "Device address (CPU address for host buffers) of dma-buf offset." },
	{ "__dlpack__", (PyCFunction)(void (*)(void))Buffer_dlpack,
	  METH_VARARGS | METH_KEYWORDS,
	  "__dlpack__($self, /, *, stream=None, max_version=None, dl_device=None, copy=None)\n--\n\n"
	  "The whole buffer as a writable 1-D uint8 tensor (DLPack), when it is one\n"
	  "contiguous range: fill a send buffer with PyTorch, or inspect received\n"
	  "bytes.  The buffer stays alive while the tensor does." },
	{ "__dlpack_device__", Buffer_dlpack_device, METH_NOARGS,
	  "__dlpack_device__($self, /)\n--\n\n(device_type, device_id) of the buffer." },
	{ NULL, NULL, 0, NULL },
};

static PyGetSetDef Buffer_getset[] = {
	DMT_CLOSED_GETSET,
	{ "fd", Buffer_get_int, NULL, "The dma-buf file descriptor (owned by the buffer).", "fd" },
	{ "size", Buffer_get_int, NULL, "Size in bytes (rounded up to the page size).", "size" },
	{ "provider", Buffer_get_int, NULL, "PROVIDER_UDMABUF, _IMPORT, _CUDA or _DRM.", "provider" },
	{ "device", Buffer_get_int, NULL, "(device_type, device_id) in DLPack terms; (0, 0) if unknown.", "device" },
	{ "held", Buffer_get_int, NULL, "Bytes of this buffer held by live Fragments and their views.", "held" },
	{ "view_cap", Buffer_get_int, Buffer_set_view_cap,
	  "Most bytes live views may hold (default: half the buffer).  A receive\n"
	  "that would go beyond raises Error(ENOBUFS): held bytes starve the NIC.", "view_cap" },
	{ "segments", Buffer_get_segments, NULL, "The segment table: [(offset, len, addr), ...].", NULL },
	{ NULL, NULL, NULL, NULL, NULL },
};

PyDoc_STRVAR(Buffer_doc,
"Buffer(ctx, size=0, provider='udmabuf', *, hugetlb=False, device=0, ptr=0,\n"
"       chunk_size=0, fd=-1, segments=None, keep_fd=False, drm_path=None,\n"
"       dl_device=None, view_cap=None)\n--\n\n"
"A dma-buf the NIC writes into (or sends from), with its segment table.\n\n"
"provider 'udmabuf': host memory (hugetlb: 2 MiB pages); 'cuda': GPU memory\n"
"of CUDA device `device` (ptr: export that existing allocation instead;\n"
"chunk_size: build it from physical chunks); 'import': the dma-buf `fd`\n"
"(size: at most its size) with `segments` [(offset, len, addr)] (keep_fd:\n"
"do not take ownership; when Buffer() raises, fd stays the caller's;\n"
"dl_device: where its addresses point, for DLPack); 'drm': a GEM buffer.\n"
"view_cap: see Buffer.view_cap.  Errors raise devmemtcp.Error.");

PyTypeObject Buffer_Type = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "devmemtcp.Buffer",
	.tp_basicsize = sizeof(BufferObject),
	.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
	.tp_doc = Buffer_doc,
	.tp_new = PyType_GenericNew,
	.tp_init = (initproc)Buffer_init,
	.tp_dealloc = (destructor)Buffer_dealloc,
	.tp_methods = Buffer_methods,
	.tp_getset = Buffer_getset,
};

/* ---- Binding -------------------------------------------------------------- */

static void binding_destroy(struct core *c)
{
	struct binding_core *b = (struct binding_core *)c;

	devmemtcp_binding_close(b->b);
	core_put(&b->buf->c);
	core_put(&b->ctx->c);
	free(b);
	dmtpy_test_freed("Binding");
}

static int queues_of(PyObject *obj, uint32_t **q, size_t *n)
{
	PyObject *seq;

	*q = NULL;
	*n = 0;
	if (obj == Py_None)
		return 0;
	if (PyLong_Check(obj)) {
		*q = malloc(sizeof(**q));
		if (!*q)
			return -1;
		**q = (uint32_t)PyLong_AsUnsignedLong(obj);
		*n = 1;
		return PyErr_Occurred() ? -1 : 0;
	}
	seq = PySequence_Fast(obj, "queues must be an int or a sequence of ints");
	if (!seq)
		return -1;
	*n = (size_t)PySequence_Fast_GET_SIZE(seq);
	*q = calloc(*n + 1, sizeof(**q));
	for (size_t i = 0; *q && i < *n; i++)
		(*q)[i] = (uint32_t)PyLong_AsUnsignedLong(PySequence_Fast_GET_ITEM(seq, (Py_ssize_t)i));
	Py_DECREF(seq);
	if (!*q)
		PyErr_NoMemory();
	return PyErr_Occurred() ? -1 : 0;
}

static PyObject *new_binding(PyTypeObject *type, PyObject *ctxobj,
			     PyObject *bufobj, bool tx, int ifindex,
			     const uint32_t *q, size_t nq,
			     const struct devmemtcp_bind_opts *o)
{
	/* held through the bind, without the GIL; the binding keeps them */
	struct ctx_core *ctx = dmtpy_ctx_get(ctxobj);
	struct buf_core *buf = ctx ? dmtpy_buf_get(bufobj) : NULL;
	struct devmemtcp_binding *b = NULL;
	struct binding_core *core;
	BindingObject *self;
	int ret;

	if (!buf)
		goto err;
	Py_BEGIN_ALLOW_THREADS
	dmtpy_test_point("Binding");
	ret = tx ? devmemtcp_bind_tx(ctx->ctx, ifindex, buf->buf, o, &b)
		 : devmemtcp_bind_rx(ctx->ctx, ifindex, q, nq, buf->buf, o, &b);
	Py_END_ALLOW_THREADS
	if (ret) {
		dmtpy_raise_ctx(ret, ctx);
		goto err;
	}
	self = (BindingObject *)type->tp_alloc(type, 0);
	core = calloc(1, sizeof(*core));
	if (!self || !core) {
		devmemtcp_binding_close(b);
		Py_XDECREF(self);
		free(core);
		PyErr_NoMemory();
		goto err;
	}
	core_init(&core->c, binding_destroy);
	core->ctx = ctx;
	core->buf = buf;
	core->b = b;
	self->core = core;
	self->buffer = Py_NewRef(bufobj);
	return (PyObject *)self;
err:
	core_put(buf ? &buf->c : NULL);
	core_put(ctx ? &ctx->c : NULL);
	return NULL;
}

static PyObject *Binding_rx(PyObject *cls, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "ctx", "ifname", "queues", "buf",
				  "rx_page_size", "verify", NULL };
	PyObject *ctxobj, *ifobj, *qobj, *bufobj, *r;
	unsigned int page = 0;
	int verify = 1, ifindex;
	char name[IF_NAMESIZE];
	uint32_t *q;
	size_t nq;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "OOOO|$Ip:rx", kwlist,
					 &ctxobj, &ifobj, &qobj, &bufobj,
					 &page, &verify))
		return NULL;
	ifindex = dmtpy_ifindex_of(ifobj, name, sizeof(name));
	if (!ifindex || queues_of(qobj, &q, &nq))
		return NULL;
	{
		DEVMEMTCP_OPTS(bind_opts, o, .rx_page_size = page,
			       .no_verify = !verify);

		r = new_binding((PyTypeObject *)cls, ctxobj, bufobj, false,
				ifindex, q, nq, &o);
	}
	free(q);
	return r;
}

static PyObject *Binding_tx(PyObject *cls, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "ctx", "ifname", "buf", NULL };
	PyObject *ctxobj, *ifobj, *bufobj;
	char name[IF_NAMESIZE];
	int ifindex;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "OOO:tx", kwlist, &ctxobj,
					 &ifobj, &bufobj))
		return NULL;
	ifindex = dmtpy_ifindex_of(ifobj, name, sizeof(name));
	if (!ifindex)
		return NULL;
	return new_binding((PyTypeObject *)cls, ctxobj, bufobj, true, ifindex,
			   NULL, 0, NULL);
}

static int Binding_init(PyObject *self, PyObject *args, PyObject *kw)
{
	if (((AnyObject *)self)->core)
		return 0;	/* made by rx() or tx() */
	PyErr_SetString(PyExc_TypeError, "use Binding.rx() or Binding.tx()");
	return -1;
}

static void Binding_dealloc(BindingObject *self)
{
	Py_CLEAR(self->buffer);
	dmtpy_any_dealloc((PyObject *)self);
}

static PyObject *Binding_get_id(PyObject *self, void *closure)
{
	struct binding_core *b = dmt_core(self, "Binding");

	return b ? PyLong_FromUnsignedLong(devmemtcp_binding_id(b->b)) : NULL;
}

static PyObject *Binding_get_buffer(PyObject *self, void *closure)
{
	return Py_NewRef(((BindingObject *)self)->buffer);
}

static PyMethodDef Binding_methods[] = {
	DMT_CM_METHODS(DMT_CLOSE_DOC("binding", "unbinds the dma-buf (the queues restart with ordinary memory).")),
	{ "rx", (PyCFunction)(void (*)(void))Binding_rx,
	  METH_VARARGS | METH_KEYWORDS | METH_CLASS,
	  "rx(ctx, ifname, queues, buf, *, rx_page_size=0, verify=True)\n--\n\n"
	  "Bind buf to RX queues (an int or a list) of interface ifname (name or\n"
	  "index) with netlink bind-rx; checked with queue-get unless verify is\n"
	  "False.  Needs CAP_NET_ADMIN and a prepared NIC (see Nic)." },
	{ "tx", (PyCFunction)(void (*)(void))Binding_tx,
	  METH_VARARGS | METH_KEYWORDS | METH_CLASS,
	  "tx(ctx, ifname, buf)\n--\n\n"
	  "Make buf sendable through ifname (bind-tx, Linux 6.16 and newer)." },
	{ NULL, NULL, 0, NULL },
};

static PyGetSetDef Binding_getset[] = {
	DMT_CLOSED_GETSET,
	{ "id", Binding_get_id, NULL, "The binding id, as fragments carry it.", NULL },
	{ "buffer", Binding_get_buffer, NULL, "The bound Buffer.", NULL },
	{ NULL, NULL, NULL, NULL, NULL },
};

PyDoc_STRVAR(Binding_doc,
"A dma-buf bound to NIC queues.  Made by Binding.rx() or Binding.tx();\n"
"a context manager whose close() unbinds.");

PyTypeObject Binding_Type = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "devmemtcp.Binding",
	.tp_basicsize = sizeof(BindingObject),
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = Binding_doc,
	.tp_new = PyType_GenericNew,
	.tp_init = Binding_init,
	.tp_dealloc = (destructor)Binding_dealloc,
	.tp_methods = Binding_methods,
	.tp_getset = Binding_getset,
};

/* ---- Gpu ------------------------------------------------------------------ */

static void gpu_destroy(struct core *c)
{
	struct gpu_core *g = (struct gpu_core *)c;

	devmemtcp_gpu_free(g->gpu);
	pthread_mutex_destroy(&g->lock);
	core_put(&g->ctx->c);
	free(g);
	dmtpy_test_freed("Gpu");
}

struct gpu_core *dmtpy_gpu_core_new(struct ctx_core *ctx, int device,
				  const struct devmemtcp_gpu_opts *opts,
				  int *ret)
{
	struct devmemtcp_gpu *gpu = NULL;
	struct gpu_core *g;

	Py_BEGIN_ALLOW_THREADS
	dmtpy_test_point("Gpu()");
	*ret = devmemtcp_gpu_new(ctx->ctx, opts, &gpu);
	Py_END_ALLOW_THREADS
	if (*ret) {
		dmtpy_raise_ctx(*ret, ctx);
		return NULL;
	}
	g = calloc(1, sizeof(*g));
	if (!g) {
		devmemtcp_gpu_free(gpu);
		PyErr_NoMemory();
		return NULL;
	}
	core_init(&g->c, gpu_destroy);
	core_get(&ctx->c);
	g->ctx = ctx;
	g->gpu = gpu;
	g->device = device;
	pthread_mutex_init(&g->lock, NULL);
	return g;
}

static int Gpu_init(GpuObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "ctx", "device", "desc_copy", "max_frags",
				  "slots", "graphs", "persistent",
				  "coalesce_bytes", "coalesce_us", NULL };
	unsigned int max_frags = 0, slots = 0, coalesce_bytes = 0, coalesce_us = 0;
	int device = 0, desc_copy = 0, graphs = 0, persistent = 0, ret;
	struct ctx_core *ctx;
	PyObject *ctxobj;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "O|i$pIIppII:Gpu", kwlist,
					 &ctxobj, &device, &desc_copy,
					 &max_frags, &slots, &graphs, &persistent,
					 &coalesce_bytes, &coalesce_us))
		return -1;
	ctx = dmtpy_ctx_get(ctxobj);	/* held while the Gpu is made without the GIL */
	if (!ctx)
		return -1;
	if (dmt_fresh((PyObject *)self, "Gpu")) {
		core_put(&ctx->c);
		return -1;
	}
	{
		DEVMEMTCP_OPTS(gpu_opts, o, .cuda_device = device,
			       .flags = (desc_copy ? DEVMEMTCP_GPU_DESC_COPY : 0) |
					(graphs ? DEVMEMTCP_GPU_GRAPHS : 0) |
					(persistent ? DEVMEMTCP_GPU_PERSISTENT : 0),
			       .max_frags = max_frags, .slots = slots,
			       .coalesce_bytes = coalesce_bytes, .coalesce_us = coalesce_us);

		self->core = dmtpy_gpu_core_new(ctx, device, &o, &ret);
	}
	core_put(&ctx->c);
	if (self->core) {
		self->core->flags = (graphs ? DEVMEMTCP_GPU_GRAPHS : 0) |
				    (persistent ? DEVMEMTCP_GPU_PERSISTENT : 0) |
				    (desc_copy ? DEVMEMTCP_GPU_DESC_COPY : 0);
		self->core->coalesce_bytes = coalesce_bytes;
	}
	return self->core ? 0 : -1;
}

/* Gpu.flush(): devmemtcp_gpu_flush on the handle, without the GIL. */
static PyObject *Gpu_flush(PyObject *self, PyObject *unused)
{
	struct gpu_core *g = dmt_core_get(self, "Gpu");
	char msg[1024];
	int ret;

	if (!g)
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	pthread_mutex_lock(&g->lock);
	ret = devmemtcp_gpu_flush(g->gpu);
	if (ret < 0)
		snprintf(msg, sizeof(msg), "%s", devmemtcp_gpu_errmsg(g->gpu));
	pthread_mutex_unlock(&g->lock);
	Py_END_ALLOW_THREADS
	core_put(&g->c);
	if (ret < 0) {
		dmtpy_raise(ret, msg);
		return NULL;
	}
	return PyLong_FromLong(ret);
}

static PyObject *Gpu_get_coalesce_bytes(PyObject *self, void *closure)
{
	struct gpu_core *g = dmt_core(self, "Gpu");

	return g ? PyLong_FromUnsignedLong(g->coalesce_bytes) : NULL;
}

static PyObject *Gpu_get_device(PyObject *self, void *closure)
{
	struct gpu_core *g = dmt_core(self, "Gpu");

	return g ? PyLong_FromLong(g->device) : NULL;
}

static PyMethodDef Gpu_methods[] = {
	DMT_CM_METHODS(DMT_CLOSE_DOC("GPU handle", "pending releases keep what they need.")),
	{ "flush", Gpu_flush, METH_NOARGS,
	  "flush($self, /)\n--\n\n"
	  "Queue the gathers waiting in the handle's batch (coalesce_bytes)\n"
	  "now, on their stream; returns how many gathers the launch carried\n"
	  "(0: none waited).  With coalescing, call it before queueing anything\n"
	  "else on the stream that reads the gathered bytes, and before waiting\n"
	  "for more data: see devmemtcp_gpu_flush(3)." },
	{ NULL, NULL, 0, NULL },
};

static PyObject *Gpu_get_flag(PyObject *self, void *closure)
{
	struct gpu_core *g = dmt_core(self, "Gpu");

	return g ? PyBool_FromLong(g->flags & (uint32_t)(uintptr_t)closure) : NULL;
}

static PyGetSetDef Gpu_getset[] = {
	DMT_CLOSED_GETSET,
	{ "device", Gpu_get_device, NULL, "CUDA device ordinal.", NULL },
	{ "coalesce_bytes", Gpu_get_coalesce_bytes, NULL,
	  "The batch size of coalesced gathers (0: each gather is queued by its call).", NULL },
	{ "graphs", Gpu_get_flag, NULL, "Inline gathers go through CUDA graphs (DEVMEMTCP_GPU_GRAPHS).",
	  (void *)(uintptr_t)DEVMEMTCP_GPU_GRAPHS },
	{ "persistent", Gpu_get_flag, NULL, "Gathers go to a resident kernel (DEVMEMTCP_GPU_PERSISTENT).",
	  (void *)(uintptr_t)DEVMEMTCP_GPU_PERSISTENT },
	{ NULL, NULL, NULL, NULL, NULL },
};

PyDoc_STRVAR(Gpu_doc,
"Gpu(ctx, device=0, *, desc_copy=False, max_frags=0, slots=0, graphs=False,\n"
"    persistent=False, coalesce_bytes=0, coalesce_us=0)\n--\n\n"
"The gather kernels on one CUDA device (its primary context).  Give it to\n"
"Rx(gpu=...) to choose the options; otherwise a receiver makes one with\n"
"the defaults on first use.  graphs: inline gathers go through a CUDA\n"
"graph per stream (DEVMEMTCP_GPU_GRAPHS: less CPU per gather, no overlap\n"
"of back-to-back gathers); persistent: a resident kernel takes the\n"
"gathers (DEVMEMTCP_GPU_PERSISTENT); coalesce_bytes: gathers wait in a\n"
"batch of up to that many bytes that one launch queues (when full, when\n"
"a gather goes to another stream, when a gather finds the batch older\n"
"than coalesce_us, 0: 20 us, or at flush()): call flush() before using\n"
"the bytes on the stream.  See devmemtcp_gpu_new(3).  libcuda is loaded at run time: without it\n"
"this raises Error(ENOENT).");

PyTypeObject Gpu_Type = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "devmemtcp.Gpu",
	.tp_basicsize = sizeof(GpuObject),
	.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
	.tp_doc = Gpu_doc,
	.tp_new = PyType_GenericNew,
	.tp_init = (initproc)Gpu_init,
	.tp_dealloc = dmtpy_any_dealloc,
	.tp_methods = Gpu_methods,
	.tp_getset = Gpu_getset,
};

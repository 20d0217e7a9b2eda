// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/* Fragments: the result of one receive, its tokens, views and gathers. */
#include <errno.h>
#include <string.h>

#include "common.h"

static struct frag_set *live_set(FragmentsObject *self)
{
	if (!self->set)
		PyErr_SetString(PyExc_ValueError,
				"the Fragments were released: their bytes may be overwritten by the NIC");
	return self->set;
}

/* Drop the reference a call took on set for its duration; when a
 * release() meanwhile left it the last, the tokens go back now.  0, or -1
 * with the release's error raised (unless the call raised already). */
static int set_unuse(struct frag_set *set)
{
	char msg[512] = "";
	int ret = dmtpy_set_put(set, false, msg, sizeof(msg));

	if (ret < 0 && !PyErr_Occurred())
		dmtpy_raise(ret, msg);
	return ret < 0 ? -1 : 0;
}

/* Drop the object's reference on its set; raise on a release error. */
static int frags_release(FragmentsObject *self)
{
	struct frag_set *set = self->set;
	char msg[512] = "";
	int ret;

	self->set = NULL;
	if (!set)
		return 0;
	ret = dmtpy_set_put(set, false, msg, sizeof(msg));
	if (ret < 0) {
		dmtpy_raise(ret, msg);
		return -1;
	}
	return 0;
}

static PyObject *Fragments_release(PyObject *self, PyObject *unused)
{
	if (frags_release((FragmentsObject *)self))
		return NULL;
	Py_RETURN_NONE;
}

static PyObject *Fragments_exit(PyObject *self, PyObject *args)
{
	if (frags_release((FragmentsObject *)self))
		return NULL;
	Py_RETURN_FALSE;
}

static void Fragments_dealloc(FragmentsObject *self)
{
	PyObject *t, *v, *tb;
	/* a parent's fragments freed in a forked child: their tokens stay
	 * the parent's, which is no error here */
	bool parents = self->set && dmt_parents(self->set->rx->gen);

	PyErr_Fetch(&t, &v, &tb);
	if (frags_release(self) && parents)
		PyErr_Clear();
	else if (PyErr_Occurred())
		PyErr_WriteUnraisable((PyObject *)self);
	PyErr_Restore(t, v, tb);
	Py_CLEAR(self->linear);
	PyObject_Free(self);
}

static Py_ssize_t Fragments_len(PyObject *self)
{
	return ((FragmentsObject *)self)->n;
}

static PyObject *Fragments_item(PyObject *self, Py_ssize_t i)
{
	FragmentsObject *f = (FragmentsObject *)self;
	struct devmemtcp_frag fr;
	struct frag_set *set;
	PyObject *t;

	if (i < 0 || i >= f->n) {
		PyErr_SetString(PyExc_IndexError, "fragment index out of range");
		return NULL;
	}
	set = live_set(f);
	if (!set)
		return NULL;
	/* a copy: the allocation below may run the garbage collector, whose
	 * callbacks may release the set */
	fr = set->frags[i];
	t = PyStructSequence_New(Fragment_Type);
	if (!t)
		return NULL;
	PyStructSequence_SET_ITEM(t, 0, PyLong_FromUnsignedLongLong(fr.offset));
	PyStructSequence_SET_ITEM(t, 1, PyLong_FromUnsignedLongLong(fr.addr));
	PyStructSequence_SET_ITEM(t, 2, PyLong_FromUnsignedLong(fr.len));
	PyStructSequence_SET_ITEM(t, 3, PyLong_FromUnsignedLong(fr.token));
	PyStructSequence_SET_ITEM(t, 4, PyLong_FromUnsignedLong(fr.binding_id));
	PyStructSequence_SET_ITEM(t, 5, PyLong_FromUnsignedLong(fr.flags));
	return t;
}

/* ---- CPU copies (host buffers) ------------------------------------------- */

/* Bracket CPU reads of every host buffer the set's fragments are in.
 * Returns 0, or raises (a device buffer, an unknown binding). */
static int host_sync(struct frag_set *set, bool start)
{
	size_t nb = atomic_load(&set->rx->nbufs);
	struct rx_core *rx = set->rx;

	for (size_t i = 0; i < nb; i++) {
		if (!set->held[i])
			continue;
		if (!rx->bufs[i].buf->host) {
			if (start)
				dmtpy_raise(-EOPNOTSUPP,
					  "the fragments are in device memory, which the CPU cannot read: gather_into() a tensor on their device");
			return -1;
		}
		dmtpy_buf_sync(rx->bufs[i].buf, start, false);
	}
	return 0;
}

/* Copy the bytes of every fragment, in stream order, to dst (the caller
 * bracketed the host buffers). */
static void copy_out(const struct frag_set *set, const char *linear,
		     char *dst)
{
	for (uint32_t i = 0; i < set->n; i++) {
		const struct devmemtcp_frag *f = &set->frags[i];

		if (f->flags & DEVMEMTCP_FRAG_LINEAR)
			memcpy(dst, linear + f->offset, f->len);
		else
			memcpy(dst, (const void *)(uintptr_t)f->addr, f->len);
		dst += f->len;
	}
}

static int check_addresses(const struct frag_set *set)
{
	for (uint32_t i = 0; i < set->n; i++) {
		const struct devmemtcp_frag *f = &set->frags[i];

		if (!(f->flags & DEVMEMTCP_FRAG_LINEAR) && f->len && !f->addr) {
			char msg[256];

			snprintf(msg, sizeof(msg),
				 "fragment %u (binding %u) has no address: register its binding's buffer with Rx.add_buf()",
				 i, f->binding_id);
			dmtpy_raise(-EINVAL, msg);
			return -1;
		}
	}
	return 0;
}

static PyObject *Fragments_read(PyObject *self, PyObject *unused)
{
	FragmentsObject *f = (FragmentsObject *)self;
	struct frag_set *set;
	const char *linear;
	PyObject *out = NULL;

	if (!f->n)
		return PyBytes_FromStringAndSize(NULL, 0);
	set = live_set(f);
	if (!set)
		return NULL;
	/* held through the copy without the GIL: a release() meanwhile hands
	 * the tokens back when the copy is done */
	dmt_set_get(set);
	if (!check_addresses(set) && !host_sync(set, true)) {
		out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)f->nbytes);
		if (out) {
			linear = f->linear ? PyBytes_AS_STRING(f->linear) : NULL;
			Py_BEGIN_ALLOW_THREADS
			dmtpy_test_point("Fragments.read");
			copy_out(set, linear, PyBytes_AS_STRING(out));
			Py_END_ALLOW_THREADS
		}
		host_sync(set, false);
	}
	if (set_unuse(set))
		Py_CLEAR(out);
	return out;
}

static PyObject *Fragments_ranges(PyObject *self, PyObject *unused)
{
	FragmentsObject *f = (FragmentsObject *)self;
	struct devmemtcp_gpu_iov *iov;
	struct frag_set *set;
	PyObject *list;
	int n;

	if (!f->n)
		return PyList_New(0);
	set = live_set(f);
	if (!set)
		return NULL;
	iov = malloc(set->n * sizeof(*iov));
	if (!iov)
		return PyErr_NoMemory();
	n = devmemtcp_gpu_view(NULL, set->frags, set->n, iov, set->n);
	if (n < 0) {
		free(iov);
		check_addresses(set);
		return NULL;
	}
	list = PyList_New(n);
	for (int i = 0; list && i < n; i++) {
		PyObject *t = Py_BuildValue("(KK)", iov[i].addr, iov[i].len);

		if (!t) {
			Py_CLEAR(list);
			break;
		}
		PyList_SET_ITEM(list, i, t);
	}
	free(iov);
	return list;
}

/* ---- gather_into ---------------------------------------------------------- */

/* The device the set's bytes are on; all device fragments must agree. */
static int set_device(struct frag_set *set, DLDevice *dev)
{
	bool found = false;

	for (uint32_t i = 0; i < set->n; i++) {
		struct buf_core *b = dmtpy_set_frag_buf(set, i);

		if (!b || !set->frags[i].len)
			continue;
		if (found && (b->device.device_type != dev->device_type ||
			      b->device.device_id != dev->device_id)) {
			PyErr_SetString(PyExc_ValueError,
					"the fragments are on several devices: gather them separately");
			return -1;
		}
		*dev = b->device;
		found = true;
	}
	return found ? 1 : 0;
}

/* The gathers, each with the reference gather_into() took on set, which
 * they drop: a successful gather releases the Fragments too, so that the
 * tokens go back when it is done (on a GPU, after its stream's work). */
static int gather_cpu(FragmentsObject *f, struct frag_set *set,
		      struct dmt_dst *d)
{
	const char *linear = f->linear ? PyBytes_AS_STRING(f->linear) : NULL;
	int ret;

	if (host_sync(set, true)) {
		set_unuse(set);
		return -1;
	}
	Py_BEGIN_ALLOW_THREADS
	dmtpy_test_point("Fragments.gather_into(cpu)");
	copy_out(set, linear, (char *)(uintptr_t)d->addr);
	Py_END_ALLOW_THREADS
	host_sync(set, false);
	ret = frags_release(f);
	return set_unuse(set) ? -1 : ret;
}

static int gather_cuda(FragmentsObject *f, struct frag_set *set,
		       struct dmt_dst *d, void *stream)
{
	struct rx_core *rx = set->rx;
	struct devmemtcp_gpu_iov iov = { d->addr, d->nbytes };
	const char *linear = f->linear ? PyBytes_AS_STRING(f->linear) : NULL;
	size_t nlinear = f->linear ? (size_t)PyBytes_GET_SIZE(f->linear) : 0;
	struct gpu_core *g = dmtpy_rx_gpu(rx, d->device.device_id);
	struct devmemtcp_gpu_fence *fence = NULL;
	char msg[1024] = "";
	bool whole;
	int ret;

	if (!g) {
		set_unuse(set);
		return -1;
	}
	/* Nothing but the Fragments and this call hold the set (no views,
	 * none had to be waited for): the gather hands the tokens back
	 * itself (devmemtcp_gpu_gather_release), and the Fragments is
	 * released now.  Views are made, and the Fragments released, only
	 * with the GIL: none can come while the gather runs. */
	whole = f->set == set && atomic_load(&set->refs) == 2 &&
		!atomic_load(&set->fences) && atomic_load(&set->sync_device) < 0 &&
		/* an empty gather: 0 when it can gather at all (kernels, a
		 * handle of this process); else the Fragments stays held */
		devmemtcp_gpu_gather(g->gpu, NULL, 0, NULL, 0, stream) == 0;
	if (whole) {
		f->set = NULL;
		atomic_store(&set->refs, 1);
		Py_BEGIN_ALLOW_THREADS
		dmtpy_test_point("Fragments.gather_into(cuda)");
		/* linear bytes (a steering miss) go in the same launch; the
		 * gather-and-release frees the set, fragments and all */
		ret = dmtpy_set_gather_release(set, g, linear, nlinear, &iov, stream,
					     msg, sizeof(msg));
		Py_END_ALLOW_THREADS
		core_put(&g->c);
		if (ret) {
			dmtpy_raise(ret, msg);
			return -1;
		}
		return 0;
	}
	Py_BEGIN_ALLOW_THREADS
	dmtpy_test_point("Fragments.gather_into(cuda)");
	pthread_mutex_lock(&g->lock);
	ret = devmemtcp_gpu_gather_recv(g->gpu, NULL, set->frags, set->n, linear,
					nlinear, &iov, 1, stream);
	if (ret)
		snprintf(msg, sizeof(msg), "%s", devmemtcp_gpu_errmsg(g->gpu));
	pthread_mutex_unlock(&g->lock);
	Py_END_ALLOW_THREADS
	if (ret) {
		core_put(&g->c);
		dmtpy_raise(ret, msg);
		set_unuse(set);
		return -1;
	}
	/* the Fragments' reference goes (unless a release() took it), never
	 * the last: ours is left, and views' */
	if (f->set) {
		f->set = NULL;
		dmtpy_set_put(set, false, NULL, 0);
	}
	if (atomic_load(&set->refs) == 1) {
		/* no views: the library defers the release on the stream */
		ret = dmtpy_set_release_gpu(set, g, stream, msg, sizeof(msg));
	} else {
		/* views still read the bytes: add this stream's fence */
		ret = devmemtcp_gpu_fence_new(g->gpu, stream, &fence);
		if (ret)
			snprintf(msg, sizeof(msg), "%s", devmemtcp_gpu_errmsg(g->gpu));
		else
			ret = dmtpy_set_push_fence(set, fence);
		if (ret)
			atomic_store(&set->sync_device, g->device);
		dmtpy_set_put(set, false, NULL, 0);
	}
	core_put(&g->c);
	if (ret < 0) {
		dmtpy_raise(ret, msg);
		return -1;
	}
	return 0;
}

static PyObject *Fragments_gather_into(PyObject *self, PyObject *args,
				       PyObject *kw)
{
	static char *kwlist[] = { "dst", "stream", NULL };
	FragmentsObject *f = (FragmentsObject *)self;
	PyObject *dst, *streamobj = Py_None;
	DLDevice dev = { 0, 0 };
	struct frag_set *set;
	struct dmt_dst d;
	long long dl;
	void *stream;
	int ret, have;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O:gather_into", kwlist,
					 &dst, &streamobj))
		return NULL;
	set = live_set(f);
	if (!set)
		return NULL;
	/* held until the gather is done: the stream's and dst's methods are
	 * Python code, and the copy runs without the GIL; a release()
	 * meanwhile takes effect when the gather returns */
	dmt_set_get(set);
	if (dmtpy_stream_of(streamobj, &stream, &dl) || check_addresses(set) ||
	    (have = set_device(set, &dev)) < 0 ||
	    dmtpy_dlpack_import(dst, stream, dl != -2, &d)) {
		set_unuse(set);
		return NULL;
	}
	ret = -1;
	if (d.nbytes < f->nbytes) {
		char msg[256];

		snprintf(msg, sizeof(msg),
			 "the fragments hold %llu bytes but dst only %llu: give more room",
			 (unsigned long long)f->nbytes, (unsigned long long)d.nbytes);
		dmtpy_raise(-ENOSPC, msg);
	} else if (have && (dev.device_type != d.device.device_type ||
			    dev.device_id != d.device.device_id)) {
		PyErr_Format(PyExc_ValueError,
			     "dst is on device (%d, %d) but the fragments on (%d, %d): give a tensor on the buffer's device",
			     d.device.device_type, d.device.device_id,
			     dev.device_type, dev.device_id);
	} else if (d.device.device_type == kDLCPU) {
		ret = gather_cpu(f, set, &d);
		set = NULL;
	} else if (d.device.device_type == kDLCUDA) {
		ret = gather_cuda(f, set, &d, stream);
		set = NULL;
	} else {
		PyErr_Format(PyExc_ValueError, "dst is on DLPack device type %d: only CPU and CUDA",
			     d.device.device_type);
	}
	if (set)
		set_unuse(set);
	dmtpy_dlpack_done(&d);
	if (ret)
		return NULL;
	return PyLong_FromUnsignedLongLong(f->nbytes);
}

/* ---- DLPack --------------------------------------------------------------- */

static PyObject *Fragments_dlpack(PyObject *self, PyObject *args, PyObject *kw)
{
	FragmentsObject *f = (FragmentsObject *)self;
	struct gpu_core *g = NULL;
	struct frag_set *set;
	struct buf_core *b;
	uint64_t addr, len;
	char why[256];
	PyObject *r;

	if (PyTuple_GET_SIZE(args)) {
		PyErr_SetString(PyExc_TypeError, "__dlpack__ takes keyword arguments only");
		return NULL;
	}
	if (!f->set) {
		PyErr_SetString(PyExc_BufferError, "the Fragments were released");
		return NULL;
	}
	set = f->set;
	if (!f->n || !dmtpy_set_range(set, &addr, &len, why, sizeof(why))) {
		PyErr_SetString(PyExc_BufferError, f->n ? why : "no fragments");
		return NULL;
	}
	b = NULL;
	for (uint32_t i = 0; !b && i < set->n; i++)
		b = dmtpy_set_frag_buf(set, i);
	if (!b || !b->device.device_type) {
		PyErr_SetString(PyExc_BufferError,
				"the buffer's device is unknown: give dl_device= when importing it");
		return NULL;
	}
	/* held through making the Gpu (without the GIL) and the export, whose
	 * keyword values are Python code: a release() meanwhile leaves the
	 * set to the view */
	dmt_set_get(set);
	r = NULL;
	if (b->device.device_type == kDLCUDA)
		g = dmtpy_rx_gpu(set->rx, b->device.device_id);
	if (g || b->device.device_type != kDLCUDA)
		r = dmtpy_dlpack_export(kw, set, b, g, addr, len);
	core_put(g ? &g->c : NULL);
	if (set_unuse(set))
		Py_CLEAR(r);
	return r;
}

static PyObject *Fragments_dlpack_device(PyObject *self, PyObject *unused)
{
	FragmentsObject *f = (FragmentsObject *)self;
	DLDevice dev = { kDLCPU, 0 };

	if (f->set && f->n && set_device(f->set, &dev) < 0)
		return NULL;
	return Py_BuildValue("(ii)", dev.device_type, dev.device_id);
}

/* ---- attributes ----------------------------------------------------------- */

static PyObject *Fragments_get(PyObject *self, void *closure)
{
	FragmentsObject *f = (FragmentsObject *)self;

	switch ((int)(intptr_t)closure) {
	case 0:
		return PyLong_FromUnsignedLongLong(f->nbytes);
	case 1:
		return PyLong_FromUnsignedLongLong(f->dmabuf_bytes);
	case 2:
		return f->linear ? Py_NewRef(f->linear) : PyBytes_FromStringAndSize(NULL, 0);
	default:
		return PyBool_FromLong(f->set == NULL);
	}
}

static PyObject *Fragments_repr(PyObject *self)
{
	FragmentsObject *f = (FragmentsObject *)self;

	return PyUnicode_FromFormat("<devmemtcp.Fragments %zd fragments, %llu bytes%s>",
				    f->n, (unsigned long long)f->nbytes,
				    f->set || !f->n ? "" : ", released");
}

static PyGetSetDef Fragments_getset[] = {
	{ "nbytes", Fragments_get, NULL, "Bytes received (device and linear).", (void *)0 },
	{ "dmabuf_bytes", Fragments_get, NULL, "Bytes that landed in the dma-buf.", (void *)1 },
	{ "linear", Fragments_get, NULL,
	  "The linear bytes (not split off into the dma-buf: a steering miss), as bytes;\n"
	  "LINEAR fragments' offsets point into it.", (void *)2 },
	{ "released", Fragments_get, NULL, "True once the tokens were handed back.", (void *)3 },
	{ NULL, NULL, NULL, NULL, NULL },
};

static PyMethodDef Fragments_methods[] = {
	{ "release", Fragments_release, METH_NOARGS,
	  "release($self, /)\n--\n\n"
	  "Hand the tokens back (once every DLPack view is gone too).  Safe to\n"
	  "call twice; the tokens go back exactly once.  A read() or gather_into()\n"
	  "running on another thread finishes first: the tokens go back when it\n"
	  "returns (after a GPU gather's stream work), and it raises the release's\n"
	  "error, if any." },
	DMT_ENTER_METHOD,
	{ "__exit__", Fragments_exit, METH_VARARGS, "__exit__($self, *exc, /)\n--\n\nrelease()." },
	{ "read", Fragments_read, METH_NOARGS,
	  "read($self, /)\n--\n\n"
	  "All the bytes in stream order, as bytes (host buffers such as udmabuf;\n"
	  "device memory raises Error(EOPNOTSUPP)).  Does not release." },
	{ "ranges", Fragments_ranges, METH_NOARGS,
	  "ranges($self, /)\n--\n\n"
	  "The device ranges holding the bytes, [(addr, len), ...], in order, with\n"
	  "adjacent fragments merged (linear fragments left out): a no-copy view." },
	{ "gather_into", (PyCFunction)(void (*)(void))Fragments_gather_into,
	  METH_VARARGS | METH_KEYWORDS,
	  "gather_into($self, /, dst, stream=None)\n--\n\n"
	  "Copy the bytes, in order, into dst: any object with __dlpack__ (a\n"
	  "torch, CuPy or JAX array; numpy for host buffers), contiguous,\n"
	  "writable, on the buffer's device, of at least nbytes bytes.  On a GPU\n"
	  "one kernel packs the fragments on stream (a CUstream int, DLPack's 1\n"
	  "and 2 included, or a stream object with __cuda_stream__, .cuda_stream\n"
	  "or .ptr: torch, CuPy; None: the legacy default stream), ordered after the work\n"
	  "dst's owner queued, and the tokens go back once that stream's work is\n"
	  "done; the Fragments is released.  Keep dst alive until then (or call\n"
	  "dst.record_stream(stream) in PyTorch).  Returns the bytes copied." },
	{ "__dlpack__", (PyCFunction)(void (*)(void))Fragments_dlpack,
	  METH_VARARGS | METH_KEYWORDS,
	  "__dlpack__($self, /, *, stream=None, max_version=None, dl_device=None, copy=None)\n--\n\n"
	  "A no-copy 1-D uint8 view of the bytes when they are one device range\n"
	  "(BufferError otherwise).  The tokens stay held until the view's\n"
	  "deleter has run and, for CUDA, the work queued until then on the\n"
	  "consumer's stream has finished (stream -1, or the per-thread default\n"
	  "stream 2 when the deleter runs on another thread: all work on the\n"
	  "device)." },
	{ "__dlpack_device__", Fragments_dlpack_device, METH_NOARGS,
	  "__dlpack_device__($self, /)\n--\n\n(device_type, device_id) of the bytes." },
	{ NULL, NULL, 0, NULL },
};

static PySequenceMethods Fragments_as_sequence = {
	.sq_length = Fragments_len,
	.sq_item = Fragments_item,
};

PyDoc_STRVAR(Fragments_doc,
"The fragments of one Rx.recv(): a sequence of Fragment(offset, addr, len,\n"
"token, binding_id, flags) in stream order, with nbytes, linear (bytes) and\n"
"the tokens that hold the NIC's buffers.  The tokens go back exactly once:\n"
"at release(), at the end of a with block, or when the object is garbage\n"
"collected, and only after every DLPack view of it is gone.");

PyTypeObject Fragments_Type = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "devmemtcp.Fragments",
	.tp_basicsize = sizeof(FragmentsObject),
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = Fragments_doc,
	.tp_dealloc = (destructor)Fragments_dealloc,
	.tp_repr = Fragments_repr,
	.tp_as_sequence = &Fragments_as_sequence,
	.tp_methods = Fragments_methods,
	.tp_getset = Fragments_getset,
};

// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * DLPack: exporting fragments and buffers (producer) and taking a gather
 * destination from any array (consumer).  Capsule names and the deleter
 * protocol follow the Python array API standard: an unconsumed capsule's
 * destructor calls the deleter; a consumer renames it "used_..." and calls
 * the deleter itself, from any thread, without the GIL.
 */
#include <errno.h>
#include <string.h>

#include "common.h"

static const char CAP_V[] = "dltensor_versioned", CAP_L[] = "dltensor",
		  USED_V[] = "used_dltensor_versioned", USED_L[] = "used_dltensor";

struct dmt_export {
	union {
		DLManagedTensorVersioned v;
		DLManagedTensor l;
	} m;
	int64_t shape[1];
	struct frag_set *set;	/* a view of fragments (holds a reference) */
	struct buf_core *buf;	/* whose memory it is (a reference when !set) */
	struct gpu_core *gpu;	/* records the consumer's fence */
	void *stream;
	bool no_stream;		/* stream -1: the consumer synchronises itself */
	uint64_t thread;	/* the exporting thread (stream 2) */
};

/* This thread's number, never reused (pthread_t values are, once a thread
 * exits). */
static uint64_t thread_no(void)
{
	static atomic_uint_fast64_t next = 1;
	static _Thread_local uint64_t no;

	if (!no)
		no = atomic_fetch_add(&next, 1);
	return no;
}

/* Whether e's stream cannot be named from this thread: the per-thread
 * default stream is another stream on every thread, and a deleter may run
 * on any of them. */
static bool stream_elsewhere(const struct dmt_export *e)
{
	return e->stream == DMT_CU_STREAM_PER_THREAD &&
	       e->thread != thread_no();
}

/* From any thread, without the GIL: cover the consumer's work with a
 * fence (or a device-wide wait when it gave no stream, or one this
 * thread cannot name), then let go. */
static void export_free(struct dmt_export *e)
{
	struct devmemtcp_gpu_fence *f;

	if (e->buf->host)
		dmtpy_buf_sync(e->buf, false, !e->set);
	if (e->set) {
		if (e->gpu && (e->no_stream || stream_elsewhere(e) ||
			       devmemtcp_gpu_fence_new(e->gpu->gpu, e->stream, &f) ||
			       dmtpy_set_push_fence(e->set, f)))
			atomic_store(&e->set->sync_device, e->gpu->device);
		dmtpy_set_put(e->set, true, NULL, 0);
	} else {
		core_put(&e->buf->c);
	}
	core_put(e->gpu ? &e->gpu->c : NULL);
	free(e);
}

static void deleter_v(DLManagedTensorVersioned *m)
{
	export_free(m->manager_ctx);
}

static void deleter_l(DLManagedTensor *m)
{
	export_free(m->manager_ctx);
}

static void capsule_dtor(PyObject *cap)
{
	PyObject *t, *v, *tb;
	const char *name;

	PyErr_Fetch(&t, &v, &tb);
	name = PyCapsule_GetName(cap);
	if (name && !strcmp(name, CAP_V)) {
		DLManagedTensorVersioned *m = PyCapsule_GetPointer(cap, CAP_V);

		if (m && m->deleter)
			m->deleter(m);
	} else if (name && !strcmp(name, CAP_L)) {
		DLManagedTensor *m = PyCapsule_GetPointer(cap, CAP_L);

		if (m && m->deleter)
			m->deleter(m);
	}
	PyErr_Clear();
	PyErr_Restore(t, v, tb);
}

struct export_args {
	bool versioned;
	void *stream;
	bool no_stream;
};

static PyObject *kwarg(PyObject *kw, const char *name)
{
	PyObject *v = kw ? PyDict_GetItemString(kw, name) : NULL;

	return v ? v : Py_None;
}

static int export_args(PyObject *kw, DLDevice dev, struct export_args *a)
{
	static const char *known[] = { "stream", "max_version", "dl_device", "copy" };
	PyObject *mv = kwarg(kw, "max_version"), *dd = kwarg(kw, "dl_device"),
		 *copy = kwarg(kw, "copy"), *st = kwarg(kw, "stream"), *k;
	Py_ssize_t pos = 0;
	long long s;

	while (kw && PyDict_Next(kw, &pos, &k, NULL)) {
		const char *n = PyUnicode_AsUTF8(k);
		size_t i = 0;

		while (n && i < 4 && strcmp(n, known[i]))
			i++;
		if (!n || i == 4) {
			PyErr_Format(PyExc_TypeError, "__dlpack__() got an unexpected keyword argument '%s'",
				     n ? n : "?");
			return -1;
		}
	}
	memset(a, 0, sizeof(*a));
	if (mv != Py_None) {
		PyObject *m0 = PySequence_GetItem(mv, 0);
		long major = m0 ? PyLong_AsLong(m0) : -1;

		Py_XDECREF(m0);
		if (major == -1 && PyErr_Occurred()) {
			PyErr_SetString(PyExc_TypeError, "max_version is a (major, minor) tuple");
			return -1;
		}
		a->versioned = major >= DMT_DLPACK_MAJOR;
	}
	if (dd != Py_None) {
		int type, id;

		if (!PyArg_ParseTuple(dd, "ii", &type, &id))
			return -1;
		if (type != dev.device_type || id != dev.device_id) {
			PyErr_Format(PyExc_BufferError,
				     "the bytes are on device (%d, %d): no copy to (%d, %d)",
				     dev.device_type, dev.device_id, type, id);
			return -1;
		}
	}
	if (copy != Py_None && PyObject_IsTrue(copy)) {
		PyErr_SetString(PyExc_BufferError,
				"copy=True: this producer exports views only; copy the tensor after import");
		return -1;
	}
	if (st == Py_None || dev.device_type != kDLCUDA)
		return 0;
	s = PyLong_AsLongLong(st);
	if (s == -1 && PyErr_Occurred())
		return -1;
	if (s == -1)
		a->no_stream = true;
	else if (s < -1) {
		PyErr_SetString(PyExc_ValueError, "stream must be None, -1 or a stream handle");
		return -1;
	} else if (s > 1) {
		/* 1 (the legacy default stream) is NULL to the driver too */
		a->stream = (void *)(uintptr_t)s;
	}
	return 0;
}

PyObject *dmtpy_dlpack_export(PyObject *kw, struct frag_set *set,
			    struct buf_core *buf, struct gpu_core *gpu,
			    uint64_t addr, uint64_t len)
{
	struct export_args a;
	struct dmt_export *e;
	DLTensor *t;
	PyObject *cap;

	if (export_args(kw, buf->device, &a))
		return NULL;
	e = calloc(1, sizeof(*e));
	if (!e)
		return PyErr_NoMemory();
	e->shape[0] = (int64_t)len;
	e->stream = a.stream;
	e->no_stream = a.no_stream;
	e->thread = thread_no();
	if (a.versioned) {
		e->m.v.version = (DLPackVersion){ DMT_DLPACK_MAJOR, DMT_DLPACK_MINOR };
		e->m.v.manager_ctx = e;
		e->m.v.deleter = deleter_v;
		t = &e->m.v.dl_tensor;
	} else {
		e->m.l.manager_ctx = e;
		e->m.l.deleter = deleter_l;
		t = &e->m.l.dl_tensor;
	}
	t->data = (void *)(uintptr_t)addr;
	t->device = buf->device;
	t->ndim = 1;
	t->dtype = (DLDataType){ kDLUInt, 8, 1 };
	t->shape = e->shape;
	cap = PyCapsule_New(a.versioned ? (void *)&e->m.v : (void *)&e->m.l,
			    a.versioned ? CAP_V : CAP_L, capsule_dtor);
	if (!cap) {
		free(e);
		return NULL;
	}
	/* references only once nothing can fail */
	e->buf = buf;
	e->set = set;
	if (set)
		atomic_fetch_add(&set->refs, 1);
	else
		core_get(&buf->c);
	if (gpu) {
		core_get(&gpu->c);
		e->gpu = gpu;
	}
	if (buf->host)
		dmtpy_buf_sync(buf, true, !set);
	return cap;
}

/* ---- consumer ------------------------------------------------------------- */

static int compact(const DLTensor *t, uint64_t *nbytes)
{
	uint64_t n = 1, expect = 1;

	if (t->dtype.bits % 8 || !t->dtype.lanes)
		return 0;
	for (int i = t->ndim - 1; i >= 0; i--) {
		if (t->shape[i] < 0)
			return 0;
		if (t->strides && t->shape[i] > 1 &&
		    (uint64_t)t->strides[i] != expect)
			return 0;
		expect *= (uint64_t)t->shape[i];
		n *= (uint64_t)t->shape[i];
	}
	*nbytes = n * (t->dtype.bits / 8u) * t->dtype.lanes;
	return 1;
}

static PyObject *call_dlpack(PyObject *obj, PyObject *stream)
{
	PyObject *meth = PyObject_GetAttrString(obj, "__dlpack__"), *kw, *cap,
		 *args;

	if (!meth) {
		PyErr_Format(PyExc_TypeError,
			     "dst must support DLPack (__dlpack__), got %s",
			     Py_TYPE(obj)->tp_name);
		return NULL;
	}
	args = PyTuple_New(0);
	kw = Py_BuildValue("{s:O,s:(ii)}", "stream", stream, "max_version",
			   DMT_DLPACK_MAJOR, DMT_DLPACK_MINOR);
	cap = kw && args ? PyObject_Call(meth, args, kw) : NULL;
	Py_XDECREF(kw);
	if (!cap && args && PyErr_ExceptionMatches(PyExc_TypeError)) {
		/* producers older than DLPack 1.0 take no max_version */
		PyErr_Clear();
		kw = Py_BuildValue("{s:O}", "stream", stream);
		cap = kw ? PyObject_Call(meth, args, kw) : NULL;
		Py_XDECREF(kw);
	}
	Py_XDECREF(args);
	Py_DECREF(meth);
	return cap;
}

int dmtpy_dlpack_import(PyObject *obj, void *stream, bool have_stream,
		      struct dmt_dst *d)
{
	PyObject *dev, *st;
	DLTensor *t;
	int type = 0, id = 0;

	memset(d, 0, sizeof(*d));
	dev = PyObject_CallMethod(obj, "__dlpack_device__", NULL);
	if (!dev || !PyArg_ParseTuple(dev, "ii", &type, &id)) {
		Py_XDECREF(dev);
		if (PyErr_ExceptionMatches(PyExc_AttributeError)) {
			PyErr_Clear();
			PyErr_Format(PyExc_TypeError,
				     "dst must support DLPack (__dlpack__ and __dlpack_device__), got %s",
				     Py_TYPE(obj)->tp_name);
		}
		return -1;
	}
	Py_DECREF(dev);
	/* CUDA consumers name their stream (1: the legacy default) so that
	 * the producer orders its pending work before ours */
	if (type == kDLCUDA)
		st = PyLong_FromUnsignedLongLong(stream ? (uintptr_t)stream : 1);
	else
		st = Py_NewRef(Py_None);
	d->capsule = st ? call_dlpack(obj, st) : NULL;
	Py_XDECREF(st);
	if (!d->capsule)
		return -1;
	if (PyCapsule_IsValid(d->capsule, CAP_V)) {
		DLManagedTensorVersioned *m = PyCapsule_GetPointer(d->capsule, CAP_V);

		if (m->version.major != DMT_DLPACK_MAJOR) {
			PyErr_Format(PyExc_BufferError, "DLPack %u.%u is not supported",
				     m->version.major, m->version.minor);
			goto err;
		}
		if (m->flags & DLPACK_FLAG_BITMASK_READ_ONLY) {
			PyErr_SetString(PyExc_BufferError, "dst is read-only");
			goto err;
		}
		d->managed = m;
		d->versioned = true;
		t = &m->dl_tensor;
		PyCapsule_SetName(d->capsule, USED_V);
	} else if (PyCapsule_IsValid(d->capsule, CAP_L)) {
		DLManagedTensor *m = PyCapsule_GetPointer(d->capsule, CAP_L);

		d->managed = m;
		t = &m->dl_tensor;
		PyCapsule_SetName(d->capsule, USED_L);
	} else {
		PyErr_SetString(PyExc_TypeError, "__dlpack__ did not return a DLPack capsule");
		goto err;
	}
	d->device = t->device;
	d->addr = (uint64_t)(uintptr_t)t->data + t->byte_offset;
	if (!compact(t, &d->nbytes)) {
		PyErr_SetString(PyExc_BufferError, "dst must be contiguous (C order)");
		goto err;
	}
	return 0;
err:
	dmtpy_dlpack_done(d);
	return -1;
}

/* Also on an error path: the producer's deleter may run Python code
 * (a finaliser, a ctypes callback), which must not see, or clear, the
 * exception being raised. */
void dmtpy_dlpack_done(struct dmt_dst *d)
{
	PyObject *t, *v, *tb;

	PyErr_Fetch(&t, &v, &tb);
	if (d->managed) {
		if (d->versioned) {
			DLManagedTensorVersioned *m = d->managed;

			if (m->deleter)
				m->deleter(m);
		} else {
			DLManagedTensor *m = d->managed;

			if (m->deleter)
				m->deleter(m);
		}
		d->managed = NULL;
	}
	Py_CLEAR(d->capsule);
	PyErr_Restore(t, v, tb);
}

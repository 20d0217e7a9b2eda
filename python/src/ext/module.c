// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/* The devmemtcp._devmemtcp module: errors, constants, argument helpers. */
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "zcrx.h"

PyObject *DmtError, *DmtTimeoutError;
PyTypeObject *Fragment_Type, *Queue_Type, *TxDone_Type;

PyObject *dmtpy_raise(int ret, const char *msg)
{
	int e = ret < 0 ? -ret : ret;
	PyObject *args, *str;

	if (!msg || !*msg)
		msg = strerror(e);
	/* msg is often a handle's: read it before allocating the tuple, which
	 * may run the garbage collector (Python code that may close it) */
	str = PyUnicode_FromString(msg);
	args = str ? Py_BuildValue("(iO)", e, str) : NULL;
	Py_XDECREF(str);
	if (args) {
		PyErr_SetObject(e == ETIMEDOUT ? DmtTimeoutError : DmtError, args);
		Py_DECREF(args);
	}
	return NULL;
}

PyObject *dmtpy_raise_ctx(int ret, const struct ctx_core *ctx)
{
	return dmtpy_raise(ret, devmemtcp_ctx_errmsg(ctx->ctx));
}

PyObject *dmtpy_closed(const char *what)
{
	PyErr_Format(PyExc_ValueError, "operation on a closed %s", what);
	return NULL;
}

struct ctx_core *dmtpy_ctx_get(PyObject *obj)
{
	if (!PyObject_TypeCheck(obj, &Context_Type)) {
		PyErr_Format(PyExc_TypeError, "expected a devmemtcp.Context, got %s",
			     Py_TYPE(obj)->tp_name);
		return NULL;
	}
	if (!((ContextObject *)obj)->core) {
		dmtpy_closed("Context");
		return NULL;
	}
	core_get(&((ContextObject *)obj)->core->c);
	return ((ContextObject *)obj)->core;
}

struct buf_core *dmtpy_buf_get(PyObject *obj)
{
	if (!PyObject_TypeCheck(obj, &Buffer_Type)) {
		PyErr_Format(PyExc_TypeError, "expected a devmemtcp.Buffer, got %s",
			     Py_TYPE(obj)->tp_name);
		return NULL;
	}
	if (!((BufferObject *)obj)->core) {
		dmtpy_closed("Buffer");
		return NULL;
	}
	core_get(&((BufferObject *)obj)->core->c);
	return ((BufferObject *)obj)->core;
}

int dmtpy_fd_of(PyObject *obj)
{
	return PyObject_AsFileDescriptor(obj);
}

int dmtpy_dup_sock(PyObject *sock)
{
	int fd = dmtpy_fd_of(sock);

	if (fd < 0)
		return -1;
	fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (fd < 0)
		PyErr_SetFromErrno(PyExc_OSError);
	return fd;
}

int dmtpy_new_failed(int ret, struct ctx_core *ctx, int fd)
{
	close(fd);
	if (ret)
		dmtpy_raise_ctx(ret, ctx);
	else
		PyErr_NoMemory();
	return -1;
}

int dmtpy_ifindex_of(PyObject *obj, char *name, size_t len)
{
	long idx;

	if (PyUnicode_Check(obj)) {
		const char *s = PyUnicode_AsUTF8(obj);

		if (!s)
			return 0;
		snprintf(name, len, "%s", s);
		idx = (long)if_nametoindex(s);
		if (!idx) {
			char msg[128];

			snprintf(msg, sizeof(msg), "no network interface named %s", s);
			dmtpy_raise(-ENODEV, msg);
		}
		return (int)idx;
	}
	idx = PyLong_AsLong(obj);
	if (idx == -1 && PyErr_Occurred())
		return 0;
	if (idx <= 0 || idx > INT32_MAX || !if_indextoname((unsigned)idx, name)) {
		PyErr_Format(PyExc_ValueError, "no network interface with index %ld", idx);
		return 0;
	}
	return (int)idx;
}

/* A stream handle from an int or a stream object of PyTorch, CuPy or
 * anything speaking the __cuda_stream__ protocol. */
int dmtpy_stream_of(PyObject *obj, void **stream, long long *dl)
{
	PyObject *v = NULL;
	long long s;

	*stream = NULL;
	*dl = -2;
	if (obj == Py_None)
		return 0;
	if (PyLong_Check(obj)) {
		v = Py_NewRef(obj);
	} else if (PyObject_HasAttrString(obj, "__cuda_stream__")) {
		/* a method returning (version, handle), or that tuple */
		PyObject *t = PyObject_GetAttrString(obj, "__cuda_stream__");

		if (t && PyCallable_Check(t))
			Py_SETREF(t, PyObject_CallNoArgs(t));
		if (!t)
			return -1;
		if (PyTuple_Check(t) && PyTuple_GET_SIZE(t) == 2)
			v = Py_NewRef(PyTuple_GET_ITEM(t, 1));
		Py_DECREF(t);
	} else if (PyObject_HasAttrString(obj, "cuda_stream")) {
		v = PyObject_GetAttrString(obj, "cuda_stream");
	} else if (PyObject_HasAttrString(obj, "ptr")) {
		v = PyObject_GetAttrString(obj, "ptr");
	}
	if (!v || !PyLong_Check(v)) {
		Py_XDECREF(v);
		if (!PyErr_Occurred())
			PyErr_Format(PyExc_TypeError,
				     "stream must be None, an int (a CUstream) or a stream object with .cuda_stream, .ptr or __cuda_stream__, not %s",
				     Py_TYPE(obj)->tp_name);
		return -1;
	}
	s = PyLong_AsLongLong(v);
	Py_DECREF(v);
	if (s == -1 && PyErr_Occurred())
		return -1;
	if (s < 0) {
		PyErr_SetString(PyExc_ValueError, "a stream handle is not negative");
		return -1;
	}
	*dl = s;
	/* DLPack's 1 (legacy default) is the driver's CU_STREAM_LEGACY and
	 * 2 its CU_STREAM_PER_THREAD: both valid CUstream values. */
	*stream = s == 0 ? NULL : (void *)(uintptr_t)s;
	return 0;
}

static PyObject *mod_version(PyObject *self, PyObject *unused)
{
	return PyUnicode_FromString(devmemtcp_version());
}

PyDoc_STRVAR(version_doc,
"version($module, /)\n--\n\n"
"The version of the libdevmemtcp library in use, e.g. '0.1.0'.");

static PyMethodDef module_methods[] = {
	{ "version", mod_version, METH_NOARGS, version_doc },
	{ NULL, NULL, 0, NULL },
};

PyDoc_STRVAR(module_doc,
"Receive TCP payload straight into device memory with Linux Device Memory TCP.\n\n"
"The C extension behind the devmemtcp package; import devmemtcp instead.");

static struct PyModuleDef moddef = {
	PyModuleDef_HEAD_INIT,
	.m_name = "devmemtcp._devmemtcp",
	.m_doc = module_doc,
	.m_size = -1,
	.m_methods = module_methods,
};

static PyStructSequence_Field fragment_fields[] = {
	{ "offset", "dma-buf offset (LINEAR: offset in Fragments.linear)" },
	{ "addr", "device (or, for host buffers, CPU) address; 0 if unknown" },
	{ "len", "bytes" },
	{ "token", "the kernel's token (0 for LINEAR)" },
	{ "binding_id", "dma-buf binding the bytes landed in" },
	{ "flags", "FRAG_LINEAR, FRAG_FOREIGN" },
	{ NULL, NULL },
};

static PyStructSequence_Desc fragment_desc = {
	"devmemtcp.Fragment",
	"One received fragment: where its bytes are.",
	fragment_fields, 6,
};

static PyStructSequence_Field queue_fields[] = {
	{ "id", "queue id" },
	{ "type", "QUEUE_RX or QUEUE_TX" },
	{ "ifindex", "interface index" },
	{ "napi_id", "NAPI instance, 0 if not reported" },
	{ "dmabuf_id", "binding id, 0 when no dma-buf is bound" },
	{ "io_uring", "an io_uring zcrx provider is installed" },
	{ "xsk", "an AF_XDP socket uses the queue" },
	{ NULL, NULL },
};

static PyStructSequence_Desc queue_desc = {
	"devmemtcp.Queue", "A NIC queue as the netdev family reports it.",
	queue_fields, 7,
};

static PyStructSequence_Field txdone_fields[] = {
	{ "offset", "dma-buf offset" },
	{ "len", "bytes" },
	{ "seq", "zero-copy sequence number of its sendmsg" },
	{ "flags", "TX_DONE_COPIED" },
	{ NULL, NULL },
};

static PyStructSequence_Desc txdone_desc = {
	"devmemtcp.TxDone", "A dma-buf range whose send completed.",
	txdone_fields, 4,
};

struct int_const {
	const char *name;
	long long value;
};

static const struct int_const constants[] = {
	{ "PROVIDER_UDMABUF", DEVMEMTCP_PROVIDER_UDMABUF },
	{ "PROVIDER_IMPORT", DEVMEMTCP_PROVIDER_IMPORT },
	{ "PROVIDER_CUDA", DEVMEMTCP_PROVIDER_CUDA },
	{ "PROVIDER_DRM", DEVMEMTCP_PROVIDER_DRM },
	{ "FRAG_LINEAR", DEVMEMTCP_FRAG_LINEAR },
	{ "PCI_SAME_SWITCH", DEVMEMTCP_PCI_SAME_SWITCH },
	{ "PCI_SAME_ROOT_PORT", DEVMEMTCP_PCI_SAME_ROOT_PORT },
	{ "PCI_SAME_NUMA", DEVMEMTCP_PCI_SAME_NUMA },
	{ "PCI_OTHER", DEVMEMTCP_PCI_OTHER },
	{ "FRAG_FOREIGN", DEVMEMTCP_FRAG_FOREIGN },
	{ "QUEUE_RX", DEVMEMTCP_QUEUE_RX },
	{ "QUEUE_TX", DEVMEMTCP_QUEUE_TX },
	{ "TX_DONE_COPIED", DEVMEMTCP_TX_DONE_COPIED },
	{ "LOG_OFF", DEVMEMTCP_LOG_OFF },
	{ "LOG_NONE", DEVMEMTCP_LOG_NONE },
	{ "LOG_ERR", DEVMEMTCP_LOG_ERR },
	{ "LOG_WARN", DEVMEMTCP_LOG_WARN },
	{ "LOG_INFO", DEVMEMTCP_LOG_INFO },
	{ "LOG_DEBUG", DEVMEMTCP_LOG_DEBUG },
	{ "kDLCPU", kDLCPU },
	{ "kDLCUDA", kDLCUDA },
};

static int add_constants(PyObject *m)
{
	for (size_t i = 0; i < sizeof(constants) / sizeof(constants[0]); i++)
		if (PyModule_AddObject(m, constants[i].name,
				       PyLong_FromLongLong(constants[i].value)))
			return -1;
	if (PyModule_AddObject(m, "RELEASE_ANY_THREAD",
			       PyBool_FromLong(DEVMEMTCP_RELEASE_ANY_THREAD)))
		return -1;
	return 0;
}

static PyTypeObject *new_structseq(PyObject *m, PyStructSequence_Desc *desc,
				   const char *name)
{
	PyTypeObject *t = PyStructSequence_NewType(desc);

	if (!t)
		return NULL;
	Py_INCREF(t);
	if (PyModule_AddObject(m, name, (PyObject *)t)) {
		Py_DECREF(t);
		return NULL;
	}
	return t;
}

int dmtpy_types_init(PyObject *m)
{
	static struct {
		PyTypeObject *t;
		const char *name;
	} types[] = {
		{ &Context_Type, "Context" }, { &Buffer_Type, "Buffer" },
		{ &Binding_Type, "Binding" }, { &Nic_Type, "Nic" },
		{ &Gpu_Type, "Gpu" }, { &Rx_Type, "Rx" }, { &Tx_Type, "Tx" },
		{ &Fragments_Type, "Fragments" }, { &dmtpy_Zcrx_Type, "Zcrx" },
	};

	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		if (PyType_Ready(types[i].t))
			return -1;
		Py_INCREF(types[i].t);
		if (PyModule_AddObject(m, types[i].name, (PyObject *)types[i].t)) {
			Py_DECREF(types[i].t);
			return -1;
		}
	}
	return 0;
}

PyDoc_STRVAR(error_doc,
"An error of libdevmemtcp: an OSError whose errno is the library's negative\n"
"return value, negated, and whose strerror is the library's message (the\n"
"kernel's extack text, if any, and what to fix).");

PyDoc_STRVAR(timeout_doc,
"A timeout expired (errno ETIMEDOUT): both a devmemtcp.Error and the builtin\n"
"TimeoutError, so `except TimeoutError` catches it as it does a socket's.");

PyMODINIT_FUNC PyInit__devmemtcp(void);

PyMODINIT_FUNC PyInit__devmemtcp(void)
{
	PyObject *m = PyModule_Create(&moddef);

	if (!m)
		return NULL;
	DmtError = PyErr_NewExceptionWithDoc("devmemtcp.Error", error_doc,
					     PyExc_OSError, NULL);
	if (!DmtError || PyModule_AddObject(m, "Error", Py_NewRef(DmtError)))
		goto err;
	{
		PyObject *bases = PyTuple_Pack(2, DmtError, PyExc_TimeoutError);

		DmtTimeoutError = bases ? PyErr_NewExceptionWithDoc(
			"devmemtcp.TimeoutError", timeout_doc, bases, NULL) : NULL;
		Py_XDECREF(bases);
	}
	if (!DmtTimeoutError ||
	    PyModule_AddObject(m, "TimeoutError", Py_NewRef(DmtTimeoutError)))
		goto err;
	Fragment_Type = new_structseq(m, &fragment_desc, "Fragment");
	Queue_Type = new_structseq(m, &queue_desc, "Queue");
	TxDone_Type = new_structseq(m, &txdone_desc, "TxDone");
	if (!Fragment_Type || !Queue_Type || !TxDone_Type)
		goto err;
	if (add_constants(m) || dmtpy_types_init(m))
		goto err;
#if DMT_PY_TEST_HOOKS
	if (PyModule_AddFunctions(m, dmtpy_test_methods))
		goto err;
#endif
	return m;
err:
	Py_DECREF(m);
	return NULL;
}

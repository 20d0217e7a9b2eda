// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/* Nic: the transactional NIC setup, probe and crash recovery. */
#include <errno.h>
#include <limits.h>
#include <string.h>

#include "common.h"

static void nic_destroy(struct core *c)
{
	struct nic_core *n = (struct nic_core *)c;

	devmemtcp_nic_close(n->nic);	/* its message goes to the log */
	core_put(n->buf ? &n->buf->c : NULL);
	core_put(&n->ctx->c);
	free(n);
	dmtpy_test_freed("Nic");
}

static int flows_of(PyObject *obj, struct devmemtcp_flow **flows, size_t *n)
{
	PyObject *seq;

	*flows = NULL;
	*n = 0;
	if (PyUnicode_Check(obj)) {
		PyErr_SetString(PyExc_TypeError,
				"flows is a list of strings such as ['tcp4 dst-port 5201']");
		return -1;
	}
	seq = PySequence_Fast(obj, "flows must be a sequence of strings");
	if (!seq)
		return -1;
	*n = (size_t)PySequence_Fast_GET_SIZE(seq);
	*flows = calloc(*n + 1, sizeof(**flows));
	if (!*flows) {
		Py_DECREF(seq);
		PyErr_NoMemory();
		return -1;
	}
	for (size_t i = 0; i < *n; i++) {
		const char *s = PyUnicode_AsUTF8(PySequence_Fast_GET_ITEM(seq, (Py_ssize_t)i));
		int ret;

		if (!s)
			break;
		ret = devmemtcp_flow_parse(s, &(*flows)[i]);
		if (ret) {
			/* what is wrong with it, kept for this thread */
			dmtpy_raise(ret, devmemtcp_ctx_errmsg(NULL));
			break;
		}
	}
	Py_DECREF(seq);
	if (PyErr_Occurred()) {
		free(*flows);
		*flows = NULL;
		return -1;
	}
	return 0;
}

static int queue_ids_of(PyObject *obj, uint32_t **q, uint32_t *n)
{
	PyObject *seq;

	*q = NULL;
	if (obj == Py_None)
		return 0;
	seq = PySequence_Fast(obj, "queues must be a sequence of queue ids");
	if (!seq)
		return -1;
	*n = (uint32_t)PySequence_Fast_GET_SIZE(seq);
	*q = calloc(*n + 1, sizeof(**q));
	for (uint32_t i = 0; *q && i < *n; i++)
		(*q)[i] = (uint32_t)PyLong_AsUnsignedLong(PySequence_Fast_GET_ITEM(seq, i));
	Py_DECREF(seq);
	if (!*q)
		PyErr_NoMemory();
	if (PyErr_Occurred()) {
		free(*q);
		*q = NULL;
		return -1;
	}
	return 0;
}

struct nic_args {
	PyObject *ctx, *queues, *flows, *buf;
	unsigned int nqueues, page;
	int recover, rss_context, keep_rss, verify;
	const char *ifname, *run_dir;
};

static int nic_open(NicObject *self, struct ctx_core *ctx, struct buf_core *buf,
		    const struct nic_args *a, uint32_t *q,
		    struct devmemtcp_flow *flows, size_t nflows)
{
	struct devmemtcp_nic *nic = NULL;
	struct nic_core *core;
	int ret;
	DEVMEMTCP_OPTS(bind_opts, bo, .rx_page_size = a->page,
		       .no_verify = !a->verify);
	DEVMEMTCP_OPTS(nic_opts, o, .queues = q, .nqueues = a->nqueues,
		       .flows = flows, .nflows = nflows,
		       .buf = buf ? buf->buf : NULL, .bind_opts = &bo,
		       .run_dir = a->run_dir);

	o.flags = (a->recover ? DEVMEMTCP_NIC_RECOVER : 0) |
		  (a->rss_context ? 0 : DEVMEMTCP_NIC_NO_RSS_CONTEXT) |
		  (a->keep_rss ? DEVMEMTCP_NIC_KEEP_RSS : 0);
	Py_BEGIN_ALLOW_THREADS
	dmtpy_test_point("Nic()");
	ret = devmemtcp_nic_open(ctx->ctx, a->ifname, &o, &nic);
	Py_END_ALLOW_THREADS
	if (ret) {
		dmtpy_raise_ctx(ret, ctx);
		return -1;
	}
	core = calloc(1, sizeof(*core));
	if (!core) {
		devmemtcp_nic_close(nic);
		PyErr_NoMemory();
		return -1;
	}
	core_init(&core->c, nic_destroy);
	core_get(&ctx->c);
	if (buf)
		core_get(&buf->c);
	core->ctx = ctx;
	core->buf = buf;
	core->nic = nic;
	self->core = core;
	return 0;
}

/* A CUDA device number: >= 0, -2 when negative or too large, -1 with an
 * exception raised when not an int. */
static int gpu_number(PyObject *o)
{
	long v = PyLong_AsLong(o);

	if (v == -1 && PyErr_Occurred())
		return -1;
	return v < 0 || v > INT_MAX ? -2 : (int)v;
}

static int Nic_init(NicObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "ctx", "ifname", "queues", "nqueues", "flows",
				  "buf", "recover", "rss_context", "keep_rss",
				  "run_dir", "rx_page_size", "verify", "near_gpu", NULL };
	struct nic_args a = { .rss_context = 1, .verify = 1 };
	struct devmemtcp_nic_rank near;
	PyObject *near_obj = Py_None;
	int near_gpu = -1;
	struct devmemtcp_flow *flows = NULL;
	struct buf_core *buf = NULL;
	struct ctx_core *ctx;
	uint32_t *q = NULL;
	size_t nflows = 0;
	int ret = -1;

	a.queues = a.buf = Py_None;
	a.flows = NULL;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "O|z$OIOOpppzIpO:Nic", kwlist,
					 &a.ctx, &a.ifname, &a.queues,
					 &a.nqueues, &a.flows, &a.buf,
					 &a.recover, &a.rss_context,
					 &a.keep_rss, &a.run_dir, &a.page,
					 &a.verify, &near_obj))
		return -1;
	if (near_obj != Py_None) {
		near_gpu = gpu_number(near_obj);
		if (near_gpu == -1 && PyErr_Occurred())
			return -1;
		if (near_gpu < 0) {
			PyErr_SetString(PyExc_ValueError, "near_gpu is a CUDA device number (0, 1, ...)");
			return -1;
		}
	}
	if (!a.ifname == (near_gpu < 0)) {
		PyErr_SetString(PyExc_TypeError,
				"Nic needs ifname or near_gpu=N (a CUDA device: the interface nearest it), not both");
		return -1;
	}
	/* held through the other arguments' conversion (Python code) and the
	 * setup without the GIL; the Nic takes references of its own */
	ctx = dmtpy_ctx_get(a.ctx);
	if (!ctx || (a.buf != Py_None && !(buf = dmtpy_buf_get(a.buf))))
		goto out;
	if (near_gpu >= 0) {
		int n;

		Py_BEGIN_ALLOW_THREADS
		n = devmemtcp_nic_near_gpu(ctx->ctx, near_gpu, &near, 1);
		Py_END_ALLOW_THREADS
		if (n < 0) {
			dmtpy_raise_ctx(n, ctx);
			goto out;
		}
		if (n == 0) {
			dmtpy_raise(-ENODEV, "Nic(near_gpu=...): no network interface on PCI: name one (ifname)");
			goto out;
		}
		a.ifname = near.ifname;
	}
	if (dmt_fresh((PyObject *)self, "Nic"))
		goto out;
	if (queue_ids_of(a.queues, &q, &a.nqueues) ||
	    (a.flows && flows_of(a.flows, &flows, &nflows)))
		goto out;
	ret = nic_open(self, ctx, buf, &a, q, flows, nflows);
	if (!ret && buf)
		Py_XSETREF(self->buffer, Py_NewRef(a.buf));
out:
	free(q);
	free(flows);
	core_put(buf ? &buf->c : NULL);
	core_put(ctx ? &ctx->c : NULL);
	return ret;
}

static void Nic_dealloc(NicObject *self)
{
	Py_CLEAR(self->buffer);
	dmtpy_any_dealloc((PyObject *)self);
}

/* Drop a call's reference without the GIL: when a close() meanwhile left
 * it the last, the undo (netlink round trips, the journal) runs here. */
static void nic_put(struct nic_core *n)
{
	Py_BEGIN_ALLOW_THREADS
	core_put(&n->c);
	Py_END_ALLOW_THREADS
}

/* Undo now and report the first undo error, unless a call on this handle
 * is running (another thread's): then whoever finishes last closes it,
 * and its errors go to the library's log. */
static PyObject *Nic_close(PyObject *self, PyObject *unused)
{
	struct nic_core *n = (struct nic_core *)((AnyObject *)self)->core;
	int ret;

	((AnyObject *)self)->core = NULL;
	if (!n)
		Py_RETURN_NONE;
	if (atomic_load(&n->c.refs) != 1) {
		nic_put(n);
		Py_RETURN_NONE;
	}
	Py_BEGIN_ALLOW_THREADS
	ret = devmemtcp_nic_close(n->nic);
	Py_END_ALLOW_THREADS
	n->nic = NULL;
	if (ret)
		dmtpy_raise_ctx(ret, n->ctx);
	core_put(&n->c);
	if (ret)
		return NULL;
	Py_RETURN_NONE;
}

static PyObject *Nic_add_flow(PyObject *self, PyObject *args)
{
	struct nic_core *n = dmt_core_get(self, "Nic");
	struct devmemtcp_flow *flow;
	PyObject *text, *list;
	char msg[1024] = "";
	size_t cnt;
	int ret;

	if (!n)
		return NULL;
	if (!PyArg_ParseTuple(args, "U:add_flow", &text) ||
	    !(list = PyTuple_Pack(1, text))) {
		nic_put(n);
		return NULL;
	}
	ret = flows_of(list, &flow, &cnt);
	Py_DECREF(list);
	if (ret) {
		nic_put(n);
		return NULL;
	}
	Py_BEGIN_ALLOW_THREADS
	ret = devmemtcp_nic_add_flow(n->nic, flow);
	if (ret < 0)
		snprintf(msg, sizeof(msg), "%s", devmemtcp_nic_errmsg(n->nic));
	core_put(&n->c);
	Py_END_ALLOW_THREADS
	free(flow);
	return ret < 0 ? dmtpy_raise(ret, msg) : PyLong_FromLong(ret);
}

static PyObject *Nic_remove_flow(PyObject *self, PyObject *args)
{
	struct nic_core *n = dmt_core_get(self, "Nic");
	char msg[1024] = "";
	int id, ret;

	if (!n)
		return NULL;
	if (!PyArg_ParseTuple(args, "i:remove_flow", &id)) {
		nic_put(n);
		return NULL;
	}
	Py_BEGIN_ALLOW_THREADS
	ret = devmemtcp_nic_remove_flow(n->nic, id);
	if (ret < 0)
		snprintf(msg, sizeof(msg), "%s", devmemtcp_nic_errmsg(n->nic));
	core_put(&n->c);
	Py_END_ALLOW_THREADS
	if (ret < 0)
		return dmtpy_raise(ret, msg);
	Py_RETURN_NONE;
}

static const struct dmt_field nic_stats_fields[] = {
	DMT_F(struct devmemtcp_nic_stats, setup_round_trips, 'Q'),
	DMT_F(struct devmemtcp_nic_stats, setup_ioctls, 'Q'),
	DMT_F(struct devmemtcp_nic_stats, round_trips, 'Q'),
	DMT_F(struct devmemtcp_nic_stats, ioctls, 'Q'),
	DMT_F(struct devmemtcp_nic_stats, steps, 'I'),
	DMT_F(struct devmemtcp_nic_stats, rules, 'I'),
	DMT_F(struct devmemtcp_nic_stats, rss_context, 'I'),
};

static PyObject *Nic_stats(PyObject *self, PyObject *unused)
{
	struct nic_core *n = dmt_core(self, "Nic");
	struct devmemtcp_nic_stats st = { .sz = sizeof(st) };
	char msg[1024] = "";
	int ret;

	if (!n)
		return NULL;
	ret = devmemtcp_nic_stats(n->nic, &st);
	if (ret) {
		/* a copy: raising allocates, which may run Python code */
		snprintf(msg, sizeof(msg), "%s", devmemtcp_nic_errmsg(n->nic));
		return dmtpy_raise(ret, msg);
	}
	return dmtpy_fields_dict(&st, nic_stats_fields,
			       sizeof(nic_stats_fields) / sizeof(nic_stats_fields[0]));
}

static PyObject *Nic_get_queues(PyObject *self, void *closure)
{
	/* held: the allocations below may run the garbage collector's
	 * callbacks (Python code), and q is the handle's */
	struct nic_core *n = dmt_core_get(self, "Nic");
	const uint32_t *q;
	PyObject *t;
	int cnt;

	if (!n)
		return NULL;
	cnt = devmemtcp_nic_queues(n->nic, &q);
	if (cnt < 0) {
		t = dmtpy_raise(cnt, devmemtcp_nic_errmsg(n->nic));
	} else {
		t = PyTuple_New(cnt);
		for (int i = 0; t && i < cnt; i++)
			PyTuple_SET_ITEM(t, i, PyLong_FromUnsignedLong(q[i]));
	}
	nic_put(n);
	return t;
}

static PyObject *Nic_get_binding_id(PyObject *self, void *closure)
{
	struct nic_core *n = dmt_core(self, "Nic");
	struct devmemtcp_binding *b;

	if (!n)
		return NULL;
	b = devmemtcp_nic_binding(n->nic);
	return PyLong_FromUnsignedLong(b ? devmemtcp_binding_id(b) : 0);
}

static PyObject *Nic_get_buffer(PyObject *self, void *closure)
{
	PyObject *b = ((NicObject *)self)->buffer;

	return Py_NewRef(b ? b : Py_None);
}

static const struct dmt_field probe_fields[] = {
	DMT_F(struct devmemtcp_probe, ifname, 's'),
	DMT_F(struct devmemtcp_probe, ifindex, 'i'),
	DMT_F(struct devmemtcp_probe, kernel, 's'),
	DMT_F(struct devmemtcp_probe, has_netdev_family, 'b'),
	DMT_F(struct devmemtcp_probe, has_bind_rx, 'b'),
	DMT_F(struct devmemtcp_probe, has_bind_tx, 'b'),
	DMT_F(struct devmemtcp_probe, driver, 's'),
	DMT_F(struct devmemtcp_probe, driver_version, 's'),
	DMT_F(struct devmemtcp_probe, bus_info, 's'),
	DMT_F(struct devmemtcp_probe, rx_queues, 'i'),
	DMT_F(struct devmemtcp_probe, tx_queues, 'i'),
	DMT_F(struct devmemtcp_probe, tcp_data_split, 'i'),
	DMT_F(struct devmemtcp_probe, hds_thresh, 'q'),
	DMT_F(struct devmemtcp_probe, hds_thresh_max, 'q'),
	DMT_F(struct devmemtcp_probe, ntuple, 'i'),
	DMT_F(struct devmemtcp_probe, ntuple_fixed, 'i'),
	DMT_F(struct devmemtcp_probe, ntuple_rules, 'i'),
	DMT_F(struct devmemtcp_probe, ntuple_table_size, 'i'),
	DMT_F(struct devmemtcp_probe, rss_table_size, 'i'),
	DMT_F(struct devmemtcp_probe, rss_contexts, 'i'),
	DMT_F(struct devmemtcp_probe, rss_context_count, 'i'),
	DMT_F(struct devmemtcp_probe, xdp, 'b'),
	DMT_F(struct devmemtcp_probe, xsk_queues, 'i'),
	DMT_F(struct devmemtcp_probe, dmabuf_queues, 'i'),
	DMT_F(struct devmemtcp_probe, io_uring_queues, 'i'),
	DMT_F(struct devmemtcp_probe, udmabuf_limit_mb, 'q'),
	DMT_F(struct devmemtcp_probe, cap_net_admin, 'b'),
	DMT_F(struct devmemtcp_probe, optmem_max, 'q'),
	DMT_F(struct devmemtcp_probe, try_bind, 'i'),
	DMT_F(struct devmemtcp_probe, try_bind_msg, 's'),
};

static PyObject *Nic_probe(PyObject *cls, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "ctx", "ifname", "try_bind", NULL };
	struct devmemtcp_probe *r;
	struct ctx_core *ctx;
	PyObject *ctxobj, *d, *problems;
	const char *ifname;
	int try_bind = 0, ret;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "Os|$p:probe", kwlist,
					 &ctxobj, &ifname, &try_bind))
		return NULL;
	r = calloc(1, sizeof(*r));
	if (!r)
		return PyErr_NoMemory();
	r->sz = sizeof(*r);
	ctx = dmtpy_ctx_get(ctxobj);	/* held through the probe, without the GIL */
	if (!ctx) {
		free(r);
		return NULL;
	}
	{
		DEVMEMTCP_OPTS(probe_opts, o,
			       .flags = try_bind ? DEVMEMTCP_PROBE_TRY_BIND : 0);

		Py_BEGIN_ALLOW_THREADS
		dmtpy_test_point("Nic.probe");
		ret = devmemtcp_nic_probe(ctx->ctx, ifname, &o, r);
		Py_END_ALLOW_THREADS
	}
	if (ret < 0)
		dmtpy_raise_ctx(ret, ctx);
	core_put(&ctx->c);
	if (ret < 0) {
		free(r);
		return NULL;
	}
	d = dmtpy_fields_dict(r, probe_fields,
			    sizeof(probe_fields) / sizeof(probe_fields[0]));
	problems = d ? PyList_New(0) : NULL;
	for (uint32_t i = 0; problems && i < r->nproblems &&
			     i < DEVMEMTCP_PROBE_MAX_PROBLEMS; i++) {
		PyObject *p = Py_BuildValue("(ss)", r->problems[i].what,
					    r->problems[i].fix);

		if (!p || PyList_Append(problems, p))
			Py_CLEAR(problems);
		Py_XDECREF(p);
	}
	free(r);
	if (!problems || PyDict_SetItemString(d, "problems", problems)) {
		Py_XDECREF(problems);
		Py_XDECREF(d);
		return NULL;
	}
	Py_DECREF(problems);
	return d;
}

static PyObject *Nic_rank(PyObject *cls, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "ctx", "pci", "gpu", NULL };
	struct devmemtcp_nic_rank r[64];
	const char *pci = NULL;
	struct ctx_core *ctx;
	PyObject *ctxobj, *list, *gpu_obj = Py_None;
	int gpu = -1, n;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "O|$zO:rank", kwlist,
					 &ctxobj, &pci, &gpu_obj))
		return NULL;
	if (gpu_obj != Py_None) {
		gpu = gpu_number(gpu_obj);
		if (gpu == -1 && PyErr_Occurred())
			return NULL;
		if (gpu < 0) {
			PyErr_SetString(PyExc_ValueError, "gpu is a CUDA device number (0, 1, ...)");
			return NULL;
		}
	}
	if (!pci == (gpu < 0)) {
		PyErr_SetString(PyExc_TypeError,
				"rank needs pci='0000:1b:00.0' or gpu=N, not both");
		return NULL;
	}
	ctx = dmtpy_ctx_get(ctxobj);
	if (!ctx)
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	n = pci ? devmemtcp_nic_rank(ctx->ctx, pci, r, 64)
		: devmemtcp_nic_near_gpu(ctx->ctx, gpu, r, 64);
	Py_END_ALLOW_THREADS
	if (n < 0)
		dmtpy_raise_ctx(n, ctx);
	core_put(&ctx->c);
	if (n < 0)
		return NULL;
	list = PyList_New(0);
	for (int i = 0; list && i < n && i < 64; i++) {
		PyObject *t = Py_BuildValue("(ssii)", r[i].ifname, r[i].pci,
					    r[i].distance, r[i].numa_node);

		if (!t || PyList_Append(list, t))
			Py_CLEAR(list);
		Py_XDECREF(t);
	}
	return list;
}

static PyObject *Nic_recover(PyObject *cls, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "ctx", "ifname", "run_dir", NULL };
	const char *ifname, *run_dir = NULL;
	struct ctx_core *ctx;
	PyObject *ctxobj;
	int ret;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "Os|$z:recover", kwlist,
					 &ctxobj, &ifname, &run_dir) ||
	    !(ctx = dmtpy_ctx_get(ctxobj)))	/* held through the recovery */
		return NULL;
	{
		DEVMEMTCP_OPTS(nic_opts, o, .run_dir = run_dir);

		Py_BEGIN_ALLOW_THREADS
		dmtpy_test_point("Nic.recover");
		ret = devmemtcp_nic_recover(ctx->ctx, ifname, &o);
		Py_END_ALLOW_THREADS
	}
	if (ret < 0)
		dmtpy_raise_ctx(ret, ctx);
	core_put(&ctx->c);
	return ret < 0 ? NULL : PyBool_FromLong(ret);
}

static PyMethodDef Nic_methods[] = {
	{ "close", Nic_close, METH_NOARGS,
	  "close($self, /)\n--\n\n"
	  "Undo every change this handle made, in reverse order (the binding\n"
	  "first).  Raises Error with the first undo error; the rest is undone\n"
	  "anyway.  While a call on this Nic runs on another thread, the undo\n"
	  "waits for it and runs when it returns, its errors going to the\n"
	  "library's log.  Further use raises ValueError." },
	DMT_ENTER_METHOD,
	{ "__exit__", dmtpy_any_exit, METH_VARARGS, "__exit__($self, *exc, /)\n--\n\nclose()." },
	{ "add_flow", Nic_add_flow, METH_VARARGS,
	  "add_flow($self, flow, /)\n--\n\n"
	  "Steer one more flow ('tcp4 dst-port 5202'); returns its id." },
	{ "remove_flow", Nic_remove_flow, METH_VARARGS,
	  "remove_flow($self, flow_id, /)\n--\n\nRemove a flow added by add_flow() or open." },
	{ "stats", Nic_stats, METH_NOARGS,
	  "stats($self, /)\n--\n\n"
	  "Netlink round trips and ioctls of the setup and since, changes applied,\n"
	  "rules owned, RSS context: a dict." },
	{ "probe", (PyCFunction)(void (*)(void))Nic_probe,
	  METH_VARARGS | METH_KEYWORDS | METH_STATIC,
	  "probe(ctx, ifname, *, try_bind=False)\n--\n\n"
	  "What stands between ifname and devmem TCP, as a dict of the report's\n"
	  "fields plus 'problems': [(what, fix), ...].  try_bind binds a small\n"
	  "udmabuf to the last RX queue and releases it (the only sure test)." },
	{ "rank", (PyCFunction)(void (*)(void))Nic_rank,
	  METH_VARARGS | METH_KEYWORDS | METH_STATIC,
	  "rank(ctx, *, pci=None, gpu=None)\n--\n\n"
	  "The network interfaces on PCI, nearest the PCI function pci or CUDA\n"
	  "device gpu first: [(ifname, pci, distance, numa_node), ...]; distance\n"
	  "is PCI_SAME_SWITCH, PCI_SAME_ROOT_PORT, PCI_SAME_NUMA or PCI_OTHER." },
	{ "recover", (PyCFunction)(void (*)(void))Nic_recover,
	  METH_VARARGS | METH_KEYWORDS | METH_STATIC,
	  "recover(ctx, ifname, *, run_dir=None)\n--\n\n"
	  "Undo the changes a dead process left on ifname (its journal); True\n"
	  "when something was undone.  Raises Error(EBUSY) if the owner lives." },
	{ NULL, NULL, 0, NULL },
};

static PyGetSetDef Nic_getset[] = {
	DMT_CLOSED_GETSET,
	{ "queues", Nic_get_queues, NULL, "The devmem RX queue ids.", NULL },
	{ "binding_id", Nic_get_binding_id, NULL,
	  "Id of the binding made by open (0 without buf); for Rx.add_buf().", NULL },
	{ "buffer", Nic_get_buffer, NULL, "The bound Buffer, or None.", NULL },
	{ NULL, NULL, NULL, NULL, NULL },
};

PyDoc_STRVAR(Nic_doc,
"Nic(ctx, ifname=None, *, queues=None, nqueues=0, flows=(), buf=None,\n"
"    recover=False, rss_context=True, keep_rss=False, run_dir=None,\n"
"    rx_page_size=0, verify=True, near_gpu=None)\n--\n\n"
"Prepare a NIC for devmem TCP in one step: header split on, hds-thresh 0,\n"
"RSS kept off the devmem queues (the ids in `queues`, else the last\n"
"`nqueues`, default 1), one ntuple rule per flow ('tcp4 dst-ip 10.0.0.2\n"
"dst-port 5201'), and buf bound to the queues.  close() (or the end of a\n"
"with block) undoes exactly these changes.  A journal under run_dir\n"
"(default /run/devmemtcp) lets Nic.recover() undo a crashed process's\n"
"changes; recover=True does that first.  Needs CAP_NET_ADMIN.\n"
"near_gpu=N instead of ifname takes the interface nearest CUDA device N\n"
"over PCIe (Nic.rank(ctx, gpu=N)[0]).");

PyTypeObject Nic_Type = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "devmemtcp.Nic",
	.tp_basicsize = sizeof(NicObject),
	.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
	.tp_doc = Nic_doc,
	.tp_new = PyType_GenericNew,
	.tp_init = (initproc)Nic_init,
	.tp_dealloc = (destructor)Nic_dealloc,
	.tp_methods = Nic_methods,
	.tp_getset = Nic_getset,
};

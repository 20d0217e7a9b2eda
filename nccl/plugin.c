// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The exported tables, ncclNetPlugin_v8 .. ncclNetPlugin_v11, each a thin
 * adapter over one implementation: init and finalize, devices and their
 * properties, and the argument conversions between versions (int sizes in
 * v8, profiler handles in v10+, a per-communicator context in v11).
 */
#include <errno.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plugin.h"
#include "unpack.h"

#define DMTN_EXPORT __attribute__((visibility("default")))

struct dmtn_global dmtn = { .lock = PTHREAD_MUTEX_INITIALIZER };

void dmtn_log(enum nccl_log_level level, unsigned long flags, const char *fn,
	      int line, const char *fmt, ...)
{
	nccl_logger_t log = __atomic_load_n(&dmtn.log, __ATOMIC_ACQUIRE);
	char msg[1024];
	va_list ap;

	if (!log)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log(level, flags, fn, line, "NET/" DMTN_NAME ": %s", msg);
}

/* ---- init and finalize -------------------------------------------------- */

static nccl_result_t global_init(nccl_logger_t log, bool legacy)
{
	nccl_result_t ret = NCCL_OK;

	pthread_mutex_lock(&dmtn.lock);
	if (log && !dmtn.log)
		__atomic_store_n(&dmtn.log, log, __ATOMIC_RELEASE);
	if (legacy)
		dmtn.legacy = true;
	if (dmtn.initialized)
		goto out;
	if (dmtn_cfg_read(&dmtn.cfg)) {
		ret = NCCL_ERR_INVALID_USAGE;
		goto out;
	}
	dmtn.ndev = dmtn_devices_find(&dmtn.cfg, dmtn.dev, DMTN_MAX_DEVS);
	if (dmtn.ndev <= 0) {
		DMTN_WARN("no usable interface%s%s: set NCCL_DEVMEMTCP_IFNAME to an interface that is up and has an IP address",
			  dmtn.cfg.ifname[0] ? " matches NCCL_DEVMEMTCP_IFNAME=" : "",
			  dmtn.cfg.ifname);
		ret = NCCL_ERR_SYSTEM;
		goto out;
	}
	/* NCCL calls init from the thread of the rank's GPU */
	if (!dmtn.cfg.ifname[0] && dmtn.ndev > 1)
		dmtn.ndev = dmtn_devices_near_gpu(dmtn.dev, dmtn.ndev);
	dmtn_unpack_decide();
	for (int i = 0; i < dmtn.ndev; i++) {
		struct dmtn_dev *d = &dmtn.dev[i];
		char addr[INET6_ADDRSTRLEN];

		getnameinfo((struct sockaddr *)&d->addr, d->addrlen, addr,
			    sizeof(addr), NULL, 0, NI_NUMERICHOST);
		d->devmem = dmtn.cfg.devmem && dmtn_devmem_probe(d);
		DMTN_INFO(DMTN_INIT_NET, "dev %d: %s %s, %d Mbps, %s", i,
			  d->name, addr, d->speed,
			  d->devmem ? "devmem TCP enabled"
			  : dmtn.cfg.devmem ? "plain TCP (the interface cannot do devmem, see above)"
					    : "plain TCP (NCCL_DEVMEMTCP_ENABLE is not set)");
	}
	if (dmtn.cfg.devmem && dmtn.cfg.rx)
		DMTN_INFO(DMTN_INIT_NET, "received fragments reach NCCL's buffers %s: %s",
			  dmtn.unpack ? "through NCCL's device unpack"
				      : "through the plugin's own gather",
			  dmtn.unpack_why);
	dmtn.pid = getpid();
	dmtn.initialized = true;
out:
	pthread_mutex_unlock(&dmtn.lock);
	return ret;
}

/* Undo every NIC change and forget the devices; called with the lock.  A
 * forked child (a data-loader worker, say) that gets here leaves the NICs
 * alone: they are its parent's. */
static void global_teardown(void)
{
	if (!dmtn.initialized)
		return;
	dmtn_stage_teardown();
	for (int i = 0; dmtn.pid == getpid() && i < dmtn.ndev; i++)
		dmtn_devmem_teardown(&dmtn.dev[i]);
	dmtn_devices_free(dmtn.dev, dmtn.ndev);
	dmtn.ndev = 0;
	dmtn.initialized = false;
}

/* NCCL may dlclose the plugin after the last finalize, and tables before
 * v11 have no finalize at all: leave the NICs as found either way. */
__attribute__((destructor)) static void dmtn_unload(void)
{
	pthread_mutex_lock(&dmtn.lock);
	global_teardown();
	pthread_mutex_unlock(&dmtn.lock);
}

static nccl_result_t init_v8(nccl_logger_t log)
{
	return global_init(log, true);
}

static nccl_result_t init_v10(nccl_logger_t log, nccl_profiler_cb_t prof)
{
	return global_init(log, true);
}

static nccl_result_t init_v11(void **ctxp, uint64_t comm_id,
			      struct nccl_net_comm_config *config,
			      nccl_logger_t log, nccl_profiler_cb_t prof)
{
	struct dmtn_ctx *ctx;
	nccl_result_t ret;

	if (!ctxp)
		return NCCL_ERR_INTERNAL;
	*ctxp = NULL;
	ctx = calloc(1, sizeof(*ctx));
	if (!ctx)
		return NCCL_ERR_SYSTEM;
	ret = global_init(log, false);
	if (ret) {
		free(ctx);
		return ret;
	}
	ctx->magic = DMTN_CTX_MAGIC;
	ctx->comm_id = comm_id;
	ctx->traffic_class = config ? config->traffic_class
				    : NCCL_NET_TRAFFIC_CLASS_UNDEF;
	pthread_mutex_lock(&dmtn.lock);
	dmtn.contexts++;
	pthread_mutex_unlock(&dmtn.lock);
	DMTN_INFO(NCCL_SUBSYS_NET, "context for communicator %#llx%s",
		  (unsigned long long)comm_id,
		  ctx->traffic_class != NCCL_NET_TRAFFIC_CLASS_UNDEF
			  ? ", with a traffic class" : "");
	*ctxp = ctx;
	return NCCL_OK;
}

static struct dmtn_ctx *ctx_get(void *p, const char *fn)
{
	struct dmtn_ctx *ctx = p;

	if (!ctx || ctx->magic != DMTN_CTX_MAGIC) {
		DMTN_WARN("%s: %p is not a context returned by init", fn, p);
		return NULL;
	}
	return ctx;
}

static nccl_result_t finalize_v11(void *p)
{
	struct dmtn_ctx *ctx = ctx_get(p, __func__);

	if (!ctx)
		return NCCL_ERR_INTERNAL;
	ctx->magic = 0;
	free(ctx);
	pthread_mutex_lock(&dmtn.lock);
	if (--dmtn.contexts == 0 && !dmtn.legacy)
		global_teardown();
	pthread_mutex_unlock(&dmtn.lock);
	return NCCL_OK;
}

static nccl_result_t set_net_attr_v11(void *p, struct nccl_net_attr *attr)
{
	/* Hints on concurrency per peer: one flow per connection here. */
	return ctx_get(p, __func__) && attr ? NCCL_OK : NCCL_ERR_INTERNAL;
}

/* ---- devices and properties --------------------------------------------- */

static nccl_result_t devices(int *ndev)
{
	if (!ndev)
		return NCCL_ERR_INTERNAL;
	*ndev = dmtn.ndev;
	return NCCL_OK;
}

/* Fill the fields every version has; v9+ fields through the v11 struct. */
static nccl_result_t props_get(int dev, struct nccl_net_props_v11 *p)
{
	const struct dmtn_dev *d;

	if (!p)
		return NCCL_ERR_INTERNAL;
	if (dev < 0 || dev >= dmtn.ndev) {
		DMTN_WARN("getProperties: no device %d (there are %d)", dev,
			  dmtn.ndev);
		return NCCL_ERR_INVALID_ARGUMENT;
	}
	d = &dmtn.dev[dev];
	memset(p, 0, sizeof(*p));
	p->name = (char *)d->name;
	p->pci_path = d->pci_path;
	p->guid = (uint64_t)d->ifindex;
	p->ptr_support = NCCL_PTR_HOST;
	/* CUDA buffers: devmem gathers into them; without devmem they go
	 * through a host copy, on request only. */
	if (d->devmem || dmtn.cfg.cuda_ptr)
		p->ptr_support |= NCCL_PTR_CUDA | NCCL_PTR_DMABUF;
	p->speed = d->speed;
	p->max_comms = 65536;
	p->max_recvs = dmtn.cfg.max_recvs;
	p->net_device_type = NCCL_NET_DEVICE_HOST;
	p->net_device_version = NCCL_NET_DEVICE_INVALID_VERSION;
	if (dmtn_dev_unpack(d)) {
		/* one buffer per receive: a queue slot is one receive */
		p->max_recvs = 1;
		p->net_device_type = NCCL_NET_DEVICE_UNPACK;
		p->net_device_version = NCCL_NET_DEVICE_UNPACK_VERSION;
	}
	p->vprops.ndevs = 1;
	p->vprops.devs[0] = dev;
	p->max_p2p_bytes = NCCL_MAX_NET_SIZE_BYTES;
	p->max_coll_bytes = NCCL_MAX_NET_SIZE_BYTES;
	p->max_multi_request_size = 1;
	return NCCL_OK;
}

static nccl_result_t get_properties_v11(int dev, struct nccl_net_props_v11 *p)
{
	return props_get(dev, p);
}

static nccl_result_t get_properties_v9(int dev, struct nccl_net_props_v9 *p)
{
	struct nccl_net_props_v11 q;
	nccl_result_t ret = props_get(dev, &q);

	if (ret)
		return ret;
	/* v9 and v10 are v11 without its last field */
	memcpy(p, &q, sizeof(*p));
	return NCCL_OK;
}

static nccl_result_t get_properties_v8(int dev, struct nccl_net_props_v8 *p)
{
	struct nccl_net_props_v11 q;
	nccl_result_t ret = props_get(dev, &q);

	if (ret)
		return ret;
	*p = (struct nccl_net_props_v8){
		.name = q.name,
		.pci_path = q.pci_path,
		.guid = q.guid,
		.ptr_support = q.ptr_support,
		.reg_is_global = q.reg_is_global,
		.speed = q.speed,
		.port = q.port,
		.latency = q.latency,
		.max_comms = q.max_comms,
		.max_recvs = q.max_recvs,
		.net_device_type = q.net_device_type,
		.net_device_version = q.net_device_version,
	};
	return NCCL_OK;
}

/* ---- connection setup adapters ------------------------------------------ */

static nccl_result_t listen_v11(void *ctx, int dev, void *handle, void **lc)
{
	if (!ctx_get(ctx, __func__))
		return NCCL_ERR_INTERNAL;
	return dmtn_listen(dev, handle, lc);
}

static nccl_result_t connect_v8(int dev, void *handle, void **sc,
				nccl_dev_handle_t **sdc)
{
	return dmtn_connect(dev, NCCL_NET_TRAFFIC_CLASS_UNDEF, handle, sc);
}

static nccl_result_t connect_v10(int dev, struct nccl_net_comm_config *config,
				 void *handle, void **sc,
				 nccl_dev_handle_t **sdc)
{
	return dmtn_connect(dev,
			    config ? config->traffic_class
				   : NCCL_NET_TRAFFIC_CLASS_UNDEF,
			    handle, sc);
}

static nccl_result_t connect_v11(void *p, int dev, void *handle, void **sc,
				 nccl_dev_handle_t **sdc)
{
	struct dmtn_ctx *ctx = ctx_get(p, __func__);

	if (!ctx)
		return NCCL_ERR_INTERNAL;
	return dmtn_connect(dev, ctx->traffic_class, handle, sc);
}

static nccl_result_t accept_any(void *lc, void **rc, nccl_dev_handle_t **rdc)
{
	return dmtn_accept(lc, rc, rdc);
}

/* ---- data path adapters ------------------------------------------------- */

static nccl_result_t isend_v8(void *sc, void *data, int size, int tag,
			      void *mh, void **req)
{
	if (size < 0)
		return NCCL_ERR_INTERNAL;
	return dmtn_isend(sc, data, (size_t)size, tag, mh, req);
}

static nccl_result_t isend_v9(void *sc, void *data, size_t size, int tag,
			      void *mh, void **req)
{
	return dmtn_isend(sc, data, size, tag, mh, req);
}

static nccl_result_t isend_v10(void *sc, void *data, size_t size, int tag,
			       void *mh, void *phandle, void **req)
{
	return dmtn_isend(sc, data, size, tag, mh, req);
}

static nccl_result_t irecv_v8(void *rc, int n, void **data, int *sizes,
			      int *tags, void **mhs, void **req)
{
	size_t s[DMTN_MAX_RECVS];

	if (n < 1 || n > DMTN_MAX_RECVS || !sizes)
		return NCCL_ERR_INTERNAL;
	for (int i = 0; i < n; i++) {
		if (sizes[i] < 0)
			return NCCL_ERR_INTERNAL;
		s[i] = (size_t)sizes[i];
	}
	return dmtn_irecv(rc, n, data, s, tags, mhs, req);
}

static nccl_result_t irecv_v9(void *rc, int n, void **data, size_t *sizes,
			      int *tags, void **mhs, void **req)
{
	return dmtn_irecv(rc, n, data, sizes, tags, mhs, req);
}

static nccl_result_t irecv_v10(void *rc, int n, void **data, size_t *sizes,
			       int *tags, void **mhs, void **phandles,
			       void **req)
{
	return dmtn_irecv(rc, n, data, sizes, tags, mhs, req);
}

static nccl_result_t get_device_mr(void *comm, void *mhandle, void **dptr)
{
	/* NCCL's unpack kernel reads no memory handle */
	if (dptr)
		*dptr = NULL;
	return NCCL_OK;
}

static nccl_result_t irecv_consumed(void *rc, int n, void *request)
{
	return dmtn_irecv_consumed(rc, n, request);
}

/* ---- the tables --------------------------------------------------------- */

/* makeVDevice is NULL: NCCL then uses the interfaces as they are and does
 * not fuse them into virtual NICs. */

DMTN_EXPORT const struct nccl_net_v11 ncclNetPlugin_v11 = {
	.name = DMTN_NAME,
	.init = init_v11,
	.devices = devices,
	.get_properties = get_properties_v11,
	.listen = listen_v11,
	.connect = connect_v11,
	.accept = accept_any,
	.reg_mr = dmtn_reg_mr,
	.reg_mr_dmabuf = dmtn_reg_mr_dmabuf,
	.dereg_mr = dmtn_dereg_mr,
	.isend = isend_v10,
	.irecv = irecv_v10,
	.iflush = dmtn_iflush,
	.test = dmtn_test,
	.close_send = dmtn_close_send,
	.close_recv = dmtn_close_recv,
	.close_listen = dmtn_close_listen,
	.get_device_mr = get_device_mr,
	.irecv_consumed = irecv_consumed,
	.make_vdevice = NULL,
	.finalize = finalize_v11,
	.set_net_attr = set_net_attr_v11,
};

DMTN_EXPORT const struct nccl_net_v10 ncclNetPlugin_v10 = {
	.name = DMTN_NAME,
	.init = init_v10,
	.devices = devices,
	.get_properties = get_properties_v9,
	.listen = dmtn_listen,
	.connect = connect_v10,
	.accept = accept_any,
	.reg_mr = dmtn_reg_mr,
	.reg_mr_dmabuf = dmtn_reg_mr_dmabuf,
	.dereg_mr = dmtn_dereg_mr,
	.isend = isend_v10,
	.irecv = irecv_v10,
	.iflush = dmtn_iflush,
	.test = dmtn_test,
	.close_send = dmtn_close_send,
	.close_recv = dmtn_close_recv,
	.close_listen = dmtn_close_listen,
	.get_device_mr = get_device_mr,
	.irecv_consumed = irecv_consumed,
	.make_vdevice = NULL,
};

DMTN_EXPORT const struct nccl_net_v9 ncclNetPlugin_v9 = {
	.name = DMTN_NAME,
	.init = init_v8,
	.devices = devices,
	.get_properties = get_properties_v9,
	.listen = dmtn_listen,
	.connect = connect_v8,
	.accept = accept_any,
	.reg_mr = dmtn_reg_mr,
	.reg_mr_dmabuf = dmtn_reg_mr_dmabuf,
	.dereg_mr = dmtn_dereg_mr,
	.isend = isend_v9,
	.irecv = irecv_v9,
	.iflush = dmtn_iflush,
	.test = dmtn_test,
	.close_send = dmtn_close_send,
	.close_recv = dmtn_close_recv,
	.close_listen = dmtn_close_listen,
	.get_device_mr = get_device_mr,
	.irecv_consumed = irecv_consumed,
	.make_vdevice = NULL,
};

DMTN_EXPORT const struct nccl_net_v8 ncclNetPlugin_v8 = {
	.name = DMTN_NAME,
	.init = init_v8,
	.devices = devices,
	.get_properties = get_properties_v8,
	.listen = dmtn_listen,
	.connect = connect_v8,
	.accept = accept_any,
	.reg_mr = dmtn_reg_mr,
	.reg_mr_dmabuf = dmtn_reg_mr_dmabuf,
	.dereg_mr = dmtn_dereg_mr,
	.isend = isend_v8,
	.irecv = irecv_v8,
	.iflush = dmtn_iflush,
	.test = dmtn_test,
	.close_send = dmtn_close_send,
	.close_recv = dmtn_close_recv,
	.close_listen = dmtn_close_listen,
	.get_device_mr = get_device_mr,
	.irecv_consumed = irecv_consumed,
};

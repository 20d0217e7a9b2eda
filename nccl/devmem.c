// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * Everything that uses libdevmemtcp, only ever reached with
 * NCCL_DEVMEMTCP_ENABLE=1 on an interface whose probe found nothing that
 * rules devmem out.
 *
 * RX: the first listen on an interface prepares it (devmemtcp_nic_open:
 * header split, RSS kept off the devmem queues, a buffer bound to them;
 * undone on finalize or unload) and every listen steers its data port to
 * the devmem queues with an ntuple rule, before the handle reaches the
 * peer.  Received fragments are gathered into CUDA destinations on the
 * comm's stream (tokens returned once the gather ran) or copied into host
 * destinations.
 *
 * TX: a dma-buf registration (regMrDmaBuf) of a send comm is bound for
 * transmission on the interface; sends from it go out with
 * devmemtcp_tx_send, and complete once the kernel reports the range free.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "devmemtcp.h"
#include "plugin.h"
#include "unpack.h"

#define RX_FRAGS 256
#define TMP_SIZE (64u << 10)
#define GPU_MAX_FRAGS 4096

struct dmtn_nic {
	struct devmemtcp_ctx *ctx;
	struct devmemtcp_nic *nic;
	struct devmemtcp_buf *buf;
	uint32_t binding_id;
	int cuda_dev;		/* -1: host memory (udmabuf) */
	bool failed;		/* setup failed: listens stay plain */
	int flows;		/* live flows (listens and recv comms) */
};

struct dmtn_flow {
	struct dmtn_nic *nic;
	int id;
	int refs;		/* under dmtn.lock */
};

struct dmtn_devmem_rx {
	struct devmemtcp_ctx *ctx;
	struct devmemtcp_rx *rx;
	struct dmtn_nic *nic;
	struct dmtn_flow *flow;
	struct devmemtcp_frag frags[RX_FRAGS];
	char *linear;
	size_t linear_size;
	char *tmp;		/* one fragment on its way between GPU and host */
	struct devmemtcp_gpu *gpu;
	void *stream;
	bool no_gather;		/* the library has no gather kernels */
};

struct dmtn_devmem_tx {
	struct devmemtcp_ctx *ctx;
	struct devmemtcp_tx *tx;
	const struct dmtn_mr *mr;	/* the registration tx sends from */
	bool dead;			/* no devmem TX on this comm any more */
	uint64_t sent, done;		/* bytes sent and reported free */
};

/* The library's own messages go to NCCL's log as INFO: failures are
 * reported once more, with their consequence, as WARN by the caller. */
static void lib_log(void *user, int level, const char *msg)
{
	DMTN_INFO(NCCL_SUBSYS_NET, "libdevmemtcp: %s", msg);
}

static struct devmemtcp_ctx *ctx_new(void)
{
	DEVMEMTCP_OPTS(ctx_opts, o, .log_fn = lib_log,
		       .log_level = DEVMEMTCP_LOG_WARN);
	struct devmemtcp_ctx *ctx;

	return devmemtcp_ctx_new(&o, &ctx) ? NULL : ctx;
}

/* ---- init: which interfaces, and may they do devmem? -------------------- */

int dmtn_devices_nearest(struct dmtn_dev *devs, int n,
			 const struct devmemtcp_nic_rank *ranks, int nr)
{
	struct dmtn_dev keep[DMTN_MAX_DEVS];
	bool kept[DMTN_MAX_DEVS] = { false };
	int best = -1, k = 0;

	for (int i = 0; i < nr; i++) {
		for (int j = 0; j < n; j++) {
			if (kept[j] || strcmp(devs[j].name, ranks[i].ifname) ||
			    (best >= 0 && ranks[i].distance != best))
				continue;
			best = ranks[i].distance;
			kept[j] = true;
			keep[k++] = devs[j];
		}
	}
	if (!k)
		return 0;
	for (int j = 0; j < n; j++)
		if (!kept[j])
			free(devs[j].pci_path);
	memcpy(devs, keep, (size_t)k * sizeof(*devs));
	return k;
}

static const char *const distance_names[] = {
	[DEVMEMTCP_PCI_SAME_SWITCH] = "below the same PCIe switch",
	[DEVMEMTCP_PCI_SAME_ROOT_PORT] = "below the same root port",
	[DEVMEMTCP_PCI_SAME_NUMA] = "on the same NUMA node",
	[DEVMEMTCP_PCI_OTHER] = "on another NUMA node",
};

int dmtn_devices_near_gpu(struct dmtn_dev *devs, int n)
{
	struct devmemtcp_nic_rank ranks[64];
	struct devmemtcp_ctx *ctx;
	char names[DMTN_MAX_DEVS * (IF_NAMESIZE + 2)] = "";
	int gpu, nr, k;

	if (dmtn_cuda_current_device(&gpu)) {
		DMTN_INFO(DMTN_INIT_NET,
			  "no NCCL_DEVMEMTCP_IFNAME and no CUDA context current: every interface is a device");
		return n;
	}
	ctx = ctx_new();
	if (!ctx)
		return n;
	nr = devmemtcp_nic_near_gpu(ctx, gpu, ranks, ARRAY_SIZE(ranks));
	if (nr < 0) {
		DMTN_INFO(DMTN_INIT_NET,
			  "no NCCL_DEVMEMTCP_IFNAME: the interfaces nearest GPU %d are unknown, every interface is a device: %s",
			  gpu, devmemtcp_ctx_errmsg(ctx));
		devmemtcp_ctx_free(ctx);
		return n;
	}
	devmemtcp_ctx_free(ctx);
	if (nr > (int)ARRAY_SIZE(ranks))
		nr = (int)ARRAY_SIZE(ranks);
	k = dmtn_devices_nearest(devs, n, ranks, nr);
	if (!k) {
		DMTN_INFO(DMTN_INIT_NET,
			  "no NCCL_DEVMEMTCP_IFNAME: none of the interfaces is a PCI device, so none is known to be near GPU %d: every interface is a device",
			  gpu);
		return n;
	}
	for (int i = 0; i < k; i++)
		snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s%s",
			 i ? ", " : "", devs[i].name);
	for (int i = 0; i < nr; i++) {
		int d = ranks[i].distance;

		if (strcmp(ranks[i].ifname, devs[0].name))
			continue;
		DMTN_INFO(DMTN_INIT_NET,
			  "no NCCL_DEVMEMTCP_IFNAME: GPU %d (the current CUDA context's) is nearest to %s (%s); %d other interface%s left out",
			  gpu, names, d >= 0 && d <= DEVMEMTCP_PCI_OTHER ? distance_names[d] : "?",
			  n - k, n - k == 1 ? "" : "s");
		break;
	}
	return k;
}

/* A rule that names queue ids (queues 3,5-7) lets this user own only
 * those, asked for by id: note them in d, the highest first (where the
 * library would take the last queues).  false: fewer than
 * NCCL_DEVMEMTCP_NQUEUES exist on the interface. */
static bool broker_ids(struct dmtn_dev *d, const struct devmemtcp_probe *rep)
{
	d->nbrk_ids = 0;
	for (uint32_t r = rep->broker_nqranges; r-- > 0;) {
		uint32_t lo = rep->broker_qranges[r][0], hi = rep->broker_qranges[r][1];

		if (rep->rx_queues <= 0 || lo >= (uint32_t)rep->rx_queues)
			continue;
		if (hi >= (uint32_t)rep->rx_queues)
			hi = (uint32_t)rep->rx_queues - 1;
		for (uint32_t id = hi + 1; id-- > lo && d->nbrk_ids < DMTN_MAX_BRK_IDS;)
			d->brk_ids[d->nbrk_ids++] = id;
	}
	if (!rep->broker_nqranges || d->nbrk_ids >= dmtn.cfg.nqueues)
		return true;
	DMTN_INFO(DMTN_INIT_NET,
		  "%s: devmemtcp-broker names %u RX queue%s of it for this user (%s), NCCL_DEVMEMTCP_NQUEUES is %u",
		  d->name, d->nbrk_ids, d->nbrk_ids == 1 ? "" : "s", rep->broker_msg,
		  dmtn.cfg.nqueues);
	return false;
}

bool dmtn_devmem_probe(struct dmtn_dev *d)
{
	struct devmemtcp_ctx *ctx = ctx_new();
	DEVMEMTCP_OPTS(probe, rep);
	bool ok, brk;
	int n;

	if (!ctx)
		return false;
	n = devmemtcp_nic_probe(ctx, d->name, NULL, &rep);
	if (n < 0) {
		DMTN_WARN("%s: devmem probe failed: %s", d->name,
			  devmemtcp_ctx_errmsg(ctx));
		devmemtcp_ctx_free(ctx);
		return false;
	}
	/* without CAP_NET_ADMIN the library sets the NIC up through
	 * devmemtcp-broker(8), as far as its policy lets this user */
	brk = !rep.cap_net_admin && rep.broker_state == 1 && rep.broker_allowed == 1;
	if (brk && rep.broker_queues < rep.broker_queues_used + dmtn.cfg.nqueues) {
		DMTN_INFO(DMTN_INIT_NET,
			  "%s: devmemtcp-broker lets this user own %u queues (%u owned now), NCCL_DEVMEMTCP_NQUEUES is %u",
			  d->name, rep.broker_queues, rep.broker_queues_used,
			  dmtn.cfg.nqueues);
		brk = false;
	}
	if (brk && !broker_ids(d, &rep))
		brk = false;
	/* what nic_open cannot fix; header split off, say, it turns on */
	ok = rep.has_bind_rx && (rep.cap_net_admin || brk) &&
	     rep.tcp_data_split >= 0 && rep.ntuple >= 0 && rep.rx_queues >= 2 &&
	     !rep.xdp;
	DMTN_INFO(DMTN_INIT_NET,
		  "%s: driver %s, kernel %s, bind-rx %s, bind-tx %s, %d RX queues: %s%s%s",
		  d->name, rep.driver, rep.kernel, rep.has_bind_rx ? "yes" : "no",
		  rep.has_bind_tx ? "yes" : "no", rep.rx_queues,
		  ok ? "devmem possible" : "no devmem",
		  ok && brk ? ", set up through devmemtcp-broker: " : "",
		  ok && brk ? rep.broker_msg : "");
	for (uint32_t i = 0; !ok && i < rep.nproblems; i++)
		DMTN_INFO(DMTN_INIT_NET, "%s: %s; fix: %s", d->name,
			  rep.problems[i].what, rep.problems[i].fix);
	devmemtcp_ctx_free(ctx);
	return ok;
}

/* ---- RX: NIC setup and steering ----------------------------------------- */

static int rx_buf_new(struct dmtn_nic *n)
{
	DEVMEMTCP_OPTS(buf_opts, o, .size = dmtn.cfg.buf_size);
	int dev = -1;

	if (dmtn.cfg.mem == DMTN_MEM_CUDA ||
	    (dmtn.cfg.mem == DMTN_MEM_AUTO && !dmtn_cuda_current_device(&dev))) {
		if (dev < 0 && dmtn_cuda_current_device(&dev)) {
			DMTN_WARN("NCCL_DEVMEMTCP_MEM=cuda but no CUDA context is current on this thread: %s",
				  dmtn_cuda_why());
			return -ENODEV;
		}
		o.provider = DEVMEMTCP_PROVIDER_CUDA;
		o.cuda_device = dev;
	} else {
		o.provider = DEVMEMTCP_PROVIDER_UDMABUF;
	}
	n->cuda_dev = dev;
	return devmemtcp_buf_new(n->ctx, &o, &n->buf);
}

/* devmemtcp_nic_open; under a broker rule that names queue ids, with
 * NQUEUES of them, the highest first, moving down past those another
 * owner holds (EBUSY). */
static int nic_open_ids(struct dmtn_dev *d, struct dmtn_nic *n,
			struct devmemtcp_nic_opts *o)
{
	uint32_t ids[DMTN_MAX_BRK_IDS], nq = o->nqueues ? o->nqueues : 1;
	int ret = -EBUSY;

	if (!d->nbrk_ids)
		return devmemtcp_nic_open(n->ctx, d->name, o, &n->nic);
	for (uint32_t k = 0; ret == -EBUSY && k + nq <= d->nbrk_ids; k++) {
		for (uint32_t i = 0; i < nq; i++)	/* in increasing order */
			ids[i] = d->brk_ids[k + nq - 1 - i];
		o->queues = ids;
		o->nqueues = nq;
		ret = devmemtcp_nic_open(n->ctx, d->name, o, &n->nic);
	}
	o->queues = NULL;
	return ret;
}

static int nic_setup(struct dmtn_dev *d, struct dmtn_nic *n)
{
	DEVMEMTCP_OPTS(nic_opts, o, .nqueues = dmtn.cfg.nqueues,
		       .flags = dmtn.cfg.recover ? DEVMEMTCP_NIC_RECOVER : 0);
	const uint32_t *q;
	int ret;

	n->ctx = ctx_new();
	if (!n->ctx)
		return -ENOMEM;
	ret = rx_buf_new(n);
	if (ret)
		return ret;
	o.buf = n->buf;
	ret = nic_open_ids(d, n, &o);
	if (ret)
		return ret;
	n->binding_id = devmemtcp_binding_id(devmemtcp_nic_binding(n->nic));
	ret = devmemtcp_nic_queues(n->nic, &q);
	DMTN_INFO(DMTN_INIT_NET,
		  "%s: devmem RX set up: %d queue%s from %u, %llu MiB of %s memory bound (binding %u)",
		  d->name, ret, ret == 1 ? "" : "s", ret > 0 ? q[0] : 0,
		  (unsigned long long)(dmtn.cfg.buf_size >> 20),
		  n->cuda_dev >= 0 ? "GPU" : "host", n->binding_id);
	return 0;
}

static void nic_release(struct dmtn_nic *n)
{
	if (n->nic && devmemtcp_nic_close(n->nic))
		DMTN_WARN("undoing the devmem setup: %s",
			  devmemtcp_ctx_errmsg(n->ctx));
	n->nic = NULL;
	devmemtcp_buf_free(n->buf);
	n->buf = NULL;
	devmemtcp_ctx_free(n->ctx);
	n->ctx = NULL;
}

/* Called with dmtn.lock: the NIC of d, set up on first use. */
static struct dmtn_nic *nic_get(struct dmtn_dev *d)
{
	struct dmtn_nic *n = d->nic;
	int ret;

	if (n)
		return n->failed ? NULL : n;
	n = calloc(1, sizeof(*n));
	if (!n)
		return NULL;
	d->nic = n;
	ret = nic_setup(d, n);
	if (!ret)
		return n;
	DMTN_WARN("%s: devmem RX setup failed, connections to this rank receive with plain TCP: %s",
		  d->name, n->ctx ? devmemtcp_ctx_errmsg(n->ctx) : strerror(-ret));
	nic_release(n);
	n->failed = true;
	return NULL;
}

int dmtn_devmem_steer(struct dmtn_dev *d, int data_port,
		      struct dmtn_flow **flowp)
{
	struct devmemtcp_flow spec;
	struct dmtn_flow *f = NULL;
	struct dmtn_nic *n;
	char addr[INET6_ADDRSTRLEN], text[128];
	const void *a;
	int id = -1;

	*flowp = NULL;
	a = d->addr.ss_family == AF_INET
		    ? (const void *)&((struct sockaddr_in *)&d->addr)->sin_addr
		    : (const void *)&((struct sockaddr_in6 *)&d->addr)->sin6_addr;
	inet_ntop(d->addr.ss_family, a, addr, sizeof(addr));
	snprintf(text, sizeof(text), "%s dst-ip %s dst-port %d",
		 d->addr.ss_family == AF_INET ? "tcp4" : "tcp6", addr, data_port);
	pthread_mutex_lock(&dmtn.lock);
	n = nic_get(d);
	if (!n)
		goto out;
	if (devmemtcp_flow_parse(text, &spec) ||
	    (id = devmemtcp_nic_add_flow(n->nic, &spec)) < 0) {
		DMTN_WARN("%s: steering '%s' to the devmem queues failed, that connection receives with plain TCP: %s",
			  d->name, text, devmemtcp_nic_errmsg(n->nic));
		goto out;
	}
	f = calloc(1, sizeof(*f));
	if (!f) {
		devmemtcp_nic_remove_flow(n->nic, id);
		goto out;
	}
	*f = (struct dmtn_flow){ .nic = n, .id = id, .refs = 1 };
	n->flows++;
out:
	pthread_mutex_unlock(&dmtn.lock);
	*flowp = f;
	return f ? 0 : -1;
}

void dmtn_flow_put(struct dmtn_flow *f)
{
	if (!f)
		return;
	pthread_mutex_lock(&dmtn.lock);
	if (--f->refs == 0) {
		if (f->nic->nic)
			devmemtcp_nic_remove_flow(f->nic->nic, f->id);
		f->nic->flows--;
		free(f);
	}
	pthread_mutex_unlock(&dmtn.lock);
}

void dmtn_devmem_teardown(struct dmtn_dev *d)
{
	struct dmtn_nic *n = d->nic;

	if (!n)
		return;
	nic_release(n);
	/* flows of comms still open keep the (now empty) struct */
	if (!n->flows)
		free(n);
	d->nic = NULL;
}

/* ---- RX: the receive path ----------------------------------------------- */

int dmtn_devmem_rx_open(struct dmtn_comm *c, struct dmtn_flow *flow)
{
	struct dmtn_devmem_rx *x = calloc(1, sizeof(*x));
	int ret = -ENOMEM;

	if (!x)
		goto err;
	x->nic = flow->nic;
	x->linear_size = dmtn.cfg.linear_size;
	x->linear = malloc(x->linear_size);
	x->tmp = malloc(TMP_SIZE);
	x->ctx = ctx_new();
	if (!x->linear || !x->tmp || !x->ctx)
		goto err;
	ret = devmemtcp_rx_new(x->ctx, c->data_fd, NULL, &x->rx);
	if (!ret)
		ret = devmemtcp_rx_add_buf(x->rx, x->nic->binding_id,
					   x->nic->buf);
	if (ret)
		goto err;
	pthread_mutex_lock(&dmtn.lock);
	flow->refs++;
	pthread_mutex_unlock(&dmtn.lock);
	x->flow = flow;
	c->drx = x;
	DMTN_INFO(DMTN_INIT_NET,
		  "recv comm %p dev %d (%s) from %s: devmem RX (binding %u, %s memory)",
		  (void *)c, c->dev, dmtn.dev[c->dev].name, c->peer,
		  x->nic->binding_id, x->nic->cuda_dev >= 0 ? "GPU" : "host");
	return 0;
err:
	/* the flow is steered: plain reads of it would fail, so no fallback */
	DMTN_WARN("recv comm from %s: devmem RX handle: %s", c->peer,
		  x && x->rx ? devmemtcp_rx_errmsg(x->rx)
		  : x && x->ctx ? devmemtcp_ctx_errmsg(x->ctx) : strerror(-ret));
	c->drx = x;
	dmtn_devmem_rx_close(c);
	return ret;
}

void dmtn_devmem_rx_close(struct dmtn_comm *c)
{
	struct dmtn_devmem_rx *x = c->drx;

	if (!x)
		return;
	c->drx = NULL;
	devmemtcp_rx_free(x->rx);	/* waits for pending gathers */
	devmemtcp_gpu_free(x->gpu);
	if (x->stream)
		dmtn_cuda_stream_free(x->nic->cuda_dev, x->stream);
	devmemtcp_ctx_free(x->ctx);
	dmtn_flow_put(x->flow);
	free(x->linear);
	free(x->tmp);
	free(x);
}

static int gpu_ready(struct dmtn_devmem_rx *x)
{
	DEVMEMTCP_OPTS(gpu_opts, o, .cuda_device = x->nic->cuda_dev,
		       .max_frags = GPU_MAX_FRAGS);
	int ret;

	if (x->gpu)
		return 0;
	ret = dmtn_cuda_stream_new(x->nic->cuda_dev, &x->stream);
	if (ret) {
		DMTN_WARN("devmem RX: no CUDA stream: %s", dmtn_cuda_why());
		return ret;
	}
	ret = devmemtcp_gpu_new(x->ctx, &o, &x->gpu);
	if (ret)
		DMTN_WARN("devmem RX: GPU gather unavailable: %s",
			  devmemtcp_ctx_errmsg(x->ctx));
	return ret;
}

/* Copy one fragment's bytes from the bound buffer to dst: through host
 * memory when source and destination are not both on the same GPU. */
static int copy_frag(struct dmtn_comm *c, const struct devmemtcp_frag *f,
		     char *dst, int dst_dev)
{
	struct dmtn_devmem_rx *x = c->drx;

	for (uint32_t off = 0; off < f->len;) {
		uint32_t len = f->len - off < TMP_SIZE ? f->len - off : TMP_SIZE;
		char *to = dst_dev < 0 ? dst + off : x->tmp;
		int ret;

		if (x->nic->cuda_dev < 0)
			ret = devmemtcp_buf_read(x->nic->buf, f->offset + off, to, len);
		else
			ret = dmtn_cuda_copy_dtoh(x->nic->cuda_dev, to,
						  f->addr + off, len) ? -EIO : 0;
		if (!ret && dst_dev >= 0)
			ret = dmtn_cuda_copy_htod(dst_dev, (uintptr_t)(dst + off),
						  x->tmp, len) ? -EIO : 0;
		if (ret)
			return ret;
		if (dst_dev >= 0)
			c->st.bounce_bytes += len;
		off += len;
	}
	return 0;
}

/* Copy the n fragments to their places at dst: linear ones from the
 * linear buffer, the others from the bound buffer. */
static int copy_frags(struct dmtn_comm *c, const struct devmemtcp_frag *frags,
		      int n, char *dst, int dst_dev)
{
	struct dmtn_devmem_rx *x = c->drx;
	uint64_t pos = 0;
	int ret = 0;

	for (int i = 0; i < n && !ret; i++) {
		const struct devmemtcp_frag *f = &frags[i];

		if (!(f->flags & DEVMEMTCP_FRAG_LINEAR))
			ret = copy_frag(c, f, dst + pos, dst_dev);
		else if (dst_dev < 0)
			memcpy(dst + pos, x->linear + f->offset, f->len);
		else if (dmtn_cuda_copy_htod(dst_dev, (uintptr_t)(dst + pos),
					     x->linear + f->offset, f->len))
			ret = -EIO;
		pos += f->len;
	}
	return ret;
}

/* A library built without nvcc (as distributions build it) has no gather
 * kernels: the comm copies what it would gather through host memory, and
 * the process says so once. */
static void no_gather_kernels(struct dmtn_comm *c)
{
	static bool said;

	c->drx->no_gather = true;
	if (!__atomic_exchange_n(&said, true, __ATOMIC_RELAXED))
		DMTN_WARN("devmem RX: this libdevmemtcp has no gather kernels (it was built without nvcc): received bytes bound for GPU memory are copied through host memory, much more slowly; rebuild libdevmemtcp with -Dcuda=enabled");
}

/* Place n fragments at dst (stream order): by one gather, which places the
 * linear ones too (from the linear buffer), or by copies.  Returns 0 or a
 * negative errno. */
static int place(struct dmtn_comm *c, struct dmtn_req *r,
		 const struct devmemtcp_frag *frags, int n, char *dst,
		 int dst_dev)
{
	struct dmtn_devmem_rx *x = c->drx;
	bool gather = dst_dev >= 0 && dst_dev == x->nic->cuda_dev &&
		      !x->no_gather;
	struct devmemtcp_gpu_iov iov = { (uintptr_t)dst, 0 };
	uint64_t pos = 0, devmem = 0;
	int ret;

	for (int i = 0; i < n; i++) {
		if (frags[i].flags & DEVMEMTCP_FRAG_LINEAR)
			c->st.linear_bytes += frags[i].len;
		else
			devmem += frags[i].len;
		pos += frags[i].len;
	}
	c->st.devmem_bytes += devmem;
	if (gather) {
		/* one launch for the call, the linear bytes in it; the tokens
		 * go back once it ran */
		iov.len = pos;
		ret = devmemtcp_gpu_gather_recv(x->gpu, x->rx, frags, (size_t)n,
						x->linear, x->linear_size, &iov, 1,
						x->stream);
		if (ret != -EOPNOTSUPP) {
			if (ret) {
				DMTN_WARN("devmem RX gather: %s",
					  devmemtcp_gpu_errmsg(x->gpu));
				devmemtcp_rx_release_all(x->rx);
				return -EIO;
			}
			c->st.gather_bytes += devmem;
			r->fence_dev = dst_dev;
			return 0;
		}
		/* nothing queued: the fragments are still ours */
		no_gather_kernels(c);
	}
	ret = copy_frags(c, frags, n, dst, dst_dev);
	if (devmemtcp_rx_release(x->rx, frags, (size_t)n))
		DMTN_WARN("devmem RX: %s", devmemtcp_rx_errmsg(x->rx));
	return ret;
}

/*
 * Queue what NCCL's unpack kernel can copy of the n fragments of x->frags
 * bound for offset dst_off of b (unpack.c): fragments in the bound buffer
 * within reach of the queue's bounce address, up to the slot's size, their
 * tokens held until NCCL has consumed the receive; bytes that arrived as
 * plain data are copied to their place.  Returns how many fragments it
 * took (the first ones), or a negative errno.
 */
static int queue_frags(struct dmtn_comm *c, struct dmtn_req *r,
		       struct dmtn_rbuf *b, int n)
{
	struct dmtn_devmem_rx *x = c->drx;
	uint64_t pos = 0;
	int i, ret;

	for (i = 0; i < n; i++) {
		const struct devmemtcp_frag *f = &x->frags[i];

		if (f->flags & DEVMEMTCP_FRAG_LINEAR) {
			c->st.linear_bytes += f->len;
			if (dmtn_cuda_copy_htod(b->mr->cuda_dev,
						(uintptr_t)(b->data + b->done + pos),
						x->linear + f->offset, f->len))
				return -EIO;
		} else if (dmtn_unpack_add(c, r, f->addr, f->len, b->done + pos)) {
			c->st.devmem_bytes += f->len;
			c->st.unpack_bytes += f->len;
		} else {
			break;
		}
		pos += f->len;
	}
	if (!i)
		return 0;
	ret = devmemtcp_rx_release_after(x->rx, x->frags, (size_t)i,
					 dmtn_unpack_done,
					 dmtn_unpack_ticket(c, r));
	if (ret) {
		DMTN_WARN("devmem RX: holding the tokens of queued fragments: %s",
			  devmemtcp_rx_errmsg(x->rx));
		return ret;
	}
	return i;
}

ssize_t dmtn_devmem_recv(struct dmtn_comm *c, struct dmtn_req *r,
			 struct dmtn_rbuf *b)
{
	struct dmtn_devmem_rx *x = c->drx;
	size_t len = b->size - b->done, got = 0, done = 0;
	int dst_dev = b->mr && b->mr->type == NCCL_PTR_CUDA ? b->mr->cuda_dev : -1;
	int n, ret, first = 0;

	if (len > x->linear_size)
		len = x->linear_size;
	n = devmemtcp_rx_recv(x->rx, x->frags, RX_FRAGS, x->linear, len);
	if (n == -EAGAIN || n == -EINTR)
		return 0;
	if (n == 0)
		return -ECONNRESET;
	if (n < 0) {
		DMTN_WARN("recv comm from %s: %s", c->peer,
			  devmemtcp_rx_errmsg(x->rx));
		return -EPROTO;
	}
	/* the library promises no more than len bytes (the peer's stream
	 * decides how they are cut, never how many): checked all the same,
	 * since place() writes them at b */
	for (int i = 0; i < n; i++) {
		if (x->frags[i].flags & DEVMEMTCP_FRAG_FOREIGN) {
			DMTN_WARN("recv comm from %s: a fragment of binding %u, not ours (%u): the flow reached another devmem queue",
				  c->peer, x->frags[i].binding_id, x->nic->binding_id);
			devmemtcp_rx_release(x->rx, x->frags, (size_t)n);
			return -EPROTO;
		}
		got += x->frags[i].len;
	}
	if (got > len) {
		DMTN_WARN("recv comm from %s: %zu bytes received where %zu were asked for",
			  c->peer, got, len);
		devmemtcp_rx_release(x->rx, x->frags, (size_t)n);
		return -EPROTO;
	}
	/* NCCL's kernel unpacks into its own buffers of the connection, on
	 * the bound buffer's GPU; the plugin places the rest */
	if (r->unpack && b->mr && b->mr->setup && dst_dev >= 0 &&
	    dst_dev == x->nic->cuda_dev) {
		int k = queue_frags(c, r, b, n);

		if (k < 0) {
			devmemtcp_rx_release(x->rx, x->frags, (size_t)n);
			return k == -EIO ? -EIO : -EPROTO;
		}
		for (int i = 0; i < k; i++)
			done += x->frags[i].len;
		first = k;
	}
	if (first < n && dst_dev >= 0 && dst_dev == x->nic->cuda_dev &&
	    !x->no_gather && gpu_ready(x)) {
		devmemtcp_rx_release(x->rx, x->frags + first, (size_t)(n - first));
		return -EIO;
	}
	ret = first == n ? 0 : place(c, r, x->frags + first, n - first,
				     b->data + b->done + done, dst_dev);
	if (ret)
		return ret == -EIO ? -EIO : -EPROTO;
	if (got > c->st.max_call)
		c->st.max_call = got;
	return (ssize_t)got;
}

/* A receive with gathers queued completes when its last gather has run: a
 * fence recorded once its last bytes were queued covers them all (the
 * stream runs them in order). */
int dmtn_devmem_fence(struct dmtn_req *r)
{
	struct dmtn_devmem_rx *x = r->comm->drx;
	struct devmemtcp_gpu_fence *f;

	if (devmemtcp_gpu_fence_new(x->gpu, x->stream, &f)) {
		DMTN_WARN("devmem RX: %s", devmemtcp_gpu_errmsg(x->gpu));
		return -EIO;
	}
	r->fence = f;
	return 0;
}

/* 1 when request r (its bytes moved, r->wait) is done, 0 not yet, < 0
 * failed */
int dmtn_devmem_req_done(struct dmtn_req *r)
{
	struct dmtn_comm *c = r->comm;
	int ret;

	if (r->kind == DMTN_REQ_SEND)
		return !c->dtx || c->dtx->done >= r->tx_end;
	if (!r->fence)
		return 1;
	ret = devmemtcp_gpu_fence_done(r->fence, false);
	if (ret > 0)
		r->fence = NULL;	/* freed by fence_done */
	return ret;
}

/* ---- TX ----------------------------------------------------------------- */

static struct dmtn_devmem_tx *tx_get(struct dmtn_comm *c)
{
	if (!c->dtx) {
		c->dtx = calloc(1, sizeof(*c->dtx));
		if (c->dtx)
			c->dtx->ctx = ctx_new();
		if (c->dtx && !c->dtx->ctx) {
			free(c->dtx);
			c->dtx = NULL;
		}
	}
	return c->dtx;
}

/* The dma-buf NCCL gave (regMrDmaBuf): a copy of its fd, the buffer's
 * size from the fd.  0 or a negative errno (said). */
static int tx_import(struct dmtn_devmem_tx *t, struct dmtn_mr *mr, int fd)
{
	DEVMEMTCP_OPTS(buf_opts, o, .provider = DEVMEMTCP_PROVIDER_IMPORT);
	off_t size;

	/* NCCL closes fd after the call: the buffer keeps a copy */
	o.fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	size = o.fd < 0 ? -1 : lseek(o.fd, 0, SEEK_END);
	if (size <= 0) {
		DMTN_WARN("regMrDmaBuf: fd %d is not a dma-buf (%s); sends from it use plain TCP",
			  fd, strerror(errno));
		if (o.fd >= 0)
			close(o.fd);
		return -EBADF;
	}
	o.size = (uint64_t)size;
	return devmemtcp_buf_new(t->ctx, &o, &mr->dmabuf);
}

/* CUDA memory registered without a dma-buf (regMr): the library exports
 * the registration's pages itself; the registration starts that many bytes
 * into its dma-buf. */
static int tx_export(struct dmtn_devmem_tx *t, struct dmtn_mr *mr)
{
	DEVMEMTCP_OPTS(buf_opts, o, .provider = DEVMEMTCP_PROVIDER_CUDA,
		       .cuda_ptr = mr->base, .size = mr->size);
	const struct devmemtcp_segment *seg;
	int ret = devmemtcp_buf_new(t->ctx, &o, &mr->dmabuf);

	if (ret)
		return ret;
	if (!devmemtcp_buf_segments(mr->dmabuf, &seg) || seg[0].addr > mr->base) {
		DMTN_WARN("regMr: the export of %#lx has no segment at its start",
			  (unsigned long)mr->base);
		return -EINVAL;
	}
	mr->dmabuf_offset = seg[0].offset + (mr->base - seg[0].addr);
	return 0;
}

/* Test builds: DEVMEMTCP_TEST_NCCL_TX_EXPORT=1 exports CUDA registrations
 * through the library even when NCCL gave a dma-buf, so that the emulated
 * NIC (tests/emu), which reaches CUDA memory only through the library's
 * exports, can send from them. */
static bool test_tx_export(void)
{
#if DMTN_TEST_HOOKS
	const char *v = secure_getenv("DEVMEMTCP_TEST_NCCL_TX_EXPORT");

	return v && !strcmp(v, "1");
#else
	return false;
#endif
}

int dmtn_devmem_mr(struct dmtn_comm *c, struct dmtn_mr *mr, int fd)
{
	struct dmtn_devmem_tx *t = tx_get(c);
	const struct dmtn_dev *d = &dmtn.dev[c->dev];
	bool export = fd < 0 || (mr->type == NCCL_PTR_CUDA && test_tx_export());
	int ret;

	if (!t)
		return -ENOMEM;
	ret = export ? tx_export(t, mr) : tx_import(t, mr, fd);
	if (ret == -EBADF)
		return ret;
	if (!ret)
		ret = devmemtcp_bind_tx(t->ctx, d->ifindex, mr->dmabuf, NULL,
					&mr->tx_binding);
	if (ret) {
		DMTN_WARN("send comm %p to %s: devmem TX from %s %zu bytes at %#lx is not available, sends from it use plain TCP: %s",
			  (void *)c, c->peer,
			  export ? "an export of the CUDA registration of"
				 : "the dma-buf registration of",
			  mr->size, (unsigned long)mr->base,
			  devmemtcp_ctx_errmsg(t->ctx));
		devmemtcp_buf_free(mr->dmabuf);
		mr->dmabuf = NULL;
		return ret;
	}
	DMTN_INFO(DMTN_INIT_NET,
		  "send comm %p to %s: %s of %llu bytes bound for devmem TX on %s (binding %u)",
		  (void *)c, c->peer,
		  export ? "CUDA registration exported as a dma-buf"
			 : "dma-buf",
		  (unsigned long long)devmemtcp_buf_size(mr->dmabuf), d->name,
		  devmemtcp_binding_id(mr->tx_binding));
	return 0;
}

static void tx_done(void *user, const struct devmemtcp_tx_done *done, size_t n)
{
	struct dmtn_devmem_tx *t = user;

	for (size_t i = 0; i < n; i++)
		t->done += done[i].len;
}

/*
 * One TX handle per comm: the kernel numbers a socket's zero-copy sends
 * and the handle must see all of them, so the handle, and with it devmem
 * TX, stays with the first registration used.  Sends from other dma-bufs
 * go out as plain TCP.
 */
bool dmtn_devmem_tx_ready(struct dmtn_comm *c, struct dmtn_mr *mr)
{
	struct dmtn_devmem_tx *t = c->dtx;
	int ret;

	if (!t || t->dead)
		return false;
	if (t->tx)
		return t->mr == mr;
	DEVMEMTCP_OPTS(tx_opts, o, .done_fn = tx_done, .done_user = t);
	ret = devmemtcp_tx_new(t->ctx, c->data_fd, mr->tx_binding, &o, &t->tx);
	if (ret) {
		DMTN_WARN("send comm %p to %s: devmem TX handle: %s; sending with plain TCP",
			  (void *)c, c->peer, devmemtcp_ctx_errmsg(t->ctx));
		t->dead = true;
		return false;
	}
	t->mr = mr;
	DMTN_INFO(DMTN_INIT_NET, "send comm %p to %s: devmem TX",
		  (void *)c, c->peer);
	return true;
}

ssize_t dmtn_devmem_send(struct dmtn_comm *c, struct dmtn_req *r,
			 struct dmtn_mr *mr)
{
	struct dmtn_devmem_tx *t = c->dtx;
	struct dmtn_rbuf *b = &r->buf[0];
	struct devmemtcp_tx_piece p = {
		.offset = mr->dmabuf_offset + ((uintptr_t)b->data - mr->base) +
			  b->done,
		.len = b->size - b->done,
	};
	ssize_t n = devmemtcp_tx_send(t->tx, &p, 1, DEVMEMTCP_TX_DONTWAIT);

	if (n == -EAGAIN || n == -ENOBUFS) {
		/* ENOBUFS: completions fill the socket's option memory */
		return devmemtcp_tx_reap(t->tx, NULL, 0) < 0 ? -EIO : 0;
	}
	if (n < 0) {
		DMTN_WARN("send comm %p to %s: devmem TX: %s", (void *)c,
			  c->peer, devmemtcp_tx_errmsg(t->tx));
		return n;
	}
	t->sent += (uint64_t)n;
	r->tx_end = t->sent;
	c->st.devmem_bytes += (uint64_t)n;
	return n;
}

int dmtn_devmem_tx_reap(struct dmtn_comm *c)
{
	struct dmtn_devmem_tx *t = c->dtx;
	int ret;

	if (!t->tx)
		return 0;
	ret = devmemtcp_tx_reap(t->tx, NULL, 0);
	if (ret < 0)
		DMTN_WARN("send comm %p: devmem TX completions: %s", (void *)c,
			  devmemtcp_tx_errmsg(t->tx));
	return ret < 0 ? ret : 0;
}

/* Wait until the kernel is done with every byte sent, then drop the
 * handle: after this the comm sends plain TCP only. */
static void tx_finish(struct dmtn_comm *c)
{
	struct dmtn_devmem_tx *t = c->dtx;
	int ret;

	if (!t->tx)
		return;
	while ((ret = devmemtcp_tx_wait(t->tx, 10000)) > 0)
		;
	if (ret < 0)
		DMTN_WARN("send comm %p: waiting for devmem TX completions: %s",
			  (void *)c, devmemtcp_tx_errmsg(t->tx));
	devmemtcp_tx_free(t->tx);
	t->tx = NULL;
	t->dead = true;
}

void dmtn_devmem_mr_free(struct dmtn_mr *mr)
{
	struct dmtn_comm *c = mr->comm;

	if (!mr->tx_binding)
		return;
	if (c->dtx && c->dtx->mr == mr)
		tx_finish(c);
	devmemtcp_binding_close(mr->tx_binding);
	devmemtcp_buf_free(mr->dmabuf);
	mr->tx_binding = NULL;
	mr->dmabuf = NULL;
}

void dmtn_devmem_tx_close(struct dmtn_comm *c)
{
	if (!c->dtx)
		return;
	tx_finish(c);
	devmemtcp_ctx_free(c->dtx->ctx);
	free(c->dtx);
	c->dtx = NULL;
}

void dmtn_devmem_rx_gpu(const struct dmtn_comm *c, int *dev, uint64_t *base)
{
	const struct devmemtcp_segment *segs;

	*dev = -1;
	*base = 0;
	if (!c->drx || c->drx->nic->cuda_dev < 0 ||
	    !devmemtcp_buf_segments(c->drx->nic->buf, &segs))
		return;
	*dev = c->drx->nic->cuda_dev;
	/* the lowest address: the segments are sorted by dma-buf offset,
	 * and the CUDA provider's run upwards from offset 0 */
	*base = segs[0].addr;
}

void dmtn_devmem_rx_flush(struct dmtn_comm *c)
{
	if (c->drx && devmemtcp_rx_flush(c->drx->rx) < 0)
		DMTN_WARN("recv comm from %s: returning tokens: %s", c->peer,
			  devmemtcp_rx_errmsg(c->drx->rx));
}

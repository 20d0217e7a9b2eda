// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * NCCL's device-side unpack (net_abi.h): received fragments stay where the
 * NIC put them, in the bound buffer, and NCCL's Simple-protocol kernel
 * copies them into the step's buffer from a queue of (source offset,
 * length, destination offset) entries that the plugin fills.  The tokens
 * of a receive's fragments go back when NCCL says, with irecvConsumed, that
 * its kernel has read them.
 *
 * NCCL drops a plugin whose unpack version is not its own, and the queue's
 * layout is a private structure of NCCL's kernels, so the plugin offers
 * NCCL_NET_DEVICE_UNPACK only to an NCCL whose release it knows
 * (ncclGetVersion, from the process), and only when NCCL runs nothing but
 * its Simple protocol (NCCL_PROTO): the LL and LL128 kernels read received
 * bytes in place.  Otherwise getProperties says HOST and the plugin
 * places every byte itself (devmem.c).
 *
 * A receive's entries are written before test() reports it done, its count
 * last; NCCL's proxy posts the step to the kernel after that.  What does not
 * fit the queue (more than NCCL_UNPACK_SLOT_ENTRIES fragments, a fragment
 * beyond 4 GiB of the bounce address, bytes that arrived as plain data, a
 * destination that is not on the buffer's GPU) the plugin places itself
 * before the receive completes: the kernel copies the entries, the rest is
 * already where it reads.  A receive with no entry has a count of 0.
 */
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "plugin.h"
#include "unpack.h"

/* The NCCL releases whose unpack queue is the one net_abi.h declares
 * (version 0x7, same offsets), each checked against the tags named. */
const struct dmtn_unpack_release dmtn_unpack_releases[] = {
	{ 2, 19, "v2.19.1-1, v2.19.3-1, v2.19.4-1" },
	{ 2, 20, "v2.20.3-1, v2.20.5-1" },
	{ 2, 21, "v2.21.5-1" },
	{ 2, 22, "v2.22.3-1" },
	{ 2, 23, "v2.23.4-1" },
	{ 2, 24, "v2.24.3-1" },
	{ 2, 25, "v2.25.1-1" },
	{ 2, 26, "v2.26.2-1, v2.26.3-1, v2.26.5-1, v2.26.6-1" },
	{ 2, 27, "v2.27.3-1, v2.27.5-1, v2.27.6-1, v2.27.7-1" },
	{ 2, 28, "v2.28.3-1, v2.28.7-1, v2.28.9-1" },
	{ 2, 29, "v2.29.2-1, v2.29.3-1, v2.29.7-1" },
	{ 2, 30, "v2.30.3-1, v2.30.4-1, v2.30.7-1" },
	{ 0, 0, NULL },
};

const struct dmtn_unpack_release *dmtn_unpack_release_of(int code)
{
	/* NCCL_VERSION(X, Y, Z) is X * 10000 + Y * 100 + Z from 2.9 on */
	int major = code / 10000, minor = code / 100 % 100;

	for (const struct dmtn_unpack_release *r = dmtn_unpack_releases; r->major; r++)
		if (r->major == major && r->minor == minor)
			return r;
	return NULL;
}

/* ---- which NCCL loaded us ------------------------------------------------ */

typedef int (*nccl_get_version_t)(int *version);

struct find_nccl {
	nccl_get_version_t fn;
};

static int find_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct find_nccl *f = arg;
	void *h;

	if (!info->dlpi_name || !strstr(info->dlpi_name, "libnccl.so"))
		return 0;
	h = dlopen(info->dlpi_name, RTLD_LAZY | RTLD_NOLOAD);
	if (!h)
		return 0;
	*(void **)&f->fn = dlsym(h, "ncclGetVersion");
	dlclose(h);	/* RTLD_NOLOAD took a reference: the library stays */
	return f->fn != NULL;
}

/* NCCL's version code from the process's own NCCL (the one that loaded the
 * plugin: a global symbol, or a libnccl.so loaded locally, as PyTorch's
 * is), or -1 when there is none. */
int dmtn_nccl_version(void)
{
	struct find_nccl f = { NULL };
	int v = -1;

	*(void **)&f.fn = dlsym(RTLD_DEFAULT, "ncclGetVersion");
	if (!f.fn)
		dl_iterate_phdr(find_cb, &f);
	if (!f.fn || f.fn(&v) != 0)
		return -1;
	return v;
}

/* ---- NCCL_PROTO ---------------------------------------------------------- */

/* Does one list ("Simple", "^LL,LL128", ...) enable Simple and nothing else?
 * Unknown words: no (NCCL refuses the variable anyway). */
static bool list_simple_only(const char *s, size_t len)
{
	bool neg = len && s[0] == '^', ll = false, ll128 = false, simple = false;
	size_t i = neg;

	while (i < len) {
		size_t n = strcspn(s + i, ",");

		if (n > len - i)
			n = len - i;
		if (n == 2 && !strncasecmp(s + i, "LL", 2))
			ll = true;
		else if (n == 5 && !strncasecmp(s + i, "LL128", 5))
			ll128 = true;
		else if (n == 6 && !strncasecmp(s + i, "Simple", 6))
			simple = true;
		else
			return false;
		i += n + 1;
	}
	return neg ? ll && ll128 && !simple : simple && !ll && !ll128;
}

bool dmtn_nccl_proto_simple_only(const char *proto)
{
	const char *p = proto;
	bool first = true;

	if (!p || !*p)
		return false;
	/* "LIST" or "LIST;func:LIST;...": the first list applies to every
	 * function, the others to theirs; without a first list, functions
	 * not named keep every protocol */
	while (*p) {
		size_t n = strcspn(p, ";");
		const char *colon = memchr(p, ':', n);
		const char *list = colon ? colon + 1 : p;

		if (first && colon)
			return false;
		if (!list_simple_only(list, n - (size_t)(list - p)))
			return false;
		first = false;
		p += n;
		if (*p == ';')
			p++;
	}
	return true;
}

/* ---- the decision, once at init ------------------------------------------ */

void dmtn_unpack_decide(void)
{
	const struct dmtn_unpack_release *r;
	const char *proto = secure_getenv("NCCL_PROTO");
	const char *ll = secure_getenv("NCCL_ALLOC_P2P_NET_LL_BUFFERS");
	int v;

	dmtn.unpack = false;
	dmtn.nccl_version = v = dmtn_nccl_version();
	if (!dmtn.cfg.unpack) {
		snprintf(dmtn.unpack_why, sizeof(dmtn.unpack_why),
			 "NCCL_DEVMEMTCP_UNPACK=0");
		return;
	}
	if (v < 0) {
		snprintf(dmtn.unpack_why, sizeof(dmtn.unpack_why),
			 "no ncclGetVersion in this process, so the NCCL release (and its unpack queue) is unknown");
		return;
	}
	r = dmtn_unpack_release_of(v);
	if (!r) {
		snprintf(dmtn.unpack_why, sizeof(dmtn.unpack_why),
			 "NCCL %d.%d.%d: its unpack queue's layout is not one this plugin knows (2.19 to 2.30)",
			 v / 10000, v / 100 % 100, v % 100);
		return;
	}
	if (!dmtn_nccl_proto_simple_only(proto)) {
		snprintf(dmtn.unpack_why, sizeof(dmtn.unpack_why),
			 "NCCL_PROTO=%s: NCCL unpacks only in its Simple protocol (its LL and LL128 kernels read received bytes in place): set NCCL_PROTO=Simple",
			 proto ? proto : "(unset)");
		return;
	}
	if (ll && strcmp(ll, "0")) {
		snprintf(dmtn.unpack_why, sizeof(dmtn.unpack_why),
			 "NCCL_ALLOC_P2P_NET_LL_BUFFERS=%s: NCCL would use LL for small point-to-point receives",
			 ll);
		return;
	}
	if (dmtn.cfg.buf_size > (1ull << 32)) {
		snprintf(dmtn.unpack_why, sizeof(dmtn.unpack_why),
			 "NCCL_DEVMEMTCP_BUFFER_SIZE is over 4 GiB: the queue's source offsets have 32 bits");
		return;
	}
	if (dmtn.cfg.mem == DMTN_MEM_HOST) {
		snprintf(dmtn.unpack_why, sizeof(dmtn.unpack_why),
			 "NCCL_DEVMEMTCP_MEM=host: NCCL's kernel reads the bound buffer, which must be GPU memory");
		return;
	}
	dmtn.unpack = true;
	snprintf(dmtn.unpack_why, sizeof(dmtn.unpack_why),
		 "NCCL %d.%d.%d (unpack layout checked against %s), NCCL_PROTO=%s",
		 v / 10000, v / 100 % 100, v % 100, r->checked, proto);
}

/* ---- one receive comm's queue -------------------------------------------- */

struct dmtn_unpack_ticket {
	struct dmtn_unpack *u;
	uint64_t seq;
};

struct dmtn_unpack {
	int cuda_dev;
	void *host;			/* pinned: the meta, then the handle */
	uint64_t dptr;			/* the GPU's address of host */
	struct nccl_unpack_meta *meta;	/* the host's view */
	struct nccl_unpack_handle *handle;
	uint64_t bounce;		/* src_off counts from here */
	uint64_t posted;		/* receives numbered so far */
	uint64_t consumed;		/* receives NCCL's kernel has read (atomic) */
	bool closing;			/* atomic */
	struct dmtn_unpack_ticket tickets[NCCL_UNPACK_QUEUE_DEPTH];
};

#define HANDLE_OFF ((sizeof(struct nccl_unpack_meta) + 63) & ~(size_t)63)

int dmtn_unpack_attach(struct dmtn_comm *c, nccl_dev_handle_t *h)
{
	struct dmtn_unpack *u;
	uint64_t base = 0;
	int dev = -1, ret;

	if (h->version != NCCL_NET_DEVICE_UNPACK_VERSION) {
		DMTN_WARN("accept: NCCL asks for unpack version %d, this plugin offered %d",
			  h->version, NCCL_NET_DEVICE_UNPACK_VERSION);
		return -EPROTO;
	}
	/* every handle of the process carries one bounce address: NCCL's
	 * kernel keeps one per thread block, whichever comm loaded it last */
	dmtn_devmem_rx_gpu(c, &dev, &base);
	pthread_mutex_lock(&dmtn.lock);
	if (!dmtn.unpack_base_set) {
		dmtn.unpack_base = base;
		dmtn.unpack_base_set = true;
	}
	base = dmtn.unpack_base;
	pthread_mutex_unlock(&dmtn.lock);
	if (dev < 0 && dmtn_cuda_current_device(&dev)) {
		DMTN_WARN("accept: NCCL asks for device unpack but no CUDA context is current: %s",
			  dmtn_cuda_why());
		return -ENODEV;
	}
	u = calloc(1, sizeof(*u));
	if (!u)
		return -ENOMEM;
	ret = dmtn_cuda_host_alloc(dev, HANDLE_OFF + sizeof(struct nccl_unpack_handle),
				   &u->host, &u->dptr);
	if (ret) {
		DMTN_WARN("accept: the unpack queue (%zu bytes of pinned memory): %s",
			  HANDLE_OFF + sizeof(struct nccl_unpack_handle), dmtn_cuda_why());
		free(u);
		return ret;
	}
	memset(u->host, 0, HANDLE_OFF + sizeof(struct nccl_unpack_handle));
	u->cuda_dev = dev;
	u->meta = u->host;
	u->handle = (struct nccl_unpack_handle *)((char *)u->host + HANDLE_OFF);
	u->bounce = base;
	u->handle->meta = (struct nccl_unpack_meta *)(uintptr_t)u->dptr;
	u->handle->bounce_buf = (void *)(uintptr_t)base;
	u->handle->head = 0;
	h->handle = (void *)(uintptr_t)(u->dptr + HANDLE_OFF);
	h->size = sizeof(struct nccl_unpack_handle);
	h->needs_proxy_progress = 1;
	c->unpack = u;
	DMTN_INFO(DMTN_INIT_NET,
		  "recv comm %p from %s: device unpack, queue at %#llx, bounce address %#llx%s",
		  (void *)c, c->peer, (unsigned long long)(u->dptr + HANDLE_OFF),
		  (unsigned long long)base,
		  c->drx ? "" : " (plain TCP: every receive is placed by the plugin)");
	return 0;
}

void dmtn_unpack_free(struct dmtn_comm *c)
{
	struct dmtn_unpack *u = c->unpack;

	if (!u)
		return;
	c->unpack = NULL;
	dmtn_cuda_host_free(u->cuda_dev, u->host);
	free(u);
}

/* NCCL is done with the comm: nothing will read the queue any more. */
void dmtn_unpack_closing(struct dmtn_comm *c)
{
	if (c->unpack)
		__atomic_store_n(&c->unpack->closing, true, __ATOMIC_RELEASE);
}

bool dmtn_unpack_full(const struct dmtn_comm *c)
{
	const struct dmtn_unpack *u = c->unpack;

	return u->posted - __atomic_load_n(&u->consumed, __ATOMIC_ACQUIRE) >=
	       NCCL_UNPACK_QUEUE_DEPTH;
}

void dmtn_unpack_post(struct dmtn_comm *c, struct dmtn_req *r)
{
	struct dmtn_unpack *u = c->unpack;

	r->unpack = true;
	r->useq = u->posted++;
	r->nent = 0;
	u->tickets[r->useq % NCCL_UNPACK_QUEUE_DEPTH] =
		(struct dmtn_unpack_ticket){ u, r->useq };
}

bool dmtn_unpack_add(struct dmtn_comm *c, struct dmtn_req *r, uint64_t addr,
		     uint32_t len, uint64_t dst_off)
{
	struct dmtn_unpack *u = c->unpack;
	struct nccl_unpack_entry *e;

	if (!addr || addr < u->bounce || addr - u->bounce > UINT32_MAX ||
	    addr - u->bounce + len > (1ull << 32) ||
	    r->nent == NCCL_UNPACK_SLOT_ENTRIES)
		return false;
	e = &u->meta->mem[r->useq % NCCL_UNPACK_QUEUE_DEPTH][r->nent++];
	e->src_off = (uint32_t)(addr - u->bounce);
	e->len = len;
	e->dst_off = dst_off;
	return true;
}

void dmtn_unpack_complete(struct dmtn_comm *c, struct dmtn_req *r)
{
	struct dmtn_unpack *u = c->unpack;

	/* the entries first: NCCL's proxy posts the step after test()
	 * returned, with a full barrier, and the kernel reads the count
	 * first */
	__atomic_store_n(&u->meta->cnt[r->useq % NCCL_UNPACK_QUEUE_DEPTH],
			 (uint64_t)r->nent, __ATOMIC_RELEASE);
}

int dmtn_unpack_consumed(struct dmtn_comm *c, struct dmtn_req *r)
{
	struct dmtn_unpack *u = c->unpack;
	uint64_t want = __atomic_load_n(&u->consumed, __ATOMIC_RELAXED);

	if (r->useq != want) {
		DMTN_WARN("irecvConsumed: receive %llu of recv comm %p, but receive %llu is the oldest NCCL has not consumed",
			  (unsigned long long)r->useq, (void *)c,
			  (unsigned long long)want);
		return -EINVAL;
	}
	__atomic_store_n(&u->consumed, r->useq + 1, __ATOMIC_RELEASE);
	return 0;
}

/* devmemtcp_done_fn of the fragments of a receive in the queue */
int dmtn_unpack_done(void *arg, bool wait)
{
	const struct dmtn_unpack_ticket *t = arg;
	const struct dmtn_unpack *u = t->u;

	if (__atomic_load_n(&u->consumed, __ATOMIC_ACQUIRE) > t->seq ||
	    __atomic_load_n(&u->closing, __ATOMIC_ACQUIRE))
		return 1;
	/* releasing them now could let the NIC overwrite what the kernel
	 * has still to read: they stay held */
	return wait ? -EBUSY : 0;
}

void *dmtn_unpack_ticket(struct dmtn_comm *c, const struct dmtn_req *r)
{
	return &c->unpack->tickets[r->useq % NCCL_UNPACK_QUEUE_DEPTH];
}

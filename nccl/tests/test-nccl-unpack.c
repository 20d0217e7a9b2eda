// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * NCCL's device unpack, the parts that need no transfer (built with the
 * plugin's sources):
 *
 *   test-nccl-unpack layout|choice|queue|all (layout and choice)
 *
 *   layout: the plugin's declarations of NCCL's unpack queue (net_abi.h)
 *       against the field offsets and sizes NCCL publishes in
 *       src/device/network/unpack/unpack_defs.h and
 *       src/include/nccl_device/net_device.h (the same in every release
 *       from 2.19 to 2.30; nccl/tests/check-unpack-layout.py compares them
 *       with an NCCL source tree), printed as a table;
 *   choice: which NCCL versions the plugin offers unpack to; which
 *       NCCL_PROTO values leave NCCL the Simple protocol alone; the
 *       choice made at init, and the reason it logs, for a known NCCL, an
 *       unknown one, no NCCL in the process, NCCL_PROTO unset, LL buffers
 *       for point-to-point, a buffer over 4 GiB, host memory.
 *
 * Exit 0 pass, 1 fail.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "plugin.h"
#include "unpack.h"



/* what ncclGetVersion says; 0: there is none (it fails) */
static int version = 22809;

__attribute__((visibility("default"))) int ncclGetVersion(int *v);
int ncclGetVersion(int *v)
{
	if (!version)
		return 3;
	*v = version;
	return 0;
}

/* ---- layout ----------------------------------------------------------------- */

struct field {
	const char *name;	/* NCCL's */
	size_t ours, published;
};

static void layout(void)
{
	/* NCCL's: union loadMeta { uint64_t r64[2]; struct { uint32_t
	 * src_off; uint32_t len; uint64_t dst_off; }; } alignas(16);
	 * struct netUnpackMeta { loadMeta mem[16][2048]; uint64_t cnt[16]; };
	 * struct unpackNetDeviceHandle { struct netUnpackMeta *meta; void
	 * *bounce_buf; uint64_t head; }; ncclNetDeviceHandle_v7_t {
	 * ncclNetDeviceType netDeviceType; int netDeviceVersion; void
	 * *handle; size_t size; int needsProxyProgress; } */
	static const struct field f[] = {
		{ "sizeof(union loadMeta)", sizeof(struct nccl_unpack_entry), 16 },
		{ "_Alignof(union loadMeta)", _Alignof(struct nccl_unpack_entry), 16 },
		{ "loadMeta.src_off", offsetof(struct nccl_unpack_entry, src_off), 0 },
		{ "loadMeta.len", offsetof(struct nccl_unpack_entry, len), 4 },
		{ "loadMeta.dst_off", offsetof(struct nccl_unpack_entry, dst_off), 8 },
		{ "NCCL_NET_DEVICE_UNPACK_MAX_QUEUE_DEPTH", NCCL_UNPACK_QUEUE_DEPTH, 16 },
		{ "NET_UNPACK_MAX_SLICE_PAGES", NCCL_UNPACK_SLOT_ENTRIES, 2048 },
		{ "netUnpackMeta.mem", offsetof(struct nccl_unpack_meta, mem), 0 },
		{ "netUnpackMeta.mem[1]", offsetof(struct nccl_unpack_meta, mem[1]), 32768 },
		{ "netUnpackMeta.cnt", offsetof(struct nccl_unpack_meta, cnt), 524288 },
		{ "sizeof(struct netUnpackMeta)", sizeof(struct nccl_unpack_meta), 524416 },
		{ "unpackNetDeviceHandle.meta", offsetof(struct nccl_unpack_handle, meta), 0 },
		{ "unpackNetDeviceHandle.bounce_buf", offsetof(struct nccl_unpack_handle, bounce_buf), 8 },
		{ "unpackNetDeviceHandle.head", offsetof(struct nccl_unpack_handle, head), 16 },
		{ "sizeof(struct unpackNetDeviceHandle)", sizeof(struct nccl_unpack_handle), 24 },
		{ "ncclNetDeviceHandle_v7_t.netDeviceType", offsetof(struct nccl_net_device_handle, type), 0 },
		{ "ncclNetDeviceHandle_v7_t.netDeviceVersion", offsetof(struct nccl_net_device_handle, version), 4 },
		{ "ncclNetDeviceHandle_v7_t.handle", offsetof(struct nccl_net_device_handle, handle), 8 },
		{ "ncclNetDeviceHandle_v7_t.size", offsetof(struct nccl_net_device_handle, size), 16 },
		{ "ncclNetDeviceHandle_v7_t.needsProxyProgress", offsetof(struct nccl_net_device_handle, needs_proxy_progress), 24 },
		{ "NCCL_NET_DEVICE_UNPACK", NCCL_NET_DEVICE_UNPACK, 1 },
		{ "NCCL_NET_DEVICE_UNPACK_VERSION", NCCL_NET_DEVICE_UNPACK_VERSION, 7 },
	};

	printf("%-46s %8s %10s\n", "NCCL's field or constant", "ours", "published");
	for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
		printf("%-46s %8zu %10zu\n", f[i].name, f[i].ours, f[i].published);
		CHECK(f[i].ours == f[i].published, "%s: %zu, NCCL's is %zu",
		      f[i].name, f[i].ours, f[i].published);
	}
}

/* ---- releases ----------------------------------------------------------------- */

static void releases(void)
{
	static const struct {
		int code;
		bool known;
	} v[] = {
		{ 21900, true }, { 21904, true }, { 22003, true }, { 22809, true },
		{ 22907, true }, { 23007, true }, { 23099, true },
		{ 21806, false }, { 21899, false }, { 23100, false },
		{ 30000, false }, { 2708, false }, { -1, false }, { 0, false },
	};

	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
		CHECK(!!dmtn_unpack_release_of(v[i].code) == v[i].known,
		      "NCCL version code %d: %s", v[i].code,
		      v[i].known ? "unknown" : "known");
	CHECK(dmtn_unpack_release_of(22809) &&
	      strstr(dmtn_unpack_release_of(22809)->checked, "v2.28.9-1"),
	      "2.28.9 was checked against v2.28.9-1");
}

/* ---- NCCL_PROTO ------------------------------------------------------------------ */

static void proto(void)
{
	static const struct {
		const char *v;
		bool simple;
	} p[] = {
		{ "Simple", true }, { "simple", true }, { "SIMPLE", true },
		{ "^LL,LL128", true }, { "^ll128,ll", true },
		{ "Simple;allreduce:Simple", true },
		{ "Simple;allreduce:^LL,LL128", true },
		{ "Simple,Simple", true },
		{ NULL, false }, { "", false }, { "LL", false },
		{ "LL,Simple", false }, { "Simple,LL128", false },
		{ "^LL", false }, { "^LL128", false }, { "^LL,LL128,Simple", false },
		{ "Simple;allreduce:LL", false },
		{ "allreduce:Simple", false },	/* the others keep every one */
		{ "Simple;broadcast:^LL", false },
		{ "Simpl", false }, { "Simple ", false }, { "^", false },
	};

	for (size_t i = 0; i < sizeof(p) / sizeof(p[0]); i++)
		CHECK(dmtn_nccl_proto_simple_only(p[i].v) == p[i].simple,
		      "NCCL_PROTO=%s: %s", p[i].v ? p[i].v : "(unset)",
		      p[i].simple ? "not Simple only" : "Simple only");
}

/* ---- the choice at init ------------------------------------------------------------ */

static void decide_case(int v, const char *proto_env, const char *ll,
			uint64_t buf, enum dmtn_mem mem, bool offer,
			const char *why)
{
	version = v;
	if (proto_env)
		setenv("NCCL_PROTO", proto_env, 1);
	else
		unsetenv("NCCL_PROTO");
	if (ll)
		setenv("NCCL_ALLOC_P2P_NET_LL_BUFFERS", ll, 1);
	else
		unsetenv("NCCL_ALLOC_P2P_NET_LL_BUFFERS");
	memset(&dmtn.cfg, 0, sizeof(dmtn.cfg));
	dmtn.cfg.unpack = true;
	dmtn.cfg.buf_size = buf;
	dmtn.cfg.mem = mem;
	dmtn_unpack_decide();
	CHECK(dmtn.unpack == offer && strstr(dmtn.unpack_why, why),
	      "version %d NCCL_PROTO=%s: %s (%s), expected %s with '%s'", v,
	      proto_env ? proto_env : "(unset)", dmtn.unpack ? "offered" : "not offered",
	      dmtn.unpack_why, offer ? "offered" : "not offered", why);
}

static void decide(void)
{
	decide_case(22809, "Simple", NULL, 64 << 20, DMTN_MEM_AUTO, true,
		    "NCCL 2.28.9 (unpack layout checked against v2.28.3-1, v2.28.7-1, v2.28.9-1), NCCL_PROTO=Simple");
	CHECK(dmtn.nccl_version == 22809, "nccl_version %d", dmtn.nccl_version);
	decide_case(21905, "^LL,LL128", "0", 4ull << 30, DMTN_MEM_CUDA, true,
		    "NCCL 2.19.5");
	decide_case(23100, "Simple", NULL, 64 << 20, DMTN_MEM_AUTO, false,
		    "NCCL 2.31.0: its unpack queue's layout is not one this plugin knows (2.19 to 2.30)");
	decide_case(21806, "Simple", NULL, 64 << 20, DMTN_MEM_AUTO, false,
		    "NCCL 2.18.6: its unpack queue's layout is not one this plugin knows");
	decide_case(0, "Simple", NULL, 64 << 20, DMTN_MEM_AUTO, false,
		    "no ncclGetVersion in this process, so the NCCL release (and its unpack queue) is unknown");
	CHECK(dmtn.nccl_version == -1, "nccl_version %d", dmtn.nccl_version);
	decide_case(22809, NULL, NULL, 64 << 20, DMTN_MEM_AUTO, false,
		    "NCCL_PROTO=(unset): NCCL unpacks only in its Simple protocol (its LL and LL128 kernels read received bytes in place): set NCCL_PROTO=Simple");
	decide_case(22809, "LL,Simple", NULL, 64 << 20, DMTN_MEM_AUTO, false,
		    "NCCL_PROTO=LL,Simple: NCCL unpacks only in its Simple protocol");
	decide_case(22809, "Simple", "1", 64 << 20, DMTN_MEM_AUTO, false,
		    "NCCL_ALLOC_P2P_NET_LL_BUFFERS=1: NCCL would use LL for small point-to-point receives");
	decide_case(22809, "Simple", NULL, (4ull << 30) + 4096, DMTN_MEM_AUTO, false,
		    "NCCL_DEVMEMTCP_BUFFER_SIZE is over 4 GiB: the queue's source offsets have 32 bits");
	decide_case(22809, "Simple", NULL, 64 << 20, DMTN_MEM_HOST, false,
		    "NCCL_DEVMEMTCP_MEM=host: NCCL's kernel reads the bound buffer, which must be GPU memory");
	/* not asked for */
	version = 22809;
	setenv("NCCL_PROTO", "Simple", 1);
	memset(&dmtn.cfg, 0, sizeof(dmtn.cfg));
	dmtn_unpack_decide();
	CHECK(!dmtn.unpack && !strcmp(dmtn.unpack_why, "NCCL_DEVMEMTCP_UNPACK=0"),
	      "not asked for: %s", dmtn.unpack_why);
}

/* ---- one comm's queue, on the fake driver ------------------------------------ */

/* the fake CUDA driver in NCCL mode (tests/lib/fakecuda): a mapped host
 * allocation's device address is its host address plus this */
#define DEVMAP_OFF (1ull << 44)
/* where the bound buffer would start on the GPU */
#define BOUNCE 0x7f3200000000ull

static char last_warn[1024];

static void capture(enum nccl_log_level level, unsigned long flags,
		    const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	if (level != NCCL_LOG_WARN)
		return;
	va_start(ap, fmt);
	vsnprintf(last_warn, sizeof(last_warn), fmt, ap);
	va_end(ap);
}

/* The host view of a device address the plugin handed NCCL's kernel;
 * NULL (and a failure) when it is not a mapped one. */
static void *host_of(uint64_t dev, const char *what)
{
	CHECK(dev >= DEVMAP_OFF, "%s is %#llx: not a device address of the mapped queue",
	      what, (unsigned long long)dev);
	return dev >= DEVMAP_OFF ? (void *)(uintptr_t)(dev - DEVMAP_OFF) : NULL;
}

static void entry_is(const struct nccl_unpack_meta *m, int slot, int i,
		     uint32_t src_off, uint32_t len, uint64_t dst_off)
{
	const struct nccl_unpack_entry *e = &m->mem[slot][i];

	CHECK(e->src_off == src_off && e->len == len && e->dst_off == dst_off,
	      "slot %d entry %d: {%u, %u, %llu}, expected {%u, %u, %llu}", slot, i,
	      e->src_off, e->len, (unsigned long long)e->dst_off, src_off, len,
	      (unsigned long long)dst_off);
}

static void queue(void)
{
	enum { DEPTH = NCCL_UNPACK_QUEUE_DEPTH, SLOT = NCCL_UNPACK_SLOT_ENTRIES };
	int (*retain)(void **, int), (*push)(void *), (*pop)(void **);
	struct dmtn_req r[DEPTH + 1];
	struct nccl_unpack_handle *uh;
	struct nccl_unpack_meta *m;
	struct dmtn_comm *c;
	nccl_dev_handle_t h;
	void *lib, *ctx, *t0, *t1;
	bool all, fake;

	lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	CHECK(lib, "libcuda.so.1 (the fake CUDA driver): %s", dlerror());
	if (!lib)
		return;
	*(void **)&retain = dlsym(lib, "cuDevicePrimaryCtxRetain");
	*(void **)&push = dlsym(lib, "cuCtxPushCurrent_v2");
	*(void **)&pop = dlsym(lib, "cuCtxPopCurrent_v2");
	fake = dlsym(lib, "fakecuda_calls") && dlsym(lib, "cuMemHostAlloc");
	CHECK(retain && push && pop && fake, "libcuda.so.1 is not the fake CUDA driver");
	if (!retain || !push || !pop || !fake)
		return;
	dmtn.log = capture;
	memset(r, 0, sizeof(r));
	c = calloc(1, sizeof(*c));
	snprintf(c->peer, sizeof(c->peer), "10.0.0.2");

	/* no current context, no bound buffer: no device to map it for */
	dmtn.unpack_base = BOUNCE;
	dmtn.unpack_base_set = true;
	h = (nccl_dev_handle_t){ .type = NCCL_NET_DEVICE_UNPACK,
				 .version = NCCL_NET_DEVICE_UNPACK_VERSION };
	CHECK(dmtn_unpack_attach(c, &h) == -ENODEV && !c->unpack &&
		      strstr(last_warn, "NCCL asks for device unpack but no CUDA context is current"),
	      "attach without a context: %s", last_warn);
	CHECK(retain(&ctx, 0) == 0 && push(ctx) == 0, "the fake driver's context");
	/* another unpack version: refused */
	h.version = NCCL_NET_DEVICE_UNPACK_VERSION - 1;
	CHECK(dmtn_unpack_attach(c, &h) == -EPROTO && !c->unpack &&
		      strstr(last_warn, "NCCL asks for unpack version 6, this plugin offered 7"),
	      "attach of version 6: %s", last_warn);
	h.version = NCCL_NET_DEVICE_UNPACK_VERSION;
	CHECK(dmtn_unpack_attach(c, &h) == 0 && c->unpack, "attach: %s", last_warn);
	if (!c->unpack)
		goto out;

	/* what NCCL's kernel is given: device addresses only */
	CHECK(h.size == sizeof(struct nccl_unpack_handle) && h.needs_proxy_progress == 1,
	      "handle size %zu, needsProxyProgress %d", h.size, h.needs_proxy_progress);
	uh = host_of((uintptr_t)h.handle, "the device handle");
	if (!uh)
		goto out;
	CHECK((uintptr_t)uh->bounce_buf == BOUNCE && uh->head == 0,
	      "bounce_buf %p (expected %#llx), head %llu", uh->bounce_buf, BOUNCE,
	      (unsigned long long)uh->head);
	m = host_of((uintptr_t)uh->meta, "the handle's meta");
	if (!m)
		goto out;
	/* the driver's pinned memory is not zeroed: the plugin clears it */
	all = true;
	for (int q = 0; q < DEPTH; q++)
		all &= m->cnt[q] == 0;
	CHECK(all, "a slot's count is not 0 before any receive");

	/* the depth: a receive per slot until NCCL consumed the oldest */
	for (int i = 0; i < DEPTH; i++) {
		CHECK(!dmtn_unpack_full(c), "full after %d receives", i);
		dmtn_unpack_post(c, &r[i]);
		CHECK(r[i].unpack && r[i].useq == (uint64_t)i && r[i].nent == 0,
		      "receive %d numbered %llu", i, (unsigned long long)r[i].useq);
	}
	CHECK(dmtn_unpack_full(c), "not full after %d receives", DEPTH);

	/* receive 0 fills its slot: a page per entry, the last refused */
	all = true;
	for (int k = 0; k < SLOT; k++)
		all &= dmtn_unpack_add(c, &r[0], BOUNCE + 4096ull * (SLOT - 1 - k), 4096,
				       4096ull * k);
	CHECK(all && r[0].nent == SLOT, "%u of %d entries taken", r[0].nent, SLOT);
	CHECK(!dmtn_unpack_add(c, &r[0], BOUNCE, 4096, 0) && r[0].nent == SLOT,
	      "entry %d of a slot taken", SLOT + 1);

	/* receive 1: source offsets are 32 bits from the bounce address */
	CHECK(!dmtn_unpack_add(c, &r[1], 0, 1, 0), "address 0 taken");
	CHECK(!dmtn_unpack_add(c, &r[1], BOUNCE - 1, 1, 0), "an address below the bounce address taken");
	CHECK(!dmtn_unpack_add(c, &r[1], BOUNCE + (1ull << 32), 1, 0),
	      "a source offset of 4 GiB taken");
	CHECK(!dmtn_unpack_add(c, &r[1], BOUNCE + (1ull << 32) - 4096, 4097, 0),
	      "a fragment ending past 4 GiB taken");
	CHECK(r[1].nent == 0, "refused entries counted: %u", r[1].nent);
	CHECK(dmtn_unpack_add(c, &r[1], BOUNCE + (1ull << 32) - 4096, 4096, 7),
	      "a fragment ending at 4 GiB refused");
	CHECK(dmtn_unpack_add(c, &r[1], BOUNCE, 1, 1ull << 40),
	      "a destination offset of 1 TiB refused");
	/* the count is published last: none before complete */
	CHECK(m->cnt[0] == 0 && m->cnt[1] == 0, "counts %llu, %llu before complete",
	      (unsigned long long)m->cnt[0], (unsigned long long)m->cnt[1]);
	dmtn_unpack_complete(c, &r[0]);
	dmtn_unpack_complete(c, &r[1]);
	/* receive 2, all placed by the plugin: a count of 0 over a stale one */
	m->cnt[2] = 5;
	dmtn_unpack_complete(c, &r[2]);
	CHECK(m->cnt[0] == SLOT && m->cnt[1] == 2 && m->cnt[2] == 0,
	      "counts %llu, %llu, %llu", (unsigned long long)m->cnt[0],
	      (unsigned long long)m->cnt[1], (unsigned long long)m->cnt[2]);
	entry_is(m, 0, 0, 4096u * (SLOT - 1), 4096, 0);
	entry_is(m, 0, SLOT - 1, 0, 4096, 4096ull * (SLOT - 1));
	for (int k = 1; k < SLOT - 1; k++)
		if (m->mem[0][k].src_off != 4096u * (SLOT - 1 - k) || m->mem[0][k].len != 4096 ||
		    m->mem[0][k].dst_off != 4096ull * k) {
			entry_is(m, 0, k, 4096u * (SLOT - 1 - k), 4096, 4096ull * k);
			break;
		}
	entry_is(m, 1, 0, (uint32_t)((1ull << 32) - 4096), 4096, 7);
	entry_is(m, 1, 1, 0, 1, 1ull << 40);
	/* nothing written past a slot's entries (the plugin zeroed them) */
	entry_is(m, 1, 2, 0, 0, 0);
	entry_is(m, 2, 0, 0, 0, 0);

	/* irecvConsumed in posting order only; tokens back once consumed */
	t0 = dmtn_unpack_ticket(c, &r[0]);
	t1 = dmtn_unpack_ticket(c, &r[1]);
	CHECK(dmtn_unpack_done(t0, false) == 0 && dmtn_unpack_done(t0, true) == -EBUSY,
	      "receive 0's fragments released before NCCL consumed it");
	last_warn[0] = 0;
	CHECK(dmtn_unpack_consumed(c, &r[1]) == -EINVAL &&
		      strstr(last_warn, "irecvConsumed: receive 1 of recv comm") &&
		      strstr(last_warn, "but receive 0 is the oldest NCCL has not consumed"),
	      "irecvConsumed out of order: %s", last_warn);
	CHECK(dmtn_unpack_consumed(c, &r[0]) == 0, "irecvConsumed of receive 0");
	CHECK(dmtn_unpack_done(t0, false) == 1, "receive 0 consumed, its fragments held");
	CHECK(dmtn_unpack_done(t1, false) == 0, "receive 1's fragments released with receive 0's");
	CHECK(!dmtn_unpack_full(c), "full after receive 0 was consumed");

	/* receive 16 takes slot 0 again, its count over the old one */
	dmtn_unpack_post(c, &r[DEPTH]);
	CHECK(r[DEPTH].useq == DEPTH && dmtn_unpack_full(c), "receive %d numbered %llu", DEPTH,
	      (unsigned long long)r[DEPTH].useq);
	CHECK(dmtn_unpack_add(c, &r[DEPTH], BOUNCE + 8192, 100, 5), "receive %d's entry", DEPTH);
	dmtn_unpack_complete(c, &r[DEPTH]);
	CHECK(m->cnt[0] == 1, "slot 0's count %llu after receive %d", (unsigned long long)m->cnt[0],
	      DEPTH);
	entry_is(m, 0, 0, 8192, 100, 5);

	/* NCCL closes the comm: every held fragment may go back */
	dmtn_unpack_closing(c);
	CHECK(dmtn_unpack_done(t1, false) == 1, "receive 1's fragments held after close");
out:
	dmtn_unpack_free(c);
	CHECK(!c->unpack, "the queue after free");
	free(c);
	pop(&ctx);
	dmtn.log = NULL;
	printf("queue: depth %d, %d entries per slot, source offsets below 4 GiB\n", DEPTH, SLOT);
}

int main(int argc, char **argv)
{
	const char *what = argc > 1 ? argv[1] : "all";
	bool all = !strcmp(what, "all");

	bool choice = all || !strcmp(what, "choice");

	if (all || !strcmp(what, "layout"))
		layout();
	if (choice)
		releases();
	if (choice)
		proto();
	if (choice)
		decide();
	/* not in all: it needs the fake driver as libcuda.so.1 */
	if (!strcmp(what, "queue"))
		queue();
	printf("%s\n", failures ? "FAIL" : "PASS");
	return failures ? 1 : 0;
}

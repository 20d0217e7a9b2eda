// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * NCCL's device unpack, the parts that need no transfer (built with the
 * plugin's sources):
 *
 *   test-nccl-unpack layout|choice|all
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
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin.h"
#include "unpack.h"

static int failures;

#define CHECK(cond, ...)                                                       \
	do {                                                                   \
		if (!(cond)) {                                                 \
			printf("FAIL %s:%d: %s: ", __func__, __LINE__, #cond); \
			printf(__VA_ARGS__);                                   \
			printf("\n");                                          \
			failures++;                                            \
		}                                                              \
	} while (0)

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
	printf("%s\n", failures ? "FAIL" : "PASS");
	return failures ? 1 : 0;
}

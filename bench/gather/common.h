/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * What the GPU benchmarks (bench-gather, bench-pipeline) share: the device
 * and its buffers, timing, random fragments, and the gather variants that
 * test builds select at devmemtcp_gpu_new (DEVMEMTCP_GATHER_* knobs).
 */
#ifndef DEVMEMTCP_BENCH_COMMON_H
#define DEVMEMTCP_BENCH_COMMON_H

#include <stdio.h>
#include <stdlib.h>

#include "gpufixture.h"	/* tests/lib: the gpu layer and the driver table */

#define CK(call)                                                               \
	do {                                                                   \
		CUresult r_ = (call);                                          \
		if (r_ != CUDA_SUCCESS) {                                      \
			fprintf(stderr, "%s:%d: %s: CUresult %d\n", __FILE__,  \
				__LINE__, #call, r_);                          \
			exit(1);                                               \
		}                                                              \
	} while (0)

struct bench {
	const struct dmt_cuda *cu;
	struct devmemtcp_ctx *ctx;
	struct devmemtcp_gpu *gpu;	/* default options */
	int device;
	char name[256];
	CUdevice dev;
	CUcontext cctx;
	CUstream st;
	CUevent ev0, ev1;
	CUdeviceptr src, dst;		/* random bytes; room for gathers */
	uint64_t src_size, dst_size;
	uint8_t *pattern;		/* src repeats these PATTERN_SIZE bytes */
};

#define PATTERN_SIZE (64ull << 20)

/* 0 when the len bytes at host memory got are those of src + off. */
int bench_same(const struct bench *b, const uint8_t *got, uint64_t off,
	       uint64_t len);

/* Open device, allocate src_size bytes of random source and dst_size of
 * destination.  Returns -1 to go on, else an exit status (77: no GPU). */
int bench_open(struct bench *b, int device, uint64_t src_size,
	       uint64_t dst_size);
void bench_close(struct bench *b);
/* "- GPU: ..., driver ..., date" lines. */
void bench_header(const struct bench *b, const char *title);

double now_s(void);
double thread_cpu_s(void);
double median(double *v, int n);
uint64_t rnd(void);

/* Fragment sets as a NIC returns them, from the source. */
enum dist { D_4K, D_1448, D_MIXED, D_4K_SEQ, D_N };
extern const char *const dist_name[D_N];
extern const char *const dist_short[D_N];
/* Fragments totalling about bytes (at most max of them; 0: no limit) from
 * [base, base + size): *fp (malloc'ed), their total in *totalp. */
size_t make_frags(enum dist d, uint64_t bytes, CUdeviceptr base, uint64_t size,
		  struct devmemtcp_frag **fp, uint64_t *totalp);

/* A way to run gathers (test-build knobs and options of devmemtcp_gpu_new). */
struct variant {
	const char *name;
	const char *mode;	/* DEVMEMTCP_GATHER_MODE */
	const char *split;	/* DEVMEMTCP_GATHER_SPLIT */
	const char *inline_max;	/* DEVMEMTCP_GATHER_INLINE_MAX */
	bool cached;		/* DEVMEMTCP_GATHER_CACHED */
	bool no_pdl;		/* DEVMEMTCP_GATHER_NO_PDL: no programmatic dependence */
	uint32_t flags, max_frags, slots;
};
/* NULL (and a message) when the variant cannot be opened. */
struct devmemtcp_gpu *variant_open(const struct bench *b,
				   const struct variant *v);

/* Gather or die. */
void gather(const struct bench *b, struct devmemtcp_gpu *g,
	    const struct devmemtcp_frag *f, size_t n, CUdeviceptr to,
	    uint64_t len, CUstream st);
/* GPU ms between ev0 and ev1 (synchronises). */
double event_ms(const struct bench *b);

#endif

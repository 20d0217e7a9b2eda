// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The memory behind a bound dma-buf, found by the emulator itself: a
 * mappable dma-buf (the emulated udmabuf's memfd, a real udmabuf or vgem
 * buffer) through its own mapping; CUDA memory through what the test
 * build's CUDA shim saw the library export (emu-cuda.h).  Payload for
 * CUDA memory is received into pinned staging memory and goes to the GPU
 * on a non-blocking stream of the emulator's own, by default in one
 * host-to-device copy and one launch of a scatter kernel per receive,
 * never a call per page ("CUDA copies" below); the stream is synchronised
 * before the receive returns.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "emu.h"
#include "emu-cuda.h"
#include "emu-scatter-ptx.h"
#include "uapi.h"

#ifndef HUGETLBFS_MAGIC
#define HUGETLBFS_MAGIC 0x958458f6
#endif

#define STAGING (8u << 20)
#define MAX_EXPORTS 64
#define MAX_GROUPS 1024

bool emu_udmabuf_of(int fd, uint64_t *size, bool *huge);

struct cuda_export {
	uint64_t dev, ino;
	unsigned long long dptr;
	size_t size;
	void *ctx;
	struct emu_cuda_ops ops;
};

static pthread_mutex_t mem_lock = PTHREAD_MUTEX_INITIALIZER;
static struct cuda_export exports[MAX_EXPORTS];

struct emu_mem {
	uint32_t id;
	uint8_t kind;
	uint8_t *cpu;
	size_t len;
	struct cuda_export cu;
};

static struct emu_mem mems[EMU_MAX_BINDINGS];

__attribute__((visibility("default"))) void
devmemtcp_emu_cuda_export(int fd, unsigned long long dptr, size_t size, void *ctx,
			  const struct emu_cuda_ops *ops);

void devmemtcp_emu_cuda_export(int fd, unsigned long long dptr, size_t size, void *ctx,
			       const struct emu_cuda_ops *ops)
{
	struct stat st;
	int slot = -1;

	if (fstat(fd, &st))
		return;
	pthread_mutex_lock(&mem_lock);
	for (int i = 0; i < MAX_EXPORTS; i++) {
		if (exports[i].ino == (uint64_t)st.st_ino && exports[i].dev == (uint64_t)st.st_dev) {
			slot = i;
			break;
		}
		if (!exports[i].ino && slot < 0)
			slot = i;
	}
	if (slot >= 0)
		exports[slot] = (struct cuda_export){ st.st_dev, st.st_ino, dptr, size, ctx, *ops };
	pthread_mutex_unlock(&mem_lock);
	if (slot < 0)
		emu_unmodelled("more than %d CUDA dma-buf exports", MAX_EXPORTS);
}

static const struct cuda_export *export_of_locked(uint64_t dev, uint64_t ino)
{
	for (int i = 0; i < MAX_EXPORTS; i++)
		if (exports[i].ino == ino && exports[i].dev == dev)
			return &exports[i];
	return NULL;
}

static const struct cuda_export *export_of(uint64_t dev, uint64_t ino)
{
	const struct cuda_export *e;

	pthread_mutex_lock(&mem_lock);
	e = export_of_locked(dev, ino);
	pthread_mutex_unlock(&mem_lock);
	return e;
}

static void exporter_name(int fd, char *buf, size_t len)
{
	char path[64], line[256];
	FILE *f;

	snprintf(buf, len, "unknown");
	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	f = fopen(path, "re");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "exp_name:", 9)) {
			char *p = line + 9;

			while (*p == ' ' || *p == '\t')
				p++;
			p[strcspn(p, "\n")] = 0;
			snprintf(buf, len, "%.63s", p);
		}
	fclose(f);
}

int emu_mem_probe(int fd, uint64_t *size, uint8_t *kind, uint8_t *hugetlb,
		  uint64_t *dev, uint64_t *ino, char *msg, size_t len)
{
	const struct cuda_export *e;
	struct statfs sfs;
	struct stat st;
	bool huge = false;
	char exp[64];
	void *m;

	msg[0] = 0;
	if (fd < 0 || fstat(fd, &st))
		return -EBADF;
	*dev = st.st_dev;
	*ino = st.st_ino;
	*hugetlb = 0;
	e = export_of(st.st_dev, st.st_ino);
	if (e) {
		*size = e->size;
		*kind = EMU_MEM_CUDA;
		return 0;
	}
	if (emu_udmabuf_of(fd, size, &huge)) {
		*kind = EMU_MEM_CPU;
		*hugetlb = huge;
		return 0;
	}
	if (fstatfs(fd, &sfs))
		return -EBADF;
	if ((uint32_t)sfs.f_type == DMT_DMA_BUF_MAGIC ||
	    (getenv("DEVMEMTCP_TEST_DMABUF_MEMFD") && fcntl(fd, F_GET_SEALS) >= 0)) {
		off_t end = lseek(fd, 0, SEEK_END);

		if (end <= 0)
			return -EINVAL;
		*size = (uint64_t)end;
		m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (m == MAP_FAILED) {
			exporter_name(fd, exp, sizeof(exp));
			emu_unmodelled("the memory behind dma-buf fd %d (exporter %s) cannot be reached: mmap failed (%s); CUDA memory is found through the CUDA shim (DEVMEMTCP_LIBCUDA=libdevmemtcp-emucuda.so)",
				       fd, exp, strerror(errno));
			snprintf(msg, len, "devmemtcp-emu: not modelled");
			return -EOPNOTSUPP;
		}
		munmap(m, 4096);
		*kind = EMU_MEM_CPU;
		*hugetlb = (uint32_t)sfs.f_type == HUGETLBFS_MAGIC;
		return 0;
	}
	return -EINVAL;	/* dma_buf_get() of something else */
}

struct emu_mem *emu_mem_get(const struct emu_binding *b, int *err)
{
	struct emu_mem *m = NULL;
	const struct cuda_export *e;
	char path[64];
	void *p;
	int fd;

	pthread_mutex_lock(&mem_lock);
	for (int i = 0; i < EMU_MAX_BINDINGS; i++)
		if (mems[i].id == b->id) {
			pthread_mutex_unlock(&mem_lock);
			return &mems[i];
		}
	for (int i = 0; i < EMU_MAX_BINDINGS && !m; i++)
		if (!mems[i].id || !emu_binding_get(mems[i].id))
			m = &mems[i];
	if (!m) {
		pthread_mutex_unlock(&mem_lock);
		*err = emu_unmodelled("more than %d bindings' memory in one process", EMU_MAX_BINDINGS);
		return NULL;
	}
	if (m->cpu)
		munmap(m->cpu, m->len);
	memset(m, 0, sizeof(*m));
	if (b->mem_kind == EMU_MEM_CUDA) {
		e = export_of_locked(b->dmabuf_dev, b->dmabuf_ino);
		if (!e || b->owner_pid != getpid()) {
			pthread_mutex_unlock(&mem_lock);
			*err = emu_unmodelled("binding %u's CUDA memory belongs to process %d: the emulator writes CUDA memory only in the process that exported it",
					      b->id, b->owner_pid);
			return NULL;
		}
		m->cu = *e;
	} else {
		if (b->owner_pid == getpid()) {
			fd = b->mem_fd;
		} else {
			snprintf(path, sizeof(path), "/proc/%d/fd/%d", b->owner_pid, b->mem_fd);
			fd = emu_real.open(path, O_RDWR | O_CLOEXEC);
		}
		p = fd < 0 ? MAP_FAILED
			   : mmap(NULL, b->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (fd >= 0 && fd != b->mem_fd)
			emu_real.close(fd);
		if (p == MAP_FAILED) {
			pthread_mutex_unlock(&mem_lock);
			*err = emu_unmodelled("cannot map binding %u's dma-buf (owner %d, its fd %d): %s",
					      b->id, b->owner_pid, b->mem_fd, strerror(errno));
			return NULL;
		}
		m->cpu = p;
		m->len = b->size;
	}
	m->kind = b->mem_kind;
	m->id = b->id;
	pthread_mutex_unlock(&mem_lock);
	return m;
}

bool emu_mem_is_cpu(const struct emu_mem *m)
{
	return m->kind == EMU_MEM_CPU;
}

uint8_t *emu_mem_cpu(const struct emu_mem *m)
{
	return m->cpu;
}

void emu_mem_forget(void)
{
	memset(mems, 0, sizeof(mems));	/* the child keeps the mappings */
	memset(exports, 0, sizeof(exports));
}

/* ---- CUDA copies ------------------------------------------------------------------- */

/*
 * How received payload goes into CUDA memory ($DEVMEMTCP_EMU_COPY).  Each
 * way is a few calls on the emulator's own non-blocking stream, and the
 * stream is synchronised before the receive returns, so that no fragment
 * is handed out before its bytes are in GPU memory:
 *
 *   scatter (the default): the receive's payload, each piece at the same
 *     offset modulo 16 as its destination, and the table of where each
 *     piece goes, in one host-to-device copy into device staging; then one
 *     launch of a kernel (emu-scatter.cu, loaded from PTX text) that puts
 *     every piece in place.  Two calls and one transfer, whatever the
 *     layout and whatever order the page pool gives its pages in.
 *   runs: one host-to-device copy per run of buffers that lie back to back
 *     in the dma-buf, the bytes between them included (they belong to the
 *     buffers of the run: the rest of a NIC page or of a fixed-size buffer,
 *     a page's end the fragment allocator left), staged as in the dma-buf.
 *     As many calls as the page pool's order breaks the runs into.
 *   batch: buffers back to back (up to 64 bytes apart) in one copy, buffers
 *     of one length at one pitch in one cuMemcpy2DAsync, the rest in one
 *     cuMemcpyBatchAsync.  Few calls, but the driver makes a transfer of
 *     every row and every batch entry.
 *
 * Where the kernel cannot be loaded, scatter falls back to runs, saying
 * so, unless it was asked for by name.
 */
enum { COPY_SCATTER = 1, COPY_RUNS, COPY_BATCH };

static const char *const copy_names[] = { "none", "scatter", "runs", "batch" };
static int copy_last;		/* the way of the last receive, any thread */

#define GAP 64			/* batch: bytes between two buffers one copy covers */
#define SCATTER_THREADS 128u
#define SCATTER_BLOCKS 1024u

struct group {
	uint64_t dst;		/* dma-buf offset of the first row (lowest) */
	size_t src;		/* staging offset */
	uint32_t width, rows;
	uint64_t pitch;		/* rows > 1: the destination's pitch */
};

static __thread struct {
	void *ctx, *stream;
	uint8_t *staging;		/* pinned host memory */
	unsigned long long dev;		/* device staging (scatter) */
	void *fn;			/* the scatter kernel */
	int mode;
	size_t n, total;		/* pieces placed; their staging bytes (scatter) */
	struct group g[MAX_GROUPS];
	size_t ng;
	uint32_t idx[MAX_GROUPS];
	unsigned long long sd[MAX_GROUPS], ss[MAX_GROUPS];
	size_t sz[MAX_GROUPS];
} tls;

/* Exported for benchmarks (dlsym): how the last receive into CUDA memory
 * copied ("scatter", "runs", "batch"; "none" before the first). */
__attribute__((visibility("default"))) const char *devmemtcp_emu_copy_mode(void);

const char *devmemtcp_emu_copy_mode(void)
{
	return copy_names[__atomic_load_n(&copy_last, __ATOMIC_RELAXED)];
}

/* The way asked for, *named when $DEVMEMTCP_EMU_COPY says it. */
static int copy_asked(bool *named)
{
	const char *e = getenv("DEVMEMTCP_EMU_COPY");

	*named = e && *e;
	if (!*named || !strcmp(e, "scatter"))
		return COPY_SCATTER;
	if (!strcmp(e, "runs"))
		return COPY_RUNS;
	if (!strcmp(e, "batch"))
		return COPY_BATCH;
	return emu_unmodelled("DEVMEMTCP_EMU_COPY=%s: the emulator copies into CUDA memory with scatter (the default), runs or batch",
			      e);
}

/* This thread's stream, staging and kernel in m's context (current). */
static int cuda_setup(struct emu_mem *m)
{
	const struct emu_cuda_ops *o = &m->cu.ops;
	void *mod = NULL;
	bool named;
	int mode = copy_asked(&named), r;

	if (mode < 0)
		return mode;
	/* a stream of our own that does not wait for the legacy default
	 * stream (where a persistent gather may run) */
	if (o->stream_create(&tls.stream, 1 /* CU_STREAM_NON_BLOCKING */) ||
	    o->host_alloc((void **)&tls.staging, STAGING, 0)) {
		tls.stream = NULL;
		return emu_unmodelled("the emulator's CUDA stream or pinned staging could not be made");
	}
	tls.fn = NULL;
	if (mode == COPY_SCATTER) {
		r = o->mem_alloc(&tls.dev, STAGING);
		if (!r) {
			r = o->module_load(&mod, emu_scatter_ptx);
			if (!r)
				r = o->module_fn(&tls.fn, mod, EMU_SCATTER_KERNEL);
			if (r)
				o->mem_free(tls.dev);
		}
		if (r) {
			tls.fn = NULL;
			if (named) {
				tls.stream = NULL;
				return emu_unmodelled("DEVMEMTCP_EMU_COPY=scatter: the emulator's scatter kernel or its device staging cannot be had: CUDA error %d",
						      r);
			}
			emu_log("the scatter kernel or its device staging cannot be had (CUDA error %d): one copy per run of buffers instead (DEVMEMTCP_EMU_COPY=runs)",
				r);
			mode = COPY_RUNS;
		}
	}
	tls.mode = mode;
	tls.ctx = m->cu.ctx;
	return 0;
}

static int cuda_enter(struct emu_mem *m)
{
	const struct emu_cuda_ops *o = &m->cu.ops;
	void *c;

	if (o->ctx_push(m->cu.ctx))
		return -EIO;
	if ((tls.ctx != m->cu.ctx || !tls.stream) && cuda_setup(m)) {
		o->ctx_pop(&c);
		return -EIO;
	}
	return 0;
}

static void cuda_leave(struct emu_mem *m)
{
	void *c;

	m->cu.ops.ctx_pop(&c);
}

size_t emu_mem_max_pull(const struct emu_mem *m)
{
	/* less scatter's piece table and the 16-byte alignment of its pieces */
	return m->kind == EMU_MEM_CPU ? SIZE_MAX : STAGING - MAX_GROUPS * 32;
}

static const struct emu_piece *sort_pieces;

static int by_offset(const void *a, const void *b)
{
	uint64_t x = sort_pieces[*(const uint32_t *)a].off, y = sort_pieces[*(const uint32_t *)b].off;

	return x < y ? -1 : x > y;
}

static void sort_by_offset(const struct emu_piece *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		tls.idx[i] = (uint32_t)i;
	sort_pieces = p;
	qsort(tls.idx, n, sizeof(tls.idx[0]), by_offset);
}

/* scatter: the piece table, then the pieces in the order they arrive, each
 * at its destination's offset modulo 16. */
static int place_scatter(const struct emu_mem *m, struct emu_piece *p, size_t n)
{
	struct emu_scatter_desc *d = (struct emu_scatter_desc *)tls.staging;
	size_t s = (n * sizeof(*d) + 15) & ~(size_t)15;

	for (size_t i = 0; i < n; i++) {
		s += (size_t)((m->cu.dptr + p[i].off - tls.dev - s) & 15);
		if (s + p[i].len > STAGING)
			return emu_unmodelled("a receive of more than the emulator's staging");
		d[i] = (struct emu_scatter_desc){ p[i].off, (uint32_t)s, p[i].len };
		p[i].host = tls.staging + s;
		s += p[i].len;
	}
	tls.total = s;
	return 0;
}

/* runs: in dma-buf order, a piece joins the run before it when it starts
 * within the bytes that run's last buffer owns; staged as in the dma-buf,
 * as long as the staging holds the bytes between. */
static int place_runs(struct emu_piece *p, size_t n)
{
	size_t s = 0, spare = STAGING;

	for (size_t i = 0; i < n; i++)
		spare -= p[i].len;
	sort_by_offset(p, n);
	tls.ng = 0;
	for (size_t i = 0; i < n;) {
		struct emu_piece *a = &p[tls.idx[i]];
		uint64_t end = a->off + a->len, reach = a->off + a->slot;
		size_t j = i + 1;

		a->host = tls.staging + s;
		for (; j < n; j++) {
			struct emu_piece *b = &p[tls.idx[j]];

			if (b->off < end || b->off > reach || b->off - end > spare)
				break;
			spare -= b->off - end;
			b->host = tls.staging + s + (b->off - a->off);
			end = b->off + b->len;
			reach = b->off + b->slot;
		}
		tls.g[tls.ng++] = (struct group){ a->off, s, (uint32_t)(end - a->off), 1, 0 };
		s += end - a->off;
		i = j;
	}
	return 0;
}

/* batch: buffers back to back (or a few bytes apart: the bytes between
 * belong to no fragment) in one copy, buffers of one length at one pitch
 * (a NIC page or a fixed-size buffer each, in whatever order the page pool
 * gave the pages) in one two-dimensional copy, the rest in one batch. */
static int place_batch(struct emu_piece *p, size_t n)
{
	size_t s = 0, i = 0;

	sort_by_offset(p, n);
	tls.ng = 0;
	for (i = 0; i < n;) {
		struct emu_piece *a = &p[tls.idx[i]];
		struct group *g = &tls.g[tls.ng++];
		uint64_t end = a->off + a->len, stride = 0;
		size_t j = i + 1;

		while (j < n && p[tls.idx[j]].off >= end && p[tls.idx[j]].off - end <= GAP) {
			end = p[tls.idx[j]].off + p[tls.idx[j]].len;
			j++;
		}
		if (j > i + 1) {
			*g = (struct group){ a->off, s, (uint32_t)(end - a->off), 1, 0 };
			for (size_t k = i; k < j; k++)
				p[tls.idx[k]].host = tls.staging + s + (p[tls.idx[k]].off - a->off);
			s += end - a->off;
			i = j;
			continue;
		}
		if (j < n && p[tls.idx[j]].len == a->len)
			stride = p[tls.idx[j]].off - a->off;
		while (stride >= a->len && j < n && p[tls.idx[j]].len == a->len &&
		       p[tls.idx[j]].off - p[tls.idx[j - 1]].off == stride)
			j++;
		if (j == i + 1)
			stride = 0;
		*g = (struct group){ a->off, s, a->len, (uint32_t)(j - i), stride };
		for (size_t k = i; k < j; k++)
			p[tls.idx[k]].host = tls.staging + s + (k - i) * a->len;
		s += (j - i) * a->len;
		i = j;
	}
	if (s > STAGING)
		return emu_unmodelled("a receive of %zu bytes, more than the emulator's staging", s);
	return 0;
}

/* Where the n pieces of one receive are received: straight into the
 * mapping, or into this thread's staging as the way of copying wants. */
int emu_mem_place(struct emu_mem *m, struct emu_piece *p, size_t n)
{
	if (m->kind == EMU_MEM_CPU) {
		for (size_t i = 0; i < n; i++)
			p[i].host = m->cpu + p[i].off;
		return 0;
	}
	if (n > MAX_GROUPS)
		return emu_unmodelled("a receive of more than %d buffers", MAX_GROUPS);
	if (cuda_enter(m))
		return -EIO;
	cuda_leave(m);
	tls.n = 0;
	switch (tls.mode) {
	case COPY_SCATTER:
		if (place_scatter(m, p, n))
			return -EIO;
		break;
	case COPY_RUNS:
		if (place_runs(p, n))
			return -EIO;
		break;
	default:
		if (place_batch(p, n))
			return -EIO;
	}
	tls.n = n;
	return 0;
}

/* The single buffers of the groups, in one cuMemcpyBatchAsync. */
static int copy_batch(struct emu_mem *m, struct emu_copy_count *c)
{
	const struct emu_cuda_ops *o = &m->cu.ops;
	struct emu_memcpy_attr attr = {
		.srcAccessOrder = EMU_CU_MEMCPY_SRC_ACCESS_ORDER_STREAM,
		.srcLocType = EMU_CU_MEM_LOCATION_TYPE_HOST,
		.dstLocType = EMU_CU_MEM_LOCATION_TYPE_DEVICE,
	};
	size_t n = 0, attr_idx = 0, fail = 0;

	for (size_t i = 0; i < tls.ng; i++) {
		const struct group *g = &tls.g[i];

		if (g->rows != 1 || g->pitch)
			continue;
		tls.sd[n] = m->cu.dptr + g->dst;
		tls.ss[n] = (uintptr_t)(tls.staging + g->src);
		tls.sz[n++] = g->width;
		c->bytes += g->width;
	}
	if (n < 2) {
		c->bytes = 0;
		return 1;	/* not worth it: one copy */
	}
	c->calls++;
	c->xfers += n;
	if (o->batch_fail_idx)
		return ((emu_batch128_fn)o->batch_async)(tls.sd, tls.ss, tls.sz, n, &attr,
							&attr_idx, 1, &fail, tls.stream) ? -1 : 0;
	return ((emu_batch13_fn)o->batch_async)(tls.sd, tls.ss, tls.sz, n, &attr, &attr_idx, 1,
						tls.stream) ? -1 : 0;
}

/* The groups (runs, batch): a copy each, but the single buffers of batch's
 * in one cuMemcpyBatchAsync where the driver has it. */
static int copy_groups(struct emu_mem *m, struct emu_copy_count *c)
{
	const struct emu_cuda_ops *o = &m->cu.ops;
	int r = 0, batched = 1;

	if (tls.mode == COPY_BATCH && o->batch_async)
		batched = copy_batch(m, c);
	if (batched < 0)
		return batched;
	for (size_t i = 0; i < tls.ng && !r; i++) {
		const struct group *g = &tls.g[i];

		if (g->rows == 1 && !g->pitch) {
			if (!batched)
				continue;	/* in the batch */
			r = o->htod_async(m->cu.dptr + g->dst, tls.staging + g->src, g->width,
					  tls.stream);
		} else {
			struct emu_memcpy2d c2 = {
				.srcMemoryType = EMU_CU_MEMORYTYPE_HOST,
				.srcHost = tls.staging + g->src,
				.srcPitch = g->width,
				.dstMemoryType = EMU_CU_MEMORYTYPE_DEVICE,
				.dstDevice = m->cu.dptr + g->dst,
				.dstPitch = g->pitch,
				.WidthInBytes = g->width,
				.Height = g->rows,
			};

			r = o->copy2d_async(&c2, tls.stream);
		}
		c->calls++;
		c->xfers += g->rows;
		c->bytes += (uint64_t)g->width * g->rows;
	}
	return r;
}

/* scatter: the staging in one copy, then the kernel. */
static int copy_scatter(struct emu_mem *m, struct emu_copy_count *c)
{
	const struct emu_cuda_ops *o = &m->cu.ops;
	unsigned long long table = tls.dev, src = tls.dev, dst = m->cu.dptr;
	unsigned int n = (unsigned int)tls.n;
	void *args[] = { &table, &n, &src, &dst };
	int r;

	r = o->htod_async(tls.dev, tls.staging, tls.total, tls.stream);
	if (!r)
		r = o->launch(tls.fn, n < SCATTER_BLOCKS ? n : SCATTER_BLOCKS, 1, 1, SCATTER_THREADS,
			      1, 1, 0, tls.stream, args, NULL);
	c->calls = 2;
	c->xfers = 1;
	c->bytes = tls.total;
	return r;
}

/* The copies of the pieces placed last (CUDA), done before it returns. */
int emu_mem_commit(struct emu_mem *m, struct emu_copy_count *c)
{
	const struct emu_cuda_ops *o = &m->cu.ops;
	int r;

	*c = (struct emu_copy_count){ 0 };
	if (m->kind == EMU_MEM_CPU || !tls.n)
		return 0;
	if (cuda_enter(m))
		return -EIO;
	r = tls.mode == COPY_SCATTER ? copy_scatter(m, c) : copy_groups(m, c);
	if (!r)
		r = o->stream_sync(tls.stream);
	cuda_leave(m);
	tls.n = 0;
	tls.ng = 0;
	__atomic_store_n(&copy_last, tls.mode, __ATOMIC_RELAXED);
	if (r)
		return emu_unmodelled("a host-to-device copy of received payload failed: CUDA error %d", r);
	return 0;
}

int emu_mem_read(struct emu_mem *m, uint64_t off, void *dst, size_t len)
{
	const struct emu_cuda_ops *o = &m->cu.ops;
	int r = 0;

	if (m->kind == EMU_MEM_CPU) {
		memcpy(dst, m->cpu + off, len);
		return 0;
	}
	if (cuda_enter(m))
		return -EIO;
	for (size_t done = 0; done < len && !r;) {
		size_t k = len - done < STAGING ? len - done : STAGING;

		r = o->dtoh_async(tls.staging, m->cu.dptr + off + done, k, tls.stream);
		if (!r)
			r = o->stream_sync(tls.stream);
		if (!r)
			memcpy((uint8_t *)dst + done, tls.staging, k);
		done += k;
	}
	cuda_leave(m);
	return r ? emu_unmodelled("a device-to-host copy for devmem TX failed: CUDA error %d", r) : 0;
}

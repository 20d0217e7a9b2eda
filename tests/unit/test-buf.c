// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/* Buffers: segment table edge cases, import, udmabuf errors. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "buf.h"
#include "ctxfixture.h"
#include "cmsgfixture.h"
#include "harness.h"
#include "rx.h"

static struct devmemtcp_ctx *ctx;

static int setup(void **state)
{
	return ctxfix_ctx_silent(&ctx);
}

static int teardown(void **state)
{
	devmemtcp_ctx_free(ctx);
	return 0;
}

static int import(uint64_t size, const struct devmemtcp_segment *segs,
		  size_t n, struct devmemtcp_buf **buf)
{
	DEVMEMTCP_OPTS(buf_opts, o, .provider = DEVMEMTCP_PROVIDER_IMPORT,
		       .size = size, .segments = segs, .nsegments = n,
		       .flags = DEVMEMTCP_BUF_KEEP_FD);

	/* no dma-buf exporter here: test builds let a memfd stand in */
	o.fd = memfd_create("t", MFD_CLOEXEC);
	assert_true(o.fd >= 0);
	assert_int_equal(ftruncate(o.fd, (off_t)size), 0);
	setenv("DEVMEMTCP_TEST_DMABUF_MEMFD", "1", 1);
	int ret = devmemtcp_buf_new(ctx, &o, buf);
	unsetenv("DEVMEMTCP_TEST_DMABUF_MEMFD");
	if (ret)
		close(o.fd);
	return ret;
}

static void free_import(struct devmemtcp_buf *buf)
{
	close(devmemtcp_buf_fd(buf));
	devmemtcp_buf_free(buf);
}

static void test_find(void **state)
{
	/* disjoint chunks with a gap, as a multi-chunk GPU export maps */
	static const struct devmemtcp_segment segs[] = {
		{ 0x0, 0x1000, 0x7f0000000000 },
		{ 0x1000, 0x3000, 0x200000 },
		{ 0x8000, 0x1000, 0x900000 },
	};

	assert_int_equal(dmt_segments_find(segs, 3, 0), 0);
	assert_int_equal(dmt_segments_find(segs, 3, 0xfff), 0);
	assert_int_equal(dmt_segments_find(segs, 3, 0x1000), 1);
	assert_int_equal(dmt_segments_find(segs, 3, 0x3fff), 1);
	assert_int_equal(dmt_segments_find(segs, 3, 0x4000), -1);	/* gap */
	assert_int_equal(dmt_segments_find(segs, 3, 0x8000), 2);
	assert_int_equal(dmt_segments_find(segs, 3, 0x8fff), 2);
	assert_int_equal(dmt_segments_find(segs, 3, 0x9000), -1);
	assert_int_equal(dmt_segments_find(segs, 0, 0), -1);
}

static void test_import_unsorted_segments(void **state)
{
	struct devmemtcp_segment segs[] = {
		{ 0x2000, 0x2000, 0xa000 },
		{ 0x0, 0x2000, 0x50000 },
	};
	const struct devmemtcp_segment *out;
	struct devmemtcp_buf *buf;
	uint64_t addr;

	assert_int_equal(import(0x4000, segs, 2, &buf), 0);
	assert_int_equal(devmemtcp_buf_segments(buf, &out), 2);
	assert_int_equal(out[0].offset, 0);	/* sorted copy */
	assert_int_equal(out[1].addr, 0xa000);
	assert_int_equal(devmemtcp_buf_addr(buf, 0x1fff, &addr), 0);
	assert_int_equal(addr, 0x51fff);
	assert_int_equal(devmemtcp_buf_addr(buf, 0x2001, &addr), 0);
	assert_int_equal(addr, 0xa001);
	assert_int_equal(devmemtcp_buf_addr(buf, 0x4000, &addr), -ERANGE);
	assert_int_equal(devmemtcp_buf_provider(buf), DEVMEMTCP_PROVIDER_IMPORT);
	assert_int_equal(devmemtcp_buf_size(buf), 0x4000);
	free_import(buf);
}

static void test_import_bad_segments(void **state)
{
	struct devmemtcp_segment overlap[] = {
		{ 0x0, 0x2000, 0 }, { 0x1000, 0x1000, 0x9000 },
	};
	struct devmemtcp_segment outside[] = { { 0x3000, 0x2000, 0 } };
	struct devmemtcp_segment empty[] = { { 0x0, 0, 0 } };
	struct devmemtcp_segment wrap[] = { { 0x0, 0x1000, UINT64_MAX - 10 } };
	struct devmemtcp_buf *buf = (void *)1;

	/* ERRORS devmemtcp_buf_new EINVAL */
	assert_int_equal(import(0x4000, overlap, 2, &buf), -EINVAL);
	assert_null(buf);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx),
			    "segments at offsets 0 and 0x1000 overlap: each dma-buf offset may map to one address");
	assert_int_equal(import(0x4000, outside, 1, &buf), -EINVAL);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx),
			    "segment [0x3000, +0x2000) is empty or outside the 16384-byte dma-buf: every segment must lie inside the buffer");
	assert_int_equal(import(0x4000, empty, 1, &buf), -EINVAL);
	assert_int_equal(import(0x4000, wrap, 1, &buf), -EINVAL);
	assert_int_equal(import(0x4000, overlap, 0, &buf), -EINVAL);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx),
			    "segment table is empty: give at least one segment");
}

static void test_import_default_segment(void **state)
{
	struct devmemtcp_buf *buf;
	uint64_t addr = 1;

	assert_int_equal(import(8192, NULL, 0, &buf), 0);
	assert_int_equal(devmemtcp_buf_addr(buf, 4097, &addr), 0);
	assert_int_equal(addr, 4097);
	/* not host-backed: no CPU access */
	char x;
	/* ERRORS devmemtcp_buf_read EOPNOTSUPP */
	assert_int_equal(devmemtcp_buf_read(buf, 0, &x, 1), -EOPNOTSUPP);
	assert_string_equal(devmemtcp_buf_errmsg(buf),
			    "devmemtcp_buf_read: the buffer is device memory (provider 2), which the CPU cannot read: copy it on the device instead");
	/* ERRORS devmemtcp_buf_write EOPNOTSUPP */
	assert_int_equal(devmemtcp_buf_write(buf, 0, &x, 1), -EOPNOTSUPP);
	assert_string_equal(devmemtcp_buf_errmsg(buf),
			    "devmemtcp_buf_write: the buffer is device memory (provider 2), which the CPU cannot read: copy it on the device instead");
	free_import(buf);
}

static void test_import_bad_fd(void **state)
{
	DEVMEMTCP_OPTS(buf_opts, o, .provider = DEVMEMTCP_PROVIDER_IMPORT,
		       .size = 4096, .fd = 999);
	struct devmemtcp_buf *buf;

	/* ERRORS devmemtcp_buf_new EBADF */
	assert_int_equal(devmemtcp_buf_new(ctx, &o, &buf), -EBADF);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx),
			    "import: opts.fd 999 is not an open file descriptor");
	o.fd = -1;
	assert_int_equal(devmemtcp_buf_new(ctx, &o, &buf), -EBADF);
}

/* Import takes dma-bufs only, no larger than they are. */
static void test_import_not_dmabuf(void **state)
{
	DEVMEMTCP_OPTS(buf_opts, o, .provider = DEVMEMTCP_PROVIDER_IMPORT,
		       .size = 4096, .flags = DEVMEMTCP_BUF_KEEP_FD);
	struct devmemtcp_buf *buf = (void *)1;

	o.fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	assert_int_equal(devmemtcp_buf_new(ctx, &o, &buf), -EINVAL);
	assert_null(buf);
	ctxfix_expect_errmsg(ctx,
			     "import: opts.fd %d is not a dma-buf: pass the fd your exporter gave you (cuMemGetHandleForAddressRange, drmPrimeHandleToFD, UDMABUF_CREATE)",
			     o.fd);
	close(o.fd);
	/* a memfd is not one either, outside the tests' stand-in */
	o.fd = memfd_create("t", MFD_CLOEXEC);
	assert_int_equal(ftruncate(o.fd, 4096), 0);
	assert_int_equal(devmemtcp_buf_new(ctx, &o, &buf), -EINVAL);
	ctxfix_expect_errmsg(ctx,
			     "import: opts.fd %d is not a dma-buf: pass the fd your exporter gave you (cuMemGetHandleForAddressRange, drmPrimeHandleToFD, UDMABUF_CREATE)",
			     o.fd);
	/* larger than the dma-buf */
	setenv("DEVMEMTCP_TEST_DMABUF_MEMFD", "1", 1);
	o.size = 8192;
	assert_int_equal(devmemtcp_buf_new(ctx, &o, &buf), -EINVAL);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx),
			    "import: opts.size 8192 is larger than the dma-buf (4096 bytes): pass its size (lseek(fd, 0, SEEK_END) gives it)");
	/* its size or less is fine */
	o.size = 4096;
	assert_int_equal(devmemtcp_buf_new(ctx, &o, &buf), 0);
	devmemtcp_buf_free(buf);
	unsetenv("DEVMEMTCP_TEST_DMABUF_MEMFD");
	close(o.fd);
}

static void test_udmabuf_missing(void **state)
{
	DEVMEMTCP_OPTS(buf_opts, o, .provider = DEVMEMTCP_PROVIDER_UDMABUF,
		       .size = 4096);
	struct devmemtcp_buf *buf;

	setenv("DEVMEMTCP_UDMABUF_DEV", "/nonexistent/udmabuf", 1);
	/* ERRORS devmemtcp_buf_new ENOENT */
	assert_int_equal(devmemtcp_buf_new(ctx, &o, &buf), -ENOENT);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx),
			    "udmabuf: /nonexistent/udmabuf does not exist: load the module with 'modprobe udmabuf' (kernel option CONFIG_UDMABUF)");
	unsetenv("DEVMEMTCP_UDMABUF_DEV");
	o.size = 0;
	assert_int_equal(devmemtcp_buf_new(ctx, &o, &buf), -EINVAL);
	o.size = 4096;
	o.flags = DEVMEMTCP_BUF_KEEP_FD;
	assert_int_equal(devmemtcp_buf_new(ctx, &o, &buf), -EINVAL);
}

/* Fields a provider does not use are refused, not ignored. */
static void test_segments_where_unused(void **state)
{
	struct devmemtcp_segment seg = { 0, 4096, 0 };
	DEVMEMTCP_OPTS(buf_opts, o, .provider = DEVMEMTCP_PROVIDER_UDMABUF,
		       .size = 4096, .segments = &seg, .nsegments = 1);
	struct devmemtcp_buf *buf = (void *)1;

	setenv("DEVMEMTCP_UDMABUF_DEV", "/nonexistent/udmabuf", 1);
	/* ERRORS devmemtcp_buf_new EINVAL */
	assert_int_equal(devmemtcp_buf_new(ctx, &o, &buf), -EINVAL);
	assert_null(buf);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx),
			    "udmabuf: segments are for imported dma-bufs (DEVMEMTCP_PROVIDER_IMPORT): a udmabuf is one segment over its memfd; leave segments NULL and nsegments 0");
	o.segments = NULL;
	assert_int_equal(devmemtcp_buf_new(ctx, &o, &buf), -EINVAL);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx),
			    "udmabuf: segments are for imported dma-bufs (DEVMEMTCP_PROVIDER_IMPORT): a udmabuf is one segment over its memfd; leave segments NULL and nsegments 0");
	unsetenv("DEVMEMTCP_UDMABUF_DEV");
	/* an import with a count but no table */
	assert_int_equal(import(8192, NULL, 3, &buf), -EINVAL);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx),
			    "import: nsegments is 3 but segments is NULL: pass the segment table, or nsegments 0 for one segment over the whole dma-buf");
}

/* The udmabuf size limit: a module is reloaded with a larger one, a
 * udmabuf built into the kernel takes it on the kernel command line. */
static void test_udmabuf_size_limit(void **state)
{
	DEVMEMTCP_OPTS(buf_opts, o, .provider = DEVMEMTCP_PROVIDER_UDMABUF,
		       .size = 3 << 20);
	struct devmemtcp_buf *buf;
	char dir[] = "/tmp/dmt-udmabuf-sysXXXXXX", path[128];
	FILE *f;

	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/parameters", dir);
	assert_int_equal(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/parameters/size_limit_mb", dir);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs("2\n", f);
	fclose(f);
	setenv("DEVMEMTCP_TEST_UDMABUF_SYSFS", dir, 1);
	/* built in: no initstate */
	/* ERRORS devmemtcp_buf_new E2BIG */
	assert_int_equal(devmemtcp_buf_new(ctx, &o, &buf), -E2BIG);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx),
			    "udmabuf: 3145728 bytes exceed udmabuf's size_limit_mb of 2 MiB: udmabuf is built into this kernel: boot it with udmabuf.size_limit_mb=3 or use a smaller buffer");
	/* a loadable module has an initstate */
	snprintf(path, sizeof(path), "%s/initstate", dir);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs("live\n", f);
	fclose(f);
	assert_int_equal(devmemtcp_buf_new(ctx, &o, &buf), -E2BIG);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx),
			    "udmabuf: 3145728 bytes exceed the udmabuf module's size_limit_mb of 2 MiB: reload it with 'modprobe -r udmabuf; modprobe udmabuf size_limit_mb=3' or use a smaller buffer");
	unsetenv("DEVMEMTCP_TEST_UDMABUF_SYSFS");
	unlink(path);
	snprintf(path, sizeof(path), "%s/parameters/size_limit_mb", dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/parameters", dir);
	rmdir(path);
	rmdir(dir);
}

static void test_unknown_provider(void **state)
{
	DEVMEMTCP_OPTS(buf_opts, o, .provider = 42, .size = 4096);
	struct devmemtcp_buf *buf;

	assert_int_equal(devmemtcp_buf_new(ctx, &o, &buf), -EINVAL);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx),
			    "devmemtcp_buf_new: unknown provider 42: use DEVMEMTCP_PROVIDER_UDMABUF, _IMPORT, _CUDA or _DRM");
	assert_int_equal(devmemtcp_buf_new(ctx, NULL, &buf), -EINVAL);
}

/*
 * A receive handle keeps the buffers registered with it: freeing one drops
 * only the caller's reference, and fragments still find their addresses.
 */
static void test_rx_keeps_buffer(void **state)
{
	struct devmemtcp_segment seg = { 0, 8192, 0x40000 };
	DEVMEMTCP_OPTS(buf_opts, o, .provider = DEVMEMTCP_PROVIDER_IMPORT,
		       .size = 8192, .segments = &seg, .nsegments = 1);
	char ctrl[CMSG_SPACE(sizeof(struct dmt_dmabuf_cmsg))] __attribute__((aligned(8)));
	struct msghdr msg = { .msg_control = ctrl, .msg_controllen = sizeof(ctrl) };
	struct dmt_dmabuf_cmsg d = { .frag_offset = 4096, .frag_size = 100,
				     .frag_token = 3, .dmabuf_id = 9 };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
	struct devmemtcp_frag f;
	struct devmemtcp_buf *buf;
	struct devmemtcp_rx *rx;
	int sv[2], fd;

	fd = o.fd = memfd_create("t", MFD_CLOEXEC);
	assert_int_equal(ftruncate(fd, 8192), 0);
	setenv("DEVMEMTCP_TEST_DMABUF_MEMFD", "1", 1);
	assert_int_equal(devmemtcp_buf_new(ctx, &o, &buf), 0);
	unsetenv("DEVMEMTCP_TEST_DMABUF_MEMFD");
	assert_int_equal(t_tcp_pair(sv), 0);
	assert_int_equal(devmemtcp_rx_new(ctx, sv[1], NULL, &rx), 0);
	assert_int_equal(devmemtcp_rx_add_buf(rx, 9, buf), 0);
	devmemtcp_buf_free(buf);
	assert_true(fcntl(fd, F_GETFD) >= 0);	/* still the handle's */
	cmsgfix_dmabuf(cm, &d);
	assert_int_equal(dmt_rx_process(rx, &msg, 100, &f, 1), 1);
	assert_int_equal(f.addr, 0x40000 + 4096);
	assert_int_equal(devmemtcp_rx_release(rx, &f, 1), 0);
	devmemtcp_rx_free(rx);
	/* the last reference went with the handle, and the fd with it */
	assert_int_equal(fcntl(fd, F_GETFD), -1);
	assert_int_equal(errno, EBADF);
	close(sv[0]);
	close(sv[1]);
}

/* What the receive processing warned about (run_log as log_fn). */
static char run_logged[1024];

static void run_log(void *user, int level, const char *msg)
{
	size_t n = strlen(run_logged);

	(void)user;
	if (level <= DEVMEMTCP_LOG_WARN)
		snprintf(run_logged + n, sizeof(run_logged) - n, "%s\n", msg);
}

struct run_entry {
	int linear;
	uint32_t id, token, size;
	uint64_t offset;
};

/* A control buffer of entries at ctrl (room for 16); its length. */
static size_t run_ctrl(char *ctrl, const struct run_entry *e, size_t n)
{
	struct msghdr msg = { .msg_control = ctrl,
			      .msg_controllen = 16 * CMSG_SPACE(sizeof(struct dmt_dmabuf_cmsg)) };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
	size_t len = 0;

	assert_true(n <= 16);
	for (size_t i = 0; i < n; i++, cm = (struct cmsghdr *)((char *)cm + CMSG_SPACE(sizeof(struct dmt_dmabuf_cmsg)))) {
		struct dmt_dmabuf_cmsg d = { .frag_offset = e[i].offset,
					     .frag_size = e[i].size,
					     .frag_token = e[i].token,
					     .dmabuf_id = e[i].id };

		cmsgfix_dmabuf(cm, &d);
		if (e[i].linear)
			cm->cmsg_type = SCM_DEVMEM_LINEAR;
		len += CMSG_SPACE(sizeof(d));
	}
	return len;
}

/* The fragments of the last run_recv. */
static struct devmemtcp_frag run_got[16];

/* Process entries (max fragments at most): the count or errno; the
 * fragments in run_got, the dma-buf ones appended to all (*nall). */
static int run_recv(struct devmemtcp_rx *rx, const struct run_entry *e,
		    size_t n, size_t max, struct devmemtcp_frag *all,
		    size_t *nall)
{
	char ctrl[16 * CMSG_SPACE(sizeof(struct dmt_dmabuf_cmsg))] __attribute__((aligned(8)));
	struct msghdr msg = { .msg_control = ctrl };
	struct devmemtcp_frag f[16];
	uint64_t got = 0;
	int ret;

	msg.msg_controllen = run_ctrl(ctrl, e, n);
	for (size_t i = 0; i < n; i++)
		got += e[i].size;
	ret = dmt_rx_process(rx, &msg, got, f, max);
	for (int i = 0; i < ret; i++) {
		assert_int_equal(f[i].len, e[i].size);
		assert_int_equal(f[i].offset, e[i].linear ? 0 : e[i].offset);
		assert_int_equal(f[i].token, e[i].linear ? 0 : e[i].token);
		assert_int_equal(f[i].binding_id, e[i].linear ? 0 : e[i].id);
		if (!e[i].linear)
			all[(*nall)++] = f[i];
	}
	if (ret > 0)
		memcpy(run_got, f, (size_t)ret * sizeof(f[0]));
	return ret;
}

/* One receive of n entries, all taken: fragment k at addr, the warnings
 * exactly log, outstanding tokens after it. */
static void run_check(struct devmemtcp_rx *rx, const struct run_entry *e,
		      size_t n, struct devmemtcp_frag *all, size_t *nall,
		      size_t k, uint64_t addr, const char *log,
		      uint64_t outstanding)
{
	run_logged[0] = 0;
	assert_int_equal(run_recv(rx, e, n, 16, all, nall), (int)n);
	assert_int_equal(run_got[k].addr, addr);
	assert_string_equal(run_logged, log);
	assert_int_equal(dmt_rx_tokens(rx)->outstanding, outstanding);
}

/*
 * The receive processing's run of plain cmsgs (one binding with one
 * segment, new tokens in the bitmap) hands every other case to the general
 * path at the cmsg where it arises, with the same fragments, token books
 * and warnings: a repeat inside the receive, a token still outstanding, a
 * token past the bitmap, a linear cmsg, a binding with two segments, an
 * unknown binding, an offset past the segment, max reached.
 */
static void test_rx_run_handoff(void **state)
{
	struct devmemtcp_segment one = { 0, 1 << 20, 0x40000000 };
	struct devmemtcp_segment two[2] = { { 0, 65536, 0x1000000 },
					    { 65536, 65536, 0x9000000 } };
	DEVMEMTCP_OPTS(ctx_opts, co, .log_fn = run_log,
		       .log_level = DEVMEMTCP_LOG_WARN);
	struct devmemtcp_frag all[64];
	struct devmemtcp_buf *a, *b;
	struct devmemtcp_ctx *c = ctx;
	struct devmemtcp_rx *rx;
	size_t nall = 0;
	int sv[2];

	assert_int_equal(devmemtcp_ctx_new(&co, &ctx), 0);
	assert_int_equal(import(1 << 20, &one, 1, &a), 0);
	assert_int_equal(import(131072, two, 2, &b), 0);
	assert_int_equal(t_tcp_pair(sv), 0);
	assert_int_equal(devmemtcp_rx_new(ctx, sv[1], NULL, &rx), 0);
	assert_int_equal(devmemtcp_rx_add_buf(rx, 9, a), 0);
	assert_int_equal(devmemtcp_rx_add_buf(rx, 4, b), 0);

	/* no bitmap yet: the general path makes it */
	const struct run_entry r0[] = { { 0, 9, 4000, 4096, 0 } };
	assert_int_equal(run_recv(rx, r0, 1, 16, all, &nall), 1);
	assert_int_equal(run_got[0].addr, 0x40000000);
	assert_int_equal(devmemtcp_rx_release(rx, all, 1), 0);
	nall = 0;
	/* a run, a repeat inside the receive, then every other kind */
	const struct run_entry r1[] = {
		{ 0, 9, 1, 4096, 0 }, { 0, 9, 2, 4096, 4096 },
		{ 0, 9, 65, 1448, 8192 }, { 0, 9, 65, 1448, 10240 },
		{ 1, 0, 0, 100, 0 }, { 0, 9, 3, 4096, 2u << 20 },
		{ 0, 4, 4, 512, 65536 + 8 }, { 0, 7, 5, 256, 4096 },
		{ 0, 9, 6, 4096, 12288 },
	};
	run_logged[0] = 0;
	assert_int_equal(run_recv(rx, r1, 9, 16, all, &nall), 9);
	assert_int_equal(run_got[0].addr, 0x40000000);
	assert_int_equal(run_got[1].addr, 0x40000000 + 4096);
	assert_int_equal(run_got[2].addr, 0x40000000 + 8192);
	assert_int_equal(run_got[3].addr, 0x40000000 + 10240);
	assert_int_equal(run_got[4].flags, DEVMEMTCP_FRAG_LINEAR);
	assert_int_equal(run_got[5].addr, 0);	/* past the segment */
	assert_int_equal(run_got[5].flags, 0);
	assert_int_equal(run_got[6].addr, 0x9000000 + 8);
	assert_int_equal(run_got[7].flags, DEVMEMTCP_FRAG_FOREIGN);
	assert_int_equal(run_got[7].addr, 0);
	assert_int_equal(run_got[8].addr, 0x40000000 + 12288);
	for (int i = 0; i < 9; i++)
		if (i != 4 && i != 7)
			assert_int_equal(run_got[i].flags, 0);
	assert_string_equal(run_logged,
			    "token 65 received while still outstanding\n"
			    "fragment of dma-buf binding 7, which this receiver does not know (2 registered): the flow is steered to a queue bound to another buffer; fix the ntuple rule or register the buffer with devmemtcp_rx_add_buf()\n");
	assert_int_equal(dmt_rx_tokens(rx)->outstanding, 7);

	/* a token still outstanding first, then a run */
	const struct run_entry r2[] = {
		{ 0, 9, 2, 4096, 16384 }, { 0, 9, 7, 4096, 20480 },
		{ 0, 9, 8, 4096, 24576 },
	};
	run_check(rx, r2, 3, all, &nall, 2, 0x40000000 + 24576,
		  "token 2 received while still outstanding\n", 9);

	/* a token past the bitmap inside a run: the books grow */
	const struct run_entry r3[] = {
		{ 0, 9, 20, 4096, 0 }, { 0, 9, 100000, 4096, 4096 },
		{ 0, 9, 21, 4096, 8192 },
	};
	run_check(rx, r3, 3, all, &nall, 1, 0x40000000 + 4096, "", 12);

	/* two segments from the start */
	const struct run_entry r4[] = {
		{ 0, 4, 30, 100, 8 }, { 0, 4, 31, 100, 65536 },
	};
	run_check(rx, r4, 2, all, &nall, 0, 0x1000000 + 8, "", 14);
	assert_int_equal(run_got[1].addr, 0x9000000);

	/* max reached inside the run: what the library saw is the user's */
	const struct run_entry r5[] = {
		{ 0, 9, 40, 4096, 0 }, { 0, 9, 41, 4096, 4096 },
		{ 0, 9, 42, 4096, 8192 },
	};
	assert_int_equal(run_recv(rx, r5, 3, 2, all, &nall), -ENOBUFS);
	assert_int_equal(dmt_rx_tokens(rx)->outstanding, 16);
	all[nall++] = (struct devmemtcp_frag){ .token = 40, .len = 4096, .binding_id = 9 };
	all[nall++] = (struct devmemtcp_frag){ .token = 41, .len = 4096, .binding_id = 9 };

	/* every token once: the repeats (65, 2) were fragments too */
	assert_int_equal(nall, 18);
	assert_int_equal(devmemtcp_rx_release(rx, all, 3), 0);
	assert_int_equal(devmemtcp_rx_release(rx, all + 4, 4), 0);
	assert_int_equal(devmemtcp_rx_release(rx, all + 9, nall - 9), 0);
	assert_int_equal(dmt_rx_tokens(rx)->outstanding, 0);
	devmemtcp_rx_free(rx);
	free_import(a);
	free_import(b);
	close(sv[0]);
	close(sv[1]);
	devmemtcp_ctx_free(ctx);
	ctx = c;
}

static void test_null_safe(void **state)
{
	uint64_t a;

	devmemtcp_binding_close(NULL);
	assert_int_equal(devmemtcp_binding_id(NULL), 0);
	assert_null(devmemtcp_binding_buf(NULL));
	assert_int_equal(devmemtcp_buf_provider(NULL), -EINVAL);

	devmemtcp_buf_free(NULL);
	assert_int_equal(devmemtcp_buf_fd(NULL), -EINVAL);
	assert_int_equal(devmemtcp_buf_size(NULL), 0);
	assert_int_equal(devmemtcp_buf_segments(NULL, NULL), 0);
	assert_int_equal(devmemtcp_buf_addr(NULL, 0, &a), -EINVAL);
	assert_string_equal(devmemtcp_buf_errmsg(NULL), "");
}

static void test_qstats_args(void **state)
{
	struct devmemtcp_qstats st = { 0 };

	/* ERRORS devmemtcp_qstats_get EINVAL */
	assert_int_equal(devmemtcp_qstats_get(ctx, 1, DEVMEMTCP_QUEUE_RX, 0, &st), -EINVAL);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx),
			    "devmemtcp_qstats_get: stats is NULL or its sz is not set: set .sz = sizeof(struct devmemtcp_qstats)");
	st.sz = sizeof(st);
	assert_int_equal(devmemtcp_qstats_get(ctx, 1, 7, 0, &st), -EINVAL);
	assert_int_equal(devmemtcp_qstats_get(ctx, 0, DEVMEMTCP_QUEUE_TX, 0, &st), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_qstats_args),
		cmocka_unit_test(test_find),
		cmocka_unit_test(test_segments_where_unused),
		cmocka_unit_test(test_udmabuf_size_limit),
		cmocka_unit_test(test_import_unsorted_segments),
		cmocka_unit_test(test_import_bad_segments),
		cmocka_unit_test(test_import_default_segment),
		cmocka_unit_test(test_import_bad_fd),
		cmocka_unit_test(test_import_not_dmabuf),
		cmocka_unit_test(test_udmabuf_missing),
		cmocka_unit_test(test_unknown_provider),
		cmocka_unit_test(test_rx_keeps_buffer),
		cmocka_unit_test(test_rx_run_handoff),
		cmocka_unit_test(test_null_safe),
	};

	return cmocka_run_group_tests_name("buf", tests, setup, teardown);
}

// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * vm test (generic kernel with vgem loaded): the DRM provider on a real
 * DRM device.  Run as root in the guest:
 *
 *   test-drm IFACE [probe|nodes|import|rx|all]      (IFACE: dsim1)
 *
 * probe   devmemtcp_nic_probe() lists vgem's card and render node
 * nodes   a buffer from discovery, from the card node and from the render
 *         node (made on its primary node); the dma-buf is a DRM PRIME export
 *         ("exp_name: drm" in fdinfo) named devmemtcp:vgem; an unprivileged
 *         user gets EACCES naming the node
 * import  a GEM handle of our own DRM fd (dumb buffer made with raw ioctls):
 *         bytes written through the library are in the GEM object's own
 *         mapping (DRM_IOCTL_MODE_MAP_DUMB) and back; the kernel's errors
 * rx      64 MiB of devmem TCP into a 32 MiB vgem buffer (tokens recycled),
 *         every byte checked, none linear, every fragment's address the CPU
 *         address of its bytes; the NIC as it was after close
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <drm.h>		/* libdrm's copy of the kernel's UAPI headers */
#include <drm_mode.h>

#include "harness-nic.h"
#include "pattern.h"

#define PERIOD PATTERN_PERIOD_DEFAULT
#define MAX_FRAGS 1024
#define LINEAR (1u << 20)

static struct devmemtcp_ctx *ctx;
static const char *ifname;
static char card[64], render[64];	/* vgem's nodes */

static int drm_buf(const char *path, uint64_t size, struct devmemtcp_buf **buf)
{
	DEVMEMTCP_OPTS(buf_opts, o, .provider = DEVMEMTCP_PROVIDER_DRM,
		       .size = size, .drm_path = path);

	return devmemtcp_buf_new(ctx, &o, buf);
}

/* vgem's card and render node, from the probe report. */
static int test_probe(void)
{
	struct devmemtcp_probe p = { .sz = sizeof(p) };
	int n;

	T_CHECK(devmemtcp_nic_probe(ctx, ifname, NULL, &p) >= 0, "probe: %s",
		devmemtcp_ctx_errmsg(ctx));
	T_CHECK(p.drm_nodes >= 2, "probe found %d DRM nodes: is vgem loaded (modprobe vgem)?",
		p.drm_nodes);
	n = p.drm_nodes < DEVMEMTCP_PROBE_MAX_DRM ? p.drm_nodes : DEVMEMTCP_PROBE_MAX_DRM;
	for (int i = 0; i < n; i++) {
		const struct devmemtcp_probe_drm *d = &p.drm[i];

		printf("probe: %s: %s (%d)\n", d->node, d->driver, d->error);
		if (strcmp(d->driver, "vgem"))
			continue;
		if (strstr(d->node, "/card") && !card[0])
			snprintf(card, sizeof(card), "%s", d->node);
		if (strstr(d->node, "/renderD") && !render[0])
			snprintf(render, sizeof(render), "%s", d->node);
	}
	T_CHECK(card[0] && render[0], "no vgem card and render node in the probe report");
	return 0;
}

/* A vgem buffer of size bytes: a DRM PRIME export the library named, one
 * segment at its CPU mapping, readable and writable through the library. */
static int check_buf(struct devmemtcp_buf *buf, uint64_t size)
{
	const struct devmemtcp_segment *segs;
	uint8_t in[4096], out[4096];
	char v[64];
	int fd = devmemtcp_buf_fd(buf);

	T_CHECK(devmemtcp_buf_size(buf) == size, "size %llu, not %llu",
		(unsigned long long)devmemtcp_buf_size(buf), (unsigned long long)size);
	T_CHECK(t_fdinfo(fd, "exp_name", v, sizeof(v)) == 0 && !strcmp(v, "drm"),
		"exp_name of the dma-buf is not drm");
	T_CHECK(t_fdinfo(fd, "name", v, sizeof(v)) == 0 && !strcmp(v, "devmemtcp:vgem"),
		"name of the dma-buf is not devmemtcp:vgem");
	T_CHECK(t_fdinfo(fd, "size", v, sizeof(v)) == 0 && strtoull(v, NULL, 10) == size,
		"fdinfo size %s", v);
	T_CHECK(devmemtcp_buf_segments(buf, &segs) == 1 && segs[0].offset == 0 &&
		segs[0].len == size, "segment table");
	pattern_fill(in, sizeof(in), 77, PERIOD);
	T_CHECK(devmemtcp_buf_write(buf, size - sizeof(in), in, sizeof(in)) == 0, "write: %s",
		devmemtcp_buf_errmsg(buf));
	T_CHECK(devmemtcp_buf_read(buf, size - sizeof(in), out, sizeof(out)) == 0, "read: %s",
		devmemtcp_buf_errmsg(buf));
	T_CHECK(!memcmp(in, out, sizeof(in)), "read back other bytes");
	/* the device address is the CPU address */
	T_CHECK(!memcmp((const void *)(uintptr_t)(segs[0].addr + size - sizeof(in)), in,
			sizeof(in)), "bytes at the segment's address differ");
	return 0;
}

/* devmemtcp_buf_new as nobody: the result and message through a pipe. */
static int unprivileged(const char *path, int *ret, char *msg, size_t len)
{
	int p[2], st;
	pid_t pid;

	T_CHECK(pipe(p) == 0, "pipe");
	pid = fork();
	T_CHECK(pid >= 0, "fork");
	if (pid == 0) {
		struct devmemtcp_buf *buf;
		int r;

		close(p[0]);
		if (setgroups(0, NULL) || setgid(65534) || setuid(65534))
			_exit(2);
		r = drm_buf(path, 4096, &buf);
		dprintf(p[1], "%d %s", r, devmemtcp_ctx_errmsg(ctx));
		_exit(0);
	}
	close(p[1]);
	memset(msg, 0, len);
	T_CHECK(read(p[0], msg, len - 1) > 0, "no result from the child");
	close(p[0]);
	T_CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && !WEXITSTATUS(st), "child");
	*ret = atoi(msg);
	memmove(msg, strchr(msg, ' ') + 1, strlen(strchr(msg, ' ')));
	return 0;
}

static int test_nodes(void)
{
	struct devmemtcp_buf *buf;
	char msg[1024], want[1024];
	struct stat st;
	int fds = t_count_fds(), r = 0;

	if (!card[0])
		T_TRY(test_probe());
	T_CHECK(drm_buf(NULL, 5 << 20, &buf) == 0, "discovery: %s", devmemtcp_ctx_errmsg(ctx));
	T_TRY(check_buf(buf, 5 << 20));
	devmemtcp_buf_free(buf);
	T_CHECK(drm_buf(card, 4097, &buf) == 0, "%s: %s", card, devmemtcp_ctx_errmsg(ctx));
	T_TRY(check_buf(buf, 8192));
	devmemtcp_buf_free(buf);
	/* the kernel refuses dumb buffers on render nodes: its card node */
	T_CHECK(drm_buf(render, 1 << 20, &buf) == 0, "%s: %s", render, devmemtcp_ctx_errmsg(ctx));
	T_TRY(check_buf(buf, 1 << 20));
	devmemtcp_buf_free(buf);
	T_CHECK(t_count_fds() == fds, "fds %d, were %d", t_count_fds(), fds);

	T_CHECK(stat(card, &st) == 0, "stat %s", card);
	if (st.st_mode & 0006) {
		printf("nodes: %s is open to everyone (mode %o): no permission case\n", card,
		       st.st_mode & 0777);
		return 0;
	}
	T_TRY(unprivileged(card, &r, msg, sizeof(msg)));
	snprintf(want, sizeof(want),
		 "drm: no permission to open %s: run as root or give your user access to it (its group, often 'video' or 'render', or a udev rule)",
		 card);
	T_CHECK(r == -EACCES && !strcmp(msg, want), "as nobody: %d %s", r, msg);
	printf("nodes: as nobody: %s\n", msg);
	return 0;
}

/* ---- a GEM handle of our own DRM fd ------------------------------------- */

struct dumb {
	int fd;
	uint32_t handle;
	uint8_t *map;		/* the GEM object's own mapping */
	uint64_t size;
};

static int dumb_new(struct dumb *d, uint64_t size)
{
	struct drm_mode_create_dumb c = { .height = (uint32_t)(size / 4096), .width = 1024, .bpp = 32 };
	struct drm_mode_map_dumb m = { 0 };

	d->fd = open(card, O_RDWR | O_CLOEXEC);
	T_CHECK(d->fd >= 0, "open %s: %s", card, strerror(errno));
	T_CHECK(ioctl(d->fd, DRM_IOCTL_MODE_CREATE_DUMB, &c) == 0, "CREATE_DUMB: %s",
		strerror(errno));
	d->handle = c.handle;
	d->size = c.size;
	m.handle = c.handle;
	T_CHECK(ioctl(d->fd, DRM_IOCTL_MODE_MAP_DUMB, &m) == 0, "MAP_DUMB: %s", strerror(errno));
	d->map = mmap(NULL, d->size, PROT_READ | PROT_WRITE, MAP_SHARED, d->fd, (off_t)m.offset);
	T_CHECK(d->map != MAP_FAILED, "mmap of the dumb buffer: %s", strerror(errno));
	return 0;
}

static void dumb_free(struct dumb *d)
{
	struct drm_mode_destroy_dumb x = { .handle = d->handle };

	munmap(d->map, d->size);
	ioctl(d->fd, DRM_IOCTL_MODE_DESTROY_DUMB, &x);
	close(d->fd);
}

static int import(const struct dumb *d, uint32_t handle, uint64_t size,
		  struct devmemtcp_buf **buf)
{
	DEVMEMTCP_OPTS(buf_opts, o, .provider = DEVMEMTCP_PROVIDER_DRM, .size = size,
		       .drm_fd = d->fd, .drm_handle = handle);

	return devmemtcp_buf_new(ctx, &o, buf);
}

static int test_import(void)
{
	struct devmemtcp_buf *buf;
	uint8_t in[8192], out[8192];
	char want[512];
	struct dumb d = { .fd = -1 };

	if (!card[0])
		T_TRY(test_probe());
	T_TRY(dumb_new(&d, 3 << 20));
	T_CHECK(import(&d, d.handle, 0, &buf) == 0, "import: %s", devmemtcp_ctx_errmsg(ctx));
	T_CHECK(devmemtcp_buf_size(buf) == d.size, "size");
	/* library -> the object's own mapping */
	pattern_fill(in, sizeof(in), 1000, PERIOD);
	T_CHECK(devmemtcp_buf_write(buf, 4095, in, sizeof(in)) == 0, "write: %s",
		devmemtcp_buf_errmsg(buf));
	T_CHECK(!memcmp(d.map + 4095, in, sizeof(in)), "written bytes not in the GEM object");
	/* the object's own mapping -> library */
	pattern_fill(d.map + (2 << 20), sizeof(in), 5, PERIOD);
	T_CHECK(devmemtcp_buf_read(buf, 2 << 20, out, sizeof(out)) == 0, "read: %s",
		devmemtcp_buf_errmsg(buf));
	T_CHECK(pattern_check(out, sizeof(out), 5, PERIOD) < 0, "read other bytes");
	devmemtcp_buf_free(buf);
	/* the caller keeps its handle: export it again */
	T_CHECK(import(&d, d.handle, d.size, &buf) == 0, "again: %s", devmemtcp_ctx_errmsg(ctx));
	devmemtcp_buf_free(buf);

	T_CHECK(import(&d, d.handle, 4096, &buf) == -EINVAL, "wrong size");
	snprintf(want, sizeof(want),
		 "drm: opts.size 4096 is not the %llu bytes of GEM handle %u: pass 0 (its size) or its size",
		 (unsigned long long)d.size, d.handle);
	T_CHECK(!strcmp(devmemtcp_ctx_errmsg(ctx), want), "%s", devmemtcp_ctx_errmsg(ctx));
	/* the kernel: no such handle */
	T_CHECK(import(&d, d.handle + 100, 0, &buf) == -ENOENT, "bad handle: %s",
		devmemtcp_ctx_errmsg(ctx));
	snprintf(want, sizeof(want),
		 "drm: GEM handle %u does not exist on opts.drm_fd %d (vgem): pass a handle of that DRM fd",
		 d.handle + 100, d.fd);
	T_CHECK(!strcmp(devmemtcp_ctx_errmsg(ctx), want), "%s", devmemtcp_ctx_errmsg(ctx));
	dumb_free(&d);
	printf("import: GEM handle of our fd, bytes both ways through the object's own mapping\n");
	return 0;
}

/* ---- devmem RX into a vgem buffer --------------------------------------- */

struct rx_args {
	struct devmemtcp_buf *buf;
	uint32_t binding;
	uint64_t bytes, linear_frags, bad_addr;
	int64_t bad_at;
	struct devmemtcp_rx_stats st;
	int ret;
};

/* One fragment: in our buffer at its CPU address, the pattern's bytes. */
static void rx_frag(struct rx_args *a, const struct devmemtcp_frag *f, uint8_t *tmp)
{
	uint64_t addr;
	long at;

	if (f->flags & (DEVMEMTCP_FRAG_LINEAR | DEVMEMTCP_FRAG_FOREIGN)) {
		a->linear_frags++;
		return;
	}
	if (devmemtcp_buf_addr(a->buf, f->offset, &addr) || addr != f->addr)
		a->bad_addr++;
	if (devmemtcp_buf_read(a->buf, f->offset, tmp, f->len)) {
		a->bad_at = (int64_t)a->bytes;
		return;
	}
	at = pattern_check(tmp, f->len, a->bytes, PERIOD);
	if (at < 0 && memcmp((const void *)(uintptr_t)f->addr, tmp, f->len))
		a->bad_addr++;
	if (at >= 0 && a->bad_at < 0)
		a->bad_at = (int64_t)(a->bytes + (uint64_t)at);
}

/* vm_transfer's receiver: one connection into a->buf, tokens released. */
static void receive(int lfd, void *arg)
{
	struct rx_args *a = arg;
	struct devmemtcp_frag *frags = calloc(MAX_FRAGS, sizeof(*frags));
	uint8_t *linear = malloc(LINEAR), *tmp = malloc(65536);
	struct devmemtcp_rx *rx = NULL;
	int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC), n;

	a->ret = 1;
	a->bad_at = -1;
	a->st.sz = sizeof(a->st);
	if (fd < 0 || devmemtcp_rx_new(ctx, fd, NULL, &rx) ||
	    devmemtcp_rx_add_buf(rx, a->binding, a->buf))
		goto out;
	while ((n = devmemtcp_rx_recv(rx, frags, MAX_FRAGS, linear, LINEAR)) > 0) {
		for (int i = 0; i < n; i++) {
			rx_frag(a, &frags[i], tmp);
			a->bytes += frags[i].len;
		}
		if (devmemtcp_rx_release(rx, frags, (size_t)n))
			goto out;
	}
	if (n == 0 && devmemtcp_rx_flush(rx) >= 0 && devmemtcp_rx_stats(rx, &a->st) == 0)
		a->ret = 0;
	else
		fprintf(stderr, "receive: %s\n", devmemtcp_rx_errmsg(rx));
out:
	devmemtcp_rx_free(rx);
	if (fd >= 0)
		close(fd);
	free(frags);
	free(linear);
	free(tmp);
}

static int test_rx(void)
{
	const uint64_t bytes = 64ull << 20;
	const uint32_t queue = 3;
	const int port = 6301;
	struct devmemtcp_flow flow;
	struct devmemtcp_nic *nic;
	struct devmemtcp_buf *buf;
	struct rx_args a = { 0 };
	char text[128], *before, *after;

	before = nic_dump();
	T_CHECK(drm_buf(NULL, 32u << 20, &buf) == 0, "buffer: %s", devmemtcp_ctx_errmsg(ctx));
	T_TRY(check_buf(buf, 32u << 20));
	snprintf(text, sizeof(text), "tcp4 dst-ip %s dst-port %d", VM_RX_ADDR4, port);
	T_CHECK(devmemtcp_flow_parse(text, &flow) == 0, "flow");
	DEVMEMTCP_OPTS(nic_opts, o, .queues = &queue, .nqueues = 1, .flows = &flow,
		       .nflows = 1, .buf = buf);
	T_CHECK(devmemtcp_nic_open(ctx, ifname, &o, &nic) == 0, "nic_open: %s",
		devmemtcp_ctx_errmsg(ctx));
	a.buf = buf;
	a.binding = devmemtcp_binding_id(devmemtcp_nic_binding(nic));
	T_TRY(vm_transfer(VM_RX_ADDR4, port, bytes, PERIOD, receive, &a));
	T_CHECK(devmemtcp_nic_close(nic) == 0, "nic_close: %s", devmemtcp_ctx_errmsg(ctx));
	after = nic_dump();
	T_TRY(nic_same(before, after, "after nic_close"));
	devmemtcp_buf_free(buf);

	printf("rx: %llu bytes into a 32 MiB vgem buffer: %llu dmabuf, %llu linear, %llu frags, %llu tokens released in %llu dontneed calls\n",
	       (unsigned long long)a.bytes, (unsigned long long)a.st.dmabuf_bytes,
	       (unsigned long long)a.st.linear_bytes, (unsigned long long)a.st.frags,
	       (unsigned long long)a.st.tokens_released,
	       (unsigned long long)a.st.dontneed_calls);
	T_CHECK(a.ret == 0, "receiver failed");
	T_CHECK(a.bytes == bytes, "got %llu bytes", (unsigned long long)a.bytes);
	T_CHECK(a.bad_at < 0, "bad byte at stream offset %lld", (long long)a.bad_at);
	T_CHECK(a.linear_frags == 0 && a.st.linear_bytes == 0 && a.st.dmabuf_bytes == bytes,
		"%llu linear fragments, %llu linear bytes: not every byte in the vgem buffer",
		(unsigned long long)a.linear_frags, (unsigned long long)a.st.linear_bytes);
	T_CHECK(a.bad_addr == 0, "%llu fragments whose address is not the CPU address of their bytes",
		(unsigned long long)a.bad_addr);
	T_CHECK(a.st.tokens_outstanding == 0 && a.st.tokens_released == a.st.frags,
		"tokens: %llu released of %llu, %llu outstanding",
		(unsigned long long)a.st.tokens_released, (unsigned long long)a.st.frags,
		(unsigned long long)a.st.tokens_outstanding);
	T_CHECK(a.st.steering_misses == 0, "steering misses");
	free(before);
	free(after);
	return 0;
}

static const struct t_named tests[] = {
	{ "probe", test_probe },
	{ "nodes", test_nodes },
	{ "import", test_import },
	{ "rx", test_rx },
};

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	T_CHECK(vm_topology(VM_TX_IF, VM_RX_IF) >= 0,
		"cannot set up the namespaces (is devmemsim loaded?)");
	T_TRY(nic_init(argc, argv, &ctx, &ifname));
	return t_run_named("test-drm", tests, sizeof(tests) / sizeof(tests[0]),
			   argc > 2 ? argv[2] : "all");
}

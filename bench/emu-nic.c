// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * emu-nic: receive throughput into GPU memory through the emulated devmem
 * NIC (tests/emu), and the CPU cost of each stage of a receive: the
 * emulation's own work (placing the payload, writing it into GPU memory,
 * the real socket's calls) apart from the library's receive processing,
 * the gather into a destination and the deferred release, so that the
 * library's numbers stay honest.  A sender it forks in the sender's
 * network namespace streams the pattern "byte i is i % 251"; every 16th
 * receive's gathered bytes are read back and checked (outside the timing;
 * MISMATCH on a wrong byte).  Run it in the receiver's namespace with the
 * emulator preloaded (tests/emu/gpu-run.sh does):
 *
 *   emu-nic [--cpu] [--plain] [--bytes N] [--recv-bytes N] [--rx-page-size N]
 *           [--ifname IF] [--port P] [--addr A] [--sender-ns NS] [--label L]
 *
 * --cpu: a udmabuf and CPU copies (devmemtcp_buf_read) instead of a GPU.
 * --plain: no devmem and no emulation, the bound of any NIC emulated by
 * copies on this machine: the same sender into a plain TCP socket, recv()
 * into pinned memory and (without --cpu) one host-to-device copy of each
 * receive on a stream, synchronised before the next.
 * Prints a Markdown table and a line "EMU-NIC label=L bytes=N bad=N
 * gbps=X ..." (--plain: "EMU-NIC-PLAIN ...") for scripts.
 */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <devmemtcp.h>

#include "pattern.h"

#define PERIOD PATTERN_PERIOD_DEFAULT
#define CHUNK (1u << 20)
#define RING (64ull << 20)
#define CHECK_EVERY 16

/* The emulator's per-process timing (tests/emu/emu.h, struct emu_timing:
 * the same fields in the same order). */
struct emu_timing {
	uint64_t recvs, emu_ns, copy_ns, sys_ns, wait_ns, bytes;
	uint64_t copy_calls, copy_xfers, copy_bytes;
};

static struct cuda_calls {
	int (*init)(unsigned int);
	int (*device_get)(int *, int);
	int (*ctx_retain)(void **, int);
	int (*ctx_set)(void *);
	int (*alloc)(uint64_t *, size_t);
	int (*host_alloc)(void **, size_t, unsigned int);
	int (*dtoh)(void *, uint64_t, size_t);
	int (*htod_async)(uint64_t, const void *, size_t, void *);
	int (*stream_new)(void **, unsigned int);
	int (*stream_sync)(void *);
} cu;

/* The driver calls above, each named when it is missing or fails. */
static int cuda_open(void)
{
	static const struct {
		const char *name;
		size_t at;
	} syms[] = {
#define SYM(f, s) { s, offsetof(struct cuda_calls, f) }
		SYM(init, "cuInit"), SYM(device_get, "cuDeviceGet"),
		SYM(ctx_retain, "cuDevicePrimaryCtxRetain"), SYM(ctx_set, "cuCtxSetCurrent"),
		SYM(alloc, "cuMemAlloc_v2"), SYM(host_alloc, "cuMemHostAlloc"),
		SYM(dtoh, "cuMemcpyDtoH_v2"), SYM(htod_async, "cuMemcpyHtoDAsync_v2"),
		SYM(stream_new, "cuStreamCreate"), SYM(stream_sync, "cuStreamSynchronize"),
#undef SYM
	};
	void *h = dlopen("libcuda.so.1", RTLD_NOW), *c;
	int dev, r;

	if (!h) {
		fprintf(stderr, "emu-nic: %s: the NVIDIA driver's libcuda.so.1 is needed (or --cpu)\n",
			dlerror());
		return -1;
	}
	for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
		void *f = dlsym(h, syms[i].name);

		if (!f) {
			fprintf(stderr, "emu-nic: libcuda.so.1 has no %s: a driver too old for this program\n",
				syms[i].name);
			return -1;
		}
		memcpy((char *)&cu + syms[i].at, &f, sizeof(f));
	}
	r = cu.init(0);
	if (!r)
		r = cu.device_get(&dev, 0);
	if (!r)
		r = cu.ctx_retain(&c, dev);
	if (!r)
		r = cu.ctx_set(c);
	if (r)
		fprintf(stderr, "emu-nic: CUDA error %d setting up GPU 0 (or --cpu)\n", r);
	return r ? -1 : 0;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t parse_bytes(const char *s)
{
	char *end;
	uint64_t v = strtoull(s, &end, 0);

	switch (*end) {
	case 'G': case 'g': return v << 30;
	case 'M': case 'm': return v << 20;
	case 'K': case 'k': return v << 10;
	}
	return v;
}

/* The sender, in its own process and network namespace. */
static void send_stream(const char *ns, const char *addr, int port, uint64_t bytes)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	uint8_t *buf = malloc(CHUNK + PERIOD);
	char path[256];
	uint64_t pos = 0;
	int fd;

	snprintf(path, sizeof(path), "/var/run/netns/%s", ns);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (!buf || fd < 0 || setns(fd, CLONE_NEWNET) || inet_pton(AF_INET, addr, &sa.sin_addr) != 1) {
		perror("emu-nic sender");
		_exit(1);
	}
	close(fd);
	pattern_fill(buf, CHUNK + PERIOD, 0, PERIOD);
	for (int tries = 0;; tries++) {
		fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd >= 0 && !connect(fd, (struct sockaddr *)&sa, sizeof(sa)))
			break;
		if (fd >= 0)
			close(fd);
		if (tries == 200) {
			perror("emu-nic sender: connect");
			_exit(1);
		}
		usleep(50000);
	}
	while (pos < bytes) {
		size_t n = bytes - pos < CHUNK ? bytes - pos : CHUNK;
		ssize_t w = write(fd, buf + pos % PERIOD, n);

		if (w <= 0) {
			perror("emu-nic sender: write");
			_exit(1);
		}
		pos += (uint64_t)w;
	}
	close(fd);
	_exit(0);
}

/* Listen on port, start the sender (it connects from namespace ns to
 * addr): the accepted socket, or -1. */
static int sender_connected(int port, const char *ns, const char *addr, uint64_t bytes, int *lfd)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int one = 1, fd;

	*lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (*lfd < 0 || setsockopt(*lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(*lfd, (struct sockaddr *)&sa, sizeof(sa)) || listen(*lfd, 1)) {
		perror("emu-nic: listen");
		return -1;
	}
	if (fork() == 0)
		send_stream(ns, addr, port, bytes);
	fd = accept4(*lfd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0)
		perror("emu-nic: accept");
	return fd;
}

static bool pattern_ok(const uint8_t *p, size_t n, uint64_t pos)
{
	return pattern_check(p, n, pos, PERIOD) < 0;
}

/*
 * --plain: what the sender gets through a plain TCP socket into host
 * memory and, with a GPU, on into GPU memory by one host-to-device copy per
 * receive (pinned staging, synchronised before the next receive, as the
 * emulator's copies are).
 */
static int plain_run(int fd, bool cpu, uint64_t bytes, uint64_t recv_bytes, const char *label)
{
	uint64_t got = 0, ring_pos = 0, recvs = 0, bad = 0, t_sock = 0, t_copy = 0, t_check = 0;
	uint64_t dev_ring = 0, t0, t1, c0, c1;
	uint8_t *stage = NULL, *check = malloc(recv_bytes);
	void *stream = NULL;
	double r, wall;

	if (!check)
		return -1;
	if (cpu) {
		stage = malloc(RING);
	} else if (cuda_open() || cu.stream_new(&stream, 1) || cu.alloc(&dev_ring, RING) ||
		   cu.host_alloc((void **)&stage, recv_bytes, 0)) {
		fprintf(stderr, "emu-nic: --plain: no GPU memory or pinned staging\n");
		return -1;
	}
	if (!stage)
		return -1;
	t0 = now_ns();
	c0 = cpu_ns();
	while (got < bytes) {
		uint64_t a = now_ns(), b, c;
		uint8_t *to;
		ssize_t n;

		if (ring_pos + recv_bytes > RING)
			ring_pos = 0;
		to = cpu ? stage + ring_pos : stage;
		n = recv(fd, to, bytes - got < recv_bytes ? bytes - got : recv_bytes, 0);
		b = now_ns();
		if (n <= 0) {
			fprintf(stderr, "emu-nic: --plain: recv returned %zd: %s\n", n,
				n ? strerror(errno) : "the sender closed early");
			return -1;
		}
		if (!cpu && (cu.htod_async(dev_ring + ring_pos, stage, (size_t)n, stream) ||
			     cu.stream_sync(stream))) {
			fprintf(stderr, "emu-nic: --plain: a host-to-device copy failed\n");
			return -1;
		}
		c = now_ns();
		t_sock += b - a;
		t_copy += c - b;
		if (recvs % CHECK_EVERY == 0) {
			const uint8_t *p = to;

			if (!cpu) {
				cu.dtoh(check, dev_ring + ring_pos, (size_t)n);
				p = check;
			}
			if (!pattern_ok(p, (size_t)n, got) && !bad++)
				printf("MISMATCH in the %zd bytes at stream offset %llu\n", n,
				       (unsigned long long)got);
			t_check += now_ns() - c;
		}
		ring_pos += (uint64_t)n;
		got += (uint64_t)n;
		recvs++;
	}
	c1 = cpu_ns();
	t1 = now_ns();
	r = (double)recvs;
	wall = (double)(t1 - t0 - t_check);
	printf("## Plain TCP receive, no emulation (%s, %s)\n\n", label,
	       cpu ? "into host memory" : "into pinned memory, then one host-to-device copy each");
	printf("%llu bytes in %llu receives of up to %llu bytes: %.2f GB/s into %s memory (every %dth receive checked: %s)\n\n",
	       (unsigned long long)got, (unsigned long long)recvs, (unsigned long long)recv_bytes,
	       (double)got / wall, cpu ? "host" : "GPU", CHECK_EVERY, bad ? "MISMATCH" : "ok");
	printf("| per receive (us) | wall |\n|---|---:|\n");
	printf("| the socket (recv) | %.2f |\n", (double)t_sock / r / 1e3);
	if (!cpu)
		printf("| host-to-device copy and stream sync | %.2f |\n", (double)t_copy / r / 1e3);
	printf("| thread CPU time | %.2f |\n\n", (double)(c1 - c0) / r / 1e3);
	printf("EMU-NIC-PLAIN label=%s bytes=%llu bad=%llu gbps=%.2f recvs=%llu us_sock=%.2f us_copy=%.2f us_cpu=%.2f\n",
	       label, (unsigned long long)got, (unsigned long long)bad, (double)got / wall,
	       (unsigned long long)recvs, (double)t_sock / r / 1e3, (double)t_copy / r / 1e3,
	       (double)(c1 - c0) / r / 1e3);
	return bad ? 1 : 0;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "cpu", no_argument, NULL, 'c' },
		{ "plain", no_argument, NULL, 'x' },
		{ "bytes", required_argument, NULL, 'b' },
		{ "recv-bytes", required_argument, NULL, 'r' },
		{ "rx-page-size", required_argument, NULL, 'P' },
		{ "ifname", required_argument, NULL, 'i' },
		{ "port", required_argument, NULL, 'p' },
		{ "addr", required_argument, NULL, 'a' },
		{ "sender-ns", required_argument, NULL, 'n' },
		{ "label", required_argument, NULL, 'l' },
		{ 0 },
	};
	const char *ifname = "dsim1", *addr = "10.77.0.2", *ns = "dmtA", *label = "default";
	uint64_t bytes = 1ull << 30, recv_bytes = 256 << 10, got = 0, ring_pos = 0;
	uint64_t t_recv = 0, t_gather = 0, t_release = 0, t_check = 0, recvs = 0, bad = 0;
	uint32_t rx_page = 0;
	int opt, port = 5701, lfd = -1, fd = -1, ret = 1, n;
	bool cpu = false, plain = false;
	struct devmemtcp_ctx *ctx = NULL;
	struct devmemtcp_buf *buf = NULL;
	struct devmemtcp_gpu *gpu = NULL;
	struct devmemtcp_nic *nic = NULL;
	struct devmemtcp_rx *rx = NULL;
	struct devmemtcp_frag *frags;
	struct devmemtcp_flow flow;
	struct emu_timing e0 = { 0 }, e1 = { 0 };
	void (*emu_timing)(struct emu_timing *);
	uint8_t *linear, *host_ring = NULL, *check;
	uint64_t dev_ring = 0, t0, t1, c0, c1, t_wall;
	void *stream = NULL;
	size_t max_frags;
	char rule[64];
	int status;

	while ((opt = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (opt) {
		case 'c': cpu = true; break;
		case 'x': plain = true; break;
		case 'b': bytes = parse_bytes(optarg); break;
		case 'r': recv_bytes = parse_bytes(optarg); break;
		case 'P': rx_page = (uint32_t)parse_bytes(optarg); break;
		case 'i': ifname = optarg; break;
		case 'p': port = atoi(optarg); break;
		case 'a': addr = optarg; break;
		case 'n': ns = optarg; break;
		case 'l': label = optarg; break;
		default:
			fprintf(stderr, "usage: emu-nic [--cpu] [--plain] [--bytes N] [--recv-bytes N] [--rx-page-size N] [--ifname IF] [--port P] [--addr A] [--sender-ns NS] [--label L]\n");
			return 2;
		}
	}
	if (plain) {
		fd = sender_connected(port, ns, addr, bytes, &lfd);
		ret = fd < 0 || plain_run(fd, cpu, bytes, recv_bytes, label) ? 1 : 0;
		goto out;
	}
	*(void **)&emu_timing = dlsym(RTLD_DEFAULT, "devmemtcp_emu_timing");
	if (!emu_timing) {
		fprintf(stderr, "emu-nic: the emulated NIC (libdevmemtcp-emu.so) is not preloaded\n");
		return 2;
	}
	max_frags = recv_bytes / 512 + 8;
	frags = calloc(max_frags, sizeof(*frags));
	linear = malloc(recv_bytes);
	check = malloc(recv_bytes);
	if (!frags || !linear || !check || devmemtcp_ctx_new(NULL, &ctx))
		return 1;
	if (cpu) {
		DEVMEMTCP_OPTS(buf_opts, bo, .provider = DEVMEMTCP_PROVIDER_UDMABUF,
			       .size = 64 << 20,
			       .flags = rx_page > 4096 ? DEVMEMTCP_BUF_HUGETLB : 0);

		host_ring = malloc(RING);
		if (!host_ring || devmemtcp_buf_new(ctx, &bo, &buf))
			goto setup_failed;
	} else {
		DEVMEMTCP_OPTS(buf_opts, bo, .provider = DEVMEMTCP_PROVIDER_CUDA,
			       .size = 256 << 20);

		if (cuda_open())
			goto out;
		if (cu.stream_new(&stream, 1) || cu.alloc(&dev_ring, RING)) {
			fprintf(stderr, "emu-nic: setup: no stream or GPU memory\n");
			goto out;
		}
		if (devmemtcp_gpu_new(ctx, NULL, &gpu) || devmemtcp_buf_new(ctx, &bo, &buf))
			goto setup_failed;
	}
	snprintf(rule, sizeof(rule), "tcp4 dst-port %d", port);
	devmemtcp_flow_parse(rule, &flow);
	{
		DEVMEMTCP_OPTS(bind_opts, bio, .rx_page_size = rx_page);
		DEVMEMTCP_OPTS(nic_opts, no, .nqueues = 1, .flows = &flow, .nflows = 1,
			       .buf = buf, .bind_opts = &bio);

		if (devmemtcp_nic_open(ctx, ifname, &no, &nic))
			goto setup_failed;
	}
	fd = sender_connected(port, ns, addr, bytes, &lfd);
	if (fd < 0 || devmemtcp_rx_new(ctx, fd, NULL, &rx) ||
	    devmemtcp_rx_add_buf(rx, devmemtcp_binding_id(devmemtcp_nic_binding(nic)), buf)) {
		fprintf(stderr, "emu-nic: receiver: %s\n", devmemtcp_ctx_errmsg(ctx));
		goto out;
	}
	emu_timing(&e0);
	t_wall = now_ns();
	c0 = cpu_ns();
	while (got < bytes) {
		uint64_t len, a = now_ns(), b, c, d;

		n = devmemtcp_rx_recv(rx, frags, max_frags, linear, recv_bytes);
		b = now_ns();
		if (n <= 0) {
			fprintf(stderr, "emu-nic: recv returned %d: %s\n", n, devmemtcp_rx_errmsg(rx));
			goto out;
		}
		len = 0;
		for (int i = 0; i < n; i++)
			len += frags[i].len;
		if (ring_pos + len > RING)
			ring_pos = 0;
		if (cpu) {
			for (int i = 0, off = 0; i < n; off += (int)frags[i++].len) {
				if (frags[i].flags & DEVMEMTCP_FRAG_LINEAR)
					memcpy(host_ring + ring_pos + off, linear + frags[i].offset, frags[i].len);
				else if (devmemtcp_buf_read(buf, frags[i].offset, host_ring + ring_pos + off,
							    frags[i].len))
					goto out;
			}
			c = now_ns();
			if (devmemtcp_rx_release(rx, frags, (size_t)n))
				goto out;
		} else {
			struct devmemtcp_gpu_iov dst = { dev_ring + ring_pos, len };

			if (devmemtcp_gpu_gather(gpu, frags, (size_t)n, &dst, 1, stream)) {
				fprintf(stderr, "emu-nic: gather: %s\n", devmemtcp_gpu_errmsg(gpu));
				goto out;
			}
			c = now_ns();
			if (devmemtcp_gpu_release_after(gpu, rx, frags, (size_t)n, stream)) {
				fprintf(stderr, "emu-nic: release: %s\n", devmemtcp_gpu_errmsg(gpu));
				goto out;
			}
		}
		d = now_ns();
		t_recv += b - a;
		t_gather += c - b;
		t_release += d - c;
		if (recvs % CHECK_EVERY == 0) {
			/* outside the timing: read the gathered bytes back */
			const uint8_t *p = host_ring + ring_pos;

			if (!cpu) {
				cu.stream_sync(stream);
				cu.dtoh(check, dev_ring + ring_pos, len);
				p = check;
			}
			if (!pattern_ok(p, len, got) && !bad++)
				printf("MISMATCH in the %llu bytes at stream offset %llu\n",
				       (unsigned long long)len, (unsigned long long)got);
			t_check += now_ns() - d;
		}
		ring_pos += len;
		got += len;
		recvs++;
	}
	if (!cpu)
		cu.stream_sync(stream);
	c1 = cpu_ns();
	t1 = now_ns();
	t0 = t_wall;
	emu_timing(&e1);
	{
		double r = (double)recvs, wall = (double)(t1 - t0 - t_check);
		double emu = (double)(e1.emu_ns - e0.emu_ns), copy = (double)(e1.copy_ns - e0.copy_ns);
		double sys = (double)(e1.sys_ns - e0.sys_ns), wait = (double)(e1.wait_ns - e0.wait_ns);
		double lib = (double)t_recv - emu - copy - sys - wait;
		double gbps = (double)got / wall;
		double calls = (double)(e1.copy_calls - e0.copy_calls);
		double xfers = (double)(e1.copy_xfers - e0.copy_xfers);
		double xbytes = (double)(e1.copy_bytes - e0.copy_bytes);
		double per_xfer = xfers ? xbytes / xfers : 0;
		const char *(*copy_mode)(void);
		const char *how = "none";

		*(void **)&copy_mode = dlsym(RTLD_DEFAULT, "devmemtcp_emu_copy_mode");
		if (!cpu && copy_mode)
			how = copy_mode();

		printf("## Receive through the emulated NIC (%s, %s)\n\n", label,
		       cpu ? "udmabuf, CPU copies" : "CUDA memory, GPU gather");
		if (!cpu)
			printf("The emulator copied into GPU memory by `%s` (DEVMEMTCP_EMU_COPY).\n\n", how);
		printf("%llu bytes in %llu receives of up to %llu bytes: %.2f GB/s into %s memory (every %dth receive checked: %s)\n\n",
		       (unsigned long long)got, (unsigned long long)recvs,
		       (unsigned long long)recv_bytes, gbps, cpu ? "host" : "GPU", CHECK_EVERY,
		       bad ? "MISMATCH" : "ok");
		printf("| per receive (us) | wall |\n|---|---:|\n");
		printf("| emulation: placing, tokens, control messages | %.2f |\n", emu / r / 1e3);
		printf("| emulation: payload into %s memory (copies, stream sync) | %.2f |\n",
		       cpu ? "the dma-buf's" : "GPU", copy / r / 1e3);
		printf("| emulation: the real socket's calls | %.2f |\n", sys / r / 1e3);
		printf("| waiting for data or pages | %.2f |\n", wait / r / 1e3);
		if (!cpu) {
			printf("| emulation: copies issued per receive (driver calls: copies, kernels) | %.2f |\n",
			       calls / r);
			printf("| emulation: host-to-device transfers per receive, bytes each | %.2f, %.0f |\n",
			       xfers / r, per_xfer);
		}
		printf("| library receive processing (devmemtcp_rx_recv less the above) | %.2f |\n", lib / r / 1e3);
		printf("| %s | %.2f |\n", cpu ? "CPU copies (devmemtcp_buf_read)" : "gather (devmemtcp_gpu_gather)",
		       (double)t_gather / r / 1e3);
		printf("| release (%s) | %.2f |\n", cpu ? "devmemtcp_rx_release" : "devmemtcp_gpu_release_after",
		       (double)t_release / r / 1e3);
		printf("| thread CPU time, all stages | %.2f |\n\n", (double)(c1 - c0) / r / 1e3);
		printf("EMU-NIC label=%s bytes=%llu bad=%llu gbps=%.2f recvs=%llu us_emu=%.2f us_copy=%.2f us_sys=%.2f us_wait=%.2f us_lib=%.2f us_gather=%.2f us_release=%.2f us_cpu=%.2f calls=%.2f xfers=%.2f xfer_bytes=%.0f copy=%s\n",
		       label, (unsigned long long)got, (unsigned long long)bad, gbps,
		       (unsigned long long)recvs, emu / r / 1e3, copy / r / 1e3, sys / r / 1e3,
		       wait / r / 1e3, lib / r / 1e3, (double)t_gather / r / 1e3,
		       (double)t_release / r / 1e3, (double)(c1 - c0) / r / 1e3, calls / r,
		       xfers / r, per_xfer, how);
	}
	ret = bad ? 1 : 0;
	goto out;
setup_failed:
	fprintf(stderr, "emu-nic: setup: %s\n", devmemtcp_ctx_errmsg(ctx));
out:
	if (rx)
		devmemtcp_rx_flush(rx);
	devmemtcp_rx_free(rx);
	if (fd >= 0)
		close(fd);
	if (lfd >= 0)
		close(lfd);
	while (waitpid(-1, &status, 0) > 0)
		if (!WIFEXITED(status) || WEXITSTATUS(status))
			ret = 1;
	devmemtcp_nic_close(nic);
	devmemtcp_gpu_free(gpu);
	devmemtcp_buf_free(buf);
	devmemtcp_ctx_free(ctx);
	return ret;
}

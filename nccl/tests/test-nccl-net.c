// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * Drives libnccl-net-devmemtcp.so the way NCCL does: dlopen, the exported
 * tables ncclNetPlugin_v8 .. _v11, two ranks that each listen, exchange
 * handles, connect and accept without blocking, then move data both ways
 * at once with several requests in flight, as NCCL's proxy thread does.
 *
 *   test-nccl-net PLUGIN [--version 8|9|10|11] [--bytes N] [--quiet]
 *                        [--corrupt K] [--cuda]
 *       two threads of this process over loopback (NCCL_DEVMEMTCP_IFNAME=lo
 *       unless set), every version: properties, N bytes (64 MiB) each way
 *       in messages of mixed sizes (0 bytes, sizes not a multiple of 4) with
 *       8 sends and 8 receives in flight, a grouped receive of 4 buffers
 *       matched by tag, and the error paths (a handle not from listen, a
 *       peer that closes, a message larger than the receive, a request that
 *       is not one); the plugin must log the path of every connection.
 *
 *       With NCCL_DEVMEMTCP_FAMILY=AF_INET6 the same over ::1 (exit 77
 *       when lo has no IPv6 address).  --corrupt K changes a byte of rank
 *       0's message K after it is written (a test of the checks: rank 1
 *       must report the mismatch and both ranks stop).  --cuda registers
 *       the buffers as CUDA memory (NCCL_DEVMEMTCP_CUDA_PTR=1) with the
 *       tests' fake libcuda.so.1 on LD_LIBRARY_PATH, where a copy on the
 *       legacy default stream fails as the deadlock it is under NCCL; every
 *       byte must go through the plugin's host copy.
 *
 *   test-nccl-net PLUGIN --fork --ns0 NS --if0 IF --ns1 NS --if1 IF
 *       [--devmem] [--dmabuf-tx] ...
 *       the ranks are processes in the given network namespaces and
 *       interfaces (the vm suite: dsim0 in dmtA, dsim1 in dmtB); --devmem
 *       requires devmem RX on every receive, --dmabuf-tx sends from a
 *       udmabuf registered with regMrDmaBuf and requires devmem TX on
 *       kernels that have it (6.16+) and a plain fallback before.
 *
 * Every byte received is checked against the sender's pattern, and the
 * bytes after each message in the receive buffer must be left alone.
 * Exit 0 pass, 1 fail, 77 skip.
 */
#include <dlfcn.h>
#include <errno.h>
#include <grp.h>
#include <fcntl.h>
#include <getopt.h>
#include <ifaddrs.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "devmemtcp.h"
#include "net_abi.h"
#include "pattern.h"

#define WINDOW 8
#define SLACK 64
#define MAX_MSG ((4u << 20) + 7)
#define SLOT (MAX_MSG + SLACK)
#define TIMEOUT_S 120
#define GROUPED_BYTES 70106
#define DMTN_TEST_MAX_DEVS 16

static const char *plugin_path;
static uint64_t total = 64ull << 20;
static int only_version;
static long corrupt_msg = -1;
static bool quiet, fork_mode, want_devmem, dmabuf_tx, cuda_mode, gpu_mode;
static bool want_unpack;
/* --no-gather: the library has no gather kernels (built without nvcc, or
 * DEVMEMTCP_TEST_NO_GATHER_KERNELS=1): the plugin copies what it would
 * gather through host memory */
static bool no_gather;
static int want_max_recvs(void);
static const char *rank_ns[2], *rank_if[2];
static long rank1_uid = -1;
/* --devices N --pci yes|no: the devices test */
static int want_devices;
static const char *want_pci;
/* what ncclGetVersion says (--nccl-version; 0: it fails) */
static int nccl_version = 22809;

/* NCCL's own entry point, which the plugin looks for in the process to
 * know which NCCL loaded it (the harness is linked with -rdynamic). */
__attribute__((visibility("default"))) int ncclGetVersion(int *version);
int ncclGetVersion(int *version)
{
	if (!nccl_version)
		return 3;	/* ncclInternalError */
	*version = nccl_version;
	return 0;
}

/* ---- CUDA memory (--gpu): libcuda.so.1, the real driver or a fake -------- */

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
static struct {
	void *lib;
	CUresult (*cuInit)(unsigned int);
	CUresult (*cuDeviceGet)(int *, int);
	CUresult (*cuDevicePrimaryCtxRetain)(void **, int);
	CUresult (*cuCtxSetCurrent)(void *);
	CUresult (*cuMemAlloc)(CUdeviceptr *, size_t);
	CUresult (*cuMemFree)(CUdeviceptr);
	CUresult (*cuStreamCreate)(void **, unsigned int);
	CUresult (*cuStreamSynchronize)(void *);
	CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr, const void *, size_t, void *);
	CUresult (*cuMemcpyDtoHAsync)(void *, CUdeviceptr, size_t, void *);
	CUresult (*cuMemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, void *);
	CUresult (*cuMemsetD8Async)(CUdeviceptr, unsigned char, size_t, void *);
	void *stream;
} cu;

/* ---- NCCL's logger: print, and keep the lines for the checks ------------- */

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static char **log_lines;
static size_t nlog;

static void logger(enum nccl_log_level level, unsigned long flags,
		   const char *file, int line, const char *fmt, ...)
{
	char buf[2048];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	pthread_mutex_lock(&log_lock);
	if (!quiet || level == NCCL_LOG_WARN)
		fprintf(stderr, "[%d] %s %s:%d %s\n", (int)getpid(),
			level == NCCL_LOG_WARN ? "WARN" : "INFO", file, line, buf);
	log_lines = realloc(log_lines, (nlog + 1) * sizeof(*log_lines));
	log_lines[nlog++] = strdup(buf);
	pthread_mutex_unlock(&log_lock);
}

/* Lines logged since mark that contain all of a, b (b may be NULL). */
static int log_count(size_t mark, const char *a, const char *b)
{
	int n = 0;

	pthread_mutex_lock(&log_lock);
	for (size_t i = mark; i < nlog; i++)
		n += strstr(log_lines[i], a) && (!b || strstr(log_lines[i], b));
	pthread_mutex_unlock(&log_lock);
	return n;
}

static size_t log_mark(void)
{
	size_t m;

	pthread_mutex_lock(&log_lock);
	m = nlog;
	pthread_mutex_unlock(&log_lock);
	return m;
}

/* From the close line of comm p: the number before " <what>". */
static uint64_t close_stat(const void *comm, const char *what)
{
	char key[64];
	uint64_t v = UINT64_MAX;

	snprintf(key, sizeof(key), "comm %p (", comm);
	pthread_mutex_lock(&log_lock);
	for (size_t i = 0; i < nlog; i++) {
		const char *s = strstr(log_lines[i], key), *w;

		if (!s || !strstr(s, "messages,") || !(w = strstr(s, what)))
			continue;
		while (w > s && w[-1] == ' ')
			w--;
		while (w > s && w[-1] >= '0' && w[-1] <= '9')
			w--;
		v = strtoull(w, NULL, 10);
	}
	pthread_mutex_unlock(&log_lock);
	return v;
}

/* ---- one table version behind one set of calls ---------------------------- */

struct net {
	int v;
	const void *table;
	void *ctx;		/* v11 */
};

#define T8(n) ((const struct nccl_net_v8 *)(n)->table)
#define T9(n) ((const struct nccl_net_v9 *)(n)->table)
#define T10(n) ((const struct nccl_net_v10 *)(n)->table)
#define T11(n) ((const struct nccl_net_v11 *)(n)->table)
/* fields at the same place in every version */
#define CALL(n, f, ...) T8(n)->f(__VA_ARGS__)

static int net_init(struct net *n)
{
	switch (n->v) {
	case 8: return T8(n)->init(logger);
	case 9: return T9(n)->init(logger);
	case 10: return T10(n)->init(logger, NULL);
	default: {
		struct nccl_net_comm_config cfg = { NCCL_NET_TRAFFIC_CLASS_UNDEF };

		return T11(n)->init(&n->ctx, 0x1234 + (uint64_t)getpid(), &cfg,
				    logger, NULL);
	}
	}
}

static int net_finalize(struct net *n)
{
	return n->v == 11 ? T11(n)->finalize(n->ctx) : 0;
}

static int net_listen(struct net *n, int dev, void *h, void **lc)
{
	return n->v == 11 ? T11(n)->listen(n->ctx, dev, h, lc)
			  : CALL(n, listen, dev, h, lc);
}

static int net_connect(struct net *n, int dev, void *h, void **sc)
{
	nccl_dev_handle_t *dh = NULL;

	switch (n->v) {
	case 8: return T8(n)->connect(dev, h, sc, &dh);
	case 9: return T9(n)->connect(dev, h, sc, &dh);
	case 10: {
		struct nccl_net_comm_config cfg = { NCCL_NET_TRAFFIC_CLASS_UNDEF };

		return T10(n)->connect(dev, &cfg, h, sc, &dh);
	}
	default: return T11(n)->connect(n->ctx, dev, h, sc, &dh);
	}
}

/* As NCCL's proxy: a device handle for the receive comm when the device
 * offers UNPACK (dhp, of type and version set), else none. */
static int net_accept(struct net *n, void *lc, void **rc, nccl_dev_handle_t *dhp)
{
	nccl_dev_handle_t *dh = dhp;

	return CALL(n, accept, lc, rc, &dh);
}

static int net_isend(struct net *n, void *sc, void *data, size_t size, int tag,
		     void *mh, void **req)
{
	switch (n->v) {
	case 8: return T8(n)->isend(sc, data, (int)size, tag, mh, req);
	case 9: return T9(n)->isend(sc, data, size, tag, mh, req);
	case 10: return T10(n)->isend(sc, data, size, tag, mh, NULL, req);
	default: return T11(n)->isend(sc, data, size, tag, mh, NULL, req);
	}
}

static int net_irecv(struct net *n, void *rc, int nb, void **data,
		     size_t *sizes, int *tags, void **mhs, void **req)
{
	int isizes[8];
	void *ph[8] = { 0 };

	/* NCCL 2.19+ may leave a hint in *request; it is not a request */
	*req = n->v >= 9 ? (void *)NCCL_NET_OPTIONAL_RECV_COMPLETION : NULL;
	switch (n->v) {
	case 8:
		for (int i = 0; i < nb; i++)
			isizes[i] = (int)sizes[i];
		return T8(n)->irecv(rc, nb, data, isizes, tags, mhs, req);
	case 9: return T9(n)->irecv(rc, nb, data, sizes, tags, mhs, req);
	case 10: return T10(n)->irecv(rc, nb, data, sizes, tags, mhs, ph, req);
	default: return T11(n)->irecv(rc, nb, data, sizes, tags, mhs, ph, req);
	}
}

/* ---- checks and the two ranks' side channel ------------------------------- */

struct rank {
	int id;
	int sync_fd;
	struct net net;
	int dev;
	void *sc, *rc;		/* to the peer, from the peer */
	char *sbuf, *rbuf;	/* --gpu: device addresses */
	void *smh, *rmh;
	struct devmemtcp_ctx *dctx;
	struct devmemtcp_buf *ubuf;	/* --dmabuf-tx */
	uint8_t *stage;		/* --gpu: host copy of SLOT bytes */
	/* NCCL's side of the receive comm's unpack queue (--unpack) */
	nccl_dev_handle_t dh, *dhp;
	uint64_t head;		/* receives unpacked, as NCCL's kernel counts */
	uint64_t unpacked;	/* entries copied, bytes */
	uint64_t unpacked_bytes;
	uint64_t extra_rx, extra_tx;	/* bytes of the tests after transfer() */
	int result;
};

#define CHECK(r, cond, ...)                                                    \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr, "FAIL rank %d v%d %s:%d: %s: ", (r)->id, \
				(r)->net.v, __func__, __LINE__, #cond);        \
			fprintf(stderr, __VA_ARGS__);                          \
			fputc('\n', stderr);                                   \
			return -1;                                             \
		}                                                              \
	} while (0)

/* ---- --gpu buffers ---------------------------------------------------------- */

#define CU_SYM(f, name)                                                        \
	do {                                                                   \
		*(void **)&cu.f = dlsym(cu.lib, name);                         \
		if (!cu.f) {                                                   \
			fprintf(stderr, "libcuda.so.1 has no %s\n", name);     \
			return -1;                                             \
		}                                                              \
	} while (0)

/* Load the driver and make device 0's primary context current on this
 * thread (the plugin's listen takes its GPU from it, as under NCCL). */
static int gpu_init(void)
{
	void *ctx;
	int d;

	if (!cu.lib) {
		cu.lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
		if (!cu.lib) {
			fprintf(stderr, "--gpu: %s\n", dlerror());
			return -1;
		}
		CU_SYM(cuInit, "cuInit");
		CU_SYM(cuDeviceGet, "cuDeviceGet");
		CU_SYM(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
		CU_SYM(cuCtxSetCurrent, "cuCtxSetCurrent");
		CU_SYM(cuMemAlloc, "cuMemAlloc_v2");
		CU_SYM(cuMemFree, "cuMemFree_v2");
		CU_SYM(cuStreamCreate, "cuStreamCreate");
		CU_SYM(cuStreamSynchronize, "cuStreamSynchronize");
		CU_SYM(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2");
		CU_SYM(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2");
		CU_SYM(cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2");
		CU_SYM(cuMemsetD8Async, "cuMemsetD8Async");
	}
	if (cu.cuInit(0) || cu.cuDeviceGet(&d, 0) ||
	    cu.cuDevicePrimaryCtxRetain(&ctx, d) || cu.cuCtxSetCurrent(ctx)) {
		fprintf(stderr, "--gpu: no CUDA device 0\n");
		return -1;
	}
	/* non-blocking: never behind the plugin's own work */
	if (!cu.stream && cu.cuStreamCreate(&cu.stream, 1)) {
		fprintf(stderr, "--gpu: cuStreamCreate failed\n");
		return -1;
	}
	return 0;
}

static int gpu_sync(void)
{
	return cu.cuStreamSynchronize(cu.stream) ? -1 : 0;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int sync_send(struct rank *r, const void *buf, size_t len)
{
	CHECK(r, write(r->sync_fd, buf, len) == (ssize_t)len, "side channel: %s",
	      strerror(errno));
	return 0;
}

static int sync_recv(struct rank *r, void *buf, size_t len)
{
	struct pollfd p = { .fd = r->sync_fd, .events = POLLIN };
	size_t got = 0;

	while (got < len) {
		ssize_t n;

		CHECK(r, poll(&p, 1, TIMEOUT_S * 1000) == 1,
		      "the peer said nothing for %d s", TIMEOUT_S);
		n = read(r->sync_fd, (char *)buf + got, len - got);
		CHECK(r, n > 0, "side channel: %s", n ? strerror(errno) : "closed");
		got += (size_t)n;
	}
	return 0;
}

/* The peer gave up: it shut down (a thread) or closed (a process) its end
 * of the side channel.  Loops that wait on the plugin check it, so that
 * one rank's failure ends the run at once instead of leaving the other
 * waiting for bytes that will never come. */
static bool peer_gone(struct rank *r)
{
	struct pollfd p = { .fd = r->sync_fd, .events = POLLRDHUP };

	return poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP));
}

/* A loop waiting on the plugin may go on: the peer is there, and end (a
 * TIMEOUT_S deadline) has not passed. */
static int still_waiting(struct rank *r, double end, const char *what)
{
	CHECK(r, !peer_gone(r), "the peer stopped while %s (see its message)", what);
	CHECK(r, now_s() < end, "%s: nothing for %d s", what, TIMEOUT_S);
	return 0;
}

/* Both ranks reach the same point. */
static int barrier(struct rank *r)
{
	char c = 'b';

	if (sync_send(r, &c, 1) || sync_recv(r, &c, 1))
		return -1;
	CHECK(r, c == 'b', "side channel out of step");
	return 0;
}

/* NCCL_DEVMEMTCP_PORT_RANGE=LO-HI: *lo and *hi, else 0 */
static void port_range(unsigned int *lo, unsigned int *hi)
{
	const char *v = getenv("NCCL_DEVMEMTCP_PORT_RANGE");

	*lo = *hi = 0;
	if (v && sscanf(v, "%u-%u", lo, hi) != 2)
		*lo = *hi = 0;
}

/* The data port a handle names (bytes 26 and 27, network order: the
 * plugin's wire format). */
static unsigned int handle_data_port(const char *h)
{
	return (unsigned int)(uint8_t)h[26] << 8 | (uint8_t)h[27];
}

/* Listen, swap handles, connect and accept together until both are up. */
static int connect_pair(struct rank *r, void **sc, void **rc)
{
	char mine[NCCL_NET_HANDLE_MAXSIZE], peer[NCCL_NET_HANDLE_MAXSIZE];
	void *lc = NULL;
	double end = now_s() + TIMEOUT_S;
	int ret;

	memset(mine, 0, sizeof(mine));
	*sc = *rc = NULL;
	unsigned int lo, hi;

	ret = net_listen(&r->net, r->dev, mine, &lc);
	CHECK(r, ret == NCCL_OK && lc, "listen: %d", ret);
	port_range(&lo, &hi);
	CHECK(r, !lo || (handle_data_port(mine) >= lo && handle_data_port(mine) <= hi),
	      "the data port %u is outside NCCL_DEVMEMTCP_PORT_RANGE %u-%u",
	      handle_data_port(mine), lo, hi);
	if (sync_send(r, mine, sizeof(mine)) || sync_recv(r, peer, sizeof(peer)))
		return -1;
	while (!*sc || !*rc) {
		if (!*sc) {
			ret = net_connect(&r->net, r->dev, peer, sc);
			CHECK(r, ret == NCCL_OK, "connect: %d", ret);
		}
		if (!*rc) {
			ret = net_accept(&r->net, lc, rc, r->dhp);
			CHECK(r, ret == NCCL_OK, "accept: %d", ret);
		}
		if (still_waiting(r, end, "connecting"))
			return -1;
	}
	CHECK(r, CALL(&r->net, close_listen, lc) == NCCL_OK, "closeListen");
	if (r->dhp) {
		CHECK(r, r->dh.handle && r->dh.size == sizeof(struct nccl_unpack_handle) &&
			 r->dh.needs_proxy_progress == 1,
		      "the device handle accept filled: handle %p size %zu needsProxyProgress %d",
		      r->dh.handle, r->dh.size, r->dh.needs_proxy_progress);
		CHECK(r, ((const struct nccl_unpack_handle *)r->dh.handle)->head == 0,
		      "the unpack handle's head starts at %" PRIu64,
		      ((const struct nccl_unpack_handle *)r->dh.handle)->head);
		r->head = 0;
	}
	return 0;
}

static int regs(struct rank *r);

/* A connection each way, with the rank's buffers registered on both. */
static int open_pair(struct rank *r)
{
	return connect_pair(r, &r->sc, &r->rc) || regs(r) ? -1 : 0;
}

/* NCCL's order: deregister, then close. */
static int close_send(struct rank *r)
{
	if (r->smh)
		CHECK(r, CALL(&r->net, dereg_mr, r->sc, r->smh) == NCCL_OK, "deregMr send");
	CHECK(r, CALL(&r->net, close_send, r->sc) == NCCL_OK, "closeSend");
	r->sc = r->smh = NULL;
	return 0;
}

static int close_recv(struct rank *r)
{
	CHECK(r, CALL(&r->net, dereg_mr, r->rc, r->rmh) == NCCL_OK, "deregMr recv");
	CHECK(r, CALL(&r->net, close_recv, r->rc) == NCCL_OK, "closeRecv");
	r->rc = r->rmh = NULL;
	return 0;
}

static int close_pair(struct rank *r)
{
	/* the peer may still read what we sent: close in step */
	if (barrier(r))
		return -1;
	return close_send(r) || close_recv(r) ? -1 : 0;
}

/* ---- properties ------------------------------------------------------------ */

static int check_props(struct rank *r)
{
	struct nccl_net_props_v11 p;
	int ndev = 0, ret, want_ptr = NCCL_PTR_HOST;

	CHECK(r, !strcmp(T8(&r->net)->name, "DevmemTCP"), "name %s",
	      T8(&r->net)->name);
	CHECK(r, CALL(&r->net, devices, &ndev) == NCCL_OK && ndev >= 1,
	      "devices: %d", ndev);
	r->dev = 0;
	memset(&p, 0xa5, sizeof(p));
	if (r->net.v == 8) {
		struct nccl_net_props_v8 p8;

		memset(&p8, 0xa5, sizeof(p8));
		ret = T8(&r->net)->get_properties(0, &p8);
		p.name = p8.name;
		p.ptr_support = p8.ptr_support;
		p.speed = p8.speed;
		p.max_comms = p8.max_comms;
		p.max_recvs = p8.max_recvs;
		p.net_device_type = p8.net_device_type;
		p.net_device_version = p8.net_device_version;
	} else if (r->net.v < 11) {
		ret = T9(&r->net)->get_properties(0, (struct nccl_net_props_v9 *)&p);
	} else {
		ret = T11(&r->net)->get_properties(0, &p);
	}
	CHECK(r, ret == NCCL_OK, "getProperties: %d", ret);
	if (want_devmem || cuda_mode)
		want_ptr |= NCCL_PTR_CUDA | NCCL_PTR_DMABUF;
	CHECK(r, p.name && !strcmp(p.name, rank_if[r->id] ? rank_if[r->id] : "lo"),
	      "device name %s", p.name ? p.name : "(null)");
	CHECK(r, p.ptr_support == want_ptr, "ptrSupport %#x, expected %#x",
	      p.ptr_support, want_ptr);
	CHECK(r, p.max_recvs == want_max_recvs() && p.speed > 0 && p.max_comms > 0,
	      "maxRecvs %d (expected %d) speed %d maxComms %d", p.max_recvs,
	      want_max_recvs(), p.speed, p.max_comms);
	if (want_unpack)
		CHECK(r, p.net_device_type == NCCL_NET_DEVICE_UNPACK &&
			 p.net_device_version == NCCL_NET_DEVICE_UNPACK_VERSION,
		      "netDeviceType %d version %d, expected UNPACK (1) version 7",
		      p.net_device_type, p.net_device_version);
	else
		CHECK(r, p.net_device_type == NCCL_NET_DEVICE_HOST &&
			 p.net_device_version == NCCL_NET_DEVICE_INVALID_VERSION,
		      "netDeviceType %d version %d", p.net_device_type,
		      p.net_device_version);
	/* NCCL allocates a device handle for each receive comm of an UNPACK
	 * device, of the type and version it found */
	r->dh = (nccl_dev_handle_t){ .type = p.net_device_type,
				      .version = p.net_device_version };
	r->dhp = want_unpack ? &r->dh : NULL;
	if (r->net.v >= 9)
		CHECK(r, p.vprops.ndevs == 1 && p.vprops.devs[0] == 0 &&
			 p.max_p2p_bytes == NCCL_MAX_NET_SIZE_BYTES &&
			 p.max_coll_bytes == NCCL_MAX_NET_SIZE_BYTES &&
			 p.force_flush == 0,
		      "vProps %d/%d maxP2pBytes %zu", p.vprops.ndevs,
		      p.vprops.devs[0], p.max_p2p_bytes);
	if (r->net.v == 11)
		CHECK(r, p.max_multi_request_size == 1, "maxMultiRequestSize %d",
		      p.max_multi_request_size);
	ret = r->net.v == 8 ? T8(&r->net)->get_properties(ndev, (void *)&p)
			    : T9(&r->net)->get_properties(ndev, (void *)&p);
	CHECK(r, ret == NCCL_ERR_INVALID_ARGUMENT,
	      "getProperties of device %d (of %d): %d", ndev, ndev, ret);
	if (r->net.v >= 9)
		CHECK(r, T9(&r->net)->make_vdevice == NULL,
		      "makeVDevice is set: NCCL would build virtual NICs");
	return 0;
}

/* ---- the transfer: N bytes each way, WINDOW requests in flight ------------- */

/* The stream pattern (tests/lib/pattern.h), from position pos + seed. */
#define PAT_PERIOD PATTERN_PERIOD_DEFAULT

static uint8_t pat(uint64_t pos, unsigned int seed)
{
	return pattern_byte(pos + seed, PAT_PERIOD);
}

/* The pattern repeats every period: copy it from a table of a few
 * periods instead of computing every byte.  main() fills it before the
 * ranks start: both read it, and a rank that found it half filled by the
 * other would send (or expect) zeros. */
#define PAT_CHUNK (PAT_PERIOD * 64)
static uint8_t pat_table[PAT_CHUNK + PAT_PERIOD];

static void pat_init(void)
{
	pattern_fill(pat_table, sizeof(pat_table), 0, PAT_PERIOD);
}

static const uint8_t *pat_at(uint64_t pos, unsigned int seed)
{
	return pat_table + (pos + seed) % PAT_PERIOD;
}

static void fill(char *dst, size_t len, uint64_t pos, unsigned int seed)
{
	for (size_t off = 0; off < len; off += PAT_CHUNK) {
		size_t n = len - off < PAT_CHUNK ? len - off : PAT_CHUNK;

		memcpy(dst + off, pat_at(pos + off, seed), n);
	}
}

/* Index of the first byte of p[0..len) off the pattern, or len. */
static size_t mismatch(const uint8_t *p, size_t len, uint64_t pos,
		       unsigned int seed)
{
	for (size_t off = 0; off < len; off += PAT_CHUNK) {
		size_t n = len - off < PAT_CHUNK ? len - off : PAT_CHUNK;

		if (memcmp(p + off, pat_at(pos + off, seed), n))
			for (size_t i = off; i < off + n; i++)
				if (p[i] != pat(pos + i, seed))
					return i;
	}
	return len;
}

/* Message k's size: zero, tiny, odd and large ones in turn. */
static size_t msg_size(unsigned int k)
{
	static const size_t sizes[] = {
		0, 1, 3, 4093, 65541, 1u << 20, (1u << 20) + 5, 4u << 20,
		3 * (1u << 20) + 7, 17, 8192, 2u << 20, MAX_MSG, 0, 4099,
	};

	return sizes[k % (sizeof(sizes) / sizeof(sizes[0]))];
}

struct dir {
	unsigned int next;	/* next message to post */
	unsigned int done;	/* messages completed */
	uint64_t pos;		/* stream offset of message next */
	void *req[WINDOW];
	unsigned int msg[WINDOW];
	uint64_t mpos[WINDOW];
	size_t msize[WINDOW];
	bool fin[WINDOW];	/* test() said done */
	int fsize[WINDOW];	/* and this size */
};

static size_t clipped(uint64_t pos, unsigned int k)
{
	size_t s = msg_size(k);

	return pos + s > total ? (size_t)(total - pos) : s;
}

/* Write the pattern into the send buffer at p: a udmabuf is written
 * bracketed with the dma-buf sync the NIC's reads need; GPU memory by a
 * copy from the host. */
static int put(struct rank *r, char *p, size_t size, uint64_t pos,
	       unsigned int seed)
{
	char tmp[65536];

	if (gpu_mode) {
		fill((char *)r->stage, size, pos, seed);
		CHECK(r, !cu.cuMemcpyHtoDAsync((uintptr_t)p, r->stage, size, cu.stream) &&
			 !gpu_sync(), "copying %zu bytes to the GPU", size);
		return 0;
	}
	if (!r->ubuf) {
		fill(p, size, pos, seed);
		return 0;
	}
	for (size_t off = 0; off < size; off += sizeof(tmp)) {
		size_t n = size - off < sizeof(tmp) ? size - off : sizeof(tmp);

		fill(tmp, n, pos + off, seed);
		CHECK(r, !devmemtcp_buf_write(r->ubuf, (uint64_t)(p - r->sbuf) + off, tmp, n),
		      "udmabuf write: %s", devmemtcp_buf_errmsg(r->ubuf));
	}
	return 0;
}

/* Fill len bytes at p (a receive buffer) with byte v. */
static int set_bytes(struct rank *r, char *p, int v, size_t len)
{
	if (!gpu_mode) {
		memset(p, v, len);
		return 0;
	}
	CHECK(r, !cu.cuMemsetD8Async((uintptr_t)p, (unsigned char)v, len, cu.stream) &&
		 !gpu_sync(), "cuMemsetD8Async of %zu bytes", len);
	return 0;
}

/* The len bytes at p as the host sees them (GPU memory: a copy in
 * r->stage); NULL when the copy failed. */
static const uint8_t *bytes_at(struct rank *r, const char *p, size_t len)
{
	if (!gpu_mode)
		return (const uint8_t *)p;
	if (cu.cuMemcpyDtoHAsync(r->stage, (uintptr_t)p, len, cu.stream) || gpu_sync()) {
		fprintf(stderr, "FAIL rank %d: copying %zu bytes from the GPU\n", r->id, len);
		return NULL;
	}
	return r->stage;
}

static int post_send(struct rank *r, struct dir *d, unsigned int seed)
{
	int slot = (int)(d->next % WINDOW), ret;
	size_t size = clipped(d->pos, d->next);
	char *p = r->sbuf + (size_t)slot * SLOT;

	if (d->req[slot])
		return 0;
	if (put(r, p, size, d->pos, seed))
		return -1;
	if (r->id == 0 && corrupt_msg == (long)d->next && size)
		p[size / 2] ^= 0x5a;
	ret = net_isend(&r->net, r->sc, p, size, r->id, r->smh, &d->req[slot]);
	CHECK(r, ret == NCCL_OK, "isend of message %u (%zu bytes): %d", d->next,
	      size, ret);
	if (!d->req[slot])
		return 0;	/* busy: post again later */
	d->msg[slot] = d->next++;
	d->msize[slot] = size;
	d->pos += size;
	return 0;
}

static int post_recv(struct rank *r, struct dir *d)
{
	int slot = (int)(d->next % WINDOW), ret, tag = 1 - r->id;
	size_t size = clipped(d->pos, d->next);
	/* post more than arrives, now and then: the size test reports wins */
	size_t cap = size + (d->next % 3 ? 0 : SLACK / 2);
	char *p = r->rbuf + (size_t)slot * SLOT;
	void *data = p;

	if (d->req[slot])
		return 0;
	if (set_bytes(r, p, 0xee, size + SLACK))
		return -1;
	ret = net_irecv(&r->net, r->rc, 1, &data, &cap, &tag, &r->rmh,
			&d->req[slot]);
	CHECK(r, ret == NCCL_OK, "irecv of message %u: %d", d->next, ret);
	if (d->req[slot] == (void *)NCCL_NET_OPTIONAL_RECV_COMPLETION)
		d->req[slot] = NULL;
	if (!d->req[slot])
		return 0;
	d->msg[slot] = d->next++;
	d->msize[slot] = size;
	d->mpos[slot] = d->pos;
	d->pos += size;
	return 0;
}

static int check_recv(struct rank *r, struct dir *d, int slot, int got,
		      unsigned int seed)
{
	size_t size = d->msize[slot];
	const uint8_t *p = bytes_at(r, r->rbuf + (size_t)slot * SLOT, size + SLACK);

	CHECK(r, p, "message %u: reading it back", d->msg[slot]);

	CHECK(r, got >= 0 && (size_t)got == size,
	      "message %u: test reports %d bytes, %zu were sent", d->msg[slot],
	      got, size);
	size_t i = mismatch(p, size, d->mpos[slot], seed);

	CHECK(r, i == size,
	      "message %u (%zu bytes) byte %zu (stream offset %" PRIu64 ") is %u, expected %u",
	      d->msg[slot], size, i, d->mpos[slot] + i, p[i],
	      pat(d->mpos[slot] + i, seed));
	for (i = size; i < size + SLACK; i++)
		CHECK(r, p[i] == 0xee, "message %u (%zu bytes): byte %zu after it was written",
		      d->msg[slot], size, i);
	return 0;
}

/*
 * What NCCL does once a receive is done: with an unpack queue its kernel
 * copies the slot's entries into the receive's buffer (here the driver's
 * copies, or memcpy on the fake driver), then the proxy calls
 * irecvConsumed, for every receive.  size: the buffer's, which no entry may
 * pass.
 */
static int consumed(struct rank *r, void *req, char *data, size_t size)
{
	int ret;

	if (r->dhp) {
		const struct nccl_unpack_handle *h = r->dh.handle;
		const struct nccl_unpack_meta *m = h->meta;
		unsigned int slot = r->head % NCCL_UNPACK_QUEUE_DEPTH;
		uint64_t cnt = __atomic_load_n(&m->cnt[slot], __ATOMIC_ACQUIRE);

		CHECK(r, cnt <= NCCL_UNPACK_SLOT_ENTRIES,
		      "receive %" PRIu64 ": %" PRIu64 " entries in its slot", r->head, cnt);
		for (uint64_t i = 0; i < cnt; i++) {
			const struct nccl_unpack_entry *e = &m->mem[slot][i];

			CHECK(r, e->len && e->dst_off + e->len <= size,
			      "receive %" PRIu64 " entry %" PRIu64 ": %u bytes to offset %" PRIu64 " of %zu",
			      r->head, i, e->len, e->dst_off, size);
			if (gpu_mode)
				CHECK(r, !cu.cuMemcpyDtoDAsync((uintptr_t)(data + e->dst_off),
							       (uintptr_t)h->bounce_buf + e->src_off,
							       e->len, cu.stream),
				      "cuMemcpyDtoDAsync");
			else
				memcpy(data + e->dst_off,
				       (const char *)h->bounce_buf + e->src_off, e->len);
			r->unpacked_bytes += e->len;
		}
		r->unpacked += cnt;
		r->head++;
		if (gpu_mode)
			CHECK(r, !gpu_sync(), "the unpack copies");
	}
	ret = CALL(&r->net, irecv_consumed, r->rc, 1, req);
	CHECK(r, ret == NCCL_OK, "irecvConsumed: %d", ret);
	return 0;
}

/* Test every request in flight once, and finish those done in posting
 * order: NCCL's proxy hands receives back (irecvConsumed) in that order. */
static int poll_dir(struct rank *r, struct dir *d, bool recv, unsigned int seed)
{
	for (unsigned int k = d->done; k != d->next; k++) {
		int s = (int)(k % WINDOW), done = 0, size = -1, ret;

		if (!d->req[s] || d->fin[s])
			continue;
		ret = CALL(&r->net, test, d->req[s], &done, &size);
		CHECK(r, ret == NCCL_OK, "test of %s %u: %d", recv ? "receive" : "send",
		      d->msg[s], ret);
		d->fin[s] = done;
		d->fsize[s] = size;
	}
	while (d->done != d->next && d->fin[d->done % WINDOW]) {
		int s = (int)(d->done % WINDOW);

		if (recv && consumed(r, d->req[s], r->rbuf + (size_t)s * SLOT,
				     d->msize[s] + (d->msg[s] % 3 ? 0 : SLACK / 2)))
			return -1;
		d->req[s] = NULL;
		d->fin[s] = false;
		d->done++;
		if (recv && check_recv(r, d, s, d->fsize[s], seed))
			return -1;
		if (!recv)
			CHECK(r, (size_t)d->fsize[s] == d->msize[s], "send %u: test says %d bytes of %zu",
			      d->msg[s], d->fsize[s], d->msize[s]);
	}
	return 0;
}

static unsigned int messages(void)
{
	uint64_t pos = 0;
	unsigned int k = 0;

	while (pos < total)
		pos += clipped(pos, k++);
	return k;
}

static int transfer(struct rank *r)
{
	unsigned int seed_out = r->id ? 101 : 0, seed_in = r->id ? 0 : 101;
	unsigned int n = messages();
	struct dir s = { 0 }, v = { 0 };
	double t0 = now_s(), end = t0 + TIMEOUT_S;
	unsigned int seen = 0;

	while (s.done < n || v.done < n) {
		while (s.next < n && !s.req[s.next % WINDOW] && s.next - s.done < WINDOW) {
			unsigned int before = s.next;

			if (post_send(r, &s, seed_out))
				return -1;
			if (s.next == before)
				break;
		}
		while (v.next < n && !v.req[v.next % WINDOW] && v.next - v.done < WINDOW) {
			unsigned int before = v.next;

			if (post_recv(r, &v))
				return -1;
			if (v.next == before)
				break;
		}
		if (poll_dir(r, &s, false, seed_out) || poll_dir(r, &v, true, seed_in))
			return -1;
		if (s.done + v.done != seen) {
			seen = s.done + v.done;
			end = now_s() + TIMEOUT_S;
		}
		CHECK(r, !peer_gone(r), "the peer stopped (see its message) with %u/%u sent, %u/%u received",
		      s.done, n, v.done, n);
		CHECK(r, now_s() < end, "stuck: nothing completed for %d s, %u/%u sent, %u/%u received",
		      TIMEOUT_S, s.done, n, v.done, n);
	}
	printf("rank %d v%d: %" PRIu64 " bytes each way in %u messages, %.0f MB/s per direction with the pattern fill and check\n",
	       r->id, r->net.v, total, n, (double)total / (now_s() - t0) / 1e6);
	return 0;
}

/* What NCCL may call once a receive is done: iflush (for GPU memory; it
 * must complete), irecvConsumed and getDeviceMr (for device offload, which
 * this plugin does not do: success, no device handle). */
static int after_receive(struct rank *r, void *req, void **data, int *sizes,
			 void **mhs)
{
	void *flush = NULL, *dptr = (void *)1;
	int done = 0, ret;

	ret = CALL(&r->net, iflush, r->rc, 4, data, sizes, mhs, &flush);
	CHECK(r, ret == NCCL_OK && flush, "iflush: %d, request %p", ret, flush);
	ret = CALL(&r->net, test, flush, &done, NULL);
	CHECK(r, ret == NCCL_OK && done, "test of the flush: %d, done %d", ret, done);
	ret = CALL(&r->net, irecv_consumed, r->rc, 4, req);
	CHECK(r, ret == NCCL_OK, "irecvConsumed: %d", ret);
	ret = CALL(&r->net, get_device_mr, r->rc, r->rmh, &dptr);
	CHECK(r, ret == NCCL_OK && !dptr, "getDeviceMr: %d, %p", ret, dptr);
	return 0;
}

/* ---- a grouped receive: 4 buffers, messages matched by tag ---------------- */

/* maxRecvs: 1 with device unpack, else NCCL_DEVMEMTCP_MAX_RECVS (8) */
static int want_max_recvs(void)
{
	const char *v = getenv("NCCL_DEVMEMTCP_MAX_RECVS");

	return want_unpack ? 1 : v && *v ? atoi(v) : 8;
}

static int grouped(struct rank *r)
{
	static const int send_tags[4] = { 13, 11, 12, 10 };
	static const size_t send_sizes[4] = { 100, 0, 70001, 5 };
	_Static_assert(100 + 70001 + 5 == GROUPED_BYTES, "grouped bytes");
	int tags[4] = { 10, 11, 12, 13 }, sizes_out[4] = { -1, -1, -1, -1 };
	size_t caps[4] = { 50, 10, 80000, 200 };
	void *data[4], *mhs[4], *req = NULL;
	double end = now_s() + TIMEOUT_S;
	int done = 0, ret;

	if (want_max_recvs() < 4) {
		/* maxRecvs is 1 with unpack, or NCCL_DEVMEMTCP_MAX_RECVS: a
		 * grouped receive of 4 is refused, nothing queued */
		if (r->id == 1) {
			for (int i = 0; i < 4; i++) {
				data[i] = r->rbuf + (size_t)i * SLOT;
				mhs[i] = r->rmh;
			}
			ret = net_irecv(&r->net, r->rc, 4, data, caps, tags, mhs, &req);
			CHECK(r, ret == NCCL_ERR_INTERNAL &&
				 (!req || req == (void *)NCCL_NET_OPTIONAL_RECV_COMPLETION),
			      "a grouped receive of 4 on a comm with maxRecvs %d: %d, request %p",
			      want_max_recvs(), ret, req);
		}
		return barrier(r);
	}
	if (r->id == 0) {
		void *reqs[4] = { 0 };
		r->extra_tx += GROUPED_BYTES;

		for (int i = 0; i < 4; i++) {
			char *p = r->sbuf + (size_t)i * SLOT;

			if (put(r, p, send_sizes[i], (uint64_t)send_tags[i] << 20, 7))
				return -1;
			while (!reqs[i]) {
				ret = net_isend(&r->net, r->sc, p, send_sizes[i],
						send_tags[i], r->smh, &reqs[i]);
				CHECK(r, ret == NCCL_OK, "isend tag %d: %d", send_tags[i], ret);
			}
		}
		for (int i = 0; i < 4; i++) {
			for (done = 0; !done;) {
				ret = CALL(&r->net, test, reqs[i], &done, NULL);
				CHECK(r, ret == NCCL_OK, "test: %d", ret);
				if (still_waiting(r, end, "sending tagged messages"))
					return -1;
			}
		}
		return barrier(r);
	}
	r->extra_rx += GROUPED_BYTES;
	for (int i = 0; i < 4; i++) {
		data[i] = r->rbuf + (size_t)i * SLOT;
		mhs[i] = r->rmh;
		if (set_bytes(r, data[i], 0xee, caps[i] + SLACK))
			return -1;
	}
	while (!req) {
		ret = net_irecv(&r->net, r->rc, 4, data, caps, tags, mhs, &req);
		CHECK(r, ret == NCCL_OK, "irecv of 4: %d", ret);
		if (req == (void *)NCCL_NET_OPTIONAL_RECV_COMPLETION)
			req = NULL;
	}
	while (!done) {
		ret = CALL(&r->net, test, req, &done, sizes_out);
		CHECK(r, ret == NCCL_OK, "test: %d", ret);
		if (still_waiting(r, end, "receiving tagged messages"))
			return -1;
	}
	for (int i = 0; i < 4; i++) {
		const uint8_t *p;
		int k = 0;

		while (send_tags[k] != tags[i])
			k++;
		p = bytes_at(r, data[i], send_sizes[k] + 1);
		CHECK(r, p, "tag %d: reading it back", tags[i]);

		CHECK(r, sizes_out[i] == (int)send_sizes[k],
		      "buffer with tag %d: %d bytes, the message with that tag had %zu",
		      tags[i], sizes_out[i], send_sizes[k]);
		CHECK(r, mismatch(p, send_sizes[k], (uint64_t)send_tags[k] << 20, 7) == send_sizes[k],
		      "tag %d: bytes off the pattern", tags[i]);
		CHECK(r, p[send_sizes[k]] == 0xee, "tag %d: written past its size",
		      tags[i]);
	}
	return after_receive(r, req, data, sizes_out, mhs) || barrier(r) ? -1 : 0;
}

/* ---- the unpack queue's depth (--unpack) ---------------------------------- */

#define DEPTH_MSGS (NCCL_UNPACK_QUEUE_DEPTH + 1)
#define DEPTH_SIZE 1000
#define DEPTH_STRIDE 1024

/* Wait until test() says request req is done. */
static int wait_done(struct rank *r, void *req, const char *what)
{
	double end = now_s() + TIMEOUT_S;
	int done = 0, size = -1, ret;

	while (!done) {
		ret = CALL(&r->net, test, req, &done, &size);
		CHECK(r, ret == NCCL_OK, "%s: test: %d", what, ret);
		if (!done && still_waiting(r, end, what))
			return -1;
	}
	CHECK(r, size == DEPTH_SIZE, "%s: %d bytes, %d were sent", what, size, DEPTH_SIZE);
	return 0;
}

/*
 * A receive holds its slot of the unpack queue until NCCL consumed it:
 * with NCCL_UNPACK_QUEUE_DEPTH receives done and not consumed, irecv
 * returns no request; irecvConsumed out of order is refused; once the
 * oldest is consumed the next receive is taken.  Every byte checked.
 */
static int unpack_depth(struct rank *r)
{
	void *req[DEPTH_MSGS] = { 0 };
	int ret;

	if (r->id == 0) {
		r->extra_tx += DEPTH_MSGS * DEPTH_SIZE;
		for (int k = 0; k < DEPTH_MSGS; k++) {
			char *p = r->sbuf + (size_t)k * DEPTH_STRIDE;

			if (put(r, p, DEPTH_SIZE, (uint64_t)k << 12, 9))
				return -1;
			while (!req[k]) {
				ret = net_isend(&r->net, r->sc, p, DEPTH_SIZE, 0, r->smh, &req[k]);
				CHECK(r, ret == NCCL_OK, "isend %d: %d", k, ret);
			}
		}
		for (int k = 0; k < DEPTH_MSGS; k++)
			if (wait_done(r, req[k], "sending"))
				return -1;
		return barrier(r);
	}
	r->extra_rx += DEPTH_MSGS * DEPTH_SIZE;
	for (int k = 0; k < DEPTH_MSGS; k++) {
		void *data = r->rbuf + (size_t)k * DEPTH_STRIDE;
		size_t cap = DEPTH_SIZE;
		int tag = 0;

		if (set_bytes(r, data, 0xee, DEPTH_STRIDE))
			return -1;
		ret = net_irecv(&r->net, r->rc, 1, &data, &cap, &tag, &r->rmh, &req[k]);
		CHECK(r, ret == NCCL_OK, "irecv %d: %d", k, ret);
		if (req[k] == (void *)NCCL_NET_OPTIONAL_RECV_COMPLETION)
			req[k] = NULL;
		if (k < NCCL_UNPACK_QUEUE_DEPTH) {
			CHECK(r, req[k], "irecv %d: no request with %d receives unconsumed",
			      k, k);
			if (wait_done(r, req[k], "receiving"))
				return -1;
		} else {
			CHECK(r, !req[k], "irecv %d: a request with %d receives done and not consumed",
			      k, NCCL_UNPACK_QUEUE_DEPTH);
		}
	}
	ret = CALL(&r->net, irecv_consumed, r->rc, 1, req[1]);
	CHECK(r, ret == NCCL_ERR_INTERNAL && log_count(0, "is the oldest NCCL has not consumed", NULL),
	      "irecvConsumed of receive 1 before receive 0: %d", ret);
	ret = CALL(&r->net, irecv_consumed, r->rc, 1, r->rbuf);
	CHECK(r, ret == NCCL_ERR_INTERNAL, "irecvConsumed of a pointer that is no request: %d", ret);
	for (int k = 0; k < DEPTH_MSGS; k++) {
		if (k == NCCL_UNPACK_QUEUE_DEPTH) {
			void *data = r->rbuf + (size_t)k * DEPTH_STRIDE;
			size_t cap = DEPTH_SIZE;
			int tag = 0;

			ret = net_irecv(&r->net, r->rc, 1, &data, &cap, &tag, &r->rmh, &req[k]);
			CHECK(r, ret == NCCL_OK && req[k] &&
				 req[k] != (void *)NCCL_NET_OPTIONAL_RECV_COMPLETION,
			      "irecv %d once receive 0 was consumed: %d, request %p", k, ret, req[k]);
			if (wait_done(r, req[k], "receiving"))
				return -1;
		}
		if (consumed(r, req[k], r->rbuf + (size_t)k * DEPTH_STRIDE, DEPTH_SIZE))
			return -1;
	}
	for (int k = 0; k < DEPTH_MSGS; k++) {
		const uint8_t *p = bytes_at(r, r->rbuf + (size_t)k * DEPTH_STRIDE, DEPTH_STRIDE);
		size_t i;

		CHECK(r, p, "receive %d: reading it back", k);
		i = mismatch(p, DEPTH_SIZE, (uint64_t)k << 12, 9);
		CHECK(r, i == DEPTH_SIZE, "receive %d: byte %zu is %u, expected %u", k, i,
		      p[i], pat(((uint64_t)k << 12) + i, 9));
		CHECK(r, p[DEPTH_SIZE] == 0xee, "receive %d: written past its size", k);
	}
	return barrier(r);
}

/* ---- error paths ------------------------------------------------------------ */

static int wait_error(struct rank *r, void *req, int want, const char *what)
{
	double end = now_s() + TIMEOUT_S;
	int done = 0, ret = NCCL_OK;

	while (ret == NCCL_OK && !done) {
		if (still_waiting(r, end, what))
			return -1;
		ret = CALL(&r->net, test, req, &done, NULL);
	}
	CHECK(r, ret == want, "%s: test returned %d (done %d), expected %d", what,
	      ret, done, want);
	return 0;
}

/* A receive of one cap-byte buffer that fails with want, from irecv itself
 * or from testing its request; what names it.  0 or -1. */
static int irecv_fails(struct rank *r, size_t cap, int want, const char *what)
{
	void *req, *data = r->rbuf;
	int tag = 1 - r->id, ret;

	ret = net_irecv(&r->net, r->rc, 1, &data, &cap, &tag, &r->rmh, &req);
	if (ret == NCCL_OK && req != (void *)NCCL_NET_OPTIONAL_RECV_COMPLETION && req)
		ret = wait_error(r, req, want, what) ? -1 : want;
	CHECK(r, ret == want, "%s: %d, expected %d", what, ret,
	      want);
	return 0;
}

static int bad_handle(struct rank *r)
{
	char h[NCCL_NET_HANDLE_MAXSIZE];
	uint32_t zeros[16] = { 0 };
	void *sc = (void *)1;
	int done = 7, ret;

	memset(h, 0, sizeof(h));
	ret = net_connect(&r->net, r->dev, h, &sc);
	CHECK(r, ret != NCCL_OK && sc == NULL,
	      "connect with a zeroed handle: %d, sendComm %p", ret, sc);
	CHECK(r, log_count(0, "was not made by listen", NULL) > 0,
	      "no message says the handle is not ours");
	ret = CALL(&r->net, test, zeros, &done, NULL);
	CHECK(r, ret == NCCL_ERR_INTERNAL, "test of a non-request: %d", ret);
	return 0;
}

/* Rank 0 of the closing tests: close the send comm, say so with c, wait
 * until the peer has seen it, then close the rest. */
static int close_first(struct rank *r, char c)
{
	if (close_send(r) || sync_send(r, &c, 1) || sync_recv(r, &c, 1))
		return -1;
	return close_recv(r);
}

/* Rank 1 of the closing tests, once done: close both comms and say so. */
static int close_after(struct rank *r, char c)
{
	if (close_send(r) || close_recv(r))
		return -1;
	return sync_send(r, &c, 1);
}

/* The peer closes with a receive posted and nothing sent. */
static int peer_closes(struct rank *r)
{
	char c = 'c';

	if (open_pair(r))
		return -1;
	if (r->id == 0)
		return close_first(r, c);
	if (sync_recv(r, &c, 1))
		return -1;
	if (irecv_fails(r, 4096, NCCL_ERR_REMOTE, "receive from a closed peer"))
		return -1;
	CHECK(r, log_count(0, "closed by the peer", NULL) > 0,
	      "no message says the peer closed");
	return close_after(r, c);
}

/* The peer closes in the middle of a message. */
static int peer_dies_midway(struct rank *r)
{
	void *req = NULL;
	/* more than loopback's socket buffers hold */
	size_t cap = (size_t)WINDOW * SLOT, mark;
	int ret, done = 0;
	char c = 'm';

	if (open_pair(r))
		return -1;
	if (r->id == 0) {
		fill(r->sbuf, cap, 0, 3);
		ret = net_isend(&r->net, r->sc, r->sbuf, cap, r->id, r->smh, &req);
		CHECK(r, ret == NCCL_OK && req, "isend: %d", ret);
		for (int i = 0; i < 100 && !done; i++)
			CHECK(r, CALL(&r->net, test, req, &done, NULL) == NCCL_OK, "test");
		CHECK(r, !done, "%zu bytes went out with nobody reading", cap);
		/* deregMr of the memory the send still uses (an abort): the
		 * comm fails, so that its helper thread never reads the freed
		 * registration again */
		mark = log_mark();
		CHECK(r, CALL(&r->net, dereg_mr, r->sc, r->smh) == NCCL_OK, "deregMr send");
		r->smh = NULL;
		CHECK(r, log_count(mark, "deregMr of memory that a send not yet done still uses: the comm stops", NULL) == 1,
		      "deregMr under a send not yet done did not fail the comm");
		ret = CALL(&r->net, test, req, &done, NULL);
		CHECK(r, ret == NCCL_ERR_INVALID_USAGE && !done,
		      "test after deregMr under the send: %d, done %d", ret, done);
		return close_first(r, c);
	}
	if (sync_recv(r, &c, 1))
		return -1;
	if (irecv_fails(r, cap, NCCL_ERR_REMOTE, "message cut short by the peer"))
		return -1;
	return close_after(r, c);
}

/* A message larger than the receive posted for it. */
static int too_large(struct rank *r)
{
	void *req = NULL;
	int ret, done = 0;

	if (open_pair(r))
		return -1;
	if (r->id == 0) {
		ret = net_isend(&r->net, r->sc, r->sbuf, 1000, r->id, r->smh, &req);
		CHECK(r, ret == NCCL_OK && req, "isend: %d", ret);
		while (!done)
			CHECK(r, CALL(&r->net, test, req, &done, NULL) == NCCL_OK, "test");
	} else {
		if (irecv_fails(r, 10, NCCL_ERR_INVALID_USAGE, "1000 bytes into 10"))
			return -1;
		CHECK(r, log_count(0, "does not fit the 10-byte receive buffer", NULL) > 0,
		      "no message names the sizes");
	}
	return close_pair(r);
}

/* The ports of [lo, hi] that a listener on 127.0.0.1 could take now, as
 * the plugin binds them (SO_REUSEADDR): the others are another process's. */
static unsigned int ports_free(unsigned int lo, unsigned int hi)
{
	unsigned int n = 0;
	int one = 1;

	for (unsigned int p = lo; p <= hi; p++) {
		struct sockaddr_in sa = { .sin_family = AF_INET,
					  .sin_port = htons((uint16_t)p),
					  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

		if (fd < 0)
			continue;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		n += !bind(fd, (struct sockaddr *)&sa, sizeof(sa));
		close(fd);
	}
	return n;
}

/*
 * This program's listen(), which the plugin's calls reach (the program
 * exports its symbols).  Armed (steal_lo), the first listen of a socket
 * bound to a port of [steal_lo, steal_hi] finds another socket listening
 * there already, as when two ranks bind one port at once: SO_REUSEADDR
 * lets both bind before either listens, and the second listen fails
 * with EADDRINUSE.
 */
static unsigned int steal_lo, steal_hi, stolen_port;
static int thief_fd = -1;
/* the ranks are threads: the shim's state under steal_lock */
static pthread_mutex_t steal_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t real_once = PTHREAD_ONCE_INIT;
static int (*real_listen)(int, int);

static void real_listen_find(void)
{
	real_listen = (int (*)(int, int))dlsym(RTLD_NEXT, "listen");
}

static void steal_arm(unsigned int lo, unsigned int hi)
{
	pthread_mutex_lock(&steal_lock);
	steal_lo = lo;
	steal_hi = hi;
	pthread_mutex_unlock(&steal_lock);
}

int listen(int fd, int backlog)
{
	struct sockaddr_in sa;
	socklen_t len = sizeof(sa);
	int one = 1;

	pthread_once(&real_once, real_listen_find);
	pthread_mutex_lock(&steal_lock);
	if (steal_lo && thief_fd < 0 &&
	    !getsockname(fd, (struct sockaddr *)&sa, &len) &&
	    sa.sin_family == AF_INET && ntohs(sa.sin_port) >= steal_lo &&
	    ntohs(sa.sin_port) <= steal_hi) {
		thief_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (thief_fd >= 0) {
			setsockopt(thief_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
			if (!bind(thief_fd, (struct sockaddr *)&sa, len) &&
			    !real_listen(thief_fd, 16))
				stolen_port = ntohs(sa.sin_port);
		}
	}
	pthread_mutex_unlock(&steal_lock);
	return real_listen(fd, backlog);
}

/* With NCCL_DEVMEMTCP_PORT_RANGE, rank 0 listens until every port of the
 * range is taken: the next listen fails, saying so.  Ports of the range
 * that another process on this machine holds are not counted: the
 * listens get the others.  The first port the listens try is taken
 * between their bind and their listen (the listen shim above): they go
 * on to the next, and count one port fewer. */
static int ports_taken(struct rank *r)
{
	static char h[64][NCCL_NET_HANDLE_MAXSIZE];
	void *lc[64];
	unsigned int lo, hi, n = 0, free_ports, steal, stolen;
	int ret = NCCL_OK, thief;

	port_range(&lo, &hi);
	if (r->id || !lo || hi - lo >= 63)
		return 0;
	free_ports = ports_free(lo, hi);
	steal = free_ports > 0;
	steal_arm(steal ? lo : 0, hi);
	while (ret == NCCL_OK && n < 64) {
		lc[n] = NULL;
		ret = net_listen(&r->net, r->dev, h[n], &lc[n]);
		n += ret == NCCL_OK;
	}
	steal_arm(0, 0);
	pthread_mutex_lock(&steal_lock);
	stolen = stolen_port;
	thief = thief_fd;
	thief_fd = -1;
	pthread_mutex_unlock(&steal_lock);
	CHECK(r, !steal || (stolen >= lo && stolen <= hi),
	      "the listen shim took no port of %u-%u", lo, hi);
	CHECK(r, ret == NCCL_ERR_SYSTEM && n == free_ports - steal &&
		 log_count(0, "every port of NCCL_DEVMEMTCP_PORT_RANGE", "is in use: widen the range"),
	      "listen %u of a range of %u ports, %u of them free, %u taken between bind and listen: %d",
	      n + 1, hi - lo + 1, free_ports, steal, ret);
	for (unsigned int i = 0; i < n; i++) {
		CHECK(r, handle_data_port(h[i]) >= lo && handle_data_port(h[i]) <= hi &&
			 handle_data_port(h[i]) != stolen,
		      "listen %u: data port %u (range %u-%u, %u taken)", i,
		      handle_data_port(h[i]), lo, hi, stolen);
		CHECK(r, CALL(&r->net, close_listen, lc[i]) == NCCL_OK, "closeListen");
	}
	if (thief >= 0)
		close(thief);
	return 0;
}

/* ---- one rank, one version ---------------------------------------------------- */

static int regs(struct rank *r)
{
	struct net *n = &r->net;
	/* --cuda: the buffers stand for GPU memory (the fake libcuda) */
	int type = cuda_mode || gpu_mode ? NCCL_PTR_CUDA : NCCL_PTR_HOST;
	int ret;

	if (r->ubuf) {
		ret = CALL(n, reg_mr_dmabuf, r->sc, r->sbuf, (size_t)WINDOW * SLOT,
			   type, 0, devmemtcp_buf_fd(r->ubuf), &r->smh);
		CHECK(r, ret == NCCL_OK, "regMrDmaBuf: %d", ret);
	} else if (n->v == 9 || n->v == 11) {
		/* without devmem a dma-buf registration is host memory like
		 * any other; the fd (a memfd here) is not used */
		int fd = memfd_create("nccl-test", MFD_CLOEXEC);

		CHECK(r, fd >= 0, "memfd_create: %s", strerror(errno));
		ret = CALL(n, reg_mr_dmabuf, r->sc, r->sbuf, (size_t)WINDOW * SLOT,
			   type, 0, fd, &r->smh);
		close(fd);	/* as NCCL does after registering */
		CHECK(r, ret == NCCL_OK, "regMrDmaBuf: %d", ret);
	} else {
		ret = CALL(n, reg_mr, r->sc, r->sbuf, (size_t)WINDOW * SLOT,
			   type, &r->smh);
		CHECK(r, ret == NCCL_OK, "regMr send: %d", ret);
	}
	ret = CALL(n, reg_mr, r->rc, r->rbuf, (size_t)WINDOW * SLOT,
		   type, &r->rmh);
	CHECK(r, ret == NCCL_OK, "regMr recv: %d", ret);
	return 0;
}

static bool kernel_has_tx(void)
{
	struct utsname u;
	int maj = 0, min = 0;

	uname(&u);
	sscanf(u.release, "%d.%d", &maj, &min);
	return maj > 6 || (maj == 6 && min >= 16);
}

/* --cuda without devmem: every byte of either comm went through the
 * plugin's host copy (the fake libcuda's memcpy). */
static int check_bounce(struct rank *r, const void *sc, const void *rc,
			uint64_t received)
{
	uint64_t sent = total + r->extra_tx;
	uint64_t rx = close_stat(rc, "copied through host memory");
	uint64_t tx = close_stat(sc, "copied through host memory");

	CHECK(r, rx == received && tx == sent,
	      "%" PRIu64 " of %" PRIu64 " bytes received and %" PRIu64 " of %" PRIu64 " sent were copied through host memory",
	      rx, received, tx, sent);
	return 0;
}

static bool env_is(const char *name, const char *value)
{
	const char *v = getenv(name);

	return v && !strcmp(v, value);
}

/* A number with an optional K or M suffix, as the plugin reads it; 0 unset */
static uint64_t env_size(const char *name)
{
	const char *v = getenv(name);
	char *end;
	uint64_t n;

	if (!v || !*v)
		return 0;
	n = strtoull(v, &end, 0);
	if (*end == 'K' || *end == 'k')
		n <<= 10;
	else if (*end == 'M' || *end == 'm')
		n <<= 20;
	return n;
}

/* What NCCL_DEVMEMTCP_NQUEUES and NCCL_DEVMEMTCP_LINEAR_SIZE did: the NIC's
 * setup line names the queues; no devmem receive call took more than the
 * linear size, and with a small one set (below a message) some took all. */
static int check_env_rx(struct rank *r, const void *rc)
{
	uint64_t nq = env_size("NCCL_DEVMEMTCP_NQUEUES");
	uint64_t lin = env_size("NCCL_DEVMEMTCP_LINEAR_SIZE");
	uint64_t max_call = close_stat(rc, "bytes at most per devmem receive call");
	char want[64];

	snprintf(want, sizeof(want), "devmem RX set up: %" PRIu64 " queue%s from",
		 nq ? nq : 1, nq > 1 ? "s" : "");
	CHECK(r, log_count(0, want, NULL) >= 1 &&
		 log_count(0, want, NULL) == log_count(0, "devmem RX set up", NULL),
	      "no \"%s\" line (NCCL_DEVMEMTCP_NQUEUES=%" PRIu64 ")", want, nq);
	CHECK(r, lin ? max_call == lin : max_call > 0 && max_call <= (1u << 20),
	      "a devmem receive call took up to %" PRIu64 " bytes; NCCL_DEVMEMTCP_LINEAR_SIZE %" PRIu64 " (0: default 1M)",
	      max_call, lin);
	if (nq || lin)
		printf("rank %d: %" PRIu64 " devmem queue(s), %" PRIu64 " bytes at most per receive call\n",
		       r->id, nq ? nq : 1, max_call);
	return 0;
}

static int check_tx(struct rank *r, size_t mark, const void *sc, uint64_t tx_dm);

/* --gpu: where the devmem bytes bound for the GPU receive buffers went.
 * Every one is unpacked by NCCL's kernel (--unpack: as many as the queue
 * can take), gathered by the plugin, or -- only when the library has no
 * gather kernels (--no-gather) -- copied through host memory, which the
 * plugin says once per process, naming the fix. */
static int check_gpu_rx(struct rank *r, const void *rc, uint64_t rx_dm)
{
	uint64_t unp = close_stat(rc, "unpacked by NCCL's kernel");
	uint64_t gat = close_stat(rc, "gathered by the plugin");
	uint64_t cop = close_stat(rc, "copied through host memory");
	int said = log_count(0, "devmem RX: this libdevmemtcp has no gather kernels", NULL);

	if (want_unpack)
		printf("rank %d: %" PRIu64 " bytes unpacked by NCCL's kernel (here: the harness, %" PRIu64 " entries), %" PRIu64 " gathered by the plugin\n",
		       r->id, unp, r->unpacked, gat);
	if (no_gather)
		printf("rank %d: %" PRIu64 " bytes copied through host memory (no gather kernels), %" PRIu64 " gathered\n",
		       r->id, cop, gat);
	CHECK(r, unp + gat + cop == rx_dm,
	      "unpacked %" PRIu64 " + gathered %" PRIu64 " + copied %" PRIu64 " of %" PRIu64 " devmem bytes",
	      unp, gat, cop, rx_dm);
	/* what the queue held is what the kernel copied */
	if (want_unpack)
		CHECK(r, unp > 0 && unp == r->unpacked_bytes,
		      "unpacked %" PRIu64 "; the queue's entries held %" PRIu64,
		      unp, r->unpacked_bytes);
	else
		CHECK(r, unp == 0, "%" PRIu64 " bytes unpacked without device unpack", unp);
	if (!no_gather) {
		CHECK(r, cop == 0 && said == 0,
		      "%" PRIu64 " bytes copied through host memory, %d 'no gather kernels' lines, with the gather kernels",
		      cop, said);
		return 0;
	}
	CHECK(r, gat == 0, "%" PRIu64 " bytes gathered without the gather kernels", gat);
	CHECK(r, want_unpack || cop == rx_dm,
	      "%" PRIu64 " of %" PRIu64 " devmem bytes copied through host memory without the gather kernels",
	      cop, rx_dm);
	CHECK(r, said == 1 &&
		 log_count(0, "devmem RX: this libdevmemtcp has no gather kernels",
			   "rebuild libdevmemtcp with -Dcuda=enabled") == 1,
	      "the plugin said %d times (once expected) that the library has no gather kernels, with the fix",
	      said);
	return 0;
}

/* The plugin's own account of the paths (its NCCL_DEBUG=INFO lines). */
static int check_paths(struct rank *r, size_t mark, const void *sc,
		       const void *rc)
{
	uint64_t rx_dm = close_stat(rc, "through devmem RX");
	uint64_t rx_bytes = close_stat(rc, "bytes,");
	uint64_t tx_dm = close_stat(sc, "through devmem TX");
	/* and the bytes of the tests after the transfer */
	uint64_t want = total + r->extra_rx;

	CHECK(r, rx_bytes == want, "the recv comm's close line says %" PRIu64 " bytes, not %" PRIu64,
	      rx_bytes, want);
	if (!want_devmem) {
		CHECK(r, log_count(mark, "send comm", "plain TCP") >= 1 &&
			 log_count(mark, "recv comm", "plain TCP") >= 1,
		      "the plugin did not log the path (plain TCP) of both comms");
		CHECK(r, rx_dm == 0 && tx_dm == 0, "devmem bytes without devmem");
		if (cuda_mode)
			return check_bounce(r, sc, rc, want);
		return 0;
	}
	if (env_is("NCCL_DEVMEMTCP_RX", "0")) {
		CHECK(r, log_count(mark, "recv comm", "plain TCP (NCCL_DEVMEMTCP_RX=0)") >= 1 &&
			 log_count(mark, "recv comm", "devmem RX (binding") == 0,
		      "NCCL_DEVMEMTCP_RX=0: the recv comm did not log plain TCP (NCCL_DEVMEMTCP_RX=0)");
		CHECK(r, log_count(0, "devmem RX set up", NULL) == 0,
		      "NCCL_DEVMEMTCP_RX=0 but the NIC was set up for devmem RX");
		CHECK(r, rx_dm == 0, "NCCL_DEVMEMTCP_RX=0 but %" PRIu64 " bytes came through devmem RX",
		      rx_dm);
		printf("rank %d: received %" PRIu64 " bytes with plain TCP (NCCL_DEVMEMTCP_RX=0)\n",
		       r->id, rx_bytes);
		return check_tx(r, mark, sc, tx_dm);
	}
	CHECK(r, log_count(mark, "recv comm", "devmem RX (binding") >= 1,
	      "no recv comm logged devmem RX");
	if (check_env_rx(r, rc))
		return -1;
	if (r->id == 1 && rank1_uid >= 0)
		CHECK(r, log_count(0, "devmem possible, set up through devmemtcp-broker", NULL) == 1,
		      "the unprivileged rank did not say it sets up through devmemtcp-broker");
	CHECK(r, log_count(mark, "recv comm", gpu_mode ? "GPU memory)" : "host memory)") >= 1,
	      "no recv comm received into %s memory", gpu_mode ? "GPU" : "host");
	printf("rank %d: received %" PRIu64 " bytes, %" PRIu64 " through devmem RX, %" PRIu64 " as plain data; sent %" PRIu64 " through devmem TX\n",
	       r->id, rx_bytes, rx_dm, close_stat(rc, "arrived as plain data"),
	       tx_dm);
	/* the data port is steered before the peer connects: every payload
	 * byte lands in the bound buffer */
	CHECK(r, rx_dm == want,
	      "%" PRIu64 " of %" PRIu64 " bytes came through devmem RX",
	      rx_dm, want);
	if (gpu_mode && check_gpu_rx(r, rc, rx_dm))
		return -1;
	return check_tx(r, mark, sc, tx_dm);
}

/* devmem TX of the dma-buf registrations (--dmabuf-tx) */
static int check_tx(struct rank *r, size_t mark, const void *sc, uint64_t tx_dm)
{
	if (!dmabuf_tx)
		return 0;
	if (env_is("NCCL_DEVMEMTCP_TX", "0")) {
		CHECK(r, log_count(mark, "send comm", "plain TCP (NCCL_DEVMEMTCP_TX=0)") >= 1 &&
			 log_count(mark, "send comm", ": devmem TX") == 0,
		      "NCCL_DEVMEMTCP_TX=0: the send comm did not log plain TCP (NCCL_DEVMEMTCP_TX=0)");
		CHECK(r, tx_dm == 0, "NCCL_DEVMEMTCP_TX=0 but %" PRIu64 " bytes went out through devmem TX",
		      tx_dm);
		printf("rank %d: sent with plain TCP (NCCL_DEVMEMTCP_TX=0)\n", r->id);
		return 0;
	}
	if (kernel_has_tx()) {
		CHECK(r, log_count(mark, "send comm", ": devmem TX") >= 1,
		      "no send comm logged devmem TX");
		uint64_t sent = total + r->extra_tx;

		CHECK(r, tx_dm == sent, "%" PRIu64 " of %" PRIu64 " bytes went out through devmem TX",
		      tx_dm, sent);
	} else {
		CHECK(r, log_count(mark, "devmem TX from the dma-buf registration", "needs Linux 6.16") >= 1,
		      "the fallback to plain TCP does not say devmem TX needs Linux 6.16");
		CHECK(r, tx_dm == 0, "devmem TX bytes on a kernel without it");
	}
	return 0;
}

static int run_version(struct rank *r, int v, void *lib)
{
	char sym[32];
	size_t mark;
	void *sc, *rc;

	snprintf(sym, sizeof(sym), "ncclNetPlugin_v%d", v);
	r->net = (struct net){ .v = v, .table = dlsym(lib, sym) };
	CHECK(r, r->net.table, "%s is not exported", sym);
	CHECK(r, net_init(&r->net) == NCCL_OK, "init");
	if (v == 11) {
		struct nccl_net_attr attr = { { -1, -1, -1, -1 }, { -1, -1, -1, -1 },
					      UINT32_MAX, UINT32_MAX, UINT32_MAX };

		CHECK(r, T11(&r->net)->set_net_attr(r->net.ctx, &attr) == NCCL_OK,
		      "setNetAttr");
	}
	if (check_props(r) || barrier(r))
		return -1;
	mark = log_mark();
	r->extra_rx = r->extra_tx = 0;
	if (open_pair(r) || transfer(r) || grouped(r) ||
	    (want_unpack && unpack_depth(r)))
		return -1;
	sc = r->sc;
	rc = r->rc;
	if (close_pair(r) || check_paths(r, mark, sc, rc))
		return -1;
	if (!fork_mode && (bad_handle(r) || barrier(r) || peer_closes(r) ||
			   barrier(r) || peer_dies_midway(r) || barrier(r) ||
			   too_large(r) || barrier(r) || ports_taken(r)))
		return -1;
	CHECK(r, net_finalize(&r->net) == NCCL_OK, "finalize");
	return barrier(r);
}

/* --gpu: GPU memory from the driver; the send buffer of --dmabuf-tx from
 * the library's CUDA provider (a dma-buf it exported). */
static int gpu_buffers(struct rank *r, size_t size)
{
	CUdeviceptr p;

	r->stage = malloc(SLOT);
	CHECK(r, r->stage, "out of memory");
	CHECK(r, !gpu_init(), "no GPU");
	CHECK(r, !cu.cuMemAlloc(&p, size), "cuMemAlloc of %zu bytes", size);
	r->rbuf = (char *)(uintptr_t)p;
	if (!dmabuf_tx) {
		CHECK(r, !cu.cuMemAlloc(&p, size), "cuMemAlloc of %zu bytes", size);
		r->sbuf = (char *)(uintptr_t)p;
		return 0;
	}
	DEVMEMTCP_OPTS(ctx_opts, co, .log_level = DEVMEMTCP_LOG_WARN);
	DEVMEMTCP_OPTS(buf_opts, bo, .provider = DEVMEMTCP_PROVIDER_CUDA,
		       .size = size, .cuda_device = 0);
	const struct devmemtcp_segment *seg;

	CHECK(r, !devmemtcp_ctx_new(&co, &r->dctx), "devmemtcp_ctx_new");
	CHECK(r, !devmemtcp_buf_new(r->dctx, &bo, &r->ubuf), "CUDA buffer: %s",
	      devmemtcp_ctx_errmsg(r->dctx));
	CHECK(r, devmemtcp_buf_segments(r->ubuf, &seg) >= 1 && !seg[0].offset,
	      "the CUDA buffer's segments");
	r->sbuf = (char *)(uintptr_t)seg[0].addr;
	return 0;
}

static int rank_buffers(struct rank *r)
{
	size_t size = (size_t)WINDOW * SLOT;

	if (gpu_mode)
		return gpu_buffers(r, size);
	r->rbuf = malloc(size);
	CHECK(r, r->rbuf, "out of memory");
	if (!dmabuf_tx) {
		r->sbuf = malloc(size);
		CHECK(r, r->sbuf, "out of memory");
		return 0;
	}
	DEVMEMTCP_OPTS(ctx_opts, co, .log_level = DEVMEMTCP_LOG_WARN);
	DEVMEMTCP_OPTS(buf_opts, bo, .provider = DEVMEMTCP_PROVIDER_UDMABUF,
		       .size = size);
	CHECK(r, !devmemtcp_ctx_new(&co, &r->dctx), "devmemtcp_ctx_new");
	CHECK(r, !devmemtcp_buf_new(r->dctx, &bo, &r->ubuf), "udmabuf: %s",
	      devmemtcp_ctx_errmsg(r->dctx));
	r->sbuf = mmap(NULL, devmemtcp_buf_size(r->ubuf), PROT_READ | PROT_WRITE,
		       MAP_SHARED, devmemtcp_buf_fd(r->ubuf), 0);
	CHECK(r, r->sbuf != MAP_FAILED, "mmap of the udmabuf: %s", strerror(errno));
	return 0;
}

static void rank_free(struct rank *r)
{
	if (gpu_mode) {
		if (r->rbuf)
			cu.cuMemFree((uintptr_t)r->rbuf);
		if (r->ubuf) {
			devmemtcp_buf_free(r->ubuf);
			devmemtcp_ctx_free(r->dctx);
		} else if (r->sbuf) {
			cu.cuMemFree((uintptr_t)r->sbuf);
		}
		free(r->stage);
		return;
	}
	free(r->rbuf);
	if (r->ubuf) {
		munmap(r->sbuf, devmemtcp_buf_size(r->ubuf));
		devmemtcp_buf_free(r->ubuf);
		devmemtcp_ctx_free(r->dctx);
	} else {
		free(r->sbuf);
	}
}

static void *rank_main(void *arg)
{
	struct rank *r = arg;
	void *lib = NULL;

	r->result = 1;
	if (rank_ns[r->id]) {
		char path[128];
		int fd;

		snprintf(path, sizeof(path), "/var/run/netns/%s", rank_ns[r->id]);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0 || setns(fd, CLONE_NEWNET)) {
			fprintf(stderr, "rank %d: entering netns %s: %s\n", r->id,
				rank_ns[r->id], strerror(errno));
			return NULL;
		}
		close(fd);
	}
	if (r->id == 1 && rank1_uid >= 0) {
		/* a rank without any capability (a uid other than 0 has none
		 * left after setresuid) */
		uid_t u = (uid_t)rank1_uid;

		if (setgroups(0, NULL) || setresgid(u, u, u) || setresuid(u, u, u)) {
			fprintf(stderr, "rank 1: dropping to uid %u: %s\n", u, strerror(errno));
			return NULL;
		}
		printf("rank 1: uid %u, no capabilities\n", u);
	}
	if (rank_if[r->id]) {
		char list[64];

		snprintf(list, sizeof(list), "=%s", rank_if[r->id]);
		setenv("NCCL_DEVMEMTCP_IFNAME", list, 1);
	}
	lib = dlopen(plugin_path, RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		fprintf(stderr, "dlopen %s: %s\n", plugin_path, dlerror());
		return NULL;
	}
	if (rank_buffers(r))
		return NULL;
	for (int v = 8; v <= 11; v++) {
		if (only_version && v != only_version)
			continue;
		if (run_version(r, v, lib))
			goto out;
		if (r->id == 0)
			printf("v%d: pass\n", v);
	}
	r->result = 0;
out:
	/* a failed rank's peer stops waiting for it; its comms stay open,
	 * their helper threads running in the plugin and moving bytes into
	 * its buffers: both stay until the process exits (unloading the
	 * plugin under them crashed the run after its failure) */
	if (r->result) {
		shutdown(r->sync_fd, SHUT_RDWR);
		return NULL;
	}
	rank_free(r);
	/* threads share the library: the last one out closes it */
	if (fork_mode)
		dlclose(lib);
	return NULL;
}

/* ---- several NICs ----------------------------------------------------------- */

/* The sysfs directory of the PCI device ifname sits on: its device or the
 * closest ancestor whose subsystem link ends in bus/pci; NULL if none. */
static char *pci_dir(const char *ifname)
{
	char path[512], target[512];
	char *dir;

	snprintf(path, sizeof(path), "/sys/class/net/%s/device", ifname);
	dir = realpath(path, NULL);
	while (dir && strlen(dir) > strlen("/sys/devices/")) {
		ssize_t n;

		snprintf(path, sizeof(path), "%s/subsystem", dir);
		n = readlink(path, target, sizeof(target) - 1);
		if (n >= 8 && !memcmp(target + n - 8, "/bus/pci", 8))
			return dir;
		*strrchr(dir, '/') = 0;
	}
	free(dir);
	return NULL;
}

/*
 * --devices N --pci yes|no: one process sees N interfaces (the vm suite:
 * dsim0 and dsim1 in one namespace): devices() lists each once, with its
 * name, its PCI device (the interface's own device or its closest PCI
 * ancestor: the sim's PCI parents behind the VM's IOMMU; none on the
 * platform parent), a GUID of its own; with
 * NCCL_DEVMEMTCP_ENABLE=1 a listen on each sets that NIC up for devmem.
 */
static int devices_test(void *lib)
{
	struct rank rr = { .id = 0 }, *r = &rr;
	void *lc[DMTN_TEST_MAX_DEVS];
	char h[NCCL_NET_HANDLE_MAXSIZE];
	uint64_t guids[DMTN_TEST_MAX_DEVS];
	int ndev = 0;

	r->net = (struct net){ .v = 11, .table = dlsym(lib, "ncclNetPlugin_v11") };
	CHECK(r, r->net.table && net_init(&r->net) == NCCL_OK, "init");
	CHECK(r, CALL(&r->net, devices, &ndev) == NCCL_OK && ndev == want_devices,
	      "devices: %d, expected %d", ndev, want_devices);
	for (int i = 0; i < ndev; i++) {
		struct nccl_net_props_v11 p;
		char *pci;

		memset(&p, 0xa5, sizeof(p));
		CHECK(r, T11(&r->net)->get_properties(i, &p) == NCCL_OK, "getProperties(%d)", i);
		pci = pci_dir(p.name);
		printf("dev %d: %s, PCI device %s, GUID %#" PRIx64 ", %d Mbps\n", i, p.name,
		       p.pci_path ? p.pci_path : "(none)", p.guid, p.speed);
		if (!strcmp(want_pci, "yes"))
			CHECK(r, pci && p.pci_path && !strcmp(p.pci_path, pci),
			      "%s: PCI path %s, its device is %s", p.name,
			      p.pci_path ? p.pci_path : "(none)", pci ? pci : "not a PCI device");
		else
			CHECK(r, !pci && !p.pci_path, "%s: PCI path %s, expected none (%s)",
			      p.name, p.pci_path ? p.pci_path : "(none)", pci ? pci : "-");
		free(pci);
		guids[i] = p.guid;
		for (int j = 0; j < i; j++)
			CHECK(r, guids[j] != guids[i], "devices %d and %d share GUID %#" PRIx64,
			      j, i, guids[i]);
	}
	for (int i = 0; i < ndev; i++) {
		lc[i] = NULL;
		CHECK(r, net_listen(&r->net, i, h, &lc[i]) == NCCL_OK && lc[i], "listen on dev %d", i);
	}
	if (getenv("NCCL_DEVMEMTCP_ENABLE"))
		CHECK(r, log_count(0, "devmem RX set up", NULL) == ndev,
		      "%d of %d interfaces set up for devmem RX", log_count(0, "devmem RX set up", NULL),
		      ndev);
	for (int i = 0; i < ndev; i++)
		CHECK(r, CALL(&r->net, close_listen, lc[i]) == NCCL_OK, "closeListen");
	CHECK(r, net_finalize(&r->net) == NCCL_OK, "finalize");
	printf("devices: %d, each with %s\n", ndev,
	       !strcmp(want_pci, "yes") ? "its PCI device" : "no PCI device");
	return 0;
}

static uint64_t parse_bytes(const char *s)
{
	char *end;
	uint64_t v = strtoull(s, &end, 0);

	switch (*end) {
	case 'k': case 'K': return v << 10;
	case 'm': case 'M': return v << 20;
	case 'g': case 'G': return v << 30;
	}
	return v;
}

static void usage(int code)
{
	printf("usage: test-nccl-net PLUGIN.so [--version 8|9|10|11] [--bytes N] [--quiet] [--corrupt K] [--cuda]\n"
	       "       test-nccl-net PLUGIN.so --fork [--ns0 NS --if0 IF --ns1 NS --if1 IF]\n"
	       "                     [--devmem] [--dmabuf-tx] [--gpu [--unpack] [--no-gather]] [--uid1 UID]\n"
	       "                     [--nccl-version CODE] [--version V] [--bytes N]\n"
	       "       test-nccl-net PLUGIN.so --devices N --pci yes|no\n");
	exit(code);
}

static void parse_args(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "version", required_argument, NULL, 'v' },
		{ "bytes", required_argument, NULL, 'b' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "fork", no_argument, NULL, 'f' },
		{ "ns0", required_argument, NULL, 1 },
		{ "ns1", required_argument, NULL, 2 },
		{ "if0", required_argument, NULL, 3 },
		{ "if1", required_argument, NULL, 4 },
		{ "devmem", no_argument, NULL, 5 },
		{ "dmabuf-tx", no_argument, NULL, 6 },
		{ "corrupt", required_argument, NULL, 7 },
		{ "cuda", no_argument, NULL, 8 },
		{ "gpu", no_argument, NULL, 9 },
		{ "unpack", no_argument, NULL, 10 },
		{ "nccl-version", required_argument, NULL, 11 },
		{ "uid1", required_argument, NULL, 12 },
		{ "devices", required_argument, NULL, 13 },
		{ "pci", required_argument, NULL, 14 },
		{ "no-gather", no_argument, NULL, 15 },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	int c;

	while ((c = getopt_long(argc, argv, "v:b:qfh", opts, NULL)) != -1) {
		switch (c) {
		case 'v': only_version = atoi(optarg); break;
		case 'b': total = parse_bytes(optarg); break;
		case 'q': quiet = true; break;
		case 'f': fork_mode = true; break;
		case 1: rank_ns[0] = optarg; break;
		case 2: rank_ns[1] = optarg; break;
		case 3: rank_if[0] = optarg; break;
		case 4: rank_if[1] = optarg; break;
		case 5: want_devmem = true; break;
		case 6: dmabuf_tx = true; break;
		case 7: corrupt_msg = atol(optarg); break;
		case 8: cuda_mode = true; break;
		case 9: gpu_mode = true; break;
		case 10: want_unpack = true; break;
		case 11: nccl_version = atoi(optarg); break;
		case 12: rank1_uid = atol(optarg); break;
		case 13: want_devices = atoi(optarg); break;
		case 14: want_pci = optarg; break;
		case 15: no_gather = true; break;
		case 'h': usage(0); break;
		default: usage(2);
		}
	}
	if (optind != argc - 1 || (only_version && (only_version < 8 || only_version > 11)) ||
	    (want_devices && (want_devices > DMTN_TEST_MAX_DEVS || !want_pci ||
			      (strcmp(want_pci, "yes") && strcmp(want_pci, "no")))))
		usage(2);
	if (!fork_mode && (rank_ns[0] || rank_ns[1] || dmabuf_tx || gpu_mode ||
			   want_unpack || rank1_uid >= 0)) {
		fprintf(stderr, "--nsN, --dmabuf-tx, --gpu, --unpack and --uid1 need --fork (a process per rank)\n");
		exit(2);
	}
	if (no_gather && !(gpu_mode && want_devmem)) {
		fprintf(stderr, "--no-gather needs --gpu and --devmem\n");
		exit(2);
	}
	if (want_unpack && !(gpu_mode && want_devmem)) {
		fprintf(stderr, "--unpack needs --gpu and --devmem (NCCL's kernel reads the bound GPU buffer)\n");
		exit(2);
	}
	plugin_path = argv[optind];
}

/* Skip (77) a run over IPv6 where lo has no IPv6 address. */
static void ipv6_or_skip(void)
{
	const char *fam = getenv("NCCL_DEVMEMTCP_FAMILY");
	struct ifaddrs *all, *ifa;
	bool found = false;

	if (fork_mode || !fam || strcmp(fam, "AF_INET6") || getifaddrs(&all))
		return;
	for (ifa = all; ifa; ifa = ifa->ifa_next)
		found |= ifa->ifa_addr && ifa->ifa_addr->sa_family == AF_INET6 &&
			 !strcmp(ifa->ifa_name, "lo");
	freeifaddrs(all);
	if (!found) {
		printf("SKIP: NCCL_DEVMEMTCP_FAMILY=AF_INET6 but lo has no IPv6 address (IPv6 disabled here)\n");
		exit(77);
	}
}

int main(int argc, char **argv)
{
	struct rank ranks[2] = { { .id = 0 }, { .id = 1 } };
	int sv[2], status = 1;

	parse_args(argc, argv);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (want_devices) {
		void *lib = dlopen(plugin_path, RTLD_NOW | RTLD_LOCAL);

		if (!lib) {
			fprintf(stderr, "dlopen %s: %s\n", plugin_path, dlerror());
			return 1;
		}
		status = devices_test(lib);
		printf("%s\n", status ? "FAIL" : "PASS");
		return status ? 1 : 0;
	}
	pat_init();
	ipv6_or_skip();
	if (!fork_mode && !rank_if[0])
		setenv("NCCL_DEVMEMTCP_IFNAME", "=lo", 0);
	/* the buffers are CUDA memory to the plugin: it loads libcuda.so.1,
	 * the fake one of the tests (LD_LIBRARY_PATH) */
	if (cuda_mode)
		setenv("NCCL_DEVMEMTCP_CUDA_PTR", "1", 1);
	/* what device unpack needs: the plugin's consent, and NCCL's Simple
	 * protocol only (the harness plays that NCCL) */
	if (want_unpack) {
		setenv("NCCL_DEVMEMTCP_UNPACK", "1", 0);
		setenv("NCCL_PROTO", "Simple", 0);
	}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) {
		perror("socketpair");
		return 1;
	}
	ranks[0].sync_fd = sv[0];
	ranks[1].sync_fd = sv[1];
	if (fork_mode) {
		pid_t pid = fork();

		if (pid == 0) {
			close(sv[0]);
			rank_main(&ranks[1]);
			_exit(ranks[1].result);
		}
		close(sv[1]);
		rank_main(&ranks[0]);
		if (ranks[0].result)
			close(sv[0]);	/* the child's reads fail instead of waiting */
		waitpid(pid, &status, 0);
		status = ranks[0].result || !WIFEXITED(status) || WEXITSTATUS(status);
	} else {
		pthread_t t;

		pthread_create(&t, NULL, rank_main, &ranks[1]);
		rank_main(&ranks[0]);
		if (ranks[0].result)
			shutdown(sv[0], SHUT_RDWR);
		pthread_join(t, NULL);
		status = ranks[0].result || ranks[1].result;
	}
	printf("%s\n", status ? "FAIL" : "PASS");
	return status;
}

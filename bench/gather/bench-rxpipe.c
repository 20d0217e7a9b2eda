// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * Receive pipeline benchmark: what a data loader's thread does with each
 * receive, through the public calls, with the tokens accounted for real:
 *
 *   devmemtcp_rx_recv (on a fake kernel, below) -> the GPU step -> the
 *   release step (devmemtcp_rx_flush: completed fences hand their tokens
 *   to the fake kernel's SO_DEVMEM_DONTNEED)
 *
 * Rows, all in one run, per receive shape (256 KiB as 64 x 4 KiB
 * fragments; 1448-byte fragments, two per 4 KiB page, 181 per receive):
 *
 *   d2d       baseline: one cuMemcpyDtoDAsync of the receive's size, then
 *             devmemtcp_gpu_release_after (a fence per receive)
 *   default   today's default: devmemtcp_gpu_gather_release per receive
 *   pipeline  coalesced: a handle with coalesce_bytes (-c, 1 MiB) and
 *             devmemtcp_gpu_gather_recv; one launch and one fence per
 *             batch (and the same with 4 times the batch, through
 *             CUDA graphs, and with every receive through the receive
 *             processing's general parse, as before its run of plain
 *             cmsgs, for comparison; the SUMMARY is the first's)
 *
 * The fake kernel: recvmsg is defined here (the library's call resolves to
 * it), and copies a prepared control buffer (the cmsgs the kernel would
 * write, tokens unique across CTRLS buffers) into the caller's; the
 * DONTNEED hook counts the tokens.  Its cost is measured alone (the same
 * copies in a loop) and subtracted from the CPU time; it is reported.  The
 * real kernel's recvmsg and SO_DEVMEM_DONTNEED costs are in no figure.
 *
 * The rows take turns, ROUNDS (5) times, each -T / ROUNDS seconds; a row's
 * figures are those of its median round (by CPU per receive), its checks
 * those of every round.  CPU µs per receive = (thread CPU time - fake
 * kernel time - the benchmark's own waits for the GPU) / receives (when
 * IN_FLIGHT receives are queued and the GPU is behind, the driver spins
 * in cuEventSynchronize: that CPU is reported as "GPU wait", not the
 * library's);
 * the stages are mean wall µs over every 7th receive.  Bytes: the last
 * RING receives' destinations are compared with the source; tokens: every
 * token received came back exactly once (the hook's count), none left
 * outstanding.  Latency: a 1 MiB receive on an idle GPU, from the call to
 * devmemtcp_rx_recv to the bytes in place (flush + cuStreamSynchronize),
 * median of 200.
 *
 *   bench-rxpipe [-d device] [-T seconds per row] [-c coalesce_bytes]
 *
 * Ends with
 *   SUMMARY pipeline size=256KiB cpu_us=... gbps_per_core=...
 *           ratio_vs_default=... latency_1mib_us=...
 *   SUMMARY pipeline frag=1448 ns_per_frag=...
 *
 * With BENCH_PROF=FILE, a sampling profile of the benchmark's thread: its
 * task clock (perf_event_open) samples the program counter every 20 µs of
 * its CPU,
 * tagged with the row and the stage it was in; FILE gets one line per
 * sample ("row stage pc") and the process's mappings after them, for
 * bench/gather/prof-report.py to name the functions.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include "cmsgfixture.h"	/* tests/lib: the receive processing and its cmsgs */
#include "common.h"

#define NIC_BUF (256ull << 20)	/* the GPU buffer the NIC writes */
#define RING 64			/* destination slices */
#define SLICE (1ull << 20)	/* bytes per slice (the largest receive) */
#define CTRLS 256		/* control buffers, used in turn */
#define IN_FLIGHT 128		/* receives queued on the GPU at most */
#define CMSG_FRAG CMSG_SPACE(sizeof(struct dmt_dmabuf_cmsg))
#define MAX_FRAGS 512
#define SAMPLE 7		/* stage times of every SAMPLE-th receive */
#define ROUNDS 5		/* the rows take turns this many times */

static struct bench B;
static double seconds = 1.0;
static uint32_t coalesce = 1u << 20;

/* ---- the sampling profile (BENCH_PROF) ---------------------------------- */

#define PROF_MAX (1u << 20)
static volatile int prof_row = -1, prof_stage = 3;	/* 3: outside a stage */
static uint64_t *prof_pc;
static volatile uint32_t prof_n;

static int prof_fd = -1;

static void prof_sample(int sig, siginfo_t *si, void *uc)
{
	uint32_t n = prof_n;

	(void)sig;
	(void)si;
	if (prof_row >= 0 && n < PROF_MAX) {
		prof_pc[n] = (uint64_t)((ucontext_t *)uc)->uc_mcontext.gregs[REG_RIP] |
			     (uint64_t)prof_row << 56 | (uint64_t)prof_stage << 52;
		prof_n = n + 1;
	}
	ioctl(prof_fd, PERF_EVENT_IOC_REFRESH, 1);
}

/* The thread's task clock, a signal at every 20 µs of it (a software
 * event: no hardware counter needed). */
static void prof_start(void)
{
	struct perf_event_attr pa = { .type = PERF_TYPE_SOFTWARE,
				      .size = sizeof(pa),
				      .config = PERF_COUNT_SW_TASK_CLOCK,
				      .sample_period = 20000,
				      .disabled = 1 };
	struct sigaction sa = { .sa_sigaction = prof_sample,
				.sa_flags = SA_SIGINFO | SA_RESTART };
	struct f_owner_ex own = { F_OWNER_TID, (pid_t)syscall(SYS_gettid) };

	if (!getenv("BENCH_PROF"))
		return;
	prof_pc = calloc(PROF_MAX, sizeof(*prof_pc));
	prof_fd = (int)syscall(SYS_perf_event_open, &pa, 0, -1, -1, 0);
	if (!prof_pc || prof_fd < 0 || sigaction(SIGPROF, &sa, NULL) ||
	    fcntl(prof_fd, F_SETFL, O_ASYNC) ||
	    fcntl(prof_fd, F_SETSIG, SIGPROF) ||
	    fcntl(prof_fd, F_SETOWN_EX, &own) ||
	    ioctl(prof_fd, PERF_EVENT_IOC_REFRESH, 1)) {
		perror("BENCH_PROF (perf_event_open)");
		exit(1);
	}
}

static void prof_write(void)
{
	const char *path = getenv("BENCH_PROF");
	char line[512];
	FILE *f, *m;

	if (!path || !prof_pc)
		return;
	prof_row = -1;
	f = fopen(path, "w");
	m = fopen("/proc/self/maps", "r");
	if (!f || !m) {
		perror(path);
		exit(1);
	}
	for (uint32_t i = 0; i < prof_n; i++)
		fprintf(f, "%u %u %#llx\n", (unsigned)(prof_pc[i] >> 56),
			(unsigned)(prof_pc[i] >> 52 & 15),
			(unsigned long long)(prof_pc[i] & ((1ull << 52) - 1)));
	fprintf(f, "maps\n");
	while (fgets(line, sizeof(line), m))
		fputs(line, f);
	fclose(m);
	fclose(f);
}

/* ---- the fake kernel ---------------------------------------------------- */

static struct {
	int fd;			/* the receiver's socket */
	const char *ctrl;	/* the next receive's cmsgs */
	size_t ctrllen, bytes;
	uint64_t freed, dontneed_calls;
	double dontneed_s;	/* wall time in the hook */
} K = { .fd = -1 };

ssize_t recvmsg(int fd, struct msghdr *msg, int flags);
ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
	(void)flags;
	if (fd != K.fd || !K.ctrl || msg->msg_controllen < K.ctrllen) {
		errno = fd != K.fd ? EBADF : EAGAIN;
		return -1;
	}
	memcpy(msg->msg_control, K.ctrl, K.ctrllen);
	msg->msg_controllen = K.ctrllen;
	msg->msg_flags = 0;
	return (ssize_t)K.bytes;
}

static int dontneed(void *arg, const struct dmt_dmabuf_token *t, size_t n)
{
	double t0 = now_s();
	uint32_t c = 0;

	(void)arg;
	for (size_t i = 0; i < n; i++)
		c += t[i].token_count;
	K.freed += c;
	K.dontneed_calls++;
	K.dontneed_s += now_s() - t0;
	return (int)c;
}

/* ---- receive shapes -------------------------------------------------------- */

struct shape {
	const char *name;
	uint32_t n, len;	/* fragments per receive, bytes each */
	char *ctrls;		/* CTRLS control buffers */
};

/* Fragment j of buffer k: 4 KiB fragments at random pages; 1448-byte
 * ones two per page (at 0 and 2048). */
static void make_ctrls(struct shape *s)
{
	s->ctrls = aligned_alloc(64, (size_t)CTRLS * s->n * CMSG_FRAG);
	if (!s->ctrls)
		abort();
	for (uint32_t k = 0; k < CTRLS; k++) {
		char *ctrl = s->ctrls + (size_t)k * s->n * CMSG_FRAG;
		uint64_t page = 0;

		for (uint32_t i = 0; i < s->n; i++) {
			struct cmsghdr *cm = (struct cmsghdr *)(ctrl + i * CMSG_FRAG);
			struct dmt_dmabuf_cmsg d = { .frag_size = s->len,
						     .frag_token = k * s->n + i,
						     .dmabuf_id = 1 };

			if (s->len == 4096 || !(i % 2))
				page = rnd() % (NIC_BUF / 4096) * 4096;
			d.frag_offset = page + (s->len == 4096 ? 0 : (i % 2) * 2048);
			cm->cmsg_level = SOL_SOCKET;
			cm->cmsg_type = SCM_DEVMEM_DMABUF;
			cm->cmsg_len = CMSG_LEN(sizeof(d));
			memcpy(CMSG_DATA(cm), &d, sizeof(d));
		}
	}
}

static void kernel_next(const struct shape *s, uint64_t i)
{
	K.ctrl = s->ctrls + (i % CTRLS) * s->n * CMSG_FRAG;
	K.ctrllen = s->n * CMSG_FRAG;
	K.bytes = (size_t)s->n * s->len;
}

/* The fake kernel's CPU µs per receive, alone. */
static double kernel_cost(const struct shape *s)
{
	static char ctrl[MAX_FRAGS * CMSG_FRAG];
	char lin[64];
	struct iovec iov = { lin, sizeof(lin) };
	const uint64_t reps = 200000;
	double c0 = thread_cpu_s();

	for (uint64_t i = 0; i < reps; i++) {
		struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
				      .msg_control = ctrl,
				      .msg_controllen = sizeof(ctrl) };

		kernel_next(s, i);
		if (recvmsg(K.fd, &msg, 0) < 0)
			abort();
		__asm__ volatile("" : : "r"(ctrl) : "memory");
	}
	return (thread_cpu_s() - c0) / (double)reps * 1e6;
}

/* ---- one row ----------------------------------------------------------------- */

enum kind { K_D2D, K_DEFAULT, K_PIPELINE, K_PIPELINE_BIG, K_PIPELINE_GRAPH,
	    K_PIPELINE_GENERAL, K_N };
static const char *const kind_name[] = {
	"per-receive cuMemcpyDtoDAsync + release_after (baseline)",
	"today's default: devmemtcp_gpu_gather_release per receive",
	"pipeline: coalesced devmemtcp_gpu_gather_recv",
	"pipeline, 4x the batch (coalesce_bytes x 4, for comparison)",
	"pipeline, launched through CUDA graphs (DEVMEMTCP_GPU_GRAPHS, for comparison)",
	"pipeline, every receive through the general parse (as before its run of plain cmsgs, for comparison)",
};

struct row {
	double wall, cpu, kernel_us, cpu_us;
	double wait_us;		/* the harness's waits for the GPU, per receive */
	uint64_t receives, launches;
	double stage[3];	/* mean wall µs: receive, GPU step, release */
	bool bytes_ok, tokens_ok;
};

static void die(const char *what, struct devmemtcp_gpu *g,
		struct devmemtcp_rx *rx)
{
	fprintf(stderr, "%s: %s / %s\n", what, rx ? devmemtcp_rx_errmsg(rx) : "",
		g ? devmemtcp_gpu_errmsg(g) : "");
	exit(1);
}

/* The bytes of receive i (its control buffer) in slice i % RING. */
static bool check_receive(const struct shape *s, uint64_t i, uint8_t *got)
{
	const char *ctrl = s->ctrls + (i % CTRLS) * s->n * CMSG_FRAG;
	uint64_t pos = 0;

	CK(B.cu->cuMemcpyDtoH(got, B.dst + (i % RING) * SLICE,
			      (size_t)s->n * s->len));
	for (uint32_t k = 0; k < s->n; k++) {
		struct dmt_dmabuf_cmsg d;

		memcpy(&d, CMSG_DATA((const struct cmsghdr *)(ctrl + k * CMSG_FRAG)),
		       sizeof(d));
		if (bench_same(&B, got + pos, d.frag_offset, d.frag_size))
			return false;
		pos += d.frag_size;
	}
	return true;
}

static void run(struct devmemtcp_gpu *g, enum kind kind, const struct shape *s,
		struct devmemtcp_rx *rx, double kernel_us, struct row *row)
{
	static struct devmemtcp_frag frags[MAX_FRAGS];
	static uint8_t lin[4096], got[SLICE];
	const uint64_t size = (uint64_t)s->n * s->len;
	CUevent marks[IN_FLIGHT / 32];
	struct devmemtcp_rx_stats rs;
	double t_end, c0, c1, w0, sum[3] = { 0 }, wait_cpu = 0;
	uint64_t i = 0, ns = 0, freed0 = K.freed, l0 = 0;
	struct dmt_batch_stats bs;

	if (kind >= K_PIPELINE) {
		dmt_batch_stats(g, &bs);
		l0 = bs.launches;
	}
	for (int m = 0; m < IN_FLIGHT / 32; m++)
		CK(B.cu->cuEventCreate(&marks[m], CU_EVENT_DISABLE_TIMING));
	w0 = now_s();
	c0 = thread_cpu_s();
	t_end = w0 + seconds / ROUNDS;
	for (;; i++) {
		struct devmemtcp_gpu_iov d = { B.dst + (i % RING) * SLICE, size };
		bool sample = !(i % SAMPLE);
		double a = 0, b = 0, c = 0;
		int n, ret = 0;

		if (!(i % 256) && now_s() > t_end)
			break;
		/* at most IN_FLIGHT receives queued, so a token comes back
		 * before the fake kernel hands it out again CTRLS receives
		 * later (a mark is work of our own: the batch goes first) */
		if (!(i % 32)) {
			CUevent *e = &marks[(i / 32) % (IN_FLIGHT / 32)];

			if (kind >= K_PIPELINE && devmemtcp_gpu_flush(g) < 0)
				die("flush", g, rx);
			if (i >= IN_FLIGHT &&
			    B.cu->cuEventQuery(*e) != CUDA_SUCCESS) {
				/* the GPU is behind: the harness waits
				 * (spinning, the driver's default), which is
				 * no work of the library's: not in its CPU */
				double w = thread_cpu_s();

				CK(B.cu->cuEventSynchronize(*e));
				wait_cpu += thread_cpu_s() - w;
			}
			CK(B.cu->cuEventRecord(*e, B.st));
		}
		kernel_next(s, i);
		if (sample)
			a = now_s();
		prof_stage = 0;
		n = devmemtcp_rx_recv(rx, frags, MAX_FRAGS, lin, sizeof(lin));
		if (n != (int)s->n)
			die("devmemtcp_rx_recv", g, rx);
		if (sample)
			b = now_s();
		prof_stage = 1;
		if (kind == K_D2D) {
			if (B.cu->cuMemcpyDtoDAsync(d.addr, B.src + (i % 64) * size,
						    size, B.st) ||
			    devmemtcp_gpu_release_after(g, rx, frags, (size_t)n,
							B.st) < 0)
				die("d2d", g, rx);
		} else if (kind == K_DEFAULT) {
			ret = devmemtcp_gpu_gather_release(g, rx, frags,
							   (size_t)n, &d, 1, B.st);
		} else {
			ret = devmemtcp_gpu_gather_recv(g, rx, frags, (size_t)n,
							lin, sizeof(lin), &d, 1,
							B.st);
		}
		if (ret < 0)
			die(kind_name[kind], g, rx);
		if (sample)
			c = now_s();
		prof_stage = 2;
		if (devmemtcp_rx_flush(rx) < 0)
			die("devmemtcp_rx_flush", g, rx);
		prof_stage = 3;
		if (sample) {
			sum[0] += b - a;
			sum[1] += c - b;
			sum[2] += now_s() - c;
			ns++;
		}
	}
	/* what an idle loader does: the batch goes before it waits */
	if (kind >= K_PIPELINE && devmemtcp_gpu_flush(g) < 0)
		die("flush", g, rx);
	c1 = thread_cpu_s();	/* the wait for the last receives is not in it */
	CK(B.cu->cuStreamSynchronize(B.st));
	row->wall = now_s() - w0;
	row->cpu = c1 - c0 - wait_cpu;
	row->receives = i;
	row->kernel_us = kernel_us;
	row->cpu_us = row->cpu * 1e6 / (double)i - kernel_us;
	row->wait_us = wait_cpu * 1e6 / (double)i;
	for (int k = 0; k < 3; k++)
		row->stage[k] = ns ? sum[k] / (double)ns * 1e6 : 0;
	row->launches = 0;
	if (kind >= K_PIPELINE) {
		dmt_batch_stats(g, &bs);
		row->launches = bs.launches - l0;
	}
	row->bytes_ok = kind == K_D2D;	/* its source is not the receive's */
	if (kind != K_D2D) {
		row->bytes_ok = true;
		for (uint64_t k = i > RING ? i - RING : 0; k < i; k++)
			row->bytes_ok &= check_receive(s, k, got);
	}
	/* every token back exactly once, none outstanding */
	while (devmemtcp_rx_release_all(rx) > 0)
		;
	if (devmemtcp_rx_flush(rx) < 0)
		die("devmemtcp_rx_flush", g, rx);
	rs.sz = sizeof(rs);
	row->tokens_ok = !devmemtcp_rx_stats(rx, &rs) &&
			 !rs.tokens_outstanding &&
			 K.freed - freed0 == i * s->n;
	for (int m = 0; m < IN_FLIGHT / 32; m++)
		B.cu->cuEventDestroy(marks[m]);
}

/* Row k of the round whose CPU per receive is the median of the rounds';
 * the checks of every round. */
static void median_round(struct row (*rounds)[K_N], int k, struct row *out)
{
	int idx[ROUNDS];

	for (int r = 0; r < ROUNDS; r++)
		idx[r] = r;
	for (int a = 1; a < ROUNDS; a++)	/* insertion sort by cpu_us */
		for (int b = a; b > 0 && rounds[idx[b]][k].cpu_us <
					 rounds[idx[b - 1]][k].cpu_us; b--) {
			int t = idx[b];

			idx[b] = idx[b - 1];
			idx[b - 1] = t;
		}
	*out = rounds[idx[ROUNDS / 2]][k];
	for (int r = 0; r < ROUNDS; r++) {
		out->bytes_ok &= rounds[r][k].bytes_ok;
		out->tokens_ok &= rounds[r][k].tokens_ok;
	}
}

static void print_row(const struct shape *s, enum kind kind,
		      const struct row *r)
{
	double bytes = (double)s->n * s->len;
	char per[32] = "1";

	if (r->launches)
		snprintf(per, sizeof(per), "%.2f",
			 (double)r->receives / (double)r->launches);
	printf("| %s | %s | %.0f k | %.1f | **%.2f** | %.1f | **%.1f** | %.2f / %.2f / %.2f | %.3f | %.2f | %s | %s, %s |\n",
	       s->name, kind_name[kind], r->receives / r->wall / 1e3,
	       bytes * r->receives / r->wall / 1e9, r->cpu_us,
	       r->cpu_us * 1e3 / s->n, bytes / (r->cpu_us * 1e-6) / 1e9,
	       r->stage[0], r->stage[1], r->stage[2], r->kernel_us,
	       r->wait_us,
	       per,
	       r->bytes_ok ? (kind == K_D2D ? "bytes n/a" : "bytes equal")
			   : "MISMATCH",
	       r->tokens_ok ? "tokens all back" : "MISMATCH: tokens lost or left outstanding");
	fflush(stdout);
}

/* Call -> bytes in place at 1 MiB (256 x 4 KiB), idle GPU: µs, median. */
static double latency(struct devmemtcp_gpu *g, struct devmemtcp_rx *rx,
		      const struct shape *s, bool *ok)
{
	static struct devmemtcp_frag frags[MAX_FRAGS];
	static uint8_t lin[4096], got[SLICE];
	double t[200];

	*ok = true;
	for (int k = 0; k < 200; k++) {
		struct devmemtcp_gpu_iov d = { B.dst + (k % RING) * SLICE, SLICE };
		double t0;

		kernel_next(s, (uint64_t)k);
		t0 = now_s();
		if (devmemtcp_rx_recv(rx, frags, MAX_FRAGS, lin, sizeof(lin)) !=
			    (int)s->n ||
		    devmemtcp_gpu_gather_recv(g, rx, frags, s->n, lin,
					      sizeof(lin), &d, 1, B.st) < 0 ||
		    devmemtcp_gpu_flush(g) < 0)
			die("latency", g, rx);
		CK(B.cu->cuStreamSynchronize(B.st));
		t[k] = (now_s() - t0) * 1e6;
		if (k < 4)
			*ok &= check_receive(s, (uint64_t)k, got);
		if (devmemtcp_rx_flush(rx) < 0)
			die("devmemtcp_rx_flush", g, rx);
	}
	return median(t, 200);
}

/* ---- setup -------------------------------------------------------------------- */

static int tcp_pair(int *peer, int *lst)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int c;

	*lst = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (*lst < 0 || c < 0 || bind(*lst, (struct sockaddr *)&a, sizeof(a)) ||
	    listen(*lst, 1) || getsockname(*lst, (struct sockaddr *)&a, &len) ||
	    connect(c, (struct sockaddr *)&a, sizeof(a)))
		abort();
	*peer = accept(*lst, NULL, NULL);
	if (*peer < 0)
		abort();
	return c;
}

/* A receiver whose socket the fake kernel answers, with the NIC's buffer
 * (one segment over the GPU source memory) as binding 1. */
static struct devmemtcp_rx *receiver(struct devmemtcp_buf **bufp, int *fds)
{
	struct devmemtcp_segment seg = { 0, NIC_BUF, B.src };
	struct devmemtcp_rx *rx;

	if (dmt_buf_alloc(B.ctx, DEVMEMTCP_PROVIDER_IMPORT, bufp))
		abort();
	(*bufp)->size = NIC_BUF;
	if (dmt_buf_set_segments(*bufp, &seg, 1))
		abort();
	fds[0] = tcp_pair(&fds[1], &fds[2]);
	if (devmemtcp_rx_new(B.ctx, fds[0], NULL, &rx) ||
	    devmemtcp_rx_add_buf(rx, 1, *bufp)) {
		fprintf(stderr, "rx: %s\n", devmemtcp_ctx_errmsg(B.ctx));
		return NULL;
	}
	dmt_rx_tokens(rx)->dontneed = dontneed;
	K.fd = fds[0];
	return rx;
}

int main(int argc, char **argv)
{
	struct shape shapes[] = {
		{ "256 KiB (64 x 4 KiB)", 64, 4096, NULL },
		{ "1448 B x 181 (262088 B)", 181, 1448, NULL },
	};
	struct shape mib = { "1 MiB (256 x 4 KiB)", 256, 4096, NULL };
	struct row rows[2][K_N], rounds[ROUNDS][K_N];
	struct devmemtcp_gpu_opts go = { .sz = sizeof(go) };
	struct devmemtcp_gpu *pipe, *pipe4, *pipeg;
	struct devmemtcp_buf *buf;
	struct devmemtcp_rx *rx;
	int opt, status, fds[3], bad = 0, only_s = -1, only_k = -1;
	double lat;
	bool lat_ok;

	while ((opt = getopt(argc, argv, "d:T:c:o:h")) != -1) {
		switch (opt) {
		case 'd':
			B.device = atoi(optarg);
			break;
		case 'T':
			seconds = atof(optarg);
			if (seconds <= 0 || seconds > 60)
				seconds = 1;
			break;
		case 'c':
			coalesce = (uint32_t)strtoul(optarg, NULL, 0);
			break;
		case 'o':
			/* one row only, for a profiler (callgrind on the
			 * fake driver): -o SHAPE:ROW, both from 0 */
			if (sscanf(optarg, "%d:%d", &only_s, &only_k) != 2 ||
			    only_s < 0 || only_s > 1 || only_k < 0 ||
			    only_k >= K_N) {
				fprintf(stderr, "-o SHAPE:ROW: SHAPE 0..1, ROW 0..%d\n",
					K_N - 1);
				return 2;
			}
			break;
		default:
			fprintf(stderr, "usage: %s [-d device] [-T seconds per row] [-c coalesce_bytes] [-o shape:row]\n",
				argv[0]);
			return opt == 'h' ? 0 : 2;
		}
	}
	status = bench_open(&B, B.device, NIC_BUF, RING * SLICE);
	if (status >= 0)
		return status;
	bench_header(&B, "Receive pipeline benchmark");
	prof_start();
	rx = receiver(&buf, fds);
	if (!rx)
		return 1;
	go.coalesce_bytes = coalesce * 4;
	if (devmemtcp_gpu_new(B.ctx, &go, &pipe4)) {
		fprintf(stderr, "devmemtcp_gpu_new (coalesce_bytes %u): %s\n",
			coalesce * 4, devmemtcp_ctx_errmsg(B.ctx));
		return 1;
	}
	go.coalesce_bytes = coalesce;
	if (devmemtcp_gpu_new(B.ctx, &go, &pipe)) {
		fprintf(stderr, "devmemtcp_gpu_new (coalesce_bytes %u): %s\n",
			coalesce, devmemtcp_ctx_errmsg(B.ctx));
		return 1;
	}
	go.flags = DEVMEMTCP_GPU_GRAPHS;
	if (devmemtcp_gpu_new(B.ctx, &go, &pipeg)) {
		fprintf(stderr, "devmemtcp_gpu_new (coalesce_bytes %u, DEVMEMTCP_GPU_GRAPHS): %s\n",
			coalesce, devmemtcp_ctx_errmsg(B.ctx));
		return 1;
	}
	printf("\n## Receive pipeline: devmemtcp_rx_recv + GPU step + devmemtcp_rx_flush, one CPU thread\n\n");
	printf("- %.1f s per row, in %d turns (the median turn's figures); fragments at random pages of a %llu MiB GPU buffer; destination: a ring of %d slices; at most %d receives queued on the GPU; pipeline: coalesce_bytes %u, coalesce_us default\n",
	       seconds, ROUNDS, (unsigned long long)(NIC_BUF >> 20), RING,
	       IN_FLIGHT,
	       coalesce);
	printf("- CPU µs per receive: the thread's CPU time per receive, the fake kernel's own cost (its recvmsg, measured alone) and the benchmark's own waits for the GPU (when %d receives are queued and the GPU is behind: the driver spins; reported per receive as \"GPU wait\") subtracted; its DONTNEED hook's time is in the figures (see the line after the table); the real kernel's recvmsg and SO_DEVMEM_DONTNEED costs are in no figure\n",
	       IN_FLIGHT);
	printf("- stages: mean wall µs of every %dth receive (devmemtcp_rx_recv incl. the fake kernel / GPU step / devmemtcp_rx_flush)\n\n",
	       SAMPLE);
	printf("| receive | pipeline | receives/s | GB/s (wall) | CPU µs per receive | ns per fragment | GB/s per core | µs: recv / GPU step / release | fake kernel µs | GPU wait µs | receives per launch | check |\n");
	printf("|---|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---|\n");
	for (int s = 0; s < 2; s++) {
		double kus;

		if (only_s >= 0 && s != only_s)
			continue;
		make_ctrls(&shapes[s]);
		kus = kernel_cost(&shapes[s]);
		/* the rows take turns, ROUNDS times: a slow phase of the
		 * host hits every row alike, not one of them */
		for (int r = 0; r < ROUNDS; r++)
			for (int k = 0; k < K_N; k++) {
				struct devmemtcp_gpu *g;

				if (only_k >= 0 && k != only_k) {
					rounds[r][k] = (struct row){ 0 };
					continue;
				}
				g = k == K_PIPELINE ||
					    k == K_PIPELINE_GENERAL ? pipe
				    : k == K_PIPELINE_BIG	    ? pipe4
				    : k == K_PIPELINE_GRAPH	    ? pipeg
								    : B.gpu;

				prof_row = s * K_N + k;
				dmt_rx_set_general(rx, k == K_PIPELINE_GENERAL);
				run(g, (enum kind)k, &shapes[s], rx, kus,
				    &rounds[r][k]);
				dmt_rx_set_general(rx, false);
				prof_row = -1;
				bad |= !rounds[r][k].bytes_ok ||
				       !rounds[r][k].tokens_ok;
			}
		for (int k = 0; k < K_N; k++) {
			if (only_k >= 0 && k != only_k)
				continue;
			median_round(rounds, k, &rows[s][k]);
			print_row(&shapes[s], (enum kind)k, &rows[s][k]);
		}
	}
	prof_write();
	if (only_s >= 0)
		goto out;	/* one row: no latency, no SUMMARY */
	make_ctrls(&mib);
	lat = latency(pipe, rx, &mib, &lat_ok);
	bad |= !lat_ok;
	printf("\n- fake kernel's DONTNEED hook: %llu calls, %.3f µs per call (included above)\n",
	       (unsigned long long)K.dontneed_calls,
	       K.dontneed_calls ? K.dontneed_s / (double)K.dontneed_calls * 1e6 : 0.0);
	printf("- latency, call to bytes in place, 1 MiB receive, idle GPU, pipeline handle (devmemtcp_rx_recv + gather_recv + flush + cuStreamSynchronize): %.1f µs median, %s\n",
	       lat, lat_ok ? "bytes equal" : "MISMATCH");
	printf("- targets: <= 2.5 µs per 256 KiB receive all-in (>= 100 GB/s per core), >= 1.5x the default; <= 15 ns per 1448-byte fragment; <= 20 µs at 1 MiB\n\n");
	{
		const struct row *p = &rows[0][K_PIPELINE], *d = &rows[0][K_DEFAULT];

		printf("SUMMARY pipeline size=256KiB cpu_us=%.3f gbps_per_core=%.1f ratio_vs_default=%.2f latency_1mib_us=%.1f\n",
		       p->cpu_us, 262144.0 / (p->cpu_us * 1e-6) / 1e9,
		       d->cpu_us / p->cpu_us, lat);
		printf("SUMMARY pipeline frag=1448 ns_per_frag=%.2f\n",
		       rows[1][K_PIPELINE].cpu_us * 1e3 / shapes[1].n);
	}
out:
	devmemtcp_gpu_free(pipe);
	devmemtcp_gpu_free(pipe4);
	devmemtcp_gpu_free(pipeg);
	devmemtcp_rx_free(rx);
	for (int i = 0; i < 3; i++)
		close(fds[i]);
	devmemtcp_buf_free(buf);
	for (int s = 0; s < 2; s++)
		free(shapes[s].ctrls);
	free(mib.ctrls);
	bench_close(&B);
	return bad;
}

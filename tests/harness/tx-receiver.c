// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/* The harness for the devmem TX vm tests: receivers; see harness-tx.h. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness-tx.h"
#include "pattern.h"

#define PERIOD PATTERN_PERIOD_DEFAULT
#define LINEAR_LEN (1u << 20)

/* The receiver child's state. */
struct rx_child {
	const struct tx_args *a;
	const struct rx_spec *specs;
	size_t nspecs;
	struct devmemtcp_ctx *ctx;
	struct devmemtcp_buf *buf;
	struct devmemtcp_nic *nic;
	struct devmemtcp_binding *b;
	int lfd[8];
	uint8_t *lin, *tmp;
};

static void flow_text(char *text, size_t len, const struct tx_args *a, int port)
{
	snprintf(text, len, "%s dst-ip %s dst-port %d",
		 strchr(a->rx_addr, ':') ? "tcp6" : "tcp4", a->rx_addr, port);
}

/* Listen for every spec; devmem specs get one flow each to one bound queue. */
static int rx_prepare(struct rx_child *c)
{
	struct devmemtcp_flow flows[8];
	DEVMEMTCP_OPTS(nic_opts, no, .nqueues = 1, .flows = flows, .nflows = 0);
	DEVMEMTCP_OPTS(ctx_opts, co, .log_level = DEVMEMTCP_LOG_WARN);
	char text[160];
	int r;

	T_CHECK(!c->a->rx_ns || vm_enter(c->a->rx_ns) == 0, "entering netns %s: %s",
		c->a->rx_ns, strerror(errno));
	r = devmemtcp_ctx_new(&co, &c->ctx);
	T_CHECK(r == 0, "devmemtcp_ctx_new: %s", strerror(-r));
	for (size_t i = 0; i < c->nspecs; i++) {
		c->lfd[i] = t_listen(c->a->rx_addr, c->specs[i].port);
		T_CHECK(c->lfd[i] >= 0, "listen");
		if (c->specs[i].mode != RX_DEVMEM)
			continue;
		flow_text(text, sizeof(text), c->a, c->specs[i].port);
		T_CHECK(devmemtcp_flow_parse(text, &flows[no.nflows++]) == 0, "flow %s", text);
	}
	if (!no.nflows)
		return 0;
	r = t_udmabuf(c->ctx, 64ull << 20, &c->buf);
	if (r == -ENOENT || r == -EOPNOTSUPP)
		T_SKIP("no udmabuf: %s", devmemtcp_ctx_errmsg(c->ctx));
	T_CHECK(r == 0, "udmabuf");
	no.buf = c->buf;
	T_CHECK(devmemtcp_nic_open(c->ctx, c->a->rx_if, &no, &c->nic) == 0,
		"receiver: devmemtcp_nic_open %s: %s", c->a->rx_if,
		devmemtcp_ctx_errmsg(c->ctx));
	c->b = devmemtcp_nic_binding(c->nic);
	return 0;
}

/* Check len bytes at stream position pos; the first bad one goes to res
 * (f: the devmem fragment they came in, NULL for a plain receive). */
static void validate(struct rx_result *res, const uint8_t *src, size_t len,
		     uint64_t pos, const struct devmemtcp_frag *f)
{
	long bad = pattern_check(src, len, pos, PERIOD);
	char where[96] = "";

	if (bad < 0)
		return;
	res->ok = 0;
	res->bad_pos = pos + (uint64_t)bad;
	if (f)
		snprintf(where, sizeof(where), " (%s fragment, dma-buf offset %" PRIu64 ")",
			 f->flags & DEVMEMTCP_FRAG_LINEAR ? "linear" : "dma-buf",
			 f->offset + (uint64_t)bad);
	snprintf(res->msg, sizeof(res->msg), "byte at stream offset %" PRIu64 " is %u, expected %u%s",
		 res->bad_pos, src[bad], pattern_byte(res->bad_pos, PERIOD), where);
}

/* One fragment of a devmem receive: count it, and check it when asked. */
static int rx_frag(struct rx_child *c, const struct rx_spec *spec,
		   const struct devmemtcp_frag *f, uint64_t pos, struct rx_result *res)
{
	const uint8_t *src = NULL;

	if (f->flags & DEVMEMTCP_FRAG_FOREIGN) {
		snprintf(res->msg, sizeof(res->msg), "fragment of foreign binding %u",
			 f->binding_id);
		res->ok = 0;
	}
	if (f->flags & DEVMEMTCP_FRAG_LINEAR) {
		src = c->lin + f->offset;
		res->linear_bytes += f->len;
	} else {
		res->dmabuf_bytes += f->len;
		res->frags++;
	}
	if (!spec->validate || !res->ok)
		return 0;
	if (!src) {
		T_CHECK(f->len <= (1 << 16) && !devmemtcp_buf_read(c->buf, f->offset, c->tmp, f->len),
			"buf_read %u at %" PRIu64, f->len, f->offset);
		src = c->tmp;
	}
	validate(res, src, f->len, pos, f);
	return 0;
}

static int rx_devmem(struct rx_child *c, const struct rx_spec *spec, int fd,
		     struct rx_result *res, double *t0)
{
	DEVMEMTCP_OPTS(rx_stats, st);
	struct devmemtcp_frag frags[256];
	struct devmemtcp_rx *rx = NULL;
	int n;

	T_CHECK(devmemtcp_rx_new(c->ctx, fd, NULL, &rx) == 0 &&
		devmemtcp_rx_add_buf(rx, devmemtcp_binding_id(c->b), c->buf) == 0,
		"devmemtcp_rx_new: %s", devmemtcp_ctx_errmsg(c->ctx));
	while ((n = devmemtcp_rx_recv(rx, frags, 256, c->lin, LINEAR_LEN)) != 0) {
		if (n == -EINTR || n == -EAGAIN)
			continue;
		if (n < 0) {
			snprintf(res->msg, sizeof(res->msg), "devmemtcp_rx_recv: %s",
				 devmemtcp_rx_errmsg(rx));
			res->ok = 0;
			break;
		}
		if (!*t0)
			*t0 = t_now();
		for (int k = 0; k < n; k++) {
			T_TRY(rx_frag(c, spec, &frags[k], res->bytes, res));
			res->bytes += frags[k].len;
		}
		T_CHECK(devmemtcp_rx_release(rx, frags, (size_t)n) == 0, "release: %s",
			devmemtcp_rx_errmsg(rx));
	}
	devmemtcp_rx_release_all(rx);
	devmemtcp_rx_stats(rx, &st);
	res->tokens_released = st.tokens_released;
	if (st.tokens_outstanding && res->ok) {
		res->ok = 0;
		snprintf(res->msg, sizeof(res->msg), "%" PRIu64 " tokens still outstanding",
			 st.tokens_outstanding);
	}
	devmemtcp_rx_free(rx);
	return 0;
}

static void rx_plain(struct rx_child *c, const struct rx_spec *spec, int fd,
		     struct rx_result *res, double *t0)
{
	for (;;) {
		ssize_t n = recv(fd, c->lin, LINEAR_LEN, 0);

		if (n == 0)
			break;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			snprintf(res->msg, sizeof(res->msg), "recv: %s", strerror(errno));
			res->ok = 0;
			break;
		}
		if (!*t0)
			*t0 = t_now();
		if (spec->validate && res->ok)
			validate(res, c->lin, (size_t)n, res->bytes, NULL);
		res->linear_bytes += (uint64_t)n;
		res->bytes += (uint64_t)n;
	}
}

/* Child: receive one connection per spec (in order), report each. */
static int rx_serve(struct rx_child *c, int ready_fd, int res_fd)
{
	T_TRY(rx_prepare(c));
	T_CHECK(write(ready_fd, "R", 1) == 1, "ready: %s", strerror(errno));
	close(ready_fd);
	for (size_t i = 0; i < c->nspecs; i++) {
		struct rx_result res = { .ok = 1 };
		double t0 = 0;
		int fd = accept(c->lfd[i], NULL, NULL);

		T_CHECK(fd >= 0, "accept: %s", strerror(errno));
		if (c->specs[i].mode == RX_DEVMEM)
			T_TRY(rx_devmem(c, &c->specs[i], fd, &res, &t0));
		else
			rx_plain(c, &c->specs[i], fd, &res, &t0);
		res.secs = t0 ? t_now() - t0 : 0;
		close(fd);
		close(c->lfd[i]);
		T_CHECK(write(res_fd, &res, sizeof(res)) == (ssize_t)sizeof(res),
			"result: %s", strerror(errno));
	}
	if (c->nic)
		devmemtcp_nic_close(c->nic);
	devmemtcp_buf_free(c->buf);
	devmemtcp_ctx_free(c->ctx);
	return 0;
}

int rx_start(const struct tx_args *a, const struct rx_spec *specs, size_t nspecs,
	     struct rx_proc *p)
{
	int ready[2], res[2], st = 0;
	bool ready_ok;
	char c;

	T_CHECK(nspecs <= 8, "%zu receiver specs", nspecs);
	T_CHECK(!pipe2(ready, O_CLOEXEC) && !pipe2(res, O_CLOEXEC), "pipe: %s", strerror(errno));
	fflush(NULL);
	p->pid = fork();
	T_CHECK(p->pid >= 0, "fork: %s", strerror(errno));
	if (!p->pid) {
		struct rx_child child = { .a = a, .specs = specs, .nspecs = nspecs,
					  .lin = malloc(LINEAR_LEN), .tmp = malloc(1 << 16) };

		close(ready[0]);
		close(res[0]);
		/* _exit: the parent undoes --setup */
		_exit(rx_serve(&child, ready[1], res[1]));
	}
	close(ready[1]);
	close(res[1]);
	ready_ok = read(ready[0], &c, 1) == 1;
	close(ready[0]);
	if (!ready_ok) {
		waitpid(p->pid, &st, 0);
		if (WIFEXITED(st) && WEXITSTATUS(st) == T_EXIT_SKIP)
			return T_EXIT_SKIP;
	}
	T_CHECK(ready_ok, "the receiver died while setting up (status %d)", st);
	p->res_fd = res[0];
	return 0;
}

int rx_next(struct rx_proc *p, struct rx_result *r)
{
	ssize_t n = read(p->res_fd, r, sizeof(*r));

	T_CHECK(n == (ssize_t)sizeof(*r), "the receiver sent no result (%zd)", n);
	return 0;
}

int rx_wait(struct rx_proc *p)
{
	int st = 0;

	close(p->res_fd);
	waitpid(p->pid, &st, 0);
	T_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the receiver exited with status %d", st);
	return 0;
}

// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * devmemtcp recv: bind a udmabuf or DRM buffer to RX queues (or, with --setup, prepare
 * the NIC with devmemtcp_nic_open() and undo it after), accept one TCP
 * connection, receive it into the dma-buf, optionally check every byte
 * against the test pattern, and report the receive statistics.  This file
 * owns the command's options, its steps (bind, accept, loop, report) and
 * its exit status; the receive itself is the library's.
 */
#include <errno.h>
#include <getopt.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "common.h"
#include "pattern.h"

#define CMD "devmemtcp recv"
#define MAX_FRAGS 1024
#define LINEAR_SIZE (4u << 20)
#define MAX_QUEUES 64
#define NO_ERROR UINT64_MAX

struct recv_opts {
	const char *ifname, *listen_addr;
	long long buf_size, expect;	/* expect -1: any length */
	unsigned int period;		/* 0: no validation */
	struct tool_mem mem;
	uint32_t queues[MAX_QUEUES];
	size_t nqueues;			/* 0: the last RX queue */
	int port, setup, ifindex;
};

/* What one run holds; recv_close() gives it all back. */
struct recv_run {
	struct devmemtcp_ctx *ctx;
	struct devmemtcp_buf *buf;
	struct devmemtcp_binding *binding;
	struct devmemtcp_nic *nic;	/* --setup: owns the binding */
	struct devmemtcp_rx *rx;
	struct devmemtcp_frag *frags;
	uint8_t *linear, *tmp;
	int lfd, fd;
	uint64_t pos;			/* stream bytes so far */
	uint64_t bad_at;		/* first byte off the pattern, or NO_ERROR */
	uint8_t bad_got;
	double t0, t1;
};

static void recv_usage(FILE *f)
{
	fprintf(f,
		"usage: devmemtcp recv -i IFACE [options]\n\n"
		"Bind a udmabuf (or a DRM buffer) to RX queues of IFACE, accept one TCP\n"
		"connection and receive it into the dma-buf with devmem TCP; print\n"
		"statistics.\n\n"
		"  -i, --iface IFACE     interface to bind (required)\n"
		"  -q, --queues LIST     RX queues, e.g. 3 or 2,3 (default: the last one)\n"
		"  -p, --port PORT       TCP port to listen on (default 5201)\n"
		"  -l, --listen ADDR     address to listen on (default: any)\n"
		"  -b, --buf-size SIZE   buffer size (default 32M)\n"
		"  -M, --provider MEM    " TOOL_MEM_HELP "\n"
		"  -v, --validate[=N]    check every byte against the pattern i %% N (N=251)\n"
		"  -e, --expect BYTES    fail unless exactly BYTES arrive\n"
		"  -s, --setup           prepare the NIC (header split, RSS, ntuple) and undo after\n"
		"  -h, --help            this text\n\n"
		"Exit status: 0 on success, 1 on a failed transfer or validation, 2 on bad usage.\n");
}

/* "3" or "2,3": queue numbers 0..4095, comma-separated, nothing else. */
static int parse_queues(const char *s, uint32_t *q, size_t max, size_t *n)
{
	char word[16];

	*n = 0;
	while (*s) {
		size_t len = strcspn(s, ",");
		unsigned long long v;

		if (len >= sizeof(word) || *n == max)
			return -1;
		memcpy(word, s, len);
		word[len] = '\0';
		if (parse_uint(word, 0, 4095, &v))
			return -1;
		q[(*n)++] = (uint32_t)v;
		s += len;
		if (*s == ',' && !*++s)
			return -1;	/* a trailing comma */
	}
	return *n ? 0 : -1;
}

/* --buf-size: at least one byte. */
static int parse_buf_size(const char *arg, long long *size)
{
	*size = parse_size(arg);
	if (*size == -2)
		return bad_value(CMD, "--buf-size", arg,
				 "a size (bytes with K, M or G, at most 8E)");
	if (*size == 0)
		return bad_value(CMD, "--buf-size", arg,
				 "a size (bytes with K, M or G, at least 1)");
	if (*size < 0)
		return bad_value(CMD, "--buf-size", arg,
				 "a size (bytes with K, M or G)");
	return -1;
}

/* One option; returns -1 to go on, else the exit status. */
static int recv_option(int c, const char *arg, void *opts)
{
	struct recv_opts *o = opts;
	unsigned long long v;

	switch (c) {
	case 'i': o->ifname = arg; break;
	case 'q':
		if (parse_queues(arg, o->queues, MAX_QUEUES, &o->nqueues))
			return bad_value(CMD, "--queues", arg,
					 "a list of queue numbers (0-4095, e.g. 3 or 2,3)");
		break;
	case 'p':
		if (parse_uint(arg, 1, 65535, &v))
			return bad_value(CMD, "--port", arg, "a port number (1-65535)");
		o->port = (int)v;
		break;
	case 'l':
		if (tool_addr_check(arg))
			return bad_value(CMD, "--listen", arg, "an IPv4 or IPv6 address");
		o->listen_addr = arg;
		break;
	case 'b': return parse_buf_size(arg, &o->buf_size);
	case 'v':
		if (!arg) {
			o->period = PATTERN_PERIOD_DEFAULT;
			break;
		}
		if (parse_uint(arg, 2, 256, &v))
			return bad_value(CMD, "--validate", arg, "a pattern period (2-256)");
		o->period = (unsigned int)v;
		break;
	case 'e':
		o->expect = parse_size(arg);
		if (o->expect < 0)
			return bad_value(CMD, "--expect", arg,
					 "a byte count (bytes with K, M or G)");
		break;
	case 's': o->setup = 1; break;
	case 'M':
		if (tool_mem_parse(CMD, arg, &o->mem))
			return 2;
		break;
	case 'h': recv_usage(stdout); return 0;
	}
	return -1;
}

/* The options and the interface; returns -1 to go on, else the exit status. */
static int recv_parse(int argc, char **argv, struct recv_opts *o)
{
	static const struct option opts[] = {
		{ "iface", required_argument, NULL, 'i' },
		{ "queues", required_argument, NULL, 'q' },
		{ "port", required_argument, NULL, 'p' },
		{ "listen", required_argument, NULL, 'l' },
		{ "buf-size", required_argument, NULL, 'b' },
		{ "validate", optional_argument, NULL, 'v' },
		{ "expect", required_argument, NULL, 'e' },
		{ "setup", no_argument, NULL, 's' },
		{ "provider", required_argument, NULL, 'M' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	int status;

	status = tool_getopt(CMD, argc, argv, ":i:q:p:l:b:v::e:sM:h", opts,
			     recv_option, o);
	if (status >= 0)
		return status;
	if (!o->ifname)
		return usage_error(CMD, "--iface is required");
	o->ifindex = (int)if_nametoindex(o->ifname);
	if (!o->ifindex) {
		fprintf(stderr, CMD ": no interface '%s' (see 'ip link')\n", o->ifname);
		return 2;
	}
	return -1;
}

static int last_rx_queue(struct devmemtcp_ctx *ctx, int ifindex, uint32_t *q)
{
	struct devmemtcp_queue qs[512];
	int n = devmemtcp_queue_list(ctx, ifindex, qs, 512);
	int found = 0;

	if (n < 0)
		return n;
	for (int i = 0; i < n && i < 512; i++) {
		if (qs[i].type == DEVMEMTCP_QUEUE_RX && (!found || qs[i].id > *q)) {
			*q = qs[i].id;
			found = 1;
		}
	}
	return found ? 0 : -ENOENT;
}

/* --setup: header split, RSS off the queues, a rule per address family for
 * the port, bind-rx: all undone by devmemtcp_nic_close(). */
static int recv_setup_nic(const struct recv_opts *o, struct recv_run *r)
{
	struct devmemtcp_flow flows[2];
	char text[64];
	int ret;

	for (int i = 0; i < 2; i++) {
		snprintf(text, sizeof(text), "tcp%d dst-port %d", i ? 6 : 4, o->port);
		ret = devmemtcp_flow_parse(text, &flows[i]);
		if (ret) {
			fprintf(stderr, CMD ": %s\n", devmemtcp_ctx_errmsg(NULL));
			return ret;
		}
	}
	DEVMEMTCP_OPTS(nic_opts, no, .queues = o->queues,
		       .nqueues = (uint32_t)o->nqueues, .flows = flows,
		       .nflows = 2, .buf = r->buf);
	ret = devmemtcp_nic_open(r->ctx, o->ifname, &no, &r->nic);
	if (ret) {
		char fix[1024];

		fprintf(stderr, CMD ": NIC setup failed: %s\n",
			tool_fix(devmemtcp_ctx_errmsg(r->ctx), fix, sizeof(fix)));
		return ret;
	}
	r->binding = devmemtcp_nic_binding(r->nic);
	return 0;
}

/* The context, the queues, the buffer and its binding. */
static int recv_bind(struct recv_opts *o, struct recv_run *r)
{
	int ret = tool_ctx_new(CMD, &r->ctx);

	if (ret)
		return ret;
	if (!o->nqueues) {
		ret = last_rx_queue(r->ctx, o->ifindex, &o->queues[0]);
		if (ret) {
			fprintf(stderr, CMD ": %s\n", devmemtcp_ctx_errmsg(r->ctx));
			return ret;
		}
		o->nqueues = 1;
	}
	ret = tool_buf_new(CMD, r->ctx, &o->mem, (uint64_t)o->buf_size, &r->buf);
	if (ret)
		return ret;
	if (o->setup)
		ret = recv_setup_nic(o, r);
	else if ((ret = devmemtcp_bind_rx(r->ctx, o->ifindex, o->queues, o->nqueues,
					  r->buf, NULL, &r->binding))) {
		char fix[1024];

		fprintf(stderr, CMD ": %s\n",
			tool_fix(devmemtcp_ctx_errmsg(r->ctx), fix, sizeof(fix)));
	}
	if (ret)
		return ret;
	printf("bound %llu-byte %s to %s queue%s",
	       (unsigned long long)devmemtcp_buf_size(r->buf),
	       tool_mem_name(&o->mem), o->ifname,
	       o->nqueues > 1 ? "s" : "");
	for (size_t i = 0; i < o->nqueues; i++)
		printf("%s%u", i ? "," : " ", o->queues[i]);
	printf(" as binding %u\n", devmemtcp_binding_id(r->binding));
	fflush(stdout);
	return 0;
}

static int listen_on(const char *addr, int port)
{
	struct sockaddr_storage sa;
	socklen_t salen;
	int fd, one = 1;

	if (tool_sockaddr(CMD, addr, port, &sa, &salen))
		return -1;
	fd = socket(sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sa, salen) || listen(fd, 1)) {
		fprintf(stderr, CMD ": cannot listen on port %d: %s\n",
			port, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

/* One connection, its devmem receiver and the receive buffers. */
static int recv_accept(const struct recv_opts *o, struct recv_run *r)
{
	int ret;

	r->lfd = listen_on(o->listen_addr, o->port);
	if (r->lfd < 0)
		return -1;
	r->fd = accept4(r->lfd, NULL, NULL, SOCK_CLOEXEC);
	if (r->fd < 0) {
		fprintf(stderr, CMD ": accept: %s\n", strerror(errno));
		return -1;
	}
	ret = devmemtcp_rx_new(r->ctx, r->fd, NULL, &r->rx);
	if (ret || (ret = devmemtcp_rx_add_buf(r->rx, devmemtcp_binding_id(r->binding),
					       r->buf))) {
		fprintf(stderr, CMD ": %s\n", r->rx ? devmemtcp_rx_errmsg(r->rx)
						    : devmemtcp_ctx_errmsg(r->ctx));
		return ret;
	}
	r->frags = calloc(MAX_FRAGS, sizeof(*r->frags));
	r->linear = malloc(LINEAR_SIZE);
	r->tmp = malloc(65536);
	return r->frags && r->linear && r->tmp ? 0 : -ENOMEM;
}

/* Check one fragment against the pattern, until the first bad byte. */
static int recv_check(const struct recv_opts *o, struct recv_run *r,
		      const struct devmemtcp_frag *f)
{
	const uint8_t *src = r->tmp;
	long at;
	int ret;

	if (!o->period || r->bad_at != NO_ERROR)
		return 0;
	if (f->flags & DEVMEMTCP_FRAG_LINEAR) {
		src = r->linear + f->offset;
	} else if (f->flags & DEVMEMTCP_FRAG_FOREIGN) {
		return 0;	/* not in our buffer: nothing to compare */
	} else {
		ret = devmemtcp_buf_read(r->buf, f->offset, r->tmp, f->len);
		if (ret) {
			fprintf(stderr, CMD ": %s\n", devmemtcp_buf_errmsg(r->buf));
			return ret;
		}
	}
	at = pattern_check(src, f->len, r->pos, o->period);
	if (at >= 0) {
		r->bad_at = r->pos + (uint64_t)at;
		r->bad_got = src[at];
	}
	return 0;
}

/* Receive to the end of the stream, checking and releasing as we go. */
static int recv_loop(const struct recv_opts *o, struct recv_run *r)
{
	int ret;

	r->t0 = now_s();
	for (;;) {
		int n = devmemtcp_rx_recv(r->rx, r->frags, MAX_FRAGS, r->linear,
					  LINEAR_SIZE);

		if (n == 0)
			break;
		if (n == -EINTR)
			continue;
		if (n < 0)
			goto err_rx;
		for (int i = 0; i < n; i++) {
			ret = recv_check(o, r, &r->frags[i]);
			if (ret)
				return ret;
			r->pos += r->frags[i].len;
		}
		ret = devmemtcp_rx_release(r->rx, r->frags, (size_t)n);
		if (ret)
			goto err_rx;
	}
	r->t1 = now_s();
	ret = devmemtcp_rx_release_all(r->rx);
	if (ret < 0)
		goto err_rx;
	return 0;
err_rx:
	fprintf(stderr, CMD ": %s\n", devmemtcp_rx_errmsg(r->rx));
	return -1;
}

static void print_rx_stats(const struct devmemtcp_rx_stats *st, double secs)
{
	struct utsname u;

	uname(&u);
	printf("kernel:           %s\n", u.release);
	printf("bytes:            %llu (%.1f MB/s)\n", (unsigned long long)st->bytes,
	       secs > 0 ? (double)st->bytes / secs / 1e6 : 0.0);
	printf("dmabuf bytes:     %llu\n", (unsigned long long)st->dmabuf_bytes);
	printf("linear bytes:     %llu\n", (unsigned long long)st->linear_bytes);
	printf("fragments:        %llu\n", (unsigned long long)st->frags);
	printf("tokens returned:  %llu (outstanding %llu, high-water %llu)\n",
	       (unsigned long long)st->tokens_released,
	       (unsigned long long)st->tokens_outstanding,
	       (unsigned long long)st->tokens_outstanding_max);
	printf("dontneed calls:   %llu (partial returns %llu)\n",
	       (unsigned long long)st->dontneed_calls,
	       (unsigned long long)st->partial_returns);
	printf("steering misses:  %llu, foreign fragments %llu\n",
	       (unsigned long long)st->steering_misses,
	       (unsigned long long)st->foreign_frags);
}

/* The statistics, the validation result and the exit status. */
static int recv_report(const struct recv_opts *o, const struct recv_run *r)
{
	DEVMEMTCP_OPTS(rx_stats, st);
	int status = 0;

	devmemtcp_rx_stats(r->rx, &st);
	print_rx_stats(&st, r->t1 > r->t0 ? r->t1 - r->t0 : 0);
	if (o->period && r->bad_at == NO_ERROR) {
		printf("validation:       OK (%llu bytes, pattern i %% %u)\n",
		       (unsigned long long)r->pos, o->period);
	} else if (o->period) {
		printf("validation:       FAILED at stream offset %llu: got 0x%02x, expected 0x%02x\n",
		       (unsigned long long)r->bad_at, r->bad_got,
		       pattern_byte(r->bad_at, o->period));
		status = 1;
	}
	if (o->expect >= 0 && (long long)st.bytes != o->expect) {
		printf("expected %lld bytes, got %llu\n", o->expect,
		       (unsigned long long)st.bytes);
		status = 1;
	}
	if (st.steering_misses || st.foreign_frags) {
		printf("steering: the flow did not (only) land on the bound queue\n");
		status = 1;
	}
	if (st.tokens_outstanding) {
		printf("tokens still outstanding: %llu\n",
		       (unsigned long long)st.tokens_outstanding);
		status = 1;
	}
	return status;
}

static void recv_close(struct recv_run *r)
{
	devmemtcp_rx_free(r->rx);
	if (r->fd >= 0)
		close(r->fd);
	if (r->lfd >= 0)
		close(r->lfd);
	if (r->nic)
		devmemtcp_nic_close(r->nic);	/* unbinds and restores the NIC */
	else
		devmemtcp_binding_close(r->binding);
	devmemtcp_buf_free(r->buf);
	devmemtcp_ctx_free(r->ctx);
	free(r->frags);
	free(r->linear);
	free(r->tmp);
}

int cmd_recv(int argc, char **argv)
{
	struct recv_opts o = { .buf_size = 32 << 20, .expect = -1, .port = 5201 };
	struct recv_run r = { .lfd = -1, .fd = -1, .bad_at = NO_ERROR };
	int status = recv_parse(argc, argv, &o);

	if (status >= 0)
		return status;
	status = 1;
	if (!recv_bind(&o, &r) && !recv_accept(&o, &r) && !recv_loop(&o, &r))
		status = recv_report(&o, &r);
	recv_close(&r);
	return status;
}

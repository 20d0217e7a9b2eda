// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * devmemtcp send: bind a udmabuf or DRM buffer for transmission (bind-tx), connect
 * through the bound interface, and send the test pattern or a file from
 * the dma-buf, then report the TX statistics.  This file owns the command's
 * options, the ring of buffer slots (a slot is refilled only after the
 * kernel reported its last send complete), its steps (bind, loop, report)
 * and its exit status; sending and completion tracking are the library's.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common.h"
#include "pattern.h"

#define CMD "devmemtcp send"
#define WAIT_MS 30000

struct send_opts {
	const char *ifname, *addr, *file;
	const char *bufsize_arg, *chunk_arg;	/* as given, for messages */
	long long total, bufsize, chunk, piece;	/* piece 0: one per slot */
	unsigned int period;
	int port, quiet;
	struct tool_mem mem;
};

struct ring {
	uint64_t chunk;
	size_t nslots;
	uint64_t *sent;		/* bytes in flight per slot */
	uint64_t *done;		/* of which reported free */
};

/* What one run holds; send_close() gives it all back. */
struct send_run {
	struct devmemtcp_ctx *ctx;
	struct devmemtcp_buf *buf;
	struct devmemtcp_binding *binding;
	struct devmemtcp_tx *tx;
	struct devmemtcp_tx_piece *pieces;
	struct ring ring;
	uint8_t *stage;		/* one slot's bytes before they go to the buffer */
	int fd, file_fd;	/* file_fd -1: the pattern */
	uint64_t pos;		/* stream bytes so far */
	double secs;
};

static void send_usage(FILE *f)
{
	fprintf(f,
		"usage: devmemtcp send -i IFACE -c ADDR [options]\n\n"
		"Bind a udmabuf (or a DRM buffer) for transmission on IFACE (bind-tx,\n"
		"Linux 6.16+), connect to ADDR through IFACE and send from the dma-buf\n"
		"with devmem TCP. The buffer is a ring: a slot is refilled only after the\n"
		"kernel reported its last send complete. Prints statistics.\n\n"
		"  -i, --iface IFACE     egress interface (required; the socket is bound to it)\n"
		"  -c, --connect ADDR    peer address, IPv4 or IPv6 (required)\n"
		"  -p, --port PORT       peer TCP port (default 5201)\n"
		"  -n, --bytes SIZE      bytes to send with the pattern (default 64M)\n"
		"  -P, --pattern N       the pattern: byte i is i %% N (default 251; what\n"
		"                        'devmemtcp recv -v' checks)\n"
		"  -f, --file PATH       send the file's bytes instead ('-': standard input)\n"
		"  -b, --buf-size SIZE   buffer size (default 16M)\n"
		"  -M, --provider MEM    " TOOL_MEM_HELP "\n"
		"  -C, --chunk SIZE      bytes per ring slot and send call (default 1M)\n"
		"  -z, --piece SIZE      split each slot into pieces of SIZE bytes, one iovec\n"
		"                        each (like ncdevmem -z; default: one piece)\n"
		"  -q, --quiet           print only errors\n"
		"  -h, --help            this text\n\n"
		"Exit status: 0 on success, 1 on a failed transfer, 2 on bad usage.\n");
}

/* A size option: *v from arg, at least min bytes; -1 to go on, else 2. */
static int size_option(const char *opt, const char *arg, long long min,
		       long long *v)
{
	*v = parse_size(arg);
	if (*v < min)
		return bad_value(CMD, opt, arg, "a size (bytes with K, M or G)");
	return -1;
}

/* One option; returns -1 to go on, else the exit status. */
static int send_option(int c, const char *arg, void *opts)
{
	struct send_opts *o = opts;
	unsigned long long v;

	switch (c) {
	case 'i': o->ifname = arg; break;
	case 'c':
		/* before any buffer is made */
		if (tool_addr_check(arg))
			return bad_value(CMD, "--connect", arg, "an IPv4 or IPv6 address");
		o->addr = arg;
		break;
	case 'p':
		if (parse_uint(arg, 1, 65535, &v))
			return bad_value(CMD, "--port", arg, "a port number (1-65535)");
		o->port = (int)v;
		break;
	case 'n': return size_option("--bytes", arg, 0, &o->total);
	case 'P':
		if (parse_uint(arg, 2, 256, &v))
			return bad_value(CMD, "--pattern", arg, "a pattern period (2-256)");
		o->period = (unsigned int)v;
		break;
	case 'f': o->file = arg; break;
	case 'b':
		o->bufsize_arg = arg;
		return size_option("--buf-size", arg, 1, &o->bufsize);
	case 'C':
		o->chunk_arg = arg;
		return size_option("--chunk", arg, 1, &o->chunk);
	case 'z': return size_option("--piece", arg, 0, &o->piece);
	case 'q': o->quiet = 1; break;
	case 'M':
		if (tool_mem_parse(CMD, arg, &o->mem))
			return 2;
		break;
	case 'h': send_usage(stdout); return 0;
	}
	return -1;
}

/* Returns -1 to go on, else the exit status. */
static int send_parse(int argc, char **argv, struct send_opts *o)
{
	static const struct option lopts[] = {
		{ "iface", required_argument, NULL, 'i' },
		{ "connect", required_argument, NULL, 'c' },
		{ "port", required_argument, NULL, 'p' },
		{ "bytes", required_argument, NULL, 'n' },
		{ "pattern", required_argument, NULL, 'P' },
		{ "file", required_argument, NULL, 'f' },
		{ "buf-size", required_argument, NULL, 'b' },
		{ "chunk", required_argument, NULL, 'C' },
		{ "piece", required_argument, NULL, 'z' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "provider", required_argument, NULL, 'M' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	int status;

	status = tool_getopt(CMD, argc, argv, ":i:c:p:n:P:f:b:C:z:qM:h", lopts,
			     send_option, o);
	if (status >= 0)
		return status;
	if (!o->ifname)
		return usage_error(CMD, "--iface is required");
	if (!o->addr)
		return usage_error(CMD, "--connect is required");
	if (o->chunk > o->bufsize / 2) {
		fprintf(stderr, CMD ": --chunk: \"%s\" must be at most half of --buf-size (%s): the ring needs two slots\n",
			o->chunk_arg, o->bufsize_arg);
		return 2;
	}
	return -1;
}

/* Completed ranges: credit them to their slots (a merged range may cover
 * several). */
static void on_done(void *user, const struct devmemtcp_tx_done *d, size_t n)
{
	struct ring *r = user;

	for (size_t i = 0; i < n; i++) {
		uint64_t off = d[i].offset, end = off + d[i].len;

		while (off < end) {
			size_t k = (size_t)(off / r->chunk);
			uint64_t lim = (k + 1) * r->chunk;
			uint64_t seg = (end < lim ? end : lim) - off;

			if (k < r->nslots)
				r->done[k] += seg;
			off += seg;
		}
	}
}

static int connect_via(const char *addr, int port, const char *ifname)
{
	struct sockaddr_storage sa;
	socklen_t len;
	int fd;

	if (tool_sockaddr(CMD, addr, port, &sa, &len))
		return -1;
	fd = socket(sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	/* devmem TX needs the route to leave through the bound device */
	if (setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, ifname,
		       (socklen_t)strlen(ifname))) {
		fprintf(stderr, CMD ": SO_BINDTODEVICE %s: %s (needs CAP_NET_RAW on old kernels)\n",
			ifname, strerror(errno));
		close(fd);
		return -1;
	}
	if (connect(fd, (struct sockaddr *)&sa, len)) {
		fprintf(stderr, CMD ": connect to %s port %d: %s\n",
			addr, port, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

/* The source, the context, the buffer bound for TX, and the connection. */
static int send_bind(const struct send_opts *o, struct send_run *r)
{
	int ret;

	if (o->file) {
		r->file_fd = strcmp(o->file, "-") ? open(o->file, O_RDONLY | O_CLOEXEC) : 0;
		if (r->file_fd < 0) {
			fprintf(stderr, CMD ": %s: %s\n", o->file, strerror(errno));
			return -1;
		}
	}
	ret = tool_ctx_new(CMD, &r->ctx);
	if (!ret)
		ret = tool_buf_new(CMD, r->ctx, &o->mem, (uint64_t)o->bufsize, &r->buf);
	if (ret)
		return ret;
	ret = devmemtcp_bind_tx(r->ctx, (int)if_nametoindex(o->ifname), r->buf,
				NULL, &r->binding);
	if (ret) {
		fprintf(stderr, CMD ": %s\n", devmemtcp_ctx_errmsg(r->ctx));
		return ret;
	}
	r->fd = connect_via(o->addr, o->port, o->ifname);
	return r->fd < 0 ? -1 : 0;
}

/* The ring's slots, the staging and iovec arrays, and the TX socket. */
static int send_ring_new(const struct send_opts *o, struct send_run *r)
{
	size_t npieces = o->piece ? (size_t)((o->chunk + o->piece - 1) / o->piece) : 1;
	int ret;

	r->ring.chunk = (uint64_t)o->chunk;
	r->ring.nslots = (size_t)(devmemtcp_buf_size(r->buf) / (uint64_t)o->chunk);
	r->ring.sent = calloc(r->ring.nslots, sizeof(*r->ring.sent));
	r->ring.done = calloc(r->ring.nslots, sizeof(*r->ring.done));
	r->stage = malloc((size_t)o->chunk);
	r->pieces = calloc(npieces, sizeof(*r->pieces));
	if (!r->ring.sent || !r->ring.done || !r->stage || !r->pieces) {
		fprintf(stderr, CMD ": out of memory\n");
		return -ENOMEM;
	}
	DEVMEMTCP_OPTS(tx_opts, to, .done_fn = on_done, .done_user = &r->ring);
	ret = devmemtcp_tx_new(r->ctx, r->fd, r->binding, &to, &r->tx);
	if (ret)
		fprintf(stderr, CMD ": %s\n", devmemtcp_ctx_errmsg(r->ctx));
	return ret;
}

/* Fill up to max bytes of the next chunk from the source; 0 at its end. */
static ssize_t fill(int file_fd, uint8_t *dst, size_t max, uint64_t pos,
		    uint64_t total, unsigned int period)
{
	size_t got = 0;

	if (file_fd < 0) {
		size_t n = total - pos < max ? (size_t)(total - pos) : max;

		pattern_fill(dst, n, pos, period);
		return (ssize_t)n;
	}
	while (got < max) {
		ssize_t r = read(file_fd, dst + got, max - got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -1;
		if (!r)
			break;
		got += (size_t)r;
	}
	return (ssize_t)got;
}

/*
 * Refill slot k once the kernel is done with it and send it, in pieces of
 * o->piece bytes.  Returns 1 at the end of the source, 0 when sent,
 * negative on failure.
 */
static int send_slot(const struct send_opts *o, struct send_run *r, size_t k)
{
	uint64_t base = (uint64_t)k * (uint64_t)o->chunk;
	size_t np = 0;
	ssize_t n;
	int ret;

	while (r->ring.done[k] < r->ring.sent[k]) {
		ret = devmemtcp_tx_wait(r->tx, WAIT_MS);
		if (ret < 0)
			goto err_tx;
	}
	n = fill(r->file_fd, r->stage, (size_t)o->chunk, r->pos,
		 (uint64_t)o->total, o->period);
	if (n < 0) {
		fprintf(stderr, CMD ": reading %s: %s\n", o->file, strerror(errno));
		return -1;
	}
	if (!n)
		return 1;
	ret = devmemtcp_buf_write(r->buf, base, r->stage, (size_t)n);
	if (ret) {
		fprintf(stderr, CMD ": %s\n", devmemtcp_buf_errmsg(r->buf));
		return ret;
	}
	for (uint64_t off = 0; off < (uint64_t)n;) {
		uint64_t len = (uint64_t)n - off;

		if (o->piece && len > (uint64_t)o->piece)
			len = (uint64_t)o->piece;
		r->pieces[np++] = (struct devmemtcp_tx_piece){ base + off, len };
		off += len;
	}
	r->ring.sent[k] = (uint64_t)n;
	r->ring.done[k] = 0;
	if (devmemtcp_tx_send(r->tx, r->pieces, np, 0) != n)
		goto err_tx;
	r->pos += (uint64_t)n;
	return 0;
err_tx:
	fprintf(stderr, CMD ": %s\n", devmemtcp_tx_errmsg(r->tx));
	return -1;
}

/* Send the whole source around the ring, then wait for the last completions. */
static int send_loop(const struct send_opts *o, struct send_run *r)
{
	double t0 = now_s();
	size_t k = 0;
	int ret;

	while (!(ret = send_slot(o, r, k)))
		k = (k + 1) % r->ring.nslots;
	if (ret < 0)
		return ret;
	while ((ret = devmemtcp_tx_wait(r->tx, WAIT_MS)) > 0)
		;
	if (ret < 0) {
		fprintf(stderr, CMD ": waiting for completions: %s\n",
			devmemtcp_tx_errmsg(r->tx));
		return ret;
	}
	r->secs = now_s() - t0;
	return 0;
}

static void send_report(const struct send_opts *o, const struct send_run *r)
{
	DEVMEMTCP_OPTS(tx_stats, st);

	devmemtcp_tx_stats(r->tx, &st);
	printf("sent %llu bytes from dma-buf binding %u on %s in %.3f s: %.2f Gbit/s\n",
	       (unsigned long long)st.bytes_sent,
	       devmemtcp_binding_id(r->binding), o->ifname, r->secs,
	       r->secs > 0 ? (double)st.bytes_sent * 8 / r->secs / 1e9 : 0);
	printf("sendmsg calls %llu (partial %llu, ENOBUFS waits %llu); notifications %llu, completions %llu (copied %llu), ranges free %llu (%llu bytes), in flight %llu\n",
	       (unsigned long long)st.sendmsg_calls,
	       (unsigned long long)st.partial_sends,
	       (unsigned long long)st.nobufs_waits,
	       (unsigned long long)st.notifications,
	       (unsigned long long)st.completions,
	       (unsigned long long)st.copied_completions,
	       (unsigned long long)st.ranges_done,
	       (unsigned long long)st.bytes_done,
	       (unsigned long long)st.sends_in_flight);
	if (st.copied_completions)
		printf("note: the kernel copied %llu sends instead of sending them zero-copy\n",
		       (unsigned long long)st.copied_completions);
}

static void send_close(struct send_run *r)
{
	devmemtcp_tx_free(r->tx);
	if (r->fd >= 0)
		close(r->fd);
	devmemtcp_binding_close(r->binding);
	devmemtcp_buf_free(r->buf);
	devmemtcp_ctx_free(r->ctx);
	if (r->file_fd > 0)	/* not standard input */
		close(r->file_fd);
	free(r->ring.sent);
	free(r->ring.done);
	free(r->stage);
	free(r->pieces);
}

int cmd_send(int argc, char **argv)
{
	struct send_opts o = {
		.total = 64ll << 20, .bufsize = 16ll << 20, .chunk = 1ll << 20,
		.bufsize_arg = "16M", .chunk_arg = "1M",
		.period = PATTERN_PERIOD_DEFAULT, .port = 5201,
	};
	struct send_run r = { .fd = -1, .file_fd = -1 };
	int status = send_parse(argc, argv, &o);

	if (status >= 0)
		return status;
	status = 1;
	if (!send_bind(&o, &r) && !send_ring_new(&o, &r) && !send_loop(&o, &r)) {
		status = 0;
		if (!o.quiet)
			send_report(&o, &r);
	}
	send_close(&r);
	return status;
}

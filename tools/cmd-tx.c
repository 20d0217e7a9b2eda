// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/* devmemtcp send: bind-tx a udmabuf, connect, send from it, report. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "devmemtcp.h"
#include "common.h"
#include "pattern.h"

static void send_usage(FILE *f)
{
	fprintf(f,
		"usage: devmemtcp send -i IFACE -c ADDR [options]\n\n"
		"Bind a udmabuf for transmission on IFACE (bind-tx, Linux 6.16+), connect\n"
		"to ADDR through IFACE and send from the dma-buf with devmem TCP. The\n"
		"buffer is a ring: a slot is refilled only after the kernel reported its\n"
		"last send complete. Prints statistics.\n\n"
		"  -i, --iface IFACE     egress interface (required; the socket is bound to it)\n"
		"  -c, --connect ADDR    peer address, IPv4 or IPv6 (required)\n"
		"  -p, --port PORT       peer TCP port (default 5201)\n"
		"  -n, --bytes SIZE      bytes to send with the pattern (default 64M)\n"
		"  -P, --pattern N       the pattern: byte i is i %% N (default 251; what\n"
		"                        'devmemtcp recv -v' checks)\n"
		"  -f, --file PATH       send the file's bytes instead ('-': standard input)\n"
		"  -b, --buf-size SIZE   udmabuf size (default 16M)\n"
		"  -C, --chunk SIZE      bytes per ring slot and send call (default 1M)\n"
		"  -z, --piece SIZE      split each slot into pieces of SIZE bytes, one iovec\n"
		"                        each (like ncdevmem -z; default: one piece)\n"
		"  -q, --quiet           print only errors\n"
		"  -h, --help            this text\n\n"
		"Exit status: 0 on success, 1 on a failed transfer, 2 on bad usage.\n");
}

struct ring {
	uint64_t chunk;
	size_t nslots;
	uint64_t *sent;		/* bytes in flight per slot */
	uint64_t *done;		/* of which reported free */
};

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
	struct sockaddr_in6 sa6 = { .sin6_family = AF_INET6,
				    .sin6_port = htons((uint16_t)port) };
	struct sockaddr_in sa4 = { .sin_family = AF_INET,
				   .sin_port = htons((uint16_t)port) };
	struct sockaddr *sa;
	socklen_t len;
	int fd, family;

	if (inet_pton(AF_INET, addr, &sa4.sin_addr) == 1) {
		family = AF_INET;
		sa = (struct sockaddr *)&sa4;
		len = sizeof(sa4);
	} else if (inet_pton(AF_INET6, addr, &sa6.sin6_addr) == 1) {
		family = AF_INET6;
		sa = (struct sockaddr *)&sa6;
		len = sizeof(sa6);
	} else {
		fprintf(stderr, "devmemtcp send: bad address '%s'\n", addr);
		return -1;
	}
	fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	/* devmem TX needs the route to leave through the bound device */
	if (setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, ifname,
		       (socklen_t)strlen(ifname))) {
		fprintf(stderr, "devmemtcp send: SO_BINDTODEVICE %s: %s (needs CAP_NET_RAW on old kernels)\n",
			ifname, strerror(errno));
		close(fd);
		return -1;
	}
	if (connect(fd, sa, len)) {
		fprintf(stderr, "devmemtcp send: connect to %s port %d: %s\n",
			addr, port, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
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

int cmd_send(int argc, char **argv)
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
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	const char *ifname = NULL, *addr = NULL, *file = NULL;
	long long total = 64ll << 20, bufsize = 16ll << 20, chunk = 1ll << 20;
	long long piece = 0;
	unsigned int period = PATTERN_PERIOD_DEFAULT;
	int port = 5201, quiet = 0, c, ret, status = 1, fd = -1, file_fd = -1;
	struct devmemtcp_ctx *ctx = NULL;
	struct devmemtcp_buf *buf = NULL;
	struct devmemtcp_binding *binding = NULL;
	struct devmemtcp_tx *tx = NULL;
	struct devmemtcp_tx_piece *pieces = NULL;
	struct ring ring = { 0 };
	uint8_t *stage = NULL;
	uint64_t pos = 0;
	double t0, secs;

	optind = 1;
	while ((c = getopt_long(argc, argv, "i:c:p:n:P:f:b:C:z:qh", lopts,
				NULL)) != -1) {
		switch (c) {
		case 'i': ifname = optarg; break;
		case 'c': addr = optarg; break;
		case 'p': port = atoi(optarg); break;
		case 'n': total = parse_size(optarg); break;
		case 'P': period = (unsigned int)atoi(optarg); break;
		case 'f': file = optarg; break;
		case 'b': bufsize = parse_size(optarg); break;
		case 'C': chunk = parse_size(optarg); break;
		case 'z': piece = parse_size(optarg); break;
		case 'q': quiet = 1; break;
		case 'h': send_usage(stdout); return 0;
		default: send_usage(stderr); return 2;
		}
	}
	if (!ifname || !addr || optind != argc || total < 0 || bufsize <= 0 ||
	    chunk <= 0 || piece < 0 || period < 2 || period > 256 ||
	    port <= 0 || port > 65535) {
		send_usage(stderr);
		return 2;
	}
	if (chunk > bufsize / 2) {
		fprintf(stderr, "devmemtcp send: --chunk %lld must be at most half of --buf-size %lld (the ring needs two slots)\n",
			chunk, bufsize);
		return 2;
	}
	if (file) {
		file_fd = strcmp(file, "-") ? open(file, O_RDONLY | O_CLOEXEC) : 0;
		if (file_fd < 0) {
			fprintf(stderr, "devmemtcp send: %s: %s\n", file,
				strerror(errno));
			return 1;
		}
	}

	ret = devmemtcp_ctx_new(NULL, &ctx);
	if (ret) {
		fprintf(stderr, "devmemtcp send: %s\n", strerror(-ret));
		goto out;
	}
	{
		DEVMEMTCP_OPTS(buf_opts, bo, .provider = DEVMEMTCP_PROVIDER_UDMABUF,
			       .size = (uint64_t)bufsize);

		ret = devmemtcp_buf_new(ctx, &bo, &buf);
		if (ret) {
			fprintf(stderr, "devmemtcp send: %s\n",
				devmemtcp_ctx_errmsg(ctx));
			goto out;
		}
	}
	ret = devmemtcp_bind_tx(ctx, (int)if_nametoindex(ifname), buf, NULL,
				&binding);
	if (ret) {
		/* the message was logged; exit 1 */
		goto out;
	}
	fd = connect_via(addr, port, ifname);
	if (fd < 0)
		goto out;
	ring.chunk = (uint64_t)chunk;
	ring.nslots = (size_t)(devmemtcp_buf_size(buf) / (uint64_t)chunk);
	ring.sent = calloc(ring.nslots, sizeof(*ring.sent));
	ring.done = calloc(ring.nslots, sizeof(*ring.done));
	stage = malloc((size_t)chunk);
	pieces = calloc(piece ? (size_t)((chunk + piece - 1) / piece) : 1,
			sizeof(*pieces));
	if (!ring.sent || !ring.done || !stage || !pieces) {
		fprintf(stderr, "devmemtcp send: out of memory\n");
		goto out;
	}
	{
		DEVMEMTCP_OPTS(tx_opts, to, .done_fn = on_done, .done_user = &ring);

		ret = devmemtcp_tx_new(ctx, fd, binding, &to, &tx);
		if (ret) {
			fprintf(stderr, "devmemtcp send: %s\n",
				devmemtcp_ctx_errmsg(ctx));
			goto out;
		}
	}

	t0 = now_s();
	for (size_t k = 0;; k = (k + 1) % ring.nslots) {
		uint64_t base = (uint64_t)k * (uint64_t)chunk;
		size_t np = 0;
		ssize_t n;

		/* the slot is ours again once all its bytes were reported */
		while (ring.done[k] < ring.sent[k]) {
			ret = devmemtcp_tx_wait(tx, 30000);
			if (ret < 0) {
				fprintf(stderr, "devmemtcp send: %s\n",
					devmemtcp_tx_errmsg(tx));
				goto out;
			}
		}
		n = fill(file_fd, stage, (size_t)chunk, pos, (uint64_t)total,
			 period);
		if (n < 0) {
			fprintf(stderr, "devmemtcp send: reading %s: %s\n",
				file, strerror(errno));
			goto out;
		}
		if (!n)
			break;
		ret = devmemtcp_buf_write(buf, base, stage, (size_t)n);
		if (ret) {
			fprintf(stderr, "devmemtcp send: %s\n",
				devmemtcp_buf_errmsg(buf));
			goto out;
		}
		for (uint64_t o = 0; o < (uint64_t)n;) {
			uint64_t len = (uint64_t)n - o;

			if (piece && len > (uint64_t)piece)
				len = (uint64_t)piece;
			pieces[np++] = (struct devmemtcp_tx_piece){ base + o, len };
			o += len;
		}
		ring.sent[k] = (uint64_t)n;
		ring.done[k] = 0;
		if (devmemtcp_tx_send(tx, pieces, np, 0) != n) {
			fprintf(stderr, "devmemtcp send: %s\n",
				devmemtcp_tx_errmsg(tx));
			goto out;
		}
		pos += (uint64_t)n;
	}
	while ((ret = devmemtcp_tx_wait(tx, 30000)) > 0)
		;
	if (ret < 0) {
		fprintf(stderr, "devmemtcp send: waiting for completions: %s\n",
			devmemtcp_tx_errmsg(tx));
		goto out;
	}
	secs = now_s() - t0;
	status = 0;
	if (!quiet) {
		DEVMEMTCP_OPTS(tx_stats, st);

		devmemtcp_tx_stats(tx, &st);
		printf("sent %llu bytes from dma-buf binding %u on %s in %.3f s: %.2f Gbit/s\n",
		       (unsigned long long)st.bytes_sent,
		       devmemtcp_binding_id(binding), ifname, secs,
		       secs > 0 ? (double)st.bytes_sent * 8 / secs / 1e9 : 0);
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
out:
	devmemtcp_tx_free(tx);
	if (fd >= 0)
		close(fd);
	devmemtcp_binding_close(binding);
	devmemtcp_buf_free(buf);
	devmemtcp_ctx_free(ctx);
	if (file_fd > 0)
		close(file_fd);
	free(ring.sent);
	free(ring.done);
	free(stage);
	free(pieces);
	return status;
}

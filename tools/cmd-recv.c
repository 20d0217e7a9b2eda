// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/* devmemtcp recv: bind a udmabuf, accept one connection, receive, report. */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "devmemtcp.h"
#include "common.h"
#include "pattern.h"

#define MAX_FRAGS 1024
#define LINEAR_SIZE (4u << 20)

static void recv_usage(FILE *f)
{
	fprintf(f,
		"usage: devmemtcp recv -i IFACE [options]\n\n"
		"Bind a udmabuf to RX queues of IFACE, accept one TCP connection and\n"
		"receive it into the dma-buf with devmem TCP; print statistics.\n\n"
		"  -i, --iface IFACE     interface to bind (required)\n"
		"  -q, --queues LIST     RX queues, e.g. 3 or 2,3 (default: the last one)\n"
		"  -p, --port PORT       TCP port to listen on (default 5201)\n"
		"  -l, --listen ADDR     address to listen on (default: any)\n"
		"  -b, --buf-size SIZE   udmabuf size (default 32M)\n"
		"  -v, --validate[=N]    check every byte against the pattern i %% N (N=251)\n"
		"  -e, --expect BYTES    fail unless exactly BYTES arrive\n"
		"  -s, --setup           prepare the NIC (header split, RSS, ntuple) and undo after\n"
		"  -h, --help            this text\n\n"
		"Exit status: 0 on success, 1 on a failed transfer or validation, 2 on bad usage.\n");
}

static int parse_queues(const char *s, uint32_t *q, size_t max, size_t *n)
{
	char *end;

	*n = 0;
	while (*s) {
		unsigned long v = strtoul(s, &end, 10);

		if (end == s || *n == max)
			return -1;
		q[(*n)++] = (uint32_t)v;
		s = end;
		if (*s == ',')
			s++;
		else if (*s)
			return -1;
	}
	return *n ? 0 : -1;
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

static int listen_on(const char *addr, int port)
{
	struct sockaddr_in6 sa6 = { .sin6_family = AF_INET6,
				    .sin6_port = htons((uint16_t)port) };
	struct sockaddr_in sa4 = { .sin_family = AF_INET,
				   .sin_port = htons((uint16_t)port) };
	struct sockaddr *sa = (struct sockaddr *)&sa6;
	socklen_t salen = sizeof(sa6);
	int fd, one = 1, family = AF_INET6;

	sa6.sin6_addr = in6addr_any;
	if (addr) {
		if (inet_pton(AF_INET, addr, &sa4.sin_addr) == 1) {
			family = AF_INET;
			sa = (struct sockaddr *)&sa4;
			salen = sizeof(sa4);
		} else if (inet_pton(AF_INET6, addr, &sa6.sin6_addr) != 1) {
			fprintf(stderr, "devmemtcp recv: bad address '%s'\n", addr);
			return -1;
		}
	}
	fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, sa, salen) || listen(fd, 1)) {
		fprintf(stderr, "devmemtcp recv: cannot listen on port %d: %s\n",
			port, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

int cmd_recv(int argc, char **argv)
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
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	const char *ifname = NULL, *listen_addr = NULL;
	long long buf_size = 32 << 20, expect = -1;
	unsigned int period = 0;
	uint32_t queues[64];
	size_t nqueues = 0;
	int port = 5201, setup = 0, c, ret, status = 1;
	struct devmemtcp_ctx *ctx = NULL;
	struct devmemtcp_buf *buf = NULL;
	struct devmemtcp_binding *binding = NULL;
	struct devmemtcp_rx *rx = NULL;
	struct devmemtcp_frag *frags = NULL;
	uint8_t *linear = NULL, *tmp = NULL;
	struct devmemtcp_nic *nic = NULL;
	int lfd = -1, fd = -1, ifindex;
	uint64_t pos = 0, bad_at = UINT64_MAX;
	uint8_t bad_got = 0;
	double t0, t1;

	optind = 1;
	while ((c = getopt_long(argc, argv, "i:q:p:l:b:v::e:sh", opts, NULL)) != -1) {
		switch (c) {
		case 'i': ifname = optarg; break;
		case 'q':
			if (parse_queues(optarg, queues, 64, &nqueues)) {
				fprintf(stderr, "devmemtcp recv: bad queue list '%s'\n", optarg);
				return 2;
			}
			break;
		case 'p': port = atoi(optarg); break;
		case 'l': listen_addr = optarg; break;
		case 'b':
			buf_size = parse_size(optarg);
			if (buf_size <= 0) {
				fprintf(stderr, "devmemtcp recv: bad size '%s'\n", optarg);
				return 2;
			}
			break;
		case 'v':
			period = optarg ? (unsigned int)atoi(optarg) : PATTERN_PERIOD_DEFAULT;
			if (period < 2 || period > 256) {
				fprintf(stderr, "devmemtcp recv: pattern period must be 2..256\n");
				return 2;
			}
			break;
		case 'e': expect = parse_size(optarg); break;
		case 's': setup = 1; break;
		case 'h': recv_usage(stdout); return 0;
		default: recv_usage(stderr); return 2;
		}
	}
	if (!ifname) {
		recv_usage(stderr);
		return 2;
	}
	ifindex = (int)if_nametoindex(ifname);
	if (!ifindex) {
		fprintf(stderr, "devmemtcp recv: no interface '%s' (see 'ip link')\n", ifname);
		return 2;
	}
	ret = devmemtcp_ctx_new(NULL, &ctx);
	if (ret) {
		fprintf(stderr, "devmemtcp recv: %s\n", strerror(-ret));
		return 1;
	}
	if (!nqueues) {
		ret = last_rx_queue(ctx, ifindex, &queues[0]);
		if (ret) {
			fprintf(stderr, "devmemtcp recv: %s\n", devmemtcp_ctx_errmsg(ctx));
			goto out;
		}
		nqueues = 1;
	}
	{
		DEVMEMTCP_OPTS(buf_opts, bo, .provider = DEVMEMTCP_PROVIDER_UDMABUF,
			       .size = (uint64_t)buf_size);
		ret = devmemtcp_buf_new(ctx, &bo, &buf);
	}
	if (ret) {
		fprintf(stderr, "devmemtcp recv: %s\n", devmemtcp_ctx_errmsg(ctx));
		goto out;
	}
	if (setup) {
		/* header split, RSS off the queues, a rule per address family
		 * for the port, bind-rx: all undone by devmemtcp_nic_close() */
		struct devmemtcp_flow flows[2];
		char text[64];

		snprintf(text, sizeof(text), "tcp4 dst-port %d", port);
		devmemtcp_flow_parse(text, &flows[0]);
		snprintf(text, sizeof(text), "tcp6 dst-port %d", port);
		devmemtcp_flow_parse(text, &flows[1]);
		DEVMEMTCP_OPTS(nic_opts, no, .queues = queues,
			       .nqueues = (uint32_t)nqueues, .flows = flows,
			       .nflows = 2, .buf = buf);
		ret = devmemtcp_nic_open(ctx, ifname, &no, &nic);
		if (ret) {
			fprintf(stderr, "devmemtcp recv: NIC setup failed: %s\n",
				devmemtcp_ctx_errmsg(ctx));
			goto out;
		}
		binding = devmemtcp_nic_binding(nic);
	} else {
		ret = devmemtcp_bind_rx(ctx, ifindex, queues, nqueues, buf, NULL,
					&binding);
		if (ret) {
			fprintf(stderr, "devmemtcp recv: %s\n",
				devmemtcp_ctx_errmsg(ctx));
			goto out;
		}
	}
	printf("bound %llu-byte udmabuf to %s queue%s", (unsigned long long)devmemtcp_buf_size(buf),
	       ifname, nqueues > 1 ? "s" : "");
	for (size_t i = 0; i < nqueues; i++)
		printf("%s%u", i ? "," : " ", queues[i]);
	printf(" as binding %u\n", devmemtcp_binding_id(binding));
	fflush(stdout);

	lfd = listen_on(listen_addr, port);
	if (lfd < 0)
		goto out;
	fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "devmemtcp recv: accept: %s\n", strerror(errno));
		goto out;
	}
	ret = devmemtcp_rx_new(ctx, fd, NULL, &rx);
	if (ret || (ret = devmemtcp_rx_add_buf(rx, devmemtcp_binding_id(binding), buf))) {
		fprintf(stderr, "devmemtcp recv: %s\n",
			rx ? devmemtcp_rx_errmsg(rx) : devmemtcp_ctx_errmsg(ctx));
		goto out;
	}
	frags = calloc(MAX_FRAGS, sizeof(*frags));
	linear = malloc(LINEAR_SIZE);
	tmp = malloc(65536);
	if (!frags || !linear || !tmp)
		goto out;

	t0 = now_s();
	for (;;) {
		int n = devmemtcp_rx_recv(rx, frags, MAX_FRAGS, linear, LINEAR_SIZE);

		if (n == 0)
			break;
		if (n == -EINTR)
			continue;
		if (n < 0) {
			fprintf(stderr, "devmemtcp recv: %s\n", devmemtcp_rx_errmsg(rx));
			goto out;
		}
		for (int i = 0; i < n; i++) {
			const struct devmemtcp_frag *f = &frags[i];
			const uint8_t *src;
			long at;

			if (period && bad_at == UINT64_MAX) {
				if (f->flags & DEVMEMTCP_FRAG_LINEAR) {
					src = linear + f->offset;
				} else if (f->flags & DEVMEMTCP_FRAG_FOREIGN) {
					src = NULL;
				} else {
					ret = devmemtcp_buf_read(buf, f->offset, tmp, f->len);
					if (ret) {
						fprintf(stderr, "devmemtcp recv: %s\n",
							devmemtcp_buf_errmsg(buf));
						goto out;
					}
					src = tmp;
				}
				at = src ? pattern_check(src, f->len, pos, period) : -1;
				if (at >= 0) {
					bad_at = pos + (uint64_t)at;
					bad_got = src[at];
				}
			}
			pos += f->len;
		}
		ret = devmemtcp_rx_release(rx, frags, (size_t)n);
		if (ret) {
			fprintf(stderr, "devmemtcp recv: %s\n", devmemtcp_rx_errmsg(rx));
			goto out;
		}
	}
	t1 = now_s();
	ret = devmemtcp_rx_release_all(rx);
	if (ret < 0) {
		fprintf(stderr, "devmemtcp recv: %s\n", devmemtcp_rx_errmsg(rx));
		goto out;
	}
	{
		DEVMEMTCP_OPTS(rx_stats, st);
		struct utsname u;

		devmemtcp_rx_stats(rx, &st);
		uname(&u);
		printf("kernel:           %s\n", u.release);
		printf("bytes:            %llu (%.1f MB/s)\n", (unsigned long long)st.bytes,
		       t1 > t0 ? (double)st.bytes / (t1 - t0) / 1e6 : 0.0);
		printf("dmabuf bytes:     %llu\n", (unsigned long long)st.dmabuf_bytes);
		printf("linear bytes:     %llu\n", (unsigned long long)st.linear_bytes);
		printf("fragments:        %llu\n", (unsigned long long)st.frags);
		printf("tokens returned:  %llu (outstanding %llu, high-water %llu)\n",
		       (unsigned long long)st.tokens_released,
		       (unsigned long long)st.tokens_outstanding,
		       (unsigned long long)st.tokens_outstanding_max);
		printf("dontneed calls:   %llu (partial returns %llu)\n",
		       (unsigned long long)st.dontneed_calls,
		       (unsigned long long)st.partial_returns);
		printf("steering misses:  %llu, foreign fragments %llu\n",
		       (unsigned long long)st.steering_misses,
		       (unsigned long long)st.foreign_frags);
		if (period) {
			if (bad_at == UINT64_MAX)
				printf("validation:       OK (%llu bytes, pattern i %% %u)\n",
				       (unsigned long long)pos, period);
			else
				printf("validation:       FAILED at stream offset %llu: got 0x%02x, expected 0x%02x\n",
				       (unsigned long long)bad_at, bad_got,
				       pattern_byte(bad_at, period));
		}
		status = 0;
		if (period && bad_at != UINT64_MAX)
			status = 1;
		if (expect >= 0 && (long long)st.bytes != expect) {
			printf("expected %lld bytes, got %llu\n", expect,
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
	}
out:
	devmemtcp_rx_free(rx);
	if (fd >= 0)
		close(fd);
	if (lfd >= 0)
		close(lfd);
	if (nic)
		devmemtcp_nic_close(nic);	/* unbinds and restores the NIC */
	else
		devmemtcp_binding_close(binding);
	devmemtcp_buf_free(buf);
	devmemtcp_ctx_free(ctx);
	free(frags);
	free(linear);
	free(tmp);
	return status;
}

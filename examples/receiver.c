// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * receiver: the smallest complete devmem TCP receiver on the public API.
 *
 * Binds a udmabuf to one RX queue of IFACE, accepts one connection on PORT
 * and receives it into the dma-buf, printing where each MiB landed.  The
 * NIC must already steer the flow to QUEUE with header split on (see
 * devmemtcp_nic_open(3) or 'devmemtcp recv --setup').
 *
 * usage: receiver IFACE QUEUE PORT
 */
#include <devmemtcp.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	DEVMEMTCP_OPTS(buf_opts, bo, .provider = DEVMEMTCP_PROVIDER_UDMABUF,
		       .size = 16 << 20);
	struct sockaddr_in6 sa = { .sin6_family = AF_INET6 };
	static struct devmemtcp_frag frags[1024];
	static char linear[4 << 20];
	struct devmemtcp_binding *binding = NULL;
	struct devmemtcp_buf *buf = NULL;
	struct devmemtcp_rx *rx = NULL;
	struct devmemtcp_ctx *ctx;
	unsigned long long total = 0, next_report = 0;
	int ifindex, lfd, fd = -1, n, status = 1;
	uint32_t queue;

	if (argc != 4) {
		fprintf(stderr, "usage: %s IFACE QUEUE PORT\n", argv[0]);
		return 2;
	}
	ifindex = (int)if_nametoindex(argv[1]);
	queue = (uint32_t)atoi(argv[2]);
	sa.sin6_port = htons((uint16_t)atoi(argv[3]));
	if (devmemtcp_ctx_new(NULL, &ctx))
		return 1;
	if (devmemtcp_buf_new(ctx, &bo, &buf) ||
	    devmemtcp_bind_rx(ctx, ifindex, &queue, 1, buf, NULL, &binding)) {
		fprintf(stderr, "%s\n", devmemtcp_ctx_errmsg(ctx));
		goto out;
	}
	lfd = socket(AF_INET6, SOCK_STREAM, 0);
	if (bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) || listen(lfd, 1) ||
	    (fd = accept(lfd, NULL, NULL)) < 0) {
		perror("listen/accept");
		goto out;
	}
	close(lfd);
	if (devmemtcp_rx_new(ctx, fd, NULL, &rx)) {
		fprintf(stderr, "%s\n", devmemtcp_ctx_errmsg(ctx));
		goto out;
	}
	/* a handle's failures are explained on the handle */
	if (devmemtcp_rx_add_buf(rx, devmemtcp_binding_id(binding), buf)) {
		fprintf(stderr, "%s\n", devmemtcp_rx_errmsg(rx));
		goto out;
	}
	while ((n = devmemtcp_rx_recv(rx, frags, 1024, linear, sizeof(linear))) > 0) {
		for (int i = 0; i < n; i++) {
			if (total >= next_report && !(frags[i].flags & DEVMEMTCP_FRAG_LINEAR)) {
				printf("stream byte %llu: dma-buf offset %#llx, address %#llx\n",
				       total, (unsigned long long)frags[i].offset,
				       (unsigned long long)frags[i].addr);
				next_report += 1 << 20;
			}
			total += frags[i].len;
		}
		/* consume the bytes here, then give the buffers back to the NIC */
		if (devmemtcp_rx_release(rx, frags, (size_t)n) < 0)
			break;
	}
	if (n < 0)
		fprintf(stderr, "%s\n", devmemtcp_rx_errmsg(rx));
	else
		status = 0;
	printf("received %llu bytes\n", total);
out:
	devmemtcp_rx_free(rx);
	if (fd >= 0)
		close(fd);
	devmemtcp_binding_close(binding);
	devmemtcp_buf_free(buf);
	devmemtcp_ctx_free(ctx);
	return status;
}

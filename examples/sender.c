// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * sender: send a message from device memory with devmem TCP TX.
 *
 *   sender IFACE ADDR PORT [COUNT]
 *
 * Puts a text line into a udmabuf, binds it for TX on IFACE, connects to
 * ADDR:PORT through IFACE and sends the line COUNT times (default 4) by
 * dma-buf offset, then waits with poll(2) until the kernel has finished
 * with every range.  Try it against 'devmemtcp recv' or 'nc -l PORT' on
 * the peer.  Needs Linux 6.16 and a NIC whose driver supports devmem TX.
 */
#include <errno.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <devmemtcp.h>

static int connect_via(const char *ifname, const char *addr, int port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons((uint16_t)port) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0 || inet_pton(AF_INET, addr, &sa.sin_addr) != 1)
		return -1;
	/* devmem TX only leaves through the device the buffer is bound to */
	if (setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, ifname,
		       (socklen_t)strlen(ifname)) ||
	    connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		perror("connect");
		close(fd);
		return -1;
	}
	return fd;
}

int main(int argc, char **argv)
{
	static const char line[] = "hello from device memory\n";
	DEVMEMTCP_OPTS(buf_opts, bo, .provider = DEVMEMTCP_PROVIDER_UDMABUF,
		       .size = 1 << 20);
	struct devmemtcp_ctx *ctx = NULL;
	struct devmemtcp_buf *buf = NULL;
	struct devmemtcp_binding *binding = NULL;
	struct devmemtcp_tx *tx = NULL;
	struct devmemtcp_tx_piece pieces[64];
	struct devmemtcp_tx_done done[16];
	int count = argc > 4 ? atoi(argv[4]) : 4, fd = -1, ret = 1, n;
	uint64_t freed = 0, total = 0;

	if (argc < 4 || count < 1 || count > 64) {
		fprintf(stderr, "usage: %s IFACE ADDR PORT [COUNT (1-64)]\n",
			argv[0]);
		return 2;
	}
	if (devmemtcp_ctx_new(NULL, &ctx))
		return 1;
	if (devmemtcp_buf_new(ctx, &bo, &buf) ||
	    devmemtcp_bind_tx(ctx, (int)if_nametoindex(argv[1]), buf, NULL,
			      &binding)) {
		fprintf(stderr, "%s\n", devmemtcp_ctx_errmsg(ctx));
		goto out;
	}
	/* CPU-write the payload (udmabuf is host memory) at offset 4096 */
	if (devmemtcp_buf_write(buf, 4096, line, sizeof(line) - 1)) {
		fprintf(stderr, "%s\n", devmemtcp_buf_errmsg(buf));
		goto out;
	}
	fd = connect_via(argv[1], argv[2], atoi(argv[3]));
	if (fd < 0)
		goto out;
	if (devmemtcp_tx_new(ctx, fd, binding, NULL, &tx)) {
		fprintf(stderr, "%s\n", devmemtcp_ctx_errmsg(ctx));
		goto out;
	}

	/* the same dma-buf range COUNT times: one sendmsg, COUNT iovecs */
	for (int i = 0; i < count; i++) {
		pieces[i] = (struct devmemtcp_tx_piece){ 4096, sizeof(line) - 1 };
		total += sizeof(line) - 1;
	}
	if (devmemtcp_tx_send(tx, pieces, (size_t)count, 0) != (ssize_t)total) {
		fprintf(stderr, "send: %s\n", devmemtcp_tx_errmsg(tx));
		goto out;
	}

	/* completions arrive as POLLERR on the socket */
	while (freed < total) {
		struct pollfd p = { .fd = devmemtcp_tx_fd(tx), .events = 0 };

		if (poll(&p, 1, 5000) <= 0) {
			fprintf(stderr, "no completion within 5 s\n");
			goto out;
		}
		while ((n = devmemtcp_tx_reap(tx, done, 16)) > 0) {
			for (int i = 0; i < n; i++) {
				printf("free again: dma-buf [%llu, +%llu) (send %u%s)\n",
				       (unsigned long long)done[i].offset,
				       (unsigned long long)done[i].len,
				       done[i].seq,
				       done[i].flags & DEVMEMTCP_TX_DONE_COPIED
					       ? ", copied" : "");
				freed += done[i].len;
			}
		}
		if (n < 0) {
			fprintf(stderr, "reap: %s\n", devmemtcp_tx_errmsg(tx));
			goto out;
		}
	}
	printf("sent %llu bytes from device memory\n", (unsigned long long)total);
	ret = 0;
out:
	devmemtcp_tx_free(tx);
	if (fd >= 0)
		close(fd);
	devmemtcp_binding_close(binding);
	devmemtcp_buf_free(buf);
	devmemtcp_ctx_free(ctx);
	return ret;
}

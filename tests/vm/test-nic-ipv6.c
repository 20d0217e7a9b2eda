// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * test-nic-ipv6 IFACE (the receiver, dsim1): an IPv6 flow steered by the NIC
 * layer lands on the devmem queue: every payload byte arrives in the bound
 * udmabuf with the pattern intact, nothing as a steering miss; an IPv4 flow
 * on the same handle too (one flow per queue, no context).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness-nic.h"
#include "pattern.h"

#define PERIOD PATTERN_PERIOD_DEFAULT

static struct devmemtcp_ctx *ctx;
static const char *ifname;

struct rx_arg {
	int lfd;
	uint32_t binding;
	struct devmemtcp_buf *buf;
	uint64_t bytes, dmabuf, linear, foreign, misses;
	int ret;
};

static void *rx_main(void *p)
{
	struct rx_arg *a = p;
	struct devmemtcp_frag *frags = calloc(1024, sizeof(*frags));
	static char linear[1 << 16];
	static uint8_t tmp[1 << 16];
	struct devmemtcp_rx *rx;
	DEVMEMTCP_OPTS(rx_stats, st);
	int s, n;

	a->ret = 1;
	s = accept(a->lfd, NULL, NULL);
	if (s < 0 || devmemtcp_rx_new(ctx, s, NULL, &rx))
		return NULL;
	devmemtcp_rx_add_buf(rx, a->binding, a->buf);
	while ((n = devmemtcp_rx_recv(rx, frags, 1024, linear, sizeof(linear))) > 0) {
		for (int i = 0; i < n; i++) {
			const struct devmemtcp_frag *f = &frags[i];

			if (f->flags & DEVMEMTCP_FRAG_LINEAR) {
				if (pattern_check((uint8_t *)linear + f->offset, f->len,
						  a->bytes, PERIOD) >= 0)
					return NULL;
				a->linear += f->len;
			} else {
				if (f->flags & DEVMEMTCP_FRAG_FOREIGN)
					a->foreign++;
				if (f->len > sizeof(tmp) ||
				    devmemtcp_buf_read(a->buf, f->offset, tmp, f->len) ||
				    pattern_check(tmp, f->len, a->bytes, PERIOD) >= 0) {
					fprintf(stderr, "payload mismatch at %llu\n",
						(unsigned long long)a->bytes);
					return NULL;
				}
				a->dmabuf += f->len;
			}
			a->bytes += f->len;
		}
		devmemtcp_rx_release(rx, frags, (size_t)n);
	}
	devmemtcp_rx_stats(rx, &st);
	a->misses = st.steering_misses;
	devmemtcp_rx_free(rx);
	close(s);
	free(frags);
	a->ret = n < 0;
	return NULL;
}

static int transfer(const char *addr, int port, struct devmemtcp_nic *nic,
		    struct devmemtcp_buf *buf)
{
	const uint64_t bytes = 16u << 20;
	struct rx_arg a = { .buf = buf };
	struct vm_sender *snd;
	pthread_t t;

	a.binding = devmemtcp_binding_id(devmemtcp_nic_binding(nic));
	a.lfd = t_listen(addr, port);
	T_CHECK(a.lfd >= 0, "listen");
	pthread_create(&t, NULL, rx_main, &a);
	snd = vm_send_start(addr, port, bytes, PERIOD);
	T_CHECK(vm_send_wait(snd) == 0, "sender");
	pthread_join(t, NULL);
	close(a.lfd);
	T_CHECK(a.ret == 0, "receiver");
	T_CHECK(a.bytes == bytes, "%llu of %llu bytes", (unsigned long long)a.bytes,
		(unsigned long long)bytes);
	T_CHECK(a.misses == 0 && a.foreign == 0, "steering misses %llu, foreign %llu",
		(unsigned long long)a.misses, (unsigned long long)a.foreign);
	T_CHECK(a.dmabuf >= bytes - a.linear && a.dmabuf > bytes / 2,
		"only %llu bytes in device memory", (unsigned long long)a.dmabuf);
	printf("%s port %d: %llu bytes, %llu in the dma-buf, %llu linear\n", addr, port,
	       (unsigned long long)a.bytes, (unsigned long long)a.dmabuf,
	       (unsigned long long)a.linear);
	return 0;
}

int main(int argc, char **argv)
{
	struct devmemtcp_flow f[2];
	struct devmemtcp_buf *buf;
	struct devmemtcp_nic *nic;
	char *before, *after;
	static const uint32_t q[] = { 2, 3 };

	T_CHECK(vm_topology(VM_TX_IF, VM_RX_IF) >= 0, "topology");
	T_TRY(nic_init(argc, argv, &ctx, &ifname));
	before = nic_dump();
	T_CHECK(t_udmabuf(ctx, 32u << 20, &buf) == 0, "udmabuf");
	devmemtcp_flow_parse("tcp6 src-ip " VM_TX_ADDR6 " dst-ip " VM_RX_ADDR6 " dst-port 5206 queue 1", &f[0]);
	devmemtcp_flow_parse("dst-ip " VM_RX_ADDR4 "/24 dst-port 5207 queue 0", &f[1]);
	DEVMEMTCP_OPTS(nic_opts, o, .queues = q, .nqueues = 2, .flows = f, .nflows = 2,
		       .buf = buf);
	T_CHECK(devmemtcp_nic_open(ctx, ifname, &o, &nic) == 0, "open: %s",
		devmemtcp_ctx_errmsg(ctx));
	T_TRY(transfer(VM_RX_ADDR6, 5206, nic, buf));
	T_TRY(transfer(VM_RX_ADDR4, 5207, nic, buf));
	T_CHECK(devmemtcp_nic_close(nic) == 0, "close");
	devmemtcp_buf_free(buf);
	after = nic_dump();
	return nic_same(before, after, "after the IPv6 test");
}

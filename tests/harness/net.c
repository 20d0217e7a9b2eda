// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/* The harness: namespaces and sockets; see harness.h. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_xdp.h>
#include <net/if.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "pattern.h"

/* 15 s for the devices of a previous test's namespaces to come back */
static bool devices_here(const char *tx_if, const char *rx_if)
{
	for (int i = 0; i < 150; i++) {
		if (if_nametoindex(tx_if) && if_nametoindex(rx_if))
			return true;
		usleep(100000);
	}
	return false;
}

int vm_topology(const char *tx_if, const char *rx_if)
{
	struct stat st;

	if (stat("/var/run/netns/" VM_RX_NS, &st) == 0)
		return 0;
	if (!devices_here(tx_if, rx_if)) {
		fprintf(stderr, "no %s / %s here after 15 s: is devmemsim loaded?\n",
			tx_if, rx_if);
		return -1;
	}
	if (t_run("set -e; mkdir -p /var/run/netns;"
		  "ip netns add " VM_TX_NS "; ip netns add " VM_RX_NS ";"
		  "ip link set %s netns " VM_TX_NS "; ip link set %s netns " VM_RX_NS ";"
		  "ip -n " VM_TX_NS " link set lo up; ip -n " VM_RX_NS " link set lo up;"
		  "ip -n " VM_TX_NS " addr add " VM_TX_ADDR4 "/24 dev %s;"
		  "ip -n " VM_RX_NS " addr add " VM_RX_ADDR4 "/24 dev %s;"
		  "ip -n " VM_TX_NS " addr add " VM_TX_ADDR6 "/64 dev %s nodad;"
		  "ip -n " VM_RX_NS " addr add " VM_RX_ADDR6 "/64 dev %s nodad;"
		  "ip -n " VM_TX_NS " link set %s up; ip -n " VM_RX_NS " link set %s up",
		  tx_if, rx_if, tx_if, rx_if, tx_if, rx_if, tx_if, rx_if)) {
		fprintf(stderr, "could not build the namespaces " VM_TX_NS "/" VM_RX_NS
			" with ip(8)\n");
		return -1;
	}
	return 1;
}

void vm_topology_remove(void)
{
	t_run("ip netns del " VM_TX_NS " 2>/dev/null; ip netns del " VM_RX_NS " 2>/dev/null");
	usleep(200000);
}

int vm_enter(const char *ns)
{
	char path[64];
	int fd, ret;

	snprintf(path, sizeof(path), "/var/run/netns/%s", ns);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ret = setns(fd, CLONE_NEWNET);
	close(fd);
	return ret;
}

int vm_sim_knob(const char *ifname, const char *knob, unsigned long long v)
{
	char path[128];
	FILE *f;

	snprintf(path, sizeof(path), "/sys/kernel/debug/devmemsim/%s/%s", ifname, knob);
	f = fopen(path, "we");
	if (!f)
		return -1;
	fprintf(f, "%llu\n", v);
	return fclose(f) ? -1 : 0;
}

int t_sockaddr(const char *addr, int port, struct sockaddr_storage *ss, socklen_t *len)
{
	struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;

	memset(ss, 0, sizeof(*ss));
	if (inet_pton(AF_INET, addr, &s4->sin_addr) == 1) {
		s4->sin_family = AF_INET;
		s4->sin_port = htons((uint16_t)port);
		*len = sizeof(*s4);
		return AF_INET;
	}
	if (inet_pton(AF_INET6, addr, &s6->sin6_addr) == 1) {
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons((uint16_t)port);
		*len = sizeof(*s6);
		return AF_INET6;
	}
	return -1;
}

int t_listen(const char *addr, int port)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int one = 1, fd, family = t_sockaddr(addr, port, &ss, &len);

	if (family < 0) {
		fprintf(stderr, "listen: bad address %s\n", addr);
		return -1;
	}
	fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		fprintf(stderr, "socket: %s\n", strerror(errno));
		return -1;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&ss, len) || listen(fd, 16)) {
		fprintf(stderr, "listen on %s port %d: %s\n", addr, port, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

int t_xsk_bind(int ifindex, uint32_t queue)
{
	enum { CHUNKS = 16, CHUNK = 4096 };
	struct sockaddr_xdp sx = { .sxdp_family = AF_XDP, .sxdp_ifindex = (uint32_t)ifindex,
				   .sxdp_queue_id = queue, .sxdp_flags = XDP_COPY };
	void *umem = mmap(NULL, CHUNKS * CHUNK, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct xdp_umem_reg mr = { .addr = (uintptr_t)umem, .len = CHUNKS * CHUNK,
				   .chunk_size = CHUNK };
	int n = CHUNKS, fd = socket(AF_XDP, SOCK_RAW | SOCK_CLOEXEC, 0);

	if (fd < 0 || umem == MAP_FAILED ||
	    setsockopt(fd, SOL_XDP, XDP_UMEM_REG, &mr, sizeof(mr)) ||
	    setsockopt(fd, SOL_XDP, XDP_UMEM_FILL_RING, &n, sizeof(n)) ||
	    setsockopt(fd, SOL_XDP, XDP_UMEM_COMPLETION_RING, &n, sizeof(n)) ||
	    setsockopt(fd, SOL_XDP, XDP_RX_RING, &n, sizeof(n)) ||
	    bind(fd, (struct sockaddr *)&sx, sizeof(sx))) {
		fprintf(stderr, "AF_XDP socket on ifindex %d queue %u: %s\n", ifindex,
			queue, strerror(errno));
		if (fd >= 0)
			close(fd);
		fd = -1;
	}
	/* the socket pinned the pages it uses: the mapping is not needed */
	if (umem != MAP_FAILED)
		munmap(umem, CHUNKS * CHUNK);
	return fd;
}

int t_tcp_pair(int sv[2])
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sa);
	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	sv[0] = sv[1] = -1;
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, len) || listen(lfd, 1) ||
	    getsockname(lfd, (struct sockaddr *)&sa, &len))
		goto err;
	sv[0] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (sv[0] < 0 || connect(sv[0], (struct sockaddr *)&sa, len))
		goto err;
	sv[1] = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	if (sv[1] < 0)
		goto err;
	close(lfd);
	return 0;
err:
	fprintf(stderr, "TCP pair on 127.0.0.1: %s\n", strerror(errno));
	if (sv[0] >= 0)
		close(sv[0]);
	if (lfd >= 0)
		close(lfd);
	sv[0] = -1;
	return -1;
}

static int socket_on(int family, const char *bind_dev)
{
	int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0) {
		fprintf(stderr, "socket: %s\n", strerror(errno));
		return -1;
	}
	if (bind_dev && setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, bind_dev,
				   (socklen_t)strlen(bind_dev))) {
		fprintf(stderr, "SO_BINDTODEVICE %s: %s\n", bind_dev, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

int t_connect(const char *addr, int port, const char *bind_dev)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int family = t_sockaddr(addr, port, &ss, &len), fd;

	if (family < 0) {
		fprintf(stderr, "connect: bad address %s\n", addr);
		return -1;
	}
	for (int tries = 0; tries < 200; tries++) {
		fd = socket_on(family, bind_dev);
		if (fd < 0)
			return -1;
		if (!connect(fd, (struct sockaddr *)&ss, len))
			return fd;
		close(fd);
		usleep(50000);
	}
	fprintf(stderr, "connect to %s port %d: %s\n", addr, port, strerror(errno));
	return -1;
}

int t_send_pattern(int fd, uint64_t bytes, unsigned int period)
{
	static __thread uint8_t chunk[1 << 16];
	uint64_t pos = 0;

	while (pos < bytes) {
		size_t n = bytes - pos < sizeof(chunk) ? (size_t)(bytes - pos) : sizeof(chunk);
		ssize_t w;

		pattern_fill(chunk, n, pos, period);
		w = write(fd, chunk, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			fprintf(stderr, "send: %s\n", strerror(errno));
			return -1;
		}
		pos += (uint64_t)w;
	}
	return 0;
}

struct vm_sender {
	pthread_t thread;
	char addr[64];
	int port;
	uint64_t bytes;
	unsigned int period;
	int result;
};

static void *sender_main(void *arg)
{
	struct vm_sender *s = arg;
	int fd;

	s->result = 1;
	if (vm_enter(VM_TX_NS))
		return NULL;
	fd = t_connect(s->addr, s->port, NULL);
	if (fd < 0)
		return NULL;
	s->result = t_send_pattern(fd, s->bytes, s->period) ? 1 : 0;
	close(fd);
	return NULL;
}

struct vm_sender *vm_send_start(const char *addr, int port, uint64_t bytes,
				unsigned int period)
{
	struct vm_sender *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	snprintf(s->addr, sizeof(s->addr), "%s", addr);
	s->port = port;
	s->bytes = bytes;
	s->period = period;
	if (pthread_create(&s->thread, NULL, sender_main, s)) {
		free(s);
		return NULL;
	}
	return s;
}

int vm_send_wait(struct vm_sender *s)
{
	int r;

	if (!s)
		return 1;
	pthread_join(s->thread, NULL);
	r = s->result;
	free(s);
	return r;
}

struct transfer_rx {
	void (*rx)(int lfd, void *arg);
	void *arg;
	int lfd;
};

static void *transfer_rx_main(void *arg)
{
	struct transfer_rx *t = arg;

	t->rx(t->lfd, t->arg);
	return NULL;
}

int vm_transfer(const char *addr, int port, uint64_t bytes, unsigned int period,
		void (*rx)(int lfd, void *arg), void *arg)
{
	struct transfer_rx t = { rx, arg, t_listen(addr, port) };
	struct vm_sender *snd;
	pthread_t thread;
	int sent;

	T_CHECK(t.lfd >= 0, "listen on %s port %d", addr, port);
	T_CHECK(pthread_create(&thread, NULL, transfer_rx_main, &t) == 0, "receiver thread");
	snd = vm_send_start(addr, port, bytes, period);
	sent = vm_send_wait(snd);
	pthread_join(thread, NULL);
	close(t.lfd);
	T_CHECK(sent == 0, "sending %llu bytes to %s port %d failed",
		(unsigned long long)bytes, addr, port);
	return 0;
}

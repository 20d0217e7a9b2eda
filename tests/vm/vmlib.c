// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/* Helpers for the vm suite; see vmlib.h. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "pattern.h"
#include "vmlib.h"

int vm_topology(void)
{
	struct stat st;

	if (stat("/var/run/netns/dmtB", &st) == 0)
		return 0;
	return system("set -e; mkdir -p /var/run/netns;"
		      "ip netns add dmtA; ip netns add dmtB;"
		      "ip link set " VM_TX_IF " netns dmtA;"
		      "ip link set " VM_RX_IF " netns dmtB;"
		      "ip -n dmtA link set lo up; ip -n dmtB link set lo up;"
		      "ip -n dmtA addr add " VM_TX_ADDR4 "/24 dev " VM_TX_IF ";"
		      "ip -n dmtB addr add " VM_RX_ADDR4 "/24 dev " VM_RX_IF ";"
		      "ip -n dmtA addr add " VM_TX_ADDR6 "/64 dev " VM_TX_IF " nodad;"
		      "ip -n dmtB addr add " VM_RX_ADDR6 "/64 dev " VM_RX_IF " nodad;"
		      "ip -n dmtA link set " VM_TX_IF " up;"
		      "ip -n dmtB link set " VM_RX_IF " up") ? -1 : 0;
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

int vm_kernel_version(void)
{
	struct utsname u;
	int major = 0, minor = 0;

	uname(&u);
	sscanf(u.release, "%d.%d", &major, &minor);
	return major * 100 + minor;
}

static int sockaddr_of(const char *addr, int port, struct sockaddr_storage *ss,
		       socklen_t *len)
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

int vm_listen(const char *addr, int port)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int one = 1, fd, family = sockaddr_of(addr, port, &ss, &len);

	if (family < 0)
		return -1;
	fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&ss, len) || listen(fd, 16)) {
		fprintf(stderr, "listen %s:%d: %s\n", addr, port, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
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
	struct sockaddr_storage ss;
	static __thread uint8_t chunk[1 << 16];
	uint64_t pos = 0;
	socklen_t len;
	int fd, family;

	s->result = 1;
	if (vm_enter("dmtA"))
		return NULL;
	family = sockaddr_of(s->addr, s->port, &ss, &len);
	fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	for (int tries = 0; connect(fd, (struct sockaddr *)&ss, len); tries++) {
		if (tries == 50) {
			fprintf(stderr, "connect %s:%d: %s\n", s->addr, s->port,
				strerror(errno));
			close(fd);
			return NULL;
		}
		usleep(100000);
		close(fd);
		fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	}
	while (pos < s->bytes) {
		size_t n = sizeof(chunk);
		ssize_t w;

		if (n > s->bytes - pos)
			n = (size_t)(s->bytes - pos);
		pattern_fill(chunk, n, pos, s->period);
		w = write(fd, chunk, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			fprintf(stderr, "send: %s\n", strerror(errno));
			close(fd);
			return NULL;
		}
		pos += (uint64_t)w;
	}
	close(fd);
	s->result = 0;
	return NULL;
}

struct vm_sender *vm_send_start(const char *addr, int port, uint64_t bytes,
				unsigned int period)
{
	struct vm_sender *s = calloc(1, sizeof(*s));

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

// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/* vm-sender ADDR PORT BYTES [PERIOD]: send BYTES of the test pattern over
 * plain TCP from the current network namespace (the peer of devmemtcp
 * recv in the main job and the vm suite). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "pattern.h"

int main(int argc, char **argv)
{
	struct sockaddr_in6 s6 = { .sin6_family = AF_INET6 };
	struct sockaddr_in s4 = { .sin_family = AF_INET };
	static uint8_t chunk[1 << 16];
	unsigned int period = argc > 4 ? (unsigned int)atoi(argv[4]) : PATTERN_PERIOD_DEFAULT;
	unsigned long long bytes, pos = 0;
	struct sockaddr *sa;
	socklen_t len;
	char *end;
	int fd;

	if (argc < 4 || period < 2 || period > 256) {
		fprintf(stderr, "usage: %s ADDR PORT BYTES[K|M|G] [PERIOD]\n", argv[0]);
		return 2;
	}
	bytes = strtoull(argv[3], &end, 0);
	if (*end == 'K') bytes <<= 10;
	if (*end == 'M') bytes <<= 20;
	if (*end == 'G') bytes <<= 30;
	if (inet_pton(AF_INET, argv[1], &s4.sin_addr) == 1) {
		s4.sin_port = htons((uint16_t)atoi(argv[2]));
		sa = (struct sockaddr *)&s4;
		len = sizeof(s4);
	} else if (inet_pton(AF_INET6, argv[1], &s6.sin6_addr) == 1) {
		s6.sin6_port = htons((uint16_t)atoi(argv[2]));
		sa = (struct sockaddr *)&s6;
		len = sizeof(s6);
	} else {
		fprintf(stderr, "%s: bad address %s\n", argv[0], argv[1]);
		return 2;
	}
	for (int tries = 0;; tries++) {
		fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (!connect(fd, sa, len))
			break;
		close(fd);
		if (tries == 100) {
			fprintf(stderr, "%s: connect: %s\n", argv[0], strerror(errno));
			return 1;
		}
		usleep(100000);
	}
	while (pos < bytes) {
		size_t n = bytes - pos < sizeof(chunk) ? (size_t)(bytes - pos) : sizeof(chunk);
		ssize_t w;

		pattern_fill(chunk, n, pos, period);
		w = write(fd, chunk, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			fprintf(stderr, "%s: write: %s\n", argv[0], strerror(errno));
			return 1;
		}
		pos += (unsigned long long)w;
	}
	close(fd);
	return 0;
}

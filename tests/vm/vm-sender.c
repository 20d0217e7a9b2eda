// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/* vm-sender ADDR PORT BYTES [PERIOD]: send BYTES of the test pattern over
 * plain TCP from the current network namespace (the peer of devmemtcp
 * recv in the main job and the vm suite). */
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"
#include "pattern.h"

int main(int argc, char **argv)
{
	unsigned int period = argc > 4 ? (unsigned int)atoi(argv[4]) : PATTERN_PERIOD_DEFAULT;
	struct sockaddr_storage ss;
	socklen_t len;
	int fd, r;

	if (argc < 4 || period < 2 || period > 256) {
		fprintf(stderr, "usage: %s ADDR PORT BYTES[K|M|G] [PERIOD]\n", argv[0]);
		return 2;
	}
	if (t_sockaddr(argv[1], 0, &ss, &len) < 0) {
		fprintf(stderr, "%s: bad address %s\n", argv[0], argv[1]);
		return 2;
	}
	fd = t_connect(argv[1], atoi(argv[2]), NULL);
	if (fd < 0)
		return 1;
	r = t_send_pattern(fd, t_parse_bytes(argv[3]), period);
	close(fd);
	return r ? 1 : 0;
}

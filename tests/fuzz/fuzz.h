/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * What the fuzz harnesses share: reading typed values from the fuzzer's
 * bytes (past the end every read gives zeros, so any input is a complete
 * program), and a check that aborts with the failed condition, which
 * libFuzzer reports as a crash and saves as a reproducer.  Each harness is
 * one LLVMFuzzerTestOneInput; replay.c gives it a main() for builds
 * without libFuzzer, which run the committed corpus as a unit test.
 */
#ifndef DEVMEMTCP_FUZZ_H
#define DEVMEMTCP_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "devmemtcp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct fz {
	const uint8_t *p;
	size_t n;
};

static inline struct fz fz_init(const uint8_t *data, size_t size)
{
	return (struct fz){ data, size };
}

static inline size_t fz_left(const struct fz *f)
{
	return f->n;
}

/* Up to len bytes into out (zero-filled past the end); bytes taken. */
static inline size_t fz_bytes(struct fz *f, void *out, size_t len)
{
	size_t k = len < f->n ? len : f->n;

	if (k)
		memcpy(out, f->p, k);
	if (k < len)
		memset((uint8_t *)out + k, 0, len - k);
	f->p += k;
	f->n -= k;
	return k;
}

static inline uint8_t fz_u8(struct fz *f)
{
	uint8_t v;

	fz_bytes(f, &v, 1);
	return v;
}

static inline uint16_t fz_u16(struct fz *f)
{
	uint16_t v;

	fz_bytes(f, &v, 2);
	return v;
}

static inline uint32_t fz_u32(struct fz *f)
{
	uint32_t v;

	fz_bytes(f, &v, 4);
	return v;
}

static inline uint64_t fz_u64(struct fz *f)
{
	uint64_t v;

	fz_bytes(f, &v, 8);
	return v;
}

/* A value in [0, n) (n > 0). */
static inline uint32_t fz_below(struct fz *f, uint32_t n)
{
	return n <= 256 ? fz_u8(f) % n : fz_u32(f) % n;
}

/* The rest of the input in a heap block of exactly its size, so that
 * AddressSanitizer sees a read one byte past it. */
static inline uint8_t *fz_rest(struct fz *f, size_t *len)
{
	uint8_t *b = malloc(f->n ? f->n : 1);

	if (!b)
		abort();
	*len = fz_bytes(f, b, f->n);
	return b;
}

static inline void fz_quiet(void *user, int level, const char *msg)
{
	(void)user;
	(void)level;
	(void)msg;
}

/* One context for the whole run whose messages go nowhere: the library
 * logs what it refuses, and the fuzzer makes it refuse a lot. */
static inline struct devmemtcp_ctx *fz_ctx(void)
{
	static struct devmemtcp_ctx *ctx;

	if (!ctx) {
		DEVMEMTCP_OPTS(ctx_opts, o, .log_fn = fz_quiet);

		if (devmemtcp_ctx_new(&o, &ctx))
			abort();
	}
	return ctx;
}

/* One end of a TCP connection over loopback, made once per run, for the
 * calls that want a connected socket (the harnesses never send on it);
 * the other end stays open so the connection stays up. */
static inline int fz_tcp_socket(void)
{
	static int fd = -1, peer = -1;
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int l;

	if (fd >= 0)
		return fd;
	l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) ||
	    listen(l, 1) || getsockname(l, (struct sockaddr *)&a, &len))
		goto fail;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)))
		goto fail;
	peer = accept(l, NULL, NULL);
	if (peer < 0)
		goto fail;
	close(l);
	return fd;
fail:
	perror("a loopback TCP connection");
	abort();
}

#define FZ_CHECK(cond)                                                         \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr, "%s:%d: check failed: %s\n",           \
				__FILE__, __LINE__, #cond);                    \
			abort();                                               \
		}                                                              \
	} while (0)

#endif

// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/* The harness: results, this machine, buffers; see harness.h. */
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>

#include "devmemtcp.h"
#include "harness.h"

int t_failed(const char *file, int line, const char *cond, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "FAIL %s:%d: %s: ", file, line, cond);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return T_EXIT_FAIL;
}

int t_skipped(const char *fmt, ...)
{
	va_list ap;

	printf("SKIP: ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
	return T_EXIT_SKIP;
}

void t_note(const char *fmt, ...)
{
	va_list ap;

	printf("%s: ", program_invocation_short_name);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

void t_quiet(void *user, int level, const char *msg)
{
}

const char *t_kernel_release(void)
{
	static struct utsname u;

	if (!u.release[0] && uname(&u))
		snprintf(u.release, sizeof(u.release), "?");
	return u.release;
}

int t_kernel_version(void)
{
	int major = 0, minor = 0;

	sscanf(t_kernel_release(), "%d.%d", &major, &minor);
	return major * 100 + minor;
}

const char *t_own_comm(void)
{
	static char comm[32];
	FILE *f = fopen("/proc/self/comm", "re");

	comm[0] = '\0';
	if (f) {
		if (!fgets(comm, sizeof(comm), f))
			comm[0] = '\0';
		fclose(f);
	}
	comm[strcspn(comm, "\n")] = '\0';
	return comm;
}

int t_count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n - 1; /* the DIR's own fd */
}

double t_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

uint64_t t_rand(uint64_t *state)
{
	uint64_t x = *state ? *state : 0x9e3779b97f4a7c15ull;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*state = x;
	return x;
}

uint64_t t_parse_bytes(const char *s)
{
	char *end;
	double v = strtod(s, &end);

	switch (*end) {
	case 'k': case 'K': v *= 1024; break;
	case 'm': case 'M': v *= 1024 * 1024; break;
	case 'g': case 'G': v *= 1024.0 * 1024 * 1024; break;
	}
	return (uint64_t)v;
}

int t_run(const char *fmt, ...)
{
	char cmd[1024];
	va_list ap;
	int r;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	r = system(cmd);
	return WIFEXITED(r) ? WEXITSTATUS(r) : 1;
}

int t_capture(char *out, size_t len, const char *cmd)
{
	FILE *p = popen(cmd, "r");
	size_t n;
	int st;

	out[0] = '\0';
	if (!p)
		return -1;
	n = fread(out, 1, len - 1, p);
	out[n] = '\0';
	st = pclose(p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int t_buf(struct devmemtcp_ctx *ctx, uint32_t provider, uint64_t size,
	  struct devmemtcp_buf **buf)
{
	DEVMEMTCP_OPTS(buf_opts, o, .provider = provider, .size = size);
	int r = devmemtcp_buf_new(ctx, &o, buf);

	if (r)
		fprintf(stderr, "%s buffer of %llu bytes: %s\n",
			provider == DEVMEMTCP_PROVIDER_DRM ? "DRM" : "udmabuf",
			(unsigned long long)size, devmemtcp_ctx_errmsg(ctx));
	return r;
}

int t_udmabuf(struct devmemtcp_ctx *ctx, uint64_t size, struct devmemtcp_buf **buf)
{
	return t_buf(ctx, DEVMEMTCP_PROVIDER_UDMABUF, size, buf);
}

int t_fdinfo(int fd, const char *key, char *value, size_t len)
{
	char path[64], line[256];
	size_t kl = strlen(key);
	FILE *f;
	int ret = -1;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	f = fopen(path, "re");
	if (!f)
		return -1;
	while (ret && fgets(line, sizeof(line), f)) {
		if (strncmp(line, key, kl) || line[kl] != ':')
			continue;
		snprintf(value, len, "%s", line + kl + 1 + strspn(line + kl + 1, " \t"));
		value[strcspn(value, "\n")] = '\0';
		ret = 0;
	}
	fclose(f);
	return ret;
}

int t_memfd_buf(struct devmemtcp_ctx *ctx, uint64_t size, int *memfd,
		struct devmemtcp_buf **buf)
{
	DEVMEMTCP_OPTS(buf_opts, o, .provider = DEVMEMTCP_PROVIDER_IMPORT,
		       .size = size, .flags = DEVMEMTCP_BUF_KEEP_FD);
	int r;

	*buf = NULL;
	/* test builds let a memfd stand in for a dma-buf at import */
	setenv("DEVMEMTCP_TEST_DMABUF_MEMFD", "1", 1);
	*memfd = memfd_create("devmemtcp-test", MFD_CLOEXEC);
	if (*memfd < 0 || ftruncate(*memfd, (off_t)size))
		return -errno;
	o.fd = *memfd;
	r = devmemtcp_buf_new(ctx, &o, buf);
	if (r)
		fprintf(stderr, "import of a %llu-byte memfd: %s\n",
			(unsigned long long)size, devmemtcp_ctx_errmsg(ctx));
	return r;
}

const struct devmemtcp_probe_problem *t_probe_problem(const struct devmemtcp_probe *p,
						      const char *what)
{
	for (uint32_t i = 0; i < p->nproblems; i++)
		if (strcmp(p->problems[i].what, what) == 0)
			return &p->problems[i];
	return NULL;
}

int t_run_named(const char *prog, const struct t_named *tests, size_t n,
		const char *which)
{
	int failed = 0, ran = 0;

	for (size_t i = 0; i < n; i++) {
		int r;

		if (strcmp(which, "all") && strcmp(which, tests[i].name))
			continue;
		printf("--- %s\n", tests[i].name);
		r = tests[i].fn();
		printf("%s %s\n", r ? "FAIL" : "PASS", tests[i].name);
		failed += r != 0;
		ran++;
	}
	if (!ran) {
		fprintf(stderr, "%s: no test named %s\n", prog, which);
		return 2;
	}
	printf("%s: %d passed, %d failed\n", prog, ran - failed, failed);
	return failed ? T_EXIT_FAIL : T_EXIT_PASS;
}

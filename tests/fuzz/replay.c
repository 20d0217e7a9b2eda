// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * main() for a fuzz harness built without libFuzzer: run every file named
 * on the command line, or every file of a named directory, through
 * LLVMFuzzerTestOneInput once.  The unit suite runs each harness over its
 * committed corpus this way (gcc, valgrind and the sanitizer builds
 * included), so every reproducer in the corpus stays a regression test.
 */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	size_t len = 0, cap = 0;

	if (!f) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		return -1;
	}
	for (;;) {
		size_t r;

		if (len == cap) {
			cap = cap ? cap * 2 : 4096;
			buf = realloc(buf, cap);
			if (!buf)
				abort();
		}
		r = fread(buf + len, 1, cap - len, f);
		if (!r)
			break;
		len += r;
	}
	fclose(f);
	/* exactly len bytes, like libFuzzer, so over-reads are seen */
	{
		uint8_t *exact = malloc(len ? len : 1);

		if (!exact)
			abort();
		memcpy(exact, buf, len);
		free(buf);
		LLVMFuzzerTestOneInput(exact, len);
		free(exact);
	}
	return 0;
}

static int cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int run_dir(const char *dir, int *count)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char **names = NULL;
	size_t n = 0;
	int ret = 0;

	if (!d) {
		fprintf(stderr, "replay: %s: %s\n", dir, strerror(errno));
		return -1;
	}
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		names = realloc(names, (n + 1) * sizeof(*names));
		if (!names || asprintf(&names[n], "%s/%s", dir, e->d_name) < 0)
			abort();
		n++;
	}
	closedir(d);
	qsort(names, n, sizeof(*names), cmp);
	for (size_t i = 0; i < n; i++) {
		if (run_file(names[i]) < 0)
			ret = -1;
		else
			(*count)++;
		free(names[i]);
	}
	free(names);
	return ret;
}

int main(int argc, char **argv)
{
	int count = 0, ret = 0;

	for (int i = 1; i < argc; i++) {
		struct stat st;

		if (stat(argv[i], &st) < 0) {
			fprintf(stderr, "replay: %s: %s\n", argv[i],
				strerror(errno));
			ret = 1;
		} else if (S_ISDIR(st.st_mode)) {
			if (run_dir(argv[i], &count) < 0)
				ret = 1;
		} else if (run_file(argv[i]) < 0) {
			ret = 1;
		} else {
			count++;
		}
	}
	if (!count) {
		fprintf(stderr, "replay: no input given or found\n");
		return 1;
	}
	printf("replay: %d inputs\n", count);
	return ret;
}

// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The NIC setup journal and lock under /run/devmemtcp (lib/nic.h).  The
 * journal is a small text file so that an operator can read what a dead
 * process left behind; it is replaced atomically (tmp, fsync, rename,
 * fsync of the directory) before every change the handle makes.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "nic.h"

#define MAX_LIST 65536

#if DMT_TEST_HOOKS
int dmt_test_lock_wait_ms;
#endif

void dmt_journal_free(struct dmt_journal *j)
{
	free(j->queues);
	free(j->rss_indir);
	free(j->prior_ctx);
	free(j->prior_rules);
	free(j->ctx_indir);
	free(j->rss_set);
	free(j->rules);
	memset(j, 0, sizeof(*j));
}

static void put_list(FILE *f, const char *key, const uint32_t *v, uint32_t n)
{
	fprintf(f, "%s %u", key, n);
	for (uint32_t i = 0; i < n; i++)
		fprintf(f, " %u", v[i]);
	fputc('\n', f);
}

int dmt_journal_format(const struct dmt_journal *j, char **out, size_t *len)
{
	char comm[sizeof(j->comm)];
	FILE *f;

	*out = NULL;
	*len = 0;
	f = dmt_hook_alloc_fail() ? NULL : open_memstream(out, len);
	if (!f)
		return -ENOMEM;
	snprintf(comm, sizeof(comm), "%s", j->comm[0] ? j->comm : "?");
	for (char *p = comm; *p; p++)
		if (isspace((unsigned char)*p) || !isprint((unsigned char)*p))
			*p = '_';
	fprintf(f, "devmemtcp-journal %d\n", DMT_JOURNAL_VERSION);
	fprintf(f, "pid %ld\ncomm %s\nifname %s\nifindex %d\n", (long)j->pid,
		comm, j->ifname, j->ifindex);
	if (j->netns)
		fprintf(f, "netns %llu\n", (unsigned long long)j->netns);
	put_list(f, "queues", j->queues, j->nqueues);
	if (j->have_prior) {
		fprintf(f, "prior tds=%d hds=%lld ntuple=%d rss-default=%d\n",
			j->has_tds ? j->tds : -1,
			j->has_hds ? (long long)j->hds : -1LL, j->ntuple_on,
			j->rss_default);
		put_list(f, "prior-rss", j->rss_indir, j->rss_size);
		put_list(f, "prior-contexts", j->prior_ctx, j->nprior_ctx);
		put_list(f, "prior-rules", j->prior_rules, j->nprior_rules);
	}
	fprintf(f, "changed%s%s%s%s%s\n", j->changed ? "" : " -",
		j->changed & DMT_J_RINGS ? " rings" : "",
		j->changed & DMT_J_RSS ? " rss" : "",
		j->changed & DMT_J_NTUPLE ? " ntuple" : "",
		j->changed & DMT_J_CTX ? " context" : "");
	if (j->rss_set_size)
		put_list(f, "rss-set", j->rss_set, j->rss_set_size);
	if (j->changed & DMT_J_CTX) {
		fprintf(f, "context %u ", j->ctx_id);
		put_list(f, "table", j->ctx_indir, j->ctx_size);
	}
	for (uint32_t i = 0; i < j->nrules; i++) {
		const struct dmt_jrule *r = &j->rules[i];
		const uint8_t *b = (const uint8_t *)&r->fs;

		fprintf(f, "rule %u %s %u %u ", r->id,
			r->placed ? "placed" : "pending", r->location,
			r->rss_context);
		for (size_t k = 0; k < sizeof(r->fs); k++)
			fprintf(f, "%02x", b[k]);
		fputc('\n', f);
	}
	fprintf(f, "end\n");
	if (fclose(f) != 0) {
		free(*out);
		*out = NULL;
		return -ENOMEM;
	}
	return 0;
}

/* "N v1 .. vN" after the key; *v malloc'd. */
static int get_list(char *s, uint32_t **v, uint32_t *n)
{
	char *end;
	unsigned long cnt = strtoul(s, &end, 10);
	uint32_t *a;

	if (end == s || cnt > MAX_LIST)
		return -EBADMSG;
	a = dmt_calloc(cnt ? cnt : 1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	s = end;
	for (unsigned long i = 0; i < cnt; i++) {
		unsigned long x = strtoul(s, &end, 10);

		if (end == s || x > UINT32_MAX) {
			free(a);
			return -EBADMSG;
		}
		a[i] = (uint32_t)x;
		s = end;
	}
	while (*s == ' ')
		s++;
	if (*s) {
		free(a);
		return -EBADMSG;
	}
	free(*v);
	*v = a;
	*n = (uint32_t)cnt;
	return 0;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

static int parse_rule(char *s, struct dmt_journal *j)
{
	struct dmt_jrule r = { 0 }, *v;
	char state[16], hex[2 * sizeof(r.fs) + 2];
	uint8_t *b = (uint8_t *)&r.fs;

	if (sscanf(s, "%u %15s %u %u %337s", &r.id, state, &r.location,
		   &r.rss_context, hex) != 5)
		return -EBADMSG;
	if (strcmp(state, "placed") == 0)
		r.placed = true;
	else if (strcmp(state, "pending") != 0)
		return -EBADMSG;
	if (strlen(hex) != 2 * sizeof(r.fs))
		return -EBADMSG;
	for (size_t k = 0; k < sizeof(r.fs); k++) {
		int hi = hexval(hex[2 * k]), lo = hexval(hex[2 * k + 1]);

		if (hi < 0 || lo < 0)
			return -EBADMSG;
		b[k] = (uint8_t)(hi << 4 | lo);
	}
	if (j->nrules >= MAX_LIST)
		return -EBADMSG;
	v = dmt_realloc(j->rules, (j->nrules + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	j->rules = v;
	j->rules[j->nrules++] = r;
	return 0;
}

static int parse_pid(const char *arg, struct dmt_journal *j)
{
	long long v;

	if (sscanf(arg, "%lld", &v) != 1 || v <= 0)
		return -EBADMSG;
	j->pid = (pid_t)v;
	return 0;
}

static int parse_ifname(const char *arg, struct dmt_journal *j)
{
	if (!*arg || strlen(arg) >= sizeof(j->ifname))
		return -EBADMSG;
	memcpy(j->ifname, arg, strlen(arg) + 1);
	return 0;
}

static int parse_netns(const char *arg, struct dmt_journal *j)
{
	unsigned long long ns;

	if (sscanf(arg, "%llu", &ns) != 1)
		return -EBADMSG;
	j->netns = ns;
	return 0;
}

/* "tds=T hds=H ntuple=N rss-default=D" (T, H: -1 when not reported) */
static int parse_prior(const char *arg, struct dmt_journal *j)
{
	long long v;
	int tds, ntuple, def;

	if (sscanf(arg, "tds=%d hds=%lld ntuple=%d rss-default=%d", &tds, &v,
		   &ntuple, &def) != 4 || tds > 255 || v > UINT32_MAX)
		return -EBADMSG;
	j->have_prior = true;
	j->has_tds = tds >= 0;
	j->tds = tds >= 0 ? (uint8_t)tds : 0;
	j->has_hds = v >= 0;
	j->hds = v >= 0 ? (uint32_t)v : 0;
	j->ntuple_on = ntuple;
	j->rss_default = def;
	return 0;
}

/* "-" or any of "rings rss ntuple context" */
static int parse_changed(char *arg, struct dmt_journal *j)
{
	static const struct {
		const char *name;
		uint32_t bit;
	} bits[] = {
		{ "-", 0 }, { "rings", DMT_J_RINGS }, { "rss", DMT_J_RSS },
		{ "ntuple", DMT_J_NTUPLE }, { "context", DMT_J_CTX },
	};
	char *save = NULL;

	j->changed = 0;
	for (char *t = strtok_r(arg, " ", &save); t;
	     t = strtok_r(NULL, " ", &save)) {
		size_t i;

		for (i = 0; i < ARRAY_SIZE(bits); i++)
			if (strcmp(t, bits[i].name) == 0)
				break;
		if (i == ARRAY_SIZE(bits))
			return -EBADMSG;
		j->changed |= bits[i].bit;
	}
	return 0;
}

/* "ID table N v1 .. vN" */
static int parse_context(char *arg, struct dmt_journal *j)
{
	char *rest;
	unsigned long id = strtoul(arg, &rest, 10);

	if (rest == arg || id > UINT32_MAX || strncmp(rest, " table ", 7))
		return -EBADMSG;
	j->ctx_id = (uint32_t)id;
	return get_list(rest + 7, &j->ctx_indir, &j->ctx_size);
}

static int parse_line(char *line, struct dmt_journal *j, bool *end)
{
	char *arg = strchr(line, ' ');

	if (arg)
		*arg++ = '\0';
	else
		arg = line + strlen(line);
	if (strcmp(line, "end") == 0) {
		*end = true;
		return 0;
	}
	if (strcmp(line, "pid") == 0)
		return parse_pid(arg, j);
	if (strcmp(line, "comm") == 0) {
		snprintf(j->comm, sizeof(j->comm), "%s", arg);
		return 0;
	}
	if (strcmp(line, "ifname") == 0)
		return parse_ifname(arg, j);
	if (strcmp(line, "ifindex") == 0)
		return sscanf(arg, "%d", &j->ifindex) == 1 ? 0 : -EBADMSG;
	if (strcmp(line, "netns") == 0)
		return parse_netns(arg, j);
	if (strcmp(line, "queues") == 0)
		return get_list(arg, &j->queues, &j->nqueues);
	if (strcmp(line, "prior") == 0)
		return parse_prior(arg, j);
	if (strcmp(line, "prior-rss") == 0)
		return get_list(arg, &j->rss_indir, &j->rss_size);
	if (strcmp(line, "prior-contexts") == 0)
		return get_list(arg, &j->prior_ctx, &j->nprior_ctx);
	if (strcmp(line, "prior-rules") == 0)
		return get_list(arg, &j->prior_rules, &j->nprior_rules);
	if (strcmp(line, "changed") == 0)
		return parse_changed(arg, j);
	if (strcmp(line, "rss-set") == 0)
		return get_list(arg, &j->rss_set, &j->rss_set_size);
	if (strcmp(line, "context") == 0)
		return parse_context(arg, j);
	if (strcmp(line, "rule") == 0)
		return parse_rule(arg, j);
	return -EBADMSG;
}

int dmt_journal_parse(const char *text, size_t len, struct dmt_journal *j,
		      int *bad_line)
{
	char *copy, *line, *save = NULL;
	bool end = false;
	int err = 0, n = 0;

	memset(j, 0, sizeof(*j));
	if (bad_line)
		*bad_line = 0;
	copy = dmt_strndup(text, len);
	if (!copy)
		return -ENOMEM;
	for (line = strtok_r(copy, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		n++;
		if (n == 1) {
			int ver;

			if (sscanf(line, "devmemtcp-journal %d", &ver) != 1 ||
			    ver != DMT_JOURNAL_VERSION) {
				err = -EBADMSG;
				break;
			}
			continue;
		}
		if (end) {
			err = -EBADMSG;
			break;
		}
		err = parse_line(line, j, &end);
		if (err < 0)
			break;
	}
	free(copy);
	if (!err && (!end || !j->ifname[0]))
		err = -EBADMSG;
	if (err < 0) {
		if (bad_line)
			*bad_line = n;
		dmt_journal_free(j);
	}
	return err;
}

/* ---------------------------------------------------------------------- */
/* the run directory and its files                                         */

static const char *file_type(mode_t m)
{
	switch (m & S_IFMT) {
	case S_IFDIR: return "a directory";
	case S_IFIFO: return "a FIFO";
	case S_IFSOCK: return "a socket";
	case S_IFCHR: return "a character device";
	case S_IFBLK: return "a block device";
	case S_IFLNK: return "a symbolic link";
	default: return "not a regular file";
	}
}

static int dir_checks(struct dmt_rundir *rd, const struct stat *st,
		      struct dmt_err *err)
{
	uid_t me = geteuid();

	if (st->st_uid != 0 && st->st_uid != me)
		return dmt_err_set(err, -EACCES,
				   "the run directory %s is owned by uid %u, not by root or this user (uid %u): "
				   "use a directory owned by root (or by uid %u), not writable by others",
				   rd->path, (unsigned)st->st_uid, (unsigned)me,
				   (unsigned)me);
	if (st->st_mode & (S_IWGRP | S_IWOTH))
		return dmt_err_set(err, -EACCES,
				   "the run directory %s is writable by group or others (mode %04o): "
				   "make it writable by its owner only (chmod 0700 %s) or use another one",
				   rd->path, (unsigned)(st->st_mode & 07777),
				   rd->path);
	rd->uid = st->st_uid;
	return 0;
}

int dmt_rundir_open(struct dmt_rundir *rd, const char *path, bool create,
		    struct dmt_err *err)
{
	const int flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
	struct stat st;
	int e;

	rd->fd = -1;
	if (strlen(path) >= sizeof(rd->path))
		return dmt_err_set(err, -ENAMETOOLONG,
				   "the run directory name is too long (%zu bytes)",
				   strlen(path));
	snprintf(rd->path, sizeof(rd->path), "%s", path);
	rd->fd = open(path, flags);
	if (rd->fd < 0 && errno == ENOENT && create) {
		/* Only the last component: parents that are missing are
		 * a mistake to report, not to paper over. */
		if (mkdir(path, 0700) < 0 && errno != EEXIST)
			goto fail;
		rd->fd = open(path, flags);
	}
	if (rd->fd < 0)
		goto fail;
	if (fstat(rd->fd, &st) < 0)
		goto fail;
	e = dir_checks(rd, &st, err);
	if (e < 0)
		dmt_rundir_close(rd);
	return e;
fail:
	e = -errno;
	dmt_rundir_close(rd);
	if (e == -ELOOP || e == -ENOTDIR)
		return dmt_err_set(err, -EACCES,
				   "the run directory %s is a symbolic link or not a directory: "
				   "use a real directory owned by root, not writable by others",
				   path);
	return dmt_err_set(err, e,
			   "cannot open the run directory %s: %s (run as root, or set "
			   "DEVMEMTCP_RUN_DIR to a directory of yours that only you can write)",
			   path, e == -ENOENT ? "it or a parent is missing" : strerror(-e));
}

void dmt_rundir_close(struct dmt_rundir *rd)
{
	if (rd->fd >= 0)
		close(rd->fd);
	rd->fd = -1;
}

/* A file of the run directory that we may read or write: a regular file
 * of the directory's owner that others cannot write (the lock file: that
 * others cannot open at all, or they could hold its flock). */
static int file_checks(const struct dmt_rundir *rd, const char *name, int fd,
		       mode_t others, struct dmt_err *err)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return dmt_err_set(err, -errno, "%s/%s: fstat: %s", rd->path,
				   name, strerror(errno));
	if (!S_ISREG(st.st_mode))
		return dmt_err_set(err, -EACCES,
				   "%s/%s is %s, not a file devmemtcp made: remove it",
				   rd->path, name, file_type(st.st_mode));
	if (st.st_uid != rd->uid)
		return dmt_err_set(err, -EACCES,
				   "%s/%s is owned by uid %u, not by the run directory's owner (uid %u): remove it",
				   rd->path, name, (unsigned)st.st_uid,
				   (unsigned)rd->uid);
	if (st.st_mode & others)
		return dmt_err_set(err, -EACCES,
				   "%s/%s can be %s by others (mode %04o): remove it while no process uses devmemtcp on this interface",
				   rd->path, name,
				   others & (S_IRGRP | S_IROTH) ? "opened" : "written",
				   (unsigned)(st.st_mode & 07777));
	if (st.st_size > DMT_FILE_MAX)
		return dmt_err_set(err, -EFBIG,
				   "%s/%s has %lld bytes, more than the %d a devmemtcp file has: remove it",
				   rd->path, name, (long long)st.st_size,
				   DMT_FILE_MAX);
	return 0;
}

static int open_fail(const struct dmt_rundir *rd, const char *name,
		     struct dmt_err *err)
{
	int e = -errno;

	if (e == -ELOOP)
		return dmt_err_set(err, -EACCES,
				   "%s/%s is a symbolic link, not a file devmemtcp made: remove it",
				   rd->path, name);
	if (e == -ENXIO)
		return dmt_err_set(err, -EACCES,
				   "%s/%s is not a regular file (a FIFO or socket): remove it",
				   rd->path, name);
	return dmt_err_set(err, e, "cannot open %s/%s: %s", rd->path, name,
			   strerror(-e));
}

int dmt_file_read(const struct dmt_rundir *rd, const char *name, char **text,
		  size_t *len, struct dmt_err *err)
{
	char *buf = NULL;
	size_t n = 0;
	int fd, e;

	*text = NULL;
	*len = 0;
	/* O_NONBLOCK: a FIFO put in our place must not hang us. */
	fd = openat(rd->fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0 && errno == ENOENT)
		return -ENOENT;
	if (fd < 0)
		return open_fail(rd, name, err);
	e = file_checks(rd, name, fd, S_IWGRP | S_IWOTH, err);
	if (e < 0)
		goto out;
	buf = dmt_malloc(DMT_FILE_MAX + 1);
	if (!buf) {
		e = dmt_err_set(err, -ENOMEM, "reading %s/%s: out of memory",
				rd->path, name);
		goto out;
	}
	for (;;) {
		ssize_t r = read(fd, buf + n, DMT_FILE_MAX + 1 - n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			e = dmt_err_set(err, -errno, "reading %s/%s: %s",
					rd->path, name, strerror(errno));
			goto out;
		}
		if (r == 0)
			break;
		n += (size_t)r;
		if (n > DMT_FILE_MAX) {
			e = dmt_err_set(err, -EFBIG,
					"%s/%s has more than the %d bytes a devmemtcp file has: remove it",
					rd->path, name, DMT_FILE_MAX);
			goto out;
		}
	}
	buf[n] = '\0';
	*text = buf;
	*len = n;
	buf = NULL;
out:
	free(buf);
	close(fd);
	return e;
}

/* A name no one else uses: ".NAME.XXXXXXXX" with random hex. */
static void temp_name(char *tmp, size_t len, const char *name)
{
	static atomic_uint seq;
	uint64_t r = 0;

	if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r))
		r = (uint64_t)getpid() << 32 ^ (uint64_t)time(NULL) ^
		    atomic_fetch_add(&seq, 1);
	snprintf(tmp, len, ".%s.%016llx", name, (unsigned long long)r);
}

static int write_all(int fd, const char *text, size_t len)
{
	size_t off = 0;

	while (off < len) {
		ssize_t w = write(fd, text + off, len - off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? -errno : -EIO;
		off += (size_t)w;
	}
	return 0;
}

int dmt_file_write(const struct dmt_rundir *rd, const char *name,
		   const char *text, size_t len, struct dmt_err *err)
{
	char tmp[NAME_MAX + 1];
	int fd, e;

	temp_name(tmp, sizeof(tmp), name);
	fd = openat(rd->fd, tmp,
		    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return dmt_err_set(err, -errno,
				   "cannot create %s/%s: %s (run as root, or set DEVMEMTCP_RUN_DIR "
				   "to a directory of yours that only you can write)",
				   rd->path, tmp, strerror(errno));
	e = write_all(fd, text, len);
	if (!e && fsync(fd) < 0)
		e = -errno;
	close(fd);
	if (!e && renameat(rd->fd, tmp, rd->fd, name) < 0)
		e = -errno;
	if (e < 0) {
		unlinkat(rd->fd, tmp, 0);
		return dmt_err_set(err, e, "cannot write %s/%s: %s", rd->path,
				   name, strerror(-e));
	}
	/* The rename itself must survive a crash of the machine too. */
	fsync(rd->fd);
	return 0;
}

int dmt_file_remove(const struct dmt_rundir *rd, const char *name)
{
	if (unlinkat(rd->fd, name, 0) < 0 && errno != ENOENT)
		return -errno;
	return 0;
}

static void read_holder(int fd, pid_t *holder, char *comm, size_t comm_len)
{
	char buf[128];
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
	long pid = 0;
	char c[64] = "";

	*holder = 0;
	if (comm_len)
		comm[0] = '\0';
	if (n <= 0)
		return;
	buf[n] = '\0';
	if (sscanf(buf, "%ld %63s", &pid, c) >= 1) {
		*holder = (pid_t)pid;
		if (comm_len)
			snprintf(comm, comm_len, "%s", c);
	}
}

/* Our comm with blanks replaced, as one word of the lock file. */
static void self_comm(char *comm, size_t len)
{
	dmt_self_comm(comm, len);
	for (char *p = comm; *p; p++)
		if (isspace((unsigned char)*p) || !isprint((unsigned char)*p))
			*p = '_';
}

/* flock with a bounded wait: a few ms between tries, growing. */
static int flock_wait(int fd, int wait_ms)
{
	struct timespec start, now;
	long slept_ms, pause_us = 200;

	clock_gettime(CLOCK_MONOTONIC, &start);
	for (;;) {
		struct timespec ts;

		if (flock(fd, LOCK_EX | LOCK_NB) == 0)
			return 0;
		if (errno != EWOULDBLOCK && errno != EINTR)
			return -errno;
		clock_gettime(CLOCK_MONOTONIC, &now);
		slept_ms = (now.tv_sec - start.tv_sec) * 1000 +
			   (now.tv_nsec - start.tv_nsec) / 1000000;
		if (slept_ms >= wait_ms)
			return -EBUSY;
		ts.tv_sec = 0;
		ts.tv_nsec = pause_us * 1000;
		nanosleep(&ts, NULL);
		if (pause_us < 16000)
			pause_us *= 2;
	}
}

int dmt_lock_wait_ms(void)
{
#if DMT_TEST_HOOKS
	int ms = dmt_hook_env_int("DEVMEMTCP_TEST_LOCK_WAIT_MS");

	if (dmt_test_lock_wait_ms)
		return dmt_test_lock_wait_ms;
	if (ms)
		return ms;
#endif
	return DMT_LOCK_WAIT_MS;
}

int dmt_lock_take(const struct dmt_rundir *rd, const char *ifname, int *fdp,
		  pid_t *holder, char *holder_comm, size_t comm_len,
		  struct dmt_err *err)
{
	char name[IF_NAMESIZE + 8], line[128], comm[64];
	int fd, n, e;

	*fdp = -1;
	*holder = 0;
	if (comm_len)
		holder_comm[0] = '\0';
	snprintf(name, sizeof(name), "%s.lock", ifname);
	/* O_RDWR on a file only the owner may open: nobody else can hold
	 * its flock (flock works on read-only descriptors too). */
	fd = openat(rd->fd, name,
		    O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0600);
	if (fd < 0)
		return open_fail(rd, name, err);
	e = file_checks(rd, name, fd, 077, err);
	if (e < 0)
		goto err_close;
	e = flock_wait(fd, dmt_lock_wait_ms());
	if (e == -EBUSY) {
		read_holder(fd, holder, holder_comm, comm_len);
		dmt_err_set(err, -EBUSY, "%s/%s is held", rd->path, name);
		goto err_close;
	}
	if (e < 0) {
		dmt_err_set(err, e, "flock %s/%s: %s", rd->path, name,
			    strerror(-e));
		goto err_close;
	}
	self_comm(comm, sizeof(comm));
	n = snprintf(line, sizeof(line), "%ld %s\n", (long)getpid(), comm);
	if (ftruncate(fd, 0) < 0 || pwrite(fd, line, (size_t)n, 0) != n) {
		e = dmt_err_set(err, -errno, "writing %s/%s: %s", rd->path,
				name, strerror(errno));
		goto err_close;
	}
	*fdp = fd;
	return 0;
err_close:
	close(fd);
	return e;
}

void dmt_lock_release(int fd)
{
	/* Leave the lock file itself: unlinking it while another process
	 * waits on the old inode would let two holders exist. */
	if (fd >= 0)
		close(fd);
}

static void journal_name(char *name, size_t len, const char *ifname)
{
	snprintf(name, len, "%s.journal", ifname);
}

int dmt_journal_write(const struct dmt_rundir *rd, const char *ifname,
		      const struct dmt_journal *j, struct dmt_err *err)
{
	char name[IF_NAMESIZE + 16], *text;
	size_t len;
	int e = dmt_journal_format(j, &text, &len);

	if (e < 0)
		return dmt_err_set(err, e, "writing the journal of %s: out of memory",
				   ifname);
	journal_name(name, sizeof(name), ifname);
	e = dmt_file_write(rd, name, text, len, err);
	free(text);
	return e;
}

int dmt_journal_read(const struct dmt_rundir *rd, const char *ifname,
		     struct dmt_journal *j, struct dmt_err *err)
{
	char name[IF_NAMESIZE + 16], *text;
	size_t len;
	int e;

	memset(j, 0, sizeof(*j));
	journal_name(name, sizeof(name), ifname);
	e = dmt_file_read(rd, name, &text, &len, err);
	if (e < 0)
		return e;
	e = dmt_journal_parse(text, len, j, NULL);
	free(text);
	if (e == -EBADMSG)
		dmt_err_set(err, e,
			    "the journal %s/%s is unreadable (malformed): restore the NIC by hand, then delete it",
			    rd->path, name);
	else if (e < 0)
		dmt_err_set(err, e, "reading the journal %s/%s: out of memory",
			    rd->path, name);
	return e;
}

int dmt_journal_remove(const struct dmt_rundir *rd, const char *ifname)
{
	char name[IF_NAMESIZE + 16];

	journal_name(name, sizeof(name), ifname);
	return dmt_file_remove(rd, name);
}

uint64_t dmt_netns_id(void)
{
	struct stat st;

	if (stat("/proc/thread-self/ns/net", &st) == 0 ||
	    stat("/proc/self/ns/net", &st) == 0)
		return (uint64_t)st.st_ino;
	return 0;
}

const char *dmt_run_dir(const char *opt_dir)
{
	const char *env;

	if (opt_dir && *opt_dir)
		return opt_dir;
	env = secure_getenv("DEVMEMTCP_RUN_DIR");
	if (env && *env)
		return env;
	return DMT_RUN_DIR;
}

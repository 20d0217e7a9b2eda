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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nic.h"

#define MAX_LIST 65536

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

/* A program name as one printable word ("?" when empty): what the journal
 * writes, and what the parser keeps, so that both agree. */
static void comm_word(char *out, size_t len, const char *in)
{
	snprintf(out, len, "%s", in[0] ? in : "?");
	for (char *p = out; *p; p++)
		if (isspace((unsigned char)*p) || !isprint((unsigned char)*p))
			*p = '_';
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
	comm_word(comm, sizeof(comm), j->comm);
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

/* The decimal number that is all of s, in [0, max]: 0 or -EBADMSG. */
static int get_u64(const char *s, uint64_t max, uint64_t *v)
{
	unsigned long long x;
	char *end;

	if (*s < '0' || *s > '9')
		return -EBADMSG;	/* no sign, no blank */
	errno = 0;
	x = strtoull(s, &end, 10);
	if (*end || errno || x > max)
		return -EBADMSG;
	*v = x;
	return 0;
}

/* Linux's PID_MAX_LIMIT: no pid is larger. */
#define PID_MAX 4194304

static int parse_pid(const char *arg, struct dmt_journal *j)
{
	uint64_t v;

	if (get_u64(arg, PID_MAX, &v) || !v)
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

static int parse_ifindex(const char *arg, struct dmt_journal *j)
{
	uint64_t v;

	if (get_u64(arg, INT_MAX, &v))
		return -EBADMSG;
	j->ifindex = (int)v;
	return 0;
}

static int parse_netns(const char *arg, struct dmt_journal *j)
{
	return get_u64(arg, UINT64_MAX, &j->netns);
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
		comm_word(j->comm, sizeof(j->comm), arg);
		return 0;
	}
	if (strcmp(line, "ifname") == 0)
		return parse_ifname(arg, j);
	if (strcmp(line, "ifindex") == 0)
		return parse_ifindex(arg, j);
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

/*
 * Not torn (the end line), with what every journal has, and nothing the
 * writer would leave out (prior state without its "prior" line, a context
 * not marked changed): a journal is accepted only if writing it back keeps
 * all it says.
 */
static bool complete(const struct dmt_journal *j, bool end)
{
	if (!end || !j->ifname[0] || !j->pid || !j->comm[0])
		return false;
	if (!j->have_prior && (j->rss_size || j->nprior_ctx || j->nprior_rules))
		return false;
	if (!(j->changed & DMT_J_CTX) && (j->ctx_id || j->ctx_size))
		return false;
	return true;
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
			char head[32];

			snprintf(head, sizeof(head), "devmemtcp-journal %d",
				 DMT_JOURNAL_VERSION);
			if (strcmp(line, head) != 0) {
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
	if (!err && !complete(j, end))
		err = -EBADMSG;
	if (err < 0) {
		if (bad_line)
			*bad_line = n;
		dmt_journal_free(j);
	}
	return err;
}

static int path_of(char *buf, size_t len, const char *dir, const char *ifname,
		   const char *suffix)
{
	int n = snprintf(buf, len, "%s/%s%s", dir, ifname, suffix);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* mkdir -p: /run/devmemtcp, or a test's nested directory. */
static int make_dir(const char *dir)
{
	char path[PATH_MAX];
	size_t len = strlen(dir);

	if (len >= sizeof(path))
		return -ENAMETOOLONG;
	memcpy(path, dir, len + 1);
	for (char *p = path + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(path, 0755) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(path, 0755) == 0 || errno == EEXIST)
		return 0;
	return -errno;
}

int dmt_journal_write(const char *dir, const char *ifname,
		      const struct dmt_journal *j)
{
	char path[PATH_MAX], tmp[PATH_MAX];
	char *text;
	size_t len, off = 0;
	int fd, dfd, err;

	err = path_of(path, sizeof(path), dir, ifname, ".journal");
	if (!err)
		err = path_of(tmp, sizeof(tmp), dir, ifname, ".journal.tmp");
	if (!err)
		err = make_dir(dir);
	if (err < 0)
		return err;
	err = dmt_journal_format(j, &text, &len);
	if (err < 0)
		return err;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		err = -errno;
		free(text);
		return err;
	}
	while (off < len) {
		ssize_t w = write(fd, text + off, len - off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			err = w < 0 ? -errno : -EIO;
			goto err_close;
		}
		off += (size_t)w;
	}
	if (fsync(fd) < 0) {
		err = -errno;
		goto err_close;
	}
	close(fd);
	free(text);
	if (rename(tmp, path) < 0) {
		err = -errno;
		unlink(tmp);
		return err;
	}
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		fsync(dfd);
		close(dfd);
	}
	return 0;
err_close:
	close(fd);
	unlink(tmp);
	free(text);
	return err;
}

int dmt_journal_read(const char *dir, const char *ifname,
		     struct dmt_journal *j)
{
	char path[PATH_MAX], *buf = NULL;
	size_t len = 0, cap = 0;
	int fd, err = path_of(path, sizeof(path), dir, ifname, ".journal");

	memset(j, 0, sizeof(*j));
	if (err < 0)
		return err;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	for (;;) {
		ssize_t r;

		if (len == cap) {
			char *nb;

			cap = cap ? cap * 2 : 4096;
			if (cap > (64u << 20)) {
				err = -EFBIG;
				break;
			}
			nb = dmt_realloc(buf, cap);
			if (!nb) {
				err = -ENOMEM;
				break;
			}
			buf = nb;
		}
		r = read(fd, buf + len, cap - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			err = -errno;
			break;
		}
		if (r == 0)
			break;
		len += (size_t)r;
	}
	close(fd);
	if (!err)
		err = dmt_journal_parse(buf, len, j, NULL);
	free(buf);
	return err;
}

int dmt_journal_remove(const char *dir, const char *ifname)
{
	char path[PATH_MAX];
	int err = path_of(path, sizeof(path), dir, ifname, ".journal");

	if (err < 0)
		return err;
	if (unlink(path) < 0 && errno != ENOENT)
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
		if (isspace((unsigned char)*p))
			*p = '_';
}

int dmt_lock_take(const char *dir, const char *ifname, int *fdp,
		  pid_t *holder, char *holder_comm, size_t comm_len)
{
	char path[PATH_MAX], line[128], comm[64];
	int fd, n, err = path_of(path, sizeof(path), dir, ifname, ".lock");

	*fdp = -1;
	*holder = 0;
	if (comm_len)
		holder_comm[0] = '\0';
	if (!err)
		err = make_dir(dir);
	if (err < 0)
		return err;
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		err = errno == EWOULDBLOCK ? -EBUSY : -errno;
		read_holder(fd, holder, holder_comm, comm_len);
		close(fd);
		return err;
	}
	self_comm(comm, sizeof(comm));
	n = snprintf(line, sizeof(line), "%ld %s\n", (long)getpid(), comm);
	if (ftruncate(fd, 0) < 0 || pwrite(fd, line, (size_t)n, 0) != n) {
		err = -errno;
		close(fd);
		return err;
	}
	*fdp = fd;
	return 0;
}

void dmt_lock_release(int fd, const char *dir, const char *ifname)
{
	if (fd < 0)
		return;
	/* Leave the lock file itself: unlinking it while another process
	 * waits on the old inode would let two holders exist. */
	if (ftruncate(fd, 0) < 0) {
		/* nothing to do: the flock is what counts */
	}
	close(fd);
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

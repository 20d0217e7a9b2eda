// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The run directory of the NIC layer (lib/nic/nic.h) and its files,
 * opened as hostile input (no symlinks, owner and mode checked), files
 * replaced atomically (O_EXCL temporary, fsync, rename, fsync of the
 * directory), the listing of a prefix's files and the interface lock.
 * Their text formats are in journal.c.
 */
#include <ctype.h>
#include <dirent.h>
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
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "nic.h"

#if DMT_TEST_HOOKS
int dmt_test_lock_wait_ms;
#endif

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

/*
 * Whose directory path is and what to do when it cannot be used: the
 * default one is root's (a user sets DEVMEMTCP_RUN_DIR instead); one the
 * caller named, through the run_dir option or DEVMEMTCP_RUN_DIR, is
 * theirs to fix.
 */
static const char *rundir_whose(const char *path)
{
	const char *env = secure_getenv("DEVMEMTCP_RUN_DIR");

	if (!strcmp(path, DMT_RUN_DIR))
		return "";
	if (env && !strcmp(path, env))
		return " (DEVMEMTCP_RUN_DIR)";
	return " (the run_dir option)";
}

static const char *rundir_fix(const char *path, int e)
{
	if (!strcmp(path, DMT_RUN_DIR) && geteuid() != 0)
		return "run as root, or set DEVMEMTCP_RUN_DIR to a directory of yours that only you can write";
	if (e == -ENOENT)
		return "only the last component is created: create its parent, or pass another run_dir";
	return "use a directory this user can write and others cannot, or pass another run_dir";
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
	return dmt_err_set(err, e, "cannot open the run directory %s%s: %s (%s)",
			   path, rundir_whose(path),
			   e == -ENOENT ? "it or a parent is missing" : strerror(-e),
			   rundir_fix(path, e));
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

int dmt_file_same(const struct dmt_rundir *rd, const char *name,
		  const char *text, size_t len, struct dmt_err *err)
{
	char buf[4096];
	size_t off = 0;
	int fd, e, same = 1;

	fd = openat(rd->fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0 && errno == ENOENT)
		return -ENOENT;
	if (fd < 0)
		return open_fail(rd, name, err);
	e = file_checks(rd, name, fd, S_IWGRP | S_IWOTH, err);
	while (!e && same) {
		ssize_t r = read(fd, buf, sizeof(buf));

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			e = dmt_err_set(err, -errno, "reading %s/%s: %s", rd->path, name,
					strerror(errno));
			break;
		}
		if (r == 0) {
			same = off == len;
			break;
		}
		same = (size_t)r <= len - off && memcmp(buf, text + off, (size_t)r) == 0;
		off += (size_t)r;
	}
	close(fd);
	return e < 0 ? e : same;
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

/* The file's text in pieces, written one after the other. */
static int file_write_pieces(const struct dmt_rundir *rd, const char *name,
			     const struct iovec *piece, int npieces,
			     struct dmt_err *err)
{
	char tmp[NAME_MAX + 1];
	int fd, e = 0;

	temp_name(tmp, sizeof(tmp), name);
	fd = openat(rd->fd, tmp,
		    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		e = -errno;
		return dmt_err_set(err, e, "cannot create %s/%s%s: %s (%s)",
				   rd->path, tmp, rundir_whose(rd->path),
				   strerror(-e), rundir_fix(rd->path, e));
	}
	for (int i = 0; i < npieces && !e; i++)
		e = write_all(fd, piece[i].iov_base, piece[i].iov_len);
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

int dmt_file_write(const struct dmt_rundir *rd, const char *name,
		   const char *text, size_t len, struct dmt_err *err)
{
	struct iovec all = { (void *)text, len };

	return file_write_pieces(rd, name, &all, 1, err);
}

int dmt_owner_write_closed(const struct dmt_rundir *rd, const char *name,
			   const char *text, size_t len, struct dmt_err *err)
{
	static const char open_line[] = "\nstate open\n";
	const char *p = memmem(text, len, open_line, sizeof(open_line) - 1);
	size_t head, tail;
	struct iovec piece[3];

	if (!p)		/* closed already */
		return dmt_file_write(rd, name, text, len, err);
	/* "...\nstate " "closed" "\nkeep-rss ..." */
	head = (size_t)(p - text) + strlen("\nstate ");
	tail = head + strlen("open");
	piece[0] = (struct iovec){ (void *)text, head };
	piece[1] = (struct iovec){ (void *)"closed", strlen("closed") };
	piece[2] = (struct iovec){ (void *)(text + tail), len - tail };
	return file_write_pieces(rd, name, piece, 3, err);
}

int dmt_file_remove(const struct dmt_rundir *rd, const char *name)
{
	if (unlinkat(rd->fd, name, 0) < 0 && errno != ENOENT)
		return -errno;
	return 0;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int dmt_rundir_list(const struct dmt_rundir *rd, const char *prefix,
		    char ***names, size_t *n, struct dmt_err *err)
{
	size_t plen = strlen(prefix), cap = 0;
	struct dirent *d;
	char **v = NULL;
	int fd, e = 0;
	DIR *dp;

	*names = NULL;
	*n = 0;
	fd = openat(rd->fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	dp = fd < 0 ? NULL : fdopendir(fd);
	if (!dp) {
		e = -errno;
		if (fd >= 0)
			close(fd);
		return dmt_err_set(err, e, "cannot list %s: %s", rd->path, strerror(-e));
	}
	while ((d = readdir(dp))) {
		if (strncmp(d->d_name, prefix, plen))
			continue;
		if (*n == cap) {
			char **nv = dmt_realloc(v, (cap = cap ? 2 * cap : 8) * sizeof(*v));

			if (!nv) {
				e = -ENOMEM;
				break;
			}
			v = nv;
		}
		v[*n] = dmt_strdup(d->d_name);
		if (!v[*n]) {
			e = -ENOMEM;
			break;
		}
		(*n)++;
	}
	closedir(dp);
	if (e < 0) {
		for (size_t i = 0; i < *n; i++)
			free(v[i]);
		free(v);
		*n = 0;
		return dmt_err_set(err, e, "listing %s: out of memory", rd->path);
	}
	if (*n)
		qsort(v, *n, sizeof(*v), cmp_names);
	*names = v;
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
	int64_t start = dmt_now_ms();
	long pause_us = 200;

	for (;;) {
		struct timespec ts;

		if (flock(fd, LOCK_EX | LOCK_NB) == 0)
			return 0;
		if (errno != EWOULDBLOCK && errno != EINTR)
			return -errno;
		if (dmt_now_ms() - start >= wait_ms)
			return -EBUSY;
		ts.tv_sec = 0;
		ts.tv_nsec = pause_us * 1000;
		nanosleep(&ts, NULL);
		if (pause_us < 4000)	/* short: polling is not fair */
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

// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The emulated NIC's shared state: the state file every process maps, its
 * robust lock, the NICs, the bindings and their page pools, each process's
 * token file, and the reaping of what dead processes left (emu.h).
 */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <linux/sockios.h>

#include "emu.h"

#ifndef SIOCGSKNS
#define SIOCGSKNS 0x894C
#endif

struct emu_real emu_real;
struct emu_shm *emu_sh;
char emu_path[4096];

static pthread_once_t real_once = PTHREAD_ONCE_INIT;
static pthread_once_t on_once = PTHREAD_ONCE_INIT;

static void *next_sym(const char *name)
{
	void *p = dlsym(RTLD_NEXT, name);

	if (!p)
		p = dlsym(RTLD_DEFAULT, name);
	return p;
}

static void real_resolve(void)
{
#define R(f) (*(void **)&emu_real.f = next_sym(#f))
	R(socket);
	R(close);
	R(sendto);
	R(sendmsg);
	R(recvmsg);
	R(recvfrom);
	R(recv);
	R(setsockopt);
	R(ioctl);
	R(open);
	R(open64);
	R(fopen);
	R(fopen64);
	R(poll);
	R(ppoll);
	R(dup2);
	R(dup3);
	R(fstatfs);
	R(fstatfs64);
	R(syscall);
#undef R
}

void emu_real_init(void)
{
	pthread_once(&real_once, real_resolve);
}

void emu_log(const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if (n > (int)sizeof(buf) - 2)
		n = (int)sizeof(buf) - 2;
	buf[n++] = '\n';
	if (write(2, "devmemtcp-emu: ", 15) < 0 || write(2, buf, (size_t)n) < 0)
		return;
}

int emu_unmodelled(const char *fmt, ...)
{
	char buf[EMU_MSG_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	emu_log("NOT MODELLED (strict emulation, the test must fail): %s", buf);
	if (emu_sh) {
		/* without the lock: callers may hold it */
		if (atomic_fetch_add((_Atomic uint64_t *)&emu_sh->st.unmodelled, 1) == 0)
			snprintf(emu_sh->st.unmodelled_msg,
				 sizeof(emu_sh->st.unmodelled_msg), "%s", buf);
	}
	return -EOPNOTSUPP;
}

static void map_state(void)
{
	const char *p = getenv("DEVMEMTCP_EMU");
	struct stat st;
	void *m;
	int fd;

	emu_real_init();
	if (!p || !*p)
		return;
	snprintf(emu_path, sizeof(emu_path), "%s", p);
	fd = emu_real.open(p, O_RDWR | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) || (size_t)st.st_size < sizeof(struct emu_shm)) {
		emu_log("DEVMEMTCP_EMU=%s: cannot open the emulated NIC's state (%s): create it with emuctl create",
			p, strerror(fd < 0 ? errno : EINVAL));
		abort();
	}
	m = mmap(NULL, sizeof(struct emu_shm), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	emu_real.close(fd);
	if (m == MAP_FAILED) {
		emu_log("mmap of %s failed: %s", p, strerror(errno));
		abort();
	}
	if (((struct emu_shm *)m)->magic != EMU_MAGIC ||
	    ((struct emu_shm *)m)->version != EMU_VERSION ||
	    ((struct emu_shm *)m)->size != sizeof(struct emu_shm)) {
		emu_log("%s is not a state file of this emulator (version %u): recreate it with emuctl create",
			p, EMU_VERSION);
		abort();
	}
	emu_sh = m;
}

bool emu_on(void)
{
	pthread_once(&on_once, map_state);
	return emu_sh != NULL;
}

void emu_lock(void)
{
	int r = pthread_mutex_lock(&emu_sh->lock);

	if (r == EOWNERDEAD) {
		/* a process died holding it: the state it was changing may be
		 * half done; the reaper gives back what that process held */
		emu_log("a process died holding the emulated NIC's lock");
		pthread_mutex_consistent(&emu_sh->lock);
	} else if (r) {
		emu_log("locking the emulated NIC's state failed: %s", strerror(r));
		abort();
	}
}

void emu_unlock(void)
{
	pthread_mutex_unlock(&emu_sh->lock);
}

uint64_t emu_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int emu_nic_by_index(uint64_t netns, int ifindex)
{
	for (int i = 0; i < EMU_MAX_NICS; i++)
		if (emu_sh->nics[i].used && emu_sh->nics[i].ifindex == ifindex &&
		    emu_sh->nics[i].netns_ino == netns)
			return i;
	return -1;
}

int emu_nic_by_name(uint64_t netns, const char *name)
{
	for (int i = 0; i < EMU_MAX_NICS; i++)
		if (emu_sh->nics[i].used && emu_sh->nics[i].netns_ino == netns &&
		    !strncmp(emu_sh->nics[i].ifname, name, sizeof(emu_sh->nics[i].ifname)))
			return i;
	return -1;
}

uint64_t emu_thread_netns(void)
{
	struct stat st;

	if (stat("/proc/thread-self/ns/net", &st) && stat("/proc/self/ns/net", &st))
		return 0;
	return st.st_ino;
}

/* The network namespace of socket fd (SIOCGSKNS needs CAP_NET_ADMIN;
 * else the calling thread's). */
uint64_t emu_fd_netns(int fd)
{
	struct stat st;
	int ns = emu_real.ioctl(fd, SIOCGSKNS);

	if (ns < 0)
		return emu_thread_netns();
	if (fstat(ns, &st)) {
		emu_real.close(ns);
		return emu_thread_netns();
	}
	emu_real.close(ns);
	return st.st_ino;
}

uint64_t emu_proc_start(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long start = 0;
	ssize_t n;
	int fd, field;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = emu_real.open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	emu_real.close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	p = strrchr(buf, ')');
	if (!p)
		return 0;
	/* field 3 (state) follows ") "; a zombie has no descriptors left */
	if (p[1] && p[2] == 'Z')
		return 0;
	for (field = 2; *p && field < 22; p++)
		if (*p == ' ')
			field++;
	if (sscanf(p, "%llu", &start) != 1)
		return 0;
	return start;
}

bool emu_proc_alive(pid_t pid, uint64_t start)
{
	return pid > 0 && emu_proc_start(pid) == start && start;
}

bool emu_cap_net_admin(void)
{
	char line[256];
	bool ok = false;
	FILE *f = fopen("/proc/self/status", "re");

	if (!f)
		return geteuid() == 0;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long caps;

		if (sscanf(line, "CapEff: %llx", &caps) == 1) {
			ok = caps & (1ull << 12);
			break;
		}
	}
	fclose(f);
	return ok;
}

struct emu_binding *emu_binding_get(uint32_t id)
{
	for (int i = 0; id && i < EMU_MAX_BINDINGS; i++)
		if (emu_sh->bindings[i].used && emu_sh->bindings[i].id == id)
			return &emu_sh->bindings[i];
	return NULL;
}

/* ---- page pools ------------------------------------------------------------ */

#define REF_MASK 0x00ffffffu
#define REF_Q(r) ((r) >> 24)

size_t emu_pool_bytes(uint32_t npages, uint32_t nq, uint32_t ring)
{
	size_t n = sizeof(struct emu_pool);

	n += (size_t)nq * ring * sizeof(uint32_t);
	n = (n + 7) & ~(size_t)7;
	n += ((size_t)npages + 63) / 64 * sizeof(uint64_t);
	n += (size_t)npages * sizeof(uint32_t);
	return n;
}

uint32_t *emu_pool_ring(struct emu_pool *p, uint32_t qi)
{
	return (uint32_t *)(p + 1) + (size_t)qi * p->ring;
}

uint64_t *emu_pool_free(struct emu_pool *p)
{
	size_t n = sizeof(struct emu_pool) + (size_t)p->nq * p->ring * sizeof(uint32_t);

	n = (n + 7) & ~(size_t)7;
	return (uint64_t *)((char *)p + n);
}

uint32_t *emu_pool_refs(struct emu_pool *p)
{
	return (uint32_t *)(emu_pool_free(p) + ((size_t)p->npages + 63) / 64);
}

int emu_pool_qi(const struct emu_pool *p, uint32_t q)
{
	for (uint32_t i = 0; i < p->nq; i++)
		if (p->q[i].qid == q)
			return (int)i;
	return -1;
}

static struct {
	uint32_t id;
	struct emu_pool *p;
	size_t len;
} pools[EMU_MAX_BINDINGS];

static void pool_path(char *buf, size_t len, uint32_t id)
{
	snprintf(buf, len, "%s.pool.%u", emu_path, id);
}

void emu_pool_unlink(uint32_t id)
{
	char path[4200];

	pool_path(path, sizeof(path), id);
	unlink(path);
	for (int i = 0; i < EMU_MAX_BINDINGS; i++)
		if (pools[i].p && pools[i].id == id) {
			munmap(pools[i].p, pools[i].len);
			pools[i].p = NULL;
		}
}

struct emu_pool *emu_pool_map(const struct emu_binding *b, bool create)
{
	uint32_t nq = (uint32_t)__builtin_popcountll(b->qmask);
	const struct emu_nic *n = &emu_sh->nics[b->nic];
	uint32_t ring = n->rx_ring < EMU_RING_MIN ? EMU_RING_DEFAULT : n->rx_ring;
	size_t len;
	char path[4200];
	struct emu_pool *p;
	int fd, slot = -1;

	for (int i = 0; i < EMU_MAX_BINDINGS; i++) {
		if (pools[i].p && pools[i].id == b->id)
			return pools[i].p;
		if (!pools[i].p && slot < 0)
			slot = i;
	}
	if (slot < 0) {
		/* the oldest mapping of a binding that may be gone */
		for (int i = 0; i < EMU_MAX_BINDINGS; i++)
			if (!emu_binding_get(pools[i].id)) {
				munmap(pools[i].p, pools[i].len);
				pools[i].p = NULL;
				slot = i;
				break;
			}
		if (slot < 0)
			return NULL;
	}
	pool_path(path, sizeof(path), b->id);
	fd = emu_real.open(path, O_RDWR | O_CLOEXEC | (create ? O_CREAT | O_TRUNC : 0), 0600);
	if (fd < 0)
		return NULL;
	if (create) {
		len = emu_pool_bytes(b->npages, nq, ring);
		if (ftruncate(fd, (off_t)len)) {
			emu_real.close(fd);
			return NULL;
		}
	} else {
		struct stat st;

		if (fstat(fd, &st)) {
			emu_real.close(fd);
			return NULL;
		}
		len = (size_t)st.st_size;
	}
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	emu_real.close(fd);
	if (p == MAP_FAILED)
		return NULL;
	if (create) {
		uint32_t qi = 0;
		uint64_t *fb;

		p->magic = EMU_MAGIC;
		p->id = b->id;
		p->npages = b->npages;
		p->page_size = b->page_size;
		p->nq = nq;
		p->ring = ring;
		p->size = b->size;
		for (uint32_t q = 0; q < EMU_MAX_QUEUES; q++) {
			if (!(b->qmask & (1ull << q)))
				continue;
			p->q[qi].qid = q;
			p->q[qi].frag_page = UINT32_MAX;
			/* rx_mix: a fixed seed per queue, as the sim's */
			p->q[qi].mix = 0x9e3779b9u ^ (q * 2654435761u) ^ n->mix_seed[q];
			qi++;
		}
		fb = emu_pool_free(p);
		for (uint32_t i = 0; i < b->npages; i++)
			fb[i / 64] |= 1ull << (i % 64);
	} else if (p->magic != EMU_MAGIC || p->id != b->id) {
		munmap(p, len);
		return NULL;
	}
	pools[slot].id = b->id;
	pools[slot].p = p;
	pools[slot].len = len;
	return p;
}

void emu_page_put(struct emu_binding *b, struct emu_pool *p, uint32_t qi,
		  uint32_t page)
{
	uint32_t *refs = emu_pool_refs(p);
	struct emu_pq *pq;
	uint32_t q;

	(void)qi;
	if (page >= p->npages || !(refs[page] & REF_MASK)) {
		emu_log("page %u of binding %u put with no reference: emulator bug", page, b->id);
		return;
	}
	refs[page]--;
	if (refs[page] & REF_MASK)
		return;
	/* to the pool that allocated it: its recycle ring, else the gen_pool */
	q = REF_Q(refs[page]);
	pq = &p->q[q];
	refs[page] = 0;
	if (pq->rcount < p->ring) {
		emu_pool_ring(p, q)[(pq->rhead + pq->rcount) % p->ring] = page;
		pq->rcount++;
	} else {
		emu_pool_free(p)[page / 64] |= 1ull << (page % 64);
	}
	emu_sh->pool_gen++;
}

/* A free page for queue index qi: the alloc cache, refilled from the
 * recycle ring 64 at a time (so a refill comes out last in first), else
 * the gen_pool's lowest free page; its reference count is set to refs.
 * -ENOMEM when there is none. */
int emu_page_alloc(struct emu_pool *p, uint32_t qi, uint32_t refs, uint32_t *page)
{
	struct emu_pq *pq = &p->q[qi];
	uint32_t *ring = emu_pool_ring(p, qi);
	uint64_t *fb;

	if (!pq->ncache) {
		while (pq->ncache < EMU_REFILL && pq->rcount) {
			pq->cache[pq->ncache++] = ring[pq->rhead];
			pq->rhead = (pq->rhead + 1) % p->ring;
			pq->rcount--;
		}
	}
	if (pq->ncache) {
		*page = pq->cache[--pq->ncache];
	} else {
		fb = emu_pool_free(p);
		for (uint32_t w = 0;; w++) {
			if (w >= (p->npages + 63) / 64)
				return -ENOMEM;
			if (fb[w]) {
				*page = w * 64 + (uint32_t)__builtin_ctzll(fb[w]);
				fb[w] &= fb[w] - 1;
				break;
			}
		}
	}
	emu_pool_refs(p)[*page] = (qi << 24) | refs;
	return 0;
}

/* Pages free for queue index qi (cache, ring, gen_pool). */
uint32_t emu_pool_avail(struct emu_pool *p, uint32_t qi)
{
	uint64_t *fb = emu_pool_free(p);
	uint32_t n = p->q[qi].ncache + p->q[qi].rcount;

	for (uint32_t w = 0; w < (p->npages + 63) / 64; w++)
		n += (uint32_t)__builtin_popcountll(fb[w]);
	return n;
}

/* ---- process token files ----------------------------------------------------- */

static struct emu_procfile *self_pf;
static size_t self_pf_len;
static pid_t self_pid;

static size_t procfile_bytes(void)
{
	size_t per = EMU_MAX_TOK / 64 * sizeof(uint64_t) + EMU_MAX_TOK * sizeof(struct emu_tok);

	return sizeof(struct emu_procfile) + (size_t)EMU_PROC_SOCKS * per;
}

uint64_t *emu_tsock_bits(struct emu_procfile *pf, int slot)
{
	size_t per = EMU_MAX_TOK / 64 * sizeof(uint64_t) + EMU_MAX_TOK * sizeof(struct emu_tok);

	return (uint64_t *)((char *)(pf + 1) + (size_t)slot * per);
}

struct emu_tok *emu_tsock_toks(struct emu_procfile *pf, int slot)
{
	return (struct emu_tok *)(emu_tsock_bits(pf, slot) + EMU_MAX_TOK / 64);
}

static void procfile_path(char *buf, size_t len, pid_t pid, uint64_t start)
{
	snprintf(buf, len, "%s.proc.%d.%llu", emu_path, (int)pid,
		 (unsigned long long)start);
}

struct emu_procfile *emu_proc_self(void)
{
	char path[4200];
	uint64_t start;
	pid_t pid = getpid();
	void *m;
	int fd, slot = -1;

	if (self_pf && self_pid == pid)
		return self_pf;
	start = emu_proc_start(pid);
	procfile_path(path, sizeof(path), pid, start);
	fd = emu_real.open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || ftruncate(fd, (off_t)procfile_bytes())) {
		emu_log("cannot create %s: %s", path, strerror(errno));
		if (fd >= 0)
			emu_real.close(fd);
		return NULL;
	}
	m = mmap(NULL, procfile_bytes(), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	emu_real.close(fd);
	if (m == MAP_FAILED)
		return NULL;
	self_pf = m;
	self_pf_len = procfile_bytes();
	self_pid = pid;
	self_pf->magic = EMU_MAGIC;
	self_pf->pid = pid;
	self_pf->start = start;
	/* registered under the lock by the caller's caller: do it here */
	for (int i = 0; i < EMU_MAX_PROCS; i++) {
		if (emu_sh->procs[i].used && emu_sh->procs[i].pid == pid) {
			slot = i;
			break;
		}
		if (!emu_sh->procs[i].used && slot < 0)
			slot = i;
	}
	if (slot < 0) {
		emu_unmodelled("more than %d processes hold tokens of the emulated NIC", EMU_MAX_PROCS);
		return self_pf;
	}
	emu_sh->procs[slot].pid = pid;
	emu_sh->procs[slot].start = start;
	emu_sh->procs[slot].used = 1;
	return self_pf;
}

/* Put the page of token or pending entry t. */
static void tok_put(const struct emu_tok *t)
{
	struct emu_binding *b = emu_binding_get(t->binding);
	struct emu_pool *p = b ? emu_pool_map(b, false) : NULL;

	if (!p) {
		emu_log("a token of binding %u whose pool is gone: emulator bug", t->binding);
		return;
	}
	emu_page_put(b, p, 0, t->page);
	if (b->held)
		b->held--;
	emu_binding_maybe_free(b);
}

void emu_tsock_release_locked(struct emu_procfile *pf, int slot)
{
	struct emu_tsock *ts = &pf->socks[slot];
	uint64_t *bits = emu_tsock_bits(pf, slot);
	struct emu_tok *tok = emu_tsock_toks(pf, slot);

	if (!ts->used)
		return;
	for (uint32_t w = 0; ts->count && w < EMU_MAX_TOK / 64; w++) {
		while (bits[w]) {
			uint32_t t = w * 64 + (uint32_t)__builtin_ctzll(bits[w]);

			bits[w] &= bits[w] - 1;
			if (!t)
				continue;	/* token 0 is never handed out */
			tok_put(&tok[t]);
			ts->count--;
			if (pf != self_pf)
				emu_sh->st.reaped_tokens++;
		}
	}
	for (uint32_t i = 0; i < ts->npend; i++)
		tok_put(&ts->pend[(ts->phead + i) % EMU_MAX_PENDING]);
	ts->npend = 0;
	ts->phead = 0;
	ts->count = 0;
	ts->hint = 0;
	ts->ino = 0;
	ts->used = 0;
	/* the token table's pages go back to the system */
	madvise(bits, EMU_MAX_TOK / 64 * sizeof(uint64_t) + EMU_MAX_TOK * sizeof(struct emu_tok),
		MADV_REMOVE);
}

/* A dead process's tokens and unread buffers go back, as its sockets'
 * close would have given them. */
static void reap_proc(struct emu_proc *pr)
{
	char path[4200];
	struct emu_procfile *pf;
	void *m;
	int fd;

	procfile_path(path, sizeof(path), pr->pid, pr->start);
	fd = emu_real.open(path, O_RDWR | O_CLOEXEC);
	if (fd >= 0) {
		m = mmap(NULL, procfile_bytes(), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		emu_real.close(fd);
		if (m != MAP_FAILED) {
			pf = m;
			for (int s = 0; s < EMU_PROC_SOCKS; s++)
				emu_tsock_release_locked(pf, s);
			munmap(m, procfile_bytes());
		}
		unlink(path);
	}
	pr->used = 0;
	emu_sh->st.reaped_procs++;
}

static void unbind_locked(struct emu_binding *b)
{
	struct emu_nic *n = &emu_sh->nics[b->nic];

	for (int q = 0; q < EMU_MAX_QUEUES; q++)
		if (n->qbinding[q] == b->id) {
			n->qbinding[q] = 0;
			n->qpage[q] = 4096;
		}
	b->unbound = 1;
}

void emu_binding_maybe_free(struct emu_binding *b)
{
	if (b->used && b->unbound && !b->held) {
		emu_pool_unlink(b->id);
		memset(b, 0, sizeof(*b));
	}
}

void emu_reap_locked(void)
{
	for (int i = 0; i < EMU_MAX_PROCS; i++) {
		struct emu_proc *pr = &emu_sh->procs[i];

		if (pr->used && !emu_proc_alive(pr->pid, pr->start))
			reap_proc(pr);
	}
	for (int i = 0; i < EMU_MAX_BINDINGS; i++) {
		struct emu_binding *b = &emu_sh->bindings[i];

		if (!b->used)
			continue;
		if (!b->unbound && !emu_proc_alive(b->owner_pid, b->owner_start)) {
			unbind_locked(b);
			emu_sh->st.reaped_bindings++;
		}
		emu_binding_maybe_free(b);
	}
}

/* Unbind what netlink socket ino owned, unless another descriptor of it
 * lives on (a dup, a child, a process it was passed to). */
static bool socket_held_elsewhere(uint64_t ino, int closing_fd)
{
	char want[64], link[64], path[300];
	struct dirent *d;
	DIR *proc = opendir("/proc");
	bool held = false;

	snprintf(want, sizeof(want), "socket:[%llu]", (unsigned long long)ino);
	while (proc && !held && (d = readdir(proc))) {
		DIR *fds;
		struct dirent *f;
		int pid = atoi(d->d_name);

		if (pid <= 0)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/fd", pid);
		fds = opendir(path);
		while (fds && (f = readdir(fds))) {
			ssize_t n;

			if (pid == getpid() && atoi(f->d_name) == closing_fd)
				continue;
			snprintf(path, sizeof(path), "/proc/%d/fd/%s", pid, f->d_name);
			n = readlink(path, link, sizeof(link) - 1);
			if (n > 0) {
				link[n] = 0;
				if (!strcmp(link, want)) {
					held = true;
					break;
				}
			}
		}
		if (fds)
			closedir(fds);
	}
	if (proc)
		closedir(proc);
	return held;
}

/* fd, a netlink socket with inode ino, is being closed. */
void emu_nl_socket_closing(int fd, uint64_t ino)
{
	bool any = false;

	emu_lock();
	for (int i = 0; i < EMU_MAX_BINDINGS; i++)
		any |= emu_sh->bindings[i].used && !emu_sh->bindings[i].unbound &&
		       emu_sh->bindings[i].sock_ino == ino;
	emu_unlock();
	if (!any || socket_held_elsewhere(ino, fd))
		return;
	emu_lock();
	for (int i = 0; i < EMU_MAX_BINDINGS; i++) {
		struct emu_binding *b = &emu_sh->bindings[i];

		if (b->used && !b->unbound && b->sock_ino == ino) {
			unbind_locked(b);
			if (b->mem_fd >= 0 && b->owner_pid == getpid())
				emu_real.close(b->mem_fd);
			b->mem_fd = -1;
		}
	}
	emu_reap_locked();
	emu_unlock();
}

void emu_forget_process(void)
{
	if (self_pf)
		munmap(self_pf, self_pf_len);
	self_pf = NULL;
	self_pid = 0;
	for (int i = 0; i < EMU_MAX_BINDINGS; i++)
		pools[i].p = NULL;	/* the mappings stay; forget them */
	emu_nl_forget();
	emu_rx_forget();
	emu_mem_forget();
}

/* Normal exit: the sockets close with the process, and the netlink
 * sockets holding its bindings. */
__attribute__((destructor)) static void emu_exit(void)
{
	char path[4200];

	if (!emu_sh)
		return;
	emu_lock();
	for (int i = 0; i < EMU_MAX_BINDINGS; i++) {
		struct emu_binding *b = &emu_sh->bindings[i];

		if (b->used && !b->unbound && b->owner_pid == getpid()) {
			emu_unlock();
			emu_nl_socket_closing(-1, b->sock_ino);
			emu_lock();
		}
	}
	if (self_pf && self_pid == getpid()) {
		for (int s = 0; s < EMU_PROC_SOCKS; s++)
			emu_tsock_release_locked(self_pf, s);
		for (int i = 0; i < EMU_MAX_PROCS; i++)
			if (emu_sh->procs[i].used && emu_sh->procs[i].pid == getpid())
				emu_sh->procs[i].used = 0;
		procfile_path(path, sizeof(path), self_pid, self_pf->start);
		unlink(path);
	}
	emu_reap_locked();
	emu_unlock();
}

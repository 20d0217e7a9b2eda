// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * Control of the emulated NIC (emuctl's verbs): make the state file, add
 * a NIC over a real interface, choose its RX buffer layout, print its
 * state (to compare before and after a test), its counters, and check that
 * nothing is left: no binding, no page held, no request that was not
 * modelled.
 */
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "emu.h"
#include "emu-ctl.h"

int devmemtcp_emu_create(const char *path)
{
	pthread_mutexattr_t ma;
	struct emu_shm *sh;
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	if (fd < 0)
		return -errno;
	if (ftruncate(fd, sizeof(struct emu_shm))) {
		close(fd);
		return -errno;
	}
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (sh == MAP_FAILED)
		return -errno;
	memset(sh, 0, sizeof(*sh));
	pthread_mutexattr_init(&ma);
	pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST);
	pthread_mutex_init(&sh->lock, &ma);
	pthread_mutexattr_destroy(&ma);
	sh->size = sizeof(*sh);
	sh->version = EMU_VERSION;
	sh->next_binding = 1;
	__atomic_store_n(&sh->magic, EMU_MAGIC, __ATOMIC_RELEASE);
	munmap(sh, sizeof(*sh));
	return 0;
}

static int need_state(void)
{
	if (!emu_on()) {
		fprintf(stderr, "emuctl: set DEVMEMTCP_EMU to the state file (made by emuctl create)\n");
		return -EINVAL;
	}
	return 0;
}

static int layout_check(uint32_t rx_buf_size, int pack)
{
	if (rx_buf_size && rx_buf_size != 1024 && rx_buf_size != 2048 && rx_buf_size != 4096) {
		fprintf(stderr, "emuctl: rx_buf_size must be 0 or a power of two from 1024 to 4096\n");
		return -EINVAL;
	}
	if (rx_buf_size && pack) {
		fprintf(stderr, "emuctl: rx_buf_size and rx_pack exclude each other\n");
		return -EINVAL;
	}
	return 0;
}

int devmemtcp_emu_add_nic(const char *ifname, uint32_t nq, uint32_t rx_buf_size, int pack,
			  int mix)
{
	int ifindex = (int)if_nametoindex(ifname), slot = -1, err;
	uint64_t netns = emu_thread_netns();
	struct emu_nic *n;

	err = need_state();
	if (err)
		return err;
	err = layout_check(rx_buf_size, pack);
	if (err)
		return err;
	if (!ifindex) {
		fprintf(stderr, "emuctl: no interface %s in this network namespace\n", ifname);
		return -ENODEV;
	}
	if (!nq || nq > EMU_MAX_QUEUES) {
		fprintf(stderr, "emuctl: %u queues: 1 to %d\n", nq, EMU_MAX_QUEUES);
		return -EINVAL;
	}
	emu_lock();
	if (emu_nic_by_index(netns, ifindex) >= 0) {
		emu_unlock();
		fprintf(stderr, "emuctl: %s is emulated already\n", ifname);
		return -EEXIST;
	}
	for (int i = 0; i < EMU_MAX_NICS && slot < 0; i++)
		if (!emu_sh->nics[i].used)
			slot = i;
	if (slot < 0) {
		emu_unlock();
		return -ENOSPC;
	}
	n = &emu_sh->nics[slot];
	memset(n, 0, sizeof(*n));
	snprintf(n->ifname, sizeof(n->ifname), "%s", ifname);
	n->ifindex = ifindex;
	n->netns_ino = netns;
	n->nq = nq;
	/* the sim's defaults: header split off, hds-thresh 256, ntuple on,
	 * 1024-entry rings, RSS spread over every queue with a random key */
	n->rx_ring = n->tx_ring = EMU_RING_DEFAULT;
	n->hds_thresh = 256;
	n->ntuple = 1;
	emu_fill_indir(n->indir, nq);
	if (getrandom(n->key, sizeof(n->key), 0) != (ssize_t)sizeof(n->key))
		memset(n->key, 0x6d, sizeof(n->key));
	for (uint32_t q = 0; q < EMU_MAX_QUEUES; q++) {
		n->qpage[q] = 4096;
		n->mix_seed[q] = q * 0x9e3779b9u;
	}
	n->rx_buf_size = rx_buf_size;
	n->rx_pack = (uint8_t)pack;
	n->rx_mix = (uint8_t)mix;
	n->tso_segs = 45;
	n->used = 1;
	emu_unlock();
	return 0;
}

static struct emu_nic *nic_named(const char *ifname)
{
	int i = emu_nic_by_name(emu_thread_netns(), ifname);

	for (int k = 0; i < 0 && k < EMU_MAX_NICS; k++)
		if (emu_sh->nics[k].used && !strcmp(emu_sh->nics[k].ifname, ifname))
			i = k;
	if (i < 0) {
		fprintf(stderr, "emuctl: %s is not an emulated NIC\n", ifname);
		return NULL;
	}
	return &emu_sh->nics[i];
}

int devmemtcp_emu_set_layout(const char *ifname, uint32_t rx_buf_size, int pack, int mix)
{
	struct emu_nic *n;
	int err = need_state();

	if (err || (err = layout_check(rx_buf_size, pack)))
		return err;
	emu_lock();
	emu_reap_locked();
	n = nic_named(ifname);
	if (!n) {
		emu_unlock();
		return -ENODEV;
	}
	for (uint32_t q = 0; q < n->nq; q++)
		if (n->qbinding[q]) {
			emu_unlock();
			fprintf(stderr, "emuctl: %s has a binding: the layout changes only with none (as the sim's module parameters with a reload)\n",
				ifname);
			return -EBUSY;
		}
	n->rx_buf_size = rx_buf_size;
	n->rx_pack = (uint8_t)pack;
	n->rx_mix = (uint8_t)mix;
	emu_unlock();
	return 0;
}

int devmemtcp_emu_set_tso(const char *ifname, uint32_t segs)
{
	struct emu_nic *n;
	int err = need_state();

	if (err)
		return err;
	if (!segs || segs > 45) {
		fprintf(stderr, "emuctl: %u segments per TSO frame: 1 to 45 (64 KiB)\n", segs);
		return -EINVAL;
	}
	emu_lock();
	n = nic_named(ifname);
	if (n)
		n->tso_segs = segs;
	emu_unlock();
	return n ? 0 : -ENODEV;
}

int devmemtcp_emu_show(const char *ifname, FILE *out)
{
	struct emu_nic *n;
	int err = need_state();

	if (err)
		return err;
	emu_lock();
	emu_reap_locked();
	n = nic_named(ifname);
	if (!n) {
		emu_unlock();
		return -ENODEV;
	}
	fprintf(out, "nic %s ifindex %d queues %u\n", n->ifname, n->ifindex, n->nq);
	fprintf(out, "rings rx %u tx %u tcp-data-split %s (set %u) hds-thresh %u\n",
		n->rx_ring, n->tx_ring, n->hds ? "on" : "off", n->hds_cfg, n->hds_thresh);
	fprintf(out, "ntuple %s rules %u\n", n->ntuple ? "on" : "off", n->nrules);
	for (int i = 0; i < EMU_MAX_RULES; i++)
		if (n->rules[i].used) {
			const struct ethtool_rx_flow_spec *fs = &n->rules[i].fs;

			fprintf(out, "rule %d type %#x cookie %llu ctx %u:", i, fs->flow_type,
				(unsigned long long)fs->ring_cookie, n->rules[i].rss_ctx);
			for (size_t k = 0; k < sizeof(*fs); k++)
				fprintf(out, "%02x", ((const uint8_t *)fs)[k]);
			fprintf(out, "\n");
		}
	fprintf(out, "rss %s:", n->rxfh_configured ? "configured" : "default");
	for (int i = 0; i < EMU_INDIR; i++)
		fprintf(out, " %u", n->indir[i]);
	fprintf(out, "\n");
	for (int c = 1; c < EMU_MAX_CTX; c++)
		if (n->ctx_used[c]) {
			fprintf(out, "context %d:", c);
			for (int i = 0; i < EMU_INDIR; i++)
				fprintf(out, " %u", n->ctx_indir[c][i]);
			fprintf(out, "\n");
		}
	for (uint32_t q = 0; q < n->nq; q++)
		if (n->qbinding[q])
			fprintf(out, "queue %u binding %u page %u\n", q, n->qbinding[q], n->qpage[q]);
	fprintf(out, "layout rx_buf_size %u rx_pack %u rx_mix %u\n", n->rx_buf_size,
		n->rx_pack, n->rx_mix);
	emu_unlock();
	return 0;
}

int devmemtcp_emu_stats(FILE *out)
{
	const struct emu_stats *st;
	uint64_t held = 0;
	int bindings = 0, procs = 0, err = need_state();

	if (err)
		return err;
	emu_lock();
	emu_reap_locked();
	st = &emu_sh->st;
	for (int i = 0; i < EMU_MAX_BINDINGS; i++)
		if (emu_sh->bindings[i].used) {
			bindings++;
			held += emu_sh->bindings[i].held;
		}
	for (int i = 0; i < EMU_MAX_PROCS; i++)
		procs += emu_sh->procs[i].used != 0;
	fprintf(out, "unmodelled=%llu\n", (unsigned long long)st->unmodelled);
	if (st->unmodelled)
		fprintf(out, "unmodelled_first=%s\n", st->unmodelled_msg);
	fprintf(out, "bindings=%d\npages_held=%llu\nprocesses=%d\n", bindings,
		(unsigned long long)held, procs);
#define S(f) fprintf(out, #f "=%llu\n", (unsigned long long)st->f)
	S(recvs);
	S(frags);
	S(bytes);
	S(plain_bytes);
	S(dontneed_calls);
	S(tokens_freed);
	S(tokens_unknown);
	S(starvations);
	S(starved_ns);
	S(alloc_fail);
	S(tx_sends);
	S(tx_bytes);
	S(reaped_procs);
	S(reaped_tokens);
	S(reaped_bindings);
	S(copies);
	S(copy_calls);
	S(copy_xfers);
	S(copy_bytes);
#undef S
	emu_unlock();
	return 0;
}

int devmemtcp_emu_check(FILE *out)
{
	int bad = 0, err = need_state();

	if (err)
		return err;
	emu_lock();
	emu_reap_locked();
	if (emu_sh->st.unmodelled) {
		fprintf(out, "emuctl check: %llu requests the emulator does not model, the first: %s\n",
			(unsigned long long)emu_sh->st.unmodelled, emu_sh->st.unmodelled_msg);
		bad = 1;
	}
	if (emu_sh->st.tokens_unknown) {
		fprintf(out, "emuctl check: %llu tokens returned that were not outstanding\n",
			(unsigned long long)emu_sh->st.tokens_unknown);
		bad = 1;
	}
	for (int i = 0; i < EMU_MAX_BINDINGS; i++) {
		const struct emu_binding *b = &emu_sh->bindings[i];

		if (!b->used)
			continue;
		fprintf(out, "emuctl check: binding %u (%s, owner pid %d) %s, %llu page references held\n",
			b->id, b->tx ? "TX" : "RX", b->owner_pid,
			b->unbound ? "unbound" : "still bound", (unsigned long long)b->held);
		bad = 1;
	}
	emu_unlock();
	return bad;
}

int devmemtcp_emu_knob(const char *ifname, const char *knob, unsigned long long v)
{
	struct emu_nic *n;
	int err = need_state();

	if (err)
		return err;
	emu_lock();
	n = nic_named(ifname);
	if (!n) {
		emu_unlock();
		return -ENODEV;
	}
	if (!strcmp(knob, "corrupt_offset"))
		n->corrupt_offset = v;
	else if (!strcmp(knob, "fail_alloc"))
		n->fail_alloc = (uint32_t)v;
	else
		err = -EINVAL;
	emu_unlock();
	return err;
}

uint64_t devmemtcp_emu_qstat(const char *ifname, uint32_t q, const char *what)
{
	struct emu_nic *n;
	uint64_t v = 0;

	if (need_state())
		return 0;
	emu_lock();
	n = nic_named(ifname);
	if (n && q < n->nq) {
		if (!strcmp(what, "alloc_fail"))
			v = n->rxq[q].alloc_fail;
		else if (!strcmp(what, "bytes"))
			v = n->rxq[q].bytes;
		else if (!strcmp(what, "bufs"))
			v = n->rxq[q].bufs;
		else if (!strcmp(what, "pages"))
			v = n->rxq[q].pages;
	}
	emu_unlock();
	return v;
}

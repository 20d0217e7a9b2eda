// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * Connects in progress (stage.h).  NCCL calls connect again and again with
 * the same handle buffer (the one its proxy keeps for that connection)
 * until a comm comes back, so the connection in progress must be found from
 * the handle; but the handle's bytes come from the peer, through NCCL's
 * bootstrap, which nothing authenticates.  So the handle never holds a
 * pointer: the first call puts the connection in this process's table
 * and writes, into the 16 connector bytes that listen leaves zero, the
 * slot and a random 64-bit key this process chose (it never leaves the
 * process).  A later call finds the connection only when the slot is
 * within the table, holds a connection in progress with that key, and was
 * made for the same peer bytes (address, ports, nonce).
 *
 * So the same bytes from the peer can mean two things, told apart by the
 * connector bytes alone: zero, a new connection; non-zero, the connection
 * this buffer started.  A second buffer holding the same listen handle is
 * a second connection to that listen, never a share of the first one's
 * (each NCCL connector keeps its own buffer), and a buffer whose connect
 * returned a comm or failed has its connector bytes zeroed again: it reads
 * as listen wrote it, and a later connect with it is a new connection.
 * Connector bytes that find nothing (written by the peer, or a copy of a
 * buffer whose connect another call finished) find nothing: connect
 * refuses them with ncclInternalError, never follows them.
 */
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "stage.h"

struct dmtn_stage {
	uint64_t key;		/* 0: a free slot */
	bool busy;		/* a call holds it */
	void *comm;
	uint8_t peer[DMTN_HANDLE_PEER_BYTES];
};

#define DMTN_STAGE_MAX 65536	/* connections in progress at once */

static struct {
	pthread_mutex_t lock;
	struct dmtn_stage *v;
	size_t n;
} stages = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* The handle buffer is NCCL's: no alignment is promised, so its
 * connector bytes are copied, never read or written as fields. */
static void stage_write(void *h, uint64_t key, uint64_t slot)
{
	memcpy((char *)h + offsetof(struct dmtn_handle, stage_key), &key,
	       sizeof(key));
	memcpy((char *)h + offsetof(struct dmtn_handle, stage_slot), &slot,
	       sizeof(slot));
}

int dmtn_stage_add(void *comm, void *h, uint64_t *slot)
{
	uint64_t key;
	size_t i;
	int ret = 0;

	do {
		if (getrandom(&key, sizeof(key), 0) != sizeof(key))
			return -errno;
	} while (!key);
	pthread_mutex_lock(&stages.lock);
	for (i = 0; i < stages.n && stages.v[i].key; i++)
		;
	if (i == stages.n) {
		size_t n = stages.n ? 2 * stages.n : 16;
		struct dmtn_stage *v;

		if (n > DMTN_STAGE_MAX) {
			ret = -ENOSPC;
			goto out;
		}
		v = realloc(stages.v, n * sizeof(*v));
		if (!v) {
			ret = -ENOMEM;
			goto out;
		}
		memset(v + stages.n, 0, (n - stages.n) * sizeof(*v));
		stages.v = v;
		stages.n = n;
	}
	stages.v[i] = (struct dmtn_stage){ .key = key, .busy = true, .comm = comm };
	memcpy(stages.v[i].peer, h, DMTN_HANDLE_PEER_BYTES);
	stage_write(h, key, i + 1);
	*slot = i + 1;
out:
	pthread_mutex_unlock(&stages.lock);
	return ret;
}

void *dmtn_stage_claim(const struct dmtn_peer *p, const void *h)
{
	void *c = NULL;
	struct dmtn_stage *s;

	pthread_mutex_lock(&stages.lock);
	if (p->stage_slot < 1 || p->stage_slot > stages.n)
		goto out;
	s = &stages.v[p->stage_slot - 1];
	if (!s->key || s->key != p->stage_key || s->busy ||
	    memcmp(s->peer, h, DMTN_HANDLE_PEER_BYTES))
		goto out;
	s->busy = true;
	c = s->comm;
out:
	pthread_mutex_unlock(&stages.lock);
	return c;
}

void dmtn_stage_release(void *h, uint64_t slot, bool finished)
{
	struct dmtn_stage *s;

	pthread_mutex_lock(&stages.lock);
	s = &stages.v[slot - 1];
	s->busy = false;
	if (finished) {
		memset(s, 0, sizeof(*s));
		stage_write(h, 0, 0);
	}
	pthread_mutex_unlock(&stages.lock);
}

void dmtn_stage_drain(void (*free_fn)(void *comm))
{
	size_t i;

	pthread_mutex_lock(&stages.lock);
	for (i = 0; i < stages.n; i++) {
		struct dmtn_stage *s = &stages.v[i];

		/* NCCL never finalizes during a connect; if it did, the
		 * comm of that call is left to it */
		if (!s->key || s->busy)
			continue;
		free_fn(s->comm);
		memset(s, 0, sizeof(*s));
	}
	for (i = 0; i < stages.n && !stages.v[i].key; i++)
		;
	if (i == stages.n) {
		free(stages.v);
		stages.v = NULL;
		stages.n = 0;
	}
	pthread_mutex_unlock(&stages.lock);
}

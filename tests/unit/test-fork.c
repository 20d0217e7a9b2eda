// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * What a forked child inherits (devmemtcp(7), FORK): a parent holds
 * fragments of a receiver and a NIC handle (the in-memory NIC of
 * fake-nic.h, in shared memory) while children fork, make and use handles
 * of their own, call the parent's, free them and exit.  No child returns a
 * parent's token (the token return goes to a stand-in for the kernel that
 * counts, in shared memory, how often each token came back), no child
 * undoes the parent's NIC setup, and every call of a child on a parent's
 * handle fails with EBADFD and the message saying why; the parent's
 * handles work on afterwards.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "buf.h"
#include "cmsgfixture.h"
#include "ctxfixture.h"
#include "forkfixture.h"
#include "fake-nic.h"
#include "nl.h"
#include "nicfixture.h"
#include "rx.h"
#include "tokens.h"

#define NTOKENS 1024
#define HELD 8
#define CHILDREN 3
#define CMSG_FRAG CMSG_SPACE(sizeof(struct dmt_dmabuf_cmsg))

#define REFUSED(fn, what) DMT_FORK_REFUSED(fn, what)

/* The kernel's side, shared with the children: how often each token came
 * back, and from which process. */
struct kern {
	unsigned int returned[NTOKENS];
	pid_t by[NTOKENS];
};
static struct kern *kern;

static struct fake_nic *nic_state;
static struct devmemtcp_ctx *ctx;
static char dir[64];

static int stub_dontneed(void *arg, const struct dmt_dmabuf_token *t, size_t n)
{
	int freed = 0;

	for (size_t i = 0; i < n; i++)
		for (uint32_t j = 0; j < t[i].token_count; j++) {
			uint32_t tok = t[i].token_start + j;

			if (tok < NTOKENS) {
				__atomic_add_fetch(&kern->returned[tok], 1, __ATOMIC_RELAXED);
				kern->by[tok] = getpid();
			}
			freed++;
		}
	return freed;
}

static int setup(void **state)
{
	kern = mmap(NULL, sizeof(*kern), PROT_READ | PROT_WRITE,
		    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	nic_state = fake_shared();
	if (kern == MAP_FAILED || !nic_state)
		return -1;
	fake_init(nic_state);
	return nicfix_setup(dir, sizeof(dir), "dmt-fork", &ctx);
}

static int teardown(void **state)
{
	munmap(kern, sizeof(*kern));
	return nicfix_teardown(dir, ctx);
}

/* A receiver on sock over buf (binding 1), its token return counted. */
static struct devmemtcp_rx *rx_on(int sock, struct devmemtcp_buf *buf)
{
	struct devmemtcp_rx *rx;

	if (devmemtcp_rx_new(ctx, sock, NULL, &rx))
		return NULL;
	if (devmemtcp_rx_add_buf(rx, 1, buf)) {
		devmemtcp_rx_free(rx);
		return NULL;
	}
	dmt_rx_tokens(rx)->dontneed = stub_dontneed;
	return rx;
}

/* n fragments with tokens first.. as one recvmsg's control messages, put
 * through the receive processing into frags; the count or an error. */
static int feed(struct devmemtcp_rx *rx, uint32_t first, uint32_t n,
		struct devmemtcp_frag *frags)
{
	char ctrl[HELD * CMSG_FRAG] __attribute__((aligned(8)));
	struct msghdr msg = { .msg_control = ctrl, .msg_controllen = n * CMSG_FRAG };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);

	for (uint32_t i = 0; i < n; i++, cm = CMSG_NXTHDR(&msg, cm)) {
		struct dmt_dmabuf_cmsg d = {
			.frag_offset = (uint64_t)(first + i) * 4096,
			.frag_size = 4096,
			.frag_token = first + i,
			.dmabuf_id = 1,
		};

		cmsgfix_dmabuf(cm, &d);
	}
	return dmt_rx_process(rx, &msg, (size_t)n * 4096, frags, n);
}

static void child_work(int k, struct devmemtcp_rx *prx,
		       const struct devmemtcp_frag *held,
		       struct devmemtcp_buf *buf, struct devmemtcp_nic *pnic,
		       uint32_t pflow)
{
	struct devmemtcp_frag f[HELD];
	struct devmemtcp_flow fl;
	struct devmemtcp_rx *rx;
	char lin[64];
	int sv[2];

	/* the parent's receiver: every call that would touch the socket or
	 * the tokens is refused, saying why */
	/* ERRORS devmemtcp_rx_recv EBADFD */
	CHILD_CHECK(devmemtcp_rx_recv(prx, f, HELD, lin, sizeof(lin)) == -EBADFD);
	CHILD_CHECK(!strcmp(devmemtcp_rx_errmsg(prx),
			    REFUSED("devmemtcp_rx_recv", "receiver")));
	/* ERRORS devmemtcp_rx_release EBADFD */
	CHILD_CHECK(devmemtcp_rx_release(prx, held, HELD) == -EBADFD);
	CHILD_CHECK(!strcmp(devmemtcp_rx_errmsg(prx),
			    REFUSED("devmemtcp_rx_release", "receiver")));
	/* ERRORS devmemtcp_rx_release_all EBADFD */
	CHILD_CHECK(devmemtcp_rx_release_all(prx) == -EBADFD);
	CHILD_CHECK(!strcmp(devmemtcp_rx_errmsg(prx),
			    REFUSED("devmemtcp_rx_release_all", "receiver")));
	/* ERRORS devmemtcp_rx_flush EBADFD */
	CHILD_CHECK(devmemtcp_rx_flush(prx) == -EBADFD);
	CHILD_CHECK(!strcmp(devmemtcp_rx_errmsg(prx),
			    REFUSED("devmemtcp_rx_flush", "receiver")));
	/* ERRORS devmemtcp_rx_add_buf EBADFD */
	CHILD_CHECK(devmemtcp_rx_add_buf(prx, 2, buf) == -EBADFD);
	CHILD_CHECK(!strcmp(devmemtcp_rx_errmsg(prx),
			    REFUSED("devmemtcp_rx_add_buf", "receiver")));
	/* the parent's NIC handle: no flow added or removed */
	CHILD_CHECK(devmemtcp_flow_parse("dst-port 7000", &fl) == 0);
	/* ERRORS devmemtcp_nic_add_flow EBADFD */
	CHILD_CHECK(devmemtcp_nic_add_flow(pnic, &fl) == -EBADFD);
	CHILD_CHECK(!strcmp(devmemtcp_nic_errmsg(pnic),
			    REFUSED("devmemtcp_nic_add_flow", "NIC handle")));
	/* ERRORS devmemtcp_nic_remove_flow EBADFD */
	CHILD_CHECK(devmemtcp_nic_remove_flow(pnic, (int)pflow) == -EBADFD);
	CHILD_CHECK(!strcmp(devmemtcp_nic_errmsg(pnic),
			    REFUSED("devmemtcp_nic_remove_flow", "NIC handle")));

	/* work of its own, with the inherited context and buffer: a
	 * receiver of its own hands back its own tokens */
	CHILD_CHECK(t_tcp_pair(sv) == 0);
	rx = rx_on(sv[1], buf);
	CHILD_CHECK(rx);
	uint32_t first = 100 + (uint32_t)k * HELD;
	CHILD_CHECK(feed(rx, first, HELD, f) == HELD);
	CHILD_CHECK(devmemtcp_rx_release(rx, f, HELD) == 0);
	CHILD_CHECK(devmemtcp_rx_flush(rx) >= 0);
	devmemtcp_rx_free(rx);
	close(sv[0]);
	close(sv[1]);
	for (uint32_t i = first; i < first + HELD; i++)
		CHILD_CHECK(kern->returned[i] == 1 && kern->by[i] == getpid());

	/* freeing the parent's handles only frees this process's copies */
	CHILD_CHECK(devmemtcp_nic_close(pnic) == 0);
	devmemtcp_rx_free(prx);
	devmemtcp_buf_free(buf);
	devmemtcp_ctx_free(ctx);
	for (uint32_t i = 0; i < HELD; i++)
		CHILD_CHECK(kern->returned[i] == 0);
	_exit(0);
}

static void test_fork_children(void **state)
{
	struct devmemtcp_segment seg = { 0, 1u << 24, 0x7f0000000000 };
	struct devmemtcp_frag held[HELD];
	struct devmemtcp_flow fl;
	DEVMEMTCP_OPTS(nic_opts, o, .nqueues = 1, .flows = &fl, .nflows = 1);
	char before[16384], owned[16384], after[16384];
	struct devmemtcp_nic *nic;
	struct devmemtcp_buf *buf;
	struct devmemtcp_rx *rx;
	pid_t kids[CHILDREN];
	int sv[2], flow_id;

	fake_dump(nic_state, before, sizeof(before));
	assert_int_equal(devmemtcp_flow_parse("dst-port 5201", &fl), 0);
	assert_int_equal(devmemtcp_nic_open(ctx, "eth0", &o, &nic), 0);
	assert_int_equal(devmemtcp_flow_parse("dst-port 5202", &fl), 0);
	flow_id = devmemtcp_nic_add_flow(nic, &fl);
	assert_true(flow_id >= 0);
	fake_dump(nic_state, owned, sizeof(owned));
	assert_string_not_equal(before, owned);

	assert_int_equal(t_tcp_pair(sv), 0);
	assert_int_equal(dmt_buf_alloc(ctx, DEVMEMTCP_PROVIDER_IMPORT, &buf), 0);
	buf->size = seg.len;
	assert_int_equal(dmt_buf_set_segments(buf, &seg, 1), 0);
	rx = rx_on(sv[1], buf);
	assert_non_null(rx);
	assert_int_equal(feed(rx, 0, HELD, held), HELD);

	for (int k = 0; k < CHILDREN; k++) {
		kids[k] = fork();
		assert_true(kids[k] >= 0);
		if (kids[k] == 0)
			child_work(k, rx, held, buf, nic, (uint32_t)flow_id);
	}
	for (int k = 0; k < CHILDREN; k++) {
		int status;

		assert_int_equal(waitpid(kids[k], &status, 0), kids[k]);
		assert_true(WIFEXITED(status));
		assert_int_equal(WEXITSTATUS(status), 0);
	}

	/* the children's tokens came back once each, from them; the
	 * parent's are still out, its NIC setup is as it made it */
	for (uint32_t i = 0; i < HELD; i++)
		assert_int_equal(kern->returned[i], 0);
	for (uint32_t i = 100; i < 100 + CHILDREN * HELD; i++)
		assert_int_equal(kern->returned[i], 1);
	fake_dump(nic_state, after, sizeof(after));
	assert_string_equal(owned, after);
	assert_true(nicfix_files_left(dir, "eth0"));

	/* and the parent's handles work on */
	assert_int_equal(devmemtcp_rx_release(rx, held, HELD), 0);
	assert_true(devmemtcp_rx_flush(rx) >= 0);
	for (uint32_t i = 0; i < HELD; i++) {
		assert_int_equal(kern->returned[i], 1);
		assert_int_equal(kern->by[i], getpid());
	}
	assert_int_equal(devmemtcp_nic_remove_flow(nic, flow_id), 0);
	assert_int_equal(devmemtcp_nic_close(nic), 0);
	fake_dump(nic_state, after, sizeof(after));
	assert_string_equal(before, after);
	devmemtcp_rx_free(rx);
	devmemtcp_buf_free(buf);
	close(sv[0]);
	close(sv[1]);
}

/* A context inherited across fork() opens a query socket of its own. */
static void test_fork_ctx_query_socket(void **state)
{
	int err = 0, st;
	struct dmt_nl *mine = dmt_ctx_nl(ctx, &err);
	uint32_t portid;
	pid_t pid;

	assert_non_null(mine);
	portid = mine->portid;
	dmt_ctx_nl_put(ctx);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct dmt_nl *nl = dmt_ctx_nl(ctx, &err);

		/* a socket of its own: the kernel gave it another port id */
		CHILD_CHECK(nl && nl->portid != portid);
		dmt_ctx_nl_put(ctx);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	assert_ptr_equal(dmt_ctx_nl(ctx, &err), mine);
	dmt_ctx_nl_put(ctx);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fork_children),
		cmocka_unit_test(test_fork_ctx_query_socket),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}

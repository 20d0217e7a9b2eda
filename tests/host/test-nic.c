// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * host suite, NIC layer: probe, setup errors, lock and journal on this
 * machine's kernel, as root, inside a network and mount namespace the test
 * creates (veth va/vb with 4 RX and 3 TX queues, and lo).  Neither has header
 * split, so every setup here must fail with the exact explanation and leave
 * nothing behind.
 */
#include <dirent.h>
#include <errno.h>
#include <net/if.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>
#include <netlink/genl/ctrl.h>
#include <netlink/genl/genl.h>
#include <netlink/netlink.h>
#include <libmnl/libmnl.h>
#include <linux/bpf.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <sys/syscall.h>

#include "ctxfixture.h"
#include "devmemtcp.h"
#include "harness.h"
#include "nic.h"
#include "nicfixture.h"
#include "uapi.h"

#ifndef TEST_BUILDDIR
#define TEST_BUILDDIR "."
#endif


static struct devmemtcp_ctx *ctx;
static char dir[64];

static bool exists(const char *name)
{
	char path[256];
	struct stat st;

	return snprintf(path, sizeof(path), "%s/%s", dir, name) < (int)sizeof(path) &&
	       stat(path, &st) == 0;
}


/* Run the devmemtcp program; its stdout in out, exit status returned. */
static int tool(char *out, size_t len, const char *args)
{
	char cmd[512];

	snprintf(cmd, sizeof(cmd), "DEVMEMTCP_RUN_DIR=%s %s/tools/devmemtcp %s 2>&1",
		 dir, TEST_BUILDDIR, args);
	return t_capture(out, len, cmd);
}

static int setup(void **state)
{
	return nicfix_setup(dir, sizeof(dir), "dmt-host-nic", &ctx);
}

static int teardown(void **state)
{
	return nicfix_teardown(dir, ctx);
}

static void test_probe_veth(void **state)
{
	struct devmemtcp_probe p = { .sz = sizeof(p) };
	const struct devmemtcp_probe_problem *pr;
	int fds = t_count_fds(), n;

	n = devmemtcp_nic_probe(ctx, "va", NULL, &p);
	assert_int_equal(n, (int)p.nproblems);
	assert_true(n >= 3);
	assert_string_equal(p.ifname, "va");
	assert_int_equal(p.ifindex, (int)if_nametoindex("va"));
	assert_string_equal(p.driver, "veth");
	assert_int_equal(p.rx_queues, 4);
	assert_int_equal(p.tx_queues, 3);
	assert_int_equal(p.tcp_data_split, -1);
	assert_int_equal(p.hds_thresh, -1);
	assert_int_equal(p.ntuple, 0);
	assert_int_equal(p.ntuple_fixed, 1);
	assert_int_equal(p.rss_table_size, -1);
	assert_false(p.xdp);
	assert_int_equal(p.dmabuf_queues, 0);
	assert_int_equal(p.io_uring_queues, 0);
	assert_int_equal(p.xsk_queues, 0);
	assert_true(p.cap_net_admin);
	assert_true(p.optmem_max > 0);
	assert_int_equal(p.try_bind, 0);
	assert_true(p.kernel[0] != '\0');
	if (p.has_bind_rx)
		assert_true(p.has_netdev_family);

	pr = t_probe_problem(&p, "va (driver veth) does not support header split (tcp-data-split)");
	assert_non_null(pr);
	assert_string_equal(pr->fix,
			    "use a NIC whose driver supports devmem TCP (gve, bnxt_en, mlx5, fbnic); virtual devices (veth, loopback) cannot");
	pr = t_probe_problem(&p, "va has no ntuple filters (rx-ntuple-filter off [fixed])");
	assert_non_null(pr);
	assert_string_equal(pr->fix,
			    "use a NIC with ntuple flow steering; without it flows cannot be steered to the devmem queues");
	pr = t_probe_problem(&p, "va has no RSS indirection table: other traffic cannot be kept off the devmem queues");
	assert_non_null(pr);
	assert_null(t_probe_problem(&p, "this process lacks CAP_NET_ADMIN, which bind-rx and every ethtool change need"));
	assert_int_equal(t_count_fds(), fds);
}

/* The oracle: libnl-genl-3 reads the channels on its own (ethtool
 * CHANNELS_GET), and the ethtool program the ntuple feature. */
struct chan_oracle {
	uint32_t rx, tx, combined;
};

static int chan_cb(struct nl_msg *msg, void *arg)
{
	struct chan_oracle *o = arg;
	struct nlattr *tb[DMT_ETHTOOL_A_CHANNELS_COMBINED_COUNT + 1];

	if (genlmsg_parse(nlmsg_hdr(msg), 0, tb, DMT_ETHTOOL_A_CHANNELS_COMBINED_COUNT, NULL))
		return NL_SKIP;
	if (tb[DMT_ETHTOOL_A_CHANNELS_RX_COUNT])
		o->rx = nla_get_u32(tb[DMT_ETHTOOL_A_CHANNELS_RX_COUNT]);
	if (tb[DMT_ETHTOOL_A_CHANNELS_TX_COUNT])
		o->tx = nla_get_u32(tb[DMT_ETHTOOL_A_CHANNELS_TX_COUNT]);
	if (tb[DMT_ETHTOOL_A_CHANNELS_COMBINED_COUNT])
		o->combined = nla_get_u32(tb[DMT_ETHTOOL_A_CHANNELS_COMBINED_COUNT]);
	return NL_OK;
}

static void test_probe_libnl_oracle(void **state)
{
	struct devmemtcp_probe p = { .sz = sizeof(p) };
	struct nl_sock *sk = nl_socket_alloc();
	struct chan_oracle o = { 0 };
	struct nl_msg *msg;
	struct nlattr *h;
	char out[8192];
	bool fixed_off;
	int fam, st;

	assert_non_null(sk);
	assert_int_equal(genl_connect(sk), 0);
	fam = genl_ctrl_resolve(sk, "ethtool");
	assert_true(fam > 0);
	msg = nlmsg_alloc();
	genlmsg_put(msg, NL_AUTO_PORT, NL_AUTO_SEQ, fam, 0, 0,
		    DMT_ETHTOOL_MSG_CHANNELS_GET, 1);
	h = nla_nest_start(msg, DMT_ETHTOOL_A_CHANNELS_HEADER | NLA_F_NESTED);
	nla_put_u32(msg, DMT_ETHTOOL_A_HEADER_DEV_INDEX, if_nametoindex("vb"));
	nla_nest_end(msg, h);
	nl_socket_modify_cb(sk, NL_CB_VALID, NL_CB_CUSTOM, chan_cb, &o);
	assert_true(nl_send_auto(sk, msg) >= 0);
	assert_int_equal(nl_recvmsgs_default(sk), 0);
	nlmsg_free(msg);
	nl_socket_free(sk);

	/* the program, not a shell message, must have answered: an ethtool
	 * that is missing or failed would read as "not fixed off" */
	st = t_capture(out, sizeof(out), "ethtool -k vb 2>&1");
	if (st != 0)
		fail_msg("ethtool -k vb exited %d (127: the ethtool program, this test's oracle, is not installed):\n%s",
			 st, out);
	fixed_off = strstr(out, "\nntuple-filters: off [fixed]\n") != NULL;

	assert_true(devmemtcp_nic_probe(ctx, "vb", NULL, &p) >= 0);
	assert_int_equal(p.rx_queues, (int)(o.rx + o.combined));
	assert_int_equal(p.tx_queues, (int)(o.tx + o.combined));
	if ((p.ntuple == 0 && p.ntuple_fixed == 1) != fixed_off)
		print_error("probe: ntuple %d, ntuple_fixed %d; ethtool -k vb said:\n%s",
			    p.ntuple, p.ntuple_fixed, out);
	assert_int_equal(p.ntuple == 0 && p.ntuple_fixed == 1, fixed_off);
}

static void test_probe_lo(void **state)
{
	struct devmemtcp_probe p = { .sz = sizeof(p) };
	const struct devmemtcp_probe_problem *pr;

	assert_true(devmemtcp_nic_probe(ctx, "lo", NULL, &p) >= 3);
	assert_int_equal(p.rx_queues, 1);
	pr = t_probe_problem(&p, "lo has 1 RX queue: devmem needs one queue for itself and one for other traffic");
	assert_non_null(pr);
	assert_string_equal(pr->fix,
			    "give the device more RX queues (ethtool -L lo combined 2, or rx 2); for veth: ip link add ... numrxqueues 2");
	assert_non_null(t_probe_problem(&p, "lo (driver unknown) does not support header split (tcp-data-split)"));
}

static void test_probe_down(void **state)
{
	struct devmemtcp_probe p = { .sz = sizeof(p) };
	const struct devmemtcp_probe_problem *pr;

	assert_int_equal(system("ip link add vc numrxqueues 2 type veth peer name vd"), 0);
	assert_true(devmemtcp_nic_probe(ctx, "vc", NULL, &p) >= 1);
	pr = t_probe_problem(&p, "vc is down: its queues cannot take a binding and queue-get lists none");
	assert_non_null(pr);
	assert_string_equal(pr->fix, "ip link set vc up");
	assert_int_equal(system("ip link set vc up && ip link set vd up"), 0);
	assert_true(devmemtcp_nic_probe(ctx, "vc", NULL, &p) >= 1);
	assert_null(t_probe_problem(&p, "vc is down: its queues cannot take a binding and queue-get lists none"));
	assert_int_equal(system("ip link del vc"), 0);
}

/* "r0 = XDP_PASS; exit" */
static int load_xdp_pass(void)
{
	struct bpf_insn insns[2] = {
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = XDP_PASS },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	union bpf_attr a;

	memset(&a, 0, sizeof(a));
	a.prog_type = BPF_PROG_TYPE_XDP;
	a.insns = (uintptr_t)insns;
	a.insn_cnt = 2;
	a.license = (uintptr_t)"GPL";
	return (int)syscall(__NR_bpf, BPF_PROG_LOAD, &a, sizeof(a));
}

/* Attach (fd >= 0) or detach (fd -1) generic XDP with RTM_SETLINK. */
static int set_xdp(int ifindex, int fd)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct mnl_socket *s = mnl_socket_open(NETLINK_ROUTE);
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	struct ifinfomsg *ifm;
	struct nlattr *x;
	ssize_t n;
	int ret;

	if (!s || mnl_socket_bind(s, 0, MNL_SOCKET_AUTOPID) < 0)
		return -1;
	nlh->nlmsg_type = RTM_SETLINK;
	nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
	nlh->nlmsg_seq = 1;
	ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifm));
	ifm->ifi_family = AF_UNSPEC;
	ifm->ifi_index = ifindex;
	x = mnl_attr_nest_start(nlh, IFLA_XDP);
	mnl_attr_put_u32(nlh, IFLA_XDP_FD, (uint32_t)fd);
	mnl_attr_put_u32(nlh, IFLA_XDP_FLAGS, XDP_FLAGS_SKB_MODE);
	mnl_attr_nest_end(nlh, x);
	ret = (int)mnl_socket_sendto(s, nlh, nlh->nlmsg_len);
	if (ret >= 0) {
		n = mnl_socket_recvfrom(s, buf, sizeof(buf));
		ret = n < 0 ? -1 : mnl_cb_run(buf, (size_t)n, 1, mnl_socket_get_portid(s), NULL, NULL);
	}
	mnl_socket_close(s);
	return ret < 0 ? -1 : 0;
}

static void test_probe_xdp(void **state)
{
	struct devmemtcp_probe p = { .sz = sizeof(p) };
	const struct devmemtcp_probe_problem *pr;
	int prog = load_xdp_pass();

	if (prog < 0) {
		printf("SKIP: cannot load an XDP program here: %s\n", strerror(errno));
		skip();
	}
	assert_int_equal(set_xdp((int)if_nametoindex("va"), prog), 0);
	assert_true(devmemtcp_nic_probe(ctx, "va", NULL, &p) >= 1);
	assert_true(p.xdp);
	pr = t_probe_problem(&p, "an XDP program is attached to va");
	assert_non_null(pr);
	assert_string_equal(pr->fix,
			    "detach it (ip link set dev va xdp off): devmem and XDP exclude each other");
	assert_int_equal(set_xdp((int)if_nametoindex("va"), -1), 0);
	close(prog);
	assert_true(devmemtcp_nic_probe(ctx, "va", NULL, &p) >= 1);
	assert_false(p.xdp);
	assert_null(t_probe_problem(&p, "an XDP program is attached to va"));
}

static void test_probe_errors(void **state)
{
	struct devmemtcp_probe p = { .sz = sizeof(p) };
	DEVMEMTCP_OPTS(probe_opts, po, .flags = 0x80);

	/* ERRORS devmemtcp_nic_probe ENODEV */
	assert_int_equal(devmemtcp_nic_probe(ctx, "nosuch0", NULL, &p), -ENODEV);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx),
			    "no interface \"nosuch0\" in this network namespace (see ip link show)");
	/* ERRORS devmemtcp_nic_probe EINVAL */
	assert_int_equal(devmemtcp_nic_probe(ctx, "a b", NULL, &p), -EINVAL);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx),
			    "invalid interface name \"a b\": a name has 1 to 15 characters without '/', ':' or spaces");
	assert_int_equal(devmemtcp_nic_probe(ctx, "va", &po, &p), -EINVAL);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx), "devmemtcp_nic_probe: unknown flags 0x80");
	p.sz = 8;
	assert_int_equal(devmemtcp_nic_probe(ctx, "va", NULL, &p), -EINVAL);
	assert_int_equal(devmemtcp_nic_probe(ctx, "va", NULL, NULL), -EINVAL);
}

static void test_open_veth_unsupported(void **state)
{
	struct devmemtcp_flow f;
	DEVMEMTCP_OPTS(nic_opts, o, .flows = &f, .nflows = 1);
	struct devmemtcp_nic *nic = (void *)1;
	int fds = t_count_fds();

	assert_int_equal(devmemtcp_flow_parse("dst-ip 10.9.0.1 dst-port 5201", &f), 0);
	assert_int_equal(devmemtcp_nic_open(ctx, "va", &o, &nic), -EOPNOTSUPP);
	assert_null(nic);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx),
			    "cannot set up devmem: va does not support header split (tcp-data-split): devmem TCP needs a driver with header split and queue management (gve, bnxt_en, mlx5, fbnic)");
	assert_false(exists("va.journal"));
	assert_int_equal(t_count_fds(), fds);
}

static void test_open_bad_input(void **state)
{
	static const uint32_t q7[] = { 7 }, q13[] = { 1, 3, 1 };
	struct devmemtcp_flow f[2];
	DEVMEMTCP_OPTS(nic_opts, o, .queues = q7, .nqueues = 1);
	struct devmemtcp_nic *nic;

	assert_int_equal(devmemtcp_nic_open(ctx, "va", &o, &nic), -ERANGE);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx),
			    "va: RX queue 7 is out of range: the interface has 4 RX queues (0-3); pick a lower index or add channels with ethtool -L");
	o.queues = q13;
	o.nqueues = 3;
	assert_int_equal(devmemtcp_nic_open(ctx, "va", &o, &nic), -EINVAL);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx),
			    "va: RX queue 1 is listed twice: list each queue once");
	o = (struct devmemtcp_nic_opts){ .sz = sizeof(o), .nqueues = 4 };
	assert_int_equal(devmemtcp_nic_open(ctx, "va", &o, &nic), -EINVAL);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx),
			    "va: all 4 RX queues would be devmem queues, leaving none for other traffic: use fewer queues or add channels with ethtool -L");
	o.nqueues = 5;
	assert_int_equal(devmemtcp_nic_open(ctx, "va", &o, &nic), -ERANGE);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx),
			    "va: 5 devmem queues asked for but the interface has 4 RX queues: ask for fewer or add channels with ethtool -L");
	/* two flows that match the same packets */
	assert_int_equal(devmemtcp_flow_parse("tcp6 dst-ip 2001:db8::1 dst-port 80", &f[0]), 0);
	assert_int_equal(devmemtcp_flow_parse("dst-port 80 dst-ip 2001:db8::1", &f[1]), 0);
	o = (struct devmemtcp_nic_opts){ .sz = sizeof(o), .nqueues = 2, .flows = f, .nflows = 2 };
	assert_int_equal(devmemtcp_nic_open(ctx, "va", &o, &nic), -EEXIST);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx),
			    "va: flow 1 (tcp6 *:* -> [2001:db8::1]:80) matches the same packets as flow 0 of this handle: remove one of them");
	f[1].flags = DEVMEMTCP_FLOW_QUEUE;
	f[1].queue = 2;
	f[1].dst_port = 81;
	assert_int_equal(devmemtcp_nic_open(ctx, "va", &o, &nic), -ERANGE);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx),
			    "va: flow 1: queue index 2 is out of range: the handle has 2 devmem queues (indexes 0-1)");
	/* ERRORS devmemtcp_nic_open ENODEV */
	assert_int_equal(devmemtcp_nic_open(ctx, "nosuch0", NULL, &nic), -ENODEV);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx),
			    "no interface \"nosuch0\" in this network namespace (see ip link show)");
	assert_int_equal(devmemtcp_nic_open(ctx, "../etc", NULL, &nic), -EINVAL);
	assert_false(exists("va.journal"));
}

static void test_lock_busy(void **state)
{
	static const char busy[] =
		"va: pid %d (%s) holds %s/va.lock and has not let go for 200 ms: if that process hangs, stop it";
	struct devmemtcp_nic *nic;
	pid_t child = nicfix_lock_child(dir, "va");

	assert_true(child > 0);
	assert_int_equal(devmemtcp_nic_open(ctx, "va", NULL, &nic), -EBUSY);
	/* the holder's program name as the kernel has it (under valgrind
	 * that is valgrind's tool, not test-host-nic) */
	ctxfix_expect_errmsg(ctx, busy, child, t_own_comm(), dir);
	assert_int_equal(devmemtcp_nic_recover(ctx, "va", NULL), -EBUSY);
	ctxfix_expect_errmsg(ctx, busy, child, t_own_comm(), dir);
	nicfix_kill(child);
	/* free again: now the device itself is the problem */
	assert_int_equal(devmemtcp_nic_open(ctx, "va", NULL, &nic), -EOPNOTSUPP);
}

static void test_stale_journal_and_restore(void **state)
{
	int ifindex = (int)if_nametoindex("va");
	char out[1024], name[128], path[192];
	pid_t dead;
	FILE *f;

	/* a dead owner's file: restore undoes it (nothing on the device) */
	dead = nicfix_dead_owner(dir, "va", ifindex, dmt_netns_id(), name, sizeof(name));
	assert_true(dead > 0);
	assert_true(exists(name));
	assert_int_equal(tool(out, sizeof(out), "restore va"), 0);
	assert_string_equal(out, "va: restored\n");
	assert_false(exists(name));
	assert_int_equal(tool(out, sizeof(out), "restore va"), 0);
	assert_string_equal(out, "va: nothing to restore\n");
	assert_int_equal(devmemtcp_nic_recover(ctx, "va", NULL), 0);

	/* the next open undoes it too, before it finds out veth cannot */
	dead = nicfix_dead_owner(dir, "va", ifindex, dmt_netns_id(), name, sizeof(name));
	{
		struct devmemtcp_nic *nic;

		assert_int_equal(devmemtcp_nic_open(ctx, "va", NULL, &nic), -EOPNOTSUPP);
	}
	assert_false(exists(name));

	/* a file nobody can read is reported, not guessed at */
	snprintf(path, sizeof(path), "%s/va.owner.1.1.1", dir);
	f = fopen(path, "w");
	fputs("garbage\n", f);
	fclose(f);
	chmod(path, 0600);
	assert_int_equal(devmemtcp_nic_recover(ctx, "va", NULL), -EBADMSG);
	ctxfix_expect_errmsg(ctx, "%s is malformed (line 1): undo what it records by hand, then delete it", path);
	assert_int_equal(tool(out, sizeof(out), "restore va"), 1);
	assert_non_null(strstr(out, "devmemtcp restore: "));
	assert_non_null(strstr(out, "va.owner.1.1.1 is malformed (line 1)"));
	assert_int_equal(tool(out, sizeof(out), "restore"), 2);
	assert_string_equal(out, "devmemtcp restore: IFACE, the interface to restore, is missing (see 'devmemtcp restore --help')\n");
	assert_int_equal(unlink(path), 0);

	/* a file written in another network namespace is not applied to
	 * this namespace's device of the same name */
	dead = nicfix_dead_owner(dir, "va", ifindex, 12345, name, sizeof(name));
	assert_int_equal(devmemtcp_nic_recover(ctx, "va", NULL), -EXDEV);
	ctxfix_expect_errmsg(ctx, "%s/%s was written in network namespace net:[12345], this is net:[%llu]: "
			     "run devmemtcp restore va in that namespace (ip netns exec NAME ...)",
			     dir, name, (unsigned long long)dmt_netns_id());
	assert_true(exists(name));
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	assert_int_equal(unlink(path), 0);

	/* the files of an interface that is gone */
	dead = nicfix_dead_owner(dir, "gone0", 77, dmt_netns_id(), name, sizeof(name));
	/* ERRORS devmemtcp_nic_recover ENODEV */
	assert_int_equal(devmemtcp_nic_recover(ctx, "gone0", NULL), -ENODEV);
	ctxfix_expect_errmsg(ctx, "no interface \"gone0\" in this network namespace (see ip link show): %s has devmemtcp files of gone0 (gone0.*) "
			     "but this network namespace has no such interface: restore where the interface is, or delete the files if it is gone for good",
			     dir);
	assert_true(exists(name));
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	assert_int_equal(unlink(path), 0);

	/* the single-owner journal of an older version */
	snprintf(path, sizeof(path), "%s/va.journal", dir);
	f = fopen(path, "w");
	fputs("devmemtcp-journal 1\nend\n", f);
	fclose(f);
	assert_int_equal(devmemtcp_nic_recover(ctx, "va", NULL), -ESTALE);
	ctxfix_expect_errmsg(ctx, "%s was written by an older libdevmemtcp (journal version 1): "
			     "undo its changes with that version's 'devmemtcp restore va' or by hand, then delete it", path);
	assert_int_equal(unlink(path), 0);
}

/* probe lists the owners from their files: alive or dead, queues,
 * flows, context; a dead one is a problem with its fix. */
static void test_probe_owners(void **state)
{
	DEVMEMTCP_OPTS(probe_opts, po, .run_dir = dir);
	struct devmemtcp_probe p = { .sz = sizeof(p) };
	const struct devmemtcp_probe_owner *mine = NULL, *gone = NULL;
	const struct devmemtcp_probe_problem *pr;
	struct dmt_owner me = { .handle = 7, .ifindex = (int)if_nametoindex("va"),
				.netns = dmt_netns_id(), .ctx = DMT_CTX_PLACED, .ctx_id = 4 };
	struct dmt_orule rule = { .placed = true, .location = 5 };
	uint32_t q[] = { 2, 3 };
	char name[128], dead_name[128], out[16384], want[256], *text, path[192];
	struct dmt_err e;
	bool zombie;
	size_t len;
	pid_t dead;

	me.pid = getpid();
	assert_int_equal(dmt_proc_start(me.pid, &me.start, &zombie), 0);
	snprintf(me.comm, sizeof(me.comm), "trainer");
	snprintf(me.ifname, sizeof(me.ifname), "va");
	me.queues = q;
	me.nqueues = 2;
	me.rules = &rule;
	me.nrules = 1;
	dmt_owner_name(&me, name, sizeof(name));
	assert_int_equal(dmt_owner_format(&me, &text, &len), 0);
	assert_int_equal(dmt_file_write(nicfix_rd(dir), name, text, len, &e), 0);
	free(text);
	dead = nicfix_dead_owner(dir, "va", me.ifindex, me.netns, dead_name, sizeof(dead_name));
	assert_true(dead > 0);

	assert_true(devmemtcp_nic_probe(ctx, "va", &po, &p) >= 0);
	assert_int_equal(p.queue_use_reported, t_kernel_version() >= 617);
	assert_int_equal(p.nowners, 2);
	for (int i = 0; i < 2; i++) {
		if (p.owners[i].pid == getpid())
			mine = &p.owners[i];
		if (p.owners[i].pid == dead)
			gone = &p.owners[i];
	}
	assert_non_null(mine);
	assert_non_null(gone);
	assert_string_equal(mine->comm, "trainer");
	assert_true(mine->alive);
	assert_int_equal(mine->nqueues, 2);
	assert_int_equal(mine->queues[1], 3);
	assert_int_equal(mine->nflows, 1);
	assert_int_equal(mine->rss_context, 4);
	assert_int_equal(mine->binding, 0);
	assert_false(gone->alive);
	assert_string_equal(gone->comm, "loader");
	snprintf(want, sizeof(want), "pid %d (loader) ended without closing its devmem setup of va", dead);
	pr = t_probe_problem(&p, want);
	assert_non_null(pr);
	assert_string_equal(pr->fix, "nothing: the next open or close on va undoes it (or now: devmemtcp restore va)");

	snprintf(want, sizeof(want), "probe va --run-dir %s", dir);
	assert_int_equal(tool(out, sizeof(out), want), 1);
	assert_non_null(strstr(out, "owners         2\n"));
	snprintf(want, sizeof(want), "  pid %d (trainer) alive, queues 2-3, 1 flow, RSS context 4\n", getpid());
	assert_non_null(strstr(out, want));
	snprintf(want, sizeof(want), "  pid %d (loader) dead, no queues, 0 flows\n", dead);
	assert_non_null(strstr(out, want));
	snprintf(want, sizeof(want), "probe va --json --run-dir %s", dir);
	assert_int_equal(tool(out, sizeof(out), want), 1);
	snprintf(want, sizeof(want),
		 "{\"pid\":%d,\"comm\":\"trainer\",\"alive\":true,\"queues\":[2,3],\"flows\":1,\"rss_context\":4,\"binding\":0}",
		 getpid());
	assert_non_null(strstr(out, want));
	assert_non_null(strstr(out, "\"nowners\":2,\"owners\":[{"));
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	assert_int_equal(unlink(path), 0);
	snprintf(path, sizeof(path), "%s/%s", dir, dead_name);
	assert_int_equal(unlink(path), 0);
	/* a directory nobody made: no owners */
	po.run_dir = "/nonexistent-devmemtcp";
	assert_true(devmemtcp_nic_probe(ctx, "va", &po, &p) >= 0);
	assert_int_equal(p.nowners, 0);
}

/* A run directory of our own making under a directory others can enter. */
static void fresh_run_dir(char *top, size_t toplen, char *run, size_t runlen)
{
	assert_int_equal(nicfix_mkdir(top, toplen, "dmt-host-run"), 0);
	assert_int_equal(chmod(top, 0755), 0);
	snprintf(run, runlen, "%s/run", top);
}

/* Another user cannot open the lock file, so cannot hold its flock and
 * stall root's setup and restore. */
static void test_lock_not_openable_by_others(void **state)
{
	char top[64], run[128], path[160], c = '?';
	DEVMEMTCP_OPTS(nic_opts, o, .run_dir = run);
	struct devmemtcp_nic *nic;
	int p[2], err;
	pid_t child;

	fresh_run_dir(top, sizeof(top), run, sizeof(run));
	/* creates the directory and the lock, then fails: no header split */
	assert_int_equal(devmemtcp_nic_open(ctx, "va", &o, &nic), -EOPNOTSUPP);
	snprintf(path, sizeof(path), "%s/va.lock", run);
	assert_int_equal(pipe(p), 0);
	child = fork();
	if (child == 0) {
		int fd;

		if (setgid(65534) || setuid(65534))
			_exit(9);
		fd = open(path, O_RDONLY);
		if (fd < 0) {
			(void)!write(p[1], errno == EACCES ? "a" : "e", 1);
			_exit(0);
		}
		if (flock(fd, LOCK_EX) == 0)
			(void)!write(p[1], "h", 1);	/* holds it */
		alarm(30);
		pause();
		_exit(0);
	}
	assert_int_equal(read(p[0], &c, 1), 1);
	err = devmemtcp_nic_open(ctx, "va", &o, &nic);
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	close(p[0]);
	close(p[1]);
	assert_int_equal(c, 'a');
	assert_int_equal(err, -EOPNOTSUPP);
	nicfix_rmdir(top);
}

/* A run directory or file of another user is not trusted. */
static void test_foreign_owned(void **state)
{
	char top[64], run[128], path[160];
	DEVMEMTCP_OPTS(nic_opts, o, .run_dir = run);
	struct devmemtcp_nic *nic;
	FILE *f;

	fresh_run_dir(top, sizeof(top), run, sizeof(run));
	assert_int_equal(mkdir(run, 0700), 0);
	assert_int_equal(chown(run, 65534, 65534), 0);
	assert_int_equal(devmemtcp_nic_open(ctx, "va", &o, &nic), -EACCES);
	ctxfix_expect_errmsg(ctx, "the run directory %s is owned by uid 65534, not by root or this user (uid 0): "
			     "use a directory owned by root (or by uid 0), not writable by others", run);
	assert_int_equal(devmemtcp_nic_recover(ctx, "va", &o), -EACCES);
	assert_int_equal(chown(run, 0, 0), 0);

	snprintf(path, sizeof(path), "%s/va.base", run);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs("devmemtcp-base 2\nend\n", f);
	fclose(f);
	assert_int_equal(chmod(path, 0600), 0);
	assert_int_equal(chown(path, 65534, 65534), 0);
	assert_int_equal(devmemtcp_nic_recover(ctx, "va", &o), -EACCES);
	ctxfix_expect_errmsg(ctx, "%s is owned by uid 65534, not by the run directory's owner (uid 0): remove it",
			     path);
	nicfix_rmdir(top);
}

static void test_probe_tool(void **state)
{
	char out[8192];

	assert_int_equal(tool(out, sizeof(out), "probe va"), 1);
	assert_non_null(strstr(out, "interface      va (ifindex "));
	assert_non_null(strstr(out, "driver         veth 1.0\n"));
	assert_non_null(strstr(out, "queues         rx 4, tx 3\n"));
	assert_non_null(strstr(out, "header split   unsupported, hds-thresh unknown (max unknown)\n"));
	assert_non_null(strstr(out, "  - va (driver veth) does not support header split (tcp-data-split)\n"
				    "    fix: use a NIC whose driver supports devmem TCP"));
	assert_int_equal(tool(out, sizeof(out), "probe va --json"), 1);
	assert_non_null(strstr(out, "\"ifname\":\"va\""));
	assert_non_null(strstr(out, "\"driver\":\"veth\""));
	assert_non_null(strstr(out, "\"rx_queues\":4,\"tx_queues\":3"));
	assert_non_null(strstr(out, "\"tcp_data_split\":null"));
	assert_non_null(strstr(out, "{\"id\":0,\"type\":\"rx\",\"dmabuf\":0,\"io_uring\":false,\"xsk\":false}"));
	assert_non_null(strstr(out, "\"problems\":[{\"what\":"));
	assert_int_equal(out[strlen(out) - 2], '}');
	assert_int_equal(tool(out, sizeof(out), "probe nosuch0"), 2);
	assert_string_equal(out, "devmemtcp probe: no interface \"nosuch0\" in this network namespace (see ip link show)\n");
	assert_int_equal(tool(out, sizeof(out), "probe"), 2);
	assert_string_equal(out, "devmemtcp probe: IFACE, the interface to probe, is missing (see 'devmemtcp probe --help')\n");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_probe_veth),
		cmocka_unit_test(test_probe_libnl_oracle),
		cmocka_unit_test(test_probe_lo),
		cmocka_unit_test(test_probe_down),
		cmocka_unit_test(test_probe_xdp),
		cmocka_unit_test(test_probe_errors),
		cmocka_unit_test(test_open_veth_unsupported),
		cmocka_unit_test(test_open_bad_input),
		cmocka_unit_test(test_lock_busy),
		cmocka_unit_test(test_stale_journal_and_restore),
		cmocka_unit_test(test_probe_tool),
		cmocka_unit_test(test_probe_owners),
		cmocka_unit_test(test_lock_not_openable_by_others),
		cmocka_unit_test(test_foreign_owned),
	};

	/* a held lock gives -EBUSY at once, not after the 10 s wait */
	setenv("DEVMEMTCP_TEST_LOCK_WAIT_MS", "200", 1);
	T_TRY(host_netns(NULL));
	return cmocka_run_group_tests_name("host-nic", tests, setup, teardown);
}

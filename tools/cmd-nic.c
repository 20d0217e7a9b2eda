// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * devmemtcp probe and devmemtcp restore: the NIC layer on the command line.
 * This file owns the two commands' options, the probe report (as text and
 * as JSON, owners included) and their exit statuses; what is probed, and
 * how the NIC changes of owners that died are undone, is the library's
 * (devmemtcp_nic_probe(), devmemtcp_nic_recover()).  The commands print the
 * library's messages themselves; restore also says what it left alone.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "common.h"

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

static const char *tds_name(int v)
{
	switch (v) {
	case 0: return "auto";
	case 1: return "off";
	case 2: return "on";
	default: return "unsupported";
	}
}

static void num_or_unknown(FILE *f, long long v)
{
	if (v < 0)
		fprintf(f, "unknown");
	else
		fprintf(f, "%lld", v);
}

/* The DRM nodes (DEVMEMTCP_PROVIDER_DRM): "/dev/dri/card0 (vgem), ...". */
static void print_drm(const struct devmemtcp_probe *p)
{
	int shown = p->drm_nodes < DEVMEMTCP_PROBE_MAX_DRM ? p->drm_nodes
							   : DEVMEMTCP_PROBE_MAX_DRM;

	printf("DRM            ");
	if (p->drm_nodes < 0) {
		printf("unknown (libdevmemtcp was built without libdrm)\n");
		return;
	}
	for (int i = 0; i < shown; i++) {
		const struct devmemtcp_probe_drm *d = &p->drm[i];

		printf("%s%s (%s)", i ? ", " : "", d->node,
		       d->error == -ENOTTY ? "not a DRM node"
		       : d->error ? strerror(-d->error) : d->driver);
	}
	if (p->drm_nodes > shown)
		printf(" and %d more", p->drm_nodes - shown);
	printf("%s\n", shown ? "" : "none (no device under /dev/dri)");
}

/* "6-7" for runs, "1,3" otherwise */
static void print_queues(FILE *f, const uint32_t *q, uint32_t n)
{
	for (uint32_t i = 0; i < n;) {
		uint32_t j = i;

		while (j + 1 < n && q[j + 1] == q[j] + 1)
			j++;
		fprintf(f, "%s%u", i ? "," : "", q[i]);
		if (j > i)
			fprintf(f, "-%u", q[j]);
		i = j + 1;
	}
}

static void print_owners(const struct devmemtcp_probe *p)
{
	printf("owners         ");
	if (p->nowners < 0) {
		printf("unknown (the run directory cannot be read: run as root)\n");
		return;
	}
	printf("%d", p->nowners);
	for (int i = 0; i < p->nowners && i < DEVMEMTCP_PROBE_MAX_OWNERS; i++) {
		const struct devmemtcp_probe_owner *o = &p->owners[i];
		uint32_t n = o->nqueues < 16 ? o->nqueues : 16;

		printf("\n  pid %d (%s) %s, ", o->pid, o->comm,
		       o->alive ? "alive" : "dead");
		if (n) {
			printf("queue%s ", n == 1 ? "" : "s");
			print_queues(stdout, o->queues, n);
		} else {
			printf("no queues");
		}
		printf(", %u flow%s", o->nflows, o->nflows == 1 ? "" : "s");
		if (o->rss_context)
			printf(", RSS context %u", o->rss_context);
		if (o->binding)
			printf(", binding %u", o->binding);
	}
	printf("\n");
}

/* devmemtcp-broker: whether setup would go through it, what it allows. */
static void print_broker(const struct devmemtcp_probe *p)
{
	printf("broker         ");
	if (p->broker_state <= 0) {
		printf("%s%s\n", p->broker_state ? "not answering: " : "", p->broker_msg);
		return;
	}
	printf("%s; ", p->broker ? "would be used (no CAP_NET_ADMIN)" : "not needed (CAP_NET_ADMIN)");
	if (p->broker_allowed != 1) {
		printf("%s\n", p->broker_msg);
		return;
	}
	printf("%s allowed: %u queue%s of ", p->ifname, p->broker_queues,
	       p->broker_queues == 1 ? "" : "s");
	if (!p->broker_nqranges)
		printf("any id");
	for (uint32_t i = 0; i < p->broker_nqranges && i < DEVMEMTCP_PROBE_MAX_QRANGES; i++) {
		printf("%s%u", i ? "," : "ids ", p->broker_qranges[i][0]);
		if (p->broker_qranges[i][1] != p->broker_qranges[i][0])
			printf("-%u", p->broker_qranges[i][1]);
	}
	printf(" (%u in use), %s, udmabuf ", p->broker_queues_used, p->broker_msg);
	if (p->broker_udmabuf)
		printf("up to %llu MiB", (unsigned long long)(p->broker_udmabuf >> 20));
	else
		printf("none");
	printf(", bind-tx %s\n", p->broker_tx ? "yes" : "no");
}

static void print_text(const struct devmemtcp_probe *p,
		       const struct devmemtcp_queue *q, int nq)
{
	printf("interface      %s (ifindex %d)\n", p->ifname, p->ifindex);
	printf("kernel         %s: bind-rx %s, bind-tx %s\n", p->kernel,
	       p->has_bind_rx ? "yes" : "no", p->has_bind_tx ? "yes" : "no");
	printf("driver         %s %s%s%s\n", p->driver[0] ? p->driver : "unknown",
	       p->driver_version, p->bus_info[0] ? " at " : "", p->bus_info);
	printf("queues         rx ");
	num_or_unknown(stdout, p->rx_queues);
	printf(", tx ");
	num_or_unknown(stdout, p->tx_queues);
	printf("\nheader split   %s, hds-thresh ", tds_name(p->tcp_data_split));
	num_or_unknown(stdout, p->hds_thresh);
	printf(" (max ");
	num_or_unknown(stdout, p->hds_thresh_max);
	printf(")\nntuple         %s%s, rules in use ",
	       p->ntuple < 0 ? "unsupported" : p->ntuple ? "on" : "off",
	       p->ntuple_fixed == 1 ? " [fixed]" : "");
	num_or_unknown(stdout, p->ntuple_rules);
	printf(" of ");
	num_or_unknown(stdout, p->ntuple_table_size);
	printf("\nRSS            table ");
	num_or_unknown(stdout, p->rss_table_size);
	printf(" entries, contexts %s",
	       p->rss_contexts < 0 ? "unknown" : p->rss_contexts ? "yes" : "no");
	if (p->rss_context_count > 0)
		printf(" (%d in use)", p->rss_context_count);
	printf("\nXDP            %s, AF_XDP queues ", p->xdp ? "attached" : "none");
	num_or_unknown(stdout, p->xsk_queues);
	printf("\nbindings       ");
	if (nq < 0) {
		printf("unknown (no queue-get)\n");
	} else {
		int shown = 0;

		for (int i = 0; i < nq; i++) {
			if (!q[i].dmabuf_id && !q[i].io_uring)
				continue;
			printf("%s%s queue %u: %s", shown++ ? ", " : "",
			       q[i].type ? "tx" : "rx", q[i].id,
			       q[i].io_uring ? "io_uring" : "dma-buf");
			if (q[i].dmabuf_id)
				printf(" %u", q[i].dmabuf_id);
		}
		printf("%s\n", shown ? "" : "none");
	}
	if (!p->queue_use_reported)
		printf("queue use      this kernel's queue-get does not report AF_XDP or io_uring use of a queue: "
		       "bind-rx refuses such queues\n");
	print_owners(p);
	printf("udmabuf        ");
	if (p->udmabuf_limit_mb < 0)
		printf("not loaded\n");
	else
		printf("size limit %lld MiB\n", (long long)p->udmabuf_limit_mb);
	print_drm(p);
	printf("CAP_NET_ADMIN  %s\n", p->cap_net_admin ? "yes" : "no");
	print_broker(p);
	printf("optmem_max     ");
	num_or_unknown(stdout, p->optmem_max);
	printf("\n");
	if (p->zcrx > 0)
		printf("io_uring zcrx  yes, dma-buf areas %s\n",
		       p->zcrx_dmabuf > 0 ? "yes" : p->zcrx_dmabuf ? "unknown" : "no");
	else
		printf("io_uring zcrx  %s%s%s\n", p->zcrx ? "unknown" : "no",
		       p->zcrx_msg[0] ? ": " : "", p->zcrx_msg);
	if (p->try_bind)
		printf("try-bind       %s: %s\n", p->try_bind > 0 ? "ok" : "failed",
		       p->try_bind_msg);
	if (!p->nproblems) {
		printf("\nNo problems found.\n");
		return;
	}
	printf("\n%u problem%s:\n", p->nproblems, p->nproblems == 1 ? "" : "s");
	for (uint32_t i = 0; i < p->nproblems; i++) {
		char fix[512];

		printf("  - %s\n    fix: %s\n", p->problems[i].what,
		       tool_fix(p->problems[i].fix, fix, sizeof(fix)));
	}
}

/* JSON: a number, or null when it is unknown (< 0). */
static void json_num(FILE *f, const char *key, long long v)
{
	if (v < 0)
		fprintf(f, ",\"%s\":null", key);
	else
		fprintf(f, ",\"%s\":%lld", key, v);
}

/* JSON: 1 true, 0 false, < 0 (unknown or unsupported) null. */
static void json_bool(FILE *f, const char *key, long long v)
{
	fprintf(f, ",\"%s\":%s", key, v < 0 ? "null" : v ? "true" : "false");
}

static void json_key_str(FILE *f, const char *key, const char *v)
{
	fprintf(f, ",\"%s\":", key);
	json_str(f, v);
}

/*
 * devmemtcp probe --json, schema PROBE_JSON_SCHEMA (devmemtcp(1), "JSON"):
 * the schema number first; booleans as true/false; null for what is
 * unknown (or that the device does not support); fixes said the command
 * line's way, as in the text report.  A key changes meaning or goes only
 * with a new schema number; new keys may come without one.
 */
#define PROBE_JSON_SCHEMA 1

static void print_json(const struct devmemtcp_probe *p,
		       const struct devmemtcp_queue *q, int nq)
{
	FILE *f = stdout;
	char fix[512];

	fprintf(f, "{\"schema\":%d", PROBE_JSON_SCHEMA);
	json_key_str(f, "ifname", p->ifname);
	fprintf(f, ",\"ifindex\":%d", p->ifindex);
	json_key_str(f, "kernel", p->kernel);
	fprintf(f, ",\"bind_rx\":%s,\"bind_tx\":%s",
		p->has_bind_rx ? "true" : "false", p->has_bind_tx ? "true" : "false");
	if (p->driver[0])
		json_key_str(f, "driver", p->driver);
	else
		fprintf(f, ",\"driver\":null");
	json_key_str(f, "driver_version", p->driver_version);
	json_key_str(f, "bus_info", p->bus_info);
	json_num(f, "rx_queues", p->rx_queues);
	json_num(f, "tx_queues", p->tx_queues);
	if (p->tcp_data_split < 0)
		fprintf(f, ",\"tcp_data_split\":null");
	else
		fprintf(f, ",\"tcp_data_split\":\"%s\"", tds_name(p->tcp_data_split));
	json_num(f, "hds_thresh", p->hds_thresh);
	json_num(f, "hds_thresh_max", p->hds_thresh_max);
	json_bool(f, "ntuple", p->ntuple);
	json_bool(f, "ntuple_fixed", p->ntuple_fixed);
	json_num(f, "ntuple_rules", p->ntuple_rules);
	json_num(f, "ntuple_table_size", p->ntuple_table_size);
	json_num(f, "rss_table_size", p->rss_table_size);
	json_bool(f, "rss_contexts", p->rss_contexts);
	json_num(f, "rss_context_count", p->rss_context_count);
	json_bool(f, "xdp", p->xdp);
	json_num(f, "xsk_queues", p->xsk_queues);
	json_num(f, "dmabuf_queues", p->dmabuf_queues);
	json_num(f, "io_uring_queues", p->io_uring_queues);
	if (nq < 0) {
		fprintf(f, ",\"queues\":null");
	} else {
		fprintf(f, ",\"queues\":[");
		for (int i = 0; i < nq; i++)
			fprintf(f, "%s{\"id\":%u,\"type\":\"%s\",\"dmabuf\":%u,\"io_uring\":%s,\"xsk\":%s}",
				i ? "," : "", q[i].id, q[i].type ? "tx" : "rx",
				q[i].dmabuf_id, q[i].io_uring ? "true" : "false",
				q[i].xsk ? "true" : "false");
		fprintf(f, "]");
	}
	json_bool(f, "queue_use_reported", p->queue_use_reported);
	json_num(f, "udmabuf_limit_mb", p->udmabuf_limit_mb);
	json_bool(f, "cap_net_admin", p->cap_net_admin);
	json_num(f, "optmem_max", p->optmem_max);
	json_num(f, "drm_nodes", p->drm_nodes);
	if (p->drm_nodes < 0) {
		fprintf(f, ",\"drm\":null");
	} else {
		fprintf(f, ",\"drm\":[");
		for (int i = 0; i < p->drm_nodes && i < DEVMEMTCP_PROBE_MAX_DRM; i++) {
			fprintf(f, "%s{\"node\":", i ? "," : "");
			json_str(f, p->drm[i].node);
			if (p->drm[i].error) {
				fprintf(f, ",\"driver\":null,\"error\":");
				json_str(f, p->drm[i].error == -ENOTTY ? "not a DRM node"
					    : strerror(-p->drm[i].error));
			} else {
				json_key_str(f, "driver", p->drm[i].driver);
				fprintf(f, ",\"error\":null");
			}
			fprintf(f, "}");
		}
		fprintf(f, "]");
	}
	/* not tried: null; bound: true; failed: false and why */
	fprintf(f, ",\"try_bind\":%s", !p->try_bind ? "null" : p->try_bind > 0 ? "true" : "false");
	json_key_str(f, "try_bind_msg", p->try_bind_msg);
	json_bool(f, "zcrx", p->zcrx);
	json_bool(f, "zcrx_dmabuf", p->zcrx_dmabuf);
	json_key_str(f, "zcrx_msg", p->zcrx_msg);
	fprintf(f, ",\"broker\":{\"used\":%s,\"state\":\"%s\"",
		p->broker ? "true" : "false",
		p->broker_state > 0 ? "answered" : p->broker_state ? "failed" : "none");
	json_num(f, "errno", p->broker_state < 0 ? -p->broker_state : -1);
	json_bool(f, "allowed", p->broker_allowed);
	fprintf(f, ",\"queues\":%u,\"queues_used\":%u,\"tx\":%s,\"udmabuf\":%llu",
		p->broker_queues, p->broker_queues_used, p->broker_tx ? "true" : "false",
		(unsigned long long)p->broker_udmabuf);
	fprintf(f, ",\"queue_ids\":[");
	for (uint32_t i = 0; i < p->broker_nqranges && i < DEVMEMTCP_PROBE_MAX_QRANGES; i++)
		fprintf(f, "%s[%u,%u]", i ? "," : "", p->broker_qranges[i][0],
			p->broker_qranges[i][1]);
	fprintf(f, "]");
	json_key_str(f, "msg", p->broker_msg);
	fprintf(f, "}");
	json_num(f, "nowners", p->nowners);
	if (p->nowners < 0) {
		fprintf(f, ",\"owners\":null");
	} else {
		fprintf(f, ",\"owners\":[");
		for (int i = 0; i < p->nowners && i < DEVMEMTCP_PROBE_MAX_OWNERS; i++) {
			const struct devmemtcp_probe_owner *o = &p->owners[i];

			fprintf(f, "%s{\"pid\":%d", i ? "," : "", o->pid);
			json_key_str(f, "comm", o->comm);
			fprintf(f, ",\"alive\":%s,\"queues\":[", o->alive ? "true" : "false");
			for (uint32_t k = 0; k < o->nqueues && k < 16; k++)
				fprintf(f, "%s%u", k ? "," : "", o->queues[k]);
			fprintf(f, "],\"flows\":%u,\"rss_context\":%u,\"binding\":%u}",
				o->nflows, o->rss_context, o->binding);
		}
		fprintf(f, "]");
	}
	fprintf(f, ",\"problems\":[");
	for (uint32_t i = 0; i < p->nproblems; i++) {
		fprintf(f, "%s{\"what\":", i ? "," : "");
		json_str(f, p->problems[i].what);
		json_key_str(f, "fix", tool_fix(p->problems[i].fix, fix, sizeof(fix)));
		fprintf(f, "}");
	}
	fprintf(f, "]}\n");
}

static void probe_usage(FILE *f)
{
	fprintf(f, "usage: devmemtcp probe IFACE [--json] [--try-bind] [--run-dir DIR]\n"
		   "       devmemtcp probe --gpu N | --pci ADDR\n\n"
		   "Report what IFACE and this kernel offer for devmem TCP, the processes that\n"
		   "own queues of IFACE (from DIR, default $DEVMEMTCP_RUN_DIR or /run/devmemtcp)\n"
		   "and, for each problem, the fix.  --try-bind binds a 2 MiB udmabuf to the\n"
		   "last RX queue nobody uses and releases it (needs root and the udmabuf module).\n"
		   "--gpu N (a CUDA device) or --pci ADDR (a PCI function, 0000:1b:00.0) lists\n"
		   "the interfaces on PCI nearest that device first: same PCIe switch, same root\n"
		   "port, same NUMA node, other (devmemtcp_nic_rank(3)).\n"
		   "Exit status: 0 no problems, 1 problems found, 2 error.\n");
}

struct probe_args {
	struct devmemtcp_probe_opts *po;
	bool json;
	const char *gpu, *pci;
};

static int probe_option(int c, const char *arg, void *opts)
{
	struct probe_args *a = opts;

	switch (c) {
	case 'j': a->json = true; break;
	case 't': a->po->flags |= DEVMEMTCP_PROBE_TRY_BIND; break;
	case 'd': a->po->run_dir = arg; break;
	case 'g': a->gpu = arg; break;
	case 'p': a->pci = arg; break;
	case 'h': probe_usage(stdout); return 0;
	}
	return -1;
}

/* IFACE, the one argument of probe and restore, goes anywhere among the
 * options: it is taken out of argv before they are parsed, so that any
 * other word is named as unexpected. */
static const char *take_iface(int *argc, char **argv, const struct option *opts)
{
	for (int i = 1; i < *argc; i++) {
		const struct option *o;
		const char *w = argv[i];

		if (!strcmp(w, "--"))
			break;
		if (w[0] == '-') {
			/* an option's value written apart is not IFACE */
			for (o = opts; o->name; o++)
				if (o->has_arg == required_argument &&
				    ((w[1] == '-' && !strcmp(w + 2, o->name)) ||
				     (w[1] == o->val && !w[2])))
					i++;
			continue;
		}
		memmove(&argv[i], &argv[i + 1], (size_t)(*argc - i) * sizeof(*argv));
		(*argc)--;
		return w;
	}
	return NULL;
}

static const char *const distance_names[] = {
	[DEVMEMTCP_PCI_SAME_SWITCH] = "same-switch",
	[DEVMEMTCP_PCI_SAME_ROOT_PORT] = "same-root-port",
	[DEVMEMTCP_PCI_SAME_NUMA] = "same-numa-node",
	[DEVMEMTCP_PCI_OTHER] = "other",
};

/* probe --gpu N / --pci ADDR: the ranking, one interface a line. */
static int probe_near(const struct probe_args *a)
{
	struct devmemtcp_nic_rank r[64];
	struct devmemtcp_ctx *ctx;
	char *end;
	long gpu = 0;
	int n;

	if (a->gpu) {
		errno = 0;
		gpu = strtol(a->gpu, &end, 10);
		if (errno || end == a->gpu || *end || gpu < 0 || gpu > INT_MAX)
			return usage_error("devmemtcp probe", "--gpu takes a CUDA device number (0, 1, ...)");
	}
	if (tool_ctx_new("devmemtcp probe", &ctx))
		return 2;
	n = a->gpu ? devmemtcp_nic_near_gpu(ctx, (int)gpu, r, 64)
		   : devmemtcp_nic_rank(ctx, a->pci, r, 64);
	if (n < 0) {
		fprintf(stderr, "devmemtcp probe: %s\n", devmemtcp_ctx_errmsg(ctx));
		devmemtcp_ctx_free(ctx);
		return 2;
	}
	if (a->gpu)
		printf("interfaces nearest CUDA device %ld, nearest first:\n", gpu);
	else
		printf("interfaces nearest %s, nearest first:\n", a->pci);
	if (!n)
		printf("  none on PCI\n");
	for (int i = 0; i < n && i < 64; i++)
		printf("  %-16s %s  %-14s numa %d\n", r[i].ifname, r[i].pci,
		       r[i].distance >= 0 && r[i].distance <= DEVMEMTCP_PCI_OTHER
			       ? distance_names[r[i].distance] : "?",
		       r[i].numa_node);
	devmemtcp_ctx_free(ctx);
	return 0;
}

int cmd_probe(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "try-bind", no_argument, NULL, 't' },
		{ "run-dir", required_argument, NULL, 'd' },
		{ "gpu", required_argument, NULL, 'g' },
		{ "pci", required_argument, NULL, 'p' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	DEVMEMTCP_OPTS(probe_opts, po);
	struct probe_args a = { .po = &po };
	struct devmemtcp_probe p = { .sz = sizeof(p) };
	struct devmemtcp_queue q[256];
	struct devmemtcp_ctx *ctx;
	const char *ifname;
	int ret, nq;

	ifname = take_iface(&argc, argv, lo);
	ret = tool_getopt("devmemtcp probe", argc, argv, ":jtd:g:p:h", lo, probe_option, &a);
	if (ret >= 0)
		return ret;
	if (a.gpu || a.pci) {
		if (ifname || (a.gpu && a.pci))
			return usage_error("devmemtcp probe", "--gpu and --pci take no IFACE, and one of them only");
		return probe_near(&a);
	}
	if (!ifname)
		return usage_error("devmemtcp probe", "IFACE, the interface to probe, is missing");
	if (tool_ctx_new("devmemtcp probe", &ctx))
		return 2;
	ret = devmemtcp_nic_probe(ctx, ifname, &po, &p);
	if (ret < 0) {
		fprintf(stderr, "devmemtcp probe: %s\n", devmemtcp_ctx_errmsg(ctx));
		devmemtcp_ctx_free(ctx);
		return 2;
	}
	nq = devmemtcp_queue_list(ctx, p.ifindex, q, sizeof(q) / sizeof(q[0]));
	if (nq > (int)(sizeof(q) / sizeof(q[0])))
		nq = sizeof(q) / sizeof(q[0]);
	if (a.json)
		print_json(&p, q, nq);
	else
		print_text(&p, q, nq);
	devmemtcp_ctx_free(ctx);
	return p.nproblems ? 1 : 0;
}

static void restore_usage(FILE *f)
{
	fprintf(f, "usage: devmemtcp restore IFACE [--all] [--run-dir DIR]\n\n"
		   "Undo the NIC changes (ntuple rules, RSS contexts, and the shared header split,\n"
		   "ntuple and RSS settings as the remaining owners need them) that processes\n"
		   "which ended without closing their devmemtcp_nic handles left on IFACE, as\n"
		   "recorded in their files (DIR, default $DEVMEMTCP_RUN_DIR or /run/devmemtcp).\n"
		   "Live owners are left alone unless --all is given; an owner whose queues still\n"
		   "carry a binding (held by any process) is left until the binding is gone.\n"
		   "What the device shows someone else changed is left alone and said.\n"
		   "Exit status: 0 restored or nothing to do, 1 failed, 2 usage error.\n");
}

/* What was left alone (warnings) is said; errors are printed once below. */
static void restore_log(void *user, int level, const char *msg)
{
	if (level == DEVMEMTCP_LOG_WARN)
		fprintf(stderr, "devmemtcp restore: %s\n", msg);
}

static int restore_option(int c, const char *arg, void *opts)
{
	struct devmemtcp_nic_opts *no = opts;

	switch (c) {
	case 'd': no->run_dir = arg; break;
	case 'a': no->flags |= DEVMEMTCP_NIC_RECOVER_ALL; break;
	case 'h': restore_usage(stdout); return 0;
	}
	return -1;
}

int cmd_restore(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "run-dir", required_argument, NULL, 'd' },
		{ "all", no_argument, NULL, 'a' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	DEVMEMTCP_OPTS(ctx_opts, co, .log_fn = restore_log, .log_level = DEVMEMTCP_LOG_WARN);
	DEVMEMTCP_OPTS(nic_opts, no);
	struct devmemtcp_ctx *ctx;
	const char *ifname;
	int ret;

	ifname = take_iface(&argc, argv, lo);
	ret = tool_getopt("devmemtcp restore", argc, argv, ":d:ah", lo, restore_option, &no);
	if (ret >= 0)
		return ret;
	if (!ifname)
		return usage_error("devmemtcp restore", "IFACE, the interface to restore, is missing");
	ret = devmemtcp_ctx_new(&co, &ctx);
	if (ret) {
		fprintf(stderr, "devmemtcp restore: %s\n", strerror(-ret));
		return 2;
	}
	ret = devmemtcp_nic_recover(ctx, ifname, &no);
	if (ret < 0)
		fprintf(stderr, "devmemtcp restore: %s\n", devmemtcp_ctx_errmsg(ctx));
	else if (ret == 0)
		printf("%s: nothing to restore\n", ifname);
	else
		printf("%s: restored\n", ifname);
	devmemtcp_ctx_free(ctx);
	return ret < 0 ? 1 : 0;
}

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
	printf("%s allowed: %u queue%s (%u in use), %s, udmabuf ", p->ifname, p->broker_queues,
	       p->broker_queues == 1 ? "" : "s", p->broker_queues_used, p->broker_msg);
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
	for (uint32_t i = 0; i < p->nproblems; i++)
		printf("  - %s\n    fix: %s\n", p->problems[i].what,
		       p->problems[i].fix);
}

static void print_json(const struct devmemtcp_probe *p,
		       const struct devmemtcp_queue *q, int nq)
{
	FILE *f = stdout;

	fprintf(f, "{\"ifname\":");
	json_str(f, p->ifname);
	fprintf(f, ",\"ifindex\":%d,\"kernel\":", p->ifindex);
	json_str(f, p->kernel);
	fprintf(f, ",\"bind_rx\":%s,\"bind_tx\":%s,\"driver\":",
		p->has_bind_rx ? "true" : "false", p->has_bind_tx ? "true" : "false");
	json_str(f, p->driver);
	fprintf(f, ",\"driver_version\":");
	json_str(f, p->driver_version);
	fprintf(f, ",\"bus_info\":");
	json_str(f, p->bus_info);
	fprintf(f, ",\"rx_queues\":%d,\"tx_queues\":%d", p->rx_queues,
		p->tx_queues);
	fprintf(f, ",\"tcp_data_split\":\"%s\",\"hds_thresh\":%lld,\"hds_thresh_max\":%lld",
		tds_name(p->tcp_data_split), (long long)p->hds_thresh,
		(long long)p->hds_thresh_max);
	fprintf(f, ",\"ntuple\":%d,\"ntuple_fixed\":%d,\"ntuple_rules\":%d,\"ntuple_table_size\":%d",
		p->ntuple, p->ntuple_fixed, p->ntuple_rules, p->ntuple_table_size);
	fprintf(f, ",\"rss_table_size\":%d,\"rss_contexts\":%d,\"rss_context_count\":%d",
		p->rss_table_size, p->rss_contexts, p->rss_context_count);
	fprintf(f, ",\"xdp\":%s,\"xsk_queues\":%d,\"dmabuf_queues\":%d,\"io_uring_queues\":%d",
		p->xdp ? "true" : "false", p->xsk_queues, p->dmabuf_queues,
		p->io_uring_queues);
	fprintf(f, ",\"queues\":[");
	for (int i = 0; i < nq; i++)
		fprintf(f, "%s{\"id\":%u,\"type\":\"%s\",\"dmabuf\":%u,\"io_uring\":%s,\"xsk\":%s}",
			i ? "," : "", q[i].id, q[i].type ? "tx" : "rx",
			q[i].dmabuf_id, q[i].io_uring ? "true" : "false",
			q[i].xsk ? "true" : "false");
	fprintf(f, "],\"udmabuf_limit_mb\":%lld,\"cap_net_admin\":%s,\"optmem_max\":%lld",
		(long long)p->udmabuf_limit_mb, p->cap_net_admin ? "true" : "false",
		(long long)p->optmem_max);
	fprintf(f, ",\"drm_nodes\":%d,\"drm\":[", p->drm_nodes);
	for (int i = 0; i < p->drm_nodes && i < DEVMEMTCP_PROBE_MAX_DRM; i++) {
		fprintf(f, "%s{\"node\":", i ? "," : "");
		json_str(f, p->drm[i].node);
		fprintf(f, ",\"driver\":");
		json_str(f, p->drm[i].driver);
		fprintf(f, ",\"error\":%d}", p->drm[i].error);
	}
	fprintf(f, "]");
	fprintf(f, ",\"try_bind\":%d,\"try_bind_msg\":", p->try_bind);
	json_str(f, p->try_bind_msg);
	fprintf(f, ",\"zcrx\":%d,\"zcrx_dmabuf\":%d,\"zcrx_msg\":", p->zcrx,
		p->zcrx_dmabuf);
	json_str(f, p->zcrx_msg);
	fprintf(f, ",\"broker\":{\"used\":%s,\"state\":%d,\"allowed\":%d,\"queues\":%u,\"queues_used\":%u,\"tx\":%s,\"udmabuf\":%llu,\"msg\":",
		p->broker ? "true" : "false", p->broker_state, p->broker_allowed, p->broker_queues,
		p->broker_queues_used, p->broker_tx ? "true" : "false",
		(unsigned long long)p->broker_udmabuf);
	json_str(f, p->broker_msg);
	fprintf(f, "}");
	fprintf(f, ",\"queue_use_reported\":%s,\"nowners\":%d,\"owners\":[",
		p->queue_use_reported ? "true" : "false", p->nowners);
	for (int i = 0; i < p->nowners && i < DEVMEMTCP_PROBE_MAX_OWNERS; i++) {
		const struct devmemtcp_probe_owner *o = &p->owners[i];

		fprintf(f, "%s{\"pid\":%d,\"comm\":", i ? "," : "", o->pid);
		json_str(f, o->comm);
		fprintf(f, ",\"alive\":%s,\"queues\":[", o->alive ? "true" : "false");
		for (uint32_t k = 0; k < o->nqueues && k < 16; k++)
			fprintf(f, "%s%u", k ? "," : "", o->queues[k]);
		fprintf(f, "],\"flows\":%u,\"rss_context\":%u,\"binding\":%u}",
			o->nflows, o->rss_context, o->binding);
	}
	fprintf(f, "]");
	fprintf(f, ",\"problems\":[");
	for (uint32_t i = 0; i < p->nproblems; i++) {
		fprintf(f, "%s{\"what\":", i ? "," : "");
		json_str(f, p->problems[i].what);
		fprintf(f, ",\"fix\":");
		json_str(f, p->problems[i].fix);
		fprintf(f, "}");
	}
	fprintf(f, "]}\n");
}

static void probe_usage(FILE *f)
{
	fprintf(f, "usage: devmemtcp probe IFACE [--json] [--try-bind] [--run-dir DIR]\n\n"
		   "Report what IFACE and this kernel offer for devmem TCP, the processes that\n"
		   "own queues of IFACE (from DIR, default $DEVMEMTCP_RUN_DIR or /run/devmemtcp)\n"
		   "and, for each problem, the fix.  --try-bind binds a 2 MiB udmabuf to the\n"
		   "last RX queue nobody uses and releases it (needs root and the udmabuf module).\n"
		   "Exit status: 0 no problems, 1 problems found, 2 error.\n");
}

int cmd_probe(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "try-bind", no_argument, NULL, 't' },
		{ "run-dir", required_argument, NULL, 'd' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	DEVMEMTCP_OPTS(probe_opts, po);
	struct devmemtcp_probe p = { .sz = sizeof(p) };
	struct devmemtcp_queue q[256];
	struct devmemtcp_ctx *ctx;
	bool json = false;
	int c, ret, nq;

	optind = 1;
	while ((c = getopt_long(argc, argv, "jtd:h", lo, NULL)) != -1) {
		switch (c) {
		case 'j': json = true; break;
		case 't': po.flags |= DEVMEMTCP_PROBE_TRY_BIND; break;
		case 'd': po.run_dir = optarg; break;
		case 'h': probe_usage(stdout); return 0;
		default: probe_usage(stderr); return 2;
		}
	}
	if (optind != argc - 1) {
		probe_usage(stderr);
		return 2;
	}
	if (tool_ctx_new("devmemtcp probe", &ctx))
		return 2;
	ret = devmemtcp_nic_probe(ctx, argv[optind], &po, &p);
	if (ret < 0) {
		fprintf(stderr, "devmemtcp probe: %s\n", devmemtcp_ctx_errmsg(ctx));
		devmemtcp_ctx_free(ctx);
		return 2;
	}
	nq = devmemtcp_queue_list(ctx, p.ifindex, q, sizeof(q) / sizeof(q[0]));
	if (nq > (int)(sizeof(q) / sizeof(q[0])))
		nq = sizeof(q) / sizeof(q[0]);
	if (json)
		print_json(&p, q, nq < 0 ? 0 : nq);
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
		   "Live owners are left alone unless --all is given (their bindings stay until\n"
		   "they exit).  What the device shows someone else changed is left alone and said.\n"
		   "Exit status: 0 restored or nothing to do, 1 failed, 2 usage error.\n");
}

/* What was left alone (warnings) is said; errors are printed once below. */
static void restore_log(void *user, int level, const char *msg)
{
	if (level == DEVMEMTCP_LOG_WARN)
		fprintf(stderr, "devmemtcp restore: %s\n", msg);
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
	int c, ret;

	optind = 1;
	while ((c = getopt_long(argc, argv, "d:ah", lo, NULL)) != -1) {
		switch (c) {
		case 'd': no.run_dir = optarg; break;
		case 'a': no.flags |= DEVMEMTCP_NIC_RECOVER_ALL; break;
		case 'h': restore_usage(stdout); return 0;
		default: restore_usage(stderr); return 2;
		}
	}
	if (optind != argc - 1) {
		restore_usage(stderr);
		return 2;
	}
	ret = devmemtcp_ctx_new(&co, &ctx);
	if (ret) {
		fprintf(stderr, "devmemtcp restore: %s\n", strerror(-ret));
		return 2;
	}
	ret = devmemtcp_nic_recover(ctx, argv[optind], &no);
	if (ret < 0)
		fprintf(stderr, "devmemtcp restore: %s\n", devmemtcp_ctx_errmsg(ctx));
	else if (ret == 0)
		printf("%s: nothing to restore\n", argv[optind]);
	else
		printf("%s: restored\n", argv[optind]);
	devmemtcp_ctx_free(ctx);
	return ret < 0 ? 1 : 0;
}

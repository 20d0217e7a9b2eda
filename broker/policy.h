/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * The policy of devmemtcp-broker (devmemtcp-broker.conf(5)): who may set
 * up devmem receive, on which interfaces, with how many queues, for which
 * destination ports, how large a udmabuf, and whether bind-tx.  Default
 * deny: a caller no rule names gets nothing.  The parser and the
 * formatter are pure functions on a text buffer (fuzzed); names of users
 * and groups are resolved afterwards through a lookup the caller gives.
 */
#ifndef DEVMEMTCP_BROKER_POLICY_H
#define DEVMEMTCP_BROKER_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <net/if.h>

#include "devmemtcp.h"

#define DMT_POL_MAX_RULES 256
#define DMT_POL_MAX_IFS 32
#define DMT_POL_MAX_PORTS 16		/* = DMT_BRK_MAX_PORTS */
#define DMT_POL_MAX_QUEUES 64		/* = DMT_BRK_MAX_QUEUES */
#define DMT_POL_MAX_QRANGES 16		/* ranges of queue ids in one rule */
#define DMT_POL_MAX_QID 4095		/* = DMT_BRK_QUEUE_IDS - 1 */
#define DMT_POL_MAX_LINE 1024
#define DMT_POL_MAX_NAME 32
#define DMT_POL_MAX_UDMABUF (1ull << 40)
#define DMT_POL_FILE_MAX (64 * 1024)

enum dmt_pol_who {
	DMT_POL_USER,		/* name, resolved into id */
	DMT_POL_UID,
	DMT_POL_GROUP,		/* name, resolved into id */
	DMT_POL_GID,
	DMT_POL_EVERYONE,
};

struct dmt_pol_rule {
	unsigned int line;
	enum dmt_pol_who who;
	char name[DMT_POL_MAX_NAME + 1];
	uint32_t id;			/* uid or gid */
	bool any_if;
	uint32_t nifs;
	char ifs[DMT_POL_MAX_IFS][IF_NAMESIZE];
	uint32_t queues;		/* the most queues at once, 1.. */
	uint32_t nqranges;		/* queue ids the rule names, 0: any */
	uint32_t qranges[DMT_POL_MAX_QRANGES][2];	/* ... as ranges */
	bool any_port;
	uint32_t nports;
	uint16_t ports[DMT_POL_MAX_PORTS][2];	/* destination port ranges */
	uint64_t udmabuf;		/* largest udmabuf, 0: none */
	uint64_t udmabuf_total;		/* most bytes alive at once, 0: not given */
	bool tx;			/* bind-tx */
};

/* udmabuf-total when a rule gives none: this many times its udmabuf. */
#define DMT_POL_UDMABUF_TOTAL_TIMES 4

struct dmt_policy {
	size_t n;
	struct dmt_pol_rule *rules;
};

/*
 * Parse the len bytes of text (need not be NUL-terminated): 0, -ENOMEM,
 * or -EBADMSG with the line number in *line and why in why.  The
 * formatter writes the canonical text of p (*out malloc'd,
 * NUL-terminated): parse(format(p)) gives p again, line numbers aside.
 */
int dmt_policy_parse(const char *text, size_t len, struct dmt_policy *p,
		     unsigned int *line, char *why, size_t whylen);
int dmt_policy_format(const struct dmt_policy *p, char **out, size_t *len);
void dmt_policy_free(struct dmt_policy *p);

/* Resolve user and group names with lookup (group: a group name; 0 with
 * *id, or a negative errno): -ENOENT with the line and why for a name
 * that does not exist. */
typedef int (*dmt_pol_lookup_fn)(bool group, const char *name, uint32_t *id);
int dmt_policy_resolve(struct dmt_policy *p, dmt_pol_lookup_fn lookup,
		       unsigned int *line, char *why, size_t whylen);

/* The caller: its uid and every group it has (primary and others). */
struct dmt_pol_who_is {
	uint32_t uid;
	const uint32_t *gids;
	size_t ngids;
};

/* The first rule that names the caller and ifname; NULL: none. */
const struct dmt_pol_rule *dmt_policy_match(const struct dmt_policy *p,
					    const struct dmt_pol_who_is *w,
					    const char *ifname);
/* The largest udmabuf any rule naming the caller allows (0: none). */
uint64_t dmt_policy_udmabuf(const struct dmt_policy *p, const struct dmt_pol_who_is *w);
/* A rule's udmabuf-total: as given, or DMT_POL_UDMABUF_TOTAL_TIMES times
 * its udmabuf (at most DMT_POL_MAX_UDMABUF). */
uint64_t dmt_policy_rule_total(const struct dmt_pol_rule *r);
/* The most bytes of udmabufs alive at once that any rule naming the
 * caller allows (0: none), and the first rule that allows that many. */
uint64_t dmt_policy_udmabuf_total(const struct dmt_policy *p, const struct dmt_pol_who_is *w,
				  const struct dmt_pol_rule **rule);
/* Does the rule allow RX queue id (any, when it names none). */
bool dmt_policy_queue_ok(const struct dmt_pol_rule *r, uint32_t id);
/* The rule's queue ids as its file writes them ("3,5-7") into buf. */
void dmt_policy_queues_str(const struct dmt_pol_rule *r, char *buf, size_t len);

/* Does the rule allow this flow: a whole destination port in its ranges
 * (or any flow with "ports any"). */
bool dmt_policy_flow_ok(const struct dmt_pol_rule *r, const struct devmemtcp_flow *f);

#endif

/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * Private: the ethtool family, part of the NIC layer (lib/nic/: its
 * messages built and parsed in ethtool_msg.c, pure; the requests in
 * ethtool.c; a flow's rule spec in flow.c).  It owns the reading and changing
 * of one interface's ethtool settings: rings (tcp-data-split, hds-thresh),
 * channels and features over the genl family "ethtool"; the RSS table and
 * RSS contexts over netlink where the kernel has the op and the SIOCETHTOOL
 * ioctl otherwise; ntuple rules over the ioctl only (no kernel has a
 * netlink op for them).  It may call the nl layer (nl.h) and the kernel,
 * nothing above it.  It records its errors on the caller's struct dmt_err
 * without logging them: the caller (nic, probe) composes one message and
 * logs it through its own context.
 *
 * Every operation goes through a table of function pointers so that the
 * unit tests can run the transactional setup of lib/nic/nic.c against an
 * in-memory NIC (tests/unit/test-nic-plan.c).
 */
#ifndef DEVMEMTCP_ETHTOOL_H
#define DEVMEMTCP_ETHTOOL_H

#include <net/if.h>
#include <stdbool.h>
#include <stdint.h>
#include <linux/ethtool.h>

#include "core/internal.h"
#include "nl/nl.h"

/* Ring parameters; has_* false when the kernel/driver does not report the
 * attribute (tcp-data-split before 6.0 or unsupported, hds-thresh < 6.14). */
struct dmt_rings {
	uint32_t rx, rx_max, tx, tx_max;
	bool has_tds;
	uint8_t tds;			/* DMT_ETHTOOL_TCP_DATA_SPLIT_* */
	bool has_hds;
	uint32_t hds_thresh;
	bool has_hds_max;
	uint32_t hds_thresh_max;
};

struct dmt_channels {
	uint32_t rx_max, tx_max, other_max, combined_max;
	uint32_t rx, tx, other, combined;
};

/* One feature of the "features" bitsets. */
struct dmt_feature {
	bool present;	/* the kernel knows the name */
	bool hw;	/* changeable by the user */
	bool wanted;
	bool active;
	bool nochange;	/* fixed */
};

/* An RSS context (0 = the default one). */
struct dmt_rss {
	uint32_t context;
	uint32_t hfunc;
	uint32_t input_xfrm;
	uint32_t indir_size;
	uint32_t *indir;	/* malloc'd, indir_size entries */
	uint32_t key_size;
	uint8_t *key;		/* malloc'd */
};

/* An ntuple rule as the kernel stores it. */
struct dmt_rule {
	uint32_t location;
	uint32_t rss_context;	/* with FLOW_RSS in fs.flow_type */
	struct ethtool_rx_flow_spec fs;
};

struct dmt_eth;

struct dmt_eth_ops {
	int (*rings_get)(struct dmt_eth *e, struct dmt_rings *r);
	/* tds < 0 / hds < 0: attribute left out (unchanged). */
	int (*rings_set)(struct dmt_eth *e, int tds, int64_t hds);
	int (*channels_get)(struct dmt_eth *e, struct dmt_channels *c);
	int (*feature_get)(struct dmt_eth *e, const char *name,
			   struct dmt_feature *f);
	int (*feature_set)(struct dmt_eth *e, const char *name, bool on);
	int (*rss_get)(struct dmt_eth *e, uint32_t context, struct dmt_rss *rss);
	/* Every context, the default first (*list malloc'd, dmt_rss_free each). */
	int (*rss_dump)(struct dmt_eth *e, struct dmt_rss **list, size_t *n);
	/* n == 0: back to the driver's default spread (context 0 only). */
	int (*rss_set)(struct dmt_eth *e, uint32_t context, const uint32_t *indir,
		       uint32_t n);
	int (*rss_ctx_create)(struct dmt_eth *e, const uint32_t *indir, uint32_t n,
			      uint32_t *context);
	int (*rss_ctx_delete)(struct dmt_eth *e, uint32_t context);
	/* *loc: RX_CLS_LOC_ANY to let the layer choose; the location used is
	 * written back. */
	int (*rule_insert)(struct dmt_eth *e, const struct ethtool_rx_flow_spec *fs,
			   uint32_t rss_context, uint32_t *loc);
	int (*rule_delete)(struct dmt_eth *e, uint32_t loc);
	/* Every rule (*rules malloc'd); *table_size the driver's rule capacity. */
	int (*rule_list)(struct dmt_eth *e, struct dmt_rule **rules, size_t *n,
			 uint32_t *table_size);
};

/* The real implementation. */
extern const struct dmt_eth_ops dmt_eth_real_ops;

/* One interface as seen by this layer. */
struct dmt_eth {
	struct dmt_err *err;		/* messages go here (not owned, not logged) */
	struct dmt_nl *nl;		/* not owned; NULL: ioctl only */
	const struct dmt_eth_ops *ops;
	void *priv;			/* fake NIC of the unit tests */
	int ioctl_fd;			/* AF_INET/SOCK_DGRAM for SIOCETHTOOL */
	int ifindex;
	char ifname[IF_NAMESIZE];
	int kernel_version;		/* major*65536 + minor*256 + patch */
	bool no_nl_rss_get;		/* netlink RSS_GET missing (< 6.5) */
	bool no_nl_rss_set;		/* netlink RSS_SET missing (< 6.17) */
	int special_locs;		/* driver picks rule locations: -1 unknown */
	uint64_t ioctls;		/* SIOCETHTOOL calls made */
};

/* Resolve ifname and open the ioctl socket; every message of the layer
 * goes to err.  Uses dmt_eth_ops_override when set (unit tests). */
int dmt_eth_init(struct dmt_eth *e, struct dmt_err *err, struct dmt_nl *nl,
		 const char *ifname);
void dmt_eth_fini(struct dmt_eth *e);

/* Unit tests: route every dmt_eth_init to these ops (NULL: real). */
extern const struct dmt_eth_ops *dmt_eth_ops_override;
extern void *dmt_eth_priv_override;

void dmt_rss_free(struct dmt_rss *rss);
int dmt_rss_copy(struct dmt_rss *dst, const struct dmt_rss *src);

/* SIOCETHTOOL helpers used by probe. */
int dmt_eth_drvinfo(struct dmt_eth *e, struct ethtool_drvinfo *info);
int dmt_eth_rx_rings(struct dmt_eth *e, uint32_t *n);
/* Rule count and whether the driver picks locations itself. */
int dmt_eth_rule_count(struct dmt_eth *e, uint32_t *count, uint32_t *table_size,
		       bool *special_locs);

/* 1 when the interface is up, 0 when down, or a negative errno. */
int dmt_eth_is_up(struct dmt_eth *e);

/* RX/TX queue counts from /sys/class/net/IFNAME/queues (devices without
 * ethtool channels, e.g. lo). */
int dmt_sysfs_queues(const char *ifname, uint32_t *rx, uint32_t *tx);

/* "6.18.4-foo" -> 0x061204; 0 when unparsable. */
int dmt_kernel_version(const char *release);

/* ---- message builders and parsers, exposed for the unit tests ---- */
struct nlmsghdr *dmt_eth_rings_get_msg(void *buf, uint16_t family, int ifindex);
int dmt_eth_rings_parse(const struct nlmsghdr *nlh, struct dmt_rings *r);
struct nlmsghdr *dmt_eth_rings_set_msg(void *buf, uint16_t family, int ifindex,
				       int tds, int64_t hds);
struct nlmsghdr *dmt_eth_channels_get_msg(void *buf, uint16_t family,
					  int ifindex);
int dmt_eth_channels_parse(const struct nlmsghdr *nlh, struct dmt_channels *c);
struct nlmsghdr *dmt_eth_features_get_msg(void *buf, uint16_t family,
					  int ifindex);
int dmt_eth_features_parse(const struct nlmsghdr *nlh, const char *name,
			   struct dmt_feature *f);
struct nlmsghdr *dmt_eth_feature_set_msg(void *buf, uint16_t family,
					 int ifindex, const char *name, bool on);
struct nlmsghdr *dmt_eth_rss_get_msg(void *buf, uint16_t family, int ifindex,
				     uint32_t context, bool dump);
/* Parse an RSS_GET reply into rss (indir/key malloc'd). */
int dmt_eth_rss_parse(const struct nlmsghdr *nlh, struct dmt_rss *rss);
struct nlmsghdr *dmt_eth_rss_set_msg(void *buf, uint16_t family, int ifindex,
				     uint32_t context, const uint32_t *indir,
				     uint32_t n);

/* Build the flow spec of a flow: rule to queue (rss_context == 0 and
 * !use_ctx) or to an RSS context (FLOW_RSS, ring_cookie 0). */
int dmt_flow_to_spec(const struct devmemtcp_flow *flow, uint32_t queue,
		     bool use_ctx, struct ethtool_rx_flow_spec *fs);
/* Same rule match (flow type, fields, masks, action). */
bool dmt_spec_equal(const struct ethtool_rx_flow_spec *a,
		    const struct ethtool_rx_flow_spec *b);
/* "tcp4 10.0.0.2:* -> 10.0.0.1:5201 queue 3" for messages. */
void dmt_spec_str(const struct ethtool_rx_flow_spec *fs, uint32_t rss_context,
		  char *buf, size_t len);

#endif

/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * Private: the netlink layer, the bottom of the library.  It owns the
 * sockets (generic netlink or rtnetlink, chosen at open), the one
 * request/ack/dump loop with extack capture, and genl family resolution.
 * It calls only libmnl and the error helpers of internal.h; the NIC layer
 * and tx build their messages and send them through it, and none is
 * called from here.  The context's query socket is nl's too (ctx_nl.c:
 * dmt_ctx_nl, used under the context's lock).
 */
#ifndef DEVMEMTCP_NL_H
#define DEVMEMTCP_NL_H

#include <stdbool.h>
#include <stdint.h>
#include <libmnl/libmnl.h>
#include <linux/genetlink.h>

#include "core/internal.h"

/*
 * One netlink socket on one bus.  NETLINK_EXT_ACK and NETLINK_CAP_ACK are
 * on; after a failed request, extack holds the kernel's message ("" if
 * none), and bad_attr_off / miss_type what the kernel pointed at.
 */
struct dmt_nl {
	struct mnl_socket *sock;
	int bus;		/* NETLINK_GENERIC or NETLINK_ROUTE */
	uint32_t portid;
	uint32_t seq;
	char *rxbuf;
	size_t rxbuf_size;
	char extack[512];
	uint32_t bad_attr_off;	/* NLMSGERR_ATTR_OFFS, 0 if none */
	uint32_t miss_type;	/* NLMSGERR_ATTR_MISS_TYPE + 1, 0 if none */
	uint64_t round_trips;	/* requests sent, for setup-cost accounting */
	uint16_t netdev_family;	/* 0 until resolved */
	uint16_t ethtool_family;
};

/*
 * The context's query socket (ctx_nl.c), opened on first use and locked
 * for the caller until dmt_ctx_nl_put(): NULL (and unlocked) with the
 * message on ctx->err when it cannot be opened.  dmt_ctx_nl_close closes
 * it (devmemtcp_ctx_free).
 */
struct dmt_nl *dmt_ctx_nl(struct devmemtcp_ctx *ctx, int *errp);
void dmt_ctx_nl_put(struct devmemtcp_ctx *ctx);
void dmt_ctx_nl_close(struct devmemtcp_ctx *ctx);

/* Open a socket on bus, NETLINK_GENERIC or NETLINK_ROUTE (O_CLOEXEC).
 * 0 or negative errno. */
int dmt_nl_open(struct dmt_nl **nl, int bus);
void dmt_nl_close(struct dmt_nl *nl);
/* The same over fd, a generic netlink socket another process opened and
 * bound (devmemtcp-broker's, holding a binding): taken over on success
 * (dmt_nl_close closes it), left to the caller on failure (-EPROTO when
 * it is not a generic netlink socket). */
int dmt_nl_adopt(struct dmt_nl **nl, int fd);

/* What CTRL_CMD_GETFAMILY says of a family: its id and the commands the
 * kernel has (the only way to tell what a kernel supports). */
struct dmt_genl_family {
	uint16_t id;		/* 0: not in the reply */
	bool ops_listed;	/* the reply had CTRL_ATTR_OPS */
	size_t nops;
	uint32_t ops[128];
};

/* Parse one CTRL_CMD_NEWFAMILY reply into f.  0 or -EBADMSG. */
int dmt_nl_family_parse(const struct nlmsghdr *nlh, struct dmt_genl_family *f);
bool dmt_nl_family_has_op(const struct dmt_genl_family *f, uint32_t cmd);
/* CTRL_CMD_GETFAMILY for name: 0 with f filled, -ENOENT when the kernel
 * does not have the family. */
int dmt_nl_family_get(struct dmt_nl *nl, const char *name,
		      struct dmt_genl_family *f);
/* Just the id (dmt_nl_family_get). */
int dmt_nl_family(struct dmt_nl *nl, const char *name, uint16_t *id);
/* Cached resolution of "netdev" / "ethtool". */
int dmt_nl_netdev_family(struct dmt_nl *nl, uint16_t *id);
int dmt_nl_ethtool_family(struct dmt_nl *nl, uint16_t *id);

/* Put a request header of type in buf (at least MNL_SOCKET_BUFFER_SIZE
 * bytes, or enough for the message); an rtnetlink caller adds its family
 * header with mnl_nlmsg_put_extra_header(). */
struct nlmsghdr *dmt_nl_msg(void *buf, uint16_t type, uint16_t flags);
/* The same with the genl header of cmd. */
struct nlmsghdr *dmt_nl_genl_msg(void *buf, uint16_t family, uint8_t cmd,
				 uint8_t version, uint16_t flags);
/* Run cb on every attribute of a genl message: 0, or -EBADMSG when the
 * message is too short or cb says MNL_CB_ERROR. */
int dmt_nl_genl_parse(const struct nlmsghdr *nlh, mnl_attr_cb_t cb, void *data);

/*
 * Zero the alignment padding after every attribute of a genl message
 * (nests included), which libmnl before 1.0.5 leaves uninitialised.
 * dmt_nl_talk does it (for the requests of either bus) before sending;
 * exposed for the unit tests that compare built messages byte by byte or
 * parse them.
 */
void dmt_nl_zero_padding(struct nlmsghdr *nlh);

/*
 * Send req (NLM_F_REQUEST | NLM_F_ACK are added, seq and portid set) and
 * read replies until the ack or NLMSG_DONE, calling cb (may be NULL) on
 * every reply message.  Returns 0, the negative errno of NLMSG_ERROR (with
 * extack captured), or a negative errno from cb / the socket.
 */
int dmt_nl_talk(struct dmt_nl *nl, struct nlmsghdr *req, mnl_cb_t cb,
		void *data);

/*
 * Parse one reply buffer (a sequence of netlink messages as the kernel
 * sends them) the way dmt_nl_talk does; exposed for the unit tests that
 * feed recorded kernel replies.  Returns MNL_CB_OK (more to read),
 * MNL_CB_STOP (done, 0 returned via *err) or MNL_CB_ERROR with *err set.
 */
int dmt_nl_parse(struct dmt_nl *nl, const void *buf, size_t len,
		 uint32_t seq, mnl_cb_t cb, void *data, int *err);

#endif

// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/* Netlink transport on libmnl, either bus: requests, acks, dumps, extack. */
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>

#include "nl.h"

#ifndef NETLINK_CAP_ACK
#define NETLINK_CAP_ACK 10
#endif
#ifndef NETLINK_EXT_ACK
#define NETLINK_EXT_ACK 11
#endif
#ifndef NLM_F_CAPPED
#define NLM_F_CAPPED 0x100
#endif
#ifndef NLM_F_ACK_TLVS
#define NLM_F_ACK_TLVS 0x200
#endif
/* enum nlmsgerr_attrs, each on its own: older headers lack the later ones */
#define DMT_NLMSGERR_ATTR_MSG 1
#define DMT_NLMSGERR_ATTR_OFFS 2
#define DMT_NLMSGERR_ATTR_MISS_TYPE 5

#define DMT_NL_RXBUF (32u * 1024u)

/* A handle on bus with its receive buffer, no socket yet. */
static struct dmt_nl *nl_alloc(int bus)
{
	struct dmt_nl *nl = dmt_calloc(1, sizeof(*nl));

	if (!nl)
		return NULL;
	nl->rxbuf_size = DMT_NL_RXBUF;
	nl->rxbuf = dmt_malloc(nl->rxbuf_size);
	if (!nl->rxbuf) {
		free(nl);
		return NULL;
	}
	nl->bus = bus;
	return nl;
}

/* Extended acks and capped acks; both best effort: old kernels simply
 * give no extack. */
static void nl_want_extack(struct mnl_socket *sock)
{
	int one = 1;

	mnl_socket_setsockopt(sock, NETLINK_EXT_ACK, &one, sizeof(one));
	mnl_socket_setsockopt(sock, NETLINK_CAP_ACK, &one, sizeof(one));
}

int dmt_nl_open(struct dmt_nl **nlp, int bus)
{
	struct dmt_nl *nl = nl_alloc(bus);
	int ret;

	if (!nl)
		return -ENOMEM;
	if (dmt_hook_alloc_fail()) {
		ret = -ENOMEM;	/* test builds: as if libmnl's calloc failed */
		goto err_free;
	}
	nl->sock = mnl_socket_open2(bus, SOCK_CLOEXEC);
	if (!nl->sock) {
		ret = -errno;
		goto err_free;
	}
	nl_want_extack(nl->sock);
	if (mnl_socket_bind(nl->sock, 0, MNL_SOCKET_AUTOPID) < 0) {
		ret = -errno;
		goto err_close;
	}
	nl->portid = mnl_socket_get_portid(nl->sock);
	nl->seq = 1;
	*nlp = nl;
	return 0;

err_close:
	mnl_socket_close(nl->sock);
err_free:
	free(nl->rxbuf);
	free(nl);
	return ret;
}

int dmt_nl_adopt(struct dmt_nl **nlp, int fd)
{
	int dom = 0, proto = -1, ret;
	socklen_t len = sizeof(dom);
	struct dmt_nl *nl;

	/* from another process: it must be what it is said to be */
	if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &dom, &len) || dom != AF_NETLINK ||
	    getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &proto, &len) ||
	    proto != NETLINK_GENERIC)
		return -EPROTO;
	nl = nl_alloc(NETLINK_GENERIC);
	if (!nl)
		return -ENOMEM;
	nl->sock = mnl_socket_fdopen(fd);
	if (!nl->sock) {
		ret = -errno;
		free(nl->rxbuf);
		free(nl);
		return ret;
	}
	nl_want_extack(nl->sock);
	nl->portid = mnl_socket_get_portid(nl->sock);
	/* above the sequence numbers its first owner used */
	nl->seq = 1u << 16;
	*nlp = nl;
	return 0;
}

void dmt_nl_close(struct dmt_nl *nl)
{
	if (!nl)
		return;
	mnl_socket_close(nl->sock);
	free(nl->rxbuf);
	free(nl);
}

struct nlmsghdr *dmt_nl_msg(void *buf, uint16_t type, uint16_t flags)
{
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);

	nlh->nlmsg_type = type;
	nlh->nlmsg_flags = NLM_F_REQUEST | flags;
	return nlh;
}

struct nlmsghdr *dmt_nl_genl_msg(void *buf, uint16_t family, uint8_t cmd,
				 uint8_t version, uint16_t flags)
{
	struct nlmsghdr *nlh = dmt_nl_msg(buf, family, flags);
	struct genlmsghdr *genl;

	genl = mnl_nlmsg_put_extra_header(nlh, sizeof(*genl));
	genl->cmd = cmd;
	genl->version = version;
	return nlh;
}

static int extack_attr_cb(const struct nlattr *attr, void *data)
{
	struct dmt_nl *nl = data;

	switch (mnl_attr_get_type(attr)) {
	case DMT_NLMSGERR_ATTR_MSG:
		if (mnl_attr_validate(attr, MNL_TYPE_NUL_STRING) >= 0) {
			snprintf(nl->extack, sizeof(nl->extack), "%s",
				 mnl_attr_get_str(attr));
		}
		break;
	case DMT_NLMSGERR_ATTR_OFFS:
		if (mnl_attr_validate(attr, MNL_TYPE_U32) >= 0)
			nl->bad_attr_off = mnl_attr_get_u32(attr);
		break;
	case DMT_NLMSGERR_ATTR_MISS_TYPE:
		if (mnl_attr_validate(attr, MNL_TYPE_U32) >= 0)
			nl->miss_type = mnl_attr_get_u32(attr) + 1;
		break;
	}
	return MNL_CB_OK;
}

/* What the kernel puts in an error: 0 or -1 .. -MAX_ERRNO (4095).  Any
 * other value is a malformed message, never a result a caller could take
 * for success (> 0) or negate (INT_MIN). */
static int kernel_errno(int e)
{
	return e <= 0 && e >= -4095 ? e : -EBADMSG;
}

/* NLMSG_ERROR: 0 for an ack, else the negative errno; extack captured. */
static int parse_error(struct dmt_nl *nl, const struct nlmsghdr *nlh)
{
	const struct nlmsgerr *e = mnl_nlmsg_get_payload(nlh);
	size_t off;
	int err;

	if (nlh->nlmsg_len < mnl_nlmsg_size(sizeof(*e)))
		return -EBADMSG;
	err = kernel_errno(e->error);
	if (!(nlh->nlmsg_flags & NLM_F_ACK_TLVS))
		return err;
	/* TLVs follow the error and, unless capped, the original request. */
	off = sizeof(*e);
	if (!(nlh->nlmsg_flags & NLM_F_CAPPED)) {
		if (e->msg.nlmsg_len < sizeof(e->msg))
			return err;
		off += e->msg.nlmsg_len - sizeof(e->msg);
	}
	if (mnl_nlmsg_size(off) > nlh->nlmsg_len)
		return err;
	mnl_attr_parse(nlh, (unsigned int)off, extack_attr_cb, nl);
	return err;
}

/*
 * A whole message at nlh with left bytes left: its header, nlmsg_len
 * bytes and their alignment padding (the parsers walk attributes up to
 * MNL_ALIGN(nlmsg_len)).  Compared as sizes: libmnl's mnl_nlmsg_ok
 * compares nlmsg_len as an int, so a length >= 2^31 passes it, and
 * MNL_ALIGN of a 32-bit length near 2^32 wraps.
 */
static bool nlmsg_fits(const struct nlmsghdr *nlh, size_t left)
{
	return left >= sizeof(*nlh) && nlh->nlmsg_len >= sizeof(*nlh) &&
	       MNL_ALIGN((size_t)nlh->nlmsg_len) <= left;
}

int dmt_nl_parse(struct dmt_nl *nl, const void *buf, size_t len,
		 uint32_t seq, mnl_cb_t cb, void *data, int *err)
{
	const struct nlmsghdr *nlh = buf;
	size_t left = len;
	int ret;

	*err = 0;
	while (left) {
		size_t step;

		if (!nlmsg_fits(nlh, left)) {
			*err = -EBADMSG;
			return MNL_CB_ERROR;
		}
		step = MNL_ALIGN((size_t)nlh->nlmsg_len);
		if (nlh->nlmsg_seq != seq || nlh->nlmsg_pid != nl->portid)
			goto next; /* a late reply to an earlier request */
		switch (nlh->nlmsg_type) {
		case NLMSG_NOOP:
			break;
		case NLMSG_ERROR:
			*err = parse_error(nl, nlh);
			return *err ? MNL_CB_ERROR : MNL_CB_STOP;
		case NLMSG_DONE:
			if (nlh->nlmsg_len >= mnl_nlmsg_size(sizeof(int)) &&
			    *(const int *)mnl_nlmsg_get_payload(nlh) < 0) {
				/* a dump that failed part-way, maybe with TLVs */
				*err = kernel_errno(
					*(const int *)mnl_nlmsg_get_payload(nlh));
				return MNL_CB_ERROR;
			}
			return MNL_CB_STOP;
		default:
			if (cb) {
				ret = cb(nlh, data);
				if (ret < 0) {
					*err = ret;
					return MNL_CB_ERROR;
				}
				if (ret == MNL_CB_ERROR) {
					*err = -EBADMSG;
					return MNL_CB_ERROR;
				}
				if (ret == MNL_CB_STOP)
					return MNL_CB_STOP;
			}
		}
next:
		left -= step;
		nlh = (const void *)((const char *)nlh + step);
	}
	return MNL_CB_OK;
}

/*
 * libmnl before 1.0.5 leaves the alignment padding after an attribute's
 * payload uninitialised: zero it (nests included) so that no stack garbage
 * reaches the kernel and valgrind has nothing to report.
 */
static void zero_padding(char *p, const char *end)
{
	while (p + sizeof(struct nlattr) <= end) {
		struct nlattr *a = (struct nlattr *)p;
		size_t len = a->nla_len, alen = MNL_ALIGN(len);

		if (len < sizeof(*a) || p + alen > end)
			return;
		memset(p + len, 0, alen - len);
		if (a->nla_type & NLA_F_NESTED)
			zero_padding(p + MNL_ATTR_HDRLEN, p + len);
		p += alen;
	}
}

/* Zero the padding of the attributes after a family header of hdrlen. */
static void zero_attr_padding(struct nlmsghdr *nlh, size_t hdrlen)
{
	if (nlh->nlmsg_type >= NLMSG_MIN_TYPE &&
	    nlh->nlmsg_len > NLMSG_HDRLEN + hdrlen)
		zero_padding((char *)nlh + NLMSG_HDRLEN + hdrlen,
			     (char *)nlh + nlh->nlmsg_len);
}

void dmt_nl_zero_padding(struct nlmsghdr *nlh)
{
	zero_attr_padding(nlh, GENL_HDRLEN);
}

/*
 * Length of the family header in front of a request's attributes: the
 * genl header, or for rtnetlink the struct of the requests this library
 * sends (0 for any other: its attributes are left as built).
 */
static size_t family_hdrlen(const struct dmt_nl *nl,
			    const struct nlmsghdr *req)
{
	if (nl->bus == NETLINK_GENERIC)
		return GENL_HDRLEN;
	switch (req->nlmsg_type) {
	case RTM_GETLINK:
		return NLMSG_ALIGN(sizeof(struct ifinfomsg));
	case RTM_GETROUTE:
		return NLMSG_ALIGN(sizeof(struct rtmsg));
	}
	return 0;
}

int dmt_nl_talk(struct dmt_nl *nl, struct nlmsghdr *req, mnl_cb_t cb,
		void *data)
{
	bool dump = req->nlmsg_flags & NLM_F_DUMP;
	size_t hdrlen = family_hdrlen(nl, req);
	uint32_t seq = ++nl->seq;
	ssize_t n;
	int ret, err;

	nl->extack[0] = '\0';
	nl->bad_attr_off = 0;
	nl->miss_type = 0;
	/* A dump ends with NLMSG_DONE; an ack after it would be left over. */
	req->nlmsg_flags |= NLM_F_REQUEST | (dump ? 0 : NLM_F_ACK);
	req->nlmsg_seq = seq;
	req->nlmsg_pid = 0;
	if (hdrlen)
		zero_attr_padding(req, hdrlen);
	nl->round_trips++;
	if (mnl_socket_sendto(nl->sock, req, req->nlmsg_len) < 0)
		return -errno;
	for (;;) {
		n = mnl_socket_recvfrom(nl->sock, nl->rxbuf, nl->rxbuf_size);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		ret = dmt_nl_parse(nl, nl->rxbuf, (size_t)n, seq, cb, data,
				   &err);
		if (ret == MNL_CB_STOP)
			return 0;
		/* What is left of a dump that failed part-way stays queued:
		 * it carries this seq, which the next request skips. */
		if (ret == MNL_CB_ERROR)
			return err;
	}
}

static int family_attr_cb(const struct nlattr *attr, void *data)
{
	struct dmt_genl_family *f = data;
	const struct nlattr *op, *a;

	switch (mnl_attr_get_type(attr)) {
	case CTRL_ATTR_FAMILY_ID:
		if (mnl_attr_validate(attr, MNL_TYPE_U16) >= 0)
			f->id = mnl_attr_get_u16(attr);
		break;
	case CTRL_ATTR_OPS:
		f->ops_listed = true;
		mnl_attr_for_each_nested(op, attr) {
			mnl_attr_for_each_nested(a, op) {
				if (mnl_attr_get_type(a) == CTRL_ATTR_OP_ID &&
				    mnl_attr_validate(a, MNL_TYPE_U32) >= 0 &&
				    f->nops < ARRAY_SIZE(f->ops))
					f->ops[f->nops++] = mnl_attr_get_u32(a);
			}
		}
		break;
	}
	return MNL_CB_OK;
}

int dmt_nl_genl_parse(const struct nlmsghdr *nlh, mnl_attr_cb_t cb, void *data)
{
	if (nlh->nlmsg_len < mnl_nlmsg_size(sizeof(struct genlmsghdr)))
		return -EBADMSG;
	if (mnl_attr_parse(nlh, sizeof(struct genlmsghdr), cb, data) !=
	    MNL_CB_OK)
		return -EBADMSG;
	return 0;
}

int dmt_nl_family_parse(const struct nlmsghdr *nlh, struct dmt_genl_family *f)
{
	memset(f, 0, sizeof(*f));
	return dmt_nl_genl_parse(nlh, family_attr_cb, f);
}

bool dmt_nl_family_has_op(const struct dmt_genl_family *f, uint32_t cmd)
{
	for (size_t i = 0; i < f->nops; i++)
		if (f->ops[i] == cmd)
			return true;
	return false;
}

static int family_cb(const struct nlmsghdr *nlh, void *data)
{
	return dmt_nl_family_parse(nlh, data) ? MNL_CB_ERROR : MNL_CB_OK;
}

int dmt_nl_family_get(struct dmt_nl *nl, const char *name,
		      struct dmt_genl_family *f)
{
	char buf[256];
	struct nlmsghdr *nlh;
	int ret;

	memset(f, 0, sizeof(*f));
	nlh = dmt_nl_genl_msg(buf, GENL_ID_CTRL, CTRL_CMD_GETFAMILY, 1, 0);
	mnl_attr_put_strz(nlh, CTRL_ATTR_FAMILY_NAME, name);
	ret = dmt_nl_talk(nl, nlh, family_cb, f);
	if (ret)
		return ret;
	return f->id ? 0 : -ENOENT;
}

int dmt_nl_family(struct dmt_nl *nl, const char *name, uint16_t *id)
{
	struct dmt_genl_family f;
	int ret = dmt_nl_family_get(nl, name, &f);

	if (!ret)
		*id = f.id;
	return ret;
}

int dmt_nl_netdev_family(struct dmt_nl *nl, uint16_t *id)
{
	int ret = 0;

	/* test builds: another name stands for a kernel without the family */
	const char *name = dmt_hook_env("DEVMEMTCP_TEST_NETDEV_FAMILY");

	if (!nl->netdev_family)
		ret = dmt_nl_family(nl, name ? name : "netdev", &nl->netdev_family);
	*id = nl->netdev_family;
	return ret;
}

int dmt_nl_ethtool_family(struct dmt_nl *nl, uint16_t *id)
{
	int ret = 0;

	if (!nl->ethtool_family)
		ret = dmt_nl_family(nl, "ethtool", &nl->ethtool_family);
	*id = nl->ethtool_family;
	return ret;
}

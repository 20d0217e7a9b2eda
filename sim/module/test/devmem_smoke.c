// SPDX-License-Identifier: GPL-2.0-only
/*
 * devmem_smoke - raw devmem TCP smoke test for the devmemsim module
 * (the ncdevmem sequence, without YNL).  Not part of the library.
 *
 *   devmem_smoke rx IFNAME QUEUES PORT BYTES [nobind|keep]
 *       (QUEUES: "3" or "2,3"; env FLOWS=n accepts n connections)
 *       udmabuf + bind-rx on QUEUE, accept one connection on PORT,
 *       receive BYTES with MSG_SOCK_DEVMEM, validate every byte
 *       (pattern: byte i of the stream == i % 251), return tokens.
 *       Exit 0 only if all bytes arrived in the dma-buf and matched.
 *       nobind: no binding (plain receive); keep: never return tokens
 *       (closing the socket must release them).  IPv4 and IPv6.
 *   devmem_smoke tx IP PORT BYTES            plain send of the pattern
 *   devmem_smoke txdm IFNAME IP PORT BYTES   devmem TX (bind-tx, MSG_ZEROCOPY)
 *   devmem_smoke bindfail IFNAME QUEUE       expect bind-rx to fail; print err
 *   devmem_smoke rings IFNAME SPLIT [HDS]    ethtool netlink rings-set
 *       (SPLIT: -1 unchanged, 0 auto, 1 off, 2 on; HDS: hds-thresh)
 * Env for rx and bindfail: RX_PAGE_SIZE=n binds with that rx-page-size
 * (NETDEV_A_DMABUF_RX_PAGE_SIZE) and backs the udmabuf with 2 MiB huge
 * pages (HUGETLB=0: with normal pages, to see the kernel refuse it).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <linux/dma-buf.h>
#include <linux/errqueue.h>
#include <linux/genetlink.h>
#include <linux/netlink.h>
#include <linux/udmabuf.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>

#include "pattern.h"	/* tests/lib: the stream pattern */

#ifndef MSG_SOCK_DEVMEM
#define MSG_SOCK_DEVMEM 0x2000000
#endif
#define SO_DEVMEM_LINEAR 78
#define SO_DEVMEM_DMABUF 79
#define SO_DEVMEM_DONTNEED 80
#define SCM_DEVMEM_LINEAR SO_DEVMEM_LINEAR
#define SCM_DEVMEM_DMABUF SO_DEVMEM_DMABUF
#ifndef SO_ZEROCOPY
#define SO_ZEROCOPY 60
#endif
#ifndef MSG_ZEROCOPY
#define MSG_ZEROCOPY 0x4000000
#endif
#ifndef MFD_HUGE_2MB
#define MFD_HUGE_2MB (21u << 26)	/* log2(2 MiB) << MFD_HUGE_SHIFT */
#endif

struct dmabuf_cmsg_ {
	uint64_t frag_offset;
	uint32_t frag_size;
	uint32_t frag_token;
	uint32_t dmabuf_id;
	uint32_t flags;
};

struct dmabuf_token_ {
	uint32_t token_start;
	uint32_t token_count;
};

#define NETDEV_CMD_BIND_RX 13
#define NETDEV_CMD_BIND_TX 15
#define NETDEV_A_DMABUF_IFINDEX 1
#define NETDEV_A_DMABUF_QUEUES 2
#define NETDEV_A_DMABUF_FD 3
#define NETDEV_A_DMABUF_ID 4
#define NETDEV_A_DMABUF_RX_PAGE_SIZE 5
#define NETDEV_A_QUEUE_ID 1
#define NETDEV_A_QUEUE_TYPE 3
#define NETDEV_QUEUE_TYPE_RX 0

#define DMABUF_SIZE (64UL << 20)
#define PERIOD PATTERN_PERIOD_DEFAULT
#define PAT(i) pattern_byte((i), PERIOD)

static void die(const char *m)
{
	perror(m);
	exit(2);
}

/* ---- minimal generic netlink ---- */

struct nlbuf {
	char b[4096] __attribute__((aligned(4)));
	size_t len;
};

static struct nlattr *nla_put(struct nlbuf *m, int type, const void *data, int len)
{
	struct nlattr *a = (struct nlattr *)(m->b + m->len);

	a->nla_type = type;
	a->nla_len = NLA_HDRLEN + len;
	if (len)
		memcpy((char *)a + NLA_HDRLEN, data, len);
	m->len += NLA_ALIGN(a->nla_len);
	return a;
}

static void nla_put_u32(struct nlbuf *m, int type, uint32_t v)
{
	nla_put(m, type, &v, 4);
}

static void msg_init(struct nlbuf *m, int family, int cmd)
{
	struct nlmsghdr *nh = (struct nlmsghdr *)m->b;
	struct genlmsghdr *g;

	memset(m->b, 0, sizeof(m->b));
	nh->nlmsg_type = family;
	nh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
	nh->nlmsg_seq = 1;
	g = (struct genlmsghdr *)NLMSG_DATA(nh);
	g->cmd = cmd;
	g->version = 1;
	m->len = NLMSG_HDRLEN + GENL_HDRLEN;
}

/* send, wait for reply; returns -errno or 0, *u32_out = attr value */
static int nl_txrx(int fd, struct nlbuf *m, int want_attr, uint32_t *u32_out)
{
	struct nlmsghdr *nh = (struct nlmsghdr *)m->b;
	char rb[16384] __attribute__((aligned(4)));
	int ret = 1;

	nh->nlmsg_len = m->len;
	if (send(fd, m->b, m->len, 0) < 0)
		die("netlink send");
	while (ret > 0) {
		ssize_t n = recv(fd, rb, sizeof(rb), 0);
		struct nlmsghdr *r;

		if (n < 0)
			die("netlink recv");
		for (r = (struct nlmsghdr *)rb; NLMSG_OK(r, n); r = NLMSG_NEXT(r, n)) {
			if (r->nlmsg_type == NLMSG_ERROR) {
				struct nlmsgerr *e = NLMSG_DATA(r);

				ret = e->error;
				if (e->error && (r->nlmsg_flags & NLM_F_ACK_TLVS)) {
					/* print extack message */
					int off = sizeof(*e);
					struct nlattr *a;

					if (!(r->nlmsg_flags & NLM_F_CAPPED))
						off += e->msg.nlmsg_len - NLMSG_HDRLEN;
					for (a = (struct nlattr *)((char *)e + off);
					     (char *)a < (char *)r + r->nlmsg_len && a->nla_len;
					     a = (struct nlattr *)((char *)a + NLA_ALIGN(a->nla_len)))
						if (a->nla_type == NLMSGERR_ATTR_MSG)
							fprintf(stderr, "extack: %s\n",
								(char *)a + NLA_HDRLEN);
				}
				if (ret <= 0)
					return ret;
			} else if (r->nlmsg_type == GENL_ID_CTRL || 1) {
				struct nlattr *a;
				char *end = (char *)r + r->nlmsg_len;

				for (a = (struct nlattr *)((char *)NLMSG_DATA(r) + GENL_HDRLEN);
				     (char *)a < end && a->nla_len;
				     a = (struct nlattr *)((char *)a + NLA_ALIGN(a->nla_len))) {
					if ((a->nla_type & NLA_TYPE_MASK) == want_attr && u32_out) {
						if (want_attr == CTRL_ATTR_FAMILY_ID &&
						    r->nlmsg_type == GENL_ID_CTRL)
							*u32_out = *(uint16_t *)((char *)a + NLA_HDRLEN);
						else
							*u32_out = *(uint32_t *)((char *)a + NLA_HDRLEN);
					}
				}
			}
		}
	}
	return 0;
}

static int nl_open_family(int *family, const char *name)
{
	struct nlbuf m;
	uint32_t fam = 0;
	int one = 1;
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_GENERIC);

	if (fd < 0)
		die("socket netlink");
	setsockopt(fd, SOL_NETLINK, NETLINK_EXT_ACK, &one, sizeof(one));
	msg_init(&m, GENL_ID_CTRL, CTRL_CMD_GETFAMILY);
	nla_put(&m, CTRL_ATTR_FAMILY_NAME, name, strlen(name) + 1);
	if (nl_txrx(fd, &m, CTRL_ATTR_FAMILY_ID, &fam) || !fam) {
		fprintf(stderr, "no %s genl family\n", name);
		exit(2);
	}
	*family = fam;
	return fd;
}

static int nl_open(int *family)
{
	return nl_open_family(family, "netdev");
}

/* ethtool netlink RINGS_SET: tcp-data-split (0 auto, 1 off, 2 on), hds-thresh */
static int do_rings(const char *ifname, int split, long hds)
{
	struct nlbuf m;
	struct nlattr *nest;
	int family, nl = nl_open_family(&family, "ethtool");
	uint8_t v = split;
	int err;

	msg_init(&m, family, 16 /* ETHTOOL_MSG_RINGS_SET */);
	nest = nla_put(&m, 1 | NLA_F_NESTED, NULL, 0);
	nla_put(&m, 2 /* ETHTOOL_A_HEADER_DEV_NAME */, ifname, strlen(ifname) + 1);
	nest->nla_len = (m.b + m.len) - (char *)nest;
	if (split >= 0)
		nla_put(&m, 11 /* ETHTOOL_A_RINGS_TCP_DATA_SPLIT */, &v, 1);
	if (hds >= 0)
		nla_put_u32(&m, 17 /* ETHTOOL_A_RINGS_HDS_THRESH */, hds);
	err = nl_txrx(nl, &m, 0, NULL);
	printf("rings-set %s split=%d hds=%ld: %d (%s)\n", ifname, split, hds, err,
	       err ? strerror(-err) : "ok");
	return err ? 1 : 0;
}

static int bind_rx(int nl, int family, int ifindex, int dmabuf, const char *queues,
		   uint32_t *id)
{
	struct nlbuf m;
	struct nlattr *nest;
	const char *q = queues;

	msg_init(&m, family, NETDEV_CMD_BIND_RX);
	nla_put_u32(&m, NETDEV_A_DMABUF_IFINDEX, ifindex);
	nla_put_u32(&m, NETDEV_A_DMABUF_FD, dmabuf);
	if (getenv("RX_PAGE_SIZE"))
		nla_put_u32(&m, NETDEV_A_DMABUF_RX_PAGE_SIZE,
			    strtoul(getenv("RX_PAGE_SIZE"), NULL, 0));
	while (*q) {	/* "2" or "2,3" */
		nest = nla_put(&m, NETDEV_A_DMABUF_QUEUES | NLA_F_NESTED, NULL, 0);
		nla_put_u32(&m, NETDEV_A_QUEUE_ID, strtoul(q, NULL, 0));
		nla_put_u32(&m, NETDEV_A_QUEUE_TYPE, NETDEV_QUEUE_TYPE_RX);
		nest->nla_len = (m.b + m.len) - (char *)nest;
		q += strcspn(q, ",");
		q += *q == ',';
	}
	return nl_txrx(nl, &m, NETDEV_A_DMABUF_ID, id);
}

static int bind_tx(int nl, int family, int ifindex, int dmabuf, uint32_t *id)
{
	struct nlbuf m;

	msg_init(&m, family, NETDEV_CMD_BIND_TX);
	nla_put_u32(&m, NETDEV_A_DMABUF_IFINDEX, ifindex);
	nla_put_u32(&m, NETDEV_A_DMABUF_FD, dmabuf);
	return nl_txrx(nl, &m, NETDEV_A_DMABUF_ID, id);
}

/* ---- udmabuf ---- */

static int make_udmabuf(size_t size, uint8_t **map)
{
	struct udmabuf_create c = { 0 };
	int memfd, devfd, buf;
	/* large NIC pages need sg entries that large: 2 MiB huge pages */
	int huge = getenv("RX_PAGE_SIZE") &&
		   !(getenv("HUGETLB") && !strcmp(getenv("HUGETLB"), "0"));

	memfd = memfd_create("devmem_smoke", MFD_ALLOW_SEALING |
			     (huge ? MFD_HUGETLB | MFD_HUGE_2MB : 0));
	if (memfd < 0)
		die("memfd_create");
	if (ftruncate(memfd, size))
		die("ftruncate");
	if (fcntl(memfd, F_ADD_SEALS, F_SEAL_SHRINK))
		die("F_ADD_SEALS");
	devfd = open("/dev/udmabuf", O_RDWR);
	if (devfd < 0)
		die("/dev/udmabuf");
	c.memfd = memfd;
	c.flags = UDMABUF_FLAGS_CLOEXEC;
	c.size = size;
	buf = ioctl(devfd, UDMABUF_CREATE, &c);
	if (buf < 0)
		die("UDMABUF_CREATE");
	*map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, buf, 0);
	if (*map == MAP_FAILED)
		die("mmap udmabuf");
	return buf;
}

static void dbuf_sync(int fd, uint64_t flags)
{
	struct dma_buf_sync s = { .flags = flags };

	ioctl(fd, DMA_BUF_IOCTL_SYNC, &s);
}

/* ---- modes ---- */

static int do_rx(const char *ifname, const char *queue, int port, uint64_t total,
		 const char *opt)
{
	int nobind = opt && !strcmp(opt, "nobind");
	int keep = opt && !strcmp(opt, "keep");	/* never return tokens */
	int ifindex = if_nametoindex(ifname);
	uint8_t *map;
	int dmabuf, nl, family, ls, cs = -1, one = 1;
	uint32_t id = 0;
	struct sockaddr_in6 sa = { .sin6_family = AF_INET6, .sin6_port = htons(port) };
	int zero = 0;
	static char iobuf[1 << 20];
	static char ctrl[80000];
	uint64_t pos = 0, dm_bytes = 0, lin_bytes = 0, frags = 0, tokens = 0, bad = 0;
	uint64_t first_bad = ~0ULL;

	if (!ifindex)
		die("if_nametoindex");
	dmabuf = make_udmabuf(DMABUF_SIZE, &map);
	nl = nl_open(&family);
	if (!nobind) {
		int err = bind_rx(nl, family, ifindex, dmabuf, queue, &id);

		if (err) {
			fprintf(stderr, "bind-rx failed: %s\n", strerror(-err));
			return 2;
		}
		printf("bind-rx ok: binding id %u on %s queue %s\n", id, ifname, queue);
	}
	fflush(stdout);

	ls = socket(AF_INET6, SOCK_STREAM, 0);
	setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	setsockopt(ls, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
	if (bind(ls, (struct sockaddr *)&sa, sizeof(sa)) || listen(ls, 1))
		die("bind/listen");
	printf("listening on %d\n", port);
	fflush(stdout);
	/* FLOWS=n: accept n connections, one child process each */
	for (int f = getenv("FLOWS") ? atoi(getenv("FLOWS")) : 1, nf = f; f > 0; f--) {
		cs = accept(ls, NULL, NULL);
		if (cs < 0)
			die("accept");
		if (nf == 1)
			break;
		if (fork() == 0)
			goto flow;
		close(cs);
		if (f == 1) {
			int st, failed = 0;

			while (wait(&st) > 0)
				failed |= !WIFEXITED(st) || WEXITSTATUS(st);
			printf("%d flows: %s\n", nf, failed ? "FAILED" : "all ok");
			return failed;
		}
	}
flow:

	while (pos < total) {
		struct iovec iov = { iobuf, sizeof(iobuf) };
		struct msghdr msg = { 0 };
		struct cmsghdr *cm;
		/* one token per DMABUF cmsg the control buffer can hold: small
		 * fragments (packed buffers) come by the thousand */
		struct dmabuf_token_ tok[sizeof(ctrl) / CMSG_SPACE(sizeof(struct dmabuf_cmsg_))];
		int ntok = 0;
		uint64_t iopos = 0, dm_now = 0;
		ssize_t n;

		msg.msg_iov = &iov;
		msg.msg_iovlen = 1;
		msg.msg_control = ctrl;
		msg.msg_controllen = sizeof(ctrl);
		n = recvmsg(cs, &msg, MSG_SOCK_DEVMEM);
		if (n < 0) {
			if (errno == EFAULT && nobind) {
				/* not a devmem queue: read normally */
				n = recv(cs, iobuf, sizeof(iobuf), 0);
				if (n <= 0)
					break;
				for (ssize_t i = 0; i < n; i++, pos++)
					if ((uint8_t)iobuf[i] != PAT(pos) && bad++ == 0)
						first_bad = pos;
				lin_bytes += n;
				continue;
			}
			die("recvmsg");
		}
		if (n == 0)
			break;
		dbuf_sync(dmabuf, DMA_BUF_SYNC_START | DMA_BUF_SYNC_READ);
		for (cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm)) {
			struct dmabuf_cmsg_ *d = (void *)CMSG_DATA(cm);

			if (cm->cmsg_level != SOL_SOCKET)
				continue;
			if (cm->cmsg_type == SCM_DEVMEM_LINEAR) {
				for (uint32_t i = 0; i < d->frag_size; i++, pos++)
					if ((uint8_t)iobuf[iopos + i] != PAT(pos) && bad++ == 0)
						first_bad = pos;
				iopos += d->frag_size;
				lin_bytes += d->frag_size;
			} else if (cm->cmsg_type == SCM_DEVMEM_DMABUF) {
				if (d->dmabuf_id != id) {
					fprintf(stderr, "wrong dmabuf id %u\n", d->dmabuf_id);
					bad++;
				}
				for (uint32_t i = 0; i < d->frag_size; i++, pos++)
					if (map[d->frag_offset + i] != PAT(pos) && bad++ == 0)
						first_bad = pos;
				dm_bytes += d->frag_size;
				dm_now += d->frag_size;
				frags++;
				tok[ntok].token_start = d->frag_token;
				tok[ntok].token_count = 1;
				ntok++;
			}
		}
		dbuf_sync(dmabuf, DMA_BUF_SYNC_END | DMA_BUF_SYNC_READ);
		if (iopos + dm_now < (uint64_t)n) {
			/* plain data without devmem cmsgs */
			for (uint64_t i = iopos; i < (uint64_t)n - dm_now; i++, pos++)
				if ((uint8_t)iobuf[i] != PAT(pos) && bad++ == 0)
					first_bad = pos;
			lin_bytes += n - dm_now - iopos;
		}
		for (int i = 0; i < ntok && !keep; i += 128) {
			int c = ntok - i < 128 ? ntok - i : 128;
			int r = setsockopt(cs, SOL_SOCKET, SO_DEVMEM_DONTNEED, &tok[i],
					   c * sizeof(tok[0]));
			if (r < 0)
				die("SO_DEVMEM_DONTNEED");
			tokens += r;
			if (r != c)
				fprintf(stderr, "DONTNEED returned %d of %d\n", r, c);
		}
	}
	printf("received %llu bytes: dmabuf %llu in %llu frags, linear %llu, tokens returned %llu, bad %llu",
	       (unsigned long long)pos, (unsigned long long)dm_bytes,
	       (unsigned long long)frags, (unsigned long long)lin_bytes,
	       (unsigned long long)tokens, (unsigned long long)bad);
	if (bad)
		printf(" first bad offset %llu", (unsigned long long)first_bad);
	printf("\n");
	close(cs);
	close(ls);
	close(nl);
	if (pos != total || bad)
		return 1;
	if (!nobind && (dm_bytes == 0 || (!keep && tokens != frags)))
		return 1;
	return 0;
}

static int connect_sock(int s, const char *ip, int port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
	struct sockaddr_in6 sa6 = { .sin6_family = AF_INET6, .sin6_port = htons(port) };
	struct sockaddr *p = (struct sockaddr *)&sa;
	socklen_t l = sizeof(sa);

	if (strchr(ip, ':')) {
		inet_pton(AF_INET6, ip, &sa6.sin6_addr);
		p = (struct sockaddr *)&sa6;
		l = sizeof(sa6);
	} else {
		inet_pton(AF_INET, ip, &sa.sin_addr);
	}
	for (int i = 0; i < 50; i++) {
		if (!connect(s, p, l))
			return s;
		usleep(100000);
	}
	die("connect");
	return -1;
}

static int sock_for(const char *ip)
{
	return socket(strchr(ip, ':') ? AF_INET6 : AF_INET, SOCK_STREAM, 0);
}

static int connect_to(const char *ip, int port)
{
	return connect_sock(sock_for(ip), ip, port);
}

static int do_tx(const char *ip, int port, uint64_t total)
{
	static uint8_t buf[PERIOD * 256];
	int s = connect_to(ip, port);
	uint64_t pos = 0;

	pattern_fill(buf, sizeof(buf), 0, PERIOD);
	while (pos < total) {
		size_t off = pos % PERIOD;
		size_t n = sizeof(buf) - off;
		ssize_t w;

		if (n > total - pos)
			n = total - pos;
		w = send(s, buf + off, n, 0);
		if (w < 0)
			die("send");
		pos += w;
	}
	close(s);
	printf("sent %llu bytes\n", (unsigned long long)pos);
	return 0;
}

static int do_txdm(const char *ifname, const char *ip, int port, uint64_t total)
{
	int ifindex = if_nametoindex(ifname);
	const size_t size = PERIOD * 4096UL * 4;
	uint8_t *map;
	int dmabuf, nl, family, s, one = 1, err;
	uint32_t id = 0;
	uint64_t pos = 0, done = 0;
	char ctrl[CMSG_SPACE(sizeof(uint32_t))];

	if (!ifindex)
		die("if_nametoindex");
	dmabuf = make_udmabuf(size, &map);
	dbuf_sync(dmabuf, DMA_BUF_SYNC_START | DMA_BUF_SYNC_WRITE);
	for (size_t i = 0; i < size; i++)
		map[i] = PAT(i);
	dbuf_sync(dmabuf, DMA_BUF_SYNC_END | DMA_BUF_SYNC_WRITE);
	nl = nl_open(&family);
	err = bind_tx(nl, family, ifindex, dmabuf, &id);
	if (err) {
		fprintf(stderr, "bind-tx failed: %s\n", strerror(-err));
		return 2;
	}
	printf("bind-tx ok: id %u\n", id);
	s = sock_for(ip);
	if (setsockopt(s, SOL_SOCKET, SO_BINDTODEVICE, ifname, strlen(ifname) + 1))
		die("SO_BINDTODEVICE");
	if (setsockopt(s, SOL_SOCKET, SO_ZEROCOPY, &one, sizeof(one)))
		die("SO_ZEROCOPY");
	connect_sock(s, ip, port);
	while (pos < total) {
		uint64_t off = pos % (PERIOD * 4096UL);	/* buf[off] == PAT(pos) */
		uint64_t n = 65536;
		struct iovec iov;
		struct msghdr msg = { 0 };
		struct cmsghdr *cm;
		ssize_t w;

		if (n > total - pos)
			n = total - pos;
		iov.iov_base = (void *)off;
		iov.iov_len = n;
		msg.msg_iov = &iov;
		msg.msg_iovlen = 1;
		msg.msg_control = ctrl;
		msg.msg_controllen = sizeof(ctrl);
		cm = CMSG_FIRSTHDR(&msg);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_DEVMEM_DMABUF;
		cm->cmsg_len = CMSG_LEN(sizeof(uint32_t));
		*(uint32_t *)CMSG_DATA(cm) = id;
		w = sendmsg(s, &msg, MSG_ZEROCOPY);
		if (w < 0)
			die("sendmsg devmem");
		pos += w;
		/* reap completions */
		for (;;) {
			char c2[256];
			struct msghdr em = { .msg_control = c2, .msg_controllen = sizeof(c2) };

			if (recvmsg(s, &em, MSG_ERRQUEUE | MSG_DONTWAIT) < 0)
				break;
			for (cm = CMSG_FIRSTHDR(&em); cm; cm = CMSG_NXTHDR(&em, cm)) {
				struct sock_extended_err *ee = (void *)CMSG_DATA(cm);

				if (ee->ee_origin == SO_EE_ORIGIN_ZEROCOPY)
					done += ee->ee_data - ee->ee_info + 1;
			}
		}
	}
	/* wait for the rest of the completions */
	for (int t = 0; t < 50; t++) {
		struct pollfd p = { s, 0, 0 };
		char c2[256];
		struct msghdr em = { .msg_control = c2, .msg_controllen = sizeof(c2) };
		struct cmsghdr *cm;

		poll(&p, 1, 100);
		while (recvmsg(s, &em, MSG_ERRQUEUE | MSG_DONTWAIT) >= 0) {
			for (cm = CMSG_FIRSTHDR(&em); cm; cm = CMSG_NXTHDR(&em, cm)) {
				struct sock_extended_err *ee = (void *)CMSG_DATA(cm);

				if (ee->ee_origin == SO_EE_ORIGIN_ZEROCOPY)
					done += ee->ee_data - ee->ee_info + 1;
			}
			em.msg_controllen = sizeof(c2);
		}
	}
	printf("devmem-sent %llu bytes, %llu zerocopy completions\n",
	       (unsigned long long)pos, (unsigned long long)done);
	close(s);
	close(nl);
	return 0;
}

static int do_bindfail(const char *ifname, int queue)
{
	uint8_t *map;
	int dmabuf = make_udmabuf(2 << 20, &map);	/* one huge page */
	int family, nl = nl_open(&family);
	uint32_t id = 0;
	char q[16];
	int err;

	snprintf(q, sizeof(q), "%d", queue);
	err = bind_rx(nl, family, if_nametoindex(ifname), dmabuf, q, &id);

	printf("bind-rx result: %d (%s)\n", err, err ? strerror(-err) : "ok");
	return err ? 0 : 1;
}

static uint64_t size_arg(const char *s)
{
	char *end;
	uint64_t v = strtoull(s, &end, 0);

	switch (*end) {
	case 'G': case 'g': v <<= 10; /* fallthrough */
	case 'M': case 'm': v <<= 10; /* fallthrough */
	case 'K': case 'k': v <<= 10;
	}
	return v;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc >= 6 && !strcmp(argv[1], "rx"))
		return do_rx(argv[2], argv[3], atoi(argv[4]),
			     size_arg(argv[5]), argc > 6 ? argv[6] : NULL);
	if (argc == 5 && !strcmp(argv[1], "tx"))
		return do_tx(argv[2], atoi(argv[3]), size_arg(argv[4]));
	if (argc == 6 && !strcmp(argv[1], "txdm"))
		return do_txdm(argv[2], argv[3], atoi(argv[4]), size_arg(argv[5]));
	if (argc >= 4 && !strcmp(argv[1], "rings"))
		return do_rings(argv[2], atoi(argv[3]), argc > 4 ? atol(argv[4]) : -1);
	if (argc == 4 && !strcmp(argv[1], "bindfail"))
		return do_bindfail(argv[2], atoi(argv[3]));
	fprintf(stderr, "usage: see source\n");
	return 2;
}

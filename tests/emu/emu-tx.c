// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The emulated NIC's devmem TX: sendmsg(MSG_ZEROCOPY) with an
 * SCM_DEVMEM_DMABUF control message naming a TX binding sends the bytes
 * at those dma-buf offsets (each iov_base an offset) on the real socket,
 * read out of the dma-buf by the emulator, with the kernel's checks (an
 * unknown or RX binding: EINVAL; a route through another device: ENODEV;
 * an offset beyond the buffer: EFAULT).  As the kernel frees a zerocopy
 * send's buffers only once the peer has ACKed its bytes, each send's
 * completion is queued on the socket's error queue as a MSG_ZEROCOPY
 * notification once the real connection's ACKed byte count
 * (tcpi_bytes_acked) passes its end (consecutive ones merged into one
 * range, as the kernel merges them), read with recvmsg(MSG_ERRQUEUE) and
 * announced by poll() as POLLERR.
 */
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <linux/errqueue.h>
#include <linux/sockios.h>
#include <linux/tcp.h>

#include "emu.h"
#include "uapi.h"

#define MAX_FD 65536
#define MAX_NOTES 1024

struct txsock {
	uint64_t ino;
	int family;
	uint32_t next;			/* the zerocopy counter */
	uint32_t lo[MAX_NOTES], hi[MAX_NOTES];	/* completions to read */
	uint32_t head, n;
	uint32_t sc[MAX_NOTES];		/* sends not ACKed yet: counter, */
	uint64_t send_end[MAX_NOTES];	/* and stream offset of their end */
	uint32_t shead, sn;
	bool skewed;			/* DEVMEMTCP_EMU_TEST_ACK_SKEW applied */
};

static pthread_mutex_t tx_lock = PTHREAD_MUTEX_INITIALIZER;
static struct txsock *txs[MAX_FD];

static struct txsock *tx_get(int fd, bool create)
{
	struct txsock *t;
	struct stat st;

	if (fd < 0 || fd >= MAX_FD || fstat(fd, &st))
		return NULL;
	t = txs[fd];
	if (t && t->ino == (uint64_t)st.st_ino)
		return t;
	free(t);
	txs[fd] = NULL;
	if (!create)
		return NULL;
	t = calloc(1, sizeof(*t));
	if (t) {
		int dom = AF_INET;
		socklen_t len = sizeof(dom);

		getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &dom, &len);
		t->ino = st.st_ino;
		t->family = dom;
		txs[fd] = t;
	}
	return t;
}

void emu_tx_closed(int fd)
{
	if (fd < 0 || fd >= MAX_FD || !txs[fd])
		return;
	pthread_mutex_lock(&tx_lock);
	free(txs[fd]);
	txs[fd] = NULL;
	pthread_mutex_unlock(&tx_lock);
}

static uint64_t bytes_acked(int fd)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);

	memset(&ti, 0, sizeof(ti));
	if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) ||
	    len < offsetof(struct tcp_info, tcpi_bytes_acked) + sizeof(ti.tcpi_bytes_acked))
		return 0;
	return ti.tcpi_bytes_acked;
}

/*
 * The stream offset of the next byte written on fd: the bytes the peer
 * ACKed (tcpi_bytes_acked) plus the send queue (SIOCOUTQ, write_seq -
 * snd_una).  Two calls, and an ACK processed on another CPU between them
 * may be seen by one and not the other (bytes_acked already counting it,
 * snd_una not yet moved: the sum comes out as long as the ACK, megabytes,
 * and the send's completion would wait for bytes never sent).  Nothing
 * else writes on fd meanwhile, so the true sum does not change: read
 * until two readings agree; if ACKs keep landing, the smallest reading
 * (a completion a little early rather than never).
 * DEVMEMTCP_EMU_TEST_ACK_SKEW=N (a test hook): the first reading of each
 * socket's send queue comes out N bytes long.
 */
static uint64_t stream_end(int fd, struct txsock *t)
{
	const char *skew = getenv("DEVMEMTCP_EMU_TEST_ACK_SKEW");
	uint64_t prev = UINT64_MAX, low = UINT64_MAX;

	for (int i = 0; i < 100; i++) {
		int outq = 0;
		uint64_t now = bytes_acked(fd);

		emu_real.ioctl(fd, SIOCOUTQ, &outq);
		if (skew && t && !t->skewed) {
			t->skewed = true;
			outq += atoi(skew);
		}
		now += (uint64_t)(outq > 0 ? outq : 0);
		if (now == prev)
			return now;
		prev = now;
		low = now < low ? now : low;
	}
	return low;
}

static void note_add(struct txsock *t, uint32_t c)
{
	if (t->n && t->hi[(t->head + t->n - 1) % MAX_NOTES] + 1 == c) {
		t->hi[(t->head + t->n - 1) % MAX_NOTES] = c;
	} else if (t->n < MAX_NOTES) {
		t->lo[(t->head + t->n) % MAX_NOTES] = c;
		t->hi[(t->head + t->n) % MAX_NOTES] = c;
		t->n++;
	}
}

/* The sends whose bytes the peer ACKed are complete (tx_lock held). */
static void tx_refresh(int fd, struct txsock *t)
{
	uint64_t acked;

	if (!t->sn)
		return;
	acked = bytes_acked(fd);
	while (t->sn && t->send_end[t->shead] <= acked) {
		note_add(t, t->sc[t->shead]);
		t->shead = (t->shead + 1) % MAX_NOTES;
		t->sn--;
	}
}

bool emu_tx_pollerr(int fd)
{
	struct txsock *t;
	bool ready;

	if (fd < 0 || fd >= MAX_FD || !txs[fd])
		return false;
	pthread_mutex_lock(&tx_lock);
	t = txs[fd];
	if (t)
		tx_refresh(fd, t);
	ready = t && t->n;
	pthread_mutex_unlock(&tx_lock);
	return ready;
}

bool emu_tx_waiting(int fd)
{
	return fd >= 0 && fd < MAX_FD && txs[fd] && txs[fd]->sn;
}

/* The emulated NIC the socket's packets leave through (its bound device,
 * else the device holding its local address), -1 when none. */
static int out_nic(int fd)
{
	char dev[IFNAMSIZ + 1] = "";
	socklen_t len = sizeof(dev) - 1;
	struct sockaddr_storage self;
	socklen_t sl = sizeof(self);
	uint64_t netns = emu_fd_netns(fd);
	struct ifaddrs *ifa, *i;
	int nic = -1;

	if (!getsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, dev, &len) && len && dev[0])
		return emu_nic_by_name(netns, dev);
	if (getsockname(fd, (struct sockaddr *)&self, &sl) || getifaddrs(&ifa))
		return -1;
	for (i = ifa; i && nic < 0; i = i->ifa_next) {
		const uint8_t *a = NULL, *want = NULL;
		size_t alen = 0;

		if (!i->ifa_addr || i->ifa_addr->sa_family != self.ss_family) {
			/* a v4-mapped address of an AF_INET6 socket */
			if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET &&
			    self.ss_family == AF_INET6 &&
			    IN6_IS_ADDR_V4MAPPED(&((struct sockaddr_in6 *)&self)->sin6_addr)) {
				a = (const uint8_t *)&((struct sockaddr_in *)i->ifa_addr)->sin_addr;
				want = &((struct sockaddr_in6 *)&self)->sin6_addr.s6_addr[12];
				alen = 4;
			}
		} else if (self.ss_family == AF_INET) {
			a = (const uint8_t *)&((struct sockaddr_in *)i->ifa_addr)->sin_addr;
			want = (const uint8_t *)&((struct sockaddr_in *)&self)->sin_addr;
			alen = 4;
		} else {
			a = (const uint8_t *)&((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr;
			want = (const uint8_t *)&((struct sockaddr_in6 *)&self)->sin6_addr;
			alen = 16;
		}
		if (a && !memcmp(a, want, alen))
			nic = emu_nic_by_name(netns, i->ifa_name);
	}
	freeifaddrs(ifa);
	return nic;
}

static int tx_fail(ssize_t *ret, int err)
{
	errno = err;
	*ret = -1;
	return 1;
}

int emu_tx_sendmsg(int fd, const struct msghdr *msg, int flags, ssize_t *ret)
{
	struct cmsghdr *cm;
	struct emu_binding *b;
	struct emu_mem *m;
	struct txsock *t;
	uint32_t id = 0;
	bool found = false;
	int on = 0, err = 0, nic, proto = 0;
	socklen_t len = sizeof(on);
	uint64_t total = 0, start;
	uint8_t *bounce;
	struct iovec iov;
	struct msghdr mh = { 0 };
	ssize_t sent;

	for (cm = CMSG_FIRSTHDR((struct msghdr *)msg); cm;
	     cm = CMSG_NXTHDR((struct msghdr *)msg, cm))
		if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_DEVMEM_DMABUF) {
			found = true;
			break;
		}
	if (!found || !emu_on())
		return 0;
	if (getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &proto, &len) || proto != IPPROTO_TCP ||
	    cm->cmsg_len != CMSG_LEN(sizeof(uint32_t)))
		return tx_fail(ret, EINVAL);
	memcpy(&id, CMSG_DATA(cm), sizeof(id));
	len = sizeof(on);
	if (!(flags & MSG_ZEROCOPY) || getsockopt(fd, SOL_SOCKET, SO_ZEROCOPY, &on, &len) || !on)
		return tx_fail(ret, EINVAL);
	nic = out_nic(fd);
	emu_lock();
	b = emu_binding_get(id);
	if (!b || !b->tx || b->unbound) {
		emu_unlock();
		return tx_fail(ret, EINVAL);
	}
	if (b->nic != nic) {
		emu_unlock();
		return tx_fail(ret, ENODEV);
	}
	for (size_t i = 0; i < msg->msg_iovlen; i++) {
		uint64_t off = (uint64_t)(uintptr_t)msg->msg_iov[i].iov_base;

		if (off + msg->msg_iov[i].iov_len > b->size || off + msg->msg_iov[i].iov_len < off) {
			emu_unlock();
			return tx_fail(ret, EFAULT);
		}
		total += msg->msg_iov[i].iov_len;
	}
	m = emu_mem_get(b, &err);
	nic = b->nic;
	emu_unlock();
	if (!m)
		return tx_fail(ret, EOPNOTSUPP);
	bounce = malloc(total ? total : 1);
	if (!bounce)
		return tx_fail(ret, ENOBUFS);
	for (size_t i = 0, pos = 0; i < msg->msg_iovlen && !err; i++) {
		err = emu_mem_read(m, (uint64_t)(uintptr_t)msg->msg_iov[i].iov_base, bounce + pos,
				   msg->msg_iov[i].iov_len);
		pos += msg->msg_iov[i].iov_len;
	}
	if (err) {
		free(bounce);
		return tx_fail(ret, EIO);
	}
	/* the stream offset of this send's first byte: ACKed, plus what
	 * waits in the send queue */
	pthread_mutex_lock(&tx_lock);
	t = tx_get(fd, true);
	start = stream_end(fd, t);
	pthread_mutex_unlock(&tx_lock);
	iov = (struct iovec){ bounce, total };
	mh.msg_name = msg->msg_name;
	mh.msg_namelen = msg->msg_namelen;
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	sent = emu_real.sendmsg(fd, &mh, flags & ~MSG_ZEROCOPY);
	err = errno;
	free(bounce);
	if (sent > 0) {
		pthread_mutex_lock(&tx_lock);
		t = tx_get(fd, true);
		if (t && t->sn < MAX_NOTES) {
			t->sc[(t->shead + t->sn) % MAX_NOTES] = t->next++;
			t->send_end[(t->shead + t->sn) % MAX_NOTES] = start + (uint64_t)sent;
			t->sn++;
			tx_refresh(fd, t);
		} else if (t) {
			emu_unmodelled("more than %d devmem sends not ACKed on one socket", MAX_NOTES);
		}
		pthread_mutex_unlock(&tx_lock);
		emu_lock();
		emu_sh->nics[nic].txq[0].packets++;
		emu_sh->nics[nic].txq[0].bytes += (uint64_t)sent;
		emu_sh->st.tx_sends++;
		emu_sh->st.tx_bytes += (uint64_t)sent;
		emu_unlock();
	}
	errno = err;
	*ret = sent;
	return 1;
}

int emu_tx_errqueue(int fd, struct msghdr *msg, int flags, ssize_t *ret)
{
	struct {
		struct sock_extended_err ee;
		struct sockaddr_in6 offender;
	} e = { 0 };
	struct txsock *t;
	struct cmsghdr *cm;
	size_t elen;

	if (!emu_on() || fd < 0 || fd >= MAX_FD || !txs[fd])
		return 0;
	pthread_mutex_lock(&tx_lock);
	t = tx_get(fd, false);
	if (t)
		tx_refresh(fd, t);
	if (!t || !t->n) {
		pthread_mutex_unlock(&tx_lock);
		if (t) {
			/* nothing completed yet: the error queue is empty */
			errno = EAGAIN;
			*ret = -1;
			return 1;
		}
		return 0;
	}
	e.ee.ee_origin = SO_EE_ORIGIN_ZEROCOPY;
	e.ee.ee_info = t->lo[t->head];
	e.ee.ee_data = t->hi[t->head];
	elen = sizeof(e.ee) + (t->family == AF_INET6 ? sizeof(struct sockaddr_in6)
						     : sizeof(struct sockaddr_in));
	msg->msg_flags = MSG_ERRQUEUE;
	if (msg->msg_controllen < CMSG_SPACE(elen)) {
		msg->msg_flags |= MSG_CTRUNC;
		msg->msg_controllen = 0;
	} else {
		cm = CMSG_FIRSTHDR(msg);
		cm->cmsg_level = t->family == AF_INET6 ? SOL_IPV6 : SOL_IP;
		cm->cmsg_type = t->family == AF_INET6 ? IPV6_RECVERR : IP_RECVERR;
		cm->cmsg_len = CMSG_LEN(elen);
		memcpy(CMSG_DATA(cm), &e, elen);
		msg->msg_controllen = CMSG_SPACE(elen);
	}
	if (!(flags & MSG_PEEK)) {
		t->head = (t->head + 1) % MAX_NOTES;
		t->n--;
	}
	pthread_mutex_unlock(&tx_lock);
	*ret = 0;
	return 1;
}

// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The libc functions the emulated NIC interposes (LD_PRELOAD), besides
 * recvmsg, setsockopt and poll, which fakedevmem.c interposes for both the
 * synthetic fragments of the Python tests and the emulation.  With
 * $DEVMEMTCP_EMU unset each one is the libc function and nothing else.
 */
/* open and open64 (fopen, fstatfs) are both defined here: without the
 * build's 64-bit file offsets the headers do not map one to the other. */
#undef _FILE_OFFSET_BITS
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <unistd.h>
#include <linux/netlink.h>

#include "emu.h"
#include "uapi.h"

#define REQ_MAX (64u << 10)

static void atfork_child(void)
{
	if (emu_sh)
		emu_forget_process();
}

__attribute__((constructor)) static void emu_hooks_init(void)
{
	emu_real_init();
	pthread_atfork(NULL, NULL, atfork_child);
}

/* Forget what the emulator knew of fd, which is closing or replaced. */
static void forget_fd(int fd)
{
	if (!emu_sh)
		return;
	emu_nl_close(fd);
	emu_sock_closed(fd);
	emu_tx_closed(fd);
	emu_fd_closed(fd);
}

int close(int fd)
{
	emu_real_init();
	forget_fd(fd);
	return emu_real.close(fd);
}

int dup2(int old, int new)
{
	emu_real_init();
	if (old != new)
		forget_fd(new);
	return emu_real.dup2(old, new);
}

int dup3(int old, int new, int flags)
{
	emu_real_init();
	if (old != new)
		forget_fd(new);
	return emu_real.dup3(old, new, flags);
}

ssize_t sendto(int fd, const void *buf, size_t len, int flags,
	       const struct sockaddr *dest, socklen_t alen)
{
	ssize_t ret;

	emu_real_init();
	if (dest && alen >= sizeof(sa_family_t) && dest->sa_family == AF_NETLINK &&
	    emu_on() && emu_nl_send(fd, buf, len, &ret))
		return ret;
	return emu_real.sendto(fd, buf, len, flags, dest, alen);
}

ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
	ssize_t ret;

	emu_real_init();
	if (!emu_on() || !msg)
		return emu_real.sendmsg(fd, msg, flags);
	if (msg->msg_name && msg->msg_namelen >= sizeof(sa_family_t) &&
	    ((struct sockaddr *)msg->msg_name)->sa_family == AF_NETLINK) {
		static __thread char req[REQ_MAX];
		size_t len = 0;

		for (size_t i = 0; i < msg->msg_iovlen; i++) {
			if (len + msg->msg_iov[i].iov_len > sizeof(req))
				return emu_real.sendmsg(fd, msg, flags);
			memcpy(req + len, msg->msg_iov[i].iov_base, msg->msg_iov[i].iov_len);
			len += msg->msg_iov[i].iov_len;
		}
		if (emu_nl_send(fd, req, len, &ret))
			return ret;
	} else if (msg->msg_controllen && emu_tx_sendmsg(fd, msg, flags, &ret)) {
		return ret;
	}
	return emu_real.sendmsg(fd, msg, flags);
}

ssize_t recvfrom(int fd, void *buf, size_t len, int flags, struct sockaddr *src,
		 socklen_t *alen)
{
	emu_real_init();
	if (emu_sh && emu_nl_pending(fd)) {
		struct iovec iov = { buf, len };
		struct msghdr m = { .msg_name = src, .msg_namelen = alen ? *alen : 0,
				    .msg_iov = &iov, .msg_iovlen = 1 };
		ssize_t ret;

		if (emu_nl_recv(fd, &m, flags, &ret)) {
			if (alen)
				*alen = m.msg_namelen;
			return ret;
		}
	}
	return emu_real.recvfrom(fd, buf, len, flags, src, alen);
}

ssize_t recv(int fd, void *buf, size_t len, int flags)
{
	emu_real_init();
	if (emu_sh && emu_nl_pending(fd))
		return recvfrom(fd, buf, len, flags, NULL, NULL);
	return emu_real.recv(fd, buf, len, flags);
}

int ioctl(int fd, unsigned long req, ...)
{
	va_list ap;
	void *arg;
	int ret;

	va_start(ap, req);
	arg = va_arg(ap, void *);
	va_end(ap);
	emu_real_init();
	if (emu_on() && emu_ioctl(fd, req, arg, &ret))
		return ret;
	return emu_real.ioctl(fd, req, arg);
}

static int open_common(int (*real)(const char *, int, ...), const char *path, int flags,
		       va_list ap)
{
	mode_t mode = 0;
	int ret;

	if (flags & (O_CREAT | __O_TMPFILE))
		mode = (mode_t)va_arg(ap, int);
	if (path && !strcmp(path, "/dev/udmabuf") && emu_on() &&
	    emu_open_udmabuf(path, flags, &ret))
		return ret;
	return real(path, flags, mode);
}

int open(const char *path, int flags, ...)
{
	va_list ap;
	int ret;

	emu_real_init();
	va_start(ap, flags);
	ret = open_common(emu_real.open, path, flags, ap);
	va_end(ap);
	return ret;
}

int open64(const char *path, int flags, ...)
{
	va_list ap;
	int ret;

	emu_real_init();
	va_start(ap, flags);
	ret = open_common(emu_real.open64, path, flags, ap);
	va_end(ap);
	return ret;
}

FILE *fopen(const char *path, const char *mode)
{
	bool handled;
	void *f;

	emu_real_init();
	if (path && (!strncmp(path, "/sys/module/", 12) || !strncmp(path, "/sys/kernel/debug/", 18)) &&
	    emu_on()) {
		f = emu_fopen(path, mode, &handled);
		if (handled)
			return f;
	}
	return emu_real.fopen(path, mode);
}

FILE *fopen64(const char *path, const char *mode)
{
	bool handled;
	void *f;

	emu_real_init();
	if (path && (!strncmp(path, "/sys/module/", 12) || !strncmp(path, "/sys/kernel/debug/", 18)) &&
	    emu_on()) {
		f = emu_fopen(path, mode, &handled);
		if (handled)
			return f;
	}
	return emu_real.fopen64(path, mode);
}

/* Readiness the emulator knows of and the kernel does not: buffers
 * received and not read, netlink answers, zerocopy completions. */
int emu_poll_ready(struct pollfd *fds, nfds_t n)
{
	int ready = 0;

	if (!emu_sh)
		return 0;
	for (nfds_t i = 0; i < n; i++) {
		short ev = 0;

		if ((fds[i].events & POLLIN) &&
		    (emu_rx_pending(fds[i].fd) || emu_nl_pending(fds[i].fd)))
			ev |= POLLIN;
		if (emu_tx_pollerr(fds[i].fd))
			ev |= POLLERR;
		if (ev) {
			fds[i].revents |= ev;
			ready++;
		}
	}
	return ready;
}

int emu_poll_wait(struct pollfd *fds, nfds_t n, int timeout)
{
	uint64_t end = timeout > 0 ? emu_now_ns() + (uint64_t)timeout * 1000000ull : 0;
	bool waiting = false;
	int r;

	for (nfds_t i = 0; emu_sh && i < n && !waiting; i++)
		waiting = emu_tx_waiting(fds[i].fd);
	if (!waiting)
		return emu_real.poll(fds, n, timeout);
	for (;;) {
		int slice = 2;

		if (timeout >= 0) {
			uint64_t now = emu_now_ns();

			if (timeout == 0 || now >= end)
				slice = 0;
			else if (end - now < 2000000ull)
				slice = (int)((end - now + 999999) / 1000000);
		}
		r = emu_real.poll(fds, n, slice);
		if (r)
			return r;
		r = emu_poll_ready(fds, n);
		if (r || slice == 0)
			return r;
	}
}

int ppoll(struct pollfd *fds, nfds_t n, const struct timespec *ts, const sigset_t *mask)
{
	int ready;

	emu_real_init();
	for (nfds_t i = 0; i < n; i++)
		fds[i].revents = 0;
	ready = emu_poll_ready(fds, n);
	if (ready) {
		struct pollfd tmp[64];

		/* whatever the kernel has too, without waiting */
		if (n <= 64) {
			memcpy(tmp, fds, n * sizeof(*tmp));
			if (emu_real.poll(tmp, n, 0) > 0)
				for (nfds_t i = 0; i < n; i++) {
					if (tmp[i].revents && !fds[i].revents)
						ready++;
					fds[i].revents |= tmp[i].revents;
				}
		}
		return ready;
	}
	return emu_real.ppoll(fds, n, ts, mask);
}

static int fstatfs_fix(int fd, struct statfs *st, int ret)
{
	if (!ret && emu_sh && emu_is_dmabuf_fd(fd))
		st->f_type = DMT_DMA_BUF_MAGIC;
	return ret;
}

int fstatfs(int fd, struct statfs *st)
{
	emu_real_init();
	return fstatfs_fix(fd, st, emu_real.fstatfs(fd, st));
}

int fstatfs64(int fd, struct statfs64 *st)
{
	int ret;

	emu_real_init();
	ret = emu_real.fstatfs64(fd, st);
	if (!ret && emu_sh && emu_is_dmabuf_fd(fd))
		st->f_type = DMT_DMA_BUF_MAGIC;
	return ret;
}

/* io_uring zero-copy receive on an emulated NIC is not modelled.  Like
 * glibc's syscall(), this takes six arguments whatever the caller passed:
 * the last ones are whatever lies in their registers and stack slot, which
 * is no fault, though AddressSanitizer would call the read one. */
__attribute__((no_sanitize_address)) long syscall(long number, ...)
{
	long a[6];
	va_list ap;

	va_start(ap, number);
	for (int i = 0; i < 6; i++)
		a[i] = va_arg(ap, long);
	va_end(ap);
	emu_real_init();
	if (number == __NR_io_uring_register && a[1] == DMT_IORING_REGISTER_ZCRX_IFQ &&
	    a[2] && emu_on()) {
		uint32_t ifindex;

		memcpy(&ifindex, (const void *)a[2], sizeof(ifindex));
		if (emu_nic_by_index(emu_thread_netns(), (int)ifindex) >= 0) {
			emu_unmodelled("io_uring zero-copy receive (IORING_REGISTER_ZCRX_IFQ) on ifindex %u",
				       ifindex);
			errno = EOPNOTSUPP;
			return -1;
		}
	}
	return emu_real.syscall(number, a[0], a[1], a[2], a[3], a[4], a[5]);
}

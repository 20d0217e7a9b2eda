/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * Shared by the host suite: a private network and mount namespace with a
 * veth pair va/vb (va: 4 RX and 3 TX queues) and sysfs of that namespace,
 * and an open-fd counter for leak checks.  Nothing outside is touched.
 */
#ifndef DEVMEMTCP_HOSTLIB_H
#define DEVMEMTCP_HOSTLIB_H

#include <dirent.h>
#include <errno.h>
#include <net/if.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/mount.h>

static inline int host_count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n - 1; /* the DIR's own fd */
}

/* Enter the namespaces and create va/vb; the ifindex of va, or -1. */
static inline int host_enter_netns(void)
{
	if (unshare(CLONE_NEWNET | CLONE_NEWNS))
		return -1;
	/* a propagation change: the kernel ignores source and type, but
	 * valgrind (3.19 here) checks type as a string: name one */
	if (mount("none", "/", "none", MS_REC | MS_PRIVATE, NULL))
		return -1;
	if (umount2("/sys", MNT_DETACH) && errno != EINVAL)
		return -1;
	if (mount("sysfs", "/sys", "sysfs", 0, NULL))
		return -1;
	if (system("ip link set lo up && "
		   "ip link add va numrxqueues 4 numtxqueues 3 type veth peer name vb && "
		   "ip link set va up && ip link set vb up"))
		return -1;
	return (int)if_nametoindex("va") ?: -1;
}

#endif

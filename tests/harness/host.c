// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/* The harness: the host suite's namespace; see harness.h. */
#include <errno.h>
#include <net/if.h>
#include <sched.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

#include "harness.h"

static int enter_netns(void)
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
	errno = 0;
	if (t_run("ip link set lo up && "
		  "ip link add va numrxqueues 4 numtxqueues 3 type veth peer name vb && "
		  "ip link set va up && ip link set vb up"))
		return -1;
	return (int)if_nametoindex("va") ?: -1;
}

int host_netns(int *va)
{
	int ifindex;

	if (geteuid() != 0)
		T_SKIP("the host suite needs root (network namespaces, CAP_NET_ADMIN)");
	ifindex = enter_netns();
	T_CHECK(ifindex >= 0, "cannot create a network namespace with a veth pair: %s",
		errno ? strerror(errno) : "ip(8) failed");
	if (va)
		*va = ifindex;
	return 0;
}

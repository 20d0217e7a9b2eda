// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * What the devmemtcp-broker program calls besides the public API
 * (broker.h, "serve.c"): thin wrappers over the NIC layer (an open with
 * another process as the owner, the handle's binding handed over, the
 * run directory's names, the numbering of handles), the process facts
 * and UDMABUF_CREATE.  With these the program includes only devmemtcp.h
 * and broker.h; the layers below stay private to the library.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include <libmnl/libmnl.h>

#include "broker.h"
#include "core/uapi.h"
#include "nic/netdev.h"
#include "nic/nic.h"
#include "nl/nl.h"

int dmt_serve_nic_open(struct devmemtcp_ctx *ctx, const char *ifname,
		       const struct devmemtcp_nic_opts *opts, pid_t pid,
		       uint64_t start, struct devmemtcp_nic **nic)
{
	return dmt_nic_open_as(ctx, ifname, opts, pid, start, nic);
}

struct devmemtcp_binding *dmt_serve_take_binding(struct devmemtcp_nic *nic)
{
	return dmt_nic_take_binding(nic);
}

int dmt_serve_hand_over(struct devmemtcp_binding *b, int *fd, uint32_t *id)
{
	int ret = 0;

	*fd = fcntl(mnl_socket_get_fd(b->nl->sock), F_DUPFD_CLOEXEC, 3);
	if (*fd < 0)
		ret = -errno;
	*id = b->id;
	devmemtcp_binding_close(b);
	return ret;
}

void dmt_serve_forget(struct devmemtcp_nic *nic)
{
	dmt_nic_forget(nic);
}

void dmt_serve_handle_base(unsigned int base)
{
	dmt_nic_handle_base(base);
}

int dmt_serve_proc_start(pid_t pid, uint64_t *start, bool *zombie)
{
	return dmt_proc_start(pid, start, zombie);
}

const char *dmt_serve_run_dir(void)
{
	return dmt_run_dir(NULL);
}

int dmt_serve_run_dir_names(char ***names, size_t *n)
{
	struct dmt_err err = { 0 };
	struct dmt_rundir rd;
	int ret;

	*names = NULL;
	*n = 0;
	ret = dmt_rundir_open(&rd, dmt_run_dir(NULL), false, &err);
	if (ret < 0)
		return ret;
	ret = dmt_rundir_list(&rd, "", names, n, &err);
	dmt_rundir_close(&rd);
	return ret;
}

int dmt_serve_udmabuf(int dev, int memfd, uint64_t size)
{
	struct dmt_udmabuf_create c = { .memfd = (uint32_t)memfd,
					.flags = DMT_UDMABUF_FLAGS_CLOEXEC, .size = size };

	return ioctl(dev, DMT_UDMABUF_CREATE, &c);
}

const char *dmt_serve_hook_env(const char *name)
{
	return dmt_hook_env(name);
}

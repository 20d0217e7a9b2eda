/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * Private: the DRM buffer provider (lib/buf/, beside buf.h's other
 * providers).  It owns finding a DRM node that can allocate, the dumb
 * buffer made there or the caller's GEM handle, its PRIME export and CPU
 * mapping, and the list of DRM nodes that probe reports.  Every call into
 * libdrm goes through struct dmt_drm_ops, so that unit tests can stand in
 * for a driver; without libdrm at build time there are no real ops and the
 * provider says how to get them.  It calls only buf.h's provider API.
 * (Not named drm.h: libdrm's xf86drm.h includes <drm.h>, and lib/ is on
 * the include path.)
 */
#ifndef DEVMEMTCP_DRM_PROVIDER_H
#define DEVMEMTCP_DRM_PROVIDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"

/* Paths of found nodes (/dev/dri/renderD128); opts.drm_path may be longer. */
#define DMT_DRM_PATH_MAX 128
#define DMT_DRM_NAME_MAX 32

struct dmt_drm_ops {
	/* Primary nodes of the devices libdrm enumerates (drmGetDevices2),
	 * in its order, into out[0..max): how many, 0 when none or unknown. */
	int (*devices)(char (*out)[DMT_DRM_PATH_MAX], int max);
	/* The driver's name (DRM_IOCTL_VERSION); negative errno, -ENOTTY for
	 * a file that is not a DRM node. */
	int (*driver)(int fd, char *name, size_t len);
	bool (*is_render)(int fd);
	/* Path of the primary node of fd's device. */
	int (*primary)(int fd, char *path, size_t len);
	/* A dumb buffer of size bytes (a multiple of 4096, at most
	 * DMT_DRM_DUMB_MAX): its GEM handle. */
	int (*create_dumb)(int fd, uint64_t size, uint32_t *handle);
	void (*destroy_dumb)(int fd, uint32_t handle);
	/* PRIME export with DRM_CLOEXEC | DRM_RDWR: the dma-buf fd. */
	int (*export)(int fd, uint32_t handle, int *prime_fd);
};

/* The kernel computes a dumb buffer's size in 32 bits. */
#define DMT_DRM_DUMB_MAX 0xfffff000ull

/* Unit tests: every DRM call goes to these ops instead (NULL: libdrm). */
extern const struct dmt_drm_ops *dmt_drm_ops_override;

/*
 * The DRM nodes of the system (card* and then renderD* under /dev/dri,
 * each by number) with their drivers, the first max into nodes: how many
 * there are, or -1 without libdrm.
 */
int dmt_drm_probe(struct devmemtcp_probe_drm *nodes, int max);

#endif

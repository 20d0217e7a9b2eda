// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The few CUDA driver calls the extension makes itself: copying linear
 * bytes (a steering miss) into a gather destination, and waiting for a
 * device when a DLPack consumer named no stream.  libcuda is loaded at run
 * time, like the library does, so the module imports without it.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "dmt.h"

typedef int CUresult;
typedef void *CUcontext;
typedef void *CUstream;

static struct {
	void *h;
	CUresult (*init)(unsigned int);
	CUresult (*device_get)(int *, int);
	CUresult (*retain)(CUcontext *, int);
	CUresult (*push)(CUcontext);
	CUresult (*pop)(CUcontext *);
	CUresult (*htod)(uint64_t, const void *, size_t, CUstream);
	CUresult (*sync)(void);
	CUcontext ctx[MAX_GPUS];
	pthread_mutex_t lock;
	bool dead;	/* loaded by a parent: CUDA does not survive fork() */
} cu = { .lock = PTHREAD_MUTEX_INITIALIZER };

atomic_uint dmtpy_fork_gen;

/* In a forked child: a driver the parent loaded is not usable here (its
 * contexts are the parent's), so the extension calls it no more; the
 * lock may have been held by a thread that did not come along. */
static void fork_child(void)
{
	atomic_fetch_add_explicit(&dmtpy_fork_gen, 1, memory_order_relaxed);
	pthread_mutex_init(&cu.lock, NULL);
	if (cu.h)
		cu.dead = true;
}

__attribute__((constructor)) static void fork_init(void)
{
	pthread_atfork(NULL, NULL, fork_child);
}

static int load(void)
{
	/* Test builds may load a fake driver; installed builds never take a
	 * library path from the environment. */
	const char *name = DMT_PY_TEST_HOOKS ? secure_getenv("DEVMEMTCP_LIBCUDA")
					     : NULL;

	if (cu.h)
		return 0;
	cu.h = dlopen(name && *name ? name : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!cu.h)
		return -ENOENT;
	*(void **)&cu.init = dlsym(cu.h, "cuInit");
	*(void **)&cu.device_get = dlsym(cu.h, "cuDeviceGet");
	*(void **)&cu.retain = dlsym(cu.h, "cuDevicePrimaryCtxRetain");
	*(void **)&cu.push = dlsym(cu.h, "cuCtxPushCurrent_v2");
	*(void **)&cu.pop = dlsym(cu.h, "cuCtxPopCurrent_v2");
	*(void **)&cu.htod = dlsym(cu.h, "cuMemcpyHtoDAsync_v2");
	*(void **)&cu.sync = dlsym(cu.h, "cuCtxSynchronize");
	if (!cu.init || !cu.device_get || !cu.retain || !cu.push || !cu.pop ||
	    !cu.htod || !cu.sync || cu.init(0)) {
		dlclose(cu.h);
		cu.h = NULL;
		return -ENOENT;
	}
	return 0;
}

/* Make device's primary context current (retained once, for good). */
static int enter(int device)
{
	int ret = 0, dev;

	if (device < 0 || device >= MAX_GPUS)
		return -EINVAL;
	if (cu.dead)
		return -EBADFD;
	pthread_mutex_lock(&cu.lock);
	ret = load();
	if (!ret && !cu.ctx[device] &&
	    (cu.device_get(&dev, device) || cu.retain(&cu.ctx[device], dev)))
		ret = -ENODEV;
	pthread_mutex_unlock(&cu.lock);
	if (!ret && cu.push(cu.ctx[device]))
		ret = -EIO;
	return ret;
}

static void leave(void)
{
	CUcontext c;

	cu.pop(&c);
}

int dmtpy_cuda_htod(int device, uint64_t dst, const void *src, size_t len,
		  void *stream)
{
	int ret = enter(device);

	if (ret)
		return ret;
	/* pageable source: the call returns once the bytes are staged */
	ret = cu.htod(dst, src, len, stream) ? -EIO : 0;
	leave();
	return ret;
}

int dmtpy_cuda_sync(int device)
{
	int ret = enter(device);

	if (ret)
		return ret;
	ret = cu.sync() ? -EIO : 0;
	leave();
	return ret;
}

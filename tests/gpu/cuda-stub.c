// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * A libcuda.so.1 far too old for the library (tests only; test-gpu-driver
 * points $DEVMEMTCP_LIBCUDA at it): it has cuInit and nothing else the
 * library needs.  Built with DMT_STUB_LOADER (libcudastub-loader.so): every
 * entry point examples/dataloader.c looks up but cuMemAlloc_v2, each doing
 * nothing (dataloader-cuda.sh).
 */
#define EXPORT __attribute__((visibility("default")))

EXPORT int cuInit(unsigned int flags);

EXPORT int cuInit(unsigned int flags)
{
	(void)flags;
	return 0;
}

#ifdef DMT_STUB_LOADER
#include <stddef.h>
#include <stdint.h>

EXPORT int cuDeviceGet(int *dev, int ordinal);
EXPORT int cuDevicePrimaryCtxRetain(void **ctx, int dev);
EXPORT int cuCtxSetCurrent(void *ctx);
EXPORT int cuMemFree_v2(uint64_t p);
EXPORT int cuMemcpyHtoD_v2(uint64_t d, const void *s, size_t n);
EXPORT int cuMemcpyDtoH_v2(void *d, uint64_t s, size_t n);
EXPORT int cuStreamCreate(void **s, unsigned int flags);
EXPORT int cuStreamSynchronize(void *s);

static int object;

EXPORT int cuDeviceGet(int *dev, int ordinal)
{
	*dev = ordinal;
	return 0;
}

EXPORT int cuDevicePrimaryCtxRetain(void **ctx, int dev)
{
	(void)dev;
	*ctx = &object;
	return 0;
}

EXPORT int cuCtxSetCurrent(void *ctx)
{
	(void)ctx;
	return 0;
}

EXPORT int cuMemFree_v2(uint64_t p)
{
	(void)p;
	return 0;
}

EXPORT int cuMemcpyHtoD_v2(uint64_t d, const void *s, size_t n)
{
	(void)d, (void)s, (void)n;
	return 0;
}

EXPORT int cuMemcpyDtoH_v2(void *d, uint64_t s, size_t n)
{
	(void)d, (void)s, (void)n;
	return 0;
}

EXPORT int cuStreamCreate(void **s, unsigned int flags)
{
	(void)flags;
	*s = &object;
	return 0;
}

EXPORT int cuStreamSynchronize(void *s)
{
	(void)s;
	return 0;
}
#endif

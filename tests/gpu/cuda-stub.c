// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * A libcuda.so.1 far too old for the library (tests only; test-gpu-driver
 * points $DEVMEMTCP_LIBCUDA at it): it has cuInit and nothing else the
 * library needs.
 */
#define EXPORT __attribute__((visibility("default")))

EXPORT int cuInit(unsigned int flags);

EXPORT int cuInit(unsigned int flags)
{
	(void)flags;
	return 0;
}

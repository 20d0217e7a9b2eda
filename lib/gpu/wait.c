// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The gpu layer: waiting on the CPU for a word the GPU writes (gpu.h, struct
 * dmt_wait), for the fences (gpu_fence.c) and the persistent kernel
 * (gpu_persist.c).  It calls nothing of the library.
 */
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "gpu.h"

uint64_t dmt_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#else
	__asm__ __volatile__("" ::: "memory");
#endif
}

bool dmt_wait_step(struct dmt_wait *w)
{
	uint64_t now = dmt_mono_ns();

	if (!w->t0) {
		w->t0 = now;
		w->step = DMT_WAIT_SLEEP_MIN_NS;
	}
	if (now - w->t0 < DMT_WAIT_SPIN_NS) {
		for (int i = 0; i < 32; i++)
			cpu_relax();
		return false;
	}
	nanosleep(&(struct timespec){ 0, (long)w->step }, NULL);
	if (w->step < DMT_WAIT_SLEEP_MAX_NS)
		w->step *= 2;
	w->sleeps++;
	return true;
}

/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * The fake CUDA driver: a libcuda.so.1 for every test that needs one on a
 * machine without an NVIDIA GPU (tests only, never installed).  One
 * source, built once per build as tests/lib/fakecuda/libfakecuda.so: the
 * library and the Python binding load it through $DEVMEMTCP_LIBCUDA (test
 * builds); the NCCL plugin's dlopen("libcuda.so.1") finds a link of that
 * name to it on LD_LIBRARY_PATH, as the emulated NIC's GPU steps do.  Its
 * users: the gpu-fake tests and gpu-driver
 * (tests/gpu), the emu suite, the NCCL plugin's tests (nccl/tests), the
 * Python suite's stream and race tests, bench/python-pipeline.py --fake and
 * bench/gather/gpu-run.sh with GPU_RUN_FAKE=1.
 *
 * The device: one GPU (ordinal 0), compute capability 9 with 4 SMs, whose
 * memory is host memory: a device address is a host address, and mapped
 * pinned memory's device address its host address (unified addressing).
 * Streams run their operations in order; events, stream memory operations
 * and CUDA graphs of one kernel node behave as the driver documents them.
 * The gather kernels run as C transcriptions of lib/gpu/gather.cu
 * (kernels.c): a launch runs every warp of its grid (so a grid too small for
 * its descriptors leaves bytes out), the persistent kernel one thread per
 * block with the same go/done/stop protocol.  It checks what a GPU would
 * fault on (a block of more than 256 threads, a destination table larger
 * than the shared memory given, an unknown kernel) and, as the driver,
 * refuses stream work, pinned memory and copies without a context current
 * on the calling thread (CUDA_ERROR_INVALID_CONTEXT).  Pinned memory is not
 * zeroed (0x5a bytes), as the driver's is not.
 *
 * Streams are the handles it made (cuStreamCreate), NULL and
 * CU_STREAM_LEGACY (the one legacy default stream), CU_STREAM_PER_THREAD
 * (the calling thread's own) and any other value, a non-blocking stream of
 * its own from the first call that names it (the Python tests name streams
 * by number).  No stream waits for another by itself: an event on the
 * legacy stream covers none of the others' work.
 *
 * Read once, when the driver is loaded (what its user is):
 *
 * DEVMEMTCP_FAKE_CUDA_STREAMS=async (the default; the GPU tests, the emu
 *   suite, the benchmarks): each stream is a thread that runs its
 *   operations as they come, so work is asynchronous as on a GPU.
 * DEVMEMTCP_FAKE_CUDA_STREAMS=manual (the Python tests): nothing runs by
 *   itself.  An operation runs on the calling thread as it is queued,
 *   unless work ahead of it on its stream is held: a long kernel the test
 *   queued (fakecuda_busy) until the test ends it (fakecuda_finish), which
 *   runs what waited behind it.  A host wait (cuStreamSynchronize,
 *   cuCtxSynchronize, cuEventSynchronize; cuMemFreeHost's) cannot block on
 *   a test that runs on the same thread: it ends the held work it waits
 *   for, as if it had waited.  Work moves only when the driver is called:
 *   a host that polls a word a stream writes (the library's stream memory
 *   fences) waits for ever, so the Python tests run the library with event
 *   fences (DEVMEMTCP_GPU_FENCE_EVENTS=1).  The persistent kernel needs
 *   async streams.
 * DEVMEMTCP_FAKE_CUDA_NCCL=1 (the NCCL plugin's tests; implies manual): the
 *   state the plugin runs in under NCCL.  The application has work on the
 *   legacy default stream that waits for the collective, and the
 *   collective's kernel waits for the bytes the plugin copies: work on the
 *   legacy default stream, the per-thread one or a blocking stream (which
 *   synchronises with it) would never start, so such a call fails at once
 *   with CUDA_ERROR_ILLEGAL_STATE and a message instead of hanging.  A
 *   stream's work runs only when the host waits for it (a copy lands at
 *   cuStreamSynchronize); every address is memory of device 0; mapped
 *   pinned memory's device address is its host address plus 2^44, so that
 *   a test tells which of the two a pointer holds.
 * DEVMEMTCP_FAKE_CUDA_NOCOPY=1 (bench/python-pipeline.py --fake): the
 *   gather kernels copy nothing (their fences still signal), so that a
 *   benchmark of the binding's cost per call is not the CPU's copying.
 *
 * Read at each call (tests set and unset them):
 *
 * DEVMEMTCP_FAKE_CUDA_FAIL=NAME=CODE: entry point NAME returns CODE.
 * DEVMEMTCP_FAKE_CUDA_NO_MEMOPS=1: a device without 64-bit stream memory
 *   operations.
 * DEVMEMTCP_FAKE_CUDA_CAPTURING=1: every stream is being captured into a
 *   graph.
 * DEVMEMTCP_FAKE_CUDA_HOSTALLOC_SYNC=1: cuMemHostAlloc waits for the whole
 *   device (drivers that do).
 * DEVMEMTCP_FAKE_CUDA_PCI_BUS_ID=ADDR: the GPU's PCI address (a device of
 *   a synthetic sysfs tree, DEVMEMTCP_TEST_SYSFS); without it none.
 *
 * What the tests call besides the driver (ctypes, dlsym): fakecuda_busy,
 * fakecuda_finish, fakecuda_idle (a stream's held work),
 * fakecuda_calls, fakecuda_call (the log of every launch, copy, event
 * record, stream memory operation and host wait: kind, stream handle as
 * given, calling thread) and fakecuda_modules (modules loaded).
 *
 * What it cannot tell: the speed of anything, and whether the real kernels
 * do what their transcriptions here do.
 *
 * This header is the three files' own: device.c (settings, errors, the
 * device, contexts, memory), streams.c (streams, events, copies, stream
 * memory operations, the log, the test entry points) and kernels.c
 * (modules, the kernels, launches, graphs).
 */
#ifndef DEVMEMTCP_FAKECUDA_H
#define DEVMEMTCP_FAKECUDA_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "cuda.h"
#include "gpu.h"

#define FK_EXPORT __attribute__((visibility("default")))
#define FK_ERR_INVALID_CONTEXT 201
#define FK_ERR_ILLEGAL_STATE 401
#define FK_ERR_NOT_FOUND 500
#define FK_ERR_LAUNCH 719
/* NCCL mode: a mapped pinned allocation's device address is its host
 * address plus this */
#define FK_DEVMAP_OFF (1ull << 44)

/* The settings read when the driver is loaded (the top of this file). */
struct fk_settings {
	bool manual;		/* DEVMEMTCP_FAKE_CUDA_STREAMS=manual */
	bool nccl;		/* DEVMEMTCP_FAKE_CUDA_NCCL=1 */
	bool nocopy;		/* DEVMEMTCP_FAKE_CUDA_NOCOPY=1 */
};
extern struct fk_settings fk;

/* The kinds of the call log (python/tests/cudastreams reads them). */
enum fk_call_kind {
	FK_CALL_LAUNCH = 1,
	FK_CALL_RECORD,
	FK_CALL_COPY,
	FK_CALL_CTX_SYNC,
	FK_CALL_STREAM_SYNC,
	FK_CALL_EVENT_SYNC,
	FK_CALL_MEMOP,
};

/* device.c */
CUresult fk_injected(const char *fn);
bool fk_no_context(void);
void fk_die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
void *fk_mem(uint64_t addr);
void fk_pause_us(uint64_t us);
double fk_now(void);

/* streams.c; a kernel launch is kernels.c's, queued on a stream */
struct fk_launch;
CUresult fk_queue_launch(const char *fn, CUstream st, struct fk_launch *l);
void fk_device_sync(void);
/* kernels.c: run the launch (on its stream's turn), then free it */
void fk_run_kernel(struct fk_launch *l);

/* Fail entry point fn when a test asks it to (DEVMEMTCP_FAKE_CUDA_FAIL). */
#define FK_INJECT()                                                            \
	do {                                                                   \
		CUresult r_ = fk_injected(__func__);                           \
		if (r_)                                                        \
			return r_;                                             \
	} while (0)

#endif

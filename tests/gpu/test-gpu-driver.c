// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The GPU layer's errors against the fake CUDA driver (tests/lib/fakecuda)
 * told to fail
 * ($DEVMEMTCP_FAKE_CUDA_FAIL and friends) and against a driver that lacks
 * entry points (cuda-stub.c): the errno and message of each error the
 * devmemtcp_gpu_* pages document that no GPU gives on purpose.  Suite unit:
 * runs anywhere ($DEVMEMTCP_LIBCUDA is the fake, $DEVMEMTCP_TEST_CUDA_STUB
 * the stub).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "devmemtcp.h"
#include "gpu.h"
#include "harness.h"

static struct devmemtcp_ctx *ctx;
static struct devmemtcp_gpu *gpu;
static char src[8192], dst[8192];

static int setup(void **state)
{
	DEVMEMTCP_OPTS(ctx_opts, o, .log_fn = t_quiet);

	(void)state;
	if (devmemtcp_ctx_new(&o, &ctx))
		return -1;
	return devmemtcp_gpu_new(ctx, NULL, &gpu);
}

static int teardown(void **state)
{
	(void)state;
	devmemtcp_gpu_free(gpu);
	devmemtcp_ctx_free(ctx);
	return 0;
}

/* The driver fails entry point fn with CUDA error code until driver_works(). */
static void driver_fails(const char *fn, int code)
{
	char spec[64];

	snprintf(spec, sizeof(spec), "%s=%d", fn, code);
	setenv("DEVMEMTCP_FAKE_CUDA_FAIL", spec, 1);
}

static void driver_works(void)
{
	unsetenv("DEVMEMTCP_FAKE_CUDA_FAIL");
}

/* The test's own driver calls run in the GPU's primary context, made
 * current here (the driver refuses stream work without one) and left
 * again before the library's next call. */
static void ctx_enter(const struct dmt_cuda *cu)
{
	CUcontext c;

	assert_int_equal(cu->cuDevicePrimaryCtxRetain(&c, 0), CUDA_SUCCESS);
	assert_int_equal(cu->cuCtxPushCurrent(c), CUDA_SUCCESS);
}

static void ctx_leave(const struct dmt_cuda *cu)
{
	CUcontext c;

	assert_int_equal(cu->cuCtxPopCurrent(&c), CUDA_SUCCESS);
	assert_int_equal(cu->cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);
}

/* The host waits for the work on the legacy default stream. */
static void sync_legacy(struct devmemtcp_gpu *g)
{
	ctx_enter(dmt_gpu_cuda(g));
	assert_int_equal(dmt_gpu_cuda(g)->cuStreamSynchronize(NULL), CUDA_SUCCESS);
	ctx_leave(dmt_gpu_cuda(g));
}

/* devmemtcp_gpu_new in a new process (the driver is loaded once per
 * process) whose $DEVMEMTCP_LIBCUDA is libcuda: its result and message. */
static int gpu_new_elsewhere(const char *libcuda, char *msg, size_t len)
{
	int p[2], status, ret = 0;
	ssize_t n;
	pid_t pid;

	assert_int_equal(pipe(p), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(p[0]);
		dup2(p[1], STDOUT_FILENO);
		setenv("DEVMEMTCP_LIBCUDA", libcuda, 1);
		execl("/proc/self/exe", "test-gpu-driver", "--gpu-new", (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	n = read(p[0], msg, len - 1);
	close(p[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_true(n > 0);
	msg[n] = '\0';
	assert_int_equal(sscanf(msg, "%d", &ret), 1);
	memmove(msg, strchr(msg, '\n') + 1, strlen(strchr(msg, '\n') + 1) + 1);
	return ret;
}

/* --gpu-new: what devmemtcp_gpu_new says, for gpu_new_elsewhere. */
static int gpu_new_main(void)
{
	DEVMEMTCP_OPTS(ctx_opts, o, .log_fn = t_quiet);
	struct devmemtcp_gpu *g = NULL;
	int ret;

	if (devmemtcp_ctx_new(&o, &ctx))
		return 1;
	ret = devmemtcp_gpu_new(ctx, NULL, &g);
	printf("%d\n%s", ret, devmemtcp_ctx_errmsg(ctx));
	devmemtcp_gpu_free(g);
	devmemtcp_ctx_free(ctx);
	return 0;
}

/* ---- devmemtcp_gpu_new --------------------------------------------------- */

static void test_driver_too_old(void **state)
{
	const char *stub = getenv("DEVMEMTCP_TEST_CUDA_STUB");
	char msg[1024], want[1024];

	(void)state;
	assert_non_null(stub);
	/* ERRORS devmemtcp_gpu_new ENOSYS */
	assert_int_equal(gpu_new_elsewhere(stub, msg, sizeof(msg)), -ENOSYS);
	snprintf(want, sizeof(want),
		 "%s lacks cuDriverGetVersion: the NVIDIA driver is too old, install driver 525 or newer (CUDA 12)",
		 stub);
	assert_string_equal(msg, want);
}

static void test_new_refused(void **state)
{
	DEVMEMTCP_OPTS(gpu_opts, third, .cuda_device = 2);
	DEVMEMTCP_OPTS(gpu_opts, persist, .flags = DEVMEMTCP_GPU_PERSISTENT);
	struct devmemtcp_gpu *g = (void *)1;

	(void)state;
	/* ERRORS devmemtcp_gpu_new ENODEV */
	assert_int_equal(devmemtcp_gpu_new(ctx, &third, &g), -ENODEV);
	assert_null(g);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx),
			    "CUDA device 2 does not exist: this machine has 1 (ordinals 0..0, see nvidia-smi and CUDA_VISIBLE_DEVICES)");
	/* ERRORS devmemtcp_gpu_new EIO */
	driver_fails("cuDevicePrimaryCtxRetain", 999);
	assert_int_equal(devmemtcp_gpu_new(ctx, NULL, &g), -EIO);
	driver_works();
	assert_string_equal(devmemtcp_ctx_errmsg(ctx),
			    "cuDevicePrimaryCtxRetain failed: CUDA_ERROR_FAKE (fake-cuda error): the GPU may be in exclusive-process mode and in use by another process");
	/* ERRORS devmemtcp_gpu_new ENOMEM */
	driver_fails("cuMemHostAlloc", 2);	/* CUDA_ERROR_OUT_OF_MEMORY */
	assert_int_equal(devmemtcp_gpu_new(ctx, NULL, &g), -ENOMEM);
	driver_works();
	assert_string_equal(devmemtcp_ctx_errmsg(ctx),
			    "cuMemHostAlloc(descriptors) failed: CUDA_ERROR_FAKE (fake-cuda error): lower opts.max_frags or opts.slots, or raise the locked-memory limit (ulimit -l)");
	/* ERRORS devmemtcp_gpu_new EOPNOTSUPP */
	setenv("DEVMEMTCP_FAKE_CUDA_NO_MEMOPS", "1", 1);
	assert_int_equal(devmemtcp_gpu_new(ctx, &persist, &g), -EOPNOTSUPP);
	unsetenv("DEVMEMTCP_FAKE_CUDA_NO_MEMOPS");
	assert_string_equal(devmemtcp_ctx_errmsg(ctx),
			    "DEVMEMTCP_GPU_PERSISTENT needs 64-bit stream memory operations, which CUDA device 0 does not support: leave the flag off");
	assert_null(g);
}

/* ---- devmemtcp_gpu_gather ------------------------------------------------ */

static void test_gather_refused(void **state)
{
	DEVMEMTCP_OPTS(gpu_opts, graphs, .flags = DEVMEMTCP_GPU_GRAPHS);
	struct devmemtcp_frag f = { .addr = (uintptr_t)src, .len = 100 };
	struct devmemtcp_gpu_iov d = { (uintptr_t)dst, sizeof(dst) };
	struct devmemtcp_gpu *g;

	(void)state;
	for (size_t i = 0; i < sizeof(src); i++)
		src[i] = (char)(i * 7 + 1);
	/* ERRORS devmemtcp_gpu_gather EINVAL */
	assert_int_equal(devmemtcp_gpu_gather(NULL, &f, 1, &d, 1, NULL), -EINVAL);
	/* no handle: the message is the thread's */
	assert_string_equal(devmemtcp_ctx_errmsg(NULL), "devmemtcp_gpu_gather: gpu is NULL");
	/* ERRORS devmemtcp_gpu_gather EIO */
	assert_true(gpu->pdl);	/* the fake is a compute capability 9 device */
	driver_fails("cuLaunchKernelEx", 719);	/* CUDA_ERROR_LAUNCH_FAILED */
	assert_int_equal(devmemtcp_gpu_gather(gpu, &f, 1, &d, 1, NULL), -EIO);
	driver_works();
	assert_string_equal(devmemtcp_gpu_errmsg(gpu),
			    "cuLaunchKernelEx(dmt_gather) failed: CUDA_ERROR_FAKE (fake-cuda error): is stream a stream of this GPU's primary context?");
	/* without programmatic dependent launch (before sm_90): cuLaunchKernel */
	gpu->pdl = false;
	driver_fails("cuLaunchKernel", 719);
	assert_int_equal(devmemtcp_gpu_gather(gpu, &f, 1, &d, 1, NULL), -EIO);
	driver_works();
	assert_string_equal(devmemtcp_gpu_errmsg(gpu),
			    "cuLaunchKernel(dmt_gather) failed: CUDA_ERROR_FAKE (fake-cuda error): is stream a stream of this GPU's primary context?");
	gpu->pdl = true;
	/* the handle works on */
	assert_int_equal(devmemtcp_gpu_gather(gpu, &f, 1, &d, 1, NULL), 0);
	assert_int_equal(gpu->pdl_launches, 1);
	assert_int_equal(gpu->graph_launches, 0);
	sync_legacy(gpu);
	assert_memory_equal(dst, src, 100);
	memset(dst, 0, sizeof(dst));

	/* DEVMEMTCP_GPU_GRAPHS: a graph launch that fails */
	assert_int_equal(devmemtcp_gpu_new(ctx, &graphs, &g), 0);
	driver_fails("cuGraphLaunch", 719);
	assert_int_equal(devmemtcp_gpu_gather(g, &f, 1, &d, 1, NULL), -EIO);
	driver_works();
	assert_string_equal(devmemtcp_gpu_errmsg(g),
			    "cuGraphLaunch(dmt_gather) failed: CUDA_ERROR_FAKE (fake-cuda error): is stream a stream of this GPU's primary context?");
	/* the handle works on, through its graphs */
	assert_int_equal(devmemtcp_gpu_gather(g, &f, 1, &d, 1, NULL), 0);
	assert_int_equal(g->graph_launches, 1);
	/* a graph the driver cannot set: launches from then on */
	driver_fails("cuGraphExecKernelNodeSetParams_v2", 1);
	assert_int_equal(devmemtcp_gpu_gather(g, &f, 1, &d, 1, NULL), 0);
	driver_works();
	assert_true(g->graphs_off);
	assert_int_equal(g->graph_launches, 1);
	assert_int_equal(g->pdl_launches, 1);
	assert_int_equal(devmemtcp_gpu_gather(g, &f, 1, &d, 1, NULL), 0);
	assert_int_equal(g->graph_launches, 1);
	assert_int_equal(g->pdl_launches, 2);
	devmemtcp_gpu_free(g);
	/* nor one it cannot make */
	assert_int_equal(devmemtcp_gpu_new(ctx, &graphs, &g), 0);
	driver_fails("cuGraphInstantiateWithFlags", 2);
	assert_int_equal(devmemtcp_gpu_gather(g, &f, 1, &d, 1, NULL), 0);
	driver_works();
	assert_true(g->graphs_off);
	assert_int_equal(g->graph_launches, 0);
	assert_int_equal(g->pdl_launches, 1);
	devmemtcp_gpu_free(g);
	sync_legacy(gpu);
	assert_memory_equal(dst, src, 100);
}

/* A persistent handle's gathers cannot be captured into a graph, and a
 * blocked stream ends its wait for a slot after 10 s. */
static void test_persistent_refused(void **state)
{
	DEVMEMTCP_OPTS(gpu_opts, po, .flags = DEVMEMTCP_GPU_PERSISTENT, .slots = 1);
	struct devmemtcp_frag f = { .addr = (uintptr_t)src, .len = 100 };
	struct devmemtcp_gpu_iov d = { (uintptr_t)dst, sizeof(dst) };
	const struct dmt_cuda *cu = dmt_gpu_cuda(gpu);
	static volatile uint32_t gate;
	struct devmemtcp_gpu *p;
	CUstream s;
	int ret = 0;

	(void)state;
	assert_int_equal(devmemtcp_gpu_new(ctx, &po, &p), 0);
	setenv("DEVMEMTCP_FAKE_CUDA_CAPTURING", "1", 1);
	/* ERRORS devmemtcp_gpu_gather EOPNOTSUPP */
	assert_int_equal(devmemtcp_gpu_gather(p, &f, 1, &d, 1, NULL), -EOPNOTSUPP);
	unsetenv("DEVMEMTCP_FAKE_CUDA_CAPTURING");
	assert_string_equal(devmemtcp_gpu_errmsg(p),
			    "a gather of a handle with DEVMEMTCP_GPU_PERSISTENT cannot be captured into a CUDA graph: capture with a handle without it");
	/* a stream that waits for a word nobody writes */
	gate = 0;
	ctx_enter(cu);
	assert_int_equal(cu->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
	assert_int_equal(cu->cuStreamWaitValue32(s, (uintptr_t)&gate, 1, CU_STREAM_WAIT_VALUE_GEQ),
			 CUDA_SUCCESS);
	ctx_leave(cu);
	for (int i = 0; i < 4 && !ret; i++)
		ret = devmemtcp_gpu_gather(p, &f, 1, &d, 1, s);
	/* ERRORS devmemtcp_gpu_gather ETIMEDOUT */
	assert_int_equal(ret, -ETIMEDOUT);
	assert_string_equal(devmemtcp_gpu_errmsg(p),
			    "persistent gather kernel: waited 10 s for a slot's previous job: is the stream of an earlier gather blocked for good?");
	/* a gather of a whole receive waits the same */
	{
		struct devmemtcp_frag lf = { .offset = 0, .len = 100,
					     .flags = DEVMEMTCP_FRAG_LINEAR };

		/* ERRORS devmemtcp_gpu_gather_recv ETIMEDOUT */
		assert_int_equal(devmemtcp_gpu_gather_recv(p, NULL, &lf, 1, src, 100,
							   &d, 1, s), -ETIMEDOUT);
		assert_string_equal(devmemtcp_gpu_errmsg(p),
				    "persistent gather kernel: waited 10 s for a slot's previous job: is the stream of an earlier gather blocked for good?");
	}
	gate = 1;
	ctx_enter(cu);
	assert_int_equal(cu->cuStreamSynchronize(s), CUDA_SUCCESS);
	ctx_leave(cu);
	devmemtcp_gpu_free(p);
	assert_int_equal(cu->cuStreamDestroy(s), CUDA_SUCCESS);
}

/* ---- fences and deferred release ------------------------------------------ */

static void test_fences_refused(void **state)
{
	struct devmemtcp_gpu_fence *fence = NULL;
	struct devmemtcp_frag f = { .addr = (uintptr_t)src, .len = 1, .token = 3 };
	struct devmemtcp_rx *rx;
	int sv[2];

	(void)state;
	/* ERRORS devmemtcp_gpu_fence_new EINVAL */
	assert_int_equal(devmemtcp_gpu_fence_new(NULL, NULL, &fence), -EINVAL);
	assert_string_equal(devmemtcp_ctx_errmsg(NULL), "devmemtcp_gpu_fence_new: gpu is NULL");
	assert_int_equal(devmemtcp_gpu_fence_new(gpu, NULL, NULL), -EINVAL);
	assert_string_equal(devmemtcp_gpu_errmsg(gpu), "devmemtcp_gpu_fence_new: fence pointer is NULL");
	/* ERRORS devmemtcp_gpu_fence_new EIO */
	driver_fails("cuStreamWriteValue32_v2", 400);	/* CUDA_ERROR_INVALID_HANDLE */
	assert_int_equal(devmemtcp_gpu_fence_new(gpu, NULL, &fence), -EIO);
	driver_works();
	assert_string_equal(devmemtcp_gpu_errmsg(gpu),
			    "cuStreamWriteValue32(fence) failed: CUDA_ERROR_FAKE (fake-cuda error): is stream a stream of this GPU's primary context?");
	assert_null(fence);
	/* ERRORS devmemtcp_gpu_fence_done EINVAL */
	assert_int_equal(devmemtcp_gpu_fence_done(NULL, false), -EINVAL);
	assert_string_equal(devmemtcp_ctx_errmsg(NULL), "devmemtcp_gpu_fence_done: fence is NULL");
	/* a kernel on the fenced stream failed (the context says so while
	 * the fence is waited for): the fence stays valid */
	assert_int_equal(dmt_gpu_spin(gpu, NULL, 200 * 1000 * 1000), 0);
	assert_int_equal(devmemtcp_gpu_fence_new(gpu, NULL, &fence), 0);
	assert_int_equal(devmemtcp_gpu_fence_done(fence, false), 0);
	driver_fails("cuStreamQuery", 719);
	/* ERRORS devmemtcp_gpu_fence_done EIO */
	assert_int_equal(devmemtcp_gpu_fence_done(fence, true), -EIO);
	driver_works();
	assert_string_equal(devmemtcp_gpu_errmsg(gpu),
			    "waiting for a fence failed: CUDA_ERROR_FAKE (fake-cuda error): a kernel on the fenced stream failed");
	assert_int_equal(devmemtcp_gpu_fence_done(fence, true), 1);

	assert_int_equal(t_tcp_pair(sv), 0);
	assert_int_equal(devmemtcp_rx_new(ctx, sv[0], NULL, &rx), 0);
	/* ERRORS devmemtcp_gpu_release_after EINVAL */
	assert_int_equal(devmemtcp_gpu_release_after(NULL, rx, &f, 1, NULL), -EINVAL);
	assert_string_equal(devmemtcp_ctx_errmsg(NULL), "devmemtcp_gpu_release_after: gpu is NULL");
	assert_int_equal(devmemtcp_gpu_release_after(gpu, rx, &f, 1, NULL), -EINVAL);
	assert_string_equal(devmemtcp_gpu_errmsg(gpu),
			    "devmemtcp_rx_release_after: devmemtcp_rx_release_after: token 3 of fragment 0 is not outstanding (released already, listed twice, or never received): nothing was released");
	/* ERRORS devmemtcp_gpu_release_after EIO */
	driver_fails("cuStreamWriteValue32_v2", 400);
	assert_int_equal(devmemtcp_gpu_release_after(gpu, rx, &f, 1, NULL), -EIO);
	driver_works();
	assert_string_equal(devmemtcp_gpu_errmsg(gpu),
			    "cuStreamWriteValue32(fence) failed: CUDA_ERROR_FAKE (fake-cuda error): is stream a stream of this GPU's primary context?");
	devmemtcp_rx_free(rx);
	close(sv[0]);
	close(sv[1]);
}

/* ---- devmemtcp_gpu_view -------------------------------------------------- */

static void test_view_refused(void **state)
{
	struct devmemtcp_frag f[3] = {
		{ .addr = 0x10000, .len = 10 },
		{ .offset = 0x3000, .len = 10, .binding_id = 4 },
		{ .addr = 0x30000, .len = 10 },
	};
	struct devmemtcp_gpu_iov iov[3];

	(void)state;
	/* ERRORS devmemtcp_gpu_view EINVAL */
	assert_int_equal(devmemtcp_gpu_view(gpu, f, 3, iov, 3), -EINVAL);
	assert_string_equal(devmemtcp_gpu_errmsg(gpu),
			    "fragment 1 (binding 4, offset 0x3000) has no device address: register its binding's buffer with devmemtcp_rx_add_buf");
	/* without a handle the message is the thread's */
	assert_int_equal(devmemtcp_gpu_view(NULL, NULL, 3, iov, 3), -EINVAL);
	assert_string_equal(devmemtcp_ctx_errmsg(NULL),
			    "devmemtcp_gpu_view: frags or iov is NULL with a non-zero count");
	/* more ranges than it counts (lowered from 2^31 here) */
	f[1] = (struct devmemtcp_frag){ .addr = 0x20000, .len = 10 };
	dmt_gpu_view_max = 2;
	/* ERRORS devmemtcp_gpu_view EOVERFLOW */
	assert_int_equal(devmemtcp_gpu_view(gpu, f, 3, iov, 3), -EOVERFLOW);
	dmt_gpu_view_max = INT32_MAX;
	assert_string_equal(devmemtcp_gpu_errmsg(gpu),
			    "devmemtcp_gpu_view: more than 2^31 ranges: view fewer fragments at once");
	assert_int_equal(devmemtcp_gpu_view(gpu, f, 3, iov, 3), 3);
}

/* devmemtcp_gpu_gather_release: what devmemtcp_gpu_gather refuses, and
 * what can fail after the gather is queued. */
static void test_gather_release_refused(void **state)
{
	DEVMEMTCP_OPTS(gpu_opts, persist, .flags = DEVMEMTCP_GPU_PERSISTENT);
	struct devmemtcp_frag f = { .addr = (uintptr_t)src, .len = 100, .token = 3 };
	struct devmemtcp_gpu_iov d = { (uintptr_t)dst, sizeof(dst) };
	struct devmemtcp_gpu *g;
	struct devmemtcp_rx *rx;
	uint64_t fences0;
	int sv[2];

	(void)state;
	assert_int_equal(t_tcp_pair(sv), 0);
	assert_int_equal(devmemtcp_rx_new(ctx, sv[0], NULL, &rx), 0);
	/* ERRORS devmemtcp_gpu_gather_release EIO */
	driver_fails("cuLaunchKernelEx", 719);
	assert_int_equal(devmemtcp_gpu_gather_release(gpu, rx, &f, 1, &d, 1, NULL), -EIO);
	driver_works();
	assert_string_equal(devmemtcp_gpu_errmsg(gpu),
			    "cuLaunchKernelEx(dmt_gather) failed: CUDA_ERROR_FAKE (fake-cuda error): is stream a stream of this GPU's primary context?");
	/* queued, then the deferral refuses token 3 (rx never received it):
	 * the fence, whose word the kernel writes, waits for that write */
	fences0 = gpu->kernel_fences;
	/* ERRORS devmemtcp_gpu_gather_release EINVAL */
	assert_int_equal(devmemtcp_gpu_gather_release(gpu, rx, &f, 1, &d, 1, NULL), -EINVAL);
	assert_string_equal(devmemtcp_gpu_errmsg(gpu),
			    "devmemtcp_rx_release_after: devmemtcp_rx_release_after: token 3 of fragment 0 is not outstanding (released already, listed twice, or never received): nothing was released (the gather is queued; the fragments are still the caller's)");
	assert_int_equal(gpu->kernel_fences, fences0 + 1);	/* a launch carried it */
	assert_non_null(gpu->retired_fences);

	/* a launch from a slot queued with the fence, then a failure: the
	 * handle's end waits for the kernel's write (and returns) */
	setenv("DEVMEMTCP_GATHER_MODE", "ring", 1);
	assert_int_equal(devmemtcp_gpu_new(ctx, NULL, &g), 0);
	unsetenv("DEVMEMTCP_GATHER_MODE");
	driver_fails("cuEventRecord", 400);
	assert_int_equal(devmemtcp_gpu_gather_release(g, rx, &f, 1, &d, 1, NULL), -EIO);
	driver_works();
	assert_string_equal(devmemtcp_gpu_errmsg(g), "cuEventRecord failed: CUDA_ERROR_FAKE (fake-cuda error)");
	assert_non_null(g->retired_fences);
	devmemtcp_gpu_free(g);

	/* ERRORS devmemtcp_gpu_gather_release ENOMEM */
	assert_int_equal(devmemtcp_gpu_new(ctx, NULL, &g), 0);
	dmt_test_alloc_fail(1, false);
	assert_int_equal(devmemtcp_gpu_gather_release(g, rx, &f, 1, &d, 1, NULL), -ENOMEM);
	dmt_test_alloc_fail(0, false);
	assert_string_equal(devmemtcp_gpu_errmsg(g), "devmemtcp_gpu_gather_release: out of memory");
	devmemtcp_gpu_free(g);

	/* ERRORS devmemtcp_gpu_gather_release EOPNOTSUPP */
	assert_int_equal(devmemtcp_gpu_new(ctx, &persist, &g), 0);
	setenv("DEVMEMTCP_FAKE_CUDA_CAPTURING", "1", 1);
	assert_int_equal(devmemtcp_gpu_gather_release(g, rx, &f, 1, &d, 1, NULL), -EOPNOTSUPP);
	unsetenv("DEVMEMTCP_FAKE_CUDA_CAPTURING");
	assert_string_equal(devmemtcp_gpu_errmsg(g),
			    "a gather of a handle with DEVMEMTCP_GPU_PERSISTENT cannot be captured into a CUDA graph: capture with a handle without it");
	devmemtcp_gpu_free(g);
	devmemtcp_rx_free(rx);
	close(sv[0]);
	close(sv[1]);
}

/* devmemtcp_gpu_gather_recv: the launch that places linear bytes, the
 * batch object and the staging memory, and a persistent handle. */
static void test_gather_recv_refused(void **state)
{
	DEVMEMTCP_OPTS(gpu_opts, persist, .flags = DEVMEMTCP_GPU_PERSISTENT);
	static char linear[256];
	struct devmemtcp_frag f[2] = {
		{ .addr = (uintptr_t)src, .len = 100 },
		{ .offset = 10, .len = 50, .flags = DEVMEMTCP_FRAG_LINEAR },
	};
	struct devmemtcp_gpu_iov d = { (uintptr_t)dst, sizeof(dst) };
	struct devmemtcp_gpu *g;

	(void)state;
	for (size_t i = 0; i < sizeof(linear); i++)
		linear[i] = (char)(i * 3 + 5);
	/* ERRORS devmemtcp_gpu_gather_recv EIO */
	driver_fails("cuLaunchKernelEx", 719);
	assert_int_equal(devmemtcp_gpu_gather_recv(gpu, NULL, f, 2, linear, sizeof(linear),
						   &d, 1, NULL), -EIO);
	driver_works();
	assert_string_equal(devmemtcp_gpu_errmsg(gpu),
			    "cuLaunchKernelEx(dmt_gather) failed: CUDA_ERROR_FAKE (fake-cuda error): is stream a stream of this GPU's primary context?");
	/* ERRORS devmemtcp_gpu_gather_recv ENOMEM */
	dmt_test_alloc_fail(1, false);
	assert_int_equal(devmemtcp_gpu_gather_recv(gpu, NULL, f, 2, linear, sizeof(linear),
						   &d, 1, NULL), -ENOMEM);
	dmt_test_alloc_fail(0, false);
	assert_string_equal(devmemtcp_gpu_errmsg(gpu), "devmemtcp_gpu_gather_recv: out of memory");
	/* the pinned staging memory */
	assert_int_equal(devmemtcp_gpu_new(ctx, NULL, &g), 0);
	driver_fails("cuMemHostAlloc", 2);	/* CUDA_ERROR_OUT_OF_MEMORY */
	assert_int_equal(devmemtcp_gpu_gather_recv(g, NULL, f, 2, linear, sizeof(linear),
						   &d, 1, NULL), -ENOMEM);
	driver_works();
	assert_string_equal(devmemtcp_gpu_errmsg(g),
			    "cuMemHostAlloc(linear bytes' staging) failed: CUDA_ERROR_FAKE (fake-cuda error): raise the locked-memory limit (ulimit -l)");
	/* the handle works on: the bytes, linear ones included */
	memset(dst, 0, sizeof(dst));
	assert_int_equal(devmemtcp_gpu_gather_recv(g, NULL, f, 2, linear, sizeof(linear),
						   &d, 1, NULL), 0);
	sync_legacy(g);
	assert_memory_equal(dst, src, 100);
	assert_memory_equal(dst + 100, linear + 10, 50);
	devmemtcp_gpu_free(g);
	/* ERRORS devmemtcp_gpu_gather_recv EOPNOTSUPP */
	assert_int_equal(devmemtcp_gpu_new(ctx, &persist, &g), 0);
	setenv("DEVMEMTCP_FAKE_CUDA_CAPTURING", "1", 1);
	assert_int_equal(devmemtcp_gpu_gather_recv(g, NULL, f, 2, linear, sizeof(linear),
						   &d, 1, NULL), -EOPNOTSUPP);
	unsetenv("DEVMEMTCP_FAKE_CUDA_CAPTURING");
	assert_string_equal(devmemtcp_gpu_errmsg(g),
			    "a gather of a handle with DEVMEMTCP_GPU_PERSISTENT cannot be captured into a CUDA graph: capture with a handle without it");
	devmemtcp_gpu_free(g);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_driver_too_old),
		cmocka_unit_test(test_new_refused),
		cmocka_unit_test(test_gather_refused),
		cmocka_unit_test(test_persistent_refused),
		cmocka_unit_test(test_fences_refused),
		cmocka_unit_test(test_gather_release_refused),
		cmocka_unit_test(test_gather_recv_refused),
		cmocka_unit_test(test_view_refused),
	};

	if (argc > 1 && !strcmp(argv[1], "--gpu-new"))
		return gpu_new_main();
	return cmocka_run_group_tests_name("gpu-driver", tests, setup, teardown);
}

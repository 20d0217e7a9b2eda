/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * The gpu layer's private interface as the GPU benchmarks (bench/gather/)
 * drive it: the handle's internals, descriptors and launch geometry, the
 * kernels' parameter layouts and the test kernels (gpu/gpu.h, with
 * gpu/gather_abi.h), and the CUDA driver table the library loaded
 * (buf/cuda.h: its CUresult, CUstream and entry points).  Benchmarks
 * include the public header and the toolkit only; this is the one place
 * where they reach the gpu layer.
 */
#ifndef DEVMEMTCP_TEST_GPUFIXTURE_H
#define DEVMEMTCP_TEST_GPUFIXTURE_H

#include "devmemtcp.h"
#include "cuda.h"
#include "gpu.h"

#endif

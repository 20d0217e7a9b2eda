// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/* Built without nvcc: no gather kernels (devmemtcp_gpu_gather says so). */
#include "gpu.h"

const unsigned char dmt_gather_fatbin[1] = { 0 };
const size_t dmt_gather_fatbin_size = 0;

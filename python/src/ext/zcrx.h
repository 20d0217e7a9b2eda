/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/* Zcrx (zcrx.c): io_uring zero-copy receive handles. */
#ifndef DMT_PY_ZCRX_H
#define DMT_PY_ZCRX_H

#include "dmt.h"

#define IF_NAMESIZE_PY 64

extern PyTypeObject dmtpy_Zcrx_Type;

/* The open Zcrx obj's core with a reference of the caller's own (the
 * receiver's: core_put when it is freed, after devmemtcp_rx_free), its
 * handle in *z and its area's buffer in *buf (held by the core); NULL with
 * an exception set. */
struct core *dmtpy_zcrx_get(PyObject *obj, struct devmemtcp_zcrx **z,
			    struct buf_core **buf);

#endif

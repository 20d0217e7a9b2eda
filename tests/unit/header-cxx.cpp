/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/* The public header compiles as C++ and declares C linkage. */
#include "devmemtcp.h"

int main()
{
	devmemtcp_frag f = {};
	devmemtcp_rx_opts o = {};
	o.sz = sizeof(o);
	int (*fn)(devmemtcp_rx *, devmemtcp_frag *, size_t, void *, size_t) =
		devmemtcp_rx_recv;
	return (fn == nullptr) + static_cast<int>(f.len) + (o.sz != sizeof(o));
}

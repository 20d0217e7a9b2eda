/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/* The public header compiles as strict C99 (-std=c99 -pedantic -Werror). */
#include "devmemtcp.h"

int main(void)
{
	DEVMEMTCP_OPTS(rx_opts, o, .ctrl_size = 4096);
	struct devmemtcp_frag f = { 0 };

	return (int)(o.sz != sizeof(o)) + (int)f.len;
}

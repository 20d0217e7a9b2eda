/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * The public header compiles as strict C99 (-std=c99 -pedantic -Werror),
 * and DEVMEMTCP_OPTS() leaves every byte after an options struct's last
 * field zero even on a dirty stack (built at -O0, where the compiler does
 * not zero padding on its own): the library refuses non-zero bytes there.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "devmemtcp.h"

#define END(T, f) (offsetof(struct devmemtcp_##T, f) + sizeof(((struct devmemtcp_##T *)0)->f))

static void dirty_stack(void)
{
	volatile unsigned char junk[8192];

	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = 0xa5;
	(void)junk[0];
}

static int tail_zero(const char *name, const void *o, size_t end, size_t size)
{
	const unsigned char *p = o;

	for (size_t i = end; i < size; i++) {
		if (p[i]) {
			printf("DEVMEMTCP_OPTS(%s): byte %zu after the last field is 0x%02x\n",
			       name, i, p[i]);
			return 1;
		}
	}
	return 0;
}

static int check(void)
{
	DEVMEMTCP_OPTS(ctx_opts, c, .log_level = DEVMEMTCP_LOG_ERR);
	DEVMEMTCP_OPTS(buf_opts, b, .provider = 1, .drm_path = "x");
	DEVMEMTCP_OPTS(bind_opts, bi, .rx_page_size = 4096, .no_verify = 1);
	DEVMEMTCP_OPTS(rx_opts, r, .ctrl_size = 4096, .release_batch = 3);
	DEVMEMTCP_OPTS(nic_opts, n, .flags = 1, .run_dir = "x");
	DEVMEMTCP_OPTS(probe_opts, p, .flags = 1);
	DEVMEMTCP_OPTS(tx_opts, t, .max_iovs = 1, .max_call_bytes = 1);
	DEVMEMTCP_OPTS(gpu_opts, g, .flags = 1, .slots = 1);

	return tail_zero("ctx_opts", &c, END(ctx_opts, log_level), sizeof(c)) +
	       tail_zero("buf_opts", &b, END(buf_opts, drm_path), sizeof(b)) +
	       tail_zero("bind_opts", &bi, END(bind_opts, no_verify), sizeof(bi)) +
	       tail_zero("rx_opts", &r, END(rx_opts, release_batch), sizeof(r)) +
	       tail_zero("nic_opts", &n, END(nic_opts, run_dir), sizeof(n)) +
	       tail_zero("probe_opts", &p, END(probe_opts, flags), sizeof(p)) +
	       tail_zero("tx_opts", &t, END(tx_opts, max_call_bytes), sizeof(t)) +
	       tail_zero("gpu_opts", &g, END(gpu_opts, slots), sizeof(g));
}

int main(void)
{
	struct devmemtcp_frag f = { 0 };

	dirty_stack();
	return check() + (int)f.len;
}

// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/* Control messages of recvmsg(MSG_SOCK_DEVMEM) → fragments in stream order. */
#include <string.h>

#include "rx.h"

int dmt_cmsg_parse(const struct msghdr *msg, size_t ret,
		   struct devmemtcp_frag *frags, size_t max,
		   struct dmt_parse *out)
{
	return dmt_cmsg_parse_cb(msg, ret, frags, max, out, NULL, NULL);
}

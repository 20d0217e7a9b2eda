// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The TX error-queue parser (dmt_tx_parse_errqueue, lib/tx/tx.c) on arbitrary
 * control buffers of recvmsg(MSG_ERRQUEUE), in a heap block of exactly
 * their length: it must stay inside msg_controllen and end.
 */
#include <errno.h>
#include <netinet/in.h>
#include <linux/errqueue.h>

#include "fuzz.h"
#include "tx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz f = fz_init(data, size);
	struct msghdr msg = { 0 };
	struct dmt_tx_notif n;
	size_t len;
	uint8_t *ctrl = fz_rest(&f, &len);
	int ret;

	msg.msg_control = ctrl;
	msg.msg_controllen = len;
	ret = dmt_tx_parse_errqueue(&msg, &n);
	FZ_CHECK(ret == 0 || ret == 1 || ret == -EBADMSG);
	if (ret == 1 && n.zerocopy)
		FZ_CHECK(n.origin == SO_EE_ORIGIN_ZEROCOPY);
	if (ret != 1)
		FZ_CHECK(!n.zerocopy);
	free(ctrl);
	return 0;
}

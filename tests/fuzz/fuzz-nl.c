// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The netlink transport's reply parser (dmt_nl_parse, lib/nl/nl.c) and every
 * exposed reply parser (family, queue-get, rings, channels, features, RSS)
 * on arbitrary reply buffers, in a heap block of exactly their length.
 * The sequence number and port the parse expects are those of the first
 * message, so recorded kernel replies (tests/unit/data/) are seeds as
 * they are.  Input: one byte choosing what the callback returns, then the
 * buffer.
 */
#include <errno.h>
#include <linux/genetlink.h>

#include "ethtool.h"
#include "fuzz.h"
#include "netdev.h"
#include "nl.h"

struct cb_state {
	uint8_t mode;
	unsigned int calls;
	const uint8_t *end;	/* of the reply buffer */
};

/* Every reply parser on one message; what they find is not checked
 * (any value is possible), only that they stay in the message. */
static int every_parser(const struct nlmsghdr *nlh, void *data)
{
	struct cb_state *s = data;
	struct dmt_genl_family fam;
	struct devmemtcp_queue q;
	struct dmt_rings r;
	struct dmt_channels c;
	struct dmt_feature feat;
	struct dmt_rss rss;
	int ret;

	s->calls++;
	/* the message and its padding lie inside the buffer: the parsers
	 * walk attributes up to MNL_ALIGN(nlmsg_len) */
	FZ_CHECK(nlh->nlmsg_len >= sizeof(*nlh));
	FZ_CHECK(MNL_ALIGN(nlh->nlmsg_len) <=
		 (size_t)(s->end - (const uint8_t *)nlh));
	ret = dmt_nl_family_parse(nlh, &fam);
	FZ_CHECK(ret == 0 || ret == -EBADMSG);
	FZ_CHECK(fam.nops <= ARRAY_SIZE(fam.ops));
	ret = dmt_queue_parse(nlh, &q);
	FZ_CHECK(ret == 0 || ret == -EBADMSG);
	ret = dmt_eth_rings_parse(nlh, &r);
	FZ_CHECK(ret == 0 || ret == -EBADMSG);
	FZ_CHECK(dmt_eth_channels_parse(nlh, &c) == 0);
	FZ_CHECK(dmt_eth_features_parse(nlh, "rx-ntuple-filter", &feat) == 0);
	ret = dmt_eth_rss_parse(nlh, &rss);
	FZ_CHECK(ret == 0 || ret == -EBADMSG || ret == -ENOMEM);
	if (!ret) {
		FZ_CHECK(!rss.indir_size || rss.indir);
		FZ_CHECK(!rss.key_size || rss.key);
	}
	dmt_rss_free(&rss);
	switch (s->mode % 4) {
	case 1:
		return MNL_CB_STOP;
	case 2:
		return s->calls > 1 ? MNL_CB_ERROR : MNL_CB_OK;
	case 3:
		return s->calls > 2 ? -EIO : MNL_CB_OK;
	}
	return MNL_CB_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz f = fz_init(data, size);
	struct cb_state s = { .mode = fz_u8(&f) };
	struct dmt_nl nl;
	struct nlmsghdr first = { 0 };
	size_t len;
	uint8_t *buf = fz_rest(&f, &len);
	int ret, err = 1;

	s.end = buf + len;
	memset(&nl, 0, sizeof(nl));
	if (len >= sizeof(first))
		memcpy(&first, buf, sizeof(first));
	nl.portid = first.nlmsg_pid;
	ret = dmt_nl_parse(&nl, buf, len, first.nlmsg_seq,
			   s.mode & 4 ? NULL : every_parser, &s, &err);
	FZ_CHECK(ret == MNL_CB_OK || ret == MNL_CB_STOP || ret == MNL_CB_ERROR);
	if (ret == MNL_CB_ERROR)
		FZ_CHECK(err < 0);
	else
		FZ_CHECK(err == 0);
	FZ_CHECK(memchr(nl.extack, '\0', sizeof(nl.extack)) != NULL);
	free(buf);
	return 0;
}

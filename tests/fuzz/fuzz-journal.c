// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The NIC layer's files (lib/nic/journal.c): the baseline (IF.base) and an
 * owner's journal (IF.owner.*), as round trips.  The parsers accept only
 * what the formatters write, one canonical text per value, so any text a
 * parser accepts must format back to exactly the same bytes.  These files
 * are what a later process undoes from: an accepted file that cannot be
 * written back, or changes meaning when it is, loses that evidence.
 * The first line picks the parser; other input goes to both.
 */
#include <errno.h>

#include "fuzz.h"
#include "nic.h"

static void base_round_trip(const char *data, size_t size)
{
	struct dmt_base b, k;
	char *text;
	size_t len;
	int ret = dmt_base_parse(data, size, &b, NULL);

	FZ_CHECK(ret == 0 || ret == -EBADMSG);
	if (ret)
		return;
	FZ_CHECK(dmt_base_format(&b, &text, &len) == 0);
	FZ_CHECK(strlen(text) == len);
	if (len != size || memcmp(text, data, len))
		fprintf(stderr, "base written back differently:\n%s", text);
	FZ_CHECK(len == size && memcmp(text, data, len) == 0);
	FZ_CHECK(dmt_base_parse(text, len, &k, NULL) == 0);
	dmt_base_free(&b);
	dmt_base_free(&k);
	free(text);
}

static void owner_round_trip(const char *data, size_t size)
{
	struct dmt_owner o, k;
	char *text;
	size_t len;
	int ret = dmt_owner_parse(data, size, &o, NULL);

	FZ_CHECK(ret == 0 || ret == -EBADMSG);
	if (ret)
		return;
	FZ_CHECK(dmt_owner_format(&o, &text, &len) == 0);
	FZ_CHECK(strlen(text) == len);
	if (len != size || memcmp(text, data, len))
		fprintf(stderr, "owner file written back differently:\n%s", text);
	FZ_CHECK(len == size && memcmp(text, data, len) == 0);
	FZ_CHECK(dmt_owner_parse(text, len, &k, NULL) == 0);
	dmt_owner_free(&o);
	dmt_owner_free(&k);
	free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data;

	if (size >= 15 && !memcmp(text, "devmemtcp-base ", 15)) {
		base_round_trip(text, size);
	} else if (size >= 16 && !memcmp(text, "devmemtcp-owner ", 16)) {
		owner_round_trip(text, size);
	} else {
		base_round_trip(text, size);
		owner_round_trip(text, size);
	}
	return 0;
}

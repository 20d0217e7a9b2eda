// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The flow parser (devmemtcp_flow_parse) on arbitrary text.  An accepted
 * flow must be well formed (a family, masked addresses, contiguous
 * prefixes, all-or-nothing port masks, a queue only with its flag), and
 * the text written back from it the canonical way must parse to the same
 * flow.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <sys/socket.h>

#include "devmemtcp.h"
#include "fuzz.h"

/* Length of a contiguous prefix mask, or -1 when it has holes. */
static int prefix_len(const uint8_t *mask, int bits)
{
	int n = 0;

	while (n < bits && mask[n / 8] & (0x80u >> (n % 8)))
		n++;
	for (int i = n; i < 128; i++)
		if (mask[i / 8] & (0x80u >> (i % 8)))
			return -1;
	return n;
}

static void check_addr(const uint8_t *addr, const uint8_t *mask, int bits)
{
	FZ_CHECK(prefix_len(mask, bits) >= 0);
	for (int i = 0; i < 16; i++)
		FZ_CHECK((addr[i] & ~mask[i]) == 0);
}

static void put_addr(char **p, const char *word, int family,
		     const uint8_t *addr, const uint8_t *mask)
{
	char a[INET6_ADDRSTRLEN];
	int plen = prefix_len(mask, family == AF_INET ? 32 : 128);

	if (!plen)
		return;
	FZ_CHECK(inet_ntop(family, addr, a, sizeof(a)));
	*p += sprintf(*p, " %s %s/%d", word, a, plen);
}

/* The flow as text the parser is documented to take. */
static void canonical(const struct devmemtcp_flow *f, char *text)
{
	char *p = text;

	p += sprintf(p, "%s", f->family == AF_INET ? "tcp4" : "tcp6");
	put_addr(&p, "src-ip", f->family, f->src_addr, f->src_mask);
	put_addr(&p, "dst-ip", f->family, f->dst_addr, f->dst_mask);
	if (f->src_port_mask)
		p += sprintf(p, " src-port %u", f->src_port);
	if (f->dst_port_mask)
		p += sprintf(p, " dst-port %u", f->dst_port);
	if (f->flags & DEVMEMTCP_FLOW_QUEUE)
		p += sprintf(p, " queue %u", f->queue);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct devmemtcp_flow f, g;
	char *text = malloc(size + 1), canon[512];
	int bits, ret;

	if (!text)
		abort();
	memcpy(text, data, size);
	text[size] = '\0';
	memset(&f, 0xa5, sizeof(f));
	ret = devmemtcp_flow_parse(text, &f);
	free(text);
	FZ_CHECK(ret == 0 || ret == -EINVAL);
	if (ret)
		return 0;
	FZ_CHECK(f.family == AF_INET || f.family == AF_INET6);
	FZ_CHECK((f.flags & ~(uint32_t)DEVMEMTCP_FLOW_QUEUE) == 0);
	FZ_CHECK(f.flags & DEVMEMTCP_FLOW_QUEUE || f.queue == 0);
	bits = f.family == AF_INET ? 32 : 128;
	check_addr(f.src_addr, f.src_mask, bits);
	check_addr(f.dst_addr, f.dst_mask, bits);
	FZ_CHECK(f.src_port_mask == 0 || f.src_port_mask == 0xffff);
	FZ_CHECK(f.dst_port_mask == 0 || f.dst_port_mask == 0xffff);
	FZ_CHECK(f.src_port_mask || !f.src_port);
	FZ_CHECK(f.dst_port_mask || !f.dst_port);
	if (!f.src_port_mask && !f.dst_port_mask && !prefix_len(f.src_mask, bits) &&
	    !prefix_len(f.dst_mask, bits))
		return 0;	/* a match-all flow has no canonical text */
	canonical(&f, canon);
	memset(&g, 0x5a, sizeof(g));
	ret = devmemtcp_flow_parse(canon, &g);
	if (ret)
		fprintf(stderr, "canonical text refused: \"%s\"\n", canon);
	FZ_CHECK(ret == 0);
	FZ_CHECK(memcmp(&f, &g, sizeof(f)) == 0);
	return 0;
}

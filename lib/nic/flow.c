// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * Flow text: devmemtcp_flow_parse() turns the ethtool -N words ("tcp4
 * dst-ip 10.0.0.2/24 dst-port 5201 queue 1") into a struct devmemtcp_flow.
 * It has no object to keep a message on, so a refusal's message is the
 * calling thread's (dmt_err_thread(), read with devmemtcp_ctx_errmsg(NULL)).
 * Part of the NIC layer's input; it calls only the shared helpers.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "core/internal.h"

/* The words, each at most once; a bit per word in struct flow_text.seen. */
enum flow_word { W_TCP4, W_TCP6, W_SRC_IP, W_DST_IP, W_SRC_PORT, W_DST_PORT, W_QUEUE };

static const char *const words[] = {
	[W_TCP4] = "tcp4", [W_TCP6] = "tcp6", [W_SRC_IP] = "src-ip",
	[W_DST_IP] = "dst-ip", [W_SRC_PORT] = "src-port",
	[W_DST_PORT] = "dst-port", [W_QUEUE] = "queue",
};

struct flow_text {
	const char *text;	/* as given, for messages */
	struct devmemtcp_flow f;
	unsigned int seen;	/* 1 << enum flow_word */
	const char *fam_word;	/* what set f.family: "tcp4", "dst-ip ADDR"... */
	char fam_why[INET6_ADDRSTRLEN + 16];
};

static int __attribute__((format(printf, 2, 3)))
refuse(const struct flow_text *p, const char *fmt, ...)
{
	struct dmt_err *err = dmt_err_thread();
	va_list ap;
	int n;

	n = snprintf(err->msg, sizeof(err->msg), "flow \"%.200s\": ", p->text);
	va_start(ap, fmt);
	vsnprintf(err->msg + n, sizeof(err->msg) - (size_t)n, fmt, ap);
	va_end(ap);
	err->code = -EINVAL;
	return dmt_err_log(NULL, err);
}

static const char *fam_name(int fam)
{
	return fam == AF_INET ? "IPv4" : "IPv6";
}

/* The family a word implies; refused when it disagrees with an earlier
 * word.  why: "tcp4", or "dst-ip ::1". */
static int set_family(struct flow_text *p, int fam, const char *why)
{
	if (p->f.family && p->f.family != fam) {
		if (!strncmp(why, "tcp", 3))
			return refuse(p, "%s but %s is %s", why, p->fam_why,
				      fam_name(p->f.family));
		return refuse(p, "%s is %s but the flow is %s", why,
			      fam_name(fam), fam_name(p->f.family));
	}
	if (!p->f.family)
		snprintf(p->fam_why, sizeof(p->fam_why), "%s", why);
	p->f.family = fam;
	return 0;
}

static int parse_addr(struct flow_text *p, enum flow_word w, const char *s)
{
	char buf[INET6_ADDRSTRLEN + 8], why[sizeof(p->fam_why)], *slash;
	uint8_t *addr = w == W_SRC_IP ? p->f.src_addr : p->f.dst_addr;
	uint8_t *mask = w == W_SRC_IP ? p->f.src_mask : p->f.dst_mask;
	int fam, plen, alen;

	snprintf(buf, sizeof(buf), "%s", s);
	slash = strchr(buf, '/');
	if (slash)
		*slash++ = '\0';
	if (strlen(s) < sizeof(buf) && inet_pton(AF_INET, buf, addr) == 1)
		fam = AF_INET;
	else if (strlen(s) < sizeof(buf) && inet_pton(AF_INET6, buf, addr) == 1)
		fam = AF_INET6;
	else
		return refuse(p, "\"%.60s\" is not an IPv4 or IPv6 address", s);
	alen = fam == AF_INET ? 32 : 128;
	plen = alen;
	if (slash) {
		char *end;
		long v = strtol(slash, &end, 10);

		if (end == slash || *end || v < 0 || v > alen)
			return refuse(p, "prefix length \"%.20s\" of %s is not 1..%d",
				      slash, buf, alen);
		if (v == 0)
			return refuse(p, "%s %s/0 matches every address: leave %s out, or give a prefix length of 1 or more",
				      words[w], buf, words[w]);
		plen = (int)v;
	}
	snprintf(why, sizeof(why), "%s %s", words[w], buf);
	if (set_family(p, fam, why))
		return -EINVAL;
	memset(mask, 0, 16);
	for (int i = 0; i < plen; i++)
		mask[i / 8] |= (uint8_t)(0x80u >> (i % 8));
	for (int i = 0; i < 16; i++)
		addr[i] &= mask[i];
	return 0;
}

/* A decimal number in [min, max]: 0 with *v set, or -1. */
static int parse_num(const char *s, unsigned long min, unsigned long max,
		    unsigned long *v)
{
	char *end;

	if (*s < '0' || *s > '9')
		return -1;
	*v = strtoul(s, &end, 10);
	return *end || *v < min || *v > max ? -1 : 0;
}

static int parse_port(struct flow_text *p, enum flow_word w, const char *s)
{
	unsigned long v;

	if (parse_num(s, 1, 65535, &v))
		return refuse(p, "port \"%.20s\" is not 1..65535", s);
	if (w == W_SRC_PORT) {
		p->f.src_port = (uint16_t)v;
		p->f.src_port_mask = 0xffff;
	} else {
		p->f.dst_port = (uint16_t)v;
		p->f.dst_port_mask = 0xffff;
	}
	return 0;
}

static int parse_word(struct flow_text *p, char **save)
{
	const char *t = strtok_r(NULL, " \t", save), *arg;
	enum flow_word w;

	for (w = 0; w < ARRAY_SIZE(words); w++)
		if (!strcmp(t, words[w]))
			break;
	if (w == ARRAY_SIZE(words))
		return refuse(p, "unknown word \"%.40s\": use tcp4, tcp6, src-ip, dst-ip, src-port, dst-port or queue",
			      t);
	if (p->seen & (1u << w))
		return refuse(p, "%s is given twice: give each word once", words[w]);
	p->seen |= 1u << w;
	if (w == W_TCP4 || w == W_TCP6) {
		if (p->seen & (1u << W_TCP4) && p->seen & (1u << W_TCP6))
			return refuse(p, "tcp4 and tcp6 both given: give one");
		return set_family(p, w == W_TCP4 ? AF_INET : AF_INET6, words[w]);
	}
	arg = strtok_r(NULL, " \t", save);
	if (!arg)
		return refuse(p, "%s needs a value", words[w]);
	if (w == W_SRC_IP || w == W_DST_IP)
		return parse_addr(p, w, arg);
	if (w == W_SRC_PORT || w == W_DST_PORT)
		return parse_port(p, w, arg);
	{
		unsigned long v;

		if (parse_num(arg, 0, 4095, &v))
			return refuse(p, "queue \"%.20s\" is not 0..4095", arg);
		p->f.queue = (uint32_t)v;
		p->f.flags |= DEVMEMTCP_FLOW_QUEUE;
	}
	return 0;
}

DEVMEMTCP_EXPORT int devmemtcp_flow_parse(const char *text,
					  struct devmemtcp_flow *flow)
{
	DMT_KEEP_ERRNO;
	const unsigned int match = 1u << W_SRC_IP | 1u << W_DST_IP |
				   1u << W_SRC_PORT | 1u << W_DST_PORT;
	struct flow_text p = { .text = text };
	char *copy, *save;
	int err = 0;

	if (!text || !flow)
		return dmt_err(NULL, dmt_err_thread(), -EINVAL,
			       "devmemtcp_flow_parse: text or flow is NULL");
	copy = dmt_strdup(text);
	if (!copy)
		return dmt_err(NULL, dmt_err_thread(), -ENOMEM,
			       "devmemtcp_flow_parse: out of memory");
	/* strtok_r(NULL, ...) goes on from save: start it at the copy */
	for (save = copy + strspn(copy, " \t"); !err && *save;
	     save += strspn(save, " \t"))
		err = parse_word(&p, &save);
	free(copy);
	if (!err && !(p.seen & match))
		err = refuse(&p, "no match field: give at least one of src-ip, dst-ip, src-port, dst-port");
	if (err)
		return err;
	if (!p.f.family)
		p.f.family = AF_INET;	/* ports only: IPv4, as ethtool's tcp4 */
	*flow = p.f;
	return 0;
}

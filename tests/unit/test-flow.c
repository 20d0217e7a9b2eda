// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * devmemtcp_flow_parse: what it accepts, and for every refusal the errno
 * and the message, which a call without an object to keep it leaves for
 * devmemtcp_ctx_errmsg(NULL) in the calling thread.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <cmocka.h>

#include "devmemtcp.h"

static void refused(const char *text, const char *msg)
{
	struct devmemtcp_flow f;
	int ret;

	memset(&f, 0x5a, sizeof(f));
	ret = devmemtcp_flow_parse(text, &f);
	if (ret != -EINVAL)
		fail_msg("\"%s\": %d, not -EINVAL", text, ret);
	if (strcmp(devmemtcp_ctx_errmsg(NULL), msg))
		fail_msg("\"%s\":\n  got  \"%s\"\n  want \"%s\"", text,
			 devmemtcp_ctx_errmsg(NULL), msg);
	/* a refused text leaves the flow alone */
	assert_int_equal(f.family, 0x5a5a5a5a);
}

static void test_words(void **state)
{
	refused("", "flow \"\": no match field: give at least one of src-ip, dst-ip, src-port, dst-port");
	refused("tcp4", "flow \"tcp4\": no match field: give at least one of src-ip, dst-ip, src-port, dst-port");
	refused("queue 1", "flow \"queue 1\": no match field: give at least one of src-ip, dst-ip, src-port, dst-port");
	refused("to 10.0.0.1", "flow \"to 10.0.0.1\": unknown word \"to\": use tcp4, tcp6, src-ip, dst-ip, src-port, dst-port or queue");
	refused("dst-port", "flow \"dst-port\": dst-port needs a value");
	refused("tcp4 dst-port 1 src-ip", "flow \"tcp4 dst-port 1 src-ip\": src-ip needs a value");
}

static void test_repeated_words(void **state)
{
	refused("dst-port 1 dst-port 2",
		"flow \"dst-port 1 dst-port 2\": dst-port is given twice: give each word once");
	refused("dst-ip 10.0.0.1 src-port 9 dst-ip 10.0.0.2",
		"flow \"dst-ip 10.0.0.1 src-port 9 dst-ip 10.0.0.2\": dst-ip is given twice: give each word once");
	refused("tcp4 tcp4 dst-port 1",
		"flow \"tcp4 tcp4 dst-port 1\": tcp4 is given twice: give each word once");
	refused("queue 1 dst-port 1 queue 2",
		"flow \"queue 1 dst-port 1 queue 2\": queue is given twice: give each word once");
	refused("tcp4 tcp6 dst-port 1",
		"flow \"tcp4 tcp6 dst-port 1\": tcp4 and tcp6 both given: give one");
}

static void test_addresses(void **state)
{
	refused("dst-ip 10.0.0.300",
		"flow \"dst-ip 10.0.0.300\": \"10.0.0.300\" is not an IPv4 or IPv6 address");
	refused("dst-ip 10.0.0.1/33",
		"flow \"dst-ip 10.0.0.1/33\": prefix length \"33\" of 10.0.0.1 is not 1..32");
	refused("src-ip 2001:db8::1/129",
		"flow \"src-ip 2001:db8::1/129\": prefix length \"129\" of 2001:db8::1 is not 1..128");
	refused("dst-ip 10.0.0.1/", "flow \"dst-ip 10.0.0.1/\": prefix length \"\" of 10.0.0.1 is not 1..32");
	refused("dst-ip 10.0.0.1/2x", "flow \"dst-ip 10.0.0.1/2x\": prefix length \"2x\" of 10.0.0.1 is not 1..32");
	/* /0 matches every address: a rule the user cannot have meant */
	refused("dst-ip 10.0.0.1/0",
		"flow \"dst-ip 10.0.0.1/0\": dst-ip 10.0.0.1/0 matches every address: leave dst-ip out, or give a prefix length of 1 or more");
	refused("tcp6 src-ip ::/0 dst-port 80",
		"flow \"tcp6 src-ip ::/0 dst-port 80\": src-ip ::/0 matches every address: leave src-ip out, or give a prefix length of 1 or more");
	refused("dst-ip 10.0.0.1 src-ip ::1",
		"flow \"dst-ip 10.0.0.1 src-ip ::1\": src-ip ::1 is IPv6 but the flow is IPv4");
	refused("tcp6 dst-ip 10.0.0.1",
		"flow \"tcp6 dst-ip 10.0.0.1\": dst-ip 10.0.0.1 is IPv4 but the flow is IPv6");
	refused("dst-ip ::1 tcp4",
		"flow \"dst-ip ::1 tcp4\": tcp4 but dst-ip ::1 is IPv6");
}

static void test_numbers(void **state)
{
	refused("dst-port 70000", "flow \"dst-port 70000\": port \"70000\" is not 1..65535");
	refused("dst-port 0", "flow \"dst-port 0\": port \"0\" is not 1..65535");
	refused("src-port 12ab", "flow \"src-port 12ab\": port \"12ab\" is not 1..65535");
	refused("src-port -1", "flow \"src-port -1\": port \"-1\" is not 1..65535");
	refused("dst-port 1 queue 4096", "flow \"dst-port 1 queue 4096\": queue \"4096\" is not 0..4095");
	refused("dst-port 1 queue x", "flow \"dst-port 1 queue x\": queue \"x\" is not 0..4095");
}

static void test_null(void **state)
{
	struct devmemtcp_flow f;

	/* ERRORS devmemtcp_flow_parse EINVAL */
	assert_int_equal(devmemtcp_flow_parse(NULL, &f), -EINVAL);
	assert_string_equal(devmemtcp_ctx_errmsg(NULL),
			    "devmemtcp_flow_parse: text or flow is NULL");
	assert_int_equal(devmemtcp_flow_parse("dst-port 1", NULL), -EINVAL);
	assert_string_equal(devmemtcp_ctx_errmsg(NULL),
			    "devmemtcp_flow_parse: text or flow is NULL");
}

static void test_accepted(void **state)
{
	struct devmemtcp_flow f;
	uint8_t want[16] = { 10, 1, 0, 0 };

	assert_int_equal(devmemtcp_flow_parse("tcp4 dst-ip 10.1.2.3/16 dst-port 5201 queue 2", &f), 0);
	assert_int_equal(f.family, AF_INET);
	assert_memory_equal(f.dst_addr, want, 4);
	assert_int_equal(f.dst_mask[0], 0xff);
	assert_int_equal(f.dst_mask[1], 0xff);
	assert_int_equal(f.dst_mask[2], 0);
	assert_int_equal(f.dst_port, 5201);
	assert_int_equal(f.dst_port_mask, 0xffff);
	assert_int_equal(f.queue, 2);
	assert_int_equal(f.flags, DEVMEMTCP_FLOW_QUEUE);
	/* ports only: IPv4, as ethtool's tcp4 */
	assert_int_equal(devmemtcp_flow_parse("src-port 1 dst-port 65535", &f), 0);
	assert_int_equal(f.family, AF_INET);
	assert_int_equal(devmemtcp_flow_parse("dst-ip fd77::2/64", &f), 0);
	assert_int_equal(f.family, AF_INET6);
}

/* The message is the calling thread's: another thread's failure does not
 * replace it. */
static void *other_thread(void *arg)
{
	struct devmemtcp_flow f;

	(void)devmemtcp_flow_parse("dst-port 99999", &f);
	return (void *)(intptr_t)strcmp(devmemtcp_ctx_errmsg(NULL),
					"flow \"dst-port 99999\": port \"99999\" is not 1..65535");
}

static void test_message_per_thread(void **state)
{
	pthread_t t;
	void *r;

	refused("dst-port 0", "flow \"dst-port 0\": port \"0\" is not 1..65535");
	assert_int_equal(pthread_create(&t, NULL, other_thread, NULL), 0);
	pthread_join(t, &r);
	assert_int_equal((intptr_t)r, 0);
	assert_string_equal(devmemtcp_ctx_errmsg(NULL),
			    "flow \"dst-port 0\": port \"0\" is not 1..65535");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_words),
		cmocka_unit_test(test_repeated_words),
		cmocka_unit_test(test_addresses),
		cmocka_unit_test(test_numbers),
		cmocka_unit_test(test_null),
		cmocka_unit_test(test_accepted),
		cmocka_unit_test(test_message_per_thread),
	};

	return cmocka_run_group_tests_name("flow", tests, NULL, NULL);
}

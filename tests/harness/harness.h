/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * The test harness: one static library (tests/harness, built once) that
 * the host, vm and gpu tests link.  This header only declares; the parts for
 * the NIC-layer vm tests and the devmem TX vm tests are in harness-nic.h and
 * harness-tx.h.  The cmocka suites (unit, host, gpu) keep cmocka's asserts
 * and use the harness for their environment.
 *
 * Exit convention of the programs that are not cmocka suites: a check that
 * does not hold prints "FAIL file:line: condition: message" on stderr and
 * makes its function return T_EXIT_FAIL; callers pass a non-zero result up
 * (T_TRY) until main() returns it.  T_EXIT_SKIP (77) only where what the
 * test needs is absent, with the reason printed.
 */
#ifndef DEVMEMTCP_HARNESS_H
#define DEVMEMTCP_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct devmemtcp_ctx;
struct devmemtcp_buf;
struct devmemtcp_probe;
struct devmemtcp_probe_problem;

enum t_exit {
	T_EXIT_PASS = 0,
	T_EXIT_FAIL = 1,
	T_EXIT_SKIP = 77,
};

/* Unless cond holds: print where, the condition and the message (with the
 * values), and return T_EXIT_FAIL from the calling function. */
#define T_CHECK(cond, ...)                                                     \
	do {                                                                   \
		if (!(cond))                                                   \
			return t_failed(__FILE__, __LINE__, #cond, __VA_ARGS__);\
	} while (0)

/* Return a helper's non-zero T_EXIT_* result from the calling function. */
#define T_TRY(call)                                                            \
	do {                                                                   \
		int t_try_ = (call);                                           \
		if (t_try_)                                                    \
			return t_try_;                                         \
	} while (0)

/* Print "SKIP: why" and return T_EXIT_SKIP from the calling function. */
#define T_SKIP(...) return t_skipped(__VA_ARGS__)

int t_failed(const char *file, int line, const char *cond, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
int t_skipped(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "program: message" on stdout, flushed (progress and results). */
void t_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A log_fn that drops the library's messages. */
void t_quiet(void *user, int level, const char *msg);

/* ---- this machine ---------------------------------------------------- */

/* The running kernel's release, and its version as major * 100 + minor
 * (6.12 -> 612, 7.3 -> 703): the one parser the tests use. */
const char *t_kernel_release(void);
int t_kernel_version(void);
/* This process's name as the kernel has it (/proc/self/comm). */
const char *t_own_comm(void);
/* Open file descriptors of this process (leak checks). */
int t_count_fds(void);
/* Seconds on the monotonic clock. */
double t_now(void);
/* The next number of a xorshift64 sequence (*state 0: a fixed seed):
 * reproducible random orders; print the seed. */
uint64_t t_rand(uint64_t *state);
/* "64M" -> 67108864 (K, M, G suffixes, either case). */
uint64_t t_parse_bytes(const char *s);

/* Run a shell command built from fmt; its exit status (1 when killed). */
int t_run(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Run a shell command; its stdout (and what the command line sends there)
 * in out, NUL-terminated; its exit status, -1 when it did not exit. */
int t_capture(char *out, size_t len, const char *cmd);

/* ---- library objects --------------------------------------------------- */

/* A udmabuf of size bytes in *buf: 0, or the library's negative errno
 * after printing "udmabuf of N bytes: <the library's message>". */
int t_udmabuf(struct devmemtcp_ctx *ctx, uint64_t size, struct devmemtcp_buf **buf);
/* The same from provider (DEVMEMTCP_PROVIDER_UDMABUF or _DRM: a dumb
 * buffer of the first DRM device that can), printing "<provider> buffer of
 * N bytes: <message>" on failure. */
int t_buf(struct devmemtcp_ctx *ctx, uint32_t provider, uint64_t size,
	  struct devmemtcp_buf **buf);
/* The value of "key:" in /proc/self/fdinfo/<fd> (a dma-buf's exp_name,
 * name, size) into value: 0, or -1 when fd has no such line. */
int t_fdinfo(int fd, const char *key, char *value, size_t len);

/* A buffer of size bytes over a new memfd through the import provider:
 * no CPU mapping, so device memory as far as the library can tell.  The
 * memfd (in *memfd, -1 on failure) stays the caller's: close it after
 * freeing the buffer.  0 or a negative errno. */
int t_memfd_buf(struct devmemtcp_ctx *ctx, uint64_t size, int *memfd,
		struct devmemtcp_buf **buf);

/* The problem of a probe result whose text is what, or NULL. */
const struct devmemtcp_probe_problem *t_probe_problem(const struct devmemtcp_probe *p,
						      const char *what);

/* ---- the host suite: a private namespace with a veth pair --------------- */

/* Enter a new network and mount namespace (sysfs of the new network
 * namespace mounted), bring lo up and create veth va (4 RX, 3 TX queues)
 * with its peer vb, both up; the ifindex of va in *va unless va is NULL.
 * 0, T_EXIT_SKIP when this is not root, T_EXIT_FAIL (printed). */
int host_netns(int *va);

/* ---- the vm suite's network ---------------------------------------------
 * In the QEMU guest with the simulated NIC: the sender device (dsim0) in
 * network namespace "dmtA" with 10.77.0.1/24 and fd77::1/64, the receiver
 * (dsim1) in "dmtB" with 10.77.0.2/24 and fd77::2/64.  Threads and
 * processes switch namespaces with vm_enter(). */
#define VM_TX_NS "dmtA"
#define VM_RX_NS "dmtB"
#define VM_TX_IF "dsim0"
#define VM_RX_IF "dsim1"
#define VM_TX_ADDR4 "10.77.0.1"
#define VM_RX_ADDR4 "10.77.0.2"
#define VM_TX_ADDR6 "fd77::1"
#define VM_RX_ADDR6 "fd77::2"

/* Build the topology with tx_if and rx_if as the two devices, unless the
 * namespaces are there already.  A previous test's namespaces are deleted
 * asynchronously: their devices come back a moment later, so this waits up
 * to 15 s for both.  1: built here, 0: was there, -1: failed (printed). */
int vm_topology(const char *tx_if, const char *rx_if);
/* Delete the namespaces; their devices go back to the initial namespace. */
void vm_topology_remove(void);
/* Move the calling thread into namespace ns; 0 or -1 (errno). */
int vm_enter(const char *ns);
/* Write a debugfs knob of the simulated NIC, e.g. ("dsim1", "corrupt_offset", 5). */
int vm_sim_knob(const char *ifname, const char *knob, unsigned long long v);

/* ---- sockets ------------------------------------------------------------ */

/* addr (IPv4 or IPv6 literal) and port as a socket address; the family,
 * or -1 when addr is neither. */
int t_sockaddr(const char *addr, int port, struct sockaddr_storage *ss, socklen_t *len);
/* A listening TCP socket on addr:port in the current namespace, or -1
 * (printed). */
int t_listen(const char *addr, int port);
/* A TCP connection to addr:port, bound to device bind_dev unless NULL;
 * retried for 10 s while the peer is not listening yet.  The fd, or -1
 * (printed). */
int t_connect(const char *addr, int port, const char *bind_dev);
/* A connected TCP pair over 127.0.0.1 in the current namespace (sv[0] the
 * connecting side, sv[1] the accepted one): 0, or -1 (printed). */
int t_tcp_pair(int sv[2]);
/* Write bytes of the stream pattern (period) to fd; 0, or -1 (printed). */
int t_send_pattern(int fd, uint64_t bytes, unsigned int period);
/* An AF_XDP socket bound to RX queue queue of ifindex in copy mode: its
 * buffer pool is registered at the queue as a zero-copy one's would be.
 * The fd (close it to unbind), or -1 (printed). */
int t_xsk_bind(int ifindex, uint32_t queue);

/* Send bytes of the pattern to addr:port from namespace VM_TX_NS in a
 * thread; vm_send_wait() joins it and returns 0 when every byte was
 * written. */
struct vm_sender;
struct vm_sender *vm_send_start(const char *addr, int port, uint64_t bytes,
				unsigned int period);
int vm_send_wait(struct vm_sender *s);

/* One flow through the vm topology: listen on addr:port in this namespace,
 * run rx(listening fd, arg) in a thread, send bytes of the pattern (period)
 * from VM_TX_NS, wait for both.  0, or T_EXIT_FAIL (printed) when listening
 * or sending failed; what the receiver found is rx's to report in arg. */
int vm_transfer(const char *addr, int port, uint64_t bytes, unsigned int period,
		void (*rx)(int lfd, void *arg), void *arg);

/* ---- programs made of named tests --------------------------------------- */

struct t_named {
	const char *name;
	int (*fn)(void);
};

/* Run the test named which ("all": every one) with "--- name" and
 * "PASS|FAIL name" lines, then "prog: N passed, N failed".  T_EXIT_PASS,
 * T_EXIT_FAIL, or 2 when no test has that name. */
int t_run_named(const char *prog, const struct t_named *tests, size_t n,
		const char *which);

#endif

/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * Test toolkit: what the fork tests share.  DMT_FORK_REFUSED is the
 * message a call on a parent's handle gets in a forked child (WHAT names
 * the handle: "receiver", "TX handle", "GPU handle", ...); CHILD_CHECK is
 * an assertion for the child's side, which exits with the failing line's
 * number (cmocka's assertions would unwind into the parent's test).
 */
#ifndef DMT_TEST_FORKFIXTURE_H
#define DMT_TEST_FORKFIXTURE_H

#include <stdio.h>
#include <unistd.h>

#define DMT_FORK_REFUSED(fn, what)                                             \
	fn ": this " what " was made by a parent of this process (inherited across fork()): a child never receives on, releases tokens of, or undoes the NIC setup of its parent's handles, which stay the parent's; make new ones in the child"

/* In a child: a check that failed exits with its line number. */
#define CHILD_CHECK(cond)                                                      \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr, "child %d: %s:%d: %s\n", (int)getpid(),  \
				__FILE__, __LINE__, #cond);                    \
			_exit(__LINE__ & 0x7f ? __LINE__ & 0x7f : 1);          \
		}                                                              \
	} while (0)

#endif

/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/* Private to the extension's object files: what every handle type shares. */
#ifndef DMT_PY_COMMON_H
#define DMT_PY_COMMON_H

#include <stddef.h>

#include "dmt.h"

/* Every object type starts like this: its core right after the header. */
typedef struct {
	PyObject_HEAD
	struct core *core;
} AnyObject;

/* close(), __enter__, __exit__, closed: shared by every handle type. */
PyObject *dmtpy_any_close(PyObject *self, PyObject *unused);
PyObject *dmtpy_any_enter(PyObject *self, PyObject *unused);
PyObject *dmtpy_any_exit(PyObject *self, PyObject *args);
PyObject *dmtpy_any_closed(PyObject *self, void *closure);
void dmtpy_any_dealloc(PyObject *self);

#define DMT_CLOSE_DOC(WHAT, EXTRA)                                             \
	"close($self, /)\n--\n\n"                                              \
	"Close the " WHAT ": " EXTRA "  A call already running on it (on\n"   \
	"another thread) finishes first; what it uses is freed when it returns.\n" \
	"Further use raises ValueError.  Safe to call twice."

#define DMT_ENTER_METHOD                                                       \
	{ "__enter__", dmtpy_any_enter, METH_NOARGS,                             \
	  "__enter__($self, /)\n--\n\nReturn self." }
#define DMT_CM_METHODS(CLOSE_DOC)                                              \
	{ "close", dmtpy_any_close, METH_NOARGS, CLOSE_DOC },                     \
	DMT_ENTER_METHOD,                                                      \
	{ "__exit__", dmtpy_any_exit, METH_VARARGS,                              \
	  "__exit__($self, *exc, /)\n--\n\nclose()." }

#define DMT_CLOSED_GETSET                                                      \
	{ "closed", dmtpy_any_closed, NULL, "True once close() was called.", NULL }

/* A struct of uint64_t counters (after size_t sz) as a dict. */
struct dmt_field {
	const char *name;
	size_t off;
	char kind;	/* 'Q' uint64_t, 'I' uint32_t, 'i' int, 'q' int64_t, 'b' bool, 's' char[] */
};
#define DMT_F(T, name, kind) { #name, offsetof(T, name), kind }
PyObject *dmtpy_fields_dict(const void *s, const struct dmt_field *f, size_t n);

/* __init__ runs once: 0, or -1 with RuntimeError when it ran already. */
static inline int dmt_fresh(PyObject *self, const char *what)
{
	if (!((AnyObject *)self)->core)
		return 0;
	PyErr_Format(PyExc_RuntimeError, "%s is already initialised", what);
	return -1;
}

/* The handle's own descriptor of a socket (object or descriptor): the
 * socket stays open, and its tokens valid, for as long as anything holds
 * the handle.  -1 with an exception set. */
int dmtpy_dup_sock(PyObject *sock);
/* A handle constructor failed (ret < 0) or its core could not be
 * allocated (ret 0): close our descriptor, raise, return -1. */
int dmtpy_new_failed(int ret, struct ctx_core *ctx, int fd);

/* Refuse use of a closed object: returns its core or NULL with ValueError. */
static inline void *dmt_core(PyObject *self, const char *what)
{
	void *c = ((AnyObject *)self)->core;

	if (!c)
		dmtpy_closed(what);
	return c;
}

/* The same with a reference of the caller's own, for a call that uses the
 * core while other code may run (see dmt.h): core_put() when done. */
static inline void *dmt_core_get(PyObject *self, const char *what)
{
	struct core *c = dmt_core(self, what);

	if (c)
		core_get(c);
	return c;
}

#endif

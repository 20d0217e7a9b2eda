// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * Test builds only (-Dtest_hooks=true): points where a call that released
 * the GIL can be held while another thread acts on the same objects, so
 * that the tests force a race instead of hoping for it, and a count of the
 * cores freed, so that they can tell when a close() took effect.  Installed
 * builds compile neither (dmt.h makes both no-ops).
 *
 * One point is armed at a time: _test_park(name) arms it; the next thread
 * to reach dmtpy_test_point(name) parks there until _test_resume().
 */
#include "common.h"

#if DMT_PY_TEST_HOOKS
#include <errno.h>
#include <string.h>
#include <time.h>

enum { TP_IDLE, TP_ARMED, TP_PARKED, TP_GO };

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int state;
	char point[64];
	unsigned long parked;		/* threads that parked so far */
	struct {
		const char *what;
		unsigned long n;
	} freed[16];
} tp = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };

void dmtpy_test_point(const char *name)
{
	pthread_mutex_lock(&tp.lock);
	if (tp.state == TP_ARMED && !strcmp(tp.point, name)) {
		tp.state = TP_PARKED;
		tp.parked++;
		pthread_cond_broadcast(&tp.cond);
		while (tp.state == TP_PARKED)
			pthread_cond_wait(&tp.cond, &tp.lock);
		tp.state = TP_IDLE;
		pthread_cond_broadcast(&tp.cond);
	}
	pthread_mutex_unlock(&tp.lock);
}

void dmtpy_test_freed(const char *what)
{
	size_t i;

	pthread_mutex_lock(&tp.lock);
	for (i = 0; i < 16 && tp.freed[i].what && strcmp(tp.freed[i].what, what); i++)
		;
	if (i < 16) {
		tp.freed[i].what = what;
		tp.freed[i].n++;
	}
	pthread_mutex_unlock(&tp.lock);
}

/* Wait (without the GIL) until state is one of want, at most timeout_s;
 * returns whether it is. */
static bool wait_state(int want1, int want2, double timeout_s)
{
	struct timespec end;
	bool ok;

	clock_gettime(CLOCK_REALTIME, &end);
	end.tv_sec += (time_t)timeout_s;
	end.tv_nsec += (long)((timeout_s - (double)(time_t)timeout_s) * 1e9);
	if (end.tv_nsec >= 1000000000L) {
		end.tv_sec++;
		end.tv_nsec -= 1000000000L;
	}
	Py_BEGIN_ALLOW_THREADS
	pthread_mutex_lock(&tp.lock);
	while (tp.state != want1 && tp.state != want2 &&
	       pthread_cond_timedwait(&tp.cond, &tp.lock, &end) != ETIMEDOUT)
		;
	ok = tp.state == want1 || tp.state == want2;
	pthread_mutex_unlock(&tp.lock);
	Py_END_ALLOW_THREADS
	return ok;
}

static PyObject *test_park(PyObject *mod, PyObject *args)
{
	const char *name;

	if (!PyArg_ParseTuple(args, "s:_test_park", &name))
		return NULL;
	if (strlen(name) >= sizeof(tp.point)) {
		PyErr_SetString(PyExc_ValueError, "test point name too long");
		return NULL;
	}
	/* a thread let go by the last _test_resume() may still be leaving */
	if (!wait_state(TP_IDLE, TP_IDLE, 10)) {
		PyErr_SetString(PyExc_RuntimeError, "a test point is armed or held already");
		return NULL;
	}
	pthread_mutex_lock(&tp.lock);
	snprintf(tp.point, sizeof(tp.point), "%s", name);
	tp.state = TP_ARMED;
	pthread_mutex_unlock(&tp.lock);
	Py_RETURN_NONE;
}

static PyObject *test_wait_parked(PyObject *mod, PyObject *args)
{
	double timeout = 10;

	if (!PyArg_ParseTuple(args, "|d:_test_wait_parked", &timeout))
		return NULL;
	return PyBool_FromLong(wait_state(TP_PARKED, TP_PARKED, timeout));
}

/* Let the parked thread go and wait until it left the point, or disarm a
 * point nobody reached; returns whether a thread was parked. */
static PyObject *test_resume(PyObject *mod, PyObject *unused)
{
	bool was_parked;

	pthread_mutex_lock(&tp.lock);
	was_parked = tp.state == TP_PARKED;
	tp.state = was_parked ? TP_GO : TP_IDLE;
	pthread_cond_broadcast(&tp.cond);
	pthread_mutex_unlock(&tp.lock);
	if (was_parked && !wait_state(TP_IDLE, TP_IDLE, 10)) {
		PyErr_SetString(PyExc_RuntimeError, "the thread let go did not leave its test point");
		return NULL;
	}
	return PyBool_FromLong(was_parked);
}

static PyObject *test_freed(PyObject *mod, PyObject *unused)
{
	PyObject *d = PyDict_New();

	pthread_mutex_lock(&tp.lock);
	for (size_t i = 0; d && i < 16 && tp.freed[i].what; i++) {
		PyObject *v = PyLong_FromUnsignedLong(tp.freed[i].n);

		if (!v || PyDict_SetItemString(d, tp.freed[i].what, v))
			Py_CLEAR(d);
		Py_XDECREF(v);
	}
	pthread_mutex_unlock(&tp.lock);
	return d;
}

PyMethodDef dmtpy_test_methods[] = {
	{ "_test_park", test_park, METH_VARARGS,
	  "_test_park(point, /)\n--\n\n"
	  "Test builds: the next thread to reach the named point parks there,\n"
	  "without the GIL, until _test_resume()." },
	{ "_test_wait_parked", test_wait_parked, METH_VARARGS,
	  "_test_wait_parked(timeout=10, /)\n--\n\n"
	  "Test builds: wait until a thread parked at the armed point; False on timeout." },
	{ "_test_resume", test_resume, METH_NOARGS,
	  "_test_resume($module, /)\n--\n\n"
	  "Test builds: let the parked thread go (or disarm); True if one was parked." },
	{ "_test_freed", test_freed, METH_NOARGS,
	  "_test_freed($module, /)\n--\n\n"
	  "Test builds: how many cores of each kind were freed, as a dict." },
	{ NULL, NULL, 0, NULL },
};
#endif

// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * A NIC handle's steps in its owner file (lib/nic/nic.h, "between the
 * files of the setup"): saving the owner as it now is, marking it closed,
 * the file that must still be the handle's own, and the messages and hints
 * of a handle whose file went stale; an operation on an open handle
 * (begun, its owners loaded, the dead ones cleaned).  The transaction that calls them is
 * nic.c; the file formats journal.c, the files rundir.c.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf/buf.h"
#include "core/privops.h"
#include "netdev.h"
#include "nic.h"
#include "core/uapi.h"

/* ---------------------------------------------------------------------- */
/* steps, journal                                                          */

uint64_t dmt_nic_nl_rt(const struct devmemtcp_nic *nic)
{
	return nic->nl ? nic->nl->round_trips : 0;
}

int dmt_nic_save(struct devmemtcp_nic *nic, struct dmt_op *op)
{
	char *text;
	size_t len;
	int err = dmt_op_save_owner(op, &nic->me, &text, &len);

	if (err < 0)
		return err;
	free(nic->text);
	nic->text = text;
	nic->text_len = len;
	nic->saved = true;
	nic->marked = nic->me.closed;
	return 0;
}

/* This owner is gone although its process lives: its file says closed,
 * so that the next operation of anyone undoes what is left.  Without
 * the memory to write what is left, the text written last is marked: it
 * has everything on the device (each change is written before it is
 * made), and what is gone since is found gone. */
int dmt_nic_mark_closed(struct devmemtcp_nic *nic, struct dmt_op *op)
{
	struct dmt_err why = nic->eerr;
	int err;

	nic->me.closed = true;
	if (!nic->saved)
		return 0;
	err = dmt_nic_save(nic, op);
	if (err == -ENOMEM)
		err = dmt_owner_write_closed(&op->rd, nic->name, nic->text,
					     nic->text_len, &nic->eerr);
	if (err < 0)
		return err;
	nic->marked = true;
	nic->eerr = why;	/* the failure that made this necessary */
	return 0;
}

/* "this handle's setup of eth0 was undone by someone else (...): its
 * file DIR/NAME is gone or no longer what it wrote" */
void dmt_nic_stale_msg(const struct devmemtcp_nic *nic, const struct dmt_op *op,
		      char *buf, size_t len)
{
	if (snprintf(buf, len,
		     "this handle's setup of %s was undone by someone else (devmemtcp restore --all, say): "
		     "its file %s/%s is gone or no longer what it wrote",
		     nic->eth.ifname, op->rd.path, nic->name) < 0)
		buf[0] = '\0';
}

/* Nothing of this owner is on the device any more. */
static void forget_steering(struct dmt_owner *me)
{
	for (uint32_t i = 0; i < me->nrules; i++)
		free(me->rules[i].before);
	free(me->rules);
	me->rules = NULL;
	me->nrules = 0;
	free(me->ctx_before);
	me->ctx_before = NULL;
	me->nctx_before = 0;
	me->ctx = DMT_CTX_NONE;
}

/*
 * Under the lock: is this owner's file still what it last wrote?  Someone
 * else may have undone its setup since (restore --all; the next operation
 * after a failed one marked it closed): then what the file records now,
 * nothing when it is gone, is all that is this owner's, and a rule where
 * its rule was may be another owner's identical one.  0 when the file is
 * as written (or was never written); 1 when it is not, or was not before
 * (nic->stale), nic->me then being what the file records; or a negative
 * errno (message on nic->eerr).
 */
int dmt_nic_own_file(struct devmemtcp_nic *nic, struct dmt_op *op)
{
	struct dmt_owner o;
	char *text;
	size_t len;
	int ret;

	if (!nic->saved)
		return nic->stale;
	ret = dmt_file_same(&op->rd, nic->name, nic->text, nic->text_len, &nic->eerr);
	if (ret == 1)
		return nic->stale;
	if (ret == 0)
		ret = dmt_op_load_owner(op, nic->name, &o);
	if (ret == -ENOENT) {
		forget_steering(&nic->me);
		nic->saved = false;
		nic->stale = true;
		return 1;
	}
	if (ret < 0)
		return ret;
	/* rewritten by whoever undid part of it: that is what is left */
	ret = dmt_owner_format(&o, &text, &len);
	if (ret < 0) {
		dmt_owner_free(&o);
		return dmt_err_set(&nic->eerr, ret, "reading %s/%s: out of memory",
				   op->rd.path, nic->name);
	}
	dmt_owner_free(&nic->me);
	nic->me = o;
	free(nic->text);
	nic->text = text;
	nic->text_len = len;
	nic->marked = o.closed;
	nic->stale = true;
	return 1;
}

/* Who finishes what a failed open or close left. */
void dmt_nic_finish_hint(const struct devmemtcp_nic *nic, char *buf, size_t len)
{
	const char *ifname = nic->eth.ifname;

	if (nic->saved && !nic->marked)	/* an owner whose process lives */
		snprintf(buf, len,
			 "the next open or close on %s after this process ends, or 'devmemtcp restore --all %s', finishes it",
			 ifname, ifname);
	else
		snprintf(buf, len,
			 "the next open or close on %s, or 'devmemtcp restore %s', finishes it",
			 ifname, ifname);
}

/* Compose "what failed" on ctx from nic->eerr. */
int dmt_nic_report(struct devmemtcp_nic *nic, int code, const char *what)
{
	return dmt_err(nic->ctx, &nic->ctx->err, code, "%s: %s", what,
		       nic->eerr.msg[0] ? nic->eerr.msg : dmt_errno_name(code));
}

/* Lock for an operation on a live handle; the message on the handle. */
int dmt_nic_handle_op(struct devmemtcp_nic *nic, struct dmt_op *op)
{
	int err = dmt_op_begin(op, nic->ctx, &nic->eth, nic->nl, nic->run_dir,
			       &nic->eerr);

	if (!err)
		err = dmt_op_load(op, nic->name);
	if (!err && dmt_op_clean(op, false) < 0)
		dmt_op_report(op, "%s", nic->eerr.msg);
	op->nrx = nic->nrx;
	return err;
}

/* For add_flow and remove_flow: -ESTALE when someone else undid this
 * owner's setup (dmt_nic_own_file). */
int dmt_nic_check_own_file(struct devmemtcp_nic *nic, struct dmt_op *op)
{
	char msg[DMT_ERRMSG_MAX];
	int ret = dmt_nic_own_file(nic, op);

	if (ret <= 0)
		return ret;
	dmt_nic_stale_msg(nic, op, msg, sizeof(msg));
	return dmt_err_set(&nic->eerr, -ESTALE, "%s; close the handle and open a new one", msg);
}

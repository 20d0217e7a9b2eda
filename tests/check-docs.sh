#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
# The man pages, the installed header and the examples say what the
# library does: roff that renders, prototypes with their return types, no
# leftover markers, the errnos and facts the pages must state, examples
# that print the right object's message.
# usage: check-docs.sh SRCDIR
set -u
src=$1
fail=0
pages=$(ls "$src"/man/*.[0-9] "$src"/man/man*/*.[0-9])

# a request in the middle of a line prints literally (".B log_fn")
if grep -n '^[^.].*[[:space:]]\.\(B\|I\|BI\|BR\|IR\|RB\|RI\)[[:space:]]' $pages; then
	echo "check-docs: roff requests in the middle of a line (above) print literally: start a line with them"
	fail=1
fi
# a SYNOPSIS prototype starts with its return type
if grep -n '^\.BI "devmemtcp_' "$src"/man/man3/*.3; then
	echo "check-docs: prototypes without a return type (above)"
	fail=1
fi
if grep -n '@@' "$src/include/devmemtcp.h"; then
	echo "check-docs: markers left in the installed header (above)"
	fail=1
fi

# ERRORS entries the functions can return: page errno
while read -r page errno; do
	sed -n '/^\.SH ERRORS/,/^\.SH /p' "$src/man/man3/$page.3" |
		grep -q "^\.BR\{0,1\} .*\b$errno\b" ||
		{ echo "check-docs: $page(3) does not document $errno in ERRORS"; fail=1; }
done <<'LIST'
devmemtcp_bind_rx E2BIG
devmemtcp_bind_tx EOPNOTSUPP
devmemtcp_nic_open ENOENT
devmemtcp_nic_recover ENOENT
LIST

# facts a page must state: page, then the words that state it
while IFS='|' read -r page words; do
	grep -q "$words" "$src/man/man3/$page.3" ||
		{ echo "check-docs: $page(3) does not say \"$words\""; fail=1; }
done <<'LIST'
devmemtcp_buf_new|the fd stays the caller's
devmemtcp_rx_release_after|If done returns a negative errno
devmemtcp_rx_free|before closing the socket
devmemtcp_rx_new|before closing the socket
devmemtcp_rx_release|token number
LIST

# examples: a failed devmemtcp_rx_add_buf is explained by the handle's
# message, not the context's
for f in "$src"/examples/*.c; do
	awk -v f="${f##*/}" '
		/devmemtcp_rx_add_buf\(/ { want = NR }
		want && /fprintf\(stderr/ {
			if ($0 !~ /devmemtcp_rx_errmsg/ && getline && $0 !~ /devmemtcp_rx_errmsg/) {
				print "check-docs: " f ":" want ": a failed devmemtcp_rx_add_buf prints another object'"'"'s message"
				bad = 1
			}
			want = 0
		}
		END { exit bad }' "$f" || fail=1
done

# the environment: what the library reads in every build is documented in
# devmemtcp(7); what only test builds read (lib/core/testhooks.h) is never
# presented as working in an installed library
vars() { grep -ho "$1(\"DEVMEMTCP_[A-Z_]*\"" "$src"/lib/*.c | grep -o 'DEVMEMTCP_[A-Z_]*' | sort -u; }
for v in $(vars secure_getenv); do
	sed -n '/^\.SH ENVIRONMENT/,/^\.SH /p' "$src/man/devmemtcp.7" | grep -q "$v" ||
		{ echo "check-docs: devmemtcp(7) ENVIRONMENT does not document $v"; fail=1; }
done
hooks=$(vars 'dmt_hook_env\(_int\)\{0,1\}'; vars dmt_hook_delay)
for p in $pages; do
	awk -v hooks="$hooks" -v f="${p#"$src"/}" '
		function check() {
			for (h in hv)
				if (para ~ hv[h] && para !~ /[Tt]est builds/) {
					print "check-docs: " f ":" start ": " hv[h] " is read only by test builds (-Dtest_hooks=true): say so where it is mentioned"
					bad = 1
				}
		}
		BEGIN { n = split(hooks, hv, "\n") }
		/^\.(TP|PP|SH|SS|P|LP)/ { check(); para = ""; start = NR }
		{ para = para " " $0 }
		END { check(); exit bad }' "$p" || fail=1
done

[ $fail = 0 ] && echo "check-docs: man pages, header and examples say what the library does"
exit $fail

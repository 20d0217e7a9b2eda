#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
"""Every error a man page documents has a test, and ERRORS sections only grow.

The pages: each .TP entry of the ERRORS section of man/man3/FUNCTION.3 names
one or more errnos (".B EINVAL", ".BR ENOENT \", \" ENOTDIR", ".B EBADF,
ENOTSOCK"); each is a documented pair (FUNCTION, ERRNO).  An entry that names
no errno ("any errno of a done function") is the pair (FUNCTION, ANY): its
test makes the callee fail with an errno of its own and asserts that one.

The tests: a test that asserts a function's errno and its message carries a
tag comment on the line of the assertion or just above it:

    /* ERRORS devmemtcp_rx_new EPROTOTYPE */      C (tests/, nccl/tests/)
    # ERRORS devmemtcp_nic_open ENODEV            Python, shell (python/tests/)

A tag may name several errnos of one function.  The errno's name and a
quoted string or a name with "msg" or "message" in it (the message the
test compares) must appear within WINDOW lines of the tag, so a tag cannot
drift away from its assertion unnoticed.  A tag in a suite that skips here
(gpu, vm) counts all the same: the pair is covered where that suite runs.

The baseline (tests/errors-baseline.txt, sorted "FUNCTION ERRNO" lines) is
what the pages documented when it was last written: a pair in it that the
pages no longer document fails the check (ERRORS sections may only grow), and
so does a documented pair missing from it.  --update rewrites it from the
pages and says what it added and dropped.  A pair that left the pages
because the function cannot return it is recorded in the baseline as

    # dropped FUNCTION ERRNO: why the function cannot return it

--update writes that line without the reason, and the check fails until
the reason is written (the commit says it too); --update keeps the lines.

usage: check-errors.py SRCDIR [--update] [--list]
  --update  rewrite the baseline from the pages
  --list    print every documented pair and the tags that cover it
"""
import errno as errno_mod
import os
import re
import sys

WINDOW = 8
TAG_DIRS = ('tests', 'python/tests', 'nccl/tests')
TAG_EXTS = ('.c', '.h', '.cpp', '.cu', '.py', '.sh')
BASELINE = 'tests/errors-baseline.txt'
KNOWN = {n for n in dir(errno_mod) if n.startswith('E')} | {'ANY'}

ERRNO_RE = re.compile(r'\bE[A-Z0-9]{2,}\b')
TAG_RE = re.compile(r'(?:/\*|//|#)[ \t]*ERRORS[ \t]+(devmemtcp_[a-z0-9_]+)((?:[ \t,]+(?:E[A-Z0-9]+|ANY))+)[ \t]*(?:\*/|$)', re.M)
MESSAGE_RE = re.compile(r'"[^"]{4,}|\'[^\']{4,}|msg|message', re.I)


def page_pairs(src, problems):
    """{(function, errno): 'page:line'} from every page's ERRORS entries."""
    pairs = {}
    mandir = os.path.join(src, 'man', 'man3')
    for name in sorted(os.listdir(mandir)):
        if not name.endswith('.3'):
            continue
        func = name[:-2]
        path = os.path.join('man', 'man3', name)
        with open(os.path.join(src, path), encoding='utf-8') as f:
            lines = f.read().split('\n')
        inside = after_tp = False
        for no, line in enumerate(lines, 1):
            if line.startswith('.SH'):
                inside = line.split(None, 1)[1:] == ['ERRORS']
                continue
            if not inside:
                continue
            if line.startswith('.TP'):
                after_tp = True
                continue
            where = '%s:%d' % (path, no)
            label = after_tp
            after_tp = False
            if not label:
                # a label without .TP renders inside the previous entry
                if re.match(r'\.B[RI]?\s+"?E[A-Z0-9]{2,}\b', line):
                    problems.append('%s: an ERRORS entry without .TP before it: %s' % (where, line))
                continue
            names = ERRNO_RE.findall(line)
            for e in names:
                if e not in KNOWN:
                    problems.append('%s: %s is no errno name' % (where, e))
            for e in names or ['ANY']:
                pairs.setdefault((func, e), where)
    return pairs


def test_files(src):
    me = os.path.abspath(__file__)
    for top in TAG_DIRS:
        for root, dirs, files in os.walk(os.path.join(src, top)):
            dirs[:] = sorted(d for d in dirs if d not in ('__pycache__', 'corpus', 'data'))
            for name in sorted(files):
                path = os.path.join(root, name)
                if name.endswith(TAG_EXTS) and os.path.abspath(path) != me:
                    yield path


def test_tags(src, problems):
    """{(function, errno): ['file:line', ...]} from the tests' tag comments."""
    tags = {}
    for path in test_files(src):
        with open(path, encoding='utf-8', errors='replace') as f:
            lines = f.read().split('\n')
        rel = os.path.relpath(path, src)
        for i, line in enumerate(lines):
            if 'ERRORS' not in line:
                continue
            m = TAG_RE.search(line)
            if not m:
                if re.search(r'(?:/\*|//|#)\s*ERRORS\s+devmemtcp_', line):
                    problems.append('%s:%d: a tag is "ERRORS devmemtcp_FUNCTION ERRNO...": %s'
                                    % (rel, i + 1, line.strip()))
                continue
            where = '%s:%d' % (rel, i + 1)
            func = m.group(1)
            # the lines around the tag, other tags left out
            near = TAG_RE.sub('', '\n'.join(lines[max(0, i - WINDOW):i + 1 + WINDOW]))
            if not MESSAGE_RE.search(near):
                problems.append('%s: tag %s: no message is compared within %d lines of it'
                                % (where, func, WINDOW))
            for e in re.split(r'[ \t,]+', m.group(2).strip(' \t,')):
                if e not in KNOWN:
                    problems.append('%s: tag %s %s: no such errno' % (where, func, e))
                    continue
                if e != 'ANY' and not re.search(r'\b%s\b' % e, near):
                    problems.append('%s: tag %s %s: the assertion of %s is not within %d lines of it'
                                    % (where, func, e, e, WINDOW))
                tags.setdefault((func, e), []).append(where)
    return tags


DROPPED_RE = re.compile(r'#\s*dropped\s+(devmemtcp_[a-z0-9_]+)\s+(E[A-Z0-9]+):?[ \t]*(.*)$')


def read_baseline(path):
    """The pairs of the baseline, and {pair: reason} of its dropped lines."""
    base, dropped = set(), {}
    try:
        with open(path, encoding='utf-8') as f:
            for line in f:
                m = DROPPED_RE.match(line.strip())
                if m:
                    dropped[(m.group(1), m.group(2))] = m.group(3).strip()
                elif line.strip() and not line.startswith('#'):
                    base.add(tuple(line.split()))
    except FileNotFoundError:
        pass
    return base, dropped


def main(argv):
    args = [a for a in argv[1:] if not a.startswith('--')]
    flags = {a for a in argv[1:] if a.startswith('--')}
    if len(args) != 1 or flags - {'--update', '--list'}:
        sys.stderr.write(__doc__.split('\n\n')[-1] + '\n')
        return 2
    src = args[0]
    problems = []
    pairs = page_pairs(src, problems)
    tags = test_tags(src, problems)
    basepath = os.path.join(src, BASELINE)
    base, dropped = read_baseline(basepath)
    documented = set(pairs)

    if '--update' in flags:
        for p in base - documented:
            dropped.setdefault(p, '')
        for p in documented:
            dropped.pop(p, None)
        with open(basepath, 'w', encoding='utf-8') as f:
            f.write('# (function, errno) pairs the man pages document: tests/check-errors.py\n')
            f.write('# fails when one disappears.  Rewrite with tests/check-errors.py SRCDIR --update.\n')
            for p in sorted(documented):
                f.write('%s %s\n' % p)
            if dropped:
                f.write('# Pairs the pages no longer document, each with why the function\n')
                f.write('# cannot return it (--update keeps these lines):\n')
            for p in sorted(dropped):
                f.write(('# dropped %s %s: %s' % (p + (dropped[p],))).rstrip() + '\n')
        for p in sorted(documented - base):
            print('added %s %s' % p)
        for p in sorted(base - documented):
            print('dropped %s %s: write in %s and in the commit why it cannot happen'
                  % (p + (BASELINE,)))
        base = documented

    if '--list' in flags:
        for p in sorted(documented):
            print('%s %s: %s' % (p[0], p[1], ' '.join(tags.get(p, [])) or 'NO TEST'))

    for p in sorted(documented):
        if p not in tags:
            problems.append('%s: %s(3) documents %s, no test asserts it (tag: ERRORS %s %s)'
                            % (pairs[p], p[0], p[1], p[0], p[1]))
    for p in sorted(set(tags) - documented):
        for where in tags[p]:
            problems.append('%s: tag %s %s: %s(3) does not document %s'
                            % (where, p[0], p[1], p[0], p[1]))
    for p in sorted(base - documented):
        problems.append('%s: %s %s is gone from %s(3) ERRORS: ERRORS sections only grow '
                        '(where it cannot happen, --update and write why on its dropped line and in the commit)'
                        % (BASELINE, p[0], p[1], p[0]))
    for p in sorted(dropped):
        if not dropped[p]:
            problems.append('%s: dropped %s %s: no reason: say why %s cannot return %s'
                            % (BASELINE, p[0], p[1], p[0], p[1]))
        if p in documented:
            problems.append('%s: %s %s is documented again but recorded as dropped: run %s %s --update'
                            % (BASELINE, p[0], p[1], sys.argv[0], src))
    for p in sorted(documented - base):
        problems.append('%s: %s %s is documented but not in the baseline: run %s %s --update'
                        % (pairs[p], p[0], p[1], sys.argv[0], src))

    for line in problems:
        print('check-errors: ' + line)
    if problems:
        print('check-errors: %d problems; %d of %d documented errors have a test'
              % (len(problems), len(documented & set(tags)), len(documented)))
        return 1
    print('check-errors: %d documented errors of %d functions, each asserted by a test (%d tags)'
          % (len(documented), len({f for f, _ in documented}), sum(len(v) for v in tags.values())))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))

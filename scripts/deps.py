#!/usr/bin/env python3
"""Print who calls whom among distseq's source files, and fail on a loop.

    python3 scripts/deps.py DIR      # DIR holds the built src/*.o

An edge a -> b means that a.o uses a function b.o defines (read from the
symbol tables with nm, so comments and macros do not count).  Variables
(the GUCs in distseq.c, the shared-memory pointer) are shared state, like
the header, and are not edges.  Files are printed from the bottom layer up:
each calls only files printed before it.  Exits 1, naming the functions
that close it, when some files call each other round in a loop.
"""
import collections
import glob
import os
import subprocess
import sys


def symbols(obj, flag):
    out = subprocess.run(['nm', flag, obj], capture_output=True, text=True,
                         check=True).stdout
    return [line.split() for line in out.splitlines()]


def main():
    objs = sorted(glob.glob(os.path.join(sys.argv[1], 'src', '*.o')))
    if not objs:
        sys.exit('no object files under %s/src: build first' % sys.argv[1])
    name = {o: os.path.basename(o)[:-2] for o in objs}
    owner = {}
    for o in objs:
        for p in symbols(o, '--defined-only'):
            if len(p) == 3 and p[1] == 'T':
                owner[p[2]] = name[o]
    uses = collections.defaultdict(set)
    for o in objs:
        for p in symbols(o, '-u'):
            f = owner.get(p[-1])
            if f is not None and f != name[o]:
                uses[name[o]].add((f, p[-1]))
    files = sorted(name.values())
    callees = {f: {t for t, _ in uses[f]} for f in files}

    # strongly connected components (Tarjan), iteratively
    index, low, stack, onstack, comps = {}, {}, [], set(), []
    for root in files:
        if root in index:
            continue
        work = [(root, iter(sorted(callees[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        onstack.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = set()
                    while True:
                        x = stack.pop()
                        onstack.discard(x)
                        comp.add(x)
                        if x == v:
                            break
                    comps.append(comp)
            elif w not in index:
                index[w] = low[w] = len(index)
                stack.append(w)
                onstack.add(w)
                work.append((w, iter(sorted(callees[w]))))
            elif w in onstack:
                low[v] = min(low[v], index[w])

    # Tarjan emits components callees first: that is the layer order
    for comp in comps:
        for f in sorted(comp):
            print('%-10s -> %s' % (f, ' '.join(sorted(callees[f])) or '-'))
    loops = [c for c in comps if len(c) > 1]
    for comp in loops:
        print('loop: %s' % ' '.join(sorted(comp)))
        for f in sorted(comp):
            for t, sym in sorted(uses[f]):
                if t in comp:
                    print('    %s -> %s (%s)' % (f, t, sym))
    sys.exit(1 if loops else 0)


main()

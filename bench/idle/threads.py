#!/usr/bin/env python3
"""Per-thread cost of the `lifeline node` processes of a running `lifeline cluster`.

usage: threads.py BIN NODES [cluster args...]: runs BIN cluster --nodes NODES --duration 12,
snapshots every node's threads (/proc/PID/task/TID: comm, schedstat run time and run count)
4 s and 10 s after the start, and prints per thread name the CPU ms and the runs (times put
on a CPU, i.e. wake-ups) per second per thread, over the real time between the snapshots.
"""
import collections, os, subprocess, sys, time


def children(pid):
    out = []
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                s = open(f"/proc/{p}/stat").read()
            except OSError:
                continue
            if int(s[s.rfind(")") + 2 :].split()[1]) == pid:
                out.append(int(p))
    return out


def snap(pids):
    d = {}
    for p in pids:
        try:
            for t in os.listdir(f"/proc/{p}/task"):
                c = open(f"/proc/{p}/task/{t}/comm").read().strip()
                s = open(f"/proc/{p}/task/{t}/schedstat").read().split()
                d[(p, t, c)] = (time.monotonic(), int(s[0]), int(s[2]))
        except OSError:
            pass
    return d


bin_, n = sys.argv[1], sys.argv[2]
cl = subprocess.Popen([bin_, "cluster", "--nodes", n, "--duration", "12", "--json"] + sys.argv[3:],
                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
time.sleep(4)
pids = children(cl.pid)
a = snap(pids)
time.sleep(6)
b = snap(pids)
cl.wait()
agg = collections.defaultdict(lambda: [0.0, 0.0, 0])
for k, (t1, ns1, r1) in b.items():
    if k in a:
        t0, ns0, r0 = a[k]
        g = agg[k[2]]
        g[0] += (ns1 - ns0) / 1e6 / (t1 - t0)
        g[1] += (r1 - r0) / (t1 - t0)
        g[2] += 1
for c, (ms, runs, k) in sorted(agg.items()):
    print(f"{c:16s} threads {k:4d}  cpu ms/s per thread {ms / k:6.2f}  runs/s per thread {runs / k:6.1f}")

#!/usr/bin/env python3
"""Where a local `lifeline cluster` spends the machine's CPU.

Runs the given `lifeline cluster ...` command; once a second prints the machine's busy share
(/proc/stat) and the cluster process's CPU; at --from and --to seconds after the start it
snapshots every `lifeline node` child: CPU time (utime+stime), threads, the scheduler's run
count summed over its tasks (/proc/PID/task/TID/schedstat, third field: times a task was put
on a CPU, i.e. wake-ups) and voluntary context switches, and prints the per-node averages
over that window. Snapshots are taken only twice: reading 256-512 processes' /proc every
second is itself load on a saturated 2-core machine. The cluster's JSON report goes to --out.

usage: sample.py [--from S] [--to S] [--out FILE] -- lifeline cluster ...
"""
import os, sys, time, subprocess, argparse

TICK = os.sysconf("SC_CLK_TCK")


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def proc_sample(pid):
    stat = read(f"/proc/{pid}/stat")
    if stat is None:
        return None
    fields = stat[stat.rfind(")") + 2 :].split()
    cpu = (int(fields[11]) + int(fields[12])) / TICK
    runs = 0
    vol = 0
    threads = 0
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    for tid in tids:
        s = read(f"/proc/{pid}/task/{tid}/schedstat")
        if s:
            runs += int(s.split()[2])
            threads += 1
        st = read(f"/proc/{pid}/task/{tid}/status")
        if st:
            for line in st.splitlines():
                if line.startswith("voluntary_ctxt_switches"):
                    vol += int(line.split()[1])
    return cpu, runs, vol, threads


def children(pid):
    out = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        s = read(f"/proc/{p}/stat")
        if not s:
            continue
        f = s[s.rfind(")") + 2 :].split()
        if int(f[1]) == pid:
            out.append(int(p))
    return out


def sys_busy():
    f = read("/proc/stat").splitlines()[0].split()[1:]
    v = list(map(int, f))
    idle = v[3] + v[4]
    return sum(v), idle


def snapshot(pids):
    snap = {}
    for pid in pids:
        s = proc_sample(pid)
        if s is not None:
            snap[pid] = (time.monotonic(), s)
    return snap


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--from", dest="t0", type=float, default=8.0)
    ap.add_argument("--to", dest="t1", type=float, default=14.0)
    ap.add_argument("--out", default="/dev/null")
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd and a.cmd[0] == "--" else a.cmd
    start = time.monotonic()
    first = last = None
    pids = []
    with open(a.out, "w") as out:
        cl = subprocess.Popen(cmd, stdout=out)
        prev_sys = sys_busy()
        prev_cl = proc_sample(cl.pid)
        print("t_s sys_busy% cluster_cpu%", file=sys.stderr)
        while cl.poll() is None:
            time.sleep(1.0)
            t = time.monotonic() - start
            if first is None and t >= a.t0:
                pids = children(cl.pid)
                first = snapshot(pids)
            elif first is not None and last is None and t >= a.t1:
                last = snapshot(pids)
            now_sys = sys_busy()
            dt = now_sys[0] - prev_sys[0]
            busy = 100.0 * (1 - (now_sys[1] - prev_sys[1]) / dt) if dt else 0
            prev_sys = now_sys
            c = proc_sample(cl.pid)
            ccpu = 100 * (c[0] - prev_cl[0]) if c and prev_cl else 0
            prev_cl = c
            print(f"{t:5.1f} {busy:5.1f} {ccpu:5.1f}", file=sys.stderr)
    rows = []
    for pid, (t0, s0) in (first or {}).items():
        if pid not in (last or {}):
            continue
        t1, s1 = last[pid]
        dt = t1 - t0
        rows.append(((s1[0] - s0[0]) / dt * 100, (s1[1] - s0[1]) / dt, (s1[2] - s0[2]) / dt, s1[3]))
    if rows:
        n = len(rows)
        rows.sort()
        med = rows[n // 2]
        avg = [sum(r[i] for r in rows) / n for i in range(4)]
        print(f"window {a.t0}-{a.t1}s, {n} nodes: per node cpu% avg {avg[0]:.2f} median {med[0]:.2f} "
              f"max {rows[-1][0]:.2f}; wakeups/s avg {avg[1]:.0f} (max {max(r[1] for r in rows):.0f}); "
              f"voluntary ctx/s avg {avg[2]:.0f}; threads {avg[3]:.1f}; all nodes cpu% {sum(r[0] for r in rows):.0f}",
              file=sys.stderr)
    sys.exit(cl.returncode)


if __name__ == "__main__":
    main()

#!/bin/bash
# One measured `lifeline cluster` run: CPU and wake-ups per node (sample.py) and, from the
# nodes' final `stats` lines, frames per node per second by kind over each node's life.
# usage: bench/idle/compare.sh BIN NODES LABEL [extra cluster args...]
# Files: /tmp/idle-cmp-LABEL.json (the report), /tmp/idle-cmp-LABEL.lines (every line).
# Window: FROM..TO seconds after the start (default 4..12; the workload lasts DURATION, 12).
here=$(cd "$(dirname "$0")" && pwd)
bin=$1; n=$2; label=$3; shift 3
echo "== $label"
python3 "$here/sample.py" --from "${FROM:-4}" --to "${TO:-12}" --out "/tmp/idle-cmp-$label.json" -- \
    "$bin" cluster --nodes "$n" --duration "${DURATION:-12}" --lines "/tmp/idle-cmp-$label.lines" --json "$@" 2>&1 | grep window
python3 - "/tmp/idle-cmp-$label.json" "/tmp/idle-cmp-$label.lines" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    d = json.loads(l)
    if 'pass' in d:
        ev = [(e['rank'], e['evict_ms']) for e in d.get('evictions_required', [])]
        print('pass', d['pass'], 'false_positives', d['false_positives'], 'joined',
              d['startup']['ready'], 'of', d['startup']['launched_survivors'],
              'evict_ms', ev, 'delivery_gap_ms_max', d['delivery_gap_ms_max'])
st, lis = {}, {}
for l in open(sys.argv[2]):
    r, _, j = l.partition(' ')
    if '"stats"' in j or '"listening"' in j:
        d = json.loads(j)
        if d['event'] == 'listening':
            lis[r] = d['t_ms']
        else:
            st[r] = d
tot = {}
for r, d in st.items():
    if r not in lis:
        continue
    dt = (d['t_ms'] - lis[r]) / 1000
    t, det = d['transport'], d['detect']
    for k, v in [('frames_out', t['frames_out']), ('frames_in', t['frames_in']),
                 ('keepalives_out', t['keepalives_out']), ('keepalives_in', t['keepalives_in']),
                 ('heartbeats_out', det['heartbeats_out']), ('heartbeats_in', det['heartbeats_in'])]:
        tot[k] = tot.get(k, 0) + v / dt
    tot['link_ups'] = tot.get('link_ups', 0) + t['link_ups']
n = len(st) or 1
print('per node per second over its life:', {k: round(v / n, 1) for k, v in tot.items()})
PY

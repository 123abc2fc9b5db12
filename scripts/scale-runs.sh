#!/bin/bash
# Large real-process runs of `lifeline cluster`, one after another, for a many-core machine
# (docs/startup.md, "Measured (session 31)"): each run's harness output and its nodes' lines
# (minus the per-op workload lines) packed into OUT/NAME.tgz, a summary in OUT/summary.txt.
#
#   scripts/scale-runs.sh BINARY OUT BUDGET_S NAME:ARG,ARG,... [NAME:ARG,...]...
#   scripts/scale-runs.sh target/dev/lifeline "$OUT" 300 \
#       n2000:--nodes,2000,--kill,3,--stop,5@2500+3000 \
#       s512:--nodes,512,--start-skew,3000,--kill,3,--stop,5@2500+3000
#
# A run is skipped when less than 45 s of BUDGET_S is left; each is killed at the budget.
set -u
BIN=$(realpath "$1"); OUT=$2; END=$((SECONDS + $3)); shift 3
mkdir -p "$OUT"
{ nproc; uname -a; ulimit -n; free -g; } > "$OUT/summary.txt" 2>&1
for spec in "$@"; do
  name=${spec%%:*}; args=${spec#*:}; args=${args//,/ }
  left=$((END - SECONDS))
  if [ "$left" -lt 45 ]; then echo "SKIP $name ($left s left)" >> "$OUT/summary.txt"; continue; fi
  s=$SECONDS
  # shellcheck disable=SC2086 # the run's arguments are split on purpose
  timeout -k 5 "$left" "$BIN" cluster $args --json --lines "/tmp/$name.lines" > "/tmp/$name.out" 2>&1
  rc=$?
  echo "RUN $name rc=$rc secs=$((SECONDS - s)) args=$args load=$(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/summary.txt"
  tail -n 1 "/tmp/$name.out" | cut -c1-3000 >> "$OUT/summary.txt"
  grep -v -E '"event":"(xcast_delivered|xcast_started|xcast_root_completed|xcast_completed|relm_delivered|relm_sent|relm_acked)"' \
    "/tmp/$name.lines" > "/tmp/$name.kept"
  tar czf "$OUT/$name.tgz" -C /tmp "$name.out" "$name.kept"
  pkill -9 -f "$BIN node" 2>/dev/null
  sleep 1
done

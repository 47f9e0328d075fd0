#!/usr/bin/env bash
# The size ladder of `ldpctl simulate`: one run per size on generated
# graphs (default 1M, 2M, 5M and 10M nodes), each with the defaults
# (PrivGE node classification, HDS at epsilon 1, 4 agent hosts, secure
# noise), printing per size the seconds of each stage, the peak memory of
# each process (curator, agent hosts, ldpctl) and of all of them at once
# (sampled every 100 ms by ldpctl), and the
# accuracy, and writing two charts: seconds and peak memory against nodes.
#
#   bash tests/bench/simulate_ladder.sh [BUILD_DIR]
#
# Environment: SIZES (node counts, default "1000000 2000000 5000000
# 10000000"), OUT (folder for ladder.json and the charts, default
# BUILD_DIR/simulate-ladder), EXTRA (flags added to every simulate, e.g.
# "--method lpgnn"), REPORT_ONLY=1 (run nothing: redraw the table and the
# charts from the files an earlier ladder left in OUT, e.g. after a size
# was run on its own with the same file names), CHECK=1 (exit 1 when a
# target is missed: every size completes with accuracy at least
# MIN_ACCURACY, default 0.9; the 10M size, when run, in under 900 s to
# the table and under 24 GiB at once). A size that fails is reported
# with its error and the ladder goes on. Needs about as many GiB of memory as the largest size's
# row of docs/benchmarks.md says; the 10M rung takes many minutes.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
ctl="$build/ldpctl"
[ -x "$ctl" ] || { echo "no $ctl: build first (bash tests/run.sh)" >&2; exit 1; }
read -r -a sizes <<< "${SIZES:-1000000 2000000 5000000 10000000}"
read -r -a extra <<< "${EXTRA:-}"
out=${OUT:-$build/simulate-ladder}
mkdir -p "$out"
for n in "${sizes[@]}"; do
  [ "${REPORT_ONLY:-0}" = 1 ] && break
  echo "== $n nodes ==" >&2
  start=$(date +%s.%N)
  rc=0
  "$ctl" simulate --nodes "$n" --format json "${extra[@]}" \
    > "$out/$n.json" 2> "$out/$n.log" || rc=$?
  end=$(date +%s.%N)
  printf '{"nodes": %s, "exit": %s, "wall": %s}\n' "$n" "$rc" \
    "$(python3 -c "print(float('$end') - float('$start'))")" > "$out/$n.wall"
done
python3 - "$out" "${sizes[@]}" <<'PY'
import json, sys
out, sizes = sys.argv[1], sys.argv[2:]
rows = []
for n in sizes:
    w = json.load(open(f"{out}/{n}.wall"))
    try:
        j = json.load(open(f"{out}/{n}.json"))
    except (OSError, ValueError):
        j = None
    if w["exit"] != 0 or j is None:
        err = open(f"{out}/{n}.log").read().strip().splitlines()
        print(f"{int(n):>10,} nodes: FAILED (exit {w['exit']}) after {w['wall']:.0f} s: "
              f"{err[-1] if err else '?'}")
        rows.append({"nodes": int(n), "failed": True, "wall": w["wall"]})
        continue
    d = j["deployment"]
    mem = d["peak_rss_mib"]
    row = {"nodes": int(n), "wall": w["wall"], "metric": j["metric"],
           "accuracy": j["mean"], "stage_seconds": d["stage_seconds"],
           "evaluate_seconds": d["evaluate_seconds"], "peak_rss_mib": mem}
    rows.append(row)
    stages = ", ".join(f"{k} {v:.1f}" for k, v in d["stage_seconds"].items())
    ev = d["evaluate_seconds"]
    print(f"{int(n):>10,} nodes: {w['wall']:.0f} s to the table; {stages}; "
          f"evaluate = propagate {ev['propagate']:.1f} + train {ev['train']:.1f} + "
          f"rest {ev['rest']:.1f}")
    print(f"{'':>17} peak MiB: curator {mem['curator']:.0f}, agent hosts "
          f"{mem['agent_hosts_total']:.0f} (max {mem['agent_host_max']:.0f}), ldpctl "
          f"{mem['ldpctl']:.0f}; at once {mem['together']:.0f} "
          f"({mem['together'] / 1024:.1f} GiB; the peaks summed "
          f"{mem['all_processes'] / 1024:.1f} GiB); {j['metric']} {j['mean']:.4f}")
json.dump(rows, open(f"{out}/ladder.json", "w"), indent=1)
ok = [r for r in rows if not r.get("failed")]
xs = [r["nodes"] / 1e6 for r in ok]
def series(name, f):
    return {"name": name, "x": xs, "y": [f(r) for r in ok]}
seconds = {"title": "ldpctl simulate: seconds against nodes",
           "x_label": "nodes (millions)", "y_label": "seconds",
           "series": [series("to the table", lambda r: r["wall"]),
                      series("evaluate", lambda r: r["stage_seconds"].get("evaluate", 0)),
                      series("propagate", lambda r: r["evaluate_seconds"]["propagate"]),
                      series("train", lambda r: r["evaluate_seconds"]["train"]),
                      series("start and enrol", lambda r: r["stage_seconds"].get("start and enrol", 0))]}
memory = {"title": "ldpctl simulate: peak memory against nodes",
          "x_label": "nodes (millions)", "y_label": "GiB",
          "series": [series("all processes at once", lambda r: r["peak_rss_mib"]["together"] / 1024),
                     series("curator", lambda r: r["peak_rss_mib"]["curator"] / 1024),
                     series("agent hosts", lambda r: r["peak_rss_mib"]["agent_hosts_total"] / 1024),
                     series("ldpctl", lambda r: r["peak_rss_mib"]["ldpctl"] / 1024)]}
json.dump(seconds, open(f"{out}/ladder-seconds.json", "w"))
json.dump(memory, open(f"{out}/ladder-memory.json", "w"))
PY
if [ "$(python3 -c "import json; print(sum(1 for r in json.load(open('$out/ladder.json')) if not r.get('failed')))")" -ge 2 ]; then
  "$build/ldpgraph" plot --input "$out/ladder-seconds.json" --output "$out/ladder-seconds.svg"
  "$build/ldpgraph" plot --input "$out/ladder-memory.json" --output "$out/ladder-memory.svg"
  echo "charts: $out/ladder-seconds.svg, $out/ladder-memory.svg" >&2
fi
if [ "${CHECK:-0}" = 1 ]; then
  python3 - "$out/ladder.json" "${MIN_ACCURACY:-0.9}" <<'PY'
import json, sys
rows, floor = json.load(open(sys.argv[1])), float(sys.argv[2])
missed = []
for r in rows:
    n = f"{r['nodes']:,} nodes"
    if r.get("failed"):
        missed.append(f"{n}: did not complete")
        continue
    if r["accuracy"] < floor:
        missed.append(f"{n}: {r['metric']} {r['accuracy']:.4f} < {floor}")
    if r["nodes"] == 10_000_000:
        if r["wall"] >= 900:
            missed.append(f"{n}: {r['wall']:.0f} s to the table, target < 900 s")
        gib = r["peak_rss_mib"]["together"] / 1024
        if gib >= 24:
            missed.append(f"{n}: {gib:.1f} GiB at once, target < 24 GiB")
for m in missed:
    print(f"target missed: {m}", file=sys.stderr)
print(f"targets: {'missed ' + str(len(missed)) if missed else 'all met'}", file=sys.stderr)
sys.exit(1 if missed else 0)
PY
fi

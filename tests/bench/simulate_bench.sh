#!/usr/bin/env bash
# End-to-end timing of `ldpctl simulate`: from the command to the results
# table, median of RUNS runs (default 3) per case, with the seconds of each
# stage (evaluate split into propagation, training and the rest) and the
# peak memory of the curator, the agent hosts and all processes together.
#
#   bash tests/bench/simulate_bench.sh [BUILD_DIR] [--quick]
#
# Cases: cora and pubmed (../shared/datasets or $LDPGRAPH_DATASETS; skipped
# when absent) and the generated 100k-node graph, 4 agent hosts, PrivGE node
# classification, HDS at epsilon 1, secure noise; with SIM_1M=1 also the
# generated 1M-node graph. --quick: the default 3000-node dataset only, one
# run.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=build
quick=0
for a in "$@"; do
  case "$a" in
    --quick) quick=1 ;;
    *) build="$a" ;;
  esac
done
ctl="$build/ldpctl"
[ -x "$ctl" ] || { echo "no $ctl: build first (bash tests/run.sh or deploy/quickstart.sh)" >&2; exit 1; }
datasets=${LDPGRAPH_DATASETS:-../shared/datasets}
runs=${RUNS:-3}
cases=()
if [ "$quick" = 1 ]; then
  runs=1
  cases+=("generated 3000|")
else
  [ -f "$datasets/cora/meta.json" ] && cases+=("cora|--dataset $datasets/cora")
  [ -f "$datasets/pubmed/meta.json" ] && cases+=("pubmed|--dataset $datasets/pubmed")
  cases+=("generated 100k|--nodes 100000")
  # The 1M-node case takes many minutes and about 7 GiB: opt in.
  [ "${SIM_1M:-0}" = 1 ] && cases+=("generated 1M|--nodes 1000000")
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for c in "${cases[@]}"; do
  label="${c%%|*}"
  read -r -a flags <<< "${c#*|}"
  for r in $(seq 1 "$runs"); do
    date +%s.%N > "$tmp/$r.wall"
    "$ctl" simulate "${flags[@]}" --hosts 4 --epsilon 1 --format json \
      > "$tmp/$r.json" 2>/dev/null
    date +%s.%N >> "$tmp/$r.wall"
  done
  /usr/bin/python3 - "$label" "$tmp" "$runs" <<'PY'
import json, statistics, sys
label, tmp, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
js = [json.load(open(f"{tmp}/{r}.json")) for r in range(1, runs + 1)]
def wall(r):
    start, end = open(f"{tmp}/{r}.wall").read().split()
    return float(end) - float(start)
walls = [wall(r) for r in range(1, runs + 1)]
med = lambda xs: statistics.median(xs)
d = [j["deployment"] for j in js]
stages = d[0]["stage_seconds"].keys()
print(f"{label}: {d[0]['nodes']} nodes, {d[0]['hosts']} hosts; wall to table "
      f"(median of {runs}) {med(walls):.1f} s; runs {', '.join(f'{w:.1f}' for w in walls)}")
print("  " + ", ".join(f"{s} {med([x['stage_seconds'][s] for x in d]):.2f}" for s in stages))
print(f"  {js[0]['metric']} {med([j['mean'] for j in js]):.4f}; reports {d[0]['reports']}, "
      f"{d[0]['report_bytes_per_report']:.1f} B each; peak RSS curator "
      f"{med([x['peak_rss_mib']['curator'] for x in d]):.0f} MiB, agent hosts "
      f"{med([x['peak_rss_mib']['agent_hosts_total'] for x in d]):.0f} MiB, all processes "
      f"{med([x['peak_rss_mib']['all_processes'] for x in d]):.0f} MiB")
ev = [x["evaluate_seconds"] for x in d]
print("  evaluate: " + ", ".join(f"{k} {med([e[k] for e in ev]):.2f}" for k in ("propagate", "train", "rest")))
PY
done

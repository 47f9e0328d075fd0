#!/usr/bin/env bash
# A deployment's weather, measured: what dropout, churn, a slow lossy
# network and malicious agents cost a real LDP deployment on cora.
#
#   bash tests/bench/scenario_bench.sh [BUILD_DIR] [--quick] [--out DIR] [--plot DIR]
#
# 1. Weather (ldpctl simulate, 10 agent hosts): each method once on a calm
#    deployment and once with 30 % dropout, 10 % of the hosts killed
#    (SIGKILL) and restarted in every campaign, and 200 ms +- 20 ms latency
#    with 5 % loss on every host's channel. Checks, and prints: every
#    campaign reached every online node, 0 acknowledged reports lost, 0
#    extra epsilon (the curator's ledger and the hosts' memos), the seconds
#    to reach every online node, and the accuracy.
# 2. Poisoning (tests/bench/poisoning_bench.py: ldpgraph eval, RUNS runs
#    per cell, default 2): attacker (maximal-gain, input, adaptive,
#    labels-only; fake-edges over a Blink graph) x defence (none, screen,
#    robust, screen+robust; edge-consistency) x malicious share (0, 1, 5,
#    10, 20 %) for LPGNN (Multi-bit and label randomized response, eps 3
#    each) and PrivGE (HDS, labels known to the curator) on cora, and LPGNN
#    on pubmed. Writes OUT/poisoning/poisoning.{md,json} and one SVG chart
#    per dataset and method into PLOT, and fails when a claimed defence does
#    not hold its bound (see the script).
#
# --quick: the generated 3000-node dataset, one run, shares 0 and 0.2,
# campaign deadlines of 15 s instead of 30 (a smoke run; ctest runs it as
# scenario_bench_smoke, label bench). OUT defaults to
# BUILD_DIR/scenario-bench; PLOT, the charts' folder (created), defaults to
# OUT: unlike `ldpgraph repro` and `ldpgraph edges`, whose --plot FILE is
# optional, the benchmark always draws its charts, and --plot only says
# where. The datasets come from ../shared/datasets or
# $LDPGRAPH_DATASETS; without cora the full run uses the generated dataset.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=build
quick=0
out=""
plot=""
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1 ;;
    --out|--plot)
      [ $# -ge 2 ] && [ -n "$2" ] || { echo "scenario_bench: $1 needs a directory" >&2; exit 2; }
      if [ "$1" = --out ]; then out="$2"; else plot="$2"; fi
      shift ;;
    *) build="$1" ;;
  esac
  shift
done
ctl="$build/ldpctl"
tool="$build/ldpgraph"
for b in "$ctl" "$tool"; do
  [ -x "$b" ] || { echo "no $b: build first (bash tests/run.sh)" >&2; exit 1; }
done
out=${out:-$build/scenario-bench}
plot=${plot:-$out}
mkdir -p "$out" "$plot"
datasets=${LDPGRAPH_DATASETS:-../shared/datasets}
runs=${RUNS:-2}
data_flags=()
label="cora"
if [ "$quick" = 1 ] || [ ! -f "$datasets/cora/meta.json" ]; then
  label="generated 3000"
  "$tool" generate --out "$out/dataset" --force >/dev/null
  data_flags=(--dataset "$out/dataset")
else
  data_flags=(--dataset "$datasets/cora")
fi
deadline=()
if [ "$quick" = 1 ]; then
  runs=1
  deadline=(--campaign-deadline 15)
fi
methods=("privge|" "lpgnn|--method lpgnn --epsilon 3 --label-epsilon 3")
weather=(--dropout 0.3 --churn 0.1 --latency 200 --jitter 20 --loss 0.05 "${deadline[@]}")

echo "== weather: $label, 10 agent hosts =="
for m in "${methods[@]}"; do
  name="${m%%|*}"
  read -r -a flags <<< "${m#*|}"
  for w in calm weather; do
    extra=()
    [ "$w" = weather ] && extra=("${weather[@]}")
    /usr/bin/time -v -o "$out/$name-$w.time" \
      "$ctl" simulate "${data_flags[@]}" --hosts 10 --seed 1 "${flags[@]}" \
      "${extra[@]}" --format json > "$out/$name-$w.json" 2> "$out/$name-$w.log"
  done
done
/usr/bin/python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
print(f"{'method':8} {'run':8} {'accuracy':>8} {'complete':>9} {'lost':>5} "
      f"{'extra eps':>10} {'all online (s)':>18} {'total (s)':>9}")
bad = []
for name in ("privge", "lpgnn"):
    for w in ("calm", "weather"):
        j = json.load(open(f"{out}/{name}-{w}.json"))
        d = j["deployment"]
        sc = d["scenario"]
        online = d["nodes"] - sc["offline_nodes"]
        complete = all(c["reported"] + c["refused"] >= online and c["rejected"] == 0
                       for c in d["campaigns"])
        ch = sc.get("churn", {})
        lost = ch.get("acknowledged_reports_lost", 0)
        extra = max(ch.get("curator_extra_epsilon_max", 0),
                    ch.get("agent_extra_epsilon_max", 0))
        secs = "/".join(f"{c.get('all_online_answered_seconds', float('nan')):.2f}"
                        for c in d["campaigns"])
        print(f"{name:8} {w:8} {j['mean']:8.4f} {str(complete):>9} {lost:5d} "
              f"{extra:10g} {secs:>18} {d['total_seconds']:9.2f}")
        if not complete or lost or extra:
            bad.append(f"{name} {w}")
        if w == "weather":
            n = sc["network"]
            print(f"{'':17} {sc['offline_nodes']} nodes offline; "
                  f"{ch.get('kills', 0)} host kills; {n['injected_losses']} of "
                  f"{n['chunks']} chunks lost and retransmitted; "
                  f"{ch.get('charged_not_received_epsilon_max', 0):g} epsilon "
                  "charged for answers never received")
if bad:
    sys.exit("scenario_bench: incomplete or lossy runs: " + ", ".join(bad))
PY

# Poisoning: attacker x defence x malicious share (ldpgraph eval), and the
# claims of docs/scenarios.md checked (tests/bench/poisoning_bench.py; exit 1
# when a defended row passes its bound).
poison=(--build "$build" --out "$out/poisoning" --plot "$plot" --runs "$runs")
[ "$quick" = 1 ] && poison+=(--quick)
/usr/bin/python3 tests/bench/poisoning_bench.py "${poison[@]}"

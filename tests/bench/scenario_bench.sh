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
# 2. Poisoning (ldpgraph eval, RUNS runs each, default 5): accuracy and the
#    attack's target rate against the fraction of malicious agents (0, 1, 5,
#    10, 20 %), with and without the curator's report screen, for PrivGE
#    (HDS, labels known to the curator) and LPGNN (Multi-bit and label
#    randomized response). Writes OUT/poisoning.json, OUT/poisoning.md and
#    one SVG chart per method (ldpgraph plot): PLOT/poisoning-privge.svg and
#    PLOT/poisoning-lpgnn.svg, accuracy and target rate against the
#    malicious fraction, error bars the std over runs.
#
# --quick: the generated 3000-node dataset, one run, fractions 0 and 0.2,
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
runs=${RUNS:-5}
fractions=(0 0.01 0.05 0.1 0.2)
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
  fractions=(0 0.2)
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

echo "== poisoning: $label, $runs runs per cell (ldpgraph eval, seed 1) =="
for m in "${methods[@]}"; do
  name="${m%%|*}"
  read -r -a flags <<< "${m#*|}"
  for f in "${fractions[@]}"; do
    for def in none screen; do
      "$tool" eval "${data_flags[@]}" "${flags[@]}" --runs "$runs" --seed 1 \
        --malicious "$f" --attack-class 0 --defence "$def" --format json \
        > "$out/poison-$name-$f-$def.json" 2>/dev/null
    done
  done
done
LDPGRAPH_TOOL="$tool" /usr/bin/python3 - "$out" "$plot" "$label" "$runs" "${fractions[@]}" <<'PY'
import json, os, subprocess, sys
out, plot, label, runs, fractions = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
titles = {"privge": "PrivGE (HDS eps 1, labels known to the curator)",
          "lpgnn": "LPGNN (Multi-bit eps 3, label RR eps 3)"}
cells, md = {}, []
md.append(f"{label}, {runs} runs per cell, seed 1: accuracy / target rate "
          "(other classes' test nodes predicted as the attack class 0), %\n")
md.append("| method | defence | " + " | ".join(f"{float(f) * 100:g} % malicious" for f in fractions) + " |")
md.append("|---|---|" + "---|" * len(fractions))
for name in ("privge", "lpgnn"):
    for d in ("none", "screen"):
        row = []
        for f in fractions:
            j = json.load(open(f"{out}/poison-{name}-{f}-{d}.json"))
            flagged = [r.get("screen", {}).get("flagged_nodes", 0) for r in j["per_run"]]
            cell = {"accuracy": j["mean"], "accuracy_std": j["std"],
                    "target_rate": j["target_rate"]["mean"],
                    "target_rate_std": j["target_rate"]["std"],
                    "flagged_mean": sum(flagged) / len(flagged)}
            cells[f"{name}/{d}/{f}"] = cell
            row.append(f"{100 * cell['accuracy']:.1f} / {100 * cell['target_rate']:.1f}"
                       + (f" ({cell['flagged_mean']:.0f} flagged)" if d == "screen" else ""))
        md.append(f"| {name} | {d} | " + " | ".join(row) + " |")
text = "\n".join(md) + "\n"
print(text)
open(f"{out}/poisoning.md", "w").write(text)
json.dump(cells, open(f"{out}/poisoning.json", "w"), indent=1)
for name in ("privge", "lpgnn"):
    series = []
    for d, what in (("none", "no defence"), ("screen", "report screen")):
        for metric, mname in (("accuracy", "accuracy"), ("target_rate", "target rate")):
            c = [cells[f"{name}/{d}/{f}"] for f in fractions]
            series.append({"name": f"{mname}, {what}",
                           "x": [float(f) for f in fractions],
                           "y": [x[metric] for x in c],
                           "error": [x[metric + "_std"] for x in c]})
    chart = {"title": f"{label}, {titles[name]}: poisoning by malicious agents",
             "x_label": "fraction of malicious agents (maximal-gain attack on class 0)",
             "y_label": "share of test nodes", "series": series}
    path = f"{out}/poisoning-{name}.json"
    json.dump(chart, open(path, "w"))
    svg = f"{plot}/poisoning-{name}.svg"
    subprocess.run([os.environ["LDPGRAPH_TOOL"], "plot", "--input", path,
                    "--output", svg], check=True)
    if not open(svg).read().startswith("<svg "):
        sys.exit(f"scenario_bench: {svg} is not an SVG document")
    print(f"wrote {svg}")
PY

#!/usr/bin/env bash
# A tour of the offline research tool (the quick start's main job is the
# simulated deployment, deploy/quickstart.sh): install dependencies, build
# ldpgraph (Release, into build/), then a mechanism demo
# (one private vector perturbed by every LDP mechanism, then a table per
# mechanism of what the curator's estimate looks like over many draws) and
# the data layer on the default dataset: `ldpgraph generate` writes it,
# `ldpgraph propagate` perturbs every node's features with HDS and
# propagates them by backward push, checked against power iteration. It
# ends with what the curator learns: `ldpgraph eval` (PrivGE and LPGNN,
# node classification and link prediction, private and not), as a table.
set -euo pipefail
cd "$(dirname "$0")/.."

bash deploy/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build --target ldpgraph

ldp=build/ldpgraph
input=0.8,-0.5,0.1,1.0
echo
echo "== One agent's private vector ($input), perturbed once by each mechanism at epsilon 1 =="
echo "   (secure randomness; dimensions a report leaves out print as 0)"
for m in hds multibit onebit piecewise laplace; do
  printf '%-10s ' "$m"
  "$ldp" sample --mechanism "$m" --epsilon 1 --input "$input"
done

echo
echo "== What the curator estimates: 200000 reports per mechanism, epsilon 1 =="
echo "   (seeded generator so the table is reproducible: not private, for demonstration)"
for m in hds multibit onebit piecewise laplace; do
  echo
  "$ldp" sample --mechanism "$m" --epsilon 1 --input "$input" \
    --count 200000 --estimate --summary --seed 2026 2>/dev/null
done
echo
echo "HDS keeps the signal small but concentrated (mean C*x, no unbiasing, by design);"
echo "the unbiased mechanisms recover x on average at the cost of a large variance."

data=build/data/generated
echo
echo "== The default dataset: ldpgraph generate (planted classes, DC-SBM) =="
"$ldp" generate --out "$data" --force
echo
echo "== Personalised PageRank propagation on it (alpha 0.1, r 0.5) =="
echo "   (HDS rows use the seeded generator: reproducible, not private)"
rows=()
for spec in "raw push" "raw power" "hds push" "hds power"; do
  set -- $spec
  flags=(--dataset "$data" --method "$2" --out "build/data/z-$1-$2.npy" --json)
  [ "$1" = hds ] && flags+=(--mechanism hds --epsilon 1 --k 1 --seed 2026)
  rows+=("$("$ldp" propagate "${flags[@]}" 2>/dev/null)")
done
/usr/bin/python3 - "${rows[@]}" <<'PY'
import json, sys
import numpy as np
rows = [json.loads(r) for r in sys.argv[1:]]
print(f"{'features':<22}{'method':<8}{'work':>14}{'seconds':>9}{'peak MiB':>10}{'max |push-power|':>18}")
for r in rows:
    feats = "raw" if r["mechanism"] == "none" else f"HDS eps={r['epsilon']:g} k=1"
    work = f"{r['pushes']} pushes" if r["method"] == "push" else f"{r['iterations']} terms"
    diff = ""
    if r["method"] == "push":
        other = r["out"].replace("-push.npy", "-power.npy")
        diff = f"{np.abs(np.load(r['out']) - np.load(other)).max():.2e}"
    print(f"{feats:<22}{r['method']:<8}{work:>14}{r['propagate_seconds']:>9.3f}"
          f"{r['peak_rss_bytes'] / 2**20:>10.0f}{diff:>18}")
print("push's bound: every entry within deg(v)^0.5 * rmax (rmax 1e-4) of the exact series")
PY

echo
echo "== What the curator learns: ldpgraph eval on the default dataset, 3 runs each =="
echo "   (seeded noise: reproducible, not private; see ldpgraph eval --help)"
cases=(
  "PrivGE, raw features (no privacy)|--task node --mechanism none"
  "PrivGE, HDS eps_x=1|--task node --mechanism hds --epsilon 1"
  "LPGNN, Multi-bit eps_x=1|--method lpgnn --epsilon 1"
  "LPGNN, eps_x=1, labels eps_y=1|--method lpgnn --epsilon 1 --label-epsilon 1"
  "PrivGE links, raw features|--task link --mechanism none"
  "PrivGE links, HDS eps_x=1|--task link --mechanism hds --epsilon 1"
)
results=()
for c in "${cases[@]}"; do
  label="${c%%|*}"
  read -r -a flags <<< "${c#*|}"
  results+=("$label|$("$ldp" eval --dataset "$data" --runs 3 --format json "${flags[@]}" 2>/dev/null)")
done
/usr/bin/python3 - "${results[@]}" <<'PY'
import json, sys
print(f"{'pipeline':<34}{'task':<6}{'metric':<10}{'mean %':>8}{'std':>6}{'epochs':>8}{'seconds':>9}")
for arg in sys.argv[1:]:
    label, js = arg.split("|", 1)
    j = json.loads(js)
    epochs = sum(r["epochs"] for r in j["per_run"]) / len(j["per_run"])
    print(f"{label:<34}{j['task']:<6}{j['metric']:<10}{100 * j['mean']:>8.1f}"
          f"{100 * j['std']:>6.1f}{epochs:>8.0f}{j['seconds']:>9.1f}")
PY
echo
echo "Next: build/ldpgraph eval --help, build/ldpgraph repro --help,"
echo "      build/ldpgraph sample --help, build/ldpgraph propagate --help"

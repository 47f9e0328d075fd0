#!/usr/bin/env bash
# Training benchmark on pubmed (skipped, exit 0, when the shared datasets are
# absent):
#   1. framework comparison on the same data: seconds per epoch of the
#      curator's MLP (bench/mlp_epoch_bench) against the same MLP in PyTorch
#      (tests/bench/torch_mlp.py, Debian's python3-torch), with 1 and 2
#      threads. Data: the PrivGE embedding Z of pubmed (`ldpgraph propagate`,
#      HDS epsilon 1, seed 1), a random half of the labelled nodes for
#      training (numpy seed 1), validation on 500 further nodes every epoch;
#      hidden 64, exactly EPOCHS epochs, no early stop.
#   2. the curator's models end to end (`ldpgraph eval --runs 1`, defaults:
#      early stopping, patience 50, at most 500 epochs): seconds per epoch,
#      epochs to the best checkpoint and epochs run, training seconds, and
#      the peak memory of the whole process (from /usr/bin/time, if present).
#   3. link prediction on a generated wide graph (11,631 nodes, 170,772
#      edges, 13,183 sparse features), `ldpgraph eval --task link --runs 1`
#      with defaults: seconds and peak memory of the whole process.
# Usage: tests/bench/training_bench.sh [BUILD_DIR] [--quick]
#   BUILD_DIR defaults to build (a Release build holding build/ldpgraph and
#   build/bench/mlp_epoch_bench); --quick runs 20 epochs instead of 200 in
#   part 1.
# Debian's torch calls the system libblas.so.3: with only netlib's reference
# BLAS installed (no libopenblas0) its matrix products are slow; the header
# of part 1 names the BLAS it loaded (to try OpenBLAS without installing it,
# run the script with LD_LIBRARY_PATH set to a folder holding its
# libblas.so.3). ldpgraph's trainer splits each layer's rows across its
# threads and runs the products through OpenBLAS (one thread per call); the
# speedup column is PyTorch's seconds per epoch over ldpgraph's at the same
# thread count.
# Figures are wall-clock on whatever else the machine is doing: run it on a
# quiet machine and read the trend, not the third digit.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${1:-$root/build}"
quick=0
[ "${2:-}" = "--quick" ] || [ "${1:-}" = "--quick" ] && quick=1
[ "${1:-}" = "--quick" ] && build="$root/build"
tool="$build/ldpgraph"
bench="$build/bench/mlp_epoch_bench"
for b in "$tool" "$bench"; do
  [ -x "$b" ] || { echo "no $b: build first (targets ldpgraph, mlp_epoch_bench)" >&2; exit 1; }
done
py=/usr/bin/python3
datasets="${LDPGRAPH_DATASETS:-$root/../shared/datasets}"
pm="$datasets/pubmed"
if [ ! -d "$pm" ]; then
  echo "# training: skipped ($pm not found; set LDPGRAPH_DATASETS)"
  exit 0
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
epochs=200
[ "$quick" = 1 ] && epochs=20
hidden=64

# --- 1. same-data comparison with PyTorch --------------------------------------
"$tool" propagate --dataset "$pm" --mechanism hds --epsilon 1 --seed 1 \
  --out "$work/z.npy" >/dev/null 2>&1
"$py" - "$pm/nodes.svm" "$work" <<'PY'
import sys
import numpy as np
svm, work = sys.argv[1], sys.argv[2]
labels = np.array([int(line.split(" ", 1)[0]) for line in open(svm)])
labelled = np.flatnonzero(labels >= 0)
train = np.random.default_rng(1).permutation(labelled)[:round(0.5 * len(labelled))]
np.savetxt(f"{work}/labels.txt", labels, fmt="%d")
np.savetxt(f"{work}/train.txt", np.sort(train), fmt="%d")
PY
args=(--z "$work/z.npy" --labels "$work/labels.txt" --train "$work/train.txt"
      --epochs "$epochs" --hidden "$hidden")
torch=1
"$py" -c 'import torch' 2>/dev/null || torch=0
# Alternating, REPEAT times each (default 3), medians reported.
for rep in $(seq "${REPEAT:-3}"); do
  for t in 1 2; do
    "$bench" "${args[@]}" --threads "$t" >>"$work/mlp.jsonl"
    if [ "$torch" = 1 ]; then
      "$py" "$root/tests/bench/torch_mlp.py" "${args[@]}" --threads "$t" >>"$work/mlp.jsonl"
    fi
  done
done
echo "# MLP on pubmed's PrivGE embedding (19717 x 500, HDS eps=1): 9858 training rows, 500 validation rows, hidden $hidden, $epochs epochs"
[ "$torch" = 1 ] || echo "# PyTorch: skipped (python3-torch is not importable by $py)"
"$py" - "$work/mlp.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
groups = {}
for r in rows:
    groups.setdefault((r["framework"], r["threads"]), []).append(r)
def median(key, fw, t):
    return statistics.median(r[key] for r in groups[(fw, t)])
for fw in ("ldpgraph", "pytorch"):
    first = next((r for r in rows if r["framework"] == fw), None)
    if first:
        extra = f"pytorch {first['torch']} " if fw == "pytorch" else ""
        print(f"# {fw}: {extra}BLAS {first['blas']}; "
              f"{len(groups[(fw, first['threads'])])} runs per row, medians")
print(f"{'framework':<10} {'threads':>7} {'used':>4} {'s/epoch':>9} "
      f"{'seconds':>8} {'test_acc':>8} {'speedup_vs_pytorch':>18}")
for (fw, t), rs in groups.items():
    s = median("seconds_per_epoch", fw, t)
    ratio = "-"
    if fw == "ldpgraph" and ("pytorch", t) in groups:
        ratio = f"{median('seconds_per_epoch', 'pytorch', t) / s:.2f}x"
    print(f"{fw:<10} {t:>7} {rs[0]['threads_used']:>4} {s:>9.4f} "
          f"{median('seconds', fw, t):>8.2f} {rs[0]['test_accuracy']:>8.4f} "
          f"{ratio:>18}")
PY

# --- 2. the curator's models, end to end ---------------------------------------
timer=()
[ -x /usr/bin/time ] && timer=(/usr/bin/time -v -o "$work/time.txt")
row() {  # label, then eval flags (DATASET overrides pubmed)
  local label="$1"; shift
  rm -f "$work/time.txt"
  "${timer[@]}" "$tool" eval --dataset "${DATASET:-$pm}" --runs 1 --seed 1 --format json "$@" \
    >"$work/eval.json" 2>/dev/null
  "$py" - "$label" "$work/eval.json" "$work/time.txt" <<'PY'
import json, os, re, sys
label, j = sys.argv[1], json.load(open(sys.argv[2]))
r = j["per_run"][0]
peak = "-"
if os.path.exists(sys.argv[3]):
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", open(sys.argv[3]).read())
    if m:
        peak = f"{int(m.group(1)) / 1024:.0f}"
print(f"{label:<26} {j['metric']:>8} {r['metric']:>6.4f} "
      f"{r['perturb_seconds'] + r['propagate_seconds']:>7.2f} "
      f"{r['seconds_per_epoch']:>9.4f} {r['best_epoch']:>5} {r['epochs']:>6} "
      f"{r['best_epoch'] * r['seconds_per_epoch']:>8.2f} {r['train_seconds']:>8.2f} "
      f"{peak:>8} {j['seconds']:>7.1f}")
PY
}
echo
echo "# ldpgraph eval on pubmed, 1 run, seed 1, default settings (early stopping: patience 50, max 500 epochs)"
echo "# prep_s = perturb + propagate; s_to_best = best_epoch x s/epoch; train_s = whole training loop; peak = process max RSS"
printf '%-26s %8s %6s %7s %9s %5s %6s %8s %8s %8s %7s\n' model metric value prep_s \
  s/epoch best epochs s_to_best train_s peak_MiB total_s
row "privge mlp (node)"       --method privge --task node --model mlp
row "lpgnn gcn (node)"        --method lpgnn --task node --model gcn
row "lpgnn sage (node)"       --method lpgnn --task node --model sage
row "privge lr (link)"        --method privge --task link --model lr
row "privge mlp (link)"       --method privge --task link --model mlp

# --- 3. link prediction on a wide graph ----------------------------------------
# A generated graph shaped like a 12k-node social graph with 13k sparse
# features: 11,631 nodes, 170,772 edges, 13,183 features. PrivGE's Z is then
# 11,631 x 13,183 floats (613 MB) and the training pairs' Hadamard features
# would be 290k x 13,183 (15 GB): the scorer forms them batch by batch. An
# epoch of the mini-batch rows is one pass over the training pairs.
"$tool" generate --out "$work/wide" --nodes 11631 --avg-degree 29.365 \
  --features 13183 --seed 1 >/dev/null
echo
echo "# ldpgraph eval --task link on a generated graph (11,631 nodes, 170,772 edges, 13,183 features), 1 run, defaults"
printf '%-26s %8s %6s %7s %9s %5s %6s %8s %8s %8s %7s\n' model metric value prep_s \
  s/epoch best epochs s_to_best train_s peak_MiB total_s
DATASET="$work/wide" row "privge lr (link, batches)" --method privge --task link

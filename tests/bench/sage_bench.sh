#!/usr/bin/env bash
# GraphSAGE speed against PyTorch on the same data, side by side in one run:
# seconds per epoch of LPGNN's GraphSAGE (bench/sage_epoch_bench) and of the
# same model in PyTorch (tests/bench/torch_sage.py, Debian's python3-torch),
# with 1 and 2 threads, on a generated graph of facebook's shape:
#   ldpgraph generate --nodes 22470 --features 4714 --avg-degree 15.2
#                     --classes 4 --seed 1
# (22,470 nodes, 170,772 edges, 4,714 features, 449,806 non-zeros: 0.42 %).
# Rows: ldpgraph with its first layer sparse (the trainer's choice on such
# features) and forced dense; PyTorch with dense features (what PyG's loaders
# hand a model) and with torch.sparse.mm. The speedups are PyTorch's seconds
# per epoch over ldpgraph's at the same threads: with the same input, and
# with the faster of PyTorch's two.
# Usage: tests/bench/sage_bench.sh [BUILD_DIR] [--quick]
#   BUILD_DIR defaults to build (Release; build/ldpgraph and
#   build/bench/sage_epoch_bench); --quick: 5 epochs instead of 20, 1 repeat.
#   REPEAT=k (default 3) alternates the runs k times and reports medians.
# Figures are wall-clock on whatever else the machine is doing.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="$root/build"
quick=0
for a in "$@"; do
  case "$a" in
    --quick) quick=1 ;;
    *) build="$a" ;;
  esac
done
tool="$build/ldpgraph"
bench="$build/bench/sage_epoch_bench"
for b in "$tool" "$bench"; do
  [ -x "$b" ] || { echo "no $b: build first (targets ldpgraph, sage_epoch_bench)" >&2; exit 1; }
done
py=/usr/bin/python3
epochs=20
repeat="${REPEAT:-3}"
if [ "$quick" = 1 ]; then epochs=5; repeat=1; fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$tool" generate --out "$work/g" --nodes 22470 --features 4714 --avg-degree 15.2 \
  --classes 4 --seed 1 >/dev/null
torch=1
"$py" -c 'import torch' 2>/dev/null || torch=0
for rep in $(seq "$repeat"); do
  for t in 1 2; do
    for input in sparse dense; do
      "$bench" --dataset "$work/g" --input "$input" --epochs "$epochs" --threads "$t" >>"$work/runs.jsonl"
      if [ "$torch" = 1 ]; then
        "$py" "$root/tests/bench/torch_sage.py" --dataset "$work/g" --input "$input" \
          --epochs "$epochs" --threads "$t" >>"$work/runs.jsonl"
      fi
    done
  done
done
echo "# GraphSAGE (hidden 16, 2 layers) on a generated graph of facebook's shape: 22470 nodes, 170772 edges, 4714 features (0.42 % non-zero); $epochs epochs, $repeat run(s) per row, medians"
[ "$torch" = 1 ] || echo "# PyTorch: skipped (python3-torch is not importable by $py)"
"$py" - "$work/runs.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
groups = {}
for r in rows:
    groups.setdefault((r["framework"], r["input"], r["threads"]), []).append(r)
def med(fw, inp, t):
    g = groups.get((fw, inp, t))
    return statistics.median(r["seconds_per_epoch"] for r in g) if g else None
torch_rows = [r for r in rows if r["framework"] == "pytorch"]
if torch_rows:
    print(f"# pytorch {torch_rows[0]['torch']}")
print(f"{'framework':<10} {'input':<7} {'threads':>7} {'s/epoch':>9} {'test_acc':>8} "
      f"{'vs_pytorch_same_input':>21} {'vs_faster_pytorch':>17}")
for (fw, inp, t), rs in sorted(groups.items(), key=lambda k: (k[0][2], k[0][0], k[0][1])):
    s = med(fw, inp, t)
    same = faster = "-"
    if fw == "ldpgraph":
        if med("pytorch", inp, t):
            same = f"{med('pytorch', inp, t) / s:.2f}x"
        best = [x for x in (med("pytorch", "dense", t), med("pytorch", "sparse", t)) if x]
        if best:
            faster = f"{min(best) / s:.2f}x"
    print(f"{fw:<10} {inp:<7} {t:>7} {s:>9.4f} {rs[0]['test_accuracy']:>8.4f} "
          f"{same:>21} {faster:>17}")
PY

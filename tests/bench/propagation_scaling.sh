#!/usr/bin/env bash
# Propagation benchmark: seconds and peak memory of `ldpgraph propagate`,
# one process per case so each peak is its own.
#   1. pubmed (d = 500; skipped when the shared datasets are absent): raw
#      features and HDS reports (epsilon 1, k = 1, 10, 50), push against
#      power iteration.
#   2. generated graphs, 10k to 1M nodes (average degree 10, 128 features):
#      how push time (also per push) and memory grow with the graph.
# Usage: tests/bench/propagation_scaling.sh [BUILD_DIR] [--quick]
#   BUILD_DIR defaults to build (a Release build holding build/ldpgraph);
#   --quick stops the scaling series at 100k nodes and skips power on pubmed.
# Environment: RMAX (default 1e-4), THREADS (default 1; 0 = every core).
# Figures are wall-clock on whatever else the machine is doing: run it on a
# quiet machine and read the trend, not the third digit.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${1:-$root/build}"
quick=0
[ "${2:-}" = "--quick" ] || [ "${1:-}" = "--quick" ] && quick=1
[ "${1:-}" = "--quick" ] && build="$root/build"
tool="$build/ldpgraph"
[ -x "$tool" ] || { echo "no $tool: build first (bash tests/run.sh or deploy/quickstart.sh)" >&2; exit 1; }
datasets="${LDPGRAPH_DATASETS:-$root/../shared/datasets}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
rmax="${RMAX:-1e-4}"
threads="${THREADS:-1}"

row() {  # label, then propagate flags
  local label="$1"; shift
  local json
  json="$("$tool" propagate "$@" --threads "$threads" --out "$work/z.npy" --json 2>/dev/null)"
  /usr/bin/python3 - "$label" "$json" <<'PY'
import json, sys
label, j = sys.argv[1], json.loads(sys.argv[2])
work = j.get("pushes", j.get("iterations", ""))
per_push = (f"{1e6 * j['propagate_seconds'] / j['pushes']:.3f}"
            if j.get("pushes") else "")
print(f"{label:<34} {j['nodes']:>9} {j['edges']:>9} {j['input_nonzeros']:>10} "
      f"{j['method']:>6} {work:>12} {j['propagate_seconds']:>9.3f} "
      f"{per_push:>8} {j['peak_rss_bytes'] / 2**20:>8.0f}")
PY
}
header() {
  printf '%-34s %9s %9s %10s %6s %12s %9s %8s %8s\n' case nodes edges input_nnz method \
    "pushes|terms" seconds us/push peak_MiB
}

echo "# propagation: alpha 0.1, r 0.5, rmax $rmax (push), tolerance $rmax (power), $threads thread(s)"
if [ -d "$datasets/pubmed" ]; then
  echo "## pubmed"
  header
  pm="$datasets/pubmed"
  row "pubmed raw (scaled to [-1,1])" --dataset "$pm" --rmax "$rmax"
  for k in 1 10 50; do
    row "pubmed hds eps=1 k=$k" --dataset "$pm" --mechanism hds --epsilon 1 --k "$k" --seed 1 --rmax "$rmax"
  done
  if [ "$quick" = 0 ]; then
    row "pubmed raw (scaled to [-1,1])" --dataset "$pm" --method power --tolerance "$rmax"
    row "pubmed hds eps=1 k=1" --dataset "$pm" --mechanism hds --epsilon 1 --k 1 --seed 1 --method power --tolerance "$rmax"
  fi
else
  echo "## pubmed: skipped ($datasets/pubmed not found; set LDPGRAPH_DATASETS)"
fi

echo "## generated (DC-SBM, 10 classes, 128 features, average degree 10)"
header
sizes=(10000 100000 1000000)
[ "$quick" = 1 ] && sizes=(10000 100000)
for n in "${sizes[@]}"; do
  "$tool" generate --nodes "$n" --classes 10 --features 128 --avg-degree 10 \
    --homophily 0.8 --seed 1 --out "$work/g$n" >/dev/null
  row "generated n=$n raw ([0,1])" --dataset "$work/g$n" --scale unit --rmax "$rmax"
  row "generated n=$n hds eps=1 k=1" --dataset "$work/g$n" --scale symmetric \
    --mechanism hds --epsilon 1 --k 1 --seed 1 --rmax "$rmax"
  rm -rf "$work/g$n"
done

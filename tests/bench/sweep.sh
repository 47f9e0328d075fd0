#!/usr/bin/env bash
# The privacy-utility sweep of docs/papers.md ("UPGNET and the graph
# alone"): node classification accuracy against the feature budget for
# LPGNN, PrivGE, UPGNET-MBM, UPGNET-PM and the combined pipeline, beside
# the baselines (feature-free, graph-labels, raw), clean labels, on cora and
# citeseer (those present under DATASETS).
# One `ldpgraph sweep` per dataset and method, each saved to
# OUT/DATASET-METHOD.json (an interrupted sweep resumes: pieces already
# there are kept; delete one to measure it again); then the pieces are
# merged into OUT/DATASET.json, printed as a table and drawn into
# OUT/DATASET.svg (ldpgraph sweep --from-json).
# Usage: tests/bench/sweep.sh [BUILD_DIR] [OUT] [RUNS]
#   environment: DATASETS (default ../shared/datasets), NAMES (default
#   "cora citeseer"), METHODS (default "upgnet-mbm combined lpgnn upgnet-pm
#   privge"; the first also measures the baselines), THREADS (default 0).
# Cost, on 2 cores: cora about 30 s a run of every method at every budget
# (10 runs: under 2 hours on one core each), citeseer about 5 times that.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${1:-$root/build}"
out="${2:-$root/sweep-out}"
runs="${3:-10}"
datasets="${DATASETS:-$root/../shared/datasets}"
names="${NAMES:-cora citeseer}"
methods="${METHODS:-upgnet-mbm combined lpgnn upgnet-pm privge}"
threads="${THREADS:-0}"
mkdir -p "$out"
for name in $names; do
  [ -d "$datasets/$name" ] || { echo "skip $name (absent)" >&2; continue; }
  first=1
  pieces=()
  for method in $methods; do
    piece="$out/$name-$method.json"
    pieces+=("$piece")
    baselines=(--no-baselines)
    [ "$first" = 1 ] && baselines=()
    first=0
    if [ -s "$piece" ]; then continue; fi
    echo "== $name $method" >&2
    "$build/ldpgraph" sweep --dataset "$datasets/$name" --methods "$method" \
      --runs "$runs" --threads "$threads" --format json "${baselines[@]}" \
      > "$piece.tmp"
    mv "$piece.tmp" "$piece"
  done
  python3 - "$out/$name.json" "${pieces[@]}" <<'PY'
import json, sys
merged = None
for path in sys.argv[2:]:
    with open(path) as f:
        piece = json.load(f)
    if merged is None:
        merged = piece
    else:
        merged["lines"] += piece["lines"]
        if "baselines" in piece:
            merged["baselines"] = piece["baselines"]
        merged["seconds"] += piece["seconds"]
with open(sys.argv[1], "w") as f:
    json.dump(merged, f)
PY
  "$build/ldpgraph" sweep --from-json "$out/$name.json" --plot "$out/$name.svg"
done

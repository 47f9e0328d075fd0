#!/usr/bin/env bash
# How long an agent host takes to be ready, and its peak memory, with a
# small shard of a large dataset: the host reads only its nodes' records
# (the device index) and scales with the public schema, so both should not
# grow with the dataset.
#
#   bash tests/bench/agent_start.sh [BUILD_DIR]
#
# Environment: NODES (generated dataset size, default 1000000), DATASET (a
# prepared dataset folder to use instead), SHARD (nodes per host, default
# 100), RUNS (default 3). Starts a real curator with TLS on loopback over
# the dataset's graph, then RUNS times an ldpgraph-agent for SHARD nodes in
# the middle of the dataset (its own credentials file only, as a device
# holds its own), and measures from its exec to its /readyz answering 200
# (shard loaded, enrolled, subscribed) and its peak RSS (VmHWM). Prints a
# TSV line per run and the median.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
nodes=${NODES:-1000000}
shard=${SHARD:-100}
runs=${RUNS:-3}
for b in ldpgraph ldpctl ldpgraph-curator ldpgraph-agent; do
  [ -x "$build/$b" ] || { echo "no $build/$b: build first" >&2; exit 1; }
done
tmp=$(mktemp -d)
cleanup() {
  [ -n "${curator_pid:-}" ] && kill "$curator_pid" 2>/dev/null && wait "$curator_pid" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
data=${DATASET:-}
if [ -z "$data" ]; then
  data="$tmp/dataset"
  echo "generating $nodes nodes ..." >&2
  "$build/ldpgraph" generate --nodes "$nodes" --out "$data" >/dev/null
fi
n=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['nodes'])" "$data/meta.json")
"$build/ldpctl" secrets --out "$tmp/s" --nodes 0-1 --tls-names localhost >/dev/null
"$build/ldpgraph-curator" --listen 127.0.0.1:0 --http off --data-dir "$tmp/curator" \
  --graph "$data" --admin-token "$tmp/s/admin.token" --node-key "$tmp/s/node.key" \
  --tls-cert "$tmp/s/curator.pem" --tls-key "$tmp/s/curator.key" \
  --ready-file "$tmp/ready.json" 2>"$tmp/curator.log" &
curator_pid=$!
for _ in $(seq 600); do [ -f "$tmp/ready.json" ] && break; sleep 0.1; done
[ -f "$tmp/ready.json" ] || { echo "the curator did not start:" >&2; tail "$tmp/curator.log" >&2; exit 1; }
port=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['grpc_port'])" "$tmp/ready.json")
begin=$((n / 2)); end=$((begin + shard))
"$build/ldpctl" credentials --node-key "$tmp/s/node.key" --nodes "$begin-$end" \
  --out "$tmp/host.credentials" >/dev/null
http=$((20000 + RANDOM % 20000))
printf 'run\tdataset_nodes\tshard\tready_s\tpeak_rss_mib\n'
results=()
for r in $(seq "$runs"); do
  rm -rf "$tmp/state"
  t0=$(date +%s.%N)
  "$build/ldpgraph-agent" --curator "127.0.0.1:$port" --ca "$tmp/s/ca.pem" \
    --server-name localhost --credentials "$tmp/host.credentials" --dataset "$data" \
    --nodes "$begin-$end" --state-dir "$tmp/state" --http "127.0.0.1:$http" \
    2>"$tmp/agent.log" &
  pid=$!
  ready=""
  for _ in $(seq 3000); do
    if curl -fs "http://127.0.0.1:$http/readyz" >/dev/null 2>&1; then
      ready=$(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.3f}')" "$t0" "$(date +%s.%N)")
      break
    fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.01
  done
  rss=$(awk '/VmHWM/ {printf "%.1f", $2 / 1024}' "/proc/$pid/status" 2>/dev/null || echo "?")
  kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true
  [ -n "$ready" ] || { echo "the agent was not ready:" >&2; tail "$tmp/agent.log" >&2; exit 1; }
  printf '%s\t%s\t%s\t%s\t%s\n' "$r" "$n" "$shard" "$ready" "$rss"
  results+=("$ready $rss")
done
printf '%s\n' "${results[@]}" | sort -n | awk -v m=$(((runs + 1) / 2)) \
  'NR == m {printf "median\tready %s s\tpeak RSS %s MiB\n", $1, $2}'

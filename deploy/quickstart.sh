#!/usr/bin/env bash
# The quick start's first command: install the Debian packages ldpgraph
# needs, build it (Release, into build/), and run the main job: a whole
# simulated LDP deployment on this machine.
#
# `ldpctl simulate` generates the default dataset (3000 nodes, 6 classes,
# 64 features), starts a curator and 4 agent host processes on 127.0.0.1
# with TLS from a throwaway CA, partitions the nodes over the hosts, and
# runs PrivGE node classification: every node perturbs its features with HDS
# at epsilon 1 using OpenSSL's generator and reports them over gRPC; the
# curator stores the reports, estimates, propagates by personalised
# PageRank, trains an MLP and tests it. It ends with a results table
# (metric, epsilon spent per node, reports, bytes on the wire, memory,
# seconds per stage) and stops every process it started.
#
# Extra arguments go to ldpctl simulate, e.g.
#   bash deploy/quickstart.sh --dataset ../shared/datasets/cora
set -euo pipefail
cd "$(dirname "$0")/.."

bash deploy/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build --target ldpctl ldpgraph-curator ldpgraph-agent ldpgraph

build/ldpctl simulate "$@"

echo
echo "Next: build/ldpctl simulate --help (LPGNN, link prediction, cora, pubmed,"
echo "      --keep-running to try the admin commands), build/ldpctl --help,"
echo "      bash deploy/demo.sh (the mechanisms and the offline tool)"

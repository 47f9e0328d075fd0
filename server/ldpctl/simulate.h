// `ldpctl simulate`: a whole LDP deployment on one machine, in one command.
//
// It prepares a work folder (the dataset: generated unless --dataset; TLS
// material from a throwaway CA; an admin token; a node key and each host's
// credential file), starts `ldpgraph-curator` on 127.0.0.1 with TLS and H
// `ldpgraph-agent` processes, each holding a contiguous shard of the nodes,
// waits until every node is enrolled, runs a features campaign (and, for
// LPGNN with --label-epsilon, a label campaign after it), estimates and
// evaluates on the curator through the admin API, and prints a results table
// (or one JSON object). The processes are real and talk gRPC over TLS; the
// reports go through the curator's durable store, as in production.
//
// Equal to the library: with --seed S the agents draw their noise from
// pipeline::NoiseSeed(S, 0) and the curator evaluates with seed S, which is
// exactly run 0 of `ldpgraph eval --seed S` (server/pipeline/pipeline.h), so
// the two print the same metric. Without --seed the agents use OpenSSL's
// generator, as a real deployment must.
//
// Every child process is stopped (agents first, then the curator) on
// success, on failure and on Ctrl-C; see process.h for ldpctl's own death.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace ldpgraph::ldpctl {

// args: the flags after "simulate". self_path: ldpctl's executable; the
// curator and agent binaries are looked up beside it unless --bin-dir.
// Returns an exit code (connection.h).
int RunSimulate(const std::vector<std::string>& args, const std::string& self_path,
                std::ostream& out, std::ostream& err);

std::string SimulateHelp();

// `ldpctl run`: the campaigns, pipeline and table of simulate against a
// deployment started elsewhere (compose, Kubernetes); starts nothing.
int RunAttached(const std::vector<std::string>& args, std::ostream& out,
                std::ostream& err);
std::string RunHelp();

}  // namespace ldpgraph::ldpctl

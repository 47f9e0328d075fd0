// The pieces of `ldpctl`'s admin commands (server/ldpctl/commands.h) that
// the dispatcher (commands.cc) calls across files: where a command writes,
// and one entry point per command group. Internal to ldpctl.
//
//   commands.cc              RunLdpctl: the command line, flags, dispatch
//   commands_help.cc         the overview and every command's help
//   commands_status.cc       status, budget show, audit
//   commands_campaign.cc     campaign create/list/show/wait/close/refusals
//   commands_pipeline.cc     pipeline, release, results, export
//   commands_credentials.cc  credentials, secrets (offline)
//
// Every entry point returns the error to print (its code gives the exit
// code, connection.h): INVALID_ARGUMENT for a usage error, the admin API's
// status (FromGrpc) for a failed call.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include <google/protobuf/message.h>
#include <google/protobuf/util/json_util.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/cli_args.h"
#include "server/ldpctl/connection.h"

namespace ldpgraph::ldpctl::internal {

// Where a command writes: its result to out (a table, or with json the
// message in protobuf's JSON mapping), progress and notes to err.
struct Output {
  std::ostream& out;
  std::ostream& err;
  bool json = false;
  void Json(const google::protobuf::Message& m) const {
    std::string text;
    google::protobuf::util::JsonPrintOptions o;
    o.add_whitespace = true;
    o.preserve_proto_field_names = true;
    o.always_print_primitive_fields = true;
    (void)google::protobuf::util::MessageToJsonString(m, &text, o);
    out << text;
  }
};

// status: the curator's counters (commands_status.cc).
absl::Status Status(const Connection& c, const Output& o);
// budget show: the ledger's summary, and with --per-node or --nodes A-B a
// row per node.
absl::Status BudgetShow(const CliArgs& a, const Connection& c, const Output& o);
// audit: the audit log from --after, at most --limit entries.
absl::Status Audit(const CliArgs& a, const Connection& c, const Output& o);

// campaign SUB [ID] (commands_campaign.cc): create, list, show, wait,
// close, refusals. INVALID_ARGUMENT for another sub, or a missing id.
absl::Status Campaign(const std::string& sub, const std::string& id,
                      const CliArgs& a, const Connection& c, const Output& o);

// The usage errors of `pipeline SUB ID` and `release SUB`, from the flags
// alone, so that they come before any connection setting is looked at
// (commands_pipeline.cc); OK for every other command.
absl::Status CheckPipelineUsage(const std::string& command,
                                const std::string& sub, const std::string& id,
                                const CliArgs& a);
// pipeline SUB ID: run, estimate (on a campaign), propagate, evaluate (on a
// result). INVALID_ARGUMENT for another sub or a missing id.
absl::Status Pipeline(const std::string& sub, const std::string& id,
                      const CliArgs& a, const Connection& c, const Output& o);
// release create (its flags checked by CheckPipelineUsage) or ledger.
absl::Status Release(const std::string& sub, const CliArgs& a,
                     const Connection& c, const Output& o);
// results: every recorded result; results ID --list PATH: the whole id
// list PATH of result ID, one id a line (the JSON: {"ids": [...]}).
absl::Status Results(const std::string& id, const CliArgs& a,
                     const Connection& c, const Output& o);
// The whole id list `list` of a result (admin ListResultIds, every page):
// what its details hold the first ids of.
absl::StatusOr<std::vector<uint32_t>> ResultIdList(const Connection& c,
                                                   const std::string& result_id,
                                                   const std::string& list);
// export ID --out FILE.npy [--ids FILE]: a result's matrix and node ids.
absl::Status Export(const std::string& id, const CliArgs& a, const Connection& c,
                    const Output& o);

// credentials: --nodes A-B's credentials from --node-key, to --out or out
// (commands_credentials.cc).
absl::Status Credentials(const CliArgs& a, const Output& o);
// secrets --out DIR: a development deployment's CA, certificate, tokens and
// credentials; FAILED_PRECONDITION if DIR already holds some of them.
absl::Status Secrets(const CliArgs& a, const Output& o);
// `ldpctl edge-config`: the HAProxy configuration of a TLS edge in front of
// curator frontends (common/net/edge_config.h), to stdout or --out.
absl::Status EdgeConfigCommand(const CliArgs& a, const Output& o);

}  // namespace ldpgraph::ldpctl::internal

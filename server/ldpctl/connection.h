// How ldpctl reaches a curator: the address, TLS trust and the admin token,
// resolved from flags, then the environment, then a config file, then
// defaults; and the exit codes every ldpctl command shares.
//
// Config file (--config FILE, else $LDPCTL_CONFIG, else
// $XDG_CONFIG_HOME/ldpctl/config or ~/.config/ldpctl/config if it exists):
// lines "key = value", '#' starts a comment. Keys: curator, admin-token
// (a file), ca (a file), server-name, insecure (true|false). Relative paths
// are relative to the config file's folder. `ldpctl simulate` writes one
// for the deployment it runs.
//
// curator: HOST:PORT, or a list HOST:PORT,HOST:PORT,... (an operator and
// its standby: calls go to the first that serves, and move on when it goes).
//
// Environment: LDPCTL_CURATOR, LDPCTL_ADMIN_TOKEN_FILE, LDPCTL_ADMIN_TOKEN
// (the hex token itself), LDPCTL_CA, LDPCTL_SERVER_NAME, LDPCTL_INSECURE=1.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/cli_args.h"
#include "ldpgraph/v1/admin.grpc.pb.h"
#include "server/ldpctl/pages.h"

namespace ldpgraph::ldpctl {

// Exit codes of ldpctl (printed by --help; docs/ldpctl.md "Exit codes").
enum ExitCode : int {
  kExitOk = 0,
  kExitFailed = 1,         // the operation failed (curator error, I/O)
  kExitUsage = 2,          // bad command, flag or value
  kExitAuth = 3,           // UNAUTHENTICATED or PERMISSION_DENIED
  kExitUnavailable = 4,    // the curator cannot be reached
  kExitNotFound = 5,       // no such campaign or result
  kExitRefused = 6,        // the curator refused: ledger, state, conflict
  kExitTimeout = 7,        // a wait ran past --timeout
  kExitInterrupted = 130,  // Ctrl-C or SIGTERM
};
int ExitCodeOf(const absl::Status& s);

// The flags every connected command accepts (names without "--").
inline constexpr const char* kConnectionValueFlags[] = {
    "curator", "admin-token", "ca", "server-name", "config", "format"};

struct ConnectionSettings {
  std::string curator = "127.0.0.1:7443";
  std::string admin_token_hex;  // resolved: read from the file or env
  std::string ca_pem;           // empty with insecure
  std::optional<std::string> server_name;
  bool insecure = false;
  // Where each setting came from, for error messages ("flag", "env
  // LDPCTL_CA", "config FILE:LINE", "default").
  std::map<std::string, std::string> origin;
};

// Parses a config file's text. INVALID_ARGUMENT naming path:line for a
// malformed line or an unknown key.
absl::StatusOr<std::map<std::string, std::string>> ParseConfigFile(
    const std::string& path, const std::string& text);

// Resolves the settings (see the file comment). INVALID_ARGUMENT for a
// missing admin token or trust choice, --insecure with --ca, or a bad
// config file; the token and CA files' read errors, naming the file and
// where the setting came from.
absl::StatusOr<ConnectionSettings> ResolveConnection(const CliArgs& a);

// gRPC status -> absl::Status (the codes are the same), with a hint for an
// unreachable curator.
absl::Status FromGrpc(const grpc::Status& s, const std::string& address = "");

// A stub over a channel for the settings, and the token every call must
// carry.
struct Connection {
  std::unique_ptr<v1::AdminService::Stub> stub;
  std::string token;
  std::string address;
  void Prepare(grpc::ClientContext* ctx) const {
    ctx->AddMetadata("authorization", "Bearer " + token);
  }
  // Every page of a paged listing, on_page(page) for each (pages.h), e.g.
  // c.ForEachPage(&v1::AdminService::Stub::ListCampaigns, request, fn);
  // errors as FromGrpc gives them.
  template <typename Request, typename Response, typename OnPage>
  absl::Status ForEachPage(
      grpc::Status (v1::AdminService::Stub::*method)(grpc::ClientContext*,
                                                     const Request&, Response*),
      Request request, OnPage on_page) const {
    return ldpctl::ForEachPage(
        *stub, method, std::move(request),
        [this](grpc::ClientContext* ctx) { Prepare(ctx); },
        [this](const grpc::Status& s) { return FromGrpc(s, address); },
        std::move(on_page));
  }
};
Connection Connect(const ConnectionSettings& s);

}  // namespace ldpgraph::ldpctl

// The offline commands (internal/commands.h): `credentials` (node
// credentials for agent hosts), `secrets` (everything a containerised
// development deployment needs) and `edge-config` (the TLS edge's HAProxy
// configuration). None talks to a curator.
#include <cstdint>
#include <filesystem>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/cli_args.h"
#include "common/dataset/dataset.h"
#include "common/net/edge_config.h"
#include "common/status_macros.h"
#include "server/curator/credentials.h"
#include "server/ldpctl/dev_tls.h"
#include "server/ldpctl/internal/commands.h"

namespace ldpgraph::ldpctl::internal {

namespace fs = std::filesystem;

absl::Status Credentials(const CliArgs& a, const Output& o) {
  if (!a.Has("node-key") || !a.Has("nodes")) {
    return absl::InvalidArgumentError(
        "credentials needs --node-key FILE and --nodes A-B");
  }
  ASSIGN_OR_RETURN(std::string key, curator::ReadHexSecretFile(*a.Get("node-key")));
  ASSIGN_OR_RETURN(auto range, ParseNodeRange(*a.Get("nodes"), "nodes"));
  const std::string text =
      curator::CredentialsFileText(key, range.first, range.second);
  if (!a.Has("out")) {
    o.out << text;
    return absl::OkStatus();
  }
  const std::string path = *a.Get("out");
  RETURN_IF_ERROR(WriteNewFile(path, text, 0600));
  o.err << "ldpctl: wrote " << range.second - range.first << " credentials to "
        << path << "\n";
  return absl::OkStatus();
}

absl::Status Secrets(const CliArgs& a, const Output& o) {
  if (!a.Has("out")) return absl::InvalidArgumentError("secrets needs --out DIR");
  if (a.Has("dataset") == a.Has("nodes")) {
    return absl::InvalidArgumentError(
        "give the nodes to issue credentials for: --dataset DIR or --nodes A-B");
  }
  const std::string dir = *a.Get("out");
  if (a.Flag("keep-existing") && fs::exists(dir + "/node.key")) {
    o.err << "ldpctl: " << dir << " already holds a deployment's secrets; kept\n";
    return absl::OkStatus();
  }
  std::pair<uint32_t, uint32_t> range;
  if (a.Has("dataset")) {
    ASSIGN_OR_RETURN(DatasetMeta meta, LoadDatasetMeta(*a.Get("dataset")));
    range = {0, static_cast<uint32_t>(meta.nodes)};
  } else {
    ASSIGN_OR_RETURN(range, ParseNodeRange(*a.Get("nodes"), "nodes"));
  }
  std::vector<std::string> names = {"localhost", "127.0.0.1"};
  if (a.Has("tls-names")) {
    names = absl::StrSplit(*a.Get("tls-names"), ',', absl::SkipEmpty());
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    return absl::InternalError(absl::StrCat("cannot create ", dir, ": ", ec.message()));
  }
  for (const char* f : {"node.key", "admin.token", "ca.pem"}) {
    if (fs::exists(fs::path(dir) / f)) {
      return absl::FailedPreconditionError(absl::StrCat(
          dir, " already holds ", f, ": give a new folder, or --keep-existing "
          "to keep what is there"));
    }
  }
  ASSIGN_OR_RETURN(DevTlsMaterial m, MakeDevTlsMaterial(names));
  ASSIGN_OR_RETURN(std::string token, NewSecretHex());
  ASSIGN_OR_RETURN(std::string node_key, NewSecretHex());
  ASSIGN_OR_RETURN(std::string raw_key, curator::FromHex(node_key));
  // node.key last: --keep-existing takes its presence for a finished run.
  RETURN_IF_ERROR(WriteDevTlsMaterial(m, dir));
  RETURN_IF_ERROR(WriteNewFile(dir + "/admin.token", token + "\n", 0600));
  RETURN_IF_ERROR(WriteNewFile(
      dir + "/nodes.credentials",
      curator::CredentialsFileText(raw_key, range.first, range.second), 0600));
  RETURN_IF_ERROR(WriteNewFile(dir + "/node.key", node_key + "\n", 0600));
  o.err << "ldpctl: wrote a development CA, a curator certificate for "
        << absl::StrJoin(names, ",") << ", an admin token, a node key and "
        << range.second - range.first << " node credentials to " << dir << "\n";
  return absl::OkStatus();
}

absl::Status EdgeConfigCommand(const CliArgs& a, const Output& o) {
  net::EdgeConfig c;
  c.listen = a.Get("listen").value_or("0.0.0.0:7443");
  if (a.Has("frontends") == a.Has("frontends-from-dns") || !a.Has("tls-pem")) {
    return absl::InvalidArgumentError(
        "edge-config needs --frontends HOST:PORT,... (or --frontends-from-dns "
        "NAME:PORT) and --tls-pem FILE");
  }
  if (a.Has("frontends")) {
    c.backends = absl::StrSplit(*a.Get("frontends"), ',', absl::SkipWhitespace());
  } else {
    c.backends_from_dns = *a.Get("frontends-from-dns");
  }
  c.resolve_at_run_time = a.Flag("resolve");
  ASSIGN_OR_RETURN(auto max_frontends, a.GetInt("max-frontends"));
  if (max_frontends) c.max_backends = static_cast<int>(*max_frontends);
  c.tls_pem = *a.Get("tls-pem");
  if (a.Flag("plaintext-frontends") == a.Has("ca")) {
    return absl::InvalidArgumentError(
        "edge-config needs --ca FILE (the CA of the frontends' certificates) "
        "or --plaintext-frontends (a private network only), not both");
  }
  c.backend_ca = a.Get("ca").value_or("");
  c.backend_name = a.Get("server-name").value_or("localhost");
  ASSIGN_OR_RETURN(auto threads, a.GetInt("threads"));
  if (threads) {
    if (*threads < 1 || *threads > 256) {
      return absl::InvalidArgumentError("--threads must be in [1, 256]");
    }
    c.threads = static_cast<int>(*threads);
  }
  ASSIGN_OR_RETURN(auto max_connections, a.GetInt("max-connections"));
  if (max_connections) {
    if (*max_connections < 1 || *max_connections > 10'000'000) {
      return absl::InvalidArgumentError(
          "--max-connections must be in [1, 10000000]");
    }
    c.max_connections = static_cast<int>(*max_connections);
  }
  ASSIGN_OR_RETURN(const std::string text, net::HaproxyConfigText(c));
  if (!a.Has("out")) {
    o.out << text;
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(WriteNewFile(*a.Get("out"), text, 0644));
  o.err << "ldpctl: wrote " << *a.Get("out") << " (haproxy -f "
        << *a.Get("out") << " -db)\n";
  return absl::OkStatus();
}

}  // namespace ldpgraph::ldpctl::internal

#include "server/ldpctl/connection.h"

#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "common/net/address_list.h"
#include "server/curator/credentials.h"

namespace ldpgraph::ldpctl {
namespace {

constexpr const char* kConfigKeys[] = {"curator", "admin-token", "ca",
                                       "server-name", "insecure"};

std::optional<std::string> Env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

// The config file to read: --config, $LDPCTL_CONFIG, or the per-user file
// if it exists. Empty: none.
std::string ConfigPath(const CliArgs& a) {
  if (a.Has("config")) return *a.Get("config");
  if (auto e = Env("LDPCTL_CONFIG")) return *e;
  std::string base;
  if (auto x = Env("XDG_CONFIG_HOME")) {
    base = *x;
  } else if (auto h = Env("HOME")) {
    base = *h + "/.config";
  } else {
    return "";
  }
  const std::string path = base + "/ldpctl/config";
  return std::filesystem::exists(path) ? path : "";
}

absl::StatusOr<bool> ParseBool(const std::string& v, const std::string& where) {
  const std::string l = absl::AsciiStrToLower(v);
  if (l == "true" || l == "1" || l == "yes") return true;
  if (l == "false" || l == "0" || l == "no") return false;
  return absl::InvalidArgumentError(
      absl::StrCat(where, ": insecure must be true or false, got '", v, "'"));
}

// The settings of the config file ConfigPath names (none: empty), relative
// paths made relative to its folder, and where they came from ("config
// FILE").
struct ConfigSettings {
  std::map<std::string, std::string> values;
  std::map<std::string, std::string> where;
};

absl::StatusOr<ConfigSettings> ReadConfigSettings(const CliArgs& a) {
  ConfigSettings config;
  const std::string config_path = ConfigPath(a);
  if (config_path.empty()) return config;
  auto text = ReadFileToString(config_path);
  if (!text.ok()) {
    return absl::Status(text.status().code(),
                        absl::StrCat("config file: ", text.status().message()));
  }
  ASSIGN_OR_RETURN(config.values, ParseConfigFile(config_path, *text));
  const std::filesystem::path dir =
      std::filesystem::path(config_path).parent_path();
  for (auto& [key, value] : config.values) {
    config.where[key] = absl::StrCat("config ", config_path);
    if ((key == "admin-token" || key == "ca") && !value.empty() &&
        value[0] != '/') {
      value = (dir / value).string();
    }
  }
  return config;
}

// One setting: flag > environment (env, if not null) > config file, its
// origin recorded in s->origin; nullopt (no origin) when none gives it.
std::optional<std::string> PickSetting(const CliArgs& a,
                                       const ConfigSettings& config,
                                       const char* key, const char* env,
                                       ConnectionSettings* s) {
  if (a.Has(key)) {
    s->origin[key] = absl::StrCat("--", key);
    return a.Get(key);
  }
  if (env != nullptr) {
    if (auto e = Env(env)) {
      s->origin[key] = absl::StrCat("$", env);
      return e;
    }
  }
  if (auto it = config.values.find(key); it != config.values.end()) {
    s->origin[key] = config.where.at(key);
    return it->second;
  }
  return std::nullopt;
}

// --insecure, $LDPCTL_INSECURE or the config file's insecure into
// s->insecure.
absl::Status ResolveInsecure(const CliArgs& a, const ConfigSettings& config,
                             ConnectionSettings* s) {
  if (a.Flag("insecure")) {
    s->insecure = true;
  } else if (auto e = Env("LDPCTL_INSECURE")) {
    ASSIGN_OR_RETURN(s->insecure, ParseBool(*e, "$LDPCTL_INSECURE"));
  } else if (auto it = config.values.find("insecure");
             it != config.values.end()) {
    ASSIGN_OR_RETURN(s->insecure,
                     ParseBool(it->second, config.where.at("insecure")));
  }
  return absl::OkStatus();
}

// The token into s->admin_token_hex: a file (flag, env, config), or the hex
// value in the env.
absl::Status ResolveAdminToken(const CliArgs& a, const ConfigSettings& config,
                               ConnectionSettings* s) {
  std::optional<std::string> token_file;
  if (a.Has("admin-token")) {
    token_file = a.Get("admin-token");
    s->origin["admin-token"] = "--admin-token";
  } else if (auto e = Env("LDPCTL_ADMIN_TOKEN_FILE")) {
    token_file = e;
    s->origin["admin-token"] = "$LDPCTL_ADMIN_TOKEN_FILE";
  } else if (auto t = Env("LDPCTL_ADMIN_TOKEN")) {
    auto raw = curator::FromHex(absl::StripAsciiWhitespace(*t));
    if (!raw.ok() || raw->empty()) {
      return absl::InvalidArgumentError(
          "$LDPCTL_ADMIN_TOKEN must be the admin token in hex");
    }
    s->admin_token_hex = curator::ToHex(*raw);
    s->origin["admin-token"] = "$LDPCTL_ADMIN_TOKEN";
  } else if (auto it = config.values.find("admin-token");
             it != config.values.end()) {
    token_file = it->second;
    s->origin["admin-token"] = config.where.at("admin-token");
  }
  if (token_file) {
    auto raw = curator::ReadHexSecretFile(*token_file);
    if (!raw.ok()) {
      return absl::Status(
          raw.status().code(),
          absl::StrCat("admin token (from ", s->origin["admin-token"], "): ",
                       raw.status().message()));
    }
    s->admin_token_hex = curator::ToHex(*raw);
  }
  if (s->admin_token_hex.empty()) {
    return absl::InvalidArgumentError(
        "no admin token: give --admin-token FILE, $LDPCTL_ADMIN_TOKEN_FILE, "
        "$LDPCTL_ADMIN_TOKEN or admin-token in a config file (--config)");
  }
  return absl::OkStatus();
}

// The trust choice: the CA file (flag, env, config) read into s->ca_pem,
// unless insecure.
absl::Status ResolveCa(const CliArgs& a, const ConfigSettings& config,
                       ConnectionSettings* s) {
  const std::optional<std::string> ca =
      PickSetting(a, config, "ca", "LDPCTL_CA", s);
  if (s->insecure) {
    if (ca && s->origin["ca"] == "--ca") {
      return absl::InvalidArgumentError("--insecure and --ca exclude each other");
    }
    return absl::OkStatus();
  }
  if (!ca) {
    return absl::InvalidArgumentError(
        "no CA: give --ca FILE (the CA that signed the curator's "
        "certificate), $LDPCTL_CA or ca in a config file; or --insecure "
        "for a plaintext development curator");
  }
  auto pem = ReadFileToString(*ca);
  if (!pem.ok()) {
    return absl::Status(pem.status().code(),
                        absl::StrCat("CA (from ", s->origin["ca"], "): ",
                                     pem.status().message()));
  }
  s->ca_pem = std::move(*pem);
  return absl::OkStatus();
}

}  // namespace

int ExitCodeOf(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kOk:
      return kExitOk;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
      return kExitUsage;
    case absl::StatusCode::kUnauthenticated:
    case absl::StatusCode::kPermissionDenied:
      return kExitAuth;
    case absl::StatusCode::kUnavailable:
      return kExitUnavailable;
    case absl::StatusCode::kNotFound:
      return kExitNotFound;
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kResourceExhausted:
      return kExitRefused;
    case absl::StatusCode::kDeadlineExceeded:
      return kExitTimeout;
    case absl::StatusCode::kCancelled:
      return kExitInterrupted;
    default:
      return kExitFailed;
  }
}

absl::StatusOr<std::map<std::string, std::string>> ParseConfigFile(
    const std::string& path, const std::string& text) {
  std::map<std::string, std::string> out;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    const size_t hash = line.find('#');
    if (hash != absl::string_view::npos) line = line.substr(0, hash);
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    const size_t eq = line.find('=');
    const std::string where = absl::StrCat(path, ":", line_no);
    if (eq == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": expected 'key = value', got '", line, "'"));
    }
    const std::string key(absl::StripAsciiWhitespace(line.substr(0, eq)));
    const std::string value(absl::StripAsciiWhitespace(line.substr(eq + 1)));
    bool known = false;
    for (const char* k : kConfigKeys) known = known || key == k;
    if (!known) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": unknown key '", key,
          "' (curator, admin-token, ca, server-name, insecure)"));
    }
    if (out.count(key) > 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": '", key, "' given twice"));
    }
    out[key] = value;
  }
  return out;
}

absl::StatusOr<ConnectionSettings> ResolveConnection(const CliArgs& a) {
  ConnectionSettings s;
  ASSIGN_OR_RETURN(const ConfigSettings config, ReadConfigSettings(a));
  // flag > environment > config file > default, per setting.
  if (auto v = PickSetting(a, config, "curator", "LDPCTL_CURATOR", &s)) {
    s.curator = *v;
  }
  {
    // A list (an operator and its standby) must be well formed now, not at
    // the first call.
    std::string tls_name;
    RETURN_IF_ERROR(
        net::AddressListTarget(s.curator, "--curator", &tls_name).status());
  }
  s.server_name =
      PickSetting(a, config, "server-name", "LDPCTL_SERVER_NAME", &s);
  RETURN_IF_ERROR(ResolveInsecure(a, config, &s));
  RETURN_IF_ERROR(ResolveAdminToken(a, config, &s));
  RETURN_IF_ERROR(ResolveCa(a, config, &s));
  return s;
}

Connection Connect(const ConnectionSettings& s) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(256 << 20);
  // A curator that is still starting (ldpctl run beside a container or pod)
  // is retried within 2 s, not after gRPC's default backoff of up to 2 min.
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  std::shared_ptr<grpc::ChannelCredentials> creds;
  if (s.insecure) {
    creds = grpc::InsecureChannelCredentials();
  } else {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = s.ca_pem;
    creds = grpc::SslCredentials(ssl);
    if (s.server_name) args.SetSslTargetNameOverride(*s.server_name);
  }
  // A list HOST:PORT,... (an operator and its standby): one target that
  // moves to the next live address when the one in use goes.
  std::string tls_name;
  absl::StatusOr<std::string> target =
      net::AddressListTarget(s.curator, "--curator", &tls_name);
  if (!s.insecure && !s.server_name && !tls_name.empty()) {
    args.SetSslTargetNameOverride(tls_name);
  }
  Connection c;
  c.stub = v1::AdminService::NewStub(grpc::CreateCustomChannel(
      target.ok() ? *target : s.curator, creds, args));
  c.token = s.admin_token_hex;
  c.address = s.curator;
  return c;
}

absl::Status FromGrpc(const grpc::Status& s, const std::string& address) {
  if (s.ok()) return absl::OkStatus();
  std::string message = s.error_message();
  if (s.error_code() == grpc::StatusCode::UNAVAILABLE && !address.empty()) {
    absl::StrAppend(&message, " (curator ", address,
                    "; is it running, and are --curator, --ca and "
                    "--server-name right?)");
  }
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), message);
}

}  // namespace ldpgraph::ldpctl

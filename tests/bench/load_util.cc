#include "tests/bench/load_util.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/hex.h"
#include "common/net/edge_config.h"
#include "common/net/free_port.h"
#include "common/status_macros.h"
#include "common/mechanisms/feature_mechanism.h"
#include "common/mechanisms/label_rr.h"
#include "common/wire/codec.h"

namespace ldpgraph::bench {

namespace fs = std::filesystem;

// Seconds on the monotonic clock, comparable across processes of the machine
// (steady_clock is CLOCK_MONOTONIC).
double MonoSeconds() {
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

volatile std::sig_atomic_t g_interrupted = 0;
void OnInterrupt(int) { g_interrupted = 1; }

std::string OneLine(std::string s, size_t max) {
  for (char& c : s) {
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  }
  if (s.size() > max) s = s.substr(0, max) + "...";
  return s;
}

std::string GrpcError(const grpc::Status& s) {
  // clang-format off
  static const char* const kNames[] = {
      "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED",
      "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED",
      "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED",
      "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"};
  // clang-format on
  const int code = static_cast<int>(s.error_code());
  return absl::StrCat(code >= 0 && code <= 16 ? kNames[code] : "code ",
                      code >= 0 && code <= 16 ? "" : absl::StrCat(code), ": ",
                      OneLine(s.error_message()));
}

ProcStats ReadProc(pid_t pid) {
  ProcStats p;
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return p;
  std::vector<std::string> f = absl::StrSplit(text.substr(close + 2), ' ');
  // After "pid (comm) ": field 3 (state) is f[0]; utime is field 14, stime 15.
  if (f.size() < 13) return p;
  const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
  p.cpu_seconds = (std::stod(f[11]) + std::stod(f[12])) / tick;
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    auto value = [&](const char* key) -> std::optional<long> {
      const size_t n = std::strlen(key);
      if (line.compare(0, n, key) != 0) return std::nullopt;
      return std::atol(line.c_str() + n);
    };
    if (auto v = value("VmRSS:")) p.rss_kib = *v;
    if (auto v = value("VmHWM:")) p.hwm_kib = *v;
    if (auto v = value("Threads:")) p.threads = static_cast<int>(*v);
  }
  std::ifstream rollup(absl::StrCat("/proc/", pid, "/smaps_rollup"));
  while (std::getline(rollup, line)) {
    auto value = [&](const char* key) -> std::optional<long> {
      const size_t n = std::strlen(key);
      if (line.compare(0, n, key) != 0) return std::nullopt;
      return std::atol(line.c_str() + n);
    };
    if (auto v = value("Pss:")) p.pss_kib = *v;
    if (auto v = value("Private_Clean:")) p.private_kib += *v;
    if (auto v = value("Private_Dirty:")) p.private_kib += *v;
  }
  p.ok = true;
  return p;
}

double Mib(long kib) { return kib / 1024.0; }

// A child process running argv, stdout and stderr appended to log; it dies
// with this process (PR_SET_PDEATHSIG) and inherits no descriptor but 0-2.
pid_t Spawn(const std::vector<std::string>& argv, const std::string& log,
            int nice) {
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid != 0) return pid;
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (nice > 0) setpriority(PRIO_PROCESS, 0, nice);
  const int out = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  const int in = open("/dev/null", O_RDONLY);
  if (out >= 0) {
    dup2(out, 1);
    dup2(out, 2);
  }
  if (in >= 0) dup2(in, 0);
  syscall(SYS_close_range, 3, ~0U, 0);
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  execv(cargv[0], cargv.data());
  std::fprintf(stderr, "fleet_load: cannot run %s: %s\n", cargv[0], std::strerror(errno));
  _exit(127);
}

// Whether pid has exited (reaped if so), with how.
std::optional<std::string> ExitedHow(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, WNOHANG) != pid) return std::nullopt;
  if (WIFEXITED(status)) return absl::StrCat("exited with status ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return absl::StrCat("killed by signal ", WTERMSIG(status));
  return "ended";
}

// SIGTERM, up to grace for the exit, then SIGKILL; reaps.
void StopProcess(pid_t pid, double grace_seconds) {
  if (pid <= 0) return;
  kill(pid, SIGTERM);
  const double until = MonoSeconds() + grace_seconds;
  while (MonoSeconds() < until) {
    if (waitpid(pid, nullptr, WNOHANG) == pid) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

std::string LogTail(const std::string& path, size_t bytes) {
  std::ifstream f(path);
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  return text.size() > bytes ? text.substr(text.size() - bytes) : text;
}

std::string RandomHex(size_t bytes) {
  auto raw = ldpgraph::SecureRandomBytes(bytes);
  if (!raw.ok()) {
    std::cerr << "fleet_load: " << raw.status().message() << "\n";
    std::exit(1);
  }
  return ldpgraph::ToHex(*raw);
}

bool WriteFile(const std::string& path, const std::string& text, mode_t mode) {
  std::ofstream f(path, std::ios::trunc);
  f << text;
  f.close();
  chmod(path.c_str(), mode);
  return static_cast<bool>(f);
}

// The program beside this one, or one or two folders up.
std::string FindProgram(const std::string& name) {
  std::error_code ec;
  fs::path dir = fs::read_symlink("/proc/self/exe", ec).parent_path();
  for (int up = 0; up < 3 && !dir.empty(); ++up, dir = dir.parent_path()) {
    if (fs::exists(dir / name)) return (dir / name).string();
  }
  return name;
}

Percentiles Summarise(std::vector<double> ms) {
  Percentiles p;
  p.samples = ms.size();
  if (ms.empty()) return p;
  std::sort(ms.begin(), ms.end());
  auto rank = [&](double q) {  // nearest rank
    size_t i = static_cast<size_t>(std::ceil(q * ms.size()));
    return ms[std::min(ms.size() - 1, i == 0 ? 0 : i - 1)];
  };
  p.p50 = rank(0.50);
  p.p90 = rank(0.90);
  p.p99 = rank(0.99);
  p.max = ms.back();
  return p;
}
nlohmann::json ToJson(const Percentiles& p) {
  return {{"samples", p.samples}, {"p50", p.p50}, {"p90", p.p90}, {"p99", p.p99}, {"max", p.max}};
}

int CountSockets(pid_t pid) {
  const std::string dir = absl::StrCat("/proc/", pid, "/fd");
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return -1;
  int n = 0;
  char target[64];
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    const std::string link = dir + "/" + e->d_name;
    const ssize_t len = readlink(link.c_str(), target, sizeof(target) - 1);
    if (len > 7 && std::strncmp(target, "socket:", 7) == 0) ++n;
  }
  closedir(d);
  return n;
}

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& target,
                                           const std::string& ca_pem,
                                           const std::string& tls_name,
                                           grpc::ChannelArguments args) {
  if (ca_pem.empty()) {
    return grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
  }
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = ca_pem;
  args.SetSslTargetNameOverride(tls_name);
  return grpc::CreateCustomChannel(target, grpc::SslCredentials(ssl), args);
}

absl::StatusOr<std::vector<v1::Report>> SimulatedReports(const v1::Task& task,
                                                         RandomSource& rng) {
  std::vector<v1::Report> reports;
  reports.reserve(task.node_ids_size());
  std::unique_ptr<LabelRandomizedResponse> rr;
  std::unique_ptr<FeatureMechanism> mech;
  if (task.attribute() == v1::ATTRIBUTE_LABEL) {
    auto m = LabelRandomizedResponse::Create(task.spec().epsilon(),
                                             static_cast<int>(task.spec().dimension()));
    if (!m.ok()) return m.status();
    rr = *std::move(m);
  } else if (task.attribute() == v1::ATTRIBUTE_FEATURES) {
    auto spec = wire::FromWireFeatureSpec(task.spec());
    if (!spec.ok()) return spec.status();
    auto m = CreateFeatureMechanism(*spec);
    if (!m.ok()) return m.status();
    mech = *std::move(m);
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "attribute ", v1::Attribute_Name(task.attribute()), " is not simulated"));
  }
  std::vector<double> x;
  for (uint32_t v : task.node_ids()) {
    v1::Report r;
    r.set_campaign_id(task.campaign_id());
    r.set_node_id(v);
    if (rr) {
      auto label = rr->Perturb(static_cast<int>(v % rr->classes()), rng);
      if (!label.ok()) return label.status();
      r.mutable_label()->set_label(static_cast<uint32_t>(*label));
    } else {
      const auto& s = mech->spec();
      x.resize(s.dimension);
      for (double& xi : x) xi = s.alpha + rng.UniformDouble() * (s.beta - s.alpha);
      auto out = mech->Perturb(x, rng);
      if (!out.ok()) return out.status();
      *r.mutable_features() = wire::EncodeFeatureReport(*out);
    }
    reports.push_back(std::move(r));
  }
  return reports;
}

absl::StatusOr<WorkFolder> MakeWorkFolder(const std::string& dir,
                                          const std::string& prefix) {
  namespace fs = std::filesystem;
  WorkFolder w;
  if (dir.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl = absl::StrCat(tmp != nullptr && *tmp ? tmp : "/tmp", "/",
                                    prefix, ".XXXXXX");
    if (mkdtemp(tmpl.data()) == nullptr) {
      return absl::InternalError(absl::StrCat(
          "cannot create a work folder: ", std::strerror(errno)));
    }
    w.path = tmpl;
    w.made = true;
  } else {
    w.path = dir;
    std::error_code ec;
    if (fs::exists(dir) && !fs::is_empty(dir, ec)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--dir ", dir, " is not empty: give an empty or new folder"));
    }
    fs::create_directories(dir, ec);
    if (ec) {
      return absl::InternalError(
          absl::StrCat("cannot create ", dir, ": ", ec.message()));
    }
  }
  chmod(w.path.c_str(), 0700);
  return w;
}

absl::StatusOr<RunSecrets> WriteRunSecrets(const std::string& folder) {
  const std::string key_hex = RandomHex(32);
  RunSecrets secrets;
  secrets.admin_hex = RandomHex(32);
  auto key = FromHex(key_hex);
  if (!key.ok() || !WriteFile(folder + "/node.key", key_hex + "\n", 0600) ||
      !WriteFile(folder + "/admin.token", secrets.admin_hex + "\n", 0600)) {
    return absl::InternalError("cannot write the node key and admin token");
  }
  secrets.node_key = *std::move(key);
  return secrets;
}

std::string ReadFileOr(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream text;
  text << f.rdbuf();
  return text.str();
}

std::optional<int> ReadyFilePort(const std::string& path) {
  const nlohmann::json j = nlohmann::json::parse(ReadFileOr(path), nullptr, false);
  if (!j.is_discarded() && j.contains("grpc_port")) return j["grpc_port"].get<int>();
  return std::nullopt;
}

void AppendCuratorArgs(const std::vector<std::string>& extra,
                       std::vector<std::string>* argv) {
  if (std::find(extra.begin(), extra.end(), "--http") != extra.end()) {
    auto http = std::find(argv->begin(), argv->end(), "--http");
    argv->erase(http, http + 2);
  }
  argv->insert(argv->end(), extra.begin(), extra.end());
}

bool PortAccepts(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool up = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  ::close(fd);
  return up;
}

absl::StatusOr<EdgeProcess> StartEdge(const std::string& dir,
                                      const std::vector<std::string>& targets,
                                      const std::string& tls_name,
                                      int max_connections) {
  ASSIGN_OR_RETURN(const std::string haproxy, net::FindHaproxy());
  std::ofstream(dir + "/edge.pem")
      << ReadFileOr(dir + "/curator.pem") << ReadFileOr(dir + "/curator.key");
  chmod((dir + "/edge.pem").c_str(), 0600);
  ASSIGN_OR_RETURN(const int port, net::FreeLoopbackPort());
  net::EdgeConfig c;
  c.listen = absl::StrCat("127.0.0.1:", port);
  c.tls_pem = dir + "/edge.pem";
  c.backends = targets;
  c.backend_ca = dir + "/ca.pem";
  c.backend_name = tls_name;
  c.max_connections = max_connections;
  ASSIGN_OR_RETURN(const std::string text, net::HaproxyConfigText(c));
  std::ofstream(dir + "/haproxy.cfg") << text;
  EdgeProcess edge;
  edge.pid = Spawn({haproxy, "-f", dir + "/haproxy.cfg", "-db"}, dir + "/edge.log");
  edge.address = c.listen;
  for (double until = MonoSeconds() + 30; !PortAccepts(port);) {
    if (auto how = ExitedHow(edge.pid)) {
      return absl::InternalError(
          absl::StrCat("the edge ", *how, ":\n", LogTail(dir + "/edge.log")));
    }
    if (MonoSeconds() > until) {
      StopProcess(edge.pid, 1);
      return absl::DeadlineExceededError("the edge did not listen within 30 s");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return edge;
}

}  // namespace ldpgraph::bench

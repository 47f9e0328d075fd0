#include "client/agent_host.h"

#include <netdb.h>
#include <sys/socket.h>
#include <arpa/inet.h>

#include <algorithm>
#include <iostream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/notification.h"
#include "common/net/address_list.h"
#include "common/net/route_header.h"
#include "common/status_macros.h"

namespace ldpgraph::agent {

NodeSecret::NodeSecret(uint32_t node, absl::string_view secret)
    : node_(node),
      size_(static_cast<uint8_t>(std::min<size_t>(secret.size(), 255))) {
  if (valid()) std::copy(secret.begin(), secret.end(), bytes_.begin());
}

absl::Status CheckSecrets(const std::vector<NodeSecret>& credentials) {
  for (const NodeSecret& c : credentials) {
    if (!c.valid()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the credential of node ", c.node(), " is not ", NodeSecret::kBytes,
          " bytes"));
    }
  }
  return absl::OkStatus();
}

absl::Status FromGrpc(const grpc::Status& s, absl::string_view what) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                      absl::StrCat(what, ": ", s.error_message()));
}

namespace {

// Marks an error of Enrol that retrying cannot fix.
constexpr absl::string_view kPermanent = "enrolment refused";

// Deadline of the exchange's unary calls.
constexpr auto kCallDeadline = std::chrono::seconds(30);

}  // namespace

class AgentHost::TrackedCall {
 public:
  TrackedCall(AgentHost* host, grpc::ClientContext* ctx) : host_(host), ctx_(ctx) {
    host_->Track(ctx_);
  }
  ~TrackedCall() { host_->Untrack(ctx_); }
  TrackedCall(const TrackedCall&) = delete;
  TrackedCall& operator=(const TrackedCall&) = delete;

 private:
  AgentHost* const host_;
  grpc::ClientContext* const ctx_;
};

void AgentHost::Track(grpc::ClientContext* ctx) {
  absl::MutexLock lock(&mu_);
  calls_.insert(ctx);
  if (stopping_.load()) ctx->TryCancel();
}

void AgentHost::Untrack(grpc::ClientContext* ctx) {
  absl::MutexLock lock(&mu_);
  calls_.erase(ctx);
}

// The exchange's view of the curator: the host's stub and current session.
class AgentHost::Transport final : public ExchangeTransport {
 public:
  explicit Transport(AgentHost* host) : host_(host) {}

  absl::StatusOr<std::vector<std::pair<uint32_t, std::string>>> PublicKeys(
      const std::vector<uint32_t>& nodes) override {
    grpc::ClientContext ctx;
    RETURN_IF_ERROR(Prepare(&ctx));
    const TrackedCall tracked(host_, &ctx);
    v1::PublicKeysRequest req;
    req.mutable_node_ids()->Assign(nodes.begin(), nodes.end());
    v1::PublicKeysResponse resp;
    RETURN_IF_ERROR(
        FromGrpc(host_->stub_->PublicKeys(&ctx, req, &resp), "PublicKeys"));
    std::vector<std::pair<uint32_t, std::string>> out;
    for (auto& k : *resp.mutable_keys()) {
      out.emplace_back(k.node_id(), std::move(*k.mutable_public_key()));
    }
    return out;
  }
  absl::Status Relay(const std::vector<v1::SealedMessage>& messages) override {
    grpc::ClientContext ctx;
    RETURN_IF_ERROR(Prepare(&ctx));
    const TrackedCall tracked(host_, &ctx);
    v1::RelayRequest req;
    req.mutable_messages()->Assign(messages.begin(), messages.end());
    v1::RelayResponse resp;
    return FromGrpc(host_->stub_->Relay(&ctx, req, &resp), "Relay");
  }
  absl::StatusOr<std::vector<v1::SealedMessage>> Fetch(
      const std::string& campaign, uint64_t after, uint32_t max) override {
    grpc::ClientContext ctx;
    RETURN_IF_ERROR(Prepare(&ctx));
    const TrackedCall tracked(host_, &ctx);
    v1::FetchSealedRequest req;
    req.set_after_sequence(after);
    req.set_max_messages(max);
    req.set_campaign_id(campaign);
    v1::FetchSealedResponse resp;
    RETURN_IF_ERROR(
        FromGrpc(host_->stub_->FetchSealed(&ctx, req, &resp), "FetchSealed"));
    return std::vector<v1::SealedMessage>(
        std::make_move_iterator(resp.mutable_messages()->begin()),
        std::make_move_iterator(resp.mutable_messages()->end()));
  }
  absl::Status Report(std::vector<v1::Report> reports) override {
    const std::string token = host_->token();
    if (token.empty()) return absl::UnavailableError("no session yet");
    return host_->SendAndCount(*host_->stub_, token, std::move(reports));
  }

 private:
  absl::Status Prepare(grpc::ClientContext* ctx) const {
    const std::string token = host_->token();
    if (token.empty()) return absl::UnavailableError("no session yet");
    ctx->AddMetadata("ldpgraph-session", token);
    ctx->set_deadline(std::chrono::system_clock::now() + kCallDeadline);
    return absl::OkStatus();
  }
  AgentHost* const host_;
};

AgentHost::AgentHost(AgentHostOptions options, std::unique_ptr<AgentShard> shard)
    : options_(std::move(options)),
      shard_(std::move(shard)),
      channel_(MakeCuratorChannel(options_)),
      stub_(v1::AgentService::NewStub(channel_)) {
  transport_ = std::make_unique<Transport>(this);
  ExchangeOptions exchange;
  const std::string name = options_.host_name;
  exchange.log = [name](const std::string& line) {
    std::cerr << name << ": " << line << std::endl;
  };
  exchanges_ = std::make_unique<ExchangeRunner>(shard_.get(), transport_.get(),
                                                std::move(exchange));
}

AgentHost::~AgentHost() {
  // The exchanges use the transport, which uses this host: stop them first.
  exchanges_->Stop();
}

std::string AgentHost::token() const {
  absl::MutexLock lock(&mu_);
  return token_;
}

absl::StatusOr<std::unique_ptr<AgentHost>> AgentHost::Create(
    AgentHostOptions options, std::unique_ptr<AgentShard> shard) {
  if (shard == nullptr) return absl::InvalidArgumentError("no shard");
  if (options.curator.empty()) {
    return absl::InvalidArgumentError("the curator's address is missing");
  }
  {
    std::string tls_name;
    RETURN_IF_ERROR(net::AddressListTarget(options.curator, "--curator", &tls_name).status());
  }
  if (!options.insecure && options.ca_pem.empty()) {
    return absl::InvalidArgumentError(
        "TLS needs the CA certificate that signed the curator's (or, for "
        "development only, insecure)");
  }
  if (options.batch_size < 1 || options.batch_size > 65536) {
    return absl::InvalidArgumentError(absl::StrCat(
        "batch size must be in [1, 65536], got ", options.batch_size));
  }
  if (options.window < 1) options.window = 1;
  if (options.answer_part < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "answer_part must be >= 1, got ", options.answer_part));
  }
  if (options.enrol_part < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "enrol_part must be >= 1, got ", options.enrol_part));
  }
  RETURN_IF_ERROR(CheckSecrets(options.credentials));
  std::vector<uint32_t> with_credential;
  with_credential.reserve(options.credentials.size());
  for (const NodeSecret& c : options.credentials) {
    with_credential.push_back(c.node());
  }
  std::sort(with_credential.begin(), with_credential.end());
  const std::vector<uint32_t> nodes = shard->nodes();
  if (with_credential != nodes) {
    for (uint32_t v : nodes) {
      if (!std::binary_search(with_credential.begin(), with_credential.end(),
                              v)) {
        return absl::InvalidArgumentError(
            absl::StrCat("no credential for node ", v, " of the shard"));
      }
    }
    return absl::InvalidArgumentError(
        "credentials list nodes outside the shard, or a node twice");
  }
  return std::unique_ptr<AgentHost>(
      new AgentHost(std::move(options), std::move(shard)));
}

void FillCredential(const AgentHostOptions& options, const AgentShard& shard,
                    const NodeSecret& credential, v1::NodeCredential* out) {
  const uint32_t node = credential.node();
  out->set_node_id(node);
  out->set_secret(std::string(credential.secret()));
  out->mutable_caps()->set_total(options.caps.total);
  for (const auto& [attribute, cap] : options.caps.per_attribute) {
    (*out->mutable_caps()->mutable_per_attribute())[attribute] = cap;
  }
  // Only the public half of the node's key pair ever leaves the host.
  if (const crypto::KeyPair* key = shard.key_pair(node)) {
    out->set_sealing_key(std::string(key->public_key()));
  }
}

std::shared_ptr<grpc::Channel> MakeCuratorChannel(const AgentHostOptions& options,
                                                  grpc::ChannelArguments args) {
  args.SetMaxReceiveMessageSize(64 << 20);
  args.SetMaxSendMessageSize(64 << 20);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 20000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  // Reconnect fast: gRPC's defaults (1 s growing to 120 s between attempts,
  // and 20 s before an attempt that hangs is given up: a curator pod
  // restarting behind a dropped address, or a port bound before it serves)
  // left a host away for about 20 s after a curator restart. Attempt every
  // 100 ms growing to at most 500 ms (plus 20 % jitter), and give up an
  // attempt after 5 s: a refused connection fails at once, so a host is
  // back within about 0.6 s of the curator being ready; an attempt that
  // hangs costs at most 5 s. Not less: with 1 s, 1,000 agents starting at
  // once on two cores gave up TLS handshakes the curator was still doing
  // and retried them, a storm in which only 129 ever enrolled.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 5000);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 500);
  std::string tls_name;
  absl::StatusOr<std::string> target = net::AddressListTarget(options.curator, "--curator", &tls_name);
  if (!target.ok()) {
    // Checked when the options are (AgentHost::Create): a channel to
    // nowhere, whose calls fail naming the target.
    std::cerr << "ldpgraph-agent: " << target.status().message() << std::endl;
    target = options.curator;
  }
  if (!tls_name.empty()) args.SetString(GRPC_ARG_DEFAULT_AUTHORITY, tls_name);
  std::shared_ptr<grpc::ChannelCredentials> creds;
  if (options.insecure) {
    creds = grpc::InsecureChannelCredentials();
  } else {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = options.ca_pem;
    creds = grpc::SslCredentials(ssl);
    if (!options.server_name.empty()) {
      args.SetSslTargetNameOverride(options.server_name);
    } else if (!tls_name.empty()) {
      args.SetSslTargetNameOverride(tls_name);
    }
  }
  // Every call names the host, for an edge that balances per call
  // (common/net/route_header.h).
  return grpc::experimental::CreateCustomChannelWithInterceptors(
      *target, creds, args, net::RouteInterceptors(options.host_name));
}

GrpcShardLeases::GrpcShardLeases(const AgentHostOptions& options,
                                 const NodeSecret& proof)
    : stub_(v1::AgentService::NewStub(MakeCuratorChannel(options))) {
  request_.set_host_name(options.host_name);
  request_.mutable_proof()->set_node_id(proof.node());
  request_.mutable_proof()->set_secret(std::string(proof.secret()));
}

void GrpcShardLeases::Cancel() {
  absl::MutexLock lock(&mu_);
  cancelled_ = true;
  if (in_flight_ != nullptr) in_flight_->TryCancel();
}

absl::StatusOr<v1::ClaimShardResponse> GrpcShardLeases::Ask() {
  grpc::ClientContext ctx;
  // Wait for the channel instead of failing fast: a blocked call is what
  // drives gRPC's connection attempts (between calls only a 5 s backup
  // poller would), so the claim goes out as soon as the curator listens.
  ctx.set_wait_for_ready(true);
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  {
    absl::MutexLock lock(&mu_);
    if (cancelled_) return absl::CancelledError("the host is stopping");
    in_flight_ = &ctx;
  }
  v1::ClaimShardResponse resp;
  grpc::Status g = stub_->ClaimShard(&ctx, request_, &resp);
  {
    absl::MutexLock lock(&mu_);
    in_flight_ = nullptr;
  }
  if (!g.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(g.error_code()),
                        absl::StrCat("ClaimShard: ", g.error_message()));
  }
  return resp;
}

absl::StatusOr<ClaimReply> GrpcShardLeases::Claim() {
  ASSIGN_OR_RETURN(v1::ClaimShardResponse r, Ask());
  ClaimReply reply;
  if (r.state() == v1::SHARD_STATE_ASSIGNED) {
    reply.state = ClaimReply::State::kAssigned;
    reply.claim.shard = r.shard();
    reply.claim.shards = r.shards();
    reply.claim.begin = r.first_node();
    reply.claim.end = r.end_node();
    reply.claim.renew_every =
        absl::Milliseconds(std::max<int64_t>(100, r.retry_after_ms()));
    return reply;
  }
  reply.state = r.state() == v1::SHARD_STATE_SPARE ? ClaimReply::State::kSpare
                                                   : ClaimReply::State::kWaiting;
  reply.retry_after = absl::Milliseconds(r.retry_after_ms());
  return reply;
}

absl::Status GrpcShardLeases::Renew(const ShardClaim& held) {
  ASSIGN_OR_RETURN(v1::ClaimShardResponse r, Ask());
  if (r.state() != v1::SHARD_STATE_ASSIGNED || r.shard() != held.shard ||
      r.shards() != held.shards) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the curator no longer names this host the holder of shard ", held.shard,
        " of ", held.shards, " (its lease lapsed and another host took it)"));
  }
  return absl::OkStatus();
}

absl::Status AgentHost::Run() {
  v1::AgentService::Stub& stub = *stub_;
  absl::Duration backoff = options_.backoff_initial;
  while (!stopping_.load()) {
    const uint64_t sessions_before = counters_.sessions.load();
    absl::Status s = Session(stub);
    ready_.store(false);
    {
      absl::MutexLock lock(&mu_);
      token_.clear();
    }
    if (stopping_.load()) break;
    if (absl::StrContains(s.message(), kPermanent)) return s;
    {
      absl::MutexLock lock(&mu_);
      last_error_ = s.ToString();
    }
    if (counters_.sessions.load() != sessions_before) {
      backoff = options_.backoff_initial;  // the session got going
    }
    counters_.reconnects.fetch_add(1);
    // Sleep, but wake at once on Stop.
    const absl::Time until = absl::Now() + backoff;
    while (!stopping_.load() && absl::Now() < until) {
      absl::SleepFor(std::min(absl::Milliseconds(20), until - absl::Now()));
    }
    backoff = std::min(backoff * 2, options_.backoff_max);
  }
  exchanges_->Stop();
  return absl::OkStatus();
}

void AgentHost::Stop() {
  stopping_.store(true);
  absl::MutexLock lock(&mu_);
  for (grpc::ClientContext* ctx : calls_) ctx->TryCancel();
}

std::string AgentHost::last_error() const {
  absl::MutexLock lock(&mu_);
  return last_error_;
}

absl::StatusOr<std::string> AgentHost::Enrol(v1::AgentService::Stub& stub) {
  const size_t n = options_.credentials.size();
  const size_t part = static_cast<size_t>(options_.enrol_part);
  if (n == 0) {
    return absl::InvalidArgumentError(absl::StrCat(kPermanent, ": no nodes"));
  }
  std::string token;
  for (size_t first = 0; first < n; first += part) {
    const size_t last = std::min(n, first + part);
    v1::EnrolRequest enrol;
    enrol.set_host_name(options_.host_name);
    enrol.set_more(last < n);
    enrol.set_continues(token);
    enrol.mutable_nodes()->Reserve(static_cast<int>(last - first));
    for (size_t i = first; i < last; ++i) {
      FillCredential(options_, *shard_, options_.credentials[i],
                     enrol.add_nodes());
    }
    v1::EnrolResponse enrolled;
    grpc::ClientContext ctx;
    const TrackedCall tracked(this, &ctx);
    // Wait for the channel rather than fail fast while the curator is away:
    // the call goes out the moment a reconnection succeeds.
    ctx.set_wait_for_ready(true);
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::seconds(30));
    grpc::Status s = stub.Enrol(&ctx, enrol, &enrolled);
    if (s.error_code() == grpc::StatusCode::UNAUTHENTICATED ||
        s.error_code() == grpc::StatusCode::INVALID_ARGUMENT) {
      return FromGrpc(s, kPermanent);
    }
    RETURN_IF_ERROR(FromGrpc(s, "enrol"));
    if (enrolled.node_count() != last) {
      // A curator that predates enrolment in parts ignores `more` and
      // opened a session of this part alone.
      return absl::FailedPreconditionError(absl::StrCat(
          kPermanent, ": the curator counts ", enrolled.node_count(),
          " nodes in the session after ", last,
          " were sent; it does not take enrolment in parts (give this host "
          "at most ", part, " nodes)"));
    }
    token = enrolled.session_token();
  }
  return token;
}

absl::Status AgentHost::Session(v1::AgentService::Stub& stub) {
  absl::StatusOr<std::string> enrolled = Enrol(stub);
  if (!enrolled.ok()) return enrolled.status();
  counters_.sessions.fetch_add(1);
  const std::string token = *std::move(enrolled);
  {
    absl::MutexLock lock(&mu_);
    token_ = token;
  }

  grpc::ClientContext ctx;
  ctx.AddMetadata("ldpgraph-session", token);
  if (stopping_.load()) return absl::OkStatus();
  const TrackedCall tracked(this, &ctx);
  auto reader = stub.Subscribe(&ctx, v1::SubscribeRequest());
  ready_.store(true);
  v1::Task task;
  absl::Status answered;
  while (answered.ok() && reader->Read(&task)) {
    answered = Answer(stub, token, task);
  }
  ready_.store(false);
  if (!answered.ok()) {
    ctx.TryCancel();
    reader->Finish().ok();
    return answered;
  }
  grpc::Status s = reader->Finish();
  if (stopping_.load()) return absl::OkStatus();
  RETURN_IF_ERROR(FromGrpc(s, "task stream"));
  return absl::UnavailableError("task stream ended");
}

absl::Status AgentHost::Answer(v1::AgentService::Stub& stub,
                               const std::string& token, const v1::Task& task) {
  counters_.tasks.fetch_add(1);
  if (task.spec().kind() == v1::MECHANISM_KIND_EDGE_SUBSTITUTION) {
    // An exchange with the neighbours first, on a thread of its own; it
    // reports when its nodes are done. A task re-sent while it runs is
    // ignored.
    absl::Status started = exchanges_->Start(task);
    if (!started.ok() && !stopping_.load()) {
      std::cerr << options_.host_name << ": campaign " << task.campaign_id()
                << ": " << started.message() << "\n";
    }
    return absl::OkStatus();
  }
  // In parts: every fresh answer of a part is durable before it is sent.
  return shard_
      ->RespondAll(task, static_cast<size_t>(options_.answer_part),
                   [&](std::vector<v1::Report> part) {
                     return SendAndCount(stub, token, std::move(part));
                   })
      .status();
}

absl::Status AgentHost::SendAndCount(v1::AgentService::Stub& stub,
                                     const std::string& token,
                                     std::vector<v1::Report> reports) {
  uint64_t refusals = 0;
  for (const v1::Report& r : reports) refusals += r.has_refusal() ? 1 : 0;
  RETURN_IF_ERROR(SendReports(stub, token, std::move(reports)));
  counters_.refusals_sent.fetch_add(refusals);
  return absl::OkStatus();
}

absl::Status AgentHost::SendReports(v1::AgentService::Stub& stub,
                                    const std::string& token,
                                    std::vector<v1::Report> reports) {
  if (reports.empty()) return absl::OkStatus();
  const std::string campaign = reports.front().campaign_id();
  grpc::ClientContext ctx;
  ctx.AddMetadata("ldpgraph-session", token);
  const TrackedCall tracked(this, &ctx);
  auto stream = stub.Report(&ctx);
  uint64_t logged = 0;
  auto read_ack = [&]() -> absl::Status {
    v1::ReportAck ack;
    if (!stream->Read(&ack)) {
      return absl::UnavailableError("report stream closed before its ack");
    }
    for (const auto& r : ack.results()) {
      if (r.code() == 0) {
        counters_.reports_acked.fetch_add(1);
        if (r.duplicate()) counters_.duplicates.fetch_add(1);
      } else {
        counters_.rejected.fetch_add(1);
        if (logged++ < 3) {
          std::cerr << options_.host_name << ": campaign " << campaign
                    << " rejected a report: " << r.message() << "\n";
        }
      }
    }
    return absl::OkStatus();
  };
  const size_t n = reports.size();
  const size_t b = static_cast<size_t>(options_.batch_size);
  const absl::Time start = absl::Now();
  int in_flight = 0;
  absl::Status status;
  uint64_t batch_id = 0;
  for (size_t first = 0; first < n && status.ok(); first += b) {
    v1::ReportBatch batch;
    batch.set_batch_id(++batch_id);
    const size_t last = std::min(n, first + b);
    batch.mutable_reports()->Reserve(static_cast<int>(last - first));
    for (size_t i = first; i < last; ++i) {
      *batch.add_reports() = std::move(reports[i]);
    }
    if (!stream->Write(batch)) {
      status = absl::UnavailableError("report stream broke while writing");
      break;
    }
    counters_.reports_sent.fetch_add(last - first);
    if (options_.max_reports_per_second > 0) {
      const absl::Time due =
          start + absl::Seconds(last / options_.max_reports_per_second);
      while (!stopping_.load() && absl::Now() < due) {
        absl::SleepFor(std::min(absl::Milliseconds(20), due - absl::Now()));
      }
    }
    if (++in_flight >= options_.window) {
      status = read_ack();
      --in_flight;
    }
  }
  if (status.ok()) stream->WritesDone();
  while (status.ok() && in_flight > 0) {
    status = read_ack();
    --in_flight;
  }
  if (!status.ok()) ctx.TryCancel();
  grpc::Status finish = stream->Finish();
  RETURN_IF_ERROR(status.ok() ? FromGrpc(finish, "report stream") : status);
  return absl::OkStatus();
}

}  // namespace ldpgraph::agent

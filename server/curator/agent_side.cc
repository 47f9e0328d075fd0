#include "server/curator/agent_side.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/random/random.h"
#include "common/status_macros.h"
#include "server/curator/credentials.h"

namespace ldpgraph::curator {
namespace {

absl::Status ValidateCaps(const v1::BudgetCaps& caps, uint32_t node) {
  if (!std::isfinite(caps.total()) || caps.total() <= 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "node %u: caps.total must be finite and > 0, got %g", node,
        caps.total()));
  }
  for (const auto& [attribute, cap] : caps.per_attribute()) {
    if (!std::isfinite(cap) || cap <= 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "node %u: cap on '%s' must be finite and > 0, got %g", node,
          attribute, cap));
    }
  }
  return absl::OkStatus();
}

// A fresh bearer token: 32 random bytes, in hex.
absl::StatusOr<std::string> NewToken() {
  ASSIGN_OR_RETURN(std::string raw, SecureRandomBytes(32));
  return ToHex(raw);
}

}  // namespace

AgentSide::AgentSide(Parts parts, Options options)
    : parts_(parts), options_(std::move(options)) {}

absl::Status AgentSide::CheckCredential(const v1::NodeCredential& c) const {
  if (c.node_id() >= options_.num_nodes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "node ", c.node_id(), " out of range: the graph has ",
        options_.num_nodes, " nodes"));
  }
  if (!VerifyNodeCredential(options_.node_key, c.node_id(), c.secret())) {
    return absl::UnauthenticatedError(
        absl::StrCat("credential of node ", c.node_id(), " does not verify"));
  }
  return absl::OkStatus();
}

absl::Status AgentSide::CheckNode(const v1::NodeCredential& n) const {
  RETURN_IF_ERROR(CheckCredential(n));
  if (n.has_caps()) RETURN_IF_ERROR(ValidateCaps(n.caps(), n.node_id()));
  if (!n.sealing_key().empty()) {
    RETURN_IF_ERROR(KeyDirectory::ValidateKey(n.node_id(), n.sealing_key()));
  }
  return absl::OkStatus();
}

absl::StatusOr<FleetPlanner::Grant> AgentSide::ClaimShard(
    const v1::ClaimShardRequest& request, absl::Time now) {
  if (absl::Status s = CheckCredential(request.proof()); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("shard claim: ", s.message()));
  }
  return parts_.fleet->Claim(request.host_name(), now);
}

absl::StatusOr<std::shared_ptr<const Session>> AgentSide::Enrol(
    const v1::EnrolRequest& request) {
  if (request.nodes_size() == 0) {
    return absl::InvalidArgumentError("enrolment lists no node");
  }
  if (request.nodes_size() > options_.max_enrol) {
    return absl::InvalidArgumentError(absl::StrCat(
        "enrolment lists ", request.nodes_size(), " nodes, at most ",
        options_.max_enrol, " allowed per call (enrol in parts: "
        "EnrolRequest.more)"));
  }
  // A later part of an enrolment in parts carries on with the session built
  // so far, which is out of the table until this part succeeds: a part that
  // fails ends the enrolment.
  std::shared_ptr<Session> session;
  if (!request.continues().empty()) {
    ASSIGN_OR_RETURN(session,
                     parts_.sessions->Resume(request.continues(), absl::Now()));
  } else {
    session = std::make_shared<Session>();
    session->host_name = request.host_name().substr(0, 256);
  }
  const std::string actor = absl::StrCat("host:", session->host_name);
  const size_t earlier = session->nodes.size();
  std::vector<std::pair<uint32_t, std::string>> caps, keys;
  for (const auto& n : request.nodes()) {
    RETURN_IF_ERROR(CheckNode(n));
    session->nodes.push_back(n.node_id());
    if (n.has_caps()) caps.emplace_back(n.node_id(), n.caps().SerializeAsString());
    if (!n.sealing_key().empty()) keys.emplace_back(n.node_id(), n.sealing_key());
  }
  const auto part = session->nodes.begin() + static_cast<ptrdiff_t>(earlier);
  std::sort(part, session->nodes.end());
  const uint32_t part_first = *part, part_last = session->nodes.back();
  std::inplace_merge(session->nodes.begin(), part, session->nodes.end());
  if (auto twice = std::adjacent_find(session->nodes.begin(),
                                      session->nodes.end());
      twice != session->nodes.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "node ", *twice, " listed twice",
        earlier > 0 ? " (in this part, or in this and an earlier part)" : ""));
  }
  // The key directory: new keys stored, changed ones replaced and audited.
  ASSIGN_OR_RETURN(const KeyDirectory::Change keys_changed,
                   parts_.keys->Put(keys, actor));
  // The caps and the enrolment's audit entry in one transaction: a fleet
  // reconnecting at once is thousands of enrolments, each a sync to disk.
  // A part of an enrolment in parts is audited as one, with "part".
  const bool in_parts = request.more() || earlier > 0;
  RETURN_IF_ERROR(parts_.store->PutCapsAndAudit(
      caps, actor, "enrol",
      absl::StrFormat(
          R"({"nodes":%d,"first":%u,"last":%u,"caps":%d,"new_keys":%d,"replaced_keys":%d%s})",
          request.nodes_size(), part_first, part_last, caps.size(),
          keys_changed.added, keys_changed.replaced.size(),
          in_parts ? absl::StrFormat(R"(,"part":{"nodes_so_far":%d,"more":%s})",
                                     session->nodes.size(),
                                     request.more() ? "true" : "false")
                   : "")));
  for (const auto& n : request.nodes()) {
    if (n.has_caps()) parts_.ledger->SetCaps(n.node_id(), n.caps());
  }
  if (session->token.empty()) {
    ASSIGN_OR_RETURN(session->token, NewToken());
  }
  if (request.more()) {
    RETURN_IF_ERROR(parts_.sessions->Hold(session, absl::Now()));
    return std::shared_ptr<const Session>(session);
  }
  session->Index();
  parts_.sessions->Open(session);
  return std::shared_ptr<const Session>(session);
}

absl::Status AgentSide::RecordCapsAndKeys(
    const google::protobuf::RepeatedPtrField<v1::NodeCredential>& nodes,
    const std::string& actor) {
  std::vector<std::pair<uint32_t, std::string>> caps, keys;
  for (const auto& n : nodes) {
    if (n.has_caps() && !parts_.ledger->HasCaps(n.node_id(), n.caps())) {
      caps.emplace_back(n.node_id(), n.caps().SerializeAsString());
    }
    if (!n.sealing_key().empty()) keys.emplace_back(n.node_id(), n.sealing_key());
  }
  ASSIGN_OR_RETURN(const KeyDirectory::Change changed,
                   parts_.keys->Put(keys, actor));
  if (caps.empty() && changed.added == 0 && changed.replaced.empty()) {
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(parts_.store->PutCapsAndAudit(
      caps, actor, "check-in",
      absl::StrFormat(R"({"nodes":%d,"first":%u,"caps":%d,"new_keys":%d,"replaced_keys":%d})",
                      nodes.size(), nodes.Get(0).node_id(), caps.size(),
                      changed.added, changed.replaced.size())));
  for (const auto& n : nodes) {
    if (n.has_caps()) parts_.ledger->SetCaps(n.node_id(), n.caps());
  }
  return absl::OkStatus();
}

absl::StatusOr<AgentSide::CheckInResult> AgentSide::CheckIn(
    const v1::CheckInRequest& request, absl::Time now) {
  if (request.nodes_size() == 0) {
    return absl::InvalidArgumentError("check-in lists no node");
  }
  if (request.nodes_size() > kMaxCheckInNodes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "check-in lists ", request.nodes_size(), " nodes, at most ",
        kMaxCheckInNodes, " allowed (a host of many nodes enrols instead)"));
  }
  auto session = std::make_shared<Session>();
  session->host_name = request.device_name().substr(0, 256);
  for (const auto& n : request.nodes()) {
    RETURN_IF_ERROR(CheckNode(n));
    session->nodes.push_back(n.node_id());
  }
  std::sort(session->nodes.begin(), session->nodes.end());
  if (auto twice = std::adjacent_find(session->nodes.begin(), session->nodes.end());
      twice != session->nodes.end()) {
    return absl::InvalidArgumentError(absl::StrCat("node ", *twice, " listed twice"));
  }
  CheckInResult result;
  if (!parts_.desk->Admit(session->nodes, now, &result.retry_after)) {
    result.outcome = CheckInDesk::Outcome::kPaced;
    return result;
  }
  RETURN_IF_ERROR(RecordCapsAndKeys(request.nodes(),
                                    absl::StrCat("device:", session->host_name)));
  session->Index();
  result.tasks = parts_.campaigns->PendingTasks(*session);
  if (result.tasks.empty()) {
    result.outcome = CheckInDesk::Outcome::kIdle;
  } else {
    result.outcome = CheckInDesk::Outcome::kServed;
    ASSIGN_OR_RETURN(session->token, NewToken());
    result.session_ttl = parts_.desk->options().session_ttl;
    session->expires = now + result.session_ttl;
    parts_.sessions->Open(session);
    result.session = session;
  }
  result.retry_after = parts_.desk->Finish(result.outcome);
  return result;
}

}  // namespace ldpgraph::curator

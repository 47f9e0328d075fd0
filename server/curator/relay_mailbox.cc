#include "server/curator/relay_mailbox.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ldpgraph::curator {

absl::StatusOr<int> RelayMailbox::Relay(const Session& session,
                                        const v1::RelayRequest& request) {
  if (request.messages_size() > kMaxMessages) {
    return absl::InvalidArgumentError(
        absl::StrCat("relay of ", request.messages_size(),
                     " messages; at most ", kMaxMessages));
  }
  std::vector<store::SealedRow> rows;
  rows.reserve(request.messages_size());
  for (int i = 0; i < request.messages_size(); ++i) {
    const auto& m = request.messages(i);
    if (!session.Covers(m.from_node())) {
      return absl::PermissionDeniedError(
          absl::StrCat("messages[", i, "]: node ", m.from_node(),
                       " is not one of this session's nodes"));
    }
    if (m.to_node() >= num_nodes_) {
      return absl::InvalidArgumentError(absl::StrCat(
          "messages[", i, "]: recipient ", m.to_node(), " out of range"));
    }
    if (m.ciphertext().size() > kMaxCiphertext) {
      return absl::InvalidArgumentError(absl::StrCat(
          "messages[", i, "]: ciphertext of ", m.ciphertext().size(),
          " bytes; at most ", kMaxCiphertext));
    }
    rows.push_back(store::SealedRow{0, m.campaign_id(), m.from_node(),
                                    m.to_node(), m.ciphertext()});
  }
  RETURN_IF_ERROR(store_->PutSealed(rows));
  return static_cast<int>(rows.size());
}

absl::StatusOr<std::vector<v1::SealedMessage>> RelayMailbox::Fetch(
    const Session& session, uint64_t after, int limit,
    const std::string& campaign) const {
  if (limit <= 0 || limit > kMaxFetch) limit = kMaxFetch;
  ASSIGN_OR_RETURN(
      auto rows, store_->FetchSealed(session.nodes, static_cast<int64_t>(after),
                                     limit, campaign));
  std::vector<v1::SealedMessage> out;
  out.reserve(rows.size());
  for (auto& r : rows) {
    v1::SealedMessage m;
    m.set_campaign_id(r.campaign);
    m.set_from_node(r.from_node);
    m.set_to_node(r.to_node);
    m.set_ciphertext(std::move(r.ciphertext));
    m.set_sequence(static_cast<uint64_t>(r.sequence));
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace ldpgraph::curator

#include "server/store/answer_index.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"

namespace ldpgraph::store {

const AnswerLoc* CampaignIndex::Find(uint32_t node) const {
  if (node < dense_.size()) {
    const AnswerLoc& loc = dense_[node];
    return loc.length_refusal == AnswerLoc::kAbsent ? nullptr : &loc;
  }
  const auto it = sparse_.find(node);
  return it == sparse_.end() ? nullptr : &it->second;
}

bool CampaignIndex::Insert(uint32_t node, const AnswerLoc& loc) {
  if (node >= dense_.size()) {
    const size_t limit = 2 * (count_ + 1) + 4096;
    if (node >= limit) {
      if (!sparse_.try_emplace(node, loc).second) return false;
      ++count_;
      return true;
    }
    if (sparse_.contains(node)) return false;
    Grow(std::max<size_t>(
        node + 1,
        std::min(std::max<size_t>(2 * dense_.size(), 1024), limit)));
  }
  AnswerLoc& slot = dense_[node];
  if (slot.length_refusal != AnswerLoc::kAbsent) return false;
  slot = loc;
  ++count_;
  return true;
}

void CampaignIndex::Erase(uint32_t node) {
  if (node < dense_.size()) {
    if (dense_[node].length_refusal == AnswerLoc::kAbsent) return;
    dense_[node] = AnswerLoc();
  } else if (sparse_.erase(node) == 0) {
    return;
  }
  --count_;
}

void CampaignIndex::ForEach(
    absl::FunctionRef<void(uint32_t node, const AnswerLoc& loc)> fn) const {
  for (size_t node = 0; node < dense_.size(); ++node) {
    if (dense_[node].length_refusal != AnswerLoc::kAbsent) {
      fn(static_cast<uint32_t>(node), dense_[node]);
    }
  }
  for (const auto& [node, loc] : sparse_) fn(node, loc);
}

void CampaignIndex::Grow(size_t size) {
  dense_.resize(size);
  for (auto it = sparse_.begin(); it != sparse_.end();) {
    if (it->first < size) {
      dense_[it->first] = it->second;
      sparse_.erase(it++);
    } else {
      ++it;
    }
  }
}

const CampaignIndex* AnswerIndex::Find(int64_t campaign) const {
  const auto it = campaigns_.find(campaign);
  return it == campaigns_.end() ? nullptr : &it->second;
}

absl::Status AnswerIndex::AddLoggedRow(int64_t id, int64_t campaign,
                                       absl::Span<const LogEntry> entries) {
  const auto [it, created] = campaigns_.try_emplace(campaign);
  CampaignIndex& c = it->second;
  if (c.rows.size() >= std::numeric_limits<uint32_t>::max()) {
    return absl::DataLossError("too many rows for one campaign");
  }
  const auto row = static_cast<uint32_t>(c.rows.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    const LogEntry& e = entries[i];
    if (!c.Insert(e.node, AnswerLoc{row, e.offset,
                                    e.length << 1 | (e.refusal ? 1u : 0u)})) {
      const AnswerLoc* first = c.Find(e.node);
      const int64_t earlier = first->row == row ? id : c.rows[first->row];
      for (size_t j = 0; j < i; ++j) c.Erase(entries[j].node);
      if (created) campaigns_.erase(it);
      return absl::DataLossError(absl::StrCat("a second answer of node ",
                                              e.node, " (the first is in row ",
                                              earlier, ")"));
    }
  }
  c.rows.push_back(id);
  last_row_ = id;
  return absl::OkStatus();
}

void AnswerIndex::AddNewRows(absl::Span<const NewRow> rows) {
  for (const NewRow& r : rows) {
    CampaignIndex& c = campaigns_[r.campaign];
    const auto row = static_cast<uint32_t>(c.rows.size());
    c.rows.push_back(r.id);
    for (const NewEntry& e : r.entries) {
      c.Insert(e.node, AnswerLoc{row, e.offset, e.length_refusal});
    }
    last_row_ = std::max(last_row_, r.id);
  }
}

std::vector<int64_t> AnswerIndex::Campaigns() const {
  std::vector<int64_t> out;
  out.reserve(campaigns_.size());
  for (const auto& [campaign, c] : campaigns_) out.push_back(campaign);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace ldpgraph::store

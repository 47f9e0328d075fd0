#include "server/curator/sessions.h"

#include <algorithm>

#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"

namespace ldpgraph::curator {

SessionTable::SessionTable(uint32_t num_nodes, absl::Duration hold_for)
    : cover_(num_nodes, 0), hold_for_(hold_for) {}

uint64_t SessionTable::Fingerprint(const std::vector<uint32_t>& nodes) {
  return absl::HashOf(nodes);
}

void SessionTable::DropLocked(const std::string& token) {
  auto it = by_token_.find(token);
  if (it == by_token_.end()) return;
  for (uint32_t v : it->second->nodes) {
    if (--cover_[v] == 0) --enrolled_;
  }
  if (it->second->expires != absl::InfiniteFuture()) --lapsing_live_;
  by_token_.erase(it);
}

void SessionTable::DropExpiredLocked(absl::Time now) {
  while (!lapsing_.empty() && lapsing_.front().first <= now) {
    const std::string& token = lapsing_.front().second;
    auto it = by_token_.find(token);
    if (it != by_token_.end() && it->second->expires <= now) {
      const uint64_t fp = Fingerprint(it->second->nodes);
      DropLocked(token);
      auto same = by_nodes_.find(fp);
      if (same != by_nodes_.end()) {
        std::erase(same->second, token);
        if (same->second.empty()) by_nodes_.erase(same);
      }
    }
    lapsing_.pop_front();
  }
}

int SessionTable::Open(std::shared_ptr<const Session> session) {
  const uint64_t fp = Fingerprint(session->nodes);
  absl::MutexLock lock(&mu_);
  DropExpiredLocked(absl::Now());
  int dropped = 0;
  std::vector<std::string>& same = by_nodes_[fp];
  for (auto it = same.begin(); it != same.end();) {
    auto s = by_token_.find(*it);
    if (s == by_token_.end()) {
      it = same.erase(it);
    } else if (s->second->nodes == session->nodes) {
      DropLocked(*it);
      it = same.erase(it);
      ++dropped;
    } else {
      ++it;
    }
  }
  same.push_back(session->token);
  for (uint32_t v : session->nodes) {
    if (cover_[v]++ == 0) ++enrolled_;
  }
  if (session->expires != absl::InfiniteFuture()) {
    lapsing_.emplace_back(session->expires, session->token);
    ++lapsing_live_;
  }
  by_token_[session->token] = std::move(session);
  replaced_ += static_cast<uint64_t>(dropped);
  return dropped;
}

void SessionTable::DropLapsedLocked(absl::Time now) {
  for (auto it = held_.begin(); it != held_.end();) {
    if (it->second.lapses <= now) {
      held_nodes_ -= it->second.session->nodes.size();
      held_.erase(it++);
    } else {
      ++it;
    }
  }
}

absl::Status SessionTable::Hold(std::shared_ptr<Session> partial,
                                absl::Time now) {
  absl::MutexLock lock(&mu_);
  DropLapsedLocked(now);
  const uint64_t limit = 2 * static_cast<uint64_t>(cover_.size());
  if (held_nodes_ + partial->nodes.size() > limit) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "enrolments in parts under way list ", held_nodes_,
        " nodes already, at most ", limit,
        " (twice the graph's) may be held: try again later"));
  }
  held_nodes_ += partial->nodes.size();
  std::string token = partial->token;
  held_[std::move(token)] = Held{std::move(partial), now + hold_for_};
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<Session>> SessionTable::Resume(
    absl::string_view token, absl::Time now) {
  absl::MutexLock lock(&mu_);
  DropLapsedLocked(now);
  auto it = held_.find(token);
  if (it == held_.end()) {
    return absl::FailedPreconditionError(
        "no enrolment in parts under way with this token (the curator "
        "restarted, or no part came for too long): enrol again from the "
        "first part");
  }
  std::shared_ptr<Session> session = std::move(it->second.session);
  held_nodes_ -= session->nodes.size();
  held_.erase(it);
  return session;
}

absl::StatusOr<std::shared_ptr<const Session>> SessionTable::Find(
    absl::string_view token) const {
  absl::MutexLock lock(&mu_);
  auto it = by_token_.find(token);
  if (it == by_token_.end()) {
    return absl::UnauthenticatedError(
        "unknown session (the curator restarted, or the host enrolled again "
        "and this token was replaced): enrol again");
  }
  if (it->second->expires <= absl::Now()) {
    return absl::UnauthenticatedError(
        "the check-in's session lapsed: check in again");
  }
  return it->second;
}

uint32_t SessionTable::sessions() const {
  absl::MutexLock lock(&mu_);
  return static_cast<uint32_t>(by_token_.size());
}

uint32_t SessionTable::enrolled_nodes() const {
  absl::MutexLock lock(&mu_);
  return enrolled_;
}

uint32_t SessionTable::lapsing() const {
  absl::MutexLock lock(&mu_);
  return lapsing_live_;
}

uint64_t SessionTable::replaced() const {
  absl::MutexLock lock(&mu_);
  return replaced_;
}

}  // namespace ldpgraph::curator

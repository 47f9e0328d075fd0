// Status propagation macros. Debian's Abseil (20220623) ships none, so
// ldpgraph keeps these two, in the shape used by Google's differential-privacy
// library (cc/base/status_macros.h).
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define LDPGRAPH_STATUS_CONCAT_INNER_(a, b) a##b
#define LDPGRAPH_STATUS_CONCAT_(a, b) LDPGRAPH_STATUS_CONCAT_INNER_(a, b)

// Evaluates expr (an absl::Status); returns it from the enclosing function
// unless it is OK.
#define RETURN_IF_ERROR(expr)                        \
  do {                                               \
    ::absl::Status _ldpgraph_status = (expr);        \
    if (!_ldpgraph_status.ok()) return _ldpgraph_status; \
  } while (0)

// ASSIGN_OR_RETURN(lhs, rexpr): evaluates rexpr (an absl::StatusOr<T>);
// returns its status if it is not OK, otherwise moves its value into lhs,
// which may be a declaration (`auto x`) or an existing variable.
#define ASSIGN_OR_RETURN(lhs, rexpr)                                         \
  ASSIGN_OR_RETURN_IMPL_(LDPGRAPH_STATUS_CONCAT_(_ldpgraph_or_, __LINE__), \
                         lhs, rexpr)
#define ASSIGN_OR_RETURN_IMPL_(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                           \
  if (!statusor.ok()) return statusor.status();      \
  lhs = std::move(statusor).value()

// Copyright 2026 The pagedkv Authors.
//
// Early-return helpers for absl::Status and absl::StatusOr.
//
// Example:
//   absl::StatusOr<int> Parse(std::string_view s);
//   absl::Status Use(std::string_view s) {
//     PAGEDKV_ASSIGN_OR_RETURN(int value, Parse(s));
//     PAGEDKV_RETURN_IF_ERROR(Check(value));
//     return absl::OkStatus();
//   }
#ifndef PAGEDKV_STATUS_MACROS_H_
#define PAGEDKV_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

// Returns the status from the enclosing function when `expr` is not OK.
#define PAGEDKV_RETURN_IF_ERROR(expr)                  \
  do {                                                 \
    ::absl::Status pagedkv_status_ = (expr);           \
    if (!pagedkv_status_.ok()) return pagedkv_status_; \
  } while (0)

#define PAGEDKV_STATUS_CONCAT_INNER_(a, b) a##b
#define PAGEDKV_STATUS_CONCAT_(a, b) PAGEDKV_STATUS_CONCAT_INNER_(a, b)

// Evaluates `rexpr` (an absl::StatusOr<T>); returns its status when not OK, else moves the value
// into `lhs` (a declaration such as `int x` or an existing variable).
#define PAGEDKV_ASSIGN_OR_RETURN(lhs, rexpr) \
  PAGEDKV_ASSIGN_OR_RETURN_IMPL_(PAGEDKV_STATUS_CONCAT_(pagedkv_statusor_, __LINE__), lhs, rexpr)
#define PAGEDKV_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                                   \
  if (!statusor.ok()) return statusor.status();              \
  lhs = std::move(statusor).value()

#endif  // PAGEDKV_STATUS_MACROS_H_

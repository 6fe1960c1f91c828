// Copyright 2026 The pagedkv Authors.
//
// Overflow-checked integer arithmetic for sizes, counts and offsets that come from input (files,
// flags, API arguments). One helper for every site: loaders, parsers and public methods compute
// such values only through these, never with a bare `+` or `*`.
//
// Example:
//   int64_t end = 0;
//   if (!CheckedAdd(offset, length, &end)) return absl::InvalidArgumentError("... overflows");
//   PAGEDKV_ASSIGN_OR_RETURN(int64_t bytes,
//                            CheckedProduct({rows, cols, int64_t{sizeof(float)}}, "tensor w"));
#ifndef PAGEDKV_CHECKED_MATH_H_
#define PAGEDKV_CHECKED_MATH_H_

#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace pagedkv {

// *out = a + b; false (and *out unspecified) when the sum does not fit T.
template <typename T>
[[nodiscard]] constexpr bool CheckedAdd(T a, T b, T* out) {
  static_assert(std::is_integral_v<T>, "integers only");
  return !__builtin_add_overflow(a, b, out);
}

// *out = a * b; false (and *out unspecified) when the product does not fit T.
template <typename T>
[[nodiscard]] constexpr bool CheckedMul(T a, T b, T* out) {
  static_assert(std::is_integral_v<T>, "integers only");
  return !__builtin_mul_overflow(a, b, out);
}

// The sum of non-negative `terms`; InvalidArgument naming `what` when one is negative or the sum
// passes INT64_MAX.
inline absl::StatusOr<int64_t> CheckedSum(std::initializer_list<int64_t> terms,
                                          absl::string_view what) {
  int64_t sum = 0;
  for (int64_t term : terms) {
    if (term < 0 || !CheckedAdd(sum, term, &sum)) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": a size is negative or their sum overflows 64 bits"));
    }
  }
  return sum;
}

// The product of non-negative `factors`; InvalidArgument naming `what` when one is negative or
// the product passes INT64_MAX.
inline absl::StatusOr<int64_t> CheckedProduct(std::initializer_list<int64_t> factors,
                                              absl::string_view what) {
  int64_t product = 1;
  for (int64_t factor : factors) {
    if (factor < 0 || !CheckedMul(product, factor, &product)) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": a size is negative or their product overflows 64 bits"));
    }
  }
  return product;
}

}  // namespace pagedkv

#endif  // PAGEDKV_CHECKED_MATH_H_

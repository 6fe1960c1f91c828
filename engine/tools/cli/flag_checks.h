// Copyright 2026 The pagedkv Authors.
//
// CLI11 validators for numeric flags with messages that say what is allowed. Every numeric flag
// of the `pagedkv` commands takes one: negative, zero, NaN, infinite, empty and out-of-range
// values are refused before a command runs.
//
//   sub->add_option("--capacity-blocks", blocks, "Cache capacity in blocks")
//       ->check(PositiveNumber());
#ifndef PAGEDKV_ENGINE_TOOLS_CLI_FLAG_CHECKS_H_
#define PAGEDKV_ENGINE_TOOLS_CLI_FLAG_CHECKS_H_

#include "CLI/CLI.hpp"

namespace pagedkv::cli {

// A finite number > 0.
CLI::Validator PositiveNumber();
// A finite number >= 0.
CLI::Validator NonNegativeNumber();
// A finite number in [low, high].
CLI::Validator NumberIn(double low, double high);
// A finite number in (0, 1].
CLI::Validator Fraction();

}  // namespace pagedkv::cli

#endif  // PAGEDKV_ENGINE_TOOLS_CLI_FLAG_CHECKS_H_

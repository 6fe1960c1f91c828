// Copyright 2026 The pagedkv Authors.
#include "engine/tools/cli/flag_checks.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <string>

#include "absl/strings/str_format.h"

namespace pagedkv::cli {
namespace {

// Parses the whole of `text` as a finite number; "" on success, else what is wrong.
std::string ParseFinite(const std::string& text, double* value) {
  if (text.empty()) return "an empty value; give a number";
  errno = 0;
  char* end = nullptr;
  *value = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size()) return absl::StrFormat("'%s' is not a number", text);
  if (!std::isfinite(*value) || errno == ERANGE) {
    return absl::StrFormat("%s is not a finite number", text);
  }
  return "";
}

CLI::Validator NumberCheck(std::string description, std::function<bool(double)> allowed) {
  return CLI::Validator(
      [description, allowed](std::string& text) -> std::string {
        double value = 0;
        if (std::string error = ParseFinite(text, &value); !error.empty()) {
          return error + " (" + description + ")";
        }
        if (!allowed(value)) return absl::StrFormat("%s is not %s", text, description);
        return "";
      },
      description);
}

}  // namespace

CLI::Validator PositiveNumber() {
  return NumberCheck("a number > 0", [](double v) { return v > 0; });
}

CLI::Validator NonNegativeNumber() {
  return NumberCheck("a number >= 0", [](double v) { return v >= 0; });
}

CLI::Validator NumberIn(double low, double high) {
  return NumberCheck(absl::StrFormat("a number in [%g, %g]", low, high),
                     [low, high](double v) { return v >= low && v <= high; });
}

CLI::Validator Fraction() {
  return NumberCheck("a fraction in (0, 1]", [](double v) { return v > 0 && v <= 1; });
}

}  // namespace pagedkv::cli

// Copyright 2026 The pagedkv Authors.
//
// ParseRedisUrl (pagedkv/tiers/redis_tier.h).
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "pagedkv/tiers/redis_tier.h"

namespace pagedkv {
namespace {

absl::StatusOr<std::string> PercentDecode(std::string_view s, std::string_view what) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out.push_back(s[i]);
      continue;
    }
    int value = 0;
    const std::string hex(s.substr(i + 1, 2));
    if (hex.size() != 2 || !absl::SimpleHexAtoi(hex, &value)) {
      return absl::InvalidArgumentError(absl::StrCat("redis URL: a '%' in the ", std::string(what),
                                                     " needs two hex digits after it"));
    }
    out.push_back(static_cast<char>(value));
    i += 2;
  }
  return out;
}

absl::StatusOr<int32_t> ParseNumber(std::string_view s, int32_t lo, int32_t hi,
                                    std::string_view what) {
  int32_t v = 0;
  if (s.empty() || !absl::SimpleAtoi(std::string(s), &v) || v < lo || v > hi) {
    return absl::InvalidArgumentError(absl::StrCat("redis URL: the ", std::string(what), " \"",
                                                   std::string(s), "\" must be a number in [", lo,
                                                   ", ", hi, "]"));
  }
  return v;
}

}  // namespace

absl::StatusOr<RedisEndpoint> ParseRedisUrl(std::string_view url) {
  constexpr std::string_view kScheme = "redis://";
  if (url.substr(0, kScheme.size()) != kScheme) {
    return absl::InvalidArgumentError(
        absl::StrCat("redis URL \"", std::string(url),
                     "\" must start with redis:// (redis://[user:password@]host[:port][/db])"));
  }
  std::string_view rest = url.substr(kScheme.size());
  RedisEndpoint e;
  if (const size_t at = rest.rfind('@'); at != std::string_view::npos) {
    const std::string_view userinfo = rest.substr(0, at);
    rest = rest.substr(at + 1);
    const size_t colon = userinfo.find(':');
    const std::string_view user = colon == std::string_view::npos ? "" : userinfo.substr(0, colon);
    const std::string_view pass =
        colon == std::string_view::npos ? userinfo : userinfo.substr(colon + 1);
    absl::StatusOr<std::string> u = PercentDecode(user, "user");
    if (!u.ok()) return u.status();
    absl::StatusOr<std::string> p = PercentDecode(pass, "password");
    if (!p.ok()) return p.status();
    e.user = *std::move(u);
    e.password = *std::move(p);
  }
  if (const size_t slash = rest.find('/'); slash != std::string_view::npos) {
    const std::string_view db = rest.substr(slash + 1);
    rest = rest.substr(0, slash);
    if (!db.empty()) {
      absl::StatusOr<int32_t> n = ParseNumber(db, 0, 1 << 20, "database number");
      if (!n.ok()) return n.status();
      e.db = *n;
    }
  }
  if (const size_t colon = rest.rfind(':'); colon != std::string_view::npos) {
    absl::StatusOr<int32_t> port = ParseNumber(rest.substr(colon + 1), 1, 65535, "port");
    if (!port.ok()) return port.status();
    e.port = *port;
    rest = rest.substr(0, colon);
  }
  if (rest.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("redis URL \"", std::string(url), "\" names no host"));
  }
  e.host = std::string(rest);
  return e;
}

}  // namespace pagedkv

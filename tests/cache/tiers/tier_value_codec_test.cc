// Copyright 2026 The pagedkv Authors.
#include "cache/tiers/tier_value_codec.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "cache/tiers/tier_checksum.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pagedkv/tiers/kv_tier.h"

#define XXH_INLINE_ALL  // header-only xxHash, as the library uses it
#include <xxhash.h>

namespace pagedkv {
namespace {

using ::testing::HasSubstr;

TierValueFormat Format() {
  return {.dtype = 0,
          .layout = 1,
          .block_size = 2,
          .num_layers = 3,
          .value_bytes = 16,
          .layout_digest = 77};
}

std::span<const std::byte> Bytes(const std::string& s) {
  return std::as_bytes(std::span<const char>(s.data(), s.size()));
}

TEST(TierValueCodecTest, RoundTripsAndRejectsEveryMismatch) {
  const std::vector<TokenId> tokens = {5, 9};
  std::vector<std::byte> payload(16);
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<std::byte>(i * 7);
  const std::string v = EncodeTierValue(Format(), tokens, payload);
  ASSERT_EQ(v.size(), kTierValueHeaderBytes + 8 + 16);
  absl::StatusOr<std::span<const std::byte>> got = DecodeTierValue(Format(), tokens, Bytes(v));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(std::equal(got->begin(), got->end(), payload.begin(), payload.end()));

  const std::vector<TokenId> other_tokens = {5, 8};
  EXPECT_THAT(DecodeTierValue(Format(), other_tokens, Bytes(v)).status().message(),
              HasSubstr("other tokens"));
  TierValueFormat f = Format();
  f.dtype = 1;
  EXPECT_THAT(DecodeTierValue(f, tokens, Bytes(v)).status().message(), HasSubstr("dtype"));
  f = Format();
  f.num_layers = 4;
  EXPECT_THAT(DecodeTierValue(f, tokens, Bytes(v)).status().message(), HasSubstr("layer count"));
  f = Format();
  f.layout_digest = 78;
  EXPECT_THAT(DecodeTierValue(f, tokens, Bytes(v)).status().message(), HasSubstr("layout"));
  // Every single flipped byte is caught (header field, token or checksum).
  for (size_t i = 0; i < v.size(); ++i) {
    std::string bad = v;
    bad[i] = static_cast<char>(bad[i] ^ 0x10);
    EXPECT_FALSE(DecodeTierValue(Format(), tokens, Bytes(bad)).ok()) << "byte " << i;
  }
  EXPECT_FALSE(DecodeTierValue(Format(), tokens, Bytes(v.substr(0, v.size() - 1))).ok());
  EXPECT_FALSE(DecodeTierValue(Format(), tokens, Bytes(v.substr(0, 10))).ok());
}

// The checksum as tier_value_codec.h defines it, computed here with xxHash itself: XXH3-64 of
// the tokens and the payload (contiguous from byte 64) seeded with XXH3-64 of bytes [0, 40).
TEST(TierValueCodecTest, TheChecksumIsTheDocumentedOne) {
  const std::vector<TokenId> tokens = {5, 9, 11, 13};
  std::vector<std::byte> payload(1000);
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<std::byte>(i * 13 + 1);
  const std::string v = EncodeTierValue(Format(), tokens, payload);
  uint64_t stored = 0;
  std::memcpy(&stored, v.data() + 40, sizeof(stored));
  const uint64_t seed = XXH3_64bits(v.data(), 40);
  EXPECT_EQ(stored, XXH3_64bits_withSeed(v.data() + kTierValueHeaderBytes,
                                         v.size() - kTierValueHeaderBytes, seed));
  EXPECT_EQ(kTierValueHeaderBytes % 64, 0u) << "the checksummed bytes start on a cache line";
}

// The AVX2 kernel (where the CPU has it) gives the portable kernel's checksum on every size,
// so values written on one machine read on another.
TEST(TierValueCodecTest, ChecksumKernelsAgree) {
  if (!__builtin_cpu_supports("avx2")) GTEST_SKIP() << "no AVX2 on this CPU";
  std::mt19937 rng(7);
  for (size_t bytes : {0, 1, 63, 64, 239, 240, 1024, 4097, 65536, 1 << 20}) {
    std::vector<std::byte> payload(bytes);
    for (std::byte& b : payload) b = static_cast<std::byte>(rng());
    const std::vector<TokenId> tokens = {static_cast<TokenId>(bytes), 3, 5};
    std::vector<std::byte> head(40, std::byte{9});
    const uint64_t portable = internal::TierValueChecksumPortable(head, tokens, payload);
    EXPECT_EQ(internal::TierValueChecksumAvx2(head, tokens, payload), portable) << bytes;
    if (__builtin_cpu_supports("avx512f")) {
      EXPECT_EQ(internal::TierValueChecksumAvx512(head, tokens, payload), portable) << bytes;
    }
  }
}

}  // namespace
}  // namespace pagedkv

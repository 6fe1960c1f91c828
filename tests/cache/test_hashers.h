// Copyright 2026 The pagedkv Authors.
//
// Block hashers for tests: a deliberately weak one that forces collisions.
#ifndef PAGEDKV_TESTS_CACHE_TEST_HASHERS_H_
#define PAGEDKV_TESTS_CACHE_TEST_HASHERS_H_

#include <xxhash.h>

#include <cstdint>
#include <span>

#include "pagedkv/cache/block_hash.h"

namespace pagedkv::testing {

// Keeps only `bits` bits of XXH3-64, so distinct blocks collide often (bits = 2: 4 values).
class CollidingHasher final : public BlockHasher {
 public:
  explicit CollidingHasher(int bits) : mask_((uint64_t{1} << bits) - 1) {}
  BlockHash Hash(std::span<const std::byte> bytes) const override {
    return BlockHash{XXH3_64bits(bytes.data(), bytes.size()) & mask_, 0};
  }

 private:
  uint64_t mask_;
};

}  // namespace pagedkv::testing

#endif  // PAGEDKV_TESTS_CACHE_TEST_HASHERS_H_

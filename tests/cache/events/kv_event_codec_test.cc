// Copyright 2026 The pagedkv Authors.
//
// The expected bytes below are written by hand from the msgpack specification (fixmap 0x8N,
// fixarray 0x9N, fixstr 0xa0|len, float64 0xcb, bin8 0xc4, uint8 0xcc, uint64 0xcf, nil 0xc0), not
// by the encoder under test; tests/python/test_kv_events_wire.py decodes live payloads with
// Python's msgpack as a second, independent decoder.
#include "pagedkv/events/kv_event_codec.h"

#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace pagedkv {
namespace {

// Appends a fixstr.
void Str(std::string& out, std::string_view s) {
  out.push_back(static_cast<char>(0xa0 | s.size()));
  out.append(s);
}

std::string Bytes(std::initializer_list<int> bytes) {
  std::string out;
  for (int b : bytes) out.push_back(static_cast<char>(b));
  return out;
}

KvEventBatch Projected(KvEventBatch b, KvBlockHashFormat format);

TEST(KvEventCodecTest, MapEncodingMatchesHandWrittenBytes) {
  KvEventBatch batch{.timestamp = 1.5, .events = {{.type = KvEventType::kAllBlocksCleared}}};
  std::string want = Bytes({0x82});
  Str(want, "ts");
  want += Bytes({0xcb, 0x3f, 0xf8, 0, 0, 0, 0, 0, 0});
  Str(want, "events");
  want += Bytes({0x91, 0x81});
  Str(want, "type");
  Str(want, "AllBlocksCleared");
  EXPECT_EQ(EncodeKvEventBatch(batch, {.encoding = KvEventEncoding::kAllMap}), want);
}

TEST(KvEventCodecTest, StoredEventAsMapWithIntegerHashes) {
  KvEventBatch batch{.timestamp = 2.0,
                     .events = {{.type = KvEventType::kBlockStored,
                                 .block_hashes = {BlockHash{0xffffffffffffffffULL, 7}},
                                 .parent_block_hash = BlockHash{200, 9},
                                 .token_ids = {1, 2},
                                 .block_size = 2,
                                 .medium = "GPU"}},
                     .data_parallel_rank = 1};
  std::string want = Bytes({0x83});
  Str(want, "ts");
  want += Bytes({0xcb, 0x40, 0, 0, 0, 0, 0, 0, 0});
  Str(want, "events");
  want += Bytes({0x91, 0x88});
  Str(want, "type");
  Str(want, "BlockStored");
  Str(want, "block_hashes");
  want += Bytes({0x91, 0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff});  // low word only
  Str(want, "parent_block_hash");
  want += Bytes({0xcc, 200});
  Str(want, "token_ids");
  want += Bytes({0x92, 1, 2});
  Str(want, "block_size");
  want += Bytes({2});
  Str(want, "lora_id");
  want += Bytes({0xc0});
  Str(want, "medium");
  Str(want, "GPU");
  Str(want, "lora_name");
  want += Bytes({0xc0});
  Str(want, "data_parallel_rank");
  want += Bytes({1});
  EXPECT_EQ(EncodeKvEventBatch(batch, {.encoding = KvEventEncoding::kAllMap}), want);
}

// vLLM 0.33: [ts, events, rank] with each event a map; group_idx (set) follows lora_name, the
// other defaulted fields (unset) are omitted.
TEST(KvEventCodecTest, VllmLayoutMatchesHandWrittenBytes) {
  KvEventBatch batch{.timestamp = 2.0,
                     .events = {{.type = KvEventType::kBlockStored,
                                 .block_hashes = {BlockHash{5, 7}},
                                 .token_ids = {1, 2},
                                 .block_size = 2,
                                 .medium = "GPU",
                                 .group_idx = 0},
                                {.type = KvEventType::kBlockRemoved,
                                 .block_hashes = {BlockHash{6, 7}},
                                 .medium = "GPU",
                                 .group_idx = 0,
                                 .locality = "LOCAL"}},
                     .data_parallel_rank = 0};
  std::string want = Bytes({0x93, 0xcb, 0x40, 0, 0, 0, 0, 0, 0, 0, 0x92, 0x89});
  Str(want, "type");
  Str(want, "BlockStored");
  Str(want, "block_hashes");
  want += Bytes({0x91, 5});
  Str(want, "parent_block_hash");
  want += Bytes({0xc0});
  Str(want, "token_ids");
  want += Bytes({0x92, 1, 2});
  Str(want, "block_size");
  want += Bytes({2});
  Str(want, "lora_id");
  want += Bytes({0xc0});
  Str(want, "medium");
  Str(want, "GPU");
  Str(want, "lora_name");
  want += Bytes({0xc0});
  Str(want, "group_idx");
  want += Bytes({0, 0x85});
  Str(want, "type");
  Str(want, "BlockRemoved");
  Str(want, "block_hashes");
  want += Bytes({0x91, 6});
  Str(want, "medium");
  Str(want, "GPU");
  Str(want, "group_idx");
  want += Bytes({0});
  Str(want, "locality");
  Str(want, "LOCAL");
  want += Bytes({0});  // data_parallel_rank
  const std::string got = EncodeKvEventBatch(batch, {});
  EXPECT_EQ(got, want);
  absl::StatusOr<KvEventBatch> back = DecodeKvEventBatch(got);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, Projected(batch, KvBlockHashFormat::kUint64));
}

TEST(KvEventCodecTest, RemovedEventAsTaggedArrayWithByteHashes) {
  KvEventBatch batch{
      .timestamp = 2.0,
      .events = {{.type = KvEventType::kBlockRemoved,
                  .block_hashes = {BlockHash{0x0102030405060708ULL, 0x1112131415161718ULL}},
                  .medium = "CPU"}}};
  std::string want = Bytes({0x92, 0xcb, 0x40, 0, 0, 0, 0, 0, 0, 0, 0x91, 0x93});
  Str(want, "BlockRemoved");
  want += Bytes(
      {0x91, 0xc4, 16, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 1, 2, 3, 4, 5, 6, 7, 8});
  Str(want, "CPU");
  const std::string got = EncodeKvEventBatch(
      batch, {.encoding = KvEventEncoding::kAllArray, .hash_format = KvBlockHashFormat::kBytes});
  EXPECT_EQ(got, want);
  absl::StatusOr<KvEventBatch> back = DecodeKvEventBatch(got);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, batch);
}

BlockHash RandomHash(std::mt19937_64& rng) { return BlockHash{rng(), rng()}; }

KvEventBatch RandomBatch(std::mt19937_64& rng, bool vllm_fields = false) {
  KvEventBatch b{.timestamp = static_cast<double>(rng() % 100000) / 7.0};
  if (rng() % 2) b.data_parallel_rank = static_cast<int32_t>(rng() % 8);
  const int n = static_cast<int>(rng() % 6);
  for (int i = 0; i < n; ++i) {
    KvBatchEvent e{.type = static_cast<KvEventType>(rng() % 3)};
    if (e.type != KvEventType::kAllBlocksCleared) {
      const int blocks = 1 + static_cast<int>(rng() % 4);
      for (int k = 0; k < blocks; ++k) e.block_hashes.push_back(RandomHash(rng));
      if (rng() % 4) e.medium = rng() % 2 ? "GPU" : "CPU";
    }
    if (e.type == KvEventType::kBlockStored) {
      if (rng() % 2) e.parent_block_hash = RandomHash(rng);
      e.block_size = 1 + static_cast<int32_t>(rng() % 32);
      for (size_t k = 0; k < e.block_hashes.size() * e.block_size; ++k) {
        e.token_ids.push_back(static_cast<TokenId>(rng() % 200000));
      }
      if (rng() % 3 == 0) e.lora_id = static_cast<int64_t>(rng() % 5);
      if (rng() % 3 == 0) e.lora_name = "adapter";
    }
    // vLLM 0.33's defaulted fields only travel in the kVllm layout (RandomBatchesRoundTrip).
    if (vllm_fields && e.type != KvEventType::kAllBlocksCleared) {
      if (rng() % 2) e.group_idx = static_cast<int32_t>(rng() % 3);
      if (rng() % 3 == 0) e.locality = "REMOTE";
      if (rng() % 3 == 0) e.ownership = "lmcache";
      if (e.type == KvEventType::kBlockStored && rng() % 3 == 0) {
        e.kv_cache_spec_kind = "sliding_window";
        e.kv_cache_spec_sliding_window = 4096;
        e.session_id = "s1";
      }
    }
    b.events.push_back(std::move(e));
  }
  return b;
}

// What a consumer decodes under `format`.
KvEventBatch Projected(KvEventBatch b, KvBlockHashFormat format) {
  for (KvBatchEvent& e : b.events) {
    for (BlockHash& h : e.block_hashes) h = WireBlockHash(h, format);
    if (e.parent_block_hash) e.parent_block_hash = WireBlockHash(*e.parent_block_hash, format);
  }
  return b;
}

TEST(KvEventCodecTest, RandomBatchesRoundTripInEveryEncoding) {
  std::mt19937_64 rng(42);
  for (int round = 0; round < 300; ++round) {
    const KvEventBatch batch = RandomBatch(rng);
    const KvEventBatch with_vllm_fields = RandomBatch(rng, /*vllm_fields=*/true);
    for (KvBlockHashFormat fmt : {KvBlockHashFormat::kUint64, KvBlockHashFormat::kBytes}) {
      const std::string bytes = EncodeKvEventBatch(
          with_vllm_fields, {.encoding = KvEventEncoding::kVllm, .hash_format = fmt});
      absl::StatusOr<KvEventBatch> back = DecodeKvEventBatch(bytes);
      ASSERT_TRUE(back.ok()) << back.status();
      EXPECT_EQ(*back, Projected(with_vllm_fields, fmt)) << "round " << round;
    }
    for (KvEventEncoding enc :
         {KvEventEncoding::kVllm, KvEventEncoding::kAllMap, KvEventEncoding::kAllArray}) {
      for (KvBlockHashFormat fmt : {KvBlockHashFormat::kUint64, KvBlockHashFormat::kBytes}) {
        const std::string bytes = EncodeKvEventBatch(batch, {.encoding = enc, .hash_format = fmt});
        absl::StatusOr<KvEventBatch> back = DecodeKvEventBatch(bytes);
        ASSERT_TRUE(back.ok()) << back.status();
        EXPECT_EQ(*back, Projected(batch, fmt)) << "round " << round;
      }
    }
  }
}

TEST(KvEventCodecTest, MalformedPayloadsAreRejected) {
  std::mt19937_64 rng(7);
  KvEventBatch batch = RandomBatch(rng);
  while (batch.events.empty()) batch = RandomBatch(rng);
  const std::string bytes = EncodeKvEventBatch(batch, {});
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    EXPECT_EQ(DecodeKvEventBatch(bytes.substr(0, cut)).status().code(),
              absl::StatusCode::kInvalidArgument)
        << "cut at " << cut;
  }
  EXPECT_FALSE(DecodeKvEventBatch(bytes + "x").ok());  // trailing bytes
  std::string unknown = Bytes({0x92, 0x00, 0x91, 0x91});
  Str(unknown, "BlockMoved");
  EXPECT_EQ(DecodeKvEventBatch(unknown).status().code(), absl::StatusCode::kInvalidArgument);
  std::string wrong_type = Bytes({0x92, 0x00, 0x91, 0x92});
  Str(wrong_type, "BlockRemoved");
  Str(wrong_type, "not-a-list");
  EXPECT_EQ(DecodeKvEventBatch(wrong_type).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(KvEventCodecTest, DecodesVllmStyleDigestsAndOlderArrays) {
  // A 32-byte digest (vLLM's sha256 default) keeps its last 16 bytes; an older array event
  // without medium / lora_name still decodes.
  std::string payload = Bytes({0x92, 0x00, 0x91, 0x96});
  Str(payload, "BlockStored");
  payload += Bytes({0x91, 0xc4, 32});
  for (int i = 0; i < 32; ++i) payload.push_back(static_cast<char>(i));
  payload += Bytes({0xc0, 0x90, 16, 0xc0});
  absl::StatusOr<KvEventBatch> b = DecodeKvEventBatch(payload);
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_EQ(b->events.size(), 1u);
  EXPECT_EQ(b->events[0].block_hashes[0],
            (BlockHash{0x18191a1b1c1d1e1fULL, 0x1011121314151617ULL}));
  EXPECT_EQ(b->events[0].block_size, 16);
  EXPECT_FALSE(b->events[0].medium.has_value());
}

TEST(KvEventCodecTest, NamesParse) {
  EXPECT_EQ(ParseKvEventEncoding("vllm").value(), KvEventEncoding::kVllm);
  EXPECT_EQ(ParseKvEventEncoding("all-map").value(), KvEventEncoding::kAllMap);
  EXPECT_EQ(ParseKvEventEncoding("all-array").value(), KvEventEncoding::kAllArray);
  for (KvEventEncoding e :
       {KvEventEncoding::kVllm, KvEventEncoding::kAllMap, KvEventEncoding::kAllArray}) {
    EXPECT_EQ(ParseKvEventEncoding(KvEventEncodingName(e)).value(), e);
  }
  // The old names are refused with a message that names the new ones.
  for (const char* old : {"map", "array"}) {
    const absl::Status s = ParseKvEventEncoding(old).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("all-map"), std::string_view::npos) << s;
    EXPECT_NE(s.message().find("all-array"), std::string_view::npos) << s;
  }
  EXPECT_EQ(ParseKvBlockHashFormat("bytes").value(), KvBlockHashFormat::kBytes);
  EXPECT_FALSE(ParseKvEventEncoding("json").ok());
  EXPECT_FALSE(ParseKvBlockHashFormat("hex").ok());
}

}  // namespace
}  // namespace pagedkv

namespace pagedkv {
namespace {

// Found by fuzz_kv_event_decode: a map header claiming 2^32 - 1 entries made the unpacker
// allocate 256 GiB for them before reading any. Such a container is refused.
TEST(KvEventDecodeHostileTest, HugeContainerHeaderIsAnErrorNotAnAllocation) {
  for (const std::string& payload :
       {std::string("\xdf\xff\xff\xff\xff", 5), std::string("\xdd\xff\xff\xff\xff", 5),
        std::string("\x81\xa2ts\xdd\x7f\xff\xff\xff", 9)}) {
    absl::StatusOr<KvEventBatch> batch = DecodeKvEventBatch(payload);
    EXPECT_EQ(batch.status().code(), absl::StatusCode::kInvalidArgument);
  }
}

}  // namespace
}  // namespace pagedkv

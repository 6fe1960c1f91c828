// Copyright 2026 The pagedkv Authors.
//
// RedisTier against a real redis-server started by the test (tests/redis_server.h).
#include "pagedkv/tiers/redis_tier.h"

#include <hiredis/hiredis.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/redis_server.h"

namespace pagedkv {
namespace {

using ::pagedkv::testing::kNoRedisMessage;
using ::pagedkv::testing::RedisServer;
using ::testing::HasSubstr;

constexpr int kValueBytes = 24;

struct Block {
  BlockHash hash;
  std::vector<TokenId> tokens;
  std::vector<std::byte> value;
  TierBlock tier() const { return {.hash = hash, .tokens = tokens}; }
  TierStoreItem item() const { return {.block = tier(), .value = value}; }
};

Block MakeBlock(uint64_t id) {
  Block b{.hash = BlockHash{id * 0x9E3779B97F4A7C15ull, id},
          .tokens = {static_cast<TokenId>(id), 3}};
  for (int i = 0; i < kValueBytes; ++i) b.value.push_back(static_cast<std::byte>(id + i));
  return b;
}

// A raw client for checking and corrupting what the tier wrote.
class RawClient {
 public:
  explicit RawClient(int port, int db = 0) : ctx_(redisConnect("127.0.0.1", port)) {
    if (db != 0) Run({"SELECT", std::to_string(db)});
  }
  ~RawClient() { redisFree(ctx_); }
  // The reply as a string (integers printed, nil as "(nil)").
  std::string Run(const std::vector<std::string>& args) {
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (const std::string& a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    auto* r = static_cast<redisReply*>(
        redisCommandArgv(ctx_, static_cast<int>(argv.size()), argv.data(), lens.data()));
    if (r == nullptr) return "(error)";
    std::string out = r->type == REDIS_REPLY_INTEGER ? std::to_string(r->integer)
                      : r->type == REDIS_REPLY_NIL   ? "(nil)"
                                                     : std::string(r->str, r->len);
    freeReplyObject(r);
    return out;
  }

 private:
  redisContext* ctx_;
};

class RedisTierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    redis_ = RedisServer::Start();
    if (!redis_) GTEST_SKIP() << kNoRedisMessage;
  }
  RedisTierOptions Options(const std::string& url) {
    RedisTierOptions o;
    o.endpoint = ParseRedisUrl(url).value();
    o.model_fingerprint = "tiny|f32";
    o.format = {.dtype = 0,
                .layout = 1,
                .block_size = 2,
                .num_layers = 1,
                .value_bytes = kValueBytes,
                .layout_digest = 5};
    o.report = [this](std::string_view line) { reports_.emplace_back(line); };
    o.now_ms = [this] { return now_ms_; };
    return o;
  }
  std::unique_ptr<RedisTier> MakeTier(const RedisTierOptions& o) {
    absl::StatusOr<std::unique_ptr<RedisTier>> t = RedisTier::Create(o);
    EXPECT_TRUE(t.ok()) << t.status();
    return std::move(t).value();
  }
  static absl::Status StoreAll(RedisTier& t, const std::vector<Block>& blocks) {
    std::vector<TierStoreItem> items;
    for (const Block& b : blocks) items.push_back(b.item());
    return t.Store(items);
  }
  // How many leading blocks load, each checked against its value.
  static int64_t LoadCount(RedisTier& t, const std::vector<Block>& blocks) {
    std::vector<TierBlock> q;
    for (const Block& b : blocks) q.push_back(b.tier());
    absl::StatusOr<int64_t> n = t.LoadPrefix(q, [&](int64_t i, std::span<const std::byte> v) {
      const auto& want = blocks[static_cast<size_t>(i)].value;
      EXPECT_TRUE(std::equal(v.begin(), v.end(), want.begin(), want.end())) << "block " << i;
      return true;
    });
    EXPECT_TRUE(n.ok()) << n.status();
    return n.value_or(-1);
  }

  std::unique_ptr<RedisServer> redis_;
  std::vector<std::string> reports_;
  int64_t now_ms_ = 1000;
};

TEST_F(RedisTierTest, StoresAndLoadsTheLeadingRunInOnePipeline) {
  auto tier = MakeTier(Options(redis_->Url()));
  const std::vector<Block> chain = {MakeBlock(1), MakeBlock(2), MakeBlock(3), MakeBlock(4)};
  ASSERT_TRUE(StoreAll(*tier, {chain[0], chain[1], chain[3]}).ok());
  EXPECT_EQ(LoadCount(*tier, chain), 2);
  ASSERT_TRUE(StoreAll(*tier, {chain[1], chain[2]}).ok());  // chain[1] exists: skipped (NX)
  EXPECT_EQ(LoadCount(*tier, chain), 4);
  const TierStats s = tier->stats();
  EXPECT_EQ(s.stored_blocks, 4);
  EXPECT_EQ(s.store_skipped, 1);
  EXPECT_EQ(s.hit_blocks, 6);
  EXPECT_EQ(s.loaded_bytes, 6 * kValueBytes);
  EXPECT_EQ(s.faults, 0);
  EXPECT_TRUE(reports_.empty());
}

TEST_F(RedisTierTest, KeysCarryThePrefixAndModelAndHonourTtlAndDb) {
  RedisTierOptions o = Options(redis_->Url() + "/2");
  o.key_prefix = "tenantA";
  o.ttl_seconds = 100;
  auto tier = MakeTier(o);
  const Block b = MakeBlock(7);
  ASSERT_TRUE(StoreAll(*tier, {b}).ok());
  const std::string key = tier->KeyOf(b.hash);
  EXPECT_THAT(key, ::testing::StartsWith("tenantA:"));
  EXPECT_EQ(key.size(), std::string("tenantA:").size() + 16 + 1 + 32);
  RawClient db2(redis_->port(), 2);
  const int ttl = std::stoi(db2.Run({"TTL", key}));
  EXPECT_GT(ttl, 0);
  EXPECT_LE(ttl, 100);
  EXPECT_EQ(RawClient(redis_->port()).Run({"EXISTS", key}), "0");  // not in db 0
  // Another model fingerprint: other keys, so a miss.
  RedisTierOptions other = o;
  other.model_fingerprint = "another-model";
  auto tier2 = MakeTier(other);
  EXPECT_NE(tier2->KeyOf(b.hash), key);
  EXPECT_EQ(LoadCount(*tier2, {b}), 0);
}

TEST_F(RedisTierTest, ACorruptedValueIsAMissDeletedAndReportedOnce) {
  auto tier = MakeTier(Options(redis_->Url()));
  const std::vector<Block> chain = {MakeBlock(1), MakeBlock(2)};
  ASSERT_TRUE(StoreAll(*tier, chain).ok());
  RawClient raw(redis_->port());
  const std::string key = tier->KeyOf(chain[1].hash);
  std::string value = raw.Run({"GET", key});
  value[value.size() - 3] = static_cast<char>(value[value.size() - 3] ^ 1);  // one payload bit
  ASSERT_EQ(raw.Run({"SET", key, value}), "OK");
  EXPECT_EQ(LoadCount(*tier, chain), 1);
  EXPECT_EQ(tier->stats().faults, 1);
  EXPECT_EQ(tier->stats().incidents, 1);
  ASSERT_EQ(reports_.size(), 1u);
  EXPECT_THAT(reports_[0], HasSubstr("checksum"));
  EXPECT_EQ(raw.Run({"EXISTS", key}), "0");
  EXPECT_EQ(LoadCount(*tier, chain), 1);  // now a plain miss
  EXPECT_EQ(reports_.size(), 1u);
}

TEST_F(RedisTierTest, AKilledServerIsAMissThenTheClientReconnectsAfterBackoff) {
  RedisTierOptions o = Options(redis_->Url());
  o.backoff_initial_ms = 100;
  o.backoff_max_ms = 400;
  auto tier = MakeTier(o);
  const std::vector<Block> chain = {MakeBlock(1)};
  ASSERT_TRUE(StoreAll(*tier, chain).ok());
  redis_->Stop();
  EXPECT_EQ(LoadCount(*tier, chain), 0);
  EXPECT_FALSE(tier->connected());
  ASSERT_TRUE(StoreAll(*tier, {MakeBlock(2)}).ok());  // dropped, not an error
  EXPECT_EQ(LoadCount(*tier, chain), 0);
  ASSERT_EQ(reports_.size(), 1u);  // one incident, one report
  EXPECT_THAT(reports_[0], HasSubstr("failed"));
  ASSERT_TRUE(redis_->Restart());
  EXPECT_EQ(LoadCount(*tier, chain), 0);  // still backing off: no attempt yet
  EXPECT_FALSE(tier->connected());
  now_ms_ += 1000;
  ASSERT_TRUE(StoreAll(*tier, chain).ok());  // reconnects (the new server is empty)
  EXPECT_TRUE(tier->connected());
  EXPECT_EQ(LoadCount(*tier, chain), 1);
  ASSERT_EQ(reports_.size(), 2u);
  EXPECT_THAT(reports_[1], HasSubstr("is back"));
  const TierStats s = tier->stats();
  EXPECT_EQ(s.incidents, 1);
  EXPECT_GE(s.faults, 4);
}

TEST_F(RedisTierTest, AuthWithUserAndPassword) {
  auto secured = RedisServer::Start(
      {"--user", "default", "off", "--user", "app", "on", ">s3cret", "~*", "&*", "+@all"});
  if (!secured) GTEST_SKIP() << kNoRedisMessage;
  const std::string where = "127.0.0.1:" + std::to_string(secured->port());
  auto good = MakeTier(Options("redis://app:s3cret@" + where));
  ASSERT_TRUE(StoreAll(*good, {MakeBlock(1)}).ok());
  EXPECT_EQ(good->stats().stored_blocks, 1);
  EXPECT_EQ(LoadCount(*good, {MakeBlock(1)}), 1);
  auto bad = MakeTier(Options("redis://app:wrong@" + where));
  EXPECT_EQ(LoadCount(*bad, {MakeBlock(1)}), 0);
  EXPECT_EQ(bad->stats().faults, 1);
  ASSERT_FALSE(reports_.empty());
  EXPECT_THAT(reports_.back(), HasSubstr("AUTH"));
}

TEST_F(RedisTierTest, BadOptionsAndBadItemsAreInvalidArgument) {
  RedisTierOptions o = Options(redis_->Url());
  o.io_timeout_ms = 0;
  EXPECT_THAT(RedisTier::Create(o).status().message(), HasSubstr("timeouts"));
  o = Options(redis_->Url());
  o.key_prefix = "";
  EXPECT_FALSE(RedisTier::Create(o).ok());
  o = Options(redis_->Url());
  o.ttl_seconds = -1;
  EXPECT_FALSE(RedisTier::Create(o).ok());
  o = Options(redis_->Url());
  o.max_tracked_blocks = 0;
  EXPECT_THAT(RedisTier::Create(o).status().message(), HasSubstr("max_tracked_blocks"));
  o = Options(redis_->Url());
  o.ttl_seconds = INT64_MAX / 10;
  EXPECT_THAT(RedisTier::Create(o).status().message(), HasSubstr("ttl_seconds"));
  auto tier = MakeTier(Options(redis_->Url()));
  Block b = MakeBlock(1);
  b.value.pop_back();
  EXPECT_THAT(StoreAll(*tier, {b}).message(), HasSubstr("24-byte values"));
}

// Events: "stored" for this tier's own writes, "removed" once it learns an announced block is
// gone; what other engines and Redis itself do stays invisible.
class RedisTierEventsTest : public RedisTierTest {
 protected:
  void Listen(RedisTier& tier) {
    tier.AddEventListener([this](const KvEvent& e) {
      EXPECT_EQ(e.medium, "EXTERNAL");
      if (e.type == KvEventType::kBlockStored) {
        EXPECT_EQ(e.token_count, 2);
        stored_.push_back(e.hash);
        stored_tokens_.emplace_back(e.token_ids.begin(), e.token_ids.end());
      }
      if (e.type == KvEventType::kBlockRemoved) removed_.push_back(e.hash);
    });
  }
  std::vector<BlockHash> stored_, removed_;
  std::vector<std::vector<TokenId>> stored_tokens_;
};

TEST_F(RedisTierEventsTest, StoredForOwnWritesOnlyNeverForAnotherEnginesOrASkippedWrite) {
  auto mine = MakeTier(Options(redis_->Url()));
  auto other = MakeTier(Options(redis_->Url()));  // another engine on the same server
  Listen(*mine);
  EXPECT_EQ(mine->medium(), "EXTERNAL");
  const std::vector<Block> chain = {MakeBlock(1), MakeBlock(2), MakeBlock(3)};
  ASSERT_TRUE(StoreAll(*other, {chain[0]}).ok());
  ASSERT_TRUE(StoreAll(*mine, chain).ok());  // chain[0] exists: SET NX skips it
  EXPECT_EQ(stored_, (std::vector<BlockHash>{chain[1].hash, chain[2].hash}));
  EXPECT_EQ(stored_tokens_[0], chain[1].tokens);
  ASSERT_TRUE(StoreAll(*mine, chain).ok());  // all held now: nothing new
  EXPECT_EQ(LoadCount(*mine, chain), 3);     // loading another's block announces nothing
  EXPECT_EQ(stored_.size(), 2u);
  EXPECT_TRUE(removed_.empty());
}

TEST_F(RedisTierEventsTest, RemovedWhenALookupFindsAnAnnouncedKeyGone) {
  auto tier = MakeTier(Options(redis_->Url()));
  Listen(*tier);
  const std::vector<Block> chain = {MakeBlock(1), MakeBlock(2), MakeBlock(3), MakeBlock(4)};
  ASSERT_TRUE(StoreAll(*tier, {chain[0], chain[1], chain[3]}).ok());
  RawClient raw(redis_->port());
  ASSERT_EQ(raw.Run({"DEL", tier->KeyOf(chain[1].hash), tier->KeyOf(chain[3].hash)}), "2");
  EXPECT_TRUE(removed_.empty());  // a deletion by someone else is invisible until a read
  // The walk stops at chain[1], but the MGET read every key: chain[3] is known gone too, and
  // chain[2] (never announced) is no news.
  EXPECT_EQ(LoadCount(*tier, chain), 1);
  EXPECT_EQ(removed_, (std::vector<BlockHash>{chain[1].hash, chain[3].hash}));
  EXPECT_EQ(LoadCount(*tier, chain), 1);  // reported once
  EXPECT_EQ(removed_.size(), 2u);
  ASSERT_TRUE(StoreAll(*tier, {chain[1]}).ok());  // written again: announced again
  EXPECT_EQ(stored_.size(), 4u);
}

TEST_F(RedisTierEventsTest, RemovedForACorruptedValueAndAfterTheTtl) {
  RedisTierOptions o = Options(redis_->Url());
  o.ttl_seconds = 10;
  auto tier = MakeTier(o);
  Listen(*tier);
  const std::vector<Block> chain = {MakeBlock(1), MakeBlock(2)};
  ASSERT_TRUE(StoreAll(*tier, chain).ok());
  RawClient raw(redis_->port());
  const std::string key = tier->KeyOf(chain[0].hash);
  std::string value = raw.Run({"GET", key});
  value[value.size() - 1] = static_cast<char>(value[value.size() - 1] ^ 1);
  ASSERT_EQ(raw.Run({"SET", key, value, "KEEPTTL"}), "OK");
  EXPECT_EQ(LoadCount(*tier, chain), 0);  // rejected and deleted
  EXPECT_EQ(removed_, (std::vector<BlockHash>{chain[0].hash}));
  now_ms_ += 9999;  // chain[1] expires at 1000 + 10000 ms on this clock
  EXPECT_EQ(LoadCount(*tier, {}), 0);
  EXPECT_EQ(removed_.size(), 1u);
  now_ms_ += 1;
  EXPECT_EQ(LoadCount(*tier, {}), 0);  // any call notices the TTL has passed
  EXPECT_EQ(removed_, (std::vector<BlockHash>{chain[0].hash, chain[1].hash}));
}

TEST_F(RedisTierEventsTest, AFullTrackingTableForgetsTheOldestAsRemoved) {
  RedisTierOptions o = Options(redis_->Url());
  o.max_tracked_blocks = 2;
  auto tier = MakeTier(o);
  Listen(*tier);
  const std::vector<Block> chain = {MakeBlock(1), MakeBlock(2), MakeBlock(3)};
  ASSERT_TRUE(StoreAll(*tier, chain).ok());
  EXPECT_EQ(stored_.size(), 3u);
  EXPECT_EQ(removed_, (std::vector<BlockHash>{chain[0].hash}));
  EXPECT_EQ(LoadCount(*tier, chain), 3);  // still in Redis: forgetting is the safe side
}

TEST_F(RedisTierEventsTest, AnUnreachableServerTellsNothing) {
  auto tier = MakeTier(Options(redis_->Url()));
  Listen(*tier);
  const std::vector<Block> chain = {MakeBlock(1)};
  ASSERT_TRUE(StoreAll(*tier, chain).ok());
  ASSERT_TRUE(redis_->Restart());  // empty now, but the tier is not connected to it yet
  redis_->Stop();
  EXPECT_EQ(LoadCount(*tier, chain), 0);  // a fault, not a miss: nothing is learnt
  ASSERT_TRUE(StoreAll(*tier, {MakeBlock(2)}).ok());
  EXPECT_EQ(stored_.size(), 1u);
  EXPECT_TRUE(removed_.empty());
}

}  // namespace
}  // namespace pagedkv

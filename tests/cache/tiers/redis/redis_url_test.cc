// Copyright 2026 The pagedkv Authors.
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pagedkv/tiers/redis_tier.h"

namespace pagedkv {
namespace {

using ::testing::HasSubstr;

TEST(RedisUrlTest, ParsesUserPasswordHostPortAndDb) {
  absl::StatusOr<RedisEndpoint> e = ParseRedisUrl("redis://app:s%40cret@cache.local:6380/3");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->user, "app");
  EXPECT_EQ(e->password, "s@cret");
  EXPECT_EQ(e->host, "cache.local");
  EXPECT_EQ(e->port, 6380);
  EXPECT_EQ(e->db, 3);
  e = ParseRedisUrl("redis://:pw@10.0.0.5");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->user, "");
  EXPECT_EQ(e->password, "pw");
  EXPECT_EQ(e->port, 6379);
  EXPECT_EQ(e->db, 0);
  e = ParseRedisUrl("redis://localhost");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->host, "localhost");
  EXPECT_TRUE(e->password.empty());
}

TEST(RedisUrlTest, BadUrlsSayWhatIsWrong) {
  EXPECT_THAT(ParseRedisUrl("http://x").status().message(), HasSubstr("redis://"));
  EXPECT_THAT(ParseRedisUrl("redis://h:0").status().message(), HasSubstr("port"));
  EXPECT_THAT(ParseRedisUrl("redis://h:99999").status().message(), HasSubstr("port"));
  EXPECT_THAT(ParseRedisUrl("redis://h:6379/x").status().message(), HasSubstr("database"));
  EXPECT_THAT(ParseRedisUrl("redis://:6379").status().message(), HasSubstr("no host"));
  EXPECT_THAT(ParseRedisUrl("redis://u:%4@h").status().message(), HasSubstr("hex"));
}

}  // namespace
}  // namespace pagedkv

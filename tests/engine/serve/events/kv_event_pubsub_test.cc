// Copyright 2026 The pagedkv Authors.
//
// Publisher and subscriber over ipc:// sockets in a temporary directory (and loopback TCP for
// the bind error). Waits are bounded polls on socket readiness, never sleeps.
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "pagedkv/events/kv_event_publisher.h"
#include "pagedkv/events/kv_event_subscriber.h"
#include "zmq.hpp"
#include "zmq_addon.hpp"

namespace pagedkv {
namespace {

class KvEventPubSubTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "pagedkv-events-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Ipc(const std::string& name) const { return "ipc://" + (dir_ / name).string(); }

  std::filesystem::path dir_;
};

KvEventBatch Batch(int i) {
  return KvEventBatch{.timestamp = static_cast<double>(i),
                      .events = {{.type = KvEventType::kBlockRemoved,
                                  .block_hashes = {BlockHash{static_cast<uint64_t>(i), 0}},
                                  .medium = "GPU"}},
                      .data_parallel_rank = 0};
}

// Polls until `want` batches arrived in total or `rounds` polls found nothing.
std::vector<ReceivedKvEventBatch> Collect(KvEventSubscriber& sub, size_t want, int rounds = 50) {
  std::vector<ReceivedKvEventBatch> got;
  for (int idle = 0; got.size() < want && idle < rounds;) {
    auto batches = sub.Poll(100);
    EXPECT_TRUE(batches.ok()) << batches.status();
    if (!batches.ok() || batches->empty()) {
      ++idle;
      continue;
    }
    for (auto& b : *batches) got.push_back(std::move(b));
  }
  return got;
}

TEST_F(KvEventPubSubTest, LateSubscriberRecoversEverythingThroughReplay) {
  auto pub = KvEventPublisher::Create(
      {.endpoint = Ipc("pub"), .replay_endpoint = Ipc("replay"), .topic = "kv"});
  ASSERT_TRUE(pub.ok()) << pub.status();
  for (int i = 0; i < 20; ++i) EXPECT_EQ((*pub)->Publish(Batch(i)), i);
  ASSERT_TRUE((*pub)->Flush(5000));
  auto sub = KvEventSubscriber::Create({.endpoint = (*pub)->endpoint(),
                                        .replay_endpoint = (*pub)->replay_endpoint(),
                                        .topic = "kv",
                                        .start_seq = 0});
  ASSERT_TRUE(sub.ok()) << sub.status();
  std::vector<ReceivedKvEventBatch> got = Collect(**sub, 20);
  // Live batches published after joining arrive live, or through replay if the subscription
  // was not yet in place: either way each once, in order.
  for (int i = 20; i < 30; ++i) (*pub)->Publish(Batch(i));
  ASSERT_TRUE((*pub)->Flush(5000));
  for (auto& b : Collect(**sub, 10)) got.push_back(std::move(b));
  ASSERT_EQ(got.size(), 30u);
  for (int i = 0; i < 30; ++i) {
    EXPECT_EQ(got[i].seq, i);
    EXPECT_EQ(got[i].batch, Batch(i));
  }
  EXPECT_TRUE(got[0].replayed);
  EXPECT_EQ((*sub)->stats().lost, 0);
  EXPECT_EQ((*sub)->next_seq(), 30);
  EXPECT_GE((*pub)->stats().replay_requests, 1);
}

TEST_F(KvEventPubSubTest, BatchesPastTheReplayBufferAreCountedLost) {
  auto pub = KvEventPublisher::Create(
      {.endpoint = Ipc("pub"), .replay_endpoint = Ipc("replay"), .buffer_steps = 5});
  ASSERT_TRUE(pub.ok()) << pub.status();
  for (int i = 0; i < 12; ++i) (*pub)->Publish(Batch(i));
  ASSERT_TRUE((*pub)->Flush(5000));
  auto sub = KvEventSubscriber::Create({.endpoint = (*pub)->endpoint(),
                                        .replay_endpoint = (*pub)->replay_endpoint(),
                                        .start_seq = 0});
  ASSERT_TRUE(sub.ok());
  std::vector<ReceivedKvEventBatch> got = Collect(**sub, 5);
  ASSERT_EQ(got.size(), 5u);
  EXPECT_EQ(got[0].seq, 7);
  EXPECT_EQ((*sub)->stats().lost, 7);
}

TEST_F(KvEventPubSubTest, SubscriberThatNeverReadsDoesNotStallThePublisher) {
  auto pub = KvEventPublisher::Create({.endpoint = Ipc("pub"), .hwm = 10});
  ASSERT_TRUE(pub.ok());
  zmq::context_t ctx;
  zmq::socket_t idle(ctx, zmq::socket_type::sub);
  idle.set(zmq::sockopt::subscribe, "");
  idle.set(zmq::sockopt::rcvhwm, 10);
  idle.connect((*pub)->endpoint());
  constexpr int kBatches = 5000;
  for (int i = 0; i < kBatches; ++i) (*pub)->Publish(Batch(i));
  ASSERT_TRUE((*pub)->Flush(10000)) << "the publisher thread stalled behind an idle subscriber";
  const KvEventPublisherStats stats = (*pub)->stats();
  EXPECT_EQ(stats.published, kBatches);
  EXPECT_EQ(stats.dropped, 0);
}

// A hand-driven publisher skips sequence number 2 live; its replay socket holds it.
TEST_F(KvEventPubSubTest, GapIsFilledFromTheReplaySocket) {
  zmq::context_t ctx;
  zmq::socket_t pub(ctx, zmq::socket_type::pub);
  pub.bind(Ipc("pub"));
  zmq::socket_t router(ctx, zmq::socket_type::router);
  router.bind(Ipc("replay"));
  auto sub = KvEventSubscriber::Create({.endpoint = Ipc("pub"), .replay_endpoint = Ipc("replay")});
  ASSERT_TRUE(sub.ok());
  const auto send = [&](int64_t seq) {
    const std::string payload = EncodeKvEventBatch(Batch(static_cast<int>(seq)), {});
    pub.send(zmq::str_buffer(""), zmq::send_flags::sndmore);
    pub.send(zmq::buffer(EncodeSequenceNumber(seq)), zmq::send_flags::sndmore);
    pub.send(zmq::buffer(payload));
  };
  // Wait for the subscription to reach the PUB: resend seq 0 until the subscriber sees it.
  std::vector<ReceivedKvEventBatch> got;
  for (int tries = 0; got.empty() && tries < 100; ++tries) {
    send(0);
    got = (*sub)->Poll(50).value();
  }
  ASSERT_EQ(got.size(), 1u);
  std::thread server([&] {
    std::vector<zmq::message_t> req;
    ASSERT_TRUE(zmq::recv_multipart(router, std::back_inserter(req)));
    ASSERT_EQ(req.size(), 3u);
    EXPECT_EQ(DecodeSequenceNumber(req[2].to_string_view()).value(), 2);
    for (int64_t seq : {int64_t{2}, int64_t{-1}}) {
      router.send(zmq::buffer(req[0].to_string_view()), zmq::send_flags::sndmore);
      router.send(zmq::str_buffer(""), zmq::send_flags::sndmore);
      router.send(zmq::buffer(EncodeSequenceNumber(seq)), zmq::send_flags::sndmore);
      router.send(zmq::buffer(
          seq < 0 ? std::string()
                  : EncodeKvEventBatch(Batch(2), {.encoding = KvEventEncoding::kAllArray})));
    }
  });
  send(1);
  send(3);
  std::vector<ReceivedKvEventBatch> rest = Collect(**sub, 3);
  server.join();
  ASSERT_EQ(rest.size(), 3u);
  EXPECT_EQ(rest[0].seq, 1);
  EXPECT_EQ(rest[1].seq, 2);
  EXPECT_TRUE(rest[1].replayed);
  EXPECT_EQ(rest[1].batch, Batch(2));
  EXPECT_EQ(rest[2].seq, 3);
  EXPECT_EQ((*sub)->stats().gaps, 1);
  EXPECT_EQ((*sub)->stats().lost, 0);
}

TEST_F(KvEventPubSubTest, BadOptionsAndBusyEndpoints) {
  EXPECT_EQ(KvEventPublisher::Create({.endpoint = ""}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(KvEventPublisher::Create({.endpoint = Ipc("x"), .buffer_steps = 0}).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto first = KvEventPublisher::Create({.endpoint = "tcp://127.0.0.1:*"});
  ASSERT_TRUE(first.ok()) << first.status();
  // The replay socket always binds, so the port in use is refused.
  EXPECT_EQ(
      KvEventPublisher::Create({.endpoint = Ipc("y"), .replay_endpoint = (*first)->endpoint()})
          .status()
          .code(),
      absl::StatusCode::kUnavailable);
  EXPECT_EQ(KvEventSubscriber::Create({}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DecodeSequenceNumber("abc").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DecodeSequenceNumber(EncodeSequenceNumber(-1)).value(), -1);
  EXPECT_EQ(
      KvEventPublisher::Create({.endpoint = Ipc("z"), .replay_requests_per_s = 0}).status().code(),
      absl::StatusCode::kInvalidArgument);
}

// Reads one replay answer on `dealer`: the batches' numbers until the end marker; an empty
// optional when nothing came within `timeout_ms`.
std::optional<std::vector<int64_t>> ReadAnswer(zmq::socket_t& dealer, int timeout_ms) {
  std::vector<int64_t> seqs;
  while (true) {
    zmq::pollitem_t item{dealer.handle(), 0, ZMQ_POLLIN, 0};
    if (zmq::poll(&item, 1, std::chrono::milliseconds(timeout_ms)) == 0) return std::nullopt;
    std::vector<zmq::message_t> frames;
    EXPECT_TRUE(zmq::recv_multipart(dealer, std::back_inserter(frames)));
    EXPECT_EQ(frames.size(), 3u);
    if (frames.size() != 3) return std::nullopt;
    const int64_t seq = DecodeSequenceNumber(frames[1].to_string_view()).value();
    if (seq == -1) return seqs;
    seqs.push_back(seq);
  }
}

void RequestReplay(zmq::socket_t& dealer, int64_t start) {
  dealer.send(zmq::const_buffer(), zmq::send_flags::sndmore);
  dealer.send(zmq::buffer(EncodeSequenceNumber(start)), zmq::send_flags::none);
}

// A client that asks for everything again and again (what a consumer that cannot decode does)
// gets at most replay_burst answers, each bounded by what was buffered; the rest are counted.
TEST_F(KvEventPubSubTest, ReplayRequestsInALoopAreBoundedAndCounted) {
  auto pub = KvEventPublisher::Create({.endpoint = Ipc("pub"),
                                       .replay_endpoint = Ipc("replay"),
                                       .replay_burst = 2,
                                       .replay_requests_per_s = 1e-6});
  ASSERT_TRUE(pub.ok()) << pub.status();
  for (int i = 0; i < 50; ++i) (*pub)->Publish(Batch(i));
  ASSERT_TRUE((*pub)->Flush(5000));
  zmq::context_t ctx;
  zmq::socket_t dealer(ctx, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::rcvhwm, 0);
  dealer.connect((*pub)->replay_endpoint());
  constexpr int kRequests = 200;
  for (int i = 0; i < kRequests; ++i) RequestReplay(dealer, 0);
  int answers = 0;
  int64_t batches = 0;
  while (std::optional<std::vector<int64_t>> answer = ReadAnswer(dealer, 500)) {
    ++answers;
    batches += static_cast<int64_t>(answer->size());
    for (size_t k = 0; k < answer->size(); ++k) EXPECT_EQ((*answer)[k], static_cast<int64_t>(k));
  }
  EXPECT_GE(answers, 1);
  EXPECT_LE(answers, 2);
  EXPECT_EQ(batches, 50 * answers);
  const KvEventPublisherStats st = (*pub)->stats();
  EXPECT_EQ(st.replay_requests, answers);
  EXPECT_EQ(st.replayed_batches, batches);
  EXPECT_EQ(st.replay_requests + st.replay_requests_busy + st.replay_requests_limited, kRequests);
  // Another client still gets its (bounded) answer: the limits are per client.
  zmq::socket_t other(ctx, zmq::socket_type::dealer);
  other.connect((*pub)->replay_endpoint());
  RequestReplay(other, 45);
  std::optional<std::vector<int64_t>> tail = ReadAnswer(other, 5000);
  ASSERT_TRUE(tail.has_value());
  EXPECT_EQ(*tail, (std::vector<int64_t>{45, 46, 47, 48, 49}));
}

// With max_concurrent_replays = 1, a second client's request while an answer streams is
// ignored and counted; a long answer is streamed in turns, interleaved with live batches.
TEST_F(KvEventPubSubTest, ConcurrentReplaysAreCapped) {
  auto pub = KvEventPublisher::Create({.endpoint = Ipc("pub"),
                                       .replay_endpoint = Ipc("replay"),
                                       .buffer_steps = 5000,
                                       .max_concurrent_replays = 1,
                                       .replay_batches_per_turn = 1});
  ASSERT_TRUE(pub.ok()) << pub.status();
  for (int i = 0; i < 1000; ++i) (*pub)->Publish(Batch(i));
  ASSERT_TRUE((*pub)->Flush(10000));
  zmq::context_t ctx;
  zmq::socket_t first(ctx, zmq::socket_type::dealer);
  first.set(zmq::sockopt::rcvhwm, 0);
  first.connect((*pub)->replay_endpoint());
  zmq::socket_t second(ctx, zmq::socket_type::dealer);
  second.connect((*pub)->replay_endpoint());
  RequestReplay(first, 0);
  // The first answer's opening batch shows it is in flight (1000 turns of one batch each).
  zmq::pollitem_t item{first.handle(), 0, ZMQ_POLLIN, 0};
  ASSERT_EQ(zmq::poll(&item, 1, std::chrono::milliseconds(5000)), 1);
  RequestReplay(second, 0);
  std::optional<std::vector<int64_t>> answer = ReadAnswer(first, 5000);
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(answer->size(), 1000u);
  EXPECT_FALSE(ReadAnswer(second, 300).has_value());
  EXPECT_EQ((*pub)->stats().replay_requests_limited, 1);
}

// A subscriber connected before the publisher exists receives every batch from 0 when the
// publisher waits for its subscription (XPUB); without the wait the first batches would be lost.
TEST_F(KvEventPubSubTest, SubscriberThatConnectsFirstLosesNothing) {
  zmq::context_t ctx;
  zmq::socket_t sub(ctx, zmq::socket_type::sub);
  sub.set(zmq::sockopt::subscribe, "kv");
  sub.set(zmq::sockopt::rcvhwm, 0);
  sub.connect(Ipc("pub"));  // nothing is bound yet: ZeroMQ retries until it is
  auto pub = KvEventPublisher::Create(
      {.endpoint = Ipc("pub"), .topic = "kv", .wait_for_subscriber_ms = 20000});
  ASSERT_TRUE(pub.ok()) << pub.status();
  constexpr int kBatches = 100;
  for (int i = 0; i < kBatches; ++i) (*pub)->Publish(Batch(i));  // never blocks
  ASSERT_TRUE((*pub)->Flush(25000));
  EXPECT_TRUE((*pub)->stats().subscribed);
  for (int i = 0; i < kBatches; ++i) {
    zmq::pollitem_t item{sub.handle(), 0, ZMQ_POLLIN, 0};
    ASSERT_EQ(zmq::poll(&item, 1, std::chrono::milliseconds(5000)), 1) << "batch " << i;
    std::vector<zmq::message_t> frames;
    ASSERT_TRUE(zmq::recv_multipart(sub, std::back_inserter(frames)));
    ASSERT_EQ(frames.size(), 3u);
    EXPECT_EQ(DecodeSequenceNumber(frames[1].to_string_view()).value(), i);
    absl::StatusOr<KvEventBatch> batch = DecodeKvEventBatch(frames[2].to_string_view());
    ASSERT_TRUE(batch.ok()) << batch.status();
    EXPECT_EQ(*batch, Batch(i));
  }
}

}  // namespace
}  // namespace pagedkv

// Copyright 2026 The pagedkv Authors.
//
// KvEventPublisher (include/pagedkv/events/kv_event_publisher.h) over cppzmq. The caller's threads
// only touch queue_ (under mu_); the publisher thread owns both sockets and the replay buffer. The
// thread exits when Shutdown was asked and the queue is empty, or the shutdown deadline passed
// (what is left then is counted as dropped). Replay answers are streamed: replays_ holds the
// answers in flight (at most one per client), each sent replay_batches_per_turn batches per turn;
// the ROUTER is ROUTER_MANDATORY, so a full pipe pauses an answer (EAGAIN) and a client that left
// abandons it (EHOSTUNREACH) instead of ZeroMQ dropping messages silently.
#include "pagedkv/events/kv_event_publisher.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "zmq.hpp"
#include "zmq_addon.hpp"

namespace pagedkv {

std::string EncodeSequenceNumber(int64_t seq) {
  std::string out(8, '\0');
  const uint64_t u = static_cast<uint64_t>(seq);
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(u >> (56 - 8 * i));
  return out;
}

absl::StatusOr<int64_t> DecodeSequenceNumber(std::string_view frame) {
  if (frame.size() != 8) {
    return absl::InvalidArgumentError(
        absl::StrCat("a sequence-number frame has 8 bytes (big-endian), got ", frame.size()));
  }
  uint64_t u = 0;
  for (unsigned char c : frame) u = (u << 8) | c;
  return static_cast<int64_t>(u);
}

namespace {

// vLLM's rule: bind stable addresses (wildcards, ipc, inproc), connect to the others.
bool ShouldBind(const std::string& endpoint) {
  return absl::StrContains(endpoint, "*") || absl::StrContains(endpoint, "::") ||
         absl::StartsWith(endpoint, "ipc://") || absl::StartsWith(endpoint, "inproc://");
}

}  // namespace

class KvEventPublisher::Impl {
 public:
  explicit Impl(KvEventPublisherOptions options) : options_(std::move(options)) {}

  // Creates and binds the sockets (caller's thread, before the publisher thread starts).
  absl::Status Open();
  void Start() {
    thread_ = std::thread([this] { Run(); });
  }
  int64_t Publish(KvEventBatch batch);
  bool Flush(int32_t timeout_ms);
  void Shutdown();
  KvEventPublisherStats stats() const {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }

  std::string endpoint_;
  std::string replay_endpoint_;

 private:
  // An answer being streamed: batches [next, end) of the buffer, then the end marker.
  struct Replay {
    std::string client;  // the ROUTER identity
    int64_t next = 0;
    int64_t end = 0;
  };
  // A client's token bucket (replay_burst, refilled at replay_requests_per_s).
  struct Bucket {
    double tokens = 0;
    std::chrono::steady_clock::time_point at;
  };
  enum class SendResult { kSent, kFull, kGone };

  void Run();
  // True while the first send is held for a subscription (wait_for_subscriber_ms).
  bool Holding();
  void ReadSubscriptions();
  void Send(int64_t seq, const KvEventBatch& batch);
  void ServiceReplay();
  // Admits a request from `client` for [start, ...), or counts why not.
  void AdmitReplay(std::string client, int64_t start);
  bool TakeToken(const std::string& client);
  // One turn of every answer in flight; finished and abandoned ones leave replays_.
  void StreamReplays();
  // Sends up to replay_batches_per_turn batches of `r`; true when `r` is finished or abandoned.
  bool StreamOne(Replay& r);
  SendResult Reply(const std::string& client, std::string_view seq, std::string_view payload);

  const KvEventPublisherOptions options_;
  zmq::context_t ctx_;
  zmq::socket_t pub_;
  std::optional<zmq::socket_t> replay_;
  std::deque<std::pair<int64_t, std::string>> buffer_;  // publisher thread only
  std::deque<Replay> replays_;                          // publisher thread only
  absl::flat_hash_map<std::string, Bucket> buckets_;    // publisher thread only
  bool xpub_ = false;                                   // pub_ is an XPUB (waits for a subscriber)
  bool subscribed_ = false;                             // publisher thread only
  std::chrono::steady_clock::time_point hold_until_;    // end of the wait for a subscriber

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable sent_cv_;  // signalled after each batch leaves the queue
  int64_t in_flight_ = 0;            // popped but not yet sent; guarded by mu_
  std::deque<std::pair<int64_t, KvEventBatch>> queue_;  // guarded by mu_
  int64_t next_seq_ = 0;                                // guarded by mu_
  bool stopping_ = false;                               // guarded by mu_
  std::chrono::steady_clock::time_point deadline_;      // guarded by mu_
  KvEventPublisherStats stats_;                         // guarded by mu_
  std::thread thread_;
  bool shut_down_ = false;
};

absl::Status KvEventPublisher::Impl::Open() {
  try {
    xpub_ = options_.wait_for_subscriber_ms > 0;
    pub_ = zmq::socket_t(ctx_, xpub_ ? zmq::socket_type::xpub : zmq::socket_type::pub);
    pub_.set(zmq::sockopt::sndhwm, options_.hwm);
    hold_until_ = std::chrono::steady_clock::now() +
                  std::chrono::milliseconds(options_.wait_for_subscriber_ms);
    pub_.set(zmq::sockopt::linger, 0);
    if (ShouldBind(options_.endpoint)) {
      pub_.bind(options_.endpoint);
    } else {
      pub_.connect(options_.endpoint);
    }
    endpoint_ = pub_.get(zmq::sockopt::last_endpoint);
    if (!options_.replay_endpoint.empty()) {
      replay_.emplace(ctx_, zmq::socket_type::router);
      replay_->set(zmq::sockopt::linger, 0);
      // A ROUTER drops what exceeds its high-water mark (1000 by default): one answer may hold
      // the whole buffer plus the end marker.
      replay_->set(zmq::sockopt::sndhwm, std::max(options_.hwm, options_.buffer_steps + 1));
      replay_->set(zmq::sockopt::router_mandatory, 1);
      replay_->bind(options_.replay_endpoint);
      replay_endpoint_ = replay_->get(zmq::sockopt::last_endpoint);
    }
  } catch (const zmq::error_t& e) {
    return absl::UnavailableError(absl::StrCat("KV event publisher: cannot open ",
                                               options_.endpoint, " / '", options_.replay_endpoint,
                                               "': ", e.what()));
  }
  return absl::OkStatus();
}

int64_t KvEventPublisher::Impl::Publish(KvEventBatch batch) {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t seq = next_seq_++;
  if (stopping_ || static_cast<int64_t>(queue_.size()) >= options_.max_queue_size) {
    ++stats_.dropped;
    return -1;
  }
  ++stats_.enqueued;
  if (!batch.data_parallel_rank.has_value()) batch.data_parallel_rank = options_.data_parallel_rank;
  queue_.emplace_back(seq, std::move(batch));
  cv_.notify_one();
  return seq;
}

void KvEventPublisher::Impl::Run() {
  while (true) {
    std::optional<std::pair<int64_t, KvEventBatch>> item;
    const bool holding = Holding();
    {
      std::unique_lock<std::mutex> lock(mu_);
      // Answers in flight are streamed every turn: then only a short wait for new batches.
      cv_.wait_for(lock, std::chrono::milliseconds(replays_.empty() && !holding ? 5 : 1),
                   [&] { return stopping_ || (!holding && !queue_.empty()); });
      if (stopping_ && std::chrono::steady_clock::now() > deadline_) {
        stats_.dropped += static_cast<int64_t>(queue_.size());
        queue_.clear();
        sent_cv_.notify_all();
        return;
      }
      if (!queue_.empty() && (!holding || stopping_)) {
        item = std::move(queue_.front());
        queue_.pop_front();
        ++in_flight_;
      } else if (stopping_ && queue_.empty()) {
        return;
      }
    }
    if (replay_.has_value()) {
      ServiceReplay();
      StreamReplays();
    }
    if (item.has_value()) {
      Send(item->first, item->second);
      std::lock_guard<std::mutex> lock(mu_);
      --in_flight_;
      sent_cv_.notify_all();
    }
  }
}

bool KvEventPublisher::Impl::Holding() {
  if (!xpub_) return false;
  ReadSubscriptions();
  return !subscribed_ && std::chrono::steady_clock::now() < hold_until_;
}

void KvEventPublisher::Impl::ReadSubscriptions() {
  // XPUB hands up [1, topic...] per new subscription and [0, topic...] per unsubscription; they
  // are read every turn so they never pile up.
  while (true) {
    zmq::message_t msg;
    zmq::recv_result_t got;
    try {
      got = pub_.recv(msg, zmq::recv_flags::dontwait);
    } catch (const zmq::error_t&) {
      return;
    }
    if (!got.has_value()) return;
    if (msg.size() > 0 && static_cast<const unsigned char*>(msg.data())[0] == 1 && !subscribed_) {
      subscribed_ = true;
      std::lock_guard<std::mutex> lock(mu_);
      stats_.subscribed = true;
    }
  }
}

bool KvEventPublisher::Impl::Flush(int32_t timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  return sent_cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                           [&] { return queue_.empty() && in_flight_ == 0; });
}

void KvEventPublisher::Impl::Send(int64_t seq, const KvEventBatch& batch) {
  std::string payload = EncodeKvEventBatch(batch, options_.codec);
  const std::string seq_frame = EncodeSequenceNumber(seq);
  try {
    pub_.send(zmq::buffer(options_.topic), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
    pub_.send(zmq::buffer(seq_frame), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
    pub_.send(zmq::buffer(payload), zmq::send_flags::dontwait);
  } catch (const zmq::error_t&) {
    // A PUB socket does not fail on slow peers; anything else is counted as a drop.
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.dropped;
    return;
  }
  buffer_.emplace_back(seq, std::move(payload));
  while (static_cast<int64_t>(buffer_.size()) > options_.buffer_steps) buffer_.pop_front();
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.published;
}

void KvEventPublisher::Impl::ServiceReplay() {
  while (true) {
    std::vector<zmq::message_t> frames;
    zmq::recv_result_t got;
    try {
      got = zmq::recv_multipart(*replay_, std::back_inserter(frames), zmq::recv_flags::dontwait);
    } catch (const zmq::error_t&) {
      return;
    }
    if (!got.has_value()) return;
    absl::StatusOr<int64_t> start =
        frames.size() == 3 ? DecodeSequenceNumber(frames[2].to_string_view())
                           : absl::InvalidArgumentError("a replay request has 3 frames");
    if (!start.ok() || frames[1].size() != 0) {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.bad_replay_requests;
      continue;
    }
    AdmitReplay(frames[0].to_string(), *start);
  }
}

void KvEventPublisher::Impl::AdmitReplay(std::string client, int64_t start) {
  const bool busy = std::any_of(replays_.begin(), replays_.end(),
                                [&](const Replay& r) { return r.client == client; });
  bool admitted = false;
  if (!busy && static_cast<int32_t>(replays_.size()) < options_.max_concurrent_replays) {
    admitted = TakeToken(client);
  }
  if (admitted) {
    // What the client asked for, up to what is buffered now; later batches come live.
    const int64_t end = buffer_.empty() ? start : buffer_.back().first + 1;
    replays_.push_back(Replay{.client = std::move(client), .next = start, .end = end});
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  ++(busy ? stats_.replay_requests_busy : stats_.replay_requests_limited);
}

bool KvEventPublisher::Impl::TakeToken(const std::string& client) {
  const auto now = std::chrono::steady_clock::now();
  const double burst = options_.replay_burst;
  const auto refilled = [&](const Bucket& b) {
    const double elapsed = std::chrono::duration<double>(now - b.at).count();
    return std::min(burst, b.tokens + elapsed * options_.replay_requests_per_s);
  };
  if (buckets_.size() > 4096) {  // forget clients whose bucket is full again
    absl::erase_if(buckets_, [&](const auto& entry) { return refilled(entry.second) >= burst; });
  }
  auto [it, inserted] = buckets_.try_emplace(client, Bucket{.tokens = burst, .at = now});
  Bucket& b = it->second;
  b.tokens = refilled(b);
  b.at = now;
  if (b.tokens < 1) return false;
  b.tokens -= 1;
  return true;
}

void KvEventPublisher::Impl::StreamReplays() {
  for (auto it = replays_.begin(); it != replays_.end();) {
    it = StreamOne(*it) ? replays_.erase(it) : it + 1;
  }
}

bool KvEventPublisher::Impl::StreamOne(Replay& r) {
  int64_t sent = 0;
  SendResult result = SendResult::kSent;
  // The buffer is sorted by sequence number; it may have moved on since the last turn.
  auto pos = std::lower_bound(buffer_.begin(), buffer_.end(), r.next,
                              [](const auto& entry, int64_t seq) { return entry.first < seq; });
  for (; pos != buffer_.end() && pos->first < r.end && sent < options_.replay_batches_per_turn;
       ++pos) {
    result = Reply(r.client, EncodeSequenceNumber(pos->first), pos->second);
    if (result != SendResult::kSent) break;
    r.next = pos->first + 1;
    ++sent;
  }
  bool done = result == SendResult::kGone;
  if (result == SendResult::kSent && (pos == buffer_.end() || pos->first >= r.end)) {
    result = Reply(r.client, EncodeSequenceNumber(-1), "");
    done = result != SendResult::kFull;
  }
  std::lock_guard<std::mutex> lock(mu_);
  stats_.replayed_batches += sent;
  if (done) ++(result == SendResult::kGone ? stats_.replays_abandoned : stats_.replay_requests);
  return done;
}

KvEventPublisher::Impl::SendResult KvEventPublisher::Impl::Reply(const std::string& client,
                                                                 std::string_view seq,
                                                                 std::string_view payload) {
  try {
    // ROUTER_MANDATORY: the identity frame fails with EAGAIN when the client's pipe is full, and
    // throws EHOSTUNREACH when the client is gone; once it is accepted the rest follows.
    if (!replay_->send(zmq::buffer(client), zmq::send_flags::sndmore | zmq::send_flags::dontwait)) {
      return SendResult::kFull;
    }
    replay_->send(zmq::const_buffer(), zmq::send_flags::sndmore);
    replay_->send(zmq::buffer(seq), zmq::send_flags::sndmore);
    replay_->send(zmq::buffer(payload), zmq::send_flags::none);
  } catch (const zmq::error_t&) {
    return SendResult::kGone;
  }
  return SendResult::kSent;
}

void KvEventPublisher::Impl::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    deadline_ =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.shutdown_timeout_ms);
    cv_.notify_one();
  }
  if (thread_.joinable()) thread_.join();
  pub_.close();
  if (replay_.has_value()) replay_->close();
}

absl::StatusOr<std::unique_ptr<KvEventPublisher>> KvEventPublisher::Create(
    KvEventPublisherOptions options) {
  if (options.endpoint.empty()) {
    return absl::InvalidArgumentError("KvEventPublisherOptions.endpoint is empty");
  }
  if (options.replay_burst <= 0 || !(options.replay_requests_per_s > 0) ||
      options.max_concurrent_replays <= 0 || options.replay_batches_per_turn <= 0 ||
      options.wait_for_subscriber_ms < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "KvEventPublisherOptions: replay_burst (", options.replay_burst,
        "), replay_requests_per_s (", options.replay_requests_per_s, "), max_concurrent_replays (",
        options.max_concurrent_replays, ") and replay_batches_per_turn (",
        options.replay_batches_per_turn, ") must be > 0 and wait_for_subscriber_ms (",
        options.wait_for_subscriber_ms, ") >= 0"));
  }
  if (options.buffer_steps <= 0 || options.hwm <= 0 || options.max_queue_size <= 0 ||
      options.shutdown_timeout_ms < 0) {
    return absl::InvalidArgumentError(absl::StrCat("KvEventPublisherOptions: buffer_steps (",
                                                   options.buffer_steps, "), hwm (", options.hwm,
                                                   ") and max_queue_size (", options.max_queue_size,
                                                   ") must be > 0 and shutdown_timeout_ms >= 0"));
  }
  auto impl = std::make_unique<Impl>(std::move(options));
  absl::Status opened = impl->Open();
  if (!opened.ok()) return opened;
  impl->Start();
  return std::unique_ptr<KvEventPublisher>(new KvEventPublisher(std::move(impl)));
}

KvEventPublisher::KvEventPublisher(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
KvEventPublisher::~KvEventPublisher() { Shutdown(); }
int64_t KvEventPublisher::Publish(KvEventBatch batch) { return impl_->Publish(std::move(batch)); }
bool KvEventPublisher::Flush(int32_t timeout_ms) { return impl_->Flush(timeout_ms); }
void KvEventPublisher::Shutdown() { impl_->Shutdown(); }
KvEventPublisherStats KvEventPublisher::stats() const { return impl_->stats(); }
const std::string& KvEventPublisher::endpoint() const { return impl_->endpoint_; }
const std::string& KvEventPublisher::replay_endpoint() const { return impl_->replay_endpoint_; }

}  // namespace pagedkv

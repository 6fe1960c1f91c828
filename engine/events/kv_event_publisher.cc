// Copyright 2026 The pagedkv Authors.
//
// KvEventPublisher (include/pagedkv/kv_event_publisher.h) over cppzmq. The caller's threads only
// touch queue_ (under mu_); the publisher thread owns both sockets and the replay buffer. The
// thread exits when Shutdown was asked and the queue is empty, or the shutdown deadline passed
// (what is left then is counted as dropped).
#include "pagedkv/kv_event_publisher.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

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
  void Run();
  void Send(int64_t seq, const KvEventBatch& batch);
  void ServiceReplay();
  void AnswerReplay(const zmq::message_t& client, int64_t start);

  const KvEventPublisherOptions options_;
  zmq::context_t ctx_;
  zmq::socket_t pub_;
  std::optional<zmq::socket_t> replay_;
  std::deque<std::pair<int64_t, std::string>> buffer_;  // publisher thread only

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
    pub_ = zmq::socket_t(ctx_, zmq::socket_type::pub);
    pub_.set(zmq::sockopt::sndhwm, options_.hwm);
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
  queue_.emplace_back(seq, std::move(batch));
  cv_.notify_one();
  return seq;
}

void KvEventPublisher::Impl::Run() {
  while (true) {
    std::optional<std::pair<int64_t, KvEventBatch>> item;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, std::chrono::milliseconds(5),
                   [&] { return stopping_ || !queue_.empty(); });
      if (stopping_ && std::chrono::steady_clock::now() > deadline_) {
        stats_.dropped += static_cast<int64_t>(queue_.size());
        queue_.clear();
        sent_cv_.notify_all();
        return;
      }
      if (!queue_.empty()) {
        item = std::move(queue_.front());
        queue_.pop_front();
        ++in_flight_;
      } else if (stopping_) {
        return;
      }
    }
    if (replay_.has_value()) ServiceReplay();
    if (item.has_value()) {
      Send(item->first, item->second);
      std::lock_guard<std::mutex> lock(mu_);
      --in_flight_;
      sent_cv_.notify_all();
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
    AnswerReplay(frames[0], *start);
  }
}

void KvEventPublisher::Impl::AnswerReplay(const zmq::message_t& client, int64_t start) {
  int64_t sent = 0;
  const auto reply = [&](std::string_view seq, std::string_view payload) {
    replay_->send(zmq::buffer(client.data(), client.size()), zmq::send_flags::sndmore);
    replay_->send(zmq::const_buffer(), zmq::send_flags::sndmore);
    replay_->send(zmq::buffer(seq), zmq::send_flags::sndmore);
    replay_->send(zmq::buffer(payload), zmq::send_flags::none);
  };
  try {
    for (const auto& [seq, payload] : buffer_) {
      if (seq < start) continue;
      reply(EncodeSequenceNumber(seq), payload);
      ++sent;
    }
    reply(EncodeSequenceNumber(-1), "");
  } catch (const zmq::error_t&) {
    // The client went away; a ROUTER drops its messages, nothing to undo.
  }
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.replay_requests;
  stats_.replayed_batches += sent;
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

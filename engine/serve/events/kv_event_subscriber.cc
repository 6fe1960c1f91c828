// Copyright 2026 The pagedkv Authors.
//
// KvEventSubscriber (include/pagedkv/events/kv_event_subscriber.h) over cppzmq. Invariant: every
// sequence number below next_seq_ was delivered, counted lost, or (before the first message)
// never expected; delivered batches leave Poll in increasing order.
#include "pagedkv/events/kv_event_subscriber.h"

#include <chrono>
#include <limits>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "pagedkv/events/kv_event_codec.h"
#include "pagedkv/events/kv_event_publisher.h"
#include "zmq.hpp"
#include "zmq_addon.hpp"

namespace pagedkv {

class KvEventSubscriber::Impl {
 public:
  explicit Impl(KvEventSubscriberOptions options)
      : options_(std::move(options)), next_seq_(options_.start_seq) {}

  absl::Status Open();
  void OpenReplay();  // (re)creates the DEALER; throws zmq::error_t
  absl::StatusOr<std::vector<ReceivedKvEventBatch>> Poll(int32_t timeout_ms);
  absl::StatusOr<std::vector<ReceivedKvEventBatch>> RecoverNow() {
    std::vector<ReceivedKvEventBatch> out;
    if (!replay_.has_value()) return out;
    try {
      Recover(std::numeric_limits<int64_t>::max(), out);
    } catch (const zmq::error_t& e) {
      return absl::UnavailableError(absl::StrCat("KV event subscriber: ", e.what()));
    }
    first_poll_ = false;
    return out;
  }
  int64_t next_seq() const { return next_seq_; }
  KvEventSubscriberStats stats() const { return stats_; }

 private:
  void OnMessage(std::vector<zmq::message_t>& frames, std::vector<ReceivedKvEventBatch>& out);
  // Fetches [next_seq_, end) through the replay socket into `out`; counts what is missing.
  void Recover(int64_t end, std::vector<ReceivedKvEventBatch>& out);
  // Reads one replay answer until the end marker; false on timeout.
  bool ReadReplay(int64_t end, std::vector<ReceivedKvEventBatch>& out);
  void Deliver(int64_t seq, std::string_view payload, bool replayed,
               std::vector<ReceivedKvEventBatch>& out);

  const KvEventSubscriberOptions options_;
  zmq::context_t ctx_;
  zmq::socket_t sub_;
  std::optional<zmq::socket_t> replay_;
  int64_t next_seq_;
  bool first_poll_ = true;
  KvEventSubscriberStats stats_;
};

void KvEventSubscriber::Impl::OpenReplay() {
  replay_.emplace(ctx_, zmq::socket_type::dealer);
  replay_->set(zmq::sockopt::linger, 0);
  replay_->set(zmq::sockopt::rcvhwm, 0);  // no limit: a replay answer may be the whole buffer
  replay_->connect(options_.replay_endpoint);
}

absl::Status KvEventSubscriber::Impl::Open() {
  try {
    sub_ = zmq::socket_t(ctx_, zmq::socket_type::sub);
    sub_.set(zmq::sockopt::linger, 0);
    sub_.set(zmq::sockopt::rcvhwm, options_.rcvhwm);
    sub_.set(zmq::sockopt::subscribe, options_.topic);
    sub_.connect(options_.endpoint);
    if (!options_.replay_endpoint.empty()) {
      OpenReplay();
    }
  } catch (const zmq::error_t& e) {
    return absl::UnavailableError(absl::StrCat("KV event subscriber: cannot connect to ",
                                               options_.endpoint, " / '", options_.replay_endpoint,
                                               "': ", e.what()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<ReceivedKvEventBatch>> KvEventSubscriber::Impl::Poll(
    int32_t timeout_ms) {
  std::vector<ReceivedKvEventBatch> out;
  try {
    if (first_poll_ && options_.start_seq >= 0 && replay_.has_value()) {
      Recover(std::numeric_limits<int64_t>::max(), out);  // a late joiner: whatever is buffered
    }
    first_poll_ = false;
    zmq::pollitem_t item{sub_.handle(), 0, ZMQ_POLLIN, 0};
    if (out.empty() && zmq::poll(&item, 1, std::chrono::milliseconds(timeout_ms)) == 0) {
      return out;
    }
    while (true) {
      std::vector<zmq::message_t> frames;
      if (!zmq::recv_multipart(sub_, std::back_inserter(frames), zmq::recv_flags::dontwait)) {
        break;
      }
      OnMessage(frames, out);
    }
  } catch (const zmq::error_t& e) {
    return absl::UnavailableError(absl::StrCat("KV event subscriber: ", e.what()));
  }
  return out;
}

void KvEventSubscriber::Impl::OnMessage(std::vector<zmq::message_t>& frames,
                                        std::vector<ReceivedKvEventBatch>& out) {
  absl::StatusOr<int64_t> seq = frames.size() == 3
                                    ? DecodeSequenceNumber(frames[1].to_string_view())
                                    : absl::InvalidArgumentError("3 frames expected");
  if (!seq.ok() || *seq < 0) {
    ++stats_.decode_errors;  // no usable number: nothing to advance
    return;
  }
  if (next_seq_ < 0) next_seq_ = *seq;
  if (*seq < next_seq_) {
    ++stats_.duplicates;
    return;
  }
  if (*seq > next_seq_) {
    ++stats_.gaps;
    Recover(*seq, out);
  }
  Deliver(*seq, frames[2].to_string_view(), /*replayed=*/false, out);
}

void KvEventSubscriber::Impl::Deliver(int64_t seq, std::string_view payload, bool replayed,
                                      std::vector<ReceivedKvEventBatch>& out) {
  if (seq > next_seq_) stats_.lost += seq - next_seq_;
  next_seq_ = seq + 1;
  absl::StatusOr<KvEventBatch> batch = DecodeKvEventBatch(payload);
  if (!batch.ok()) {
    ++stats_.decode_errors;
    ++stats_.lost;
    return;
  }
  ++stats_.received;
  if (replayed) ++stats_.replayed;
  out.push_back(ReceivedKvEventBatch{.seq = seq, .replayed = replayed, .batch = *std::move(batch)});
}

void KvEventSubscriber::Impl::Recover(int64_t end, std::vector<ReceivedKvEventBatch>& out) {
  const int64_t from = std::max<int64_t>(next_seq_, 0);
  if (replay_.has_value()) {
    replay_->send(zmq::const_buffer(), zmq::send_flags::sndmore);
    replay_->send(zmq::buffer(EncodeSequenceNumber(from)), zmq::send_flags::none);
    if (!ReadReplay(end, out)) {
      // A late answer must not be read as the next one: start over with a fresh socket.
      OpenReplay();
    }
  }
  if (end != std::numeric_limits<int64_t>::max() && next_seq_ < end) {
    stats_.lost += end - std::max<int64_t>(next_seq_, 0);
    next_seq_ = end;
  }
}

bool KvEventSubscriber::Impl::ReadReplay(int64_t end, std::vector<ReceivedKvEventBatch>& out) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.replay_timeout_ms);
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    zmq::pollitem_t item{replay_->handle(), 0, ZMQ_POLLIN, 0};
    if (left.count() <= 0 || zmq::poll(&item, 1, left) == 0) return false;
    std::vector<zmq::message_t> frames;
    if (!zmq::recv_multipart(*replay_, std::back_inserter(frames))) return false;
    if (frames.size() != 3) {
      ++stats_.decode_errors;
      continue;
    }
    absl::StatusOr<int64_t> seq = DecodeSequenceNumber(frames[1].to_string_view());
    if (!seq.ok()) {
      ++stats_.decode_errors;
      continue;
    }
    if (*seq == -1) return true;  // the end marker
    if (*seq < next_seq_ || *seq >= end) continue;
    Deliver(*seq, frames[2].to_string_view(), /*replayed=*/true, out);
  }
}

absl::StatusOr<std::unique_ptr<KvEventSubscriber>> KvEventSubscriber::Create(
    KvEventSubscriberOptions options) {
  if (options.endpoint.empty()) {
    return absl::InvalidArgumentError("KvEventSubscriberOptions.endpoint is empty");
  }
  auto impl = std::make_unique<Impl>(std::move(options));
  absl::Status opened = impl->Open();
  if (!opened.ok()) return opened;
  return std::unique_ptr<KvEventSubscriber>(new KvEventSubscriber(std::move(impl)));
}

KvEventSubscriber::KvEventSubscriber(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
KvEventSubscriber::~KvEventSubscriber() = default;
absl::StatusOr<std::vector<ReceivedKvEventBatch>> KvEventSubscriber::Poll(int32_t timeout_ms) {
  return impl_->Poll(timeout_ms);
}
absl::StatusOr<std::vector<ReceivedKvEventBatch>> KvEventSubscriber::Recover() {
  return impl_->RecoverNow();
}
int64_t KvEventSubscriber::next_seq() const { return impl_->next_seq(); }
KvEventSubscriberStats KvEventSubscriber::stats() const { return impl_->stats(); }

}  // namespace pagedkv

// Copyright 2026 The pagedkv Authors.
//
// Randomised scheduler runs against a brute-force model of every request, with invariants checked
// after every step:
//   - the token budget and the sequence cap are never exceeded;
//   - each admission starts at its prefix hit (a whole number of blocks, never the whole
//     request) and then computes every token exactly once, in order, until the request samples
//     its next token, finishes or is preempted;
//   - positions, slot mapping and block tables agree; no two tokens of a batch share a slot;
//   - a simulated KV store (each slot holds a fingerprint of the prefix it was computed from) reads
//     back the right prefix at every position of every scheduled sequence, so prefix hits, block
//     tables and eviction never hand a sequence someone else's KV (sequences run in batch order:
//     a hit on KV computed in the same step must come from an earlier sequence);
//   - blocks are conserved: used blocks == blocks in running requests' tables, manager invariants;
//   - preemption victims rank below every request left running (FCFS: latest; priority: lowest
//     priority, then latest);
//   - under FCFS requests are first admitted in arrival order, and every run terminates;
//   - a bad UpdateFromOutput call changes nothing (the good call after it behaves normally).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "gtest/gtest.h"
#include "pagedkv/cache/kv_cache_manager.h"
#include "pagedkv/runtime/scheduler.h"
#include "tests/engine/runtime/scheduler/scheduler_test_util.h"

namespace pagedkv {
namespace {

using testing::ExpectBatchConsistent;

#if defined(__SANITIZE_ADDRESS__)
constexpr int kNumSeeds = 40;
#else
constexpr int kNumSeeds = 500;
#endif

constexpr TokenId kVocab = 40;

uint64_t Mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  h *= 0xff51afd7ed558ccdULL;
  return h ^ (h >> 33);
}

// The test's own picture of one request.
struct Model {
  SchedulerRequest spec;
  int64_t add_order = 0;
  std::vector<TokenId> tokens;   // prompt + outputs
  std::vector<uint64_t> prefix;  // prefix[p] = fingerprint of salt + tokens[0..p]
  enum State { kWaiting, kRunning, kDone } state = kWaiting;
  int32_t next_pos = 0;  // next position to compute in the current admission
  bool admitted_once = false;
  bool awaiting = false;

  void Append(TokenId t) {
    const uint64_t parent =
        prefix.empty() ? Mix(std::hash<std::string>{}(spec.cache_salt), 1) : prefix.back();
    tokens.push_back(t);
    prefix.push_back(Mix(parent, static_cast<uint64_t>(t)));
  }
  // Rank used to choose preemption victims (larger = preempted first).
  std::tuple<int64_t, double, int64_t> Rank(SchedulingPolicy policy) const {
    if (policy == SchedulingPolicy::kPriority) return {spec.priority, spec.arrival_time, add_order};
    return {0, 0.0, add_order};
  }
};

struct RunConfig {
  SchedulerOptions options;
  int32_t block_size = 4;
  int32_t num_blocks = 16;
  int num_requests = 40;
};

RunConfig RandomConfig(std::mt19937_64& rng) {
  auto pick = [&](int lo, int hi) {
    return static_cast<int32_t>(std::uniform_int_distribution<int>(lo, hi)(rng));
  };
  RunConfig c;
  c.block_size = std::vector<int32_t>{1, 2, 4, 8, 16}[static_cast<size_t>(pick(0, 4))];
  c.options.max_num_batched_tokens = pick(1, 64);
  c.options.max_num_seqs = pick(1, 12);
  c.options.enable_chunked_prefill = pick(0, 3) != 0;
  c.options.long_prefill_token_threshold = pick(0, 1) ? pick(1, 16) : 0;
  c.options.policy = pick(0, 1) ? SchedulingPolicy::kPriority : SchedulingPolicy::kFcfs;
  c.options.cache_aware = pick(0, 2) == 0;
  c.options.cache_aware_max_waiting = pick(1, 64);
  c.num_requests = pick(10, 60);
  return c;
}

class RandomRun {
 public:
  explicit RandomRun(uint64_t seed) : rng_(seed) {}

  void Run() {
    config_ = RandomConfig(rng_);
    const SchedulerOptions& opt = config_.options;
    // Requests: shared heads (system prompts) plus random tails; a small pool forces preemption.
    std::vector<std::vector<TokenId>> heads;
    for (int i = 0; i < 4; ++i) heads.push_back(RandomTokens(Pick(1, 24)));
    int32_t max_need = 0;
    for (int i = 0; i < config_.num_requests; ++i) {
      SchedulerRequest r;
      r.id = static_cast<RequestId>(1000 + i * 7);
      if (i > 0 && Pick(0, 4) == 0) {
        // Another sample of an earlier request's prompt, taking its KV while it runs.
        const SchedulerRequest& source = pending_[static_cast<size_t>(Pick(0, i - 1))];
        r.prompt = source.prompt;
        r.cache_salt = source.cache_salt;
        r.prompt_source = source.id;
        r.max_new_tokens = Pick(1, source.max_new_tokens);  // fits wherever the source fits
      } else {
        if (Pick(0, 3) != 0) r.prompt = heads[static_cast<size_t>(Pick(0, 3))];
        std::vector<TokenId> tail = RandomTokens(Pick(r.prompt.empty() ? 1 : 0, 20));
        r.prompt.insert(r.prompt.end(), tail.begin(), tail.end());
        r.max_new_tokens = Pick(1, 12);
        r.cache_salt = Pick(0, 4) == 0 ? "other" : "";
      }
      r.priority = Pick(0, 3);
      if (Pick(0, 2) == 0) r.eos_token = static_cast<TokenId>(Pick(0, kVocab - 1));
      if (!opt.enable_chunked_prefill) {
        // Without chunking a request must always fit the budget whole (AddRequest checks it).
        r.max_new_tokens = std::min(r.max_new_tokens, opt.max_num_batched_tokens);
        const size_t room = static_cast<size_t>(opt.max_num_batched_tokens + 1 - r.max_new_tokens);
        if (r.prompt.size() > room) r.prompt.resize(room);
      }
      const int32_t kv = static_cast<int32_t>(r.prompt.size()) + r.max_new_tokens - 1;
      max_need = std::max(max_need, (kv + config_.block_size - 1) / config_.block_size);
      pending_.push_back(r);
    }
    config_.num_blocks = max_need + Pick(0, 2 * max_need);
    manager_ = testing::MakeManager(config_.num_blocks, config_.block_size);
    kv_.assign(static_cast<size_t>(config_.num_blocks * config_.block_size), 0);
    auto scheduler = Scheduler::Create(opt, *manager_);
    ASSERT_TRUE(scheduler.ok()) << scheduler.status();
    scheduler_ = std::move(scheduler).value();

    double clock = 0.0;
    size_t next = 0;
    int steps = 0;
    while (next < pending_.size() || scheduler_->HasUnfinishedRequests()) {
      ASSERT_LT(++steps, 20000) << "no progress";
      clock += 1.0;
      // Arrivals: a few per step.
      for (int k = Pick(0, 3); k > 0 && next < pending_.size(); --k, ++next) {
        SchedulerRequest r = pending_[next];
        r.arrival_time = clock;
        Model m;
        m.spec = r;
        m.add_order = static_cast<int64_t>(next);
        for (TokenId t : r.prompt) m.Append(t);
        ASSERT_TRUE(scheduler_->AddRequest(r).ok());
        models_.emplace(r.id, std::move(m));
      }
      if (Pick(0, 40) == 0) AbortRandom();
      ASSERT_NO_FATAL_FAILURE(Step());
    }
    EXPECT_EQ(manager_->NumRequests(), 0);
    EXPECT_EQ(manager_->NumAvailableBlocks(), config_.num_blocks);
    for (const auto& [id, m] : models_) EXPECT_EQ(m.state, Model::kDone) << id;
    totals_ = scheduler_->stats();
  }

  // The scheduler's totals at the end of the run.
  const SchedulerStats& totals() const { return totals_; }

 private:
  int32_t Pick(int lo, int hi) {
    return static_cast<int32_t>(std::uniform_int_distribution<int>(lo, hi)(rng_));
  }
  std::vector<TokenId> RandomTokens(int n) {
    std::vector<TokenId> v(static_cast<size_t>(n));
    for (TokenId& t : v) t = static_cast<TokenId>(Pick(0, kVocab - 1));
    return v;
  }

  void AbortRandom() {
    std::vector<RequestId> live;
    for (const auto& [id, m] : models_) {
      if (m.state != Model::kDone) live.push_back(id);
    }
    if (live.empty()) return;
    std::sort(live.begin(), live.end());
    const RequestId id = live[static_cast<size_t>(Pick(0, static_cast<int>(live.size()) - 1))];
    ASSERT_TRUE(scheduler_->AbortRequest(id).ok());
    Model& m = models_.at(id);
    m.state = Model::kDone;
    m.awaiting = false;
    expected_finished_.insert(id);
  }

  void Step() {
    const SchedulerOptions& opt = config_.options;
    const int32_t bs = config_.block_size;
    ASSERT_TRUE(scheduler_->Schedule(&batch_).ok());
    ExpectBatchConsistent(batch_);
    ASSERT_LE(batch_.num_tokens(), opt.max_num_batched_tokens);
    ASSERT_LE(batch_.num_sequences(), opt.max_num_seqs);
    ASSERT_LE(scheduler_->num_running(), opt.max_num_seqs);

    // Finished since the previous step.
    std::set<RequestId> finished(batch_.finished_request_ids.begin(),
                                 batch_.finished_request_ids.end());
    ASSERT_EQ(finished.size(), batch_.finished_request_ids.size());
    EXPECT_EQ(finished, expected_finished_);
    expected_finished_.clear();

    // Preempted: back to waiting, KV forgotten.
    for (RequestId id : batch_.preempted_request_ids) {
      Model& m = models_.at(id);
      ASSERT_EQ(m.state, Model::kRunning) << id;
      m.state = Model::kWaiting;
      m.next_pos = 0;
    }

    // Block copies run before the forward pass.
    for (const BlockCopy& copy : batch_.block_copies) {
      std::copy_n(kv_.begin() + int64_t{copy.src} * bs, bs, kv_.begin() + int64_t{copy.dst} * bs);
    }

    // Sequences.
    absl::flat_hash_set<int64_t> slots;
    for (int32_t i = 0; i < batch_.num_sequences(); ++i) {
      const ScheduledSequence& s = batch_.sequences[static_cast<size_t>(i)];
      Model& m = models_.at(s.request_id);
      const int32_t n = static_cast<int32_t>(m.tokens.size());
      if (s.newly_admitted) {
        ASSERT_EQ(m.state, Model::kWaiting) << s.request_id;
        ASSERT_EQ(s.num_computed_tokens, s.num_prefix_hit_tokens + s.num_copied_tokens);
        ASSERT_EQ(s.num_prefix_hit_tokens % bs, 0);
        ASSERT_LT(s.num_computed_tokens, n);
        if (s.num_copied_tokens > 0) {
          ASSERT_EQ(s.num_computed_tokens, n - 1);
        }
        if (!opt.enable_chunked_prefill) {
          ASSERT_EQ(s.seq_len(), n);
        }
        // (A sample waits for its prompt source, so it may come later.)
        if (opt.policy == SchedulingPolicy::kFcfs && !opt.cache_aware && !m.admitted_once &&
            m.spec.prompt_source == 0) {
          ASSERT_GT(m.add_order, last_first_admission_) << "FCFS order broken";
          last_first_admission_ = m.add_order;
        }
        m.state = Model::kRunning;
        m.admitted_once = true;
        m.next_pos = s.num_computed_tokens;
      } else {
        ASSERT_EQ(m.state, Model::kRunning) << s.request_id;
      }
      // Every token exactly once per admission, in order.
      ASSERT_EQ(s.num_computed_tokens, m.next_pos) << s.request_id;
      ASSERT_LE(s.seq_len(), n);
      ASSERT_EQ(s.samples, s.seq_len() == n);
      if (opt.enable_chunked_prefill && opt.long_prefill_token_threshold > 0) {
        ASSERT_LE(s.num_scheduled_tokens, std::max(1, opt.long_prefill_token_threshold));
      }
      m.next_pos = s.seq_len();
      m.awaiting = s.samples;
      for (int32_t j = 0; j < s.num_scheduled_tokens; ++j) {
        const size_t k = static_cast<size_t>(s.query_start + j);
        const int32_t pos = s.num_computed_tokens + j;
        ASSERT_EQ(batch_.token_ids[k], m.tokens[static_cast<size_t>(pos)]);
        ASSERT_TRUE(slots.insert(batch_.slot_mapping[k]).second) << "slot written twice";
        ASSERT_LT(batch_.slot_mapping[k], static_cast<int64_t>(kv_.size()));
        ASSERT_GE(batch_.slot_mapping[k], 0);
        kv_[static_cast<size_t>(batch_.slot_mapping[k])] = m.prefix[static_cast<size_t>(pos)];
      }
      // The simulated model runs the batch's sequences in order: each writes its KV, then its
      // attention reads every position it has. A prefix hit may rely on KV written in this same
      // step, but only by a sequence earlier in the batch.
      const auto table = batch_.BlockTable(i);
      for (int32_t pos = 0; pos < s.seq_len(); ++pos) {
        const int64_t slot =
            static_cast<int64_t>(table[static_cast<size_t>(pos / bs)]) * bs + pos % bs;
        ASSERT_EQ(kv_[static_cast<size_t>(slot)], m.prefix[static_cast<size_t>(pos)])
            << "request " << s.request_id << " reads wrong KV at position " << pos;
      }
    }

    // Preemption victims rank below everything still running.
    int running = 0, waiting = 0;
    absl::flat_hash_set<BlockId> used;
    for (const auto& [id, m] : models_) {
      if (m.state == Model::kRunning) {
        ++running;
        for (RequestId victim : batch_.preempted_request_ids) {
          ASSERT_LT(m.Rank(opt.policy), models_.at(victim).Rank(opt.policy));
        }
        auto table = manager_->GetBlockTable(id);
        ASSERT_TRUE(table.ok()) << id;
        used.insert(table->begin(), table->end());
      } else if (m.state == Model::kWaiting) {
        ++waiting;
      }
    }
    ASSERT_EQ(scheduler_->num_running(), running);
    ASSERT_EQ(scheduler_->num_waiting(), waiting);
    ASSERT_EQ(manager_->NumRequests(), running);
    ASSERT_EQ(config_.num_blocks - manager_->NumAvailableBlocks(),
              static_cast<int32_t>(used.size()));
    ASSERT_TRUE(manager_->ValidateInvariants().ok());
    if (batch_.empty()) {
      // Nothing ran: only possible when nothing is left (arrivals may still come).
      ASSERT_EQ(running + waiting, 0);
    }

    // Sample. Sometimes abort a sampling request first; sometimes try a bad call first.
    if (Pick(0, 30) == 0) AbortRandom();
    std::vector<SampledToken> sampled;
    for (const ScheduledSequence& s : batch_.sequences) {
      const Model& m = models_.at(s.request_id);
      if (s.samples && m.state == Model::kRunning) {
        sampled.push_back({s.request_id, static_cast<TokenId>(Pick(0, kVocab - 1))});
      }
    }
    std::shuffle(sampled.begin(), sampled.end(), rng_);
    if (!sampled.empty() && Pick(0, 5) == 0) {
      std::vector<SampledToken> bad = sampled;
      switch (Pick(0, 2)) {
        case 0:
          bad.push_back(bad.front());
          break;  // duplicate
        case 1:
          bad.pop_back();
          break;  // missing
        default:
          bad.push_back({987654321, 1});
          break;  // unknown
      }
      ASSERT_FALSE(scheduler_->UpdateFromOutput(bad).ok());
    }
    auto outputs = scheduler_->UpdateFromOutput(sampled);
    ASSERT_TRUE(outputs.ok()) << outputs.status();
    ASSERT_EQ(outputs->size(), sampled.size());
    for (size_t k = 0; k < sampled.size(); ++k) {
      const RequestOutput& out = (*outputs)[k];
      ASSERT_EQ(out.request_id, sampled[k].request_id);
      Model& m = models_.at(out.request_id);
      m.Append(sampled[k].token);
      m.awaiting = false;
      const int32_t num_out =
          static_cast<int32_t>(m.tokens.size()) - static_cast<int32_t>(m.spec.prompt.size());
      ASSERT_EQ(out.num_output_tokens, num_out);
      const bool stop = m.spec.eos_token.has_value() && *m.spec.eos_token == sampled[k].token;
      const FinishReason want = stop                               ? FinishReason::kStop
                                : num_out >= m.spec.max_new_tokens ? FinishReason::kLength
                                                                   : FinishReason::kNone;
      ASSERT_EQ(out.finish_reason, want);
      if (out.finished()) {
        ASSERT_EQ(
            out.output_tokens,
            std::vector<TokenId>(m.tokens.begin() + static_cast<int64_t>(m.spec.prompt.size()),
                                 m.tokens.end()));
        m.state = Model::kDone;
        expected_finished_.insert(out.request_id);
      }
    }
  }

  std::mt19937_64 rng_;
  RunConfig config_;
  std::vector<SchedulerRequest> pending_;
  absl::flat_hash_map<RequestId, Model> models_;
  std::unique_ptr<KvCacheManager> manager_;
  std::unique_ptr<Scheduler> scheduler_;
  ScheduledBatch batch_;
  std::vector<uint64_t> kv_;
  std::set<RequestId> expected_finished_;
  int64_t last_first_admission_ = -1;
  SchedulerStats totals_;
};

TEST(SchedulerRandomTest, InvariantsHoldEveryStep) {
  int64_t preemptions = 0, hits = 0, aborts = 0, copied = 0;
  for (int seed = 0; seed < kNumSeeds; ++seed) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    RandomRun run(static_cast<uint64_t>(seed) * 7919 + 1);
    ASSERT_NO_FATAL_FAILURE(run.Run());
    preemptions += run.totals().num_preemptions;
    hits += run.totals().num_prefix_hit_tokens;
    aborts += run.totals().num_aborted;
    copied += run.totals().num_copied_tokens;
  }
  // The runs exercise what the invariants are about.
  EXPECT_GT(preemptions, 0);
  EXPECT_GT(hits, 0);
  EXPECT_GT(aborts, 0);
  EXPECT_GT(copied, 0);
  std::printf("preemptions=%lld prefix_hit_tokens=%lld aborts=%lld copied_tokens=%lld\n",
              static_cast<long long>(preemptions), static_cast<long long>(hits),
              static_cast<long long>(aborts), static_cast<long long>(copied));
}

}  // namespace
}  // namespace pagedkv

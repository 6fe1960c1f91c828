// Copyright 2026 The pagedkv Authors.
//
// GEMM for the projections and the LM head (y[m, n] = x[m, k] W[n, k]^T) on the model shapes:
//   BM_GemmPlain:    the CPU kernel before issue #16 (bench/engine/model/plain_ops.h: SSE2, 4-wide
//                    partial sums), one thread; the "before" of RESULTS.md.
//   BM_GemmPagedkv:  pagedkv's Highway kernel (kernels/cpu/simd/linear_simd.cc), one thread, and
//                    threads:0 over every core (the CPU backend's split by columns).
//   BM_GemmPacked:   pagedkv's packed kernel (kernels/cpu/packed_linear.h: W packed k-major once,
//                    outside the timing, as the CPU backend does at a model's first step; outer-
//                    product tiles, no lane sums), one thread and threads:0.
//   BM_GemmQuant:    pagedkv's kernel over weights kept in GGUF blocks (kernels/cpu/quant_linear.h;
//                    Q4_1 projections, Q8_0 LM head) on SmolLM2-135M's shapes, beside
//                    BM_GemmPackedSmolLm2 (the same shapes in fp32, packed): below 16 rows the
//                    blocks are multiplied in registers, from 16 rows each panel is decoded
//                    once per call into the packed layout.
//   BM_GemmQuantTypesInt8: Q4_0 / Q4_K / Q6_K on SmolLM2's down shape with int8 activations
//                    from Int8Tiles, beside BM_GemmQuantTypes (fp32 activations).
//   BM_GemmInt8Kernels: BM_GemmQuantInt8's shapes (and Q4_K / Q6_K, always from tiles), one thread,
//   each int8 kernel this CPU runs
//                    forced in turn (kernel: 0 avx2, 1 avx512vnni from the rows, 2 avx512vnni
//                    from Int8Tiles built outside the timing; the label names it).
//   BM_GemmOpenBlas: OpenBLAS cblas_sgemm (libopenblas-dev; only when pkg-config finds it), one
//                    thread, and threads:0 with OpenBLAS's own pool over every core.
// Shapes: m = 1, 8, 32, 128 rows against (n, k) of aidreams260K (dim 64, hidden 172, vocab 512),
// TinyStories-656K (dim 128, kv 64, hidden 384, vocab 2048) and a 4096-wide layer. Wall time, so
// threaded runs count every core's work; GFLOP/s = 2 m n k per second.
//
//   build/bench/kernels/gemm_benchmark --benchmark_counters_tabular=true
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench/engine/model/plain_ops.h"
#include "benchmark/benchmark.h"
#include "kernels/cpu/int8_linear.h"
#include "kernels/cpu/int8_tiles.h"
#include "kernels/cpu/packed_linear.h"
#include "kernels/cpu/quant_linear.h"
#include "kernels/cpu/simd/simd_kernels.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/cpu/threaded_ops.h"
#include "pagedkv/kernels/int8_activations.h"
#include "pagedkv/kernels/op_args.h"
#include "pagedkv/kernels/quant_blocks.h"
#if PAGEDKV_HAVE_OPENBLAS
#include <cblas.h>
#endif

namespace pagedkv::bench {
namespace {

struct Operands {
  std::vector<float> x, w, y;
  Operands(int64_t m, int64_t n, int64_t k)
      : x(static_cast<size_t>(m * k)),
        w(static_cast<size_t>(n * k)),
        y(static_cast<size_t>(m * n)) {
    uint32_t s = 12345;
    auto next = [&s] {
      s = s * 1664525u + 1013904223u;
      return static_cast<float>(s >> 8) / 16777216.0f - 0.5f;
    };
    for (float& v : x) v = next();
    for (float& v : w) v = next();
  }
};

void SetCounters(benchmark::State& state, int64_t m, int64_t n, int64_t k) {
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(m * n * k),
                                                 benchmark::Counter::kIsIterationInvariantRate,
                                                 benchmark::Counter::kIs1000);
  state.SetLabel(cpu::simd::TargetName());
}

void BM_GemmPlain(benchmark::State& state) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  Operands o(m, n, k);
  for (auto _ : state) {
    plain::Linear(o.x.data(), o.w.data(), o.y.data(), m, n, k, false);
    benchmark::DoNotOptimize(o.y.data());
  }
  SetCounters(state, m, n, k);
}

// threads: 1 (null pool), 0 (every core) or a count.
std::unique_ptr<cpu::ThreadPool> PoolFor(int32_t threads) {
  if (threads == 1) return nullptr;
  auto p = cpu::ThreadPool::Create(threads == 0 ? cpu::HardwareThreads() : threads);
  return p.ok() ? std::move(p).value() : nullptr;
}

void BM_GemmPagedkv(benchmark::State& state) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  std::unique_ptr<cpu::ThreadPool> pool = PoolFor(static_cast<int32_t>(state.range(3)));
  Operands o(m, n, k);
  const LinearArgs args{.x = o.x.data(), .w = o.w.data(), .y = o.y.data(), .m = m, .n = n, .k = k};
  for (auto _ : state) {
    if (!cpu::Linear(args, pool.get()).ok()) return state.SkipWithError("Linear failed");
    benchmark::DoNotOptimize(o.y.data());
  }
  SetCounters(state, m, n, k);
}

void BM_GemmPacked(benchmark::State& state) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  std::unique_ptr<cpu::ThreadPool> pool = PoolFor(static_cast<int32_t>(state.range(3)));
  Operands o(m, n, k);
  absl::StatusOr<cpu::PackedWeights> packed = cpu::PackedWeights::Pack(o.w.data(), n, k);
  if (!packed.ok()) return state.SkipWithError("Pack failed");
  const LinearArgs args{.x = o.x.data(), .w = o.w.data(), .y = o.y.data(), .m = m, .n = n, .k = k};
  for (auto _ : state) {
    if (!cpu::PackedLinear(args, *packed, pool.get()).ok()) {
      return state.SkipWithError("PackedLinear failed");
    }
    benchmark::DoNotOptimize(o.y.data());
  }
  SetCounters(state, m, n, k);
}

// n rows of k values of `type`: blocks of small scales and every integer value (F16 / BF16:
// small values of every mantissa).
std::vector<unsigned char> QuantRows(WeightType type, int64_t n, int64_t k) {
  std::vector<unsigned char> w(static_cast<size_t>(n * WeightRowBytes(type, k)));
  uint32_t s = 777;
  const auto bb = static_cast<size_t>(QuantBlockBytes(type));
  for (size_t at = 0; at < w.size(); at += bb) {
    for (size_t i = 0; i < bb; ++i) {
      s = s * 1664525u + 1013904223u;
      w[at + i] = static_cast<unsigned char>(s >> 24);
    }
    const uint16_t scale = 0x2000 + static_cast<uint16_t>(at / 64 % 512);  // ~0.008-0.016 (f16)
    auto put = [&](size_t i, uint16_t h) {
      w[at + i] = static_cast<unsigned char>(h & 0xFF);
      w[at + i + 1] = static_cast<unsigned char>(h >> 8);
    };
    if (type == WeightType::kF16) {
      w[at + 1] = static_cast<unsigned char>(0x20 | (w[at + 1] & 0x83));  // |x| ~ 2^-7 .. 2^-5
    } else if (type == WeightType::kBF16) {
      w[at + 1] = static_cast<unsigned char>(0x3C | (w[at + 1] & 0x80));  // |x| ~ 2^-7 .. 2^-6
    } else if (type == WeightType::kQ6_K) {
      put(208, scale);
    } else {
      put(0, scale);
      if (type == WeightType::kQ4_1) put(2, 0xB800);  // m = -0.5
      if (type == WeightType::kQ4_K) put(2, scale);   // dmin
    }
  }
  return w;
}

void GemmQuant(benchmark::State& state, ActivationType activations, bool tiled = false) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  const auto type = static_cast<WeightType>(state.range(4));
  std::unique_ptr<cpu::ThreadPool> pool = PoolFor(static_cast<int32_t>(state.range(3)));
  Operands o(m, 1, k);
  o.y.resize(static_cast<size_t>(m * n));
  const std::vector<unsigned char> w = QuantRows(type, n, k);
  const QuantLinearArgs args{.x = o.x.data(),
                             .w = w.data(),
                             .w_type = type,
                             .y = o.y.data(),
                             .m = m,
                             .n = n,
                             .k = k,
                             .activations = activations};
  std::optional<cpu::Int8Tiles> tiles;
  if (tiled) {
    absl::StatusOr<cpu::Int8Tiles> built = cpu::Int8Tiles::Build(w.data(), type, n, k);
    if (!built.ok()) return state.SkipWithError("Int8Tiles::Build failed");
    tiles = *std::move(built);
  }
  const cpu::Int8Tiles* tiles_ptr = tiles.has_value() ? &*tiles : nullptr;
  for (auto _ : state) {
    if (!cpu::QuantLinear(args, pool.get(), tiles_ptr).ok()) {
      return state.SkipWithError("QuantLinear failed");
    }
    benchmark::DoNotOptimize(o.y.data());
  }
  SetCounters(state, m, n, k);
}

// Native weights times fp32 activations (today's default) and times int8 activations
// (kernels/cpu/int8_linear.h): the same shapes, so the two rows compare directly.
void BM_GemmQuant(benchmark::State& state) { GemmQuant(state, ActivationType::kF32); }
void BM_GemmQuantInt8(benchmark::State& state) { GemmQuant(state, ActivationType::kInt8); }

// (n, k) of SmolLM2-135M: q/o, k/v, gate/up, down, and the tied LM head (Q8_0 in the GGUF file).
void SmolLm2Shapes(benchmark::internal::Benchmark* b, bool with_type) {
  const std::vector<std::pair<int64_t, int64_t>> shapes = {
      {576, 576}, {192, 576}, {1536, 576}, {576, 1536}, {49152, 576}};
  b->ArgNames({"m", "n", "k", "threads", "type"});
  for (int64_t m : {1, 8, 16, 64, 256}) {
    for (auto [n, k] : shapes) {
      const auto type = static_cast<int64_t>(n == 49152 ? WeightType::kQ8_0 : WeightType::kQ4_1);
      for (int64_t threads : {1, 2}) {
        if (with_type) {
          b->Args({m, n, k, threads, type});
        } else {
          b->Args({m, n, k, threads, 0});
        }
      }
    }
  }
  b->UseRealTime();
}

constexpr const char* kInt8Kernels[] = {"avx2", "avx512vnni", "avx512vnni"};

void BM_GemmInt8Kernels(benchmark::State& state) {
  const char* kernel = kInt8Kernels[state.range(5)];
  const cpu::Int8KernelChoice previous = cpu::CurrentInt8KernelChoice();
  if (!cpu::ForceInt8Kernel(kernel).ok()) return state.SkipWithError("kernel not on this CPU");
  const auto type = static_cast<WeightType>(state.range(4));
  const bool tiled = state.range(5) == 2 || Int8SuperBlockType(type);  // Q4_K / Q6_K: tiles only
  GemmQuant(state, ActivationType::kInt8, tiled);
  cpu::RestoreInt8KernelChoice(previous);
  state.SetLabel(tiled ? std::string(kernel) + " tiles" : std::string(kernel));
}

#if PAGEDKV_HAVE_OPENBLAS
void BM_GemmOpenBlas(benchmark::State& state) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  const auto threads = static_cast<int>(state.range(3));
  openblas_set_num_threads(threads == 0 ? cpu::HardwareThreads() : threads);
  Operands o(m, n, k);
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(m), static_cast<int>(n),
                static_cast<int>(k), 1.0f, o.x.data(), static_cast<int>(k), o.w.data(),
                static_cast<int>(k), 0.0f, o.y.data(), static_cast<int>(n));
    benchmark::DoNotOptimize(o.y.data());
  }
  SetCounters(state, m, n, k);
}
#endif

// (n, k) of each model's projections and LM head.
void ModelShapes(benchmark::internal::Benchmark* b, bool with_threads) {
  const std::vector<std::pair<int64_t, int64_t>> shapes = {
      {64, 64},    {172, 64}, {64, 172},  {512, 64},   // aidreams260K: q/k/v/o, w1/w3, w2, head
      {128, 128},  {64, 128}, {384, 128}, {128, 384},  // TinyStories-656K: q/o, k/v, w1/w3, w2
      {2048, 128},                                     // TinyStories-656K LM head
      {4096, 4096}};                                   // a 4096-wide layer
  b->ArgNames({"m", "n", "k", "threads"});
  for (int64_t m : {1, 8, 32, 128}) {
    for (auto [n, k] : shapes) {
      b->Args({m, n, k, 1});
      if (with_threads && n * k >= 4096 * 4096) b->Args({m, n, k, 0});
    }
  }
  b->UseRealTime();
}

BENCHMARK(BM_GemmPlain)->Apply([](benchmark::internal::Benchmark* b) { ModelShapes(b, false); });
BENCHMARK(BM_GemmPagedkv)->Apply([](benchmark::internal::Benchmark* b) { ModelShapes(b, true); });
BENCHMARK(BM_GemmPacked)->Apply([](benchmark::internal::Benchmark* b) { ModelShapes(b, true); });
BENCHMARK(BM_GemmPacked)
    ->Name("BM_GemmPackedSmolLm2")
    ->Apply([](benchmark::internal::Benchmark* b) { SmolLm2Shapes(b, false); });
BENCHMARK(BM_GemmQuant)->Apply([](benchmark::internal::Benchmark* b) { SmolLm2Shapes(b, true); });
BENCHMARK(BM_GemmQuantInt8)->Apply([](benchmark::internal::Benchmark* b) {
  SmolLm2Shapes(b, true);
});
// Every other native type on SmolLM2's gate/up and down shapes (Q4_K / Q6_K need k a multiple
// of 256: down only), one thread; type is the WeightType value.
BENCHMARK(BM_GemmQuant)->Name("BM_GemmQuantTypes")->Apply([](benchmark::internal::Benchmark* b) {
  b->ArgNames({"m", "n", "k", "threads", "type"});
  for (int64_t m : {1, 16, 64}) {
    for (WeightType t : {WeightType::kQ4_0, WeightType::kF16, WeightType::kBF16, WeightType::kQ4_K,
                         WeightType::kQ6_K}) {
      const bool super = QuantBlockValuesOf(t) == kQuantSuperValues;
      if (!super) b->Args({m, 1536, 576, 1, static_cast<int64_t>(t)});
      b->Args({m, 576, 1536, 1, static_cast<int64_t>(t)});
    }
  }
  b->UseRealTime();
});
// The same with int8 activations from Int8Tiles (the engine's default where the VNNI kernel
// runs; elsewhere Q4_K / Q6_K keep fp32 activations and the label says "fp32 activations").
void BM_GemmQuantTypesInt8(benchmark::State& state) {
  GemmQuant(state, ActivationType::kInt8, /*tiled=*/true);
  const auto type = static_cast<WeightType>(state.range(4));
  state.SetLabel(cpu::Int8QuantLinearRuns(type, /*tiled=*/true) ? cpu::Int8KernelName()
                                                                : "fp32 activations");
}
BENCHMARK(BM_GemmQuantTypesInt8)->Apply([](benchmark::internal::Benchmark* b) {
  b->ArgNames({"m", "n", "k", "threads", "type"});
  for (int64_t m : {1, 16, 64}) {
    for (WeightType t : {WeightType::kQ4_0, WeightType::kQ4_K, WeightType::kQ6_K}) {
      b->Args({m, 576, 1536, 1, static_cast<int64_t>(t)});
    }
  }
  b->UseRealTime();
});
BENCHMARK(BM_GemmInt8Kernels)->Apply([](benchmark::internal::Benchmark* b) {
  b->ArgNames({"m", "n", "k", "threads", "type", "kernel"});
  for (int64_t m : {1, 2, 3, 4, 8, 16, 64, 256}) {
    for (auto [n, k] : std::vector<std::pair<int64_t, int64_t>>{{1536, 576}, {576, 1536}}) {
      for (int64_t kernel : {0, 1, 2}) {
        b->Args({m, n, k, 1, static_cast<int64_t>(WeightType::kQ4_1), kernel});
      }
    }
    for (int64_t kernel : {0, 1, 2}) {
      b->Args({m, 49152, 576, 1, static_cast<int64_t>(WeightType::kQ8_0), kernel});
    }
    for (WeightType t : {WeightType::kQ4_K, WeightType::kQ6_K}) {  // from tiles: avx2, vnni
      b->Args({m, 576, 1536, 1, static_cast<int64_t>(t), 0});
      b->Args({m, 576, 1536, 1, static_cast<int64_t>(t), 2});
    }
  }
  b->UseRealTime();
});
#if PAGEDKV_HAVE_OPENBLAS
BENCHMARK(BM_GemmOpenBlas)->Apply([](benchmark::internal::Benchmark* b) { ModelShapes(b, true); });
#endif

}  // namespace
}  // namespace pagedkv::bench

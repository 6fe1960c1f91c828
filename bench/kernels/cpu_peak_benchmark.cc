// Copyright 2026 The pagedkv Authors.
//
// This CPU's ceilings for the two instructions the decode step spends its time in, one core:
//   BM_PeakFma512    vfmadd231ps zmm (f32 attention: QK and PV are 8 of them per key and head
//                    at head_dim 64)
//   BM_PeakVnni512   vpdpbusd zmm (the int8 matmuls: 64 multiply-adds each)
//   BM_PeakVnni256   vpdpbusd ymm (the AVX-512 VNNI kernel's one-row path uses them)
// Twelve independent accumulators, so that latency never limits: the figure is the issue rate.
// Compare a kernel's multiply-adds per second with these (bench/RESULTS.md, "Kernels").
// Skipped on a CPU without AVX-512 VNNI.
//
//   build/bench/kernels/cpu_peak_benchmark
#include <immintrin.h>

#include <cstdint>

#include "benchmark/benchmark.h"

namespace pagedkv::bench {
namespace {

constexpr int kAccumulators = 12;
constexpr int64_t kRounds = 1 << 16;  // per iteration: kRounds * kAccumulators instructions

bool HasAvx512Vnni() {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
         __builtin_cpu_supports("avx512vnni");
}

// The operands pass through an empty asm each round, so the compiler cannot hoist or fold them.
__attribute__((target("avx512f"))) float Fma512Rounds() {
  __m512 acc[kAccumulators];
  for (int i = 0; i < kAccumulators; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i));
  __m512 a = _mm512_set1_ps(0.999f), b = _mm512_set1_ps(1e-3f);
  for (int64_t r = 0; r < kRounds; ++r) {
    for (int i = 0; i < kAccumulators; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
    asm volatile("" : "+v"(a), "+v"(b));
  }
  float sum = 0.0f;  // lane 0 of each: enough to keep the work
  for (int i = 0; i < kAccumulators; ++i) sum += _mm512_cvtss_f32(acc[i]);
  return sum;
}

__attribute__((target("avx512f,avx512vnni"))) int32_t Vnni512Rounds() {
  __m512i acc[kAccumulators];
  for (int i = 0; i < kAccumulators; ++i) acc[i] = _mm512_set1_epi32(i);
  __m512i u = _mm512_set1_epi32(0x01010101), s = _mm512_set1_epi32(0x02020202);
  for (int64_t r = 0; r < kRounds; ++r) {
    for (int i = 0; i < kAccumulators; ++i) acc[i] = _mm512_dpbusd_epi32(acc[i], u, s);
    asm volatile("" : "+v"(u), "+v"(s));
  }
  int32_t sum = 0;  // lane 0 of each (through memory: GCC 12 warns inside the cast intrinsics)
  alignas(64) int32_t lanes[16];
  for (int i = 0; i < kAccumulators; ++i) {
    _mm512_store_si512(lanes, acc[i]);
    sum += lanes[0];
  }
  return sum;
}

__attribute__((target("avx512f,avx512vl,avx512vnni"))) int32_t Vnni256Rounds() {
  __m256i acc[kAccumulators];
  for (int i = 0; i < kAccumulators; ++i) acc[i] = _mm256_set1_epi32(i);
  __m256i u = _mm256_set1_epi32(0x01010101), s = _mm256_set1_epi32(0x02020202);
  for (int64_t r = 0; r < kRounds; ++r) {
    for (int i = 0; i < kAccumulators; ++i) acc[i] = _mm256_dpbusd_epi32(acc[i], u, s);
    asm volatile("" : "+v"(u), "+v"(s));
  }
  int32_t sum = 0;
  for (int i = 0; i < kAccumulators; ++i) sum += _mm256_extract_epi32(acc[i], 0);
  return sum;
}

// Runs `rounds` per iteration; reports instructions/s and multiply-adds/s (`lanes` each).
template <typename Fn>
void RunPeak(benchmark::State& state, Fn rounds, double lanes) {
  if (!HasAvx512Vnni()) return state.SkipWithError("this CPU has no AVX-512 VNNI");
  for (auto _ : state) benchmark::DoNotOptimize(rounds());
  const double instructions = static_cast<double>(kRounds) * kAccumulators;
  state.counters["instr/s"] =
      benchmark::Counter(instructions, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["madd/s"] =
      benchmark::Counter(instructions * lanes, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_PeakFma512(benchmark::State& state) { RunPeak(state, Fma512Rounds, 16); }
void BM_PeakVnni512(benchmark::State& state) { RunPeak(state, Vnni512Rounds, 64); }
void BM_PeakVnni256(benchmark::State& state) { RunPeak(state, Vnni256Rounds, 32); }
BENCHMARK(BM_PeakFma512);
BENCHMARK(BM_PeakVnni512);
BENCHMARK(BM_PeakVnni256);

}  // namespace
}  // namespace pagedkv::bench

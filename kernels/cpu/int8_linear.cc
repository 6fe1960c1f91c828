// Copyright 2026 The pagedkv Authors.
//
// Int8QuantLinear: quantize x once (on the calling thread), then output columns in groups of 8
// over the pool (16 for the VNNI kernel), each group through the chosen kernel.
#include "kernels/cpu/int8_linear.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/cpu/thread_scratch.h"
#include "kernels/cpu/threaded_ops.h"
#include "pagedkv/kernels/int8_activations.h"
#include "pagedkv/kernels/quant_blocks.h"

namespace pagedkv::cpu {

namespace {

enum class Kernel : int { kAuto, kVnni, kAvx2, kPortable };
std::atomic<int> forced_kernel{static_cast<int>(Kernel::kAuto)};

// The kernel that runs: the forced one, else the best this CPU runs.
Kernel Chosen() {
  const auto forced = static_cast<Kernel>(forced_kernel.load(std::memory_order_relaxed));
  if (forced != Kernel::kAuto) return forced;
  if (int8_kernels::VnniSupported()) return Kernel::kVnni;
  return int8_kernels::Avx2Supported() ? Kernel::kAvx2 : Kernel::kPortable;
}

// A kernel's ForceInt8Kernel name. REQUIRES: kernel is not kAuto.
const char* KernelName(Kernel kernel) {
  switch (kernel) {
    case Kernel::kVnni:
      return "avx512vnni";
    case Kernel::kAvx2:
      return "avx2";
    default:
      return "portable";
  }
}

// Whether `kernel` multiplies tiles of `type` (the super-block types: the VNNI and AVX2 kernels).
bool ReadsTiles(Kernel kernel, WeightType type) {
  return kernel == Kernel::kVnni || (kernel == Kernel::kAvx2 && Int8SuperBlockType(type));
}

// Output columns per work item: the kernel's W rows per tile (16 for every tile it reads).
int64_t ColumnGroup(Kernel kernel, WeightType type, bool tiled) {
  return kernel == Kernel::kVnni || (tiled && ReadsTiles(kernel, type)) ? 16 : 8;
}

// The quantized x's buffer (ThreadScratch): the largest m * k of a step, about 1.25 bytes a value.
struct QuantizedXTag {};

// Work of quantizing one block, in ParallelFor's multiply-add units (MinItemsPerRange): about
// what 1,024 multiply-adds of the matmul cost, so that 8 rows of k = 576 go to two threads.
constexpr double kQuantizeWorkPerBlock = 1024;

// The arrays of a quantized x, writable (Int8Rows reads them).
struct Int8RowsOut {
  int8_t* q;
  float* scale;
  float* sum;
  int32_t* qsum;
  int32_t* qsum_lo;  // null unless W is Q6_K
};

// Blocks [begin, end) of x into `rows`.
void QuantizeBlocks(const QuantLinearArgs& a, const Int8RowsOut& rows, int64_t begin, int64_t end) {
  constexpr int64_t kValues = kQuantBlockValues;
  if (Chosen() != Kernel::kPortable) {  // the VNNI kernel runs on AVX2 CPUs only
    int8_kernels::Avx2QuantizeBlocks(a.x + begin * kValues, end - begin, rows.q + begin * kValues,
                                     rows.scale + begin, rows.qsum + begin);
  } else {
    for (int64_t b = begin; b < end; ++b) {
      QuantizeActivationBlock(a.x + b * kValues, rows.q + b * kValues, &rows.scale[b],
                              &rows.qsum[b]);
    }
  }
  for (int64_t b = begin; b < end; ++b) {
    rows.sum[b] = rows.scale[b] * static_cast<float>(rows.qsum[b]);
  }
  for (int64_t b = begin; rows.qsum_lo != nullptr && b < end; ++b) {
    int32_t lo = 0;
    for (int c = 0; c < 16; ++c) lo += rows.q[b * kValues + c];
    rows.qsum_lo[b] = lo;
  }
}

// Lays the quantized rows out in one buffer: q, then scale, sum, qsum and qsum_lo per block;
// the blocks are quantized over `pool`'s threads (each block alone: the same bits).
bool QuantizeX(const QuantLinearArgs& a, ThreadPool* pool, Int8Rows* rows) {
  const int64_t blocks = a.m * (a.k / kQuantBlockValues);
  const size_t q_bytes = static_cast<size_t>(a.m * a.k + 63) / 64 * 64;
  const size_t per_block = sizeof(float) * 2 + sizeof(int32_t) * 2;
  unsigned char* base =
      ThreadScratch<QuantizedXTag>(q_bytes + static_cast<size_t>(blocks) * per_block);
  if (base == nullptr) return false;
  auto* q = reinterpret_cast<int8_t*>(base);
  auto* scale = reinterpret_cast<float*>(base + q_bytes);
  auto* sum = scale + blocks;
  auto* qsum = reinterpret_cast<int32_t*>(sum + blocks);
  auto* qsum_lo = a.w_type == WeightType::kQ6_K ? qsum + blocks : nullptr;
  const Int8RowsOut out{.q = q, .scale = scale, .sum = sum, .qsum = qsum, .qsum_lo = qsum_lo};
  ParallelFor(pool, blocks, MinItemsPerRange(kQuantizeWorkPerBlock),
              [&](int64_t begin, int64_t end) { QuantizeBlocks(a, out, begin, end); });
  *rows = {.q = q,
           .scale = scale,
           .sum = sum,
           .qsum = qsum,
           .qsum_lo = qsum_lo,
           .blocks_per_row = a.k / kQuantBlockValues};
  return true;
}

// The chain of int8_activations.h for columns [j_begin, j_end), one output at a time.
void PortableColumns(const QuantLinearArgs& a, const Int8Rows& x, int64_t j_begin, int64_t j_end) {
  const int64_t blocks = x.blocks_per_row;
  for (int64_t i = 0; i < a.m; ++i) {
    for (int64_t j = j_begin; j < j_end; ++j) {
      const unsigned char* row = QuantRow(a.w, a.w_type, a.k, j);
      float acc = 0.0f;
      for (int64_t b = 0; b < blocks; ++b) {
        const int64_t xb = i * blocks + b;
        const int32_t isum = Int8RowBlockDot(a.w_type, row, b, x.q + xb * kQuantBlockValues);
        acc = Int8RowBlockAccumulate(a.w_type, row, b, x.scale[xb], x.sum[xb], isum, acc);
      }
      float* out = a.y + i * a.n + j;
      *out = a.accumulate ? *out + acc : acc;
    }
  }
}

}  // namespace

const char* Int8KernelName() { return KernelName(Chosen()); }

const char* ForcedInt8Kernel() {
  const auto forced = static_cast<Kernel>(forced_kernel.load(std::memory_order_relaxed));
  return forced == Kernel::kAuto ? "auto" : KernelName(forced);
}

bool Int8KernelReadsTiles(WeightType type) { return ReadsTiles(Chosen(), type); }

bool Int8QuantLinearRuns(WeightType type, bool tiled) {
  if (!Int8ActivationsSupport(type)) return false;
  if (!Int8SuperBlockType(type)) return true;
  const Kernel kernel = Chosen();
  return kernel == Kernel::kPortable || (tiled && ReadsTiles(kernel, type));
}

Int8KernelChoice CurrentInt8KernelChoice() {
  return static_cast<Int8KernelChoice>(forced_kernel.load(std::memory_order_relaxed));
}

void RestoreInt8KernelChoice(Int8KernelChoice choice) {
  forced_kernel.store(static_cast<int>(choice), std::memory_order_relaxed);
}

absl::Status ForceInt8Kernel(const char* name) {
  const std::string n = name == nullptr ? "" : name;
  Kernel k;
  if (n == "auto") {
    k = Kernel::kAuto;
  } else if (n == "portable") {
    k = Kernel::kPortable;
  } else if (n == "avx2") {
    if (!int8_kernels::Avx2Supported()) {
      return absl::InvalidArgumentError(
          "ForceInt8Kernel: this CPU lacks AVX2, FMA or F16C; use auto or portable");
    }
    k = Kernel::kAvx2;
  } else if (n == "avx512vnni") {
    if (!int8_kernels::VnniSupported()) {
      return absl::InvalidArgumentError(
          "ForceInt8Kernel: this CPU lacks AVX-512 VNNI (F, BW, VL, DQ, VNNI) or AVX2; use auto, "
          "avx2 or portable");
    }
    k = Kernel::kVnni;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "ForceInt8Kernel: unknown kernel '", n, "': expected auto, avx512vnni, avx2 or portable"));
  }
  forced_kernel.store(static_cast<int>(k), std::memory_order_relaxed);
  return absl::OkStatus();
}

absl::Status Int8QuantLinear(const QuantLinearArgs& args, ThreadPool* pool,
                             const Int8Tiles* tiles) {
  if (args.m == 0) return absl::OkStatus();
  Int8Rows x;
  if (!QuantizeX(args, pool, &x)) {
    return absl::ResourceExhaustedError(
        absl::StrCat("QuantLinear: cannot allocate the int8 copy of x (", args.m, " x ", args.k,
                     "); use ActivationType::kF32 or fewer rows per step"));
  }
  const Kernel kernel = Chosen();
  const int64_t group = ColumnGroup(kernel, args.w_type, tiles != nullptr);
  const int64_t groups = (args.n + group - 1) / group;
  const double work_per_group =
      static_cast<double>(group) * static_cast<double>(args.m) * static_cast<double>(args.k);
  ParallelFor(pool, groups, MinItemsPerRange(work_per_group), [&](int64_t begin, int64_t end) {
    const int64_t j_begin = begin * group;
    const int64_t j_end = std::min(args.n, end * group);
    if (Int8SuperBlockType(args.w_type) && tiles != nullptr && kernel != Kernel::kPortable) {
      if (kernel == Kernel::kVnni) {
        return int8_kernels::VnniTiledSuperColumns(args, x, *tiles, j_begin, j_end);
      }
      return int8_kernels::Avx2TiledSuperColumns(args, x, *tiles, j_begin, j_end);
    }
    if (Int8SuperBlockType(args.w_type)) return PortableColumns(args, x, j_begin, j_end);
    switch (kernel) {
      case Kernel::kVnni:
        if (tiles != nullptr)
          return int8_kernels::VnniTiledColumns(args, x, *tiles, j_begin, j_end);
        return int8_kernels::VnniColumns(args, x, j_begin, j_end);
      case Kernel::kAvx2:
        return int8_kernels::Avx2Columns(args, x, j_begin, j_end);
      default:
        return PortableColumns(args, x, j_begin, j_end);
    }
  });
  return absl::OkStatus();
}

}  // namespace pagedkv::cpu

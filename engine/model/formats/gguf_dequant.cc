// Copyright 2026 The pagedkv Authors.
//
// ggml's reference dequantizers, one function per block type (see gguf_dequant.h).
#include "engine/model/formats/gguf_dequant.h"

#include <cstdint>
#include <cstring>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "pagedkv/kernels/dtype_convert.h"

namespace pagedkv::model_internal {
namespace {

// ggml_type ids 0..39 as of GGUF v3; removed ids (4, 5: Q4_2, Q4_3) and the ones pagedkv does not
// convert are listed so errors can name them.
constexpr GgufTypeTraits kTypes[] = {
    {0, "F32", 1, 4, true},          {1, "F16", 1, 2, true},
    {2, "Q4_0", 32, 18, true},       {3, "Q4_1", 32, 20, true},
    {6, "Q5_0", 32, 22, false},      {7, "Q5_1", 32, 24, false},
    {8, "Q8_0", 32, 34, true},       {9, "Q8_1", 32, 36, false},
    {10, "Q2_K", 256, 84, false},    {11, "Q3_K", 256, 110, false},
    {12, "Q4_K", 256, 144, true},    {13, "Q5_K", 256, 176, false},
    {14, "Q6_K", 256, 210, true},    {15, "Q8_K", 256, 292, false},
    {16, "IQ2_XXS", 256, 66, false}, {17, "IQ2_XS", 256, 74, false},
    {18, "IQ3_XXS", 256, 98, false}, {19, "IQ1_S", 256, 50, false},
    {20, "IQ4_NL", 32, 18, false},   {21, "IQ3_S", 256, 110, false},
    {22, "IQ2_S", 256, 82, false},   {23, "IQ4_XS", 256, 136, false},
    {24, "I8", 1, 1, false},         {25, "I16", 1, 2, false},
    {26, "I32", 1, 4, false},        {27, "I64", 1, 8, false},
    {28, "F64", 1, 8, false},        {29, "IQ1_M", 256, 56, false},
    {30, "BF16", 1, 2, true},        {34, "TQ1_0", 256, 54, false},
    {35, "TQ2_0", 256, 66, false},   {39, "MXFP4", 32, 17, false},
};

uint16_t U16(const unsigned char* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
float F16At(const unsigned char* p) { return F16BitsToF32(U16(p)); }

void Plain(uint32_t id, const unsigned char* p, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    if (id == 0) {
      std::memcpy(&out[i], p + 4 * i, 4);
    } else {
      const uint16_t h = U16(p + 2 * i);
      out[i] = id == 1 ? F16BitsToF32(h) : BF16BitsToF32(h);
    }
  }
}

// Q4_0 (with_min false: x = (q - 8) d) and Q4_1 (x = q d + m), one 32-value block.
void Q4Block(const unsigned char* b, bool with_min, float* y) {
  const float d = F16At(b);
  const float m = with_min ? F16At(b + 2) : 0.0f;
  const unsigned char* qs = b + (with_min ? 4 : 2);
  const int offset = with_min ? 0 : 8;
  for (int j = 0; j < 16; ++j) {
    const int lo = (qs[j] & 0x0F) - offset, hi = (qs[j] >> 4) - offset;
    y[j] = static_cast<float>(lo) * d + m;
    y[j + 16] = static_cast<float>(hi) * d + m;
  }
}

void Q8Block(const unsigned char* b, float* y) {
  const float d = F16At(b);
  for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(static_cast<int8_t>(b[2 + j])) * d;
}

// The 6-bit scale and min of sub-block j (0..7) of a Q4_K super-block (ggml's get_scale_min_k4).
void ScaleMinK4(int j, const unsigned char* q, int* sc, int* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

void Q4KBlock(const unsigned char* b, float* y) {
  const float d = F16At(b), dmin = F16At(b + 2);
  const unsigned char* scales = b + 4;
  const unsigned char* q = b + 16;
  for (int half = 0; half < 4; ++half) {  // 64 values each: two sub-blocks of 32
    int sc1 = 0, m1 = 0, sc2 = 0, m2 = 0;
    ScaleMinK4(2 * half, scales, &sc1, &m1);
    ScaleMinK4(2 * half + 1, scales, &sc2, &m2);
    for (int l = 0; l < 32; ++l) {
      y[l] = d * static_cast<float>(sc1) * static_cast<float>(q[l] & 0x0F) -
             dmin * static_cast<float>(m1);
      y[l + 32] = d * static_cast<float>(sc2) * static_cast<float>(q[l] >> 4) -
                  dmin * static_cast<float>(m2);
    }
    y += 64;
    q += 32;
  }
}

void Q6KBlock(const unsigned char* b, float* y) {
  const unsigned char* ql = b;
  const unsigned char* qh = b + 128;
  const auto* sc = reinterpret_cast<const int8_t*>(b + 192);
  const float d = F16At(b + 208);
  for (int n = 0; n < 2; ++n) {  // 128 values each
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = ((ql[l] & 0x0F) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q2 = ((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      y[l] = d * static_cast<float>(sc[is + 0] * q1);
      y[l + 32] = d * static_cast<float>(sc[is + 2] * q2);
      y[l + 64] = d * static_cast<float>(sc[is + 4] * q3);
      y[l + 96] = d * static_cast<float>(sc[is + 6] * q4);
    }
    y += 128;
    ql += 64;
    qh += 32;
    sc += 8;
  }
}

}  // namespace

absl::StatusOr<const GgufTypeTraits*> GgufTypeInfo(uint32_t id) {
  for (const GgufTypeTraits& t : kTypes) {
    if (t.id == id) return &t;
  }
  return absl::InvalidArgumentError(
      absl::StrFormat("tensor type %u is not a ggml type this reader knows", id));
}

absl::Status DequantizeGguf(uint32_t id, std::string_view bytes, int64_t n, float* out) {
  absl::StatusOr<const GgufTypeTraits*> info = GgufTypeInfo(id);
  if (!info.ok()) return info.status();
  const GgufTypeTraits& t = **info;
  if (!t.supported) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "tensor type %s is not supported (F32, F16, BF16, Q4_0, Q4_1, Q8_0, Q4_K, Q6_K are)",
        t.name));
  }
  if (n < 0 || n % t.block_values != 0 ||
      static_cast<int64_t>(bytes.size()) / t.block_bytes != n / t.block_values ||
      static_cast<int64_t>(bytes.size()) % t.block_bytes != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%d values of type %s need whole blocks of %d values (%d bytes each); got %d bytes", n,
        t.name, t.block_values, t.block_bytes, bytes.size()));
  }
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  if (t.block_values == 1) {
    Plain(id, p, n, out);
    return absl::OkStatus();
  }
  for (int64_t blk = 0; blk < n / t.block_values; ++blk) {
    const unsigned char* b = p + blk * t.block_bytes;
    float* y = out + blk * t.block_values;
    switch (id) {
      case 2:
        Q4Block(b, /*with_min=*/false, y);
        break;
      case 3:
        Q4Block(b, /*with_min=*/true, y);
        break;
      case 8:
        Q8Block(b, y);
        break;
      case 12:
        Q4KBlock(b, y);
        break;
      default:
        Q6KBlock(b, y);
        break;  // 14, the only supported id left
    }
  }
  return absl::OkStatus();
}

}  // namespace pagedkv::model_internal

// Copyright 2026 The pagedkv Authors.
//
// A test-made GGUF writer (written from the format description in engine/model/formats/gguf_file.h,
// not from the reader) and a converter of test-made Hugging Face models (hf_test_model.h) into GGUF
// `llama` files: names mapped as llama.cpp's converter does, attn_q / attn_k rows permuted as its
// LlamaModel.permute does (reshape(heads, 2, hd/2, cols).swapaxes(1, 2)), 2-D weights stored as
// F32, F16, Q8_0 or Q4_1, norms as F32. Quantizing changes the weights, so the converter writes
// the dequantized values (computed here in float64 from the block formula) back into the model:
// its float64 reference then runs on exactly what the file holds.
//
// Example:
//   GgufWriter w;
//   w.Str("general.architecture", "llama");
//   w.Tensor("x", {32}, kGgufF32, F32Bytes(values));
//   WriteFile(path, w.Bytes());
#ifndef PAGEDKV_TESTS_ENGINE_MODEL_GGUF_TEST_WRITER_H_
#define PAGEDKV_TESTS_ENGINE_MODEL_GGUF_TEST_WRITER_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace pagedkv::testing {

inline constexpr uint32_t kGgufF32 = 0, kGgufF16 = 1, kGgufQ4_0 = 2, kGgufQ4_1 = 3, kGgufQ8_0 = 8,
                          kGgufQ4_K = 12, kGgufQ6_K = 14, kGgufBF16 = 30;

inline void PutF16(std::string* out, uint16_t h) {
  out->push_back(static_cast<char>(h & 0xFF));
  out->push_back(static_cast<char>(h >> 8));
}

// The value of IEEE half `h` (normal and subnormal; no inf / nan needed here).
inline double F16Value(uint16_t h) {
  const int e = (h >> 10) & 31, m = h & 1023;
  const double v = e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25);
  return (h & 0x8000) ? -v : v;
}

// The nearest half to x (round to nearest, ties away; |x| in the normal range or 0).
inline uint16_t NearestF16(double x) {
  if (x == 0.0) return 0;
  int e = 0;
  std::frexp(std::abs(x), &e);  // |x| in [2^(e-1), 2^e)
  const double step = std::ldexp(1.0, e - 1 - 10);
  double m = std::round(std::abs(x) / step);  // 1024 .. 2048
  if (m >= 2048) {
    m /= 2;
    ++e;
  }
  const auto bits = static_cast<uint16_t>(((e - 1 + 15) << 10) | (static_cast<int>(m) - 1024));
  return static_cast<uint16_t>((x < 0 ? 0x8000 : 0) | bits);
}

template <typename T>
void PutRaw(std::string* out, T v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof(T));
}

inline void PutStr(std::string* out, const std::string& s) {
  PutRaw<uint64_t>(out, s.size());
  *out += s;
}

class GgufWriter {
 public:
  // Metadata: the raw value bytes of `type` (any GGUF value type).
  void Raw(const std::string& key, uint32_t type, const std::string& value) {
    PutStr(&kv_, key);
    PutRaw<uint32_t>(&kv_, type);
    kv_ += value;
    ++n_kv_;
  }
  void U32(const std::string& key, uint32_t v) { Raw(key, 4, ValueBytes(v)); }
  void I32(const std::string& key, int32_t v) { Raw(key, 5, ValueBytes(v)); }
  void F32(const std::string& key, float v) { Raw(key, 6, ValueBytes(v)); }
  void Bool(const std::string& key, bool v) { Raw(key, 7, std::string(1, v ? '\1' : '\0')); }
  void Str(const std::string& key, const std::string& v) {
    std::string b;
    PutStr(&b, v);
    Raw(key, 8, b);
  }
  void StrArray(const std::string& key, const std::vector<std::string>& v) {
    std::string b;
    PutRaw<uint32_t>(&b, 8);
    PutRaw<uint64_t>(&b, v.size());
    for (const std::string& s : v) PutStr(&b, s);
    Raw(key, 9, b);
  }
  template <typename T>
  void NumArray(const std::string& key, uint32_t element_type, const std::vector<T>& v) {
    std::string b;
    PutRaw<uint32_t>(&b, element_type);
    PutRaw<uint64_t>(&b, v.size());
    for (T x : v) PutRaw<T>(&b, x);
    Raw(key, 9, b);
  }
  // A tensor with dims ne (ne[0] fastest) of ggml type `type` and data `data`.
  void Tensor(const std::string& name, const std::vector<int64_t>& ne, uint32_t type,
              const std::string& data) {
    tensors_.push_back({name, ne, type, data});
  }
  // The file: header, metadata, tensor infos, padding to `alignment`, aligned data.
  std::string Bytes(uint32_t alignment = 32, uint32_t version = 3) const {
    std::string out = "GGUF";
    PutRaw<uint32_t>(&out, version);
    PutRaw<uint64_t>(&out, tensors_.size());
    PutRaw<uint64_t>(&out, n_kv_);
    out += kv_;
    std::string data;
    for (const TensorData& t : tensors_) {
      data.resize((data.size() + alignment - 1) / alignment * alignment, '\0');
      PutStr(&out, t.name);
      PutRaw<uint32_t>(&out, static_cast<uint32_t>(t.ne.size()));
      for (int64_t d : t.ne) PutRaw<uint64_t>(&out, static_cast<uint64_t>(d));
      PutRaw<uint32_t>(&out, t.type);
      PutRaw<uint64_t>(&out, data.size());
      data += t.data;
    }
    out.resize((out.size() + alignment - 1) / alignment * alignment, '\0');
    return out + data;
  }

 private:
  template <typename T>
  static std::string ValueBytes(T v) {
    return std::string(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  struct TensorData {
    std::string name;
    std::vector<int64_t> ne;
    uint32_t type;
    std::string data;
  };
  std::string kv_;
  uint64_t n_kv_ = 0;
  std::vector<TensorData> tensors_;
};

// Q4_0, one block of 32 (ggml's quantize_row_q4_0): d = max / -8 of the value of largest
// magnitude, x = (q - 8) d with q in [0, 15]; x[] replaced by the stored values.
inline void EncodeQ4_0Block(double* x, std::string* out) {
  double max = 0;
  for (int j = 0; j < 32; ++j) max = std::abs(x[j]) > std::abs(max) ? x[j] : max;
  const uint16_t dh = NearestF16(max / -8.0);
  const double d = F16Value(dh);
  PutF16(out, dh);
  int q[32];
  for (int j = 0; j < 32; ++j) {
    q[j] = d == 0 ? 8 : std::clamp(static_cast<int>(std::lround(x[j] / d)) + 8, 0, 15);
    x[j] = (q[j] - 8) * d;
  }
  for (int j = 0; j < 16; ++j) out->push_back(static_cast<char>(q[j] | (q[j + 16] << 4)));
}

// Q4_K, one super-block of 256: per sub-block of 32 a 6-bit scale sc and min m of the f16 d and
// dmin, x = d sc q - dmin m with q in [0, 15]; scales packed as ggml's get_scale_min_k4 reads them.
inline void EncodeQ4KSuper(double* x, std::string* out) {
  double scale[8], min[8], max_scale = 0, max_min = 0;
  for (int s = 0; s < 8; ++s) {
    const auto [lo, hi] = std::minmax_element(x + 32 * s, x + 32 * s + 32);
    min[s] = std::max(0.0, -*lo);
    scale[s] = (*hi + min[s]) / 15.0;
    max_scale = std::max(max_scale, scale[s]);
    max_min = std::max(max_min, min[s]);
  }
  const uint16_t dh = NearestF16(max_scale / 63.0), mh = NearestF16(max_min / 63.0);
  const double d = F16Value(dh), dmin = F16Value(mh);
  int sc[8], m[8];
  unsigned char b[144] = {};
  for (int s = 0; s < 8; ++s) {
    sc[s] = d == 0 ? 0 : std::clamp(static_cast<int>(std::lround(scale[s] / d)), 0, 63);
    m[s] = dmin == 0 ? 0 : std::clamp(static_cast<int>(std::lround(min[s] / dmin)), 0, 63);
    for (int l = 0; l < 32; ++l) {
      double& v = x[32 * s + l];
      const double step = d * sc[s];
      const int q =
          step == 0 ? 0
                    : std::clamp(static_cast<int>(std::lround((v + dmin * m[s]) / step)), 0, 15);
      v = step * q - dmin * m[s];
      b[16 + 32 * (s / 2) + l] |= static_cast<unsigned char>(q << (4 * (s % 2)));
    }
  }
  for (int s = 0; s < 4; ++s) {
    b[4 + s] = static_cast<unsigned char>(sc[s] | ((sc[s + 4] >> 4) << 6));
    b[8 + s] = static_cast<unsigned char>(m[s] | ((m[s + 4] >> 4) << 6));
    b[12 + s] = static_cast<unsigned char>((sc[s + 4] & 15) | ((m[s + 4] & 15) << 4));
  }
  b[0] = static_cast<unsigned char>(dh & 0xFF), b[1] = static_cast<unsigned char>(dh >> 8);
  b[2] = static_cast<unsigned char>(mh & 0xFF), b[3] = static_cast<unsigned char>(mh >> 8);
  out->append(reinterpret_cast<const char*>(b), sizeof(b));
}

// Q6_K, one super-block of 256: an int8 scale per 16 values of the f16 d, x = d sc (q - 32) with
// q in [0, 63]; value j's low nibble in byte 64 (j / 128) + j % 32 + 32 ((j / 32) % 2) (high
// nibble from j % 128 >= 64), its top two bits in byte 128 + 32 (j / 128) + j % 32.
inline void EncodeQ6KSuper(double* x, std::string* out) {
  double scale[16], max_scale = 0;
  for (int s = 0; s < 16; ++s) {
    double amax = 0;
    for (int l = 0; l < 16; ++l) amax = std::max(amax, std::abs(x[16 * s + l]));
    scale[s] = amax / 31.0;
    max_scale = std::max(max_scale, scale[s]);
  }
  const uint16_t dh = NearestF16(max_scale / 127.0);
  const double d = F16Value(dh);
  unsigned char b[210] = {};
  for (int s = 0; s < 16; ++s) {
    const int sc = d == 0 ? 0 : std::clamp(static_cast<int>(std::lround(scale[s] / d)), 0, 127);
    b[192 + s] = static_cast<unsigned char>(sc);
    for (int l = 0; l < 16; ++l) {
      const int j = 16 * s + l, half = j / 128, quarter = (j % 128) / 32, at = j % 32;
      const double step = d * sc;
      const int q = step == 0 ? 0 : std::clamp(static_cast<int>(std::lround(x[j] / step)), -32, 31);
      x[j] = step * q;
      const int u = q + 32;
      b[64 * half + at + 32 * (quarter % 2)] |=
          static_cast<unsigned char>((u & 15) << (quarter < 2 ? 0 : 4));
      b[128 + 32 * half + at] |= static_cast<unsigned char>((u >> 4) << (2 * quarter));
    }
  }
  b[208] = static_cast<unsigned char>(dh & 0xFF), b[209] = static_cast<unsigned char>(dh >> 8);
  out->append(reinterpret_cast<const char*>(b), sizeof(b));
}

// Encodes `v` as `type`, replacing each value with what the file then holds (float64).
// REQUIRES: v.size() a multiple of the type's block values (32 for Q4_0 / Q4_1 / Q8_0, 256 for
// Q4_K / Q6_K).
inline std::string EncodeGgufTensor(uint32_t type, std::vector<double>* v) {
  std::string out;
  if (type == kGgufF32) {
    for (double& x : *v) {
      const auto f = static_cast<float>(x);
      PutRaw<float>(&out, f);
      x = f;
    }
    return out;
  }
  if (type == kGgufF16) {
    for (double& x : *v) {
      const uint16_t h = NearestF16(x);
      PutF16(&out, h);
      x = F16Value(h);
    }
    return out;
  }
  if (type == kGgufBF16) {  // the top half of the fp32 value (truncated)
    for (double& x : *v) {
      uint32_t bits = 0;
      const auto f = static_cast<float>(x);
      std::memcpy(&bits, &f, sizeof(bits));
      bits &= 0xFFFF0000u;
      PutF16(&out, static_cast<uint16_t>(bits >> 16));
      float back = 0;
      std::memcpy(&back, &bits, sizeof(back));
      x = back;
    }
    return out;
  }
  if (type == kGgufQ4_K || type == kGgufQ6_K) {
    for (size_t b = 0; b < v->size(); b += 256) {
      if (type == kGgufQ4_K) {
        EncodeQ4KSuper(v->data() + b, &out);
      } else {
        EncodeQ6KSuper(v->data() + b, &out);
      }
    }
    return out;
  }
  for (size_t b = 0; b < v->size(); b += 32) {
    double* x = v->data() + b;
    if (type == kGgufQ4_0) {
      EncodeQ4_0Block(x, &out);
      continue;
    }
    const auto [lo, hi] = std::minmax_element(x, x + 32);
    if (type == kGgufQ8_0) {  // x = q d, q in [-127, 127]
      const double amax = std::max(std::abs(*lo), std::abs(*hi));
      const uint16_t dh = NearestF16(amax / 127.0);
      const double d = F16Value(dh);
      PutF16(&out, dh);
      for (int j = 0; j < 32; ++j) {
        const int q = d == 0 ? 0 : std::clamp(static_cast<int>(std::lround(x[j] / d)), -127, 127);
        out.push_back(static_cast<char>(static_cast<int8_t>(q)));
        x[j] = q * d;
      }
    } else {  // Q4_1: x = q d + m, q in [0, 15]; byte j holds values j (low) and j + 16 (high)
      const uint16_t dh = NearestF16((*hi - *lo) / 15.0), mh = NearestF16(*lo);
      const double d = F16Value(dh), m = F16Value(mh);
      PutF16(&out, dh);
      PutF16(&out, mh);
      int q[32];
      for (int j = 0; j < 32; ++j) {
        q[j] = d == 0 ? 0 : std::clamp(static_cast<int>(std::lround((x[j] - m) / d)), 0, 15);
        x[j] = q[j] * d + m;
      }
      for (int j = 0; j < 16; ++j) out.push_back(static_cast<char>(q[j] | (q[j + 16] << 4)));
    }
  }
  return out;
}

// llama.cpp's converter permutation of Q / K rows: GGUF row h*hd + 2i + s = HF row
// h*hd + s*hd/2 + i.
inline std::vector<double> PermuteQk(const std::vector<double>& w, int64_t rows, int64_t cols,
                                     int head_dim) {
  std::vector<double> out(w.size());
  const int half = head_dim / 2;
  for (int64_t h = 0; h < rows / head_dim; ++h) {
    for (int i = 0; i < half; ++i) {
      for (int s = 0; s < 2; ++s) {
        const int64_t dst = h * head_dim + 2 * i + s, src = h * head_dim + s * half + i;
        std::copy(w.begin() + src * cols, w.begin() + (src + 1) * cols, out.begin() + dst * cols);
      }
    }
  }
  return out;
}

// The inverse of PermuteQk.
inline std::vector<double> InversePermuteQk(const std::vector<double>& w, int64_t rows,
                                            int64_t cols, int head_dim) {
  std::vector<double> out(w.size());
  const int half = head_dim / 2;
  for (int64_t h = 0; h < rows / head_dim; ++h) {
    for (int i = 0; i < half; ++i) {
      for (int s = 0; s < 2; ++s) {
        const int64_t src = h * head_dim + 2 * i + s, dst = h * head_dim + s * half + i;
        std::copy(w.begin() + src * cols, w.begin() + (src + 1) * cols, out.begin() + dst * cols);
      }
    }
  }
  return out;
}

inline void WriteGgufFile(const std::filesystem::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace pagedkv::testing

#endif  // PAGEDKV_TESTS_ENGINE_MODEL_GGUF_TEST_WRITER_H_

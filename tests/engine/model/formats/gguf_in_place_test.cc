// Copyright 2026 The pagedkv Authors.
//
// GGUF matrices read in place (NativeWeightParts::in_place): with native storage the loader keeps
// every block-format matrix whose rows it does not reorder in the file's read-only mapping (Q / K,
// un-permuted, are copies) and gives back the mapping's other pages; ReleaseInPlaceRows lets a
// matrix's pages go and a later read maps the same bytes back; a runner with int8 activations
// does that for the matrices the int8 kernel reads from its tiles, and the rows then still give
// fp32 activations the same bits; a table tied to the LM head is gathered from its tiles, so its
// pages stay out.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/model/formats/gguf_checkpoint.h"
#include "engine/model/formats/gguf_file.h"
#include "engine/model/runner/model_runner.h"
#include "gtest/gtest.h"
#include "kernels/cpu/int8_tiles.h"
#include "pagedkv/model/model_source.h"
#include "tests/engine/model/gguf_test_model.h"
#include "tests/engine/model/hf_test_model.h"
#include "tests/engine/model/prefill_util.h"

namespace pagedkv {
namespace {

using ::pagedkv::testing::AllRows;
using ::pagedkv::testing::HfTestModel;
using ::pagedkv::testing::HfTestSpec;
using ::pagedkv::testing::kGgufF32;
using ::pagedkv::testing::kGgufQ8_0;
using ::pagedkv::testing::MakeHfTestModel;
using ::pagedkv::testing::PrefillLogits;
using ::pagedkv::testing::WriteGgufModel;

// dim 256: w1 is 256 x 256 Q8_0, 68 KiB, so it spans whole pages; 16-row tiles fit every matrix.
// tied: the embedding is the LM head (one matrix, tiled for the LM head).
HfTestSpec Spec(bool tied) {
  HfTestSpec s;
  s.dim = 256;
  s.hidden = 256;
  if (tied) {
    s.tie = true;
    s.stored_tied = "model.embed_tokens.weight";
  }
  return s;
}

std::shared_ptr<const ModelWeights> Load(uint32_t type, const std::string& name,
                                         WeightStorage storage = WeightStorage::kNative,
                                         bool tied = false) {
  HfTestModel model = MakeHfTestModel(Spec(tied), 7);
  absl::StatusOr<LoadedModel> loaded =
      LoadModel(WriteGgufModel(&model, type, name).string(), {.weights = storage});
  EXPECT_TRUE(loaded.ok()) << loaded.status();
  return loaded.ok() ? loaded->weights : nullptr;
}

// Of the whole pages inside [p, p + bytes): how many are mapped in this process
// (/proc/self/pagemap, bit 63); nullopt when pagemap cannot be read here.
std::optional<int64_t> PresentPages(const void* p, int64_t bytes) {
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(p);
  const int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::optional<int64_t> present = 0;
  for (uintptr_t at = (begin + page - 1) / page; (at + 1) * page <= begin + bytes; ++at) {
    uint64_t entry = 0;
    if (pread(fd, &entry, sizeof(entry), static_cast<off_t>(at * sizeof(entry))) !=
        static_cast<ssize_t>(sizeof(entry))) {
      present = std::nullopt;
      break;
    }
    *present += static_cast<int64_t>(entry >> 63);
  }
  close(fd);
  return present;
}

int64_t Bytes(const NativeMatrix& m, int64_t rows, int64_t cols) {
  return rows * WeightRowBytes(m.type, cols);
}

TEST(GgufInPlaceTest, UnreorderedMatricesStayInTheFileAndTheirPagesComeBackTheSame) {
  std::shared_ptr<const ModelWeights> w = Load(kGgufQ8_0, "in_place_q8_0");
  ASSERT_NE(w, nullptr);
  const ModelConfig& c = w->config();
  const LayerWeights& l0 = w->layer(0);
  ASSERT_EQ(l0.native_w1.type, WeightType::kQ8_0);
  const int64_t w1_bytes = Bytes(l0.native_w1, c.hidden_dim, c.dim);
  ASSERT_GE(w1_bytes, 8 * sysconf(_SC_PAGESIZE));
  // In place: the embedding, the LM head and, per layer, v, o, w1, w2, w3 (the file's bytes).
  const int64_t per_layer =
      Bytes(l0.native_wv, c.kv_dim(), c.dim) + Bytes(l0.native_wo, c.dim, c.q_dim()) + 3 * w1_bytes;
  const int64_t table = Bytes(w->native_token_embedding(), c.vocab_size, c.dim);
  ASSERT_FALSE(c.shared_classifier);  // output.weight: in place too
  EXPECT_EQ(w->in_place_bytes(), 2 * table + c.n_layers * per_layer);
  EXPECT_GT(w->weight_bytes(), w->in_place_bytes());

  const auto* rows = static_cast<const unsigned char*>(l0.native_w1.data);
  const std::vector<unsigned char> before(rows, rows + w1_bytes);
  absl::StatusOr<bool> released = w->ReleaseInPlaceRows(rows, w1_bytes);
  ASSERT_TRUE(released.ok()) << released.status();
  EXPECT_TRUE(*released);
  const std::optional<int64_t> present = PresentPages(rows, w1_bytes);
  if (present.has_value()) {
    EXPECT_EQ(*present, 0) << "w1's pages stayed resident";
  }
  EXPECT_EQ(std::memcmp(before.data(), rows, before.size()), 0);  // read back from the file
  if (present.has_value()) {
    EXPECT_GT(*PresentPages(rows, w1_bytes), 0);
  }

  // Q / K are un-permuted copies: never released. Nor anything outside one in-place matrix.
  const int64_t q_bytes = Bytes(l0.native_wq, c.q_dim(), c.dim);
  EXPECT_FALSE(*w->ReleaseInPlaceRows(l0.native_wq.data, q_bytes));
  EXPECT_FALSE(*w->ReleaseInPlaceRows(rows, w1_bytes + 1));
  EXPECT_FALSE(*w->ReleaseInPlaceRows(nullptr, 0));
}

// The loader gives back the pages it will not read again: the header and the Q / K tensors it
// copied; the in-place matrices stay as loaded (their rows were read to check them).
TEST(GgufInPlaceTest, TheLoaderLetsGoOfWhatItCopied) {
  HfTestModel model = MakeHfTestModel(Spec(/*tied=*/false), 7);
  absl::StatusOr<model_internal::GgufFile> f =
      model_internal::GgufFile::Open(WriteGgufModel(&model, kGgufQ8_0, "in_place_loader").string());
  ASSERT_TRUE(f.ok()) << f.status();
  const model_internal::GgufTensorInfo* q = f->FindTensor("blk.0.attn_q.weight");
  ASSERT_NE(q, nullptr);
  const std::string_view q_bytes = f->TensorBytes(*q);
  if (!PresentPages(q_bytes.data(), static_cast<int64_t>(q_bytes.size())).has_value()) {
    GTEST_SKIP() << "/proc/self/pagemap cannot be read here";
  }
  absl::StatusOr<ModelWeights> w = model_internal::LoadGgufWeights(*f, WeightStorage::kNative);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(*PresentPages(q_bytes.data(), static_cast<int64_t>(q_bytes.size())), 0);
  int64_t data_start = f->tensors().front().begin;
  for (const model_internal::GgufTensorInfo& t : f->tensors()) {
    data_start = std::min(data_start, t.begin);
  }
  EXPECT_EQ(*PresentPages(f->bytes().data(), data_start), 0);  // the header
  const NativeMatrix& w1 = w->layer(0).native_w1;
  const int64_t w1_bytes = Bytes(w1, w->config().hidden_dim, w->config().dim);
  EXPECT_GT(*PresentPages(w1.data, w1_bytes), 0);
}

TEST(GgufInPlaceTest, F32StorageKeepsNothingInPlace) {
  std::shared_ptr<const ModelWeights> w = Load(kGgufQ8_0, "in_place_f32", WeightStorage::kF32);
  ASSERT_NE(w, nullptr);
  EXPECT_FALSE(w->has_native());
  EXPECT_EQ(w->in_place_bytes(), 0);
  std::shared_ptr<const ModelWeights> f32_file = Load(kGgufF32, "in_place_f32_file");
  ASSERT_NE(f32_file, nullptr);
  EXPECT_EQ(f32_file->in_place_bytes(), 0);
}

absl::StatusOr<std::unique_ptr<ModelRunner>> Runner(std::shared_ptr<const ModelWeights> w,
                                                    ActivationType activations) {
  return ModelRunner::Create(std::move(w), {.backend = BackendKind::kCpu,
                                            .num_blocks = 16,
                                            .block_size = 4,
                                            .activations = activations});
}

// A runner with int8 activations lets the pages of the matrices it reads from tiles go; fp32
// activations over the same weights then read those rows back, bit for bit what they give over
// weights whose pages never went.
TEST(GgufInPlaceTest, Int8RunnerReleasesTiledRowsAndTheyStillGiveTheSameBits) {
  if (!cpu::Int8TilesUsable(WeightType::kQ8_0, 256, 256)) {
    GTEST_SKIP() << "the int8 kernel here reads no tiles (no AVX-512 VNNI)";
  }
  std::shared_ptr<const ModelWeights> w = Load(kGgufQ8_0, "in_place_runner");
  std::shared_ptr<const ModelWeights> untouched = Load(kGgufQ8_0, "in_place_runner_control");
  ASSERT_NE(w, nullptr);
  ASSERT_NE(untouched, nullptr);
  const ModelConfig& c = w->config();
  const NativeMatrix& w1 = w->layer(1).native_w1;
  const std::optional<int64_t> loaded = PresentPages(w1.data, Bytes(w1, c.hidden_dim, c.dim));
  if (!loaded.has_value()) GTEST_SKIP() << "/proc/self/pagemap cannot be read here";
  EXPECT_GT(*loaded, 0);  // the loader read every row (its finite check)

  absl::StatusOr<std::unique_ptr<ModelRunner>> int8 = Runner(w, ActivationType::kInt8);
  ASSERT_TRUE(int8.ok()) << int8.status();
  EXPECT_EQ(*PresentPages(w1.data, Bytes(w1, c.hidden_dim, c.dim)), 0);

  std::vector<TokenId> ids(12);
  for (size_t t = 0; t < ids.size(); ++t) ids[t] = static_cast<TokenId>((t * 13 + 5) % 64);
  for (ActivationType act : {ActivationType::kF32, ActivationType::kInt8}) {
    absl::StatusOr<std::unique_ptr<ModelRunner>> a = Runner(w, act);
    absl::StatusOr<std::unique_ptr<ModelRunner>> b = Runner(untouched, act);
    ASSERT_TRUE(a.ok() && b.ok());
    absl::StatusOr<std::vector<float>> got = PrefillLogits(**a, ids, AllRows(ids.size()));
    absl::StatusOr<std::vector<float>> want = PrefillLogits(**b, ids, AllRows(ids.size()));
    ASSERT_TRUE(got.ok() && want.ok());
    EXPECT_EQ(*got, *want);
  }
}

// The embedding gather of a table tied to the LM head copies the rows from the LM head's tiles:
// after a prefill the table's pages are still out, and the logits are those of weights whose
// pages never went.
TEST(GgufInPlaceTest, TiedTableIsGatheredFromTheTilesAndStaysOut) {
  if (!cpu::Int8TilesUsable(WeightType::kQ8_0, 64, 256)) {
    GTEST_SKIP() << "the int8 kernel here reads no tiles (no AVX-512 VNNI)";
  }
  std::shared_ptr<const ModelWeights> w =
      Load(kGgufQ8_0, "in_place_tied", WeightStorage::kNative, /*tied=*/true);
  std::shared_ptr<const ModelWeights> untouched =
      Load(kGgufQ8_0, "in_place_tied_control", WeightStorage::kNative, /*tied=*/true);
  ASSERT_NE(w, nullptr);
  ASSERT_NE(untouched, nullptr);
  const ModelConfig& c = w->config();
  ASSERT_TRUE(c.shared_classifier);
  const NativeMatrix& table = w->native_token_embedding();
  const int64_t table_bytes = Bytes(table, c.vocab_size, c.dim);
  if (!PresentPages(table.data, table_bytes).has_value()) {
    GTEST_SKIP() << "/proc/self/pagemap cannot be read here";
  }
  absl::StatusOr<std::unique_ptr<ModelRunner>> a = Runner(w, ActivationType::kInt8);
  absl::StatusOr<std::unique_ptr<ModelRunner>> b = Runner(untouched, ActivationType::kInt8);
  ASSERT_TRUE(a.ok() && b.ok());
  std::vector<TokenId> ids(16);
  for (size_t t = 0; t < ids.size(); ++t) ids[t] = static_cast<TokenId>((t * 37 + 1) % 64);
  absl::StatusOr<std::vector<float>> got = PrefillLogits(**a, ids, AllRows(ids.size()));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*PresentPages(table.data, table_bytes), 0) << "the gather read the table's rows";
  absl::StatusOr<std::vector<float>> want = PrefillLogits(**b, ids, AllRows(ids.size()));
  ASSERT_TRUE(want.ok()) << want.status();
  EXPECT_EQ(*got, *want);
}

}  // namespace
}  // namespace pagedkv

// Copyright 2026 The pagedkv Authors.
//
// Test-made Hugging Face models (hf_test_model.h) written as GGUF `llama` files with
// gguf_test_writer.h: the tensor names of llama.cpp's converter, Q / K rows permuted as it does,
// 2-D weights in one chosen type (norms F32). The model's tensors are replaced by what the file
// holds, so HfTestModel::Logits is the float64 reference of the file.
//
// Example:
//   HfTestModel m = MakeHfTestModel({.hidden = 64}, 3);
//   std::filesystem::path p = WriteGgufModel(&m, kGgufQ4_1, "q4_1");
#ifndef PAGEDKV_TESTS_ENGINE_MODEL_GGUF_TEST_MODEL_H_
#define PAGEDKV_TESTS_ENGINE_MODEL_GGUF_TEST_MODEL_H_

#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "tests/engine/model/gguf_test_writer.h"
#include "tests/engine/model/hf_test_model.h"
#include "tests/test_temp_dir.h"

namespace pagedkv::testing {

// The llama metadata of `m` (no tokenizer).
inline void AddLlamaMetadata(const HfTestModel& m, GgufWriter* w) {
  const HfTestSpec& s = m.spec;
  w->Str("general.architecture", "llama");
  w->U32("llama.context_length", static_cast<uint32_t>(s.max_pos));
  w->U32("llama.embedding_length", static_cast<uint32_t>(s.dim));
  w->U32("llama.block_count", static_cast<uint32_t>(s.layers));
  w->U32("llama.feed_forward_length", static_cast<uint32_t>(s.hidden));
  w->U32("llama.attention.head_count", static_cast<uint32_t>(s.heads));
  w->U32("llama.attention.head_count_kv", static_cast<uint32_t>(s.kv_heads));
  w->F32("llama.rope.freq_base", static_cast<float>(s.theta));
  w->F32("llama.attention.layer_norm_rms_epsilon", static_cast<float>(s.eps));
  w->U32("llama.rope.dimension_count", static_cast<uint32_t>(m.head_dim()));
  if (s.head_dim > 0) {  // a head width of its own, as llama.cpp writes for such models
    w->U32("llama.attention.key_length", static_cast<uint32_t>(s.head_dim));
    w->U32("llama.attention.value_length", static_cast<uint32_t>(s.head_dim));
  }
  w->U32("llama.vocab_size", static_cast<uint32_t>(s.vocab));
  if (!s.rope_scaling.is_null()) {
    w->Str("llama.rope.scaling.type", s.rope_scaling.value("type", std::string("linear")));
    w->F32("llama.rope.scaling.factor", s.rope_scaling.value("factor", 1.0f));
  }
}

// Adds HF tensor `hf` as GGUF tensor `name`, 2-D ones as `type` (qk_heads > 0: permuted).
inline void AddGgufTensor(HfTestModel* m, const std::string& hf, const std::string& name,
                          uint32_t type, GgufWriter* w, bool permute_qk = false) {
  HfTestTensor& t = m->tensors.at(hf);
  const bool vec = t.shape.size() == 1;
  std::vector<double> stored =
      permute_qk ? PermuteQk(t.values, t.shape[0], t.shape[1], m->head_dim()) : t.values;
  const std::string bytes = EncodeGgufTensor(vec ? kGgufF32 : type, &stored);
  t.values = permute_qk ? InversePermuteQk(stored, t.shape[0], t.shape[1], m->head_dim()) : stored;
  const std::vector<int64_t> ne =
      vec ? std::vector<int64_t>{t.shape[0]} : std::vector<int64_t>{t.shape[1], t.shape[0]};
  w->Tensor(name, ne, vec ? kGgufF32 : type, bytes);
}

inline void AddLlamaTensors(HfTestModel* m, uint32_t type, GgufWriter* w) {
  const HfTestSpec& s = m->spec;
  AddGgufTensor(m, s.tie ? s.stored_tied : "model.embed_tokens.weight", "token_embd.weight", type,
                w);
  AddGgufTensor(m, "model.norm.weight", "output_norm.weight", kGgufF32, w);
  if (!s.tie) AddGgufTensor(m, "lm_head.weight", "output.weight", type, w);
  const std::pair<const char*, const char*> names[] = {
      {"input_layernorm.weight", "attn_norm"},    {"self_attn.q_proj.weight", "attn_q"},
      {"self_attn.k_proj.weight", "attn_k"},      {"self_attn.v_proj.weight", "attn_v"},
      {"self_attn.o_proj.weight", "attn_output"}, {"post_attention_layernorm.weight", "ffn_norm"},
      {"mlp.gate_proj.weight", "ffn_gate"},       {"mlp.up_proj.weight", "ffn_up"},
      {"mlp.down_proj.weight", "ffn_down"}};
  for (int l = 0; l < s.layers; ++l) {
    for (const auto& [hf, gg] : names) {
      const std::string n = gg;
      AddGgufTensor(m, m->L(l, hf), "blk." + std::to_string(l) + "." + n + ".weight", type, w,
                    n == "attn_q" || n == "attn_k");
    }
  }
}

// Writes `m` as a GGUF file under the temp dir (after `extra` metadata) and returns its path.
inline std::filesystem::path WriteGgufModel(HfTestModel* m, uint32_t type, const std::string& name,
                                            GgufWriter w = {}) {
  AddLlamaMetadata(*m, &w);
  AddLlamaTensors(m, type, &w);
  const auto path = TestTempDir() / ("gguf_" + name + ".gguf");
  WriteGgufFile(path, w.Bytes());
  return path;
}

}  // namespace pagedkv::testing

#endif  // PAGEDKV_TESTS_ENGINE_MODEL_GGUF_TEST_MODEL_H_

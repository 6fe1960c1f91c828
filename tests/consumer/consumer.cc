// Copyright 2026 The pagedkv Authors.
//
// An out-of-tree program over pagedkv's public headers only: a KvCacheManager with an event
// listener, a kernel called on the program's own buffers, and an Engine on a tiny llama2.c model
// that this program writes. Exits 0 and prints "consumer: OK" when every check holds.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "pagedkv/cache/kv_cache_manager.h"
#include "pagedkv/kernels/cpu_ops.h"
#include "pagedkv/runtime/engine.h"
#include "pagedkv/version.h"

namespace {

int failures = 0;

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "consumer: FAILED: %s\n", what);
    ++failures;
  }
}

void CheckCache() {
  auto manager = pagedkv::KvCacheManager::Create(
      {.num_blocks = 16, .block_size = 4, .model_fingerprint = "consumer"});
  Check(manager.ok(), "KvCacheManager::Create");
  if (!manager.ok()) return;
  int stored = 0;
  (*manager)->AddEventListener([&](const pagedkv::KvEvent& e) {
    if (e.type == pagedkv::KvEventType::kBlockStored) ++stored;
  });
  std::vector<pagedkv::TokenId> prompt = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  for (pagedkv::RequestId id : {1, 2}) {
    auto request = (*manager)->NewRequest(id, prompt);
    Check(request.ok(), "NewRequest");
    if (!request.ok()) return;
    auto hit = (*manager)->GetComputedBlocks(*request);
    Check(hit.ok(), "GetComputedBlocks");
    if (!hit.ok()) return;
    if (id == 2) Check(hit->num_computed_tokens == 8, "second request hits two cached blocks");
    Check((*manager)
              ->AllocateSlots(*request, request->num_tokens() - hit->num_computed_tokens, *hit)
              .ok(),
          "AllocateSlots");
    Check((*manager)->Free(id).ok(), "Free");
  }
  Check(stored == 2, "two BlockStored events");
  Check(absl::IsNotFound((*manager)->Free(99)), "Free of an unknown request is NotFound");
}

void CheckKernel() {
  std::vector<float> x = {3.0f, 4.0f}, weight = {1.0f, 1.0f}, out(2);
  absl::Status status = pagedkv::cpu::RmsNorm(
      {.x = x.data(), .weight = weight.data(), .out = out.data(), .num_rows = 1, .dim = 2});
  const float rms = std::sqrt((9.0f + 16.0f) / 2.0f + 1e-5f);
  Check(status.ok() && std::fabs(out[0] - 3.0f / rms) < 1e-5f, "cpu::RmsNorm");
}

// A llama2.c v0 file: 7 int32 header fields, then fp32 weights in the format's order.
std::string WriteTinyModel() {
  const int32_t dim = 16, hidden = 32, layers = 2, heads = 2, kv_heads = 2, vocab = 32, seq = 64;
  const int64_t head_dim = dim / heads;
  const int64_t floats = vocab * dim + layers * (2 * dim + 4 * dim * dim + 3 * dim * hidden) + dim +
                         seq * head_dim;  // + final norm + the legacy freq_cis tables
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uniform(-0.3f, 0.3f);
  std::vector<float> payload(static_cast<size_t>(floats));
  for (float& f : payload) f = uniform(rng);
  const std::string path = "consumer_tiny_model.bin";
  std::ofstream file(path, std::ios::binary);
  const int32_t header[7] = {dim, hidden, layers, heads, kv_heads, vocab, seq};
  file.write(reinterpret_cast<const char*>(header), sizeof(header));
  file.write(reinterpret_cast<const char*>(payload.data()),
             static_cast<std::streamsize>(payload.size() * sizeof(float)));
  return path;
}

void CheckEngine() {
  auto engine =
      pagedkv::Engine::Load(WriteTinyModel(), "", {.backend = pagedkv::BackendKind::kCpu});
  Check(engine.ok(), "Engine::Load of the tiny model");
  if (!engine.ok()) {
    std::fprintf(stderr, "  %s\n", std::string(engine.status().message()).c_str());
    return;
  }
  auto results = (*engine)->Generate({{.prompt_tokens = {1, 5, 9}, .max_new_tokens = 8},
                                      {.prompt_tokens = {1, 5, 9}, .max_new_tokens = 8}});
  Check(results.ok() && results->size() == 2, "Engine::Generate");
  if (!results.ok()) return;
  Check((*results)[0].output_tokens == (*results)[1].output_tokens, "greedy outputs agree");
}

}  // namespace

int main() {
  Check(std::strcmp(pagedkv::VersionString(), PAGEDKV_VERSION_STRING) == 0,
        "linked library version equals the headers' version");
  CheckCache();
  CheckKernel();
  CheckEngine();
  if (failures != 0) return 1;
  std::printf("consumer: OK (pagedkv %s)\n", pagedkv::VersionString());
  return 0;
}

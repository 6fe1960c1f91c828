// Copyright 2026 The pagedkv Authors.
//
// `pagedkv study-shift`: how exact re-rotated (shifted-position) KV reuse is and what it costs in
// model quality (engine/tools/study/shift_study.h). Prints three tables, writes three CSVs and a
// plot (gnuplot), and says PASS or FAIL for the one must-pass check: layer-0 keys after re-rotation
// equal keys computed fresh at the new position within the storage dtype's rounding. Exits 1 on a
// FAIL, 2 on an error. See docs/shifted_reuse.md.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "engine/tools/cli/commands.h"
#include "engine/tools/study/independent_chunks.h"
#include "engine/tools/study/shift_study.h"
#include "pagedkv/dtype.h"
#include "pagedkv/model/backend_kind.h"
#include "pagedkv/model/model_config.h"
#include "pagedkv/model/model_source.h"
#include "pagedkv/model/model_weights.h"
#include "pagedkv/status_macros.h"

namespace pagedkv::cli {
namespace {

struct StudyShiftFlags {
  std::string model;  // empty: built-in random model
  std::string backend = "cpu";
  std::vector<std::string> dtypes = {"f32", "bf16", "f16"};
  std::vector<std::string> variants = {"rerotated", "naive", "firstk", "selective"};
  std::string out_dir = "study-shift-out";
  bool no_plot = false;
  ShiftStudyOptions study;
  std::string setting = "one-chunk";             // or "independent-chunks"
  bool variants_given = false;                   // --variants was on the command line
  std::vector<std::string> chunk_variant_names;  // independent-chunks: --variants as given
  ChunksStudyOptions chunks;                     // the independent-chunks setting's own options
};

// The built-in model: aidreams260K's shape with GQA (2 KV heads), random weights (small
// embeddings, so the tied classifier's logits are soft and sampled texts vary).
ModelConfig BuiltinConfig() {
  return ModelConfig{.dim = 64,
                     .hidden_dim = 172,
                     .n_layers = 4,
                     .n_heads = 4,
                     .n_kv_heads = 2,
                     .vocab_size = 512,
                     .seq_len = 128};
}

std::string DtypeList(const ShiftStudyReport& report) {
  std::vector<std::string> names;
  for (const LayerZeroCheck& c : report.layer_zero_checks) {
    const std::string name = DTypeName(c.dtype);
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  return absl::StrJoin(names, ",");
}

void PrintReport(const ShiftStudyReport& report, const ShiftStudyOptions& o, int32_t layers) {
  std::cout << "model: " << report.model << "\n";
  std::cout << absl::StrFormat(
      "chunk: %d tokens computed at p0=%d, reused at p1=p0+shift; continuation %d tokens; %d "
      "documents; block size %d\n\n",
      o.chunk_length, o.chunk_position, o.continuation_length, o.num_documents, o.block_size);

  std::cout << "1. Re-rotated keys vs keys computed fresh at the new position (relative RMS error "
               "per layer; layer 0 also max |err|)\n";
  std::string header = absl::StrFormat("%-5s %6s %12s", "dtype", "shift", "L0 max|err|");
  for (int32_t l = 0; l < layers; ++l) header += absl::StrFormat(" %10s", absl::StrCat("L", l));
  std::cout << header << "\n";
  for (const LayerZeroCheck& check : report.layer_zero_checks) {
    std::string line = absl::StrFormat("%-5s %+6d", DTypeName(check.dtype), check.shift);
    for (const KeyErrorRow& row : report.key_errors) {
      if (row.dtype != check.dtype || row.shift != check.shift) continue;
      if (row.layer == 0) line += absl::StrFormat(" %12.3e", row.max_abs_error);
    }
    for (const KeyErrorRow& row : report.key_errors) {
      if (row.dtype == check.dtype && row.shift == check.shift) {
        line += absl::StrFormat(" %10.3e", row.rel_rms_error);
      }
    }
    std::cout << line << "\n";
  }
  std::cout << "\nLayer-0 check (|k_rerotated - k_fresh| <= (3u + 1e-6)|pair|, u = the dtype's "
               "unit roundoff; int8 / q8_0 / q4_*: (2 + sqrt 2) u |row max|, u half a step; "
               "also V):\n";
  for (const LayerZeroCheck& check : report.layer_zero_checks) {
    std::cout << absl::StrFormat(
        "  layer-0 keys %-5s shift %+4d: %s (worst error / tolerance = "
        "%.3f)\n",
        DTypeName(check.dtype), check.shift,
        IsQuantizedDType(check.dtype) ? "info" : (check.pass ? "PASS" : "FAIL"), check.worst_ratio);
  }

  std::cout << "\n2. Rotation forms R(p1)R(p0)^T (compose) vs R(p1-p0) (delta), compose from the "
               "float keys (floatkeys, with that variant), and drift after n successive shifts "
               "(layer-0 keys vs fresh)\n";
  std::cout << absl::StrFormat("%-8s %-9s %-6s %6s %6s %12s %12s\n", "dtype", "form", "kind",
                               "step", "steps", "max|err|", "rel RMS");
  for (const RotationRow& row : report.rotations) {
    std::cout << absl::StrFormat("%-8s %-9s %-6s %+6d %6d %12.3e %12.3e\n", DTypeName(row.dtype),
                                 row.form, row.drift ? "drift" : "single", row.shift_per_step,
                                 row.steps, row.max_abs_error, row.rel_rms_error);
  }

  std::cout << "\n3. Quality on the continuation vs full recompute (KL(full||variant) nats/token, "
               "top-1 agreement, perplexity) and prefill compute saved\n";
  std::cout << absl::StrFormat("%-5s %6s %-20s %10s %7s %9s %9s %7s\n", "dtype", "shift", "variant",
                               "KL", "top-1", "ppl", "ppl full", "saved");
  for (const QualityRow& row : report.quality) {
    std::cout << absl::StrFormat("%-5s %+6d %-20s %10.3e %6.1f%% %9.3f %9.3f %6.1f%%\n",
                                 DTypeName(row.dtype), row.shift, row.variant, row.mean_kl,
                                 100.0 * row.top1_agreement, row.perplexity, row.full_perplexity,
                                 100.0 * row.compute_saved);
  }
}

absl::Status WriteCsvs(const ShiftStudyReport& report, const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::InvalidArgumentError(absl::StrCat("cannot create ", dir.string()));
  std::ofstream keys(dir / "key_error.csv");
  keys << "dtype,shift,layer,max_abs_error,rel_rms_error\n";
  for (const KeyErrorRow& r : report.key_errors) {
    keys << absl::StrFormat("%s,%d,%d,%.6e,%.6e\n", DTypeName(r.dtype), r.shift, r.layer,
                            r.max_abs_error, r.rel_rms_error);
  }
  std::ofstream rot(dir / "rotation.csv");
  rot << "dtype,form,kind,shift_per_step,steps,max_abs_error,rel_rms_error\n";
  for (const RotationRow& r : report.rotations) {
    rot << absl::StrFormat("%s,%s,%s,%d,%d,%.6e,%.6e\n", DTypeName(r.dtype), r.form,
                           r.drift ? "drift" : "single", r.shift_per_step, r.steps, r.max_abs_error,
                           r.rel_rms_error);
  }
  std::ofstream q(dir / "quality.csv");
  q << "dtype,shift,variant,mean_kl,top1_agreement,perplexity,full_perplexity,compute_saved,rows\n";
  for (const QualityRow& r : report.quality) {
    q << absl::StrFormat("%s,%d,%s,%.6e,%.6f,%.6f,%.6f,%.6f,%d\n", DTypeName(r.dtype), r.shift,
                         r.variant, r.mean_kl, r.top1_agreement, r.perplexity, r.full_perplexity,
                         r.compute_saved, r.rows);
  }
  if (!keys || !rot || !q) {
    return absl::InternalError(absl::StrCat("could not write the CSVs in ", dir.string()));
  }
  return absl::OkStatus();
}

// Panel 1: key error per layer (first dtype, one line per shift).
void PlotKeyErrors(const ShiftStudyReport& report, const ShiftStudyOptions& o, int32_t layers,
                   std::ostream& gp) {
  const DType first = o.dtypes.front();
  gp << "set title 'rel. RMS key error vs fresh, per layer (" << DTypeName(first) << ")'\n";
  gp << "set xlabel 'layer'\nset xtics 1\n";
  std::vector<std::string> plots;
  for (size_t s = 0; s < o.shifts.size(); ++s) {
    gp << "$k" << s << " << EOD\n";
    for (const KeyErrorRow& r : report.key_errors) {
      if (r.dtype == first && r.shift == o.shifts[s]) {
        gp << r.layer << " " << std::max(r.rel_rms_error, 1e-12) << "\n";
      }
    }
    gp << "EOD\n";
    plots.push_back(
        absl::StrFormat("$k%d using 1:2 with linespoints title 'shift %+d'", s, o.shifts[s]));
  }
  gp << "set xrange [-0.2:" << layers - 0.8 << "]\n";
  gp << "plot " << absl::StrJoin(plots, ", ") << "\n";
}

// Panel 2: drift per dtype and form.
void PlotDrift(const ShiftStudyReport& report, const ShiftStudyOptions& o, std::ostream& gp) {
  gp << "set title 'drift after n shifts of " << o.drift_step << " (layer-0 keys)'\n";
  gp << "set xlabel 'successive shifts n'\nset logscale x 2\nset xtics auto\nset autoscale x\n";
  std::vector<std::string> plots;
  int block = 0;
  for (DType dtype : o.dtypes) {
    for (const char* form : {"compose", "delta"}) {
      gp << "$d" << block << " << EOD\n";
      for (const RotationRow& r : report.rotations) {
        if (r.dtype == dtype && r.form == form && r.drift) {
          gp << r.steps << " " << std::max(r.rel_rms_error, 1e-12) << "\n";
        }
      }
      gp << "EOD\n";
      plots.push_back(absl::StrFormat("$d%d using 1:2 with linespoints title '%s %s'", block,
                                      DTypeName(dtype), form));
      ++block;
    }
  }
  gp << "plot " << absl::StrJoin(plots, ", ") << "\n";
}

// Panel 3: KL per variant (first dtype) against the shift.
void PlotQuality(const ShiftStudyReport& report, const ShiftStudyOptions& o, std::ostream& gp) {
  const DType first = o.dtypes.front();
  gp << "unset logscale x\n";
  gp << "set title 'KL(full || variant) on the continuation (" << DTypeName(first) << ")'\n";
  gp << "set xlabel 'shift p1 - p0'\n";
  std::vector<std::string> variants, plots;
  for (const QualityRow& r : report.quality) {
    if (std::find(variants.begin(), variants.end(), r.variant) == variants.end()) {
      variants.push_back(r.variant);
    }
  }
  for (size_t v = 0; v < variants.size(); ++v) {
    gp << "$q" << v << " << EOD\n";
    for (const QualityRow& r : report.quality) {
      if (r.dtype == first && r.variant == variants[v]) {
        gp << r.shift << " " << std::max(r.mean_kl, 1e-12) << "\n";
      }
    }
    gp << "EOD\n";
    plots.push_back(absl::StrFormat("$q%d using 1:2 with linespoints title '%s'", v, variants[v]));
  }
  gp << "plot " << absl::StrJoin(plots, ", ") << "\n";
}

// The three panels side by side, drawn by gnuplot into study_shift.png.
absl::Status WritePlot(const ShiftStudyReport& report, const ShiftStudyOptions& o,
                       const std::filesystem::path& dir, int32_t layers,
                       const std::string& model_name) {
  std::ofstream gp(dir / "study_shift.gp");
  gp << "set terminal pngcairo size 1500,460 font ',10'\n";
  gp << "set output '" << (dir / "study_shift.png").string() << "'\n";
  gp << "set multiplot layout 1,3 title 'pagedkv study-shift: " << model_name << " (chunk "
     << o.chunk_length << " tokens at p0 = " << o.chunk_position << ")' noenhanced\n";
  gp << "set logscale y\nset format y '10^{%L}'\nset key outside bottom center horizontal\n";
  PlotKeyErrors(report, o, layers, gp);
  PlotDrift(report, o, gp);
  PlotQuality(report, o, gp);
  gp << "unset multiplot\n";
  gp.close();
  const std::string command = absl::StrCat("gnuplot '", (dir / "study_shift.gp").string(), "'");
  if (std::system(command.c_str()) != 0) {
    return absl::UnavailableError("gnuplot failed or is not installed; the CSVs are written");
  }
  return absl::OkStatus();
}

// Fills the study's backend, dtypes and variants from their flag names.
absl::Status ApplyFlagNames(StudyShiftFlags& flags) {
  ShiftStudyOptions& o = flags.study;
  PAGEDKV_ASSIGN_OR_RETURN(o.backend, ParseBackendKind(flags.backend));
  o.dtypes.clear();
  for (const std::string& name : flags.dtypes) {
    PAGEDKV_ASSIGN_OR_RETURN(DType dtype, ParseDType(name));
    o.dtypes.push_back(dtype);
  }
  o.variants.clear();
  for (const std::string& name : flags.variants) {
    PAGEDKV_ASSIGN_OR_RETURN(ShiftVariant variant, ParseShiftVariant(name));
    o.variants.push_back(variant);
  }
  return absl::OkStatus();
}

// --model's weights, or the built-in random model.
absl::Status LoadStudyWeights(StudyShiftFlags& flags) {
  if (flags.model.empty()) {
    PAGEDKV_ASSIGN_OR_RETURN(
        ModelWeights weights,
        ModelWeights::Random(BuiltinConfig(), {.seed = 1, .embedding_scale = 0.1f}));
    flags.study.weights = std::make_shared<const ModelWeights>(std::move(weights));
    std::cout << "(no --model: the built-in random-weights model)\n";
    return absl::OkStatus();
  }
  PAGEDKV_ASSIGN_OR_RETURN(LoadedModel model, LoadModel(flags.model));
  flags.study.weights = std::move(model.weights);
  std::cout << "model: " << flags.model << " (" << model.format << ")\n";
  return absl::OkStatus();
}

// The table, the CSVs and (unless --no-plot) the plot.
absl::Status WriteOutputs(const StudyShiftFlags& flags, const ShiftStudyReport& report) {
  const ShiftStudyOptions& o = flags.study;
  const int32_t layers = o.weights->config().n_layers;
  PrintReport(report, o, layers);
  const std::filesystem::path dir(flags.out_dir);
  PAGEDKV_RETURN_IF_ERROR(WriteCsvs(report, dir));
  std::cout << "\nCSV: " << (dir / "key_error.csv").string() << ", "
            << (dir / "rotation.csv").string() << ", " << (dir / "quality.csv").string() << "\n";
  if (flags.no_plot) return absl::OkStatus();
  const std::string model_name = flags.model.empty()
                                     ? std::string("built-in random model")
                                     : std::filesystem::path(flags.model).filename().string();
  if (absl::Status s = WritePlot(report, o, dir, layers, model_name); s.ok()) {
    std::cout << "plot: " << (dir / "study_shift.png").string() << "\n";
  } else {
    std::cout << "plot skipped: " << s.message() << "\n";
  }
  return absl::OkStatus();
}

// The independent-chunks setting's options from the shared and its own flags.
absl::Status ApplyChunksFlags(StudyShiftFlags& flags) {
  const ShiftStudyOptions& s = flags.study;
  ChunksStudyOptions& c = flags.chunks;
  c.weights = s.weights;
  c.backend = s.backend;
  c.block_size = s.block_size;
  c.kv_dtype = s.dtypes.front();
  c.chunk_length = s.chunk_length;
  c.continuation_length = s.continuation_length;
  c.deviation_layer = s.deviation_layer;
  c.num_documents = s.num_documents;
  c.seed = s.seed;
  if (!flags.variants_given) return absl::OkStatus();
  c.variants.clear();
  for (const std::string& name : flags.chunk_variant_names) {
    PAGEDKV_ASSIGN_OR_RETURN(ChunkVariant variant, ParseChunkVariant(name));
    c.variants.push_back(variant);
  }
  return absl::OkStatus();
}

void PrintChunksReport(const ChunksStudyReport& report, const ChunksStudyOptions& o) {
  std::cout << "model: " << report.model << "\n";
  std::cout << absl::StrFormat(
      "independent chunks: system prefix %d tokens, chunks of %d tokens each computed alone "
      "after it, continuation %d tokens; %d documents; KV %s\n\n",
      o.system_prefix, o.chunk_length, o.continuation_length, o.num_documents,
      DTypeName(o.kv_dtype));
  std::cout << "Quality on the continuation vs full recompute (KL(full||variant) nats/token, "
               "top-1 agreement, perplexity), chunk tokens recomputed, prefill compute saved\n";
  std::cout << "(closed: the share of re-rotated reuse's KL that the variant removes)\n";
  std::cout << absl::StrFormat("%6s %-11s %8s %7s %10s %7s %7s %9s %9s %7s\n", "chunks", "variant",
                               "fraction", "recomp", "KL", "closed", "top-1", "ppl", "ppl full",
                               "saved");
  for (const ChunksQualityRow& r : report.rows) {
    std::cout << absl::StrFormat(
        "%6d %-11s %8.2f %6.1f%% %10.3e %6.1f%% %6.1f%% %9.3f %9.3f %6.1f%%\n", r.num_chunks,
        r.variant, r.fraction, 100.0 * r.recomputed, r.mean_kl, 100.0 * r.gap_closed,
        100.0 * r.top1_agreement, r.perplexity, r.full_perplexity, 100.0 * r.compute_saved);
  }
}

absl::Status WriteChunksCsv(const ChunksStudyReport& report, const std::filesystem::path& dir,
                            const std::string& name) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::InvalidArgumentError(absl::StrCat("cannot create ", dir.string()));
  std::ofstream q(dir / name);
  q << "num_chunks,variant,fraction,recomputed,mean_kl,gap_closed,top1_agreement,perplexity,"
       "full_perplexity,compute_saved,rows\n";
  for (const ChunksQualityRow& r : report.rows) {
    q << absl::StrFormat("%d,%s,%.4f,%.6f,%.6e,%.6f,%.6f,%.6f,%.6f,%.6f,%d\n", r.num_chunks,
                         r.variant, r.fraction, r.recomputed, r.mean_kl, r.gap_closed,
                         r.top1_agreement, r.perplexity, r.full_perplexity, r.compute_saved,
                         r.rows);
  }
  if (!q) return absl::InternalError(absl::StrCat("could not write the CSV in ", dir.string()));
  std::cout << "\nCSV: " << (dir / name).string() << "\n";
  return absl::OkStatus();
}

// --setting independent-chunks: the study, its table and its CSV, once per KV dtype
// (chunks_quality.csv; with several dtypes chunks_quality_<dtype>.csv each). Exit 0, or 2 on an
// error.
int RunChunks(StudyShiftFlags& flags) {
  absl::Status status = ApplyChunksFlags(flags);
  const std::vector<DType> dtypes = flags.study.dtypes;
  for (size_t i = 0; status.ok() && i < dtypes.size(); ++i) {
    flags.chunks.kv_dtype = dtypes[i];
    absl::StatusOr<ChunksStudyReport> report = RunChunksStudy(flags.chunks);
    if (!report.ok()) {
      status = report.status();
      break;
    }
    if (i > 0) std::cout << "\n";
    PrintChunksReport(*report, flags.chunks);
    const std::string name = dtypes.size() == 1
                                 ? std::string("chunks_quality.csv")
                                 : absl::StrCat("chunks_quality_", DTypeName(dtypes[i]), ".csv");
    status = WriteChunksCsv(*report, flags.out_dir, name);
  }
  if (!status.ok()) {
    std::cerr << "study-shift: " << status.message() << "\n";
    return 2;
  }
  return 0;
}

int Run(StudyShiftFlags& flags) {
  if (flags.setting != "one-chunk" && flags.setting != "independent-chunks") {
    std::cerr << "study-shift: --setting '" << flags.setting
              << "' is unknown; use one-chunk or independent-chunks\n";
    return 2;
  }
  const bool chunks = flags.setting == "independent-chunks";
  if (chunks) {  // the one-chunk parser must not see the independent-chunks variant names
    flags.chunk_variant_names = flags.variants;
    flags.variants = {"rerotated"};
  }
  absl::Status status = ApplyFlagNames(flags);
  if (status.ok()) status = LoadStudyWeights(flags);
  if (!status.ok()) {
    std::cerr << "study-shift: " << status.message() << "\n";
    return 2;
  }
  if (chunks) return RunChunks(flags);
  absl::StatusOr<ShiftStudyReport> report = RunShiftStudy(flags.study);
  if (!report.ok()) {
    std::cerr << report.status().message() << "\n";
    return 2;
  }
  if (absl::Status s = WriteOutputs(flags, *report); !s.ok()) {
    std::cerr << "study-shift: " << s.message() << "\n";
    return 2;
  }
  const bool pass = report->AllLayerZeroChecksPass();
  std::cout << "\nlayer-0 re-rotation check over dtypes " << DtypeList(*report) << ": "
            << (pass ? "PASS" : "FAIL") << "\n";
  return pass ? 0 : 1;
}

// The model, the chunk, the shifts it is reused at, the KV dtypes and the reuse variants.
void AddModelAndShiftOptions(CLI::App* sub, StudyShiftFlags& flags) {
  ShiftStudyOptions& o = flags.study;
  sub->add_option("--model", flags.model,
                  "llama2.c checkpoint (e.g. ../shared/data/aidreams260K/aidreams260K.bin) or a "
                  "Hugging Face model directory (e.g. ../shared/data/tinystories656K) or a GGUF "
                  "file (e.g. SmolLM2, scripts/fetch_models.sh); default: a built-in "
                  "random-weights model");
  sub->add_option("--backend", flags.backend, "cpu, cuda or auto")->capture_default_str();
  sub->add_option("--chunk-len", o.chunk_length, "Tokens of the reused chunk")
      ->capture_default_str();
  sub->add_option("--chunk-pos", o.chunk_position, "Position p0 the chunk is first computed at")
      ->capture_default_str();
  sub->add_option("--shifts", o.shifts, "Shifts p1 - p0 to reuse the chunk at, e.g. -11,0,5,37")
      ->delimiter(',')
      ->capture_default_str();
  sub->add_option("--continuation", o.continuation_length,
                  "Tokens after the chunk scored for quality")
      ->capture_default_str();
  sub->add_option("--dtypes,--kv-cache-dtype", flags.dtypes,
                  "KV storage dtypes: f32, bf16, f16, int8, fp8_e4m3, fp8_e5m2, q8_0, q4_0, q4_1 "
                  "(the block types need head sizes of 32s), e.g. f32,bf16,int8")
      ->delimiter(',')
      ->capture_default_str();
  sub->add_option("--variants", flags.variants,
                  "one-chunk: rerotated, naive, firstk, selective (the default), floatkeys "
                  "(re-rotated from the float keys kept at registration); independent-chunks: "
                  "full, naive, rerotated, deviation, oracle, random, firstk, cacheblend (default: "
                  "all of these), engine, floatkeys")
      ->delimiter(',')
      ->capture_default_str();
}

// What the recompute variants recompute, the drift measurement, the sampled texts and the outputs.
void AddRecomputeDriftAndOutputOptions(CLI::App* sub, StudyShiftFlags& flags) {
  ShiftStudyOptions& o = flags.study;
  sub->add_option("--first-k", o.recompute_first, "k of the first-k recompute variant (EPIC)")
      ->capture_default_str();
  sub->add_option("--fraction", o.recompute_fraction,
                  "Fraction recomputed by the selective variant (CacheBlend)")
      ->capture_default_str();
  sub->add_option("--deviation-layer", o.deviation_layer,
                  "Layer whose K/V deviation ranks tokens for the selective variant")
      ->capture_default_str();
  sub->add_option("--drift-step", o.drift_step, "Shift of each step of the drift measurement")
      ->capture_default_str();
  sub->add_option("--drift-counts", o.drift_counts, "Numbers of successive shifts, e.g. 1,4,16")
      ->delimiter(',')
      ->capture_default_str();
  sub->add_option("--documents", o.num_documents, "Documents sampled and averaged over")
      ->capture_default_str();
  sub->add_option("--seed", o.seed, "Seed of the sampled texts")->capture_default_str();
  sub->add_option("--block-size", o.block_size, "Tokens per KV block")->capture_default_str();
  sub->add_option("--out-dir", flags.out_dir, "Folder for the CSVs and the plot")
      ->capture_default_str();
  sub->add_flag("--no-plot", flags.no_plot, "Do not run gnuplot");
}

// The setting, and the independent-chunks setting's own options.
void AddIndependentChunksOptions(CLI::App* sub, StudyShiftFlags& flags) {
  ChunksStudyOptions& c = flags.chunks;
  sub->add_option("--setting", flags.setting,
                  "one-chunk (A||C then B||C||D) or independent-chunks (CacheBlend's and EPIC's: "
                  "k chunks computed alone, concatenated, then a continuation)")
      ->capture_default_str();
  sub->add_option("--chunks", c.chunk_counts, "independent-chunks: numbers of chunks, e.g. 2,4,6")
      ->delimiter(',')
      ->capture_default_str();
  sub->add_option("--system-prefix", c.system_prefix,
                  "independent-chunks: tokens of the shared system prefix (BOS first) each chunk "
                  "is computed after; 0: each chunk from position 0")
      ->capture_default_str();
  sub->add_option("--fractions", c.fractions,
                  "independent-chunks: recompute fractions of the selectors, e.g. 0.05,0.15,0.3")
      ->delimiter(',')
      ->capture_default_str();
  sub->add_option("--first-k-max", c.first_k_max,
                  "independent-chunks: most tokens per chunk the firstk selector recomputes")
      ->capture_default_str();
}

}  // namespace

void AddStudyShiftCommand(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<StudyShiftFlags>();
  CLI::App* sub = app.add_subcommand(
      "study-shift",
      "Shifted-position reuse study: re-rotation exactness per layer and dtype, rotation forms "
      "and drift, and next-token quality of reuse variants against full recompute. Writes a "
      "table, CSVs and a plot; PASS/FAIL only for the layer-0 re-rotation check.");
  AddModelAndShiftOptions(sub, *flags);
  AddRecomputeDriftAndOutputOptions(sub, *flags);
  AddIndependentChunksOptions(sub, *flags);
  sub->callback([flags, exit_code, sub]() {
    flags->variants_given = sub->count("--variants") > 0;
    *exit_code = Run(*flags);
  });
}

}  // namespace pagedkv::cli

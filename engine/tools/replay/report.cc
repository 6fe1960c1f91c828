// Copyright 2026 The pagedkv Authors.
#include "engine/tools/replay/report.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "engine/tools/replay/shifted_hit_json.h"

namespace pagedkv::replay {
namespace {

absl::Status EnsureParentDir(const std::string& path) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (parent.empty()) return absl::OkStatus();
  std::error_code ec;
  std::filesystem::create_directories(parent, ec);
  if (ec) {
    return absl::PermissionDeniedError(
        absl::StrFormat("cannot create directory %s: %s", parent.string(), ec.message()));
  }
  return absl::OkStatus();
}

absl::Status WriteFile(const std::string& path, const std::string& text) {
  if (absl::Status s = EnsureParentDir(path); !s.ok()) return s;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) return absl::PermissionDeniedError(absl::StrFormat("cannot write %s", path));
  return absl::OkStatus();
}

// Results grouped by policy (first-seen order), each sorted by capacity.
std::vector<std::pair<std::string, std::vector<const CacheReplayResult*>>> ByPolicy(
    const std::vector<CacheReplayResult>& results) {
  std::vector<std::pair<std::string, std::vector<const CacheReplayResult*>>> groups;
  for (const CacheReplayResult& r : results) {
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const auto& g) { return g.first == r.policy; });
    if (it == groups.end()) {
      groups.push_back({r.policy, {}});
      it = groups.end() - 1;
    }
    it->second.push_back(&r);
  }
  for (auto& g : groups) {
    std::sort(g.second.begin(), g.second.end(),
              [](const auto* a, const auto* b) { return a->capacity_blocks < b->capacity_blocks; });
  }
  return groups;
}

std::string XmlEscape(const std::string& s) {
  return absl::StrReplaceAll(s, {{"&", "&amp;"}, {"<", "&lt;"}, {">", "&gt;"}, {"\"", "&quot;"}});
}

double Ratio(int64_t a, int64_t b) { return b > 0 ? static_cast<double>(a) / b : 0.0; }

bool AnyShiftedCounted(const std::vector<CacheReplayResult>& results) {
  return std::any_of(results.begin(), results.end(),
                     [](const CacheReplayResult& r) { return r.shifted_counted; });
}

// One line per row over KV cache groups with its shifted hits (rows that counted them).
void AppendKvGroupsShifted(const std::vector<CacheReplayResult>& results, std::string& out) {
  out += "\n";
  for (const CacheReplayResult& r : results) {
    if (!r.shifted_counted) continue;
    absl::StrAppendFormat(
        &out,
        "%-9s shifted: %.2f%% of prompt tokens from cached chunks (%.2f%% moved), pfx+shift "
        "%.2f%%; chunks: %d marked, %d hits, %d registered, %d without room\n",
        r.kv_groups->name, 100 * r.shifted_hit_rate(),
        100 * Ratio(r.shifted_hit_tokens_moved, r.total_tokens),
        100 * r.prefix_plus_shifted_token_hit_rate(), r.chunks, r.chunk_hits, r.chunks_registered,
        r.chunk_register_failures);
  }
}

// FormatCacheTable of rows over KV cache groups: tokens hit and KV held per request (full-model
// blocks), then each row's tier hit tokens when it has tiers.
std::string FormatKvGroupsTable(const std::vector<CacheReplayResult>& results) {
  std::string out = absl::StrFormat("%-9s %-36s %8s %9s %12s %12s %12s %9s %8s\n", "kv cache",
                                    "groups", "pages", "tok hit", "prefill mean", "prefill peak",
                                    "decode mean", "evictions", "refused");
  bool tiers = false;
  for (const CacheReplayResult& r : results) {
    const KvGroupsRow& g = *r.kv_groups;
    const double layers = g.model_layers;
    absl::StrAppendFormat(&out, "%-9s %-36s %8d %8.2f%% %12.1f %12.1f %12.1f %9d %8d\n", g.name,
                          g.groups, r.capacity_blocks, 100 * r.token_hit_rate(),
                          g.mean_prefill_layer_blocks / layers,
                          g.peak_prefill_layer_blocks / layers, g.mean_decode_layer_blocks / layers,
                          r.evictions, g.refused);
    tiers = tiers || r.host_capacity_blocks > 0 || r.disk_capacity_blocks > 0 ||
            r.remote_capacity_blocks > 0;
  }
  if (tiers) {
    out += "\n";
    for (const CacheReplayResult& r : results) {
      absl::StrAppendFormat(
          &out, "%-9s tiers: %d host / %d disk / %d remote hit tokens (of the tok hit)\n",
          r.kv_groups->name, r.host_hit_tokens, r.disk_hit_tokens, r.remote_hit_tokens);
    }
  }
  if (AnyShiftedCounted(results)) AppendKvGroupsShifted(results, out);
  return out;
}

// CacheResultJson of a row over KV cache groups.
nlohmann::json KvGroupsJson(const CacheReplayResult& r) {
  const KvGroupsRow& g = *r.kv_groups;
  const double layers = g.model_layers;
  nlohmann::json j = {{"groups", g.groups},
                      {"pages", r.capacity_blocks},
                      {"requests", r.requests},
                      {"refused", g.refused},
                      {"prefix_cache_queries", r.total_tokens},
                      {"prefix_cache_hits", r.hit_tokens},
                      {"token_hit_rate", r.token_hit_rate()},
                      {"mean_prefill_blocks", g.mean_prefill_layer_blocks / layers},
                      {"peak_prefill_blocks", g.peak_prefill_layer_blocks / layers},
                      {"mean_decode_blocks", g.mean_decode_layer_blocks / layers},
                      {"peak_decode_blocks", g.peak_decode_layer_blocks / layers},
                      {"evictions", r.evictions},
                      {"host_hit_tokens", r.host_hit_tokens},
                      {"remote_hit_tokens", r.remote_hit_tokens},
                      {"disk_hit_tokens", r.disk_hit_tokens}};
  if (r.shifted_counted) AddShiftedHitJson(r, j);
  return j;
}

}  // namespace

bool GnuplotAvailable() { return std::system("command -v gnuplot >/dev/null 2>&1") == 0; }

std::string FormatCacheTable(const std::vector<CacheReplayResult>& results) {
  if (!results.empty() && results[0].kv_groups.has_value()) return FormatKvGroupsTable(results);
  const bool shifted = AnyShiftedCounted(results);
  std::string out = absl::StrFormat("%-7s %12s %10s %10s %10s %12s %12s %12s %12s", "policy",
                                    "capacity", "block_hit", "token_hit", "inf_cache", "evictions",
                                    "miss_new", "miss_evicted", "miss_after");
  if (shifted) {
    absl::StrAppendFormat(&out, " %10s %10s %10s", "shifted", "moved", "pfx+shift");
  }
  const bool tiers = std::any_of(results.begin(), results.end(), [](const CacheReplayResult& r) {
    return r.host_capacity_blocks > 0 || r.disk_capacity_blocks > 0 || r.remote_capacity_blocks > 0;
  });
  const bool disk = std::any_of(results.begin(), results.end(), [](const CacheReplayResult& r) {
    return r.disk_capacity_blocks > 0;
  });
  if (tiers) absl::StrAppendFormat(&out, " %10s", "host_hit");
  if (disk) absl::StrAppendFormat(&out, " %10s", "disk_hit");
  if (tiers) absl::StrAppendFormat(&out, " %10s %10s", "remote_hit", "all_tiers");
  out += "\n";
  for (const CacheReplayResult& r : results) {
    absl::StrAppendFormat(&out, "%-7s %12d %9.2f%% %9.2f%% %9.2f%% %12d %12d %12d %12d", r.policy,
                          r.capacity_blocks, 100 * r.block_hit_rate(), 100 * r.token_hit_rate(),
                          100 * r.infinite_cache_block_hit_rate(), r.evictions, r.miss_never_seen,
                          r.miss_evicted, r.miss_after_miss);
    if (shifted && r.shifted_counted) {
      absl::StrAppendFormat(&out, " %9.2f%% %9.2f%% %9.2f%%", 100 * r.shifted_hit_rate(),
                            100 * Ratio(r.shifted_hit_tokens_moved, r.total_tokens),
                            100 * r.prefix_plus_shifted_token_hit_rate());
    } else if (shifted) {
      absl::StrAppendFormat(&out, " %10s %10s %10s", "-", "-", "-");
    }
    if (tiers) absl::StrAppendFormat(&out, " %9.2f%%", 100 * r.host_block_hit_rate());
    if (disk) absl::StrAppendFormat(&out, " %9.2f%%", 100 * r.disk_block_hit_rate());
    if (tiers) {
      absl::StrAppendFormat(&out, " %9.2f%% %9.2f%%", 100 * r.remote_block_hit_rate(),
                            100 * r.tiered_block_hit_rate());
    }
    out += "\n";
  }
  if (shifted) {
    out +=
        "shifted: prompt tokens past the prefix hit served by cached chunks (moved: from copies "
        "at another position); pfx+shift: token_hit + shifted; '-': not counted\n";
  }
  return out;
}

nlohmann::json CacheResultJson(const CacheReplayResult& r) {
  if (r.kv_groups.has_value()) return KvGroupsJson(r);
  nlohmann::json j = {
      {"policy", r.policy},
      {"capacity_blocks", r.capacity_blocks},
      {"requests", r.requests},
      {"blocks", r.blocks},
      {"hit_blocks", r.hit_blocks},
      {"block_hit_rate", r.block_hit_rate()},
      {"total_tokens", r.total_tokens},
      {"hit_tokens", r.hit_tokens},
      {"token_hit_rate", r.token_hit_rate()},
      {"infinite_cache_hit_blocks", r.infinite_hit_blocks},
      {"infinite_cache_block_hit_rate", r.infinite_cache_block_hit_rate()},
      {"infinite_cache_token_hit_rate", r.infinite_cache_token_hit_rate()},
      {"evictions", r.evictions},
      {"misses",
       {{"never_seen", r.miss_never_seen},
        {"evicted", r.miss_evicted},
        {"after_first_miss", r.miss_after_miss},
        {"hit_capped_blocks", r.hit_capped_blocks},
        {"over_capacity_blocks", r.over_capacity_blocks},
        {"not_full_block_tokens", r.not_full_block_tokens}}},
      {"replay_cpu_seconds", r.seconds},
      {"replay_wall_seconds", r.wall_seconds},
      {"blocks_per_second", r.blocks_per_second()},
      {"shifted_counted", r.shifted_counted},
  };
  if (r.host_capacity_blocks > 0 || r.disk_capacity_blocks > 0 || r.remote_capacity_blocks > 0) {
    j["tiers"] = {{"host_capacity_blocks", r.host_capacity_blocks},
                  {"remote_capacity_blocks", r.remote_capacity_blocks},
                  {"disk_capacity_blocks", r.disk_capacity_blocks},
                  {"disk_hit_blocks", r.disk_hit_blocks},
                  {"disk_hit_tokens", r.disk_hit_tokens},
                  {"disk_block_hit_rate", r.disk_block_hit_rate()},
                  {"host_store_policy", TierStoreRuleName(r.host_store.rule)},
                  {"host_store_threshold", r.host_store.threshold},
                  {"host_hit_blocks", r.host_hit_blocks},
                  {"host_hit_tokens", r.host_hit_tokens},
                  {"remote_hit_blocks", r.remote_hit_blocks},
                  {"remote_hit_tokens", r.remote_hit_tokens},
                  {"device_block_hit_rate", r.block_hit_rate()},
                  {"host_block_hit_rate", r.host_block_hit_rate()},
                  {"remote_block_hit_rate", r.remote_block_hit_rate()},
                  {"tiered_block_hit_rate", r.tiered_block_hit_rate()},
                  {"tiered_token_hit_rate", r.tiered_token_hit_rate()}};
  }
  if (r.shifted_counted) {
    AddShiftedHitJson(r, j);
  }
  return j;
}

absl::Status WriteSweepCsv(const std::string& path, const std::vector<CacheReplayResult>& results) {
  std::string csv =
      "policy,capacity_blocks,requests,blocks,hit_blocks,block_hit_rate,total_tokens,hit_tokens,"
      "token_hit_rate,infinite_cache_block_hit_rate,infinite_cache_token_hit_rate,evictions,"
      "miss_never_seen,miss_evicted,miss_after_first_miss,over_capacity_blocks,"
      "not_full_block_tokens,replay_cpu_seconds";
  const bool shifted = AnyShiftedCounted(results);
  if (shifted) {
    csv +=
        ",shifted_counted,shifted_hit_tokens,shifted_hit_tokens_moved,shifted_hit_blocks,"
        "shifted_hit_rate,prefix_plus_shifted_token_hit_rate";
  }
  csv += "\n";
  for (const CacheReplayResult& r : results) {
    absl::StrAppendFormat(&csv, "%s,%d,%d,%d,%d,%.6f,%d,%d,%.6f,%.6f,%.6f,%d,%d,%d,%d,%d,%d,%.4f",
                          r.policy, r.capacity_blocks, r.requests, r.blocks, r.hit_blocks,
                          r.block_hit_rate(), r.total_tokens, r.hit_tokens, r.token_hit_rate(),
                          r.infinite_cache_block_hit_rate(), r.infinite_cache_token_hit_rate(),
                          r.evictions, r.miss_never_seen, r.miss_evicted, r.miss_after_miss,
                          r.over_capacity_blocks, r.not_full_block_tokens, r.seconds);
    if (shifted) {
      absl::StrAppendFormat(&csv, ",%d,%d,%d,%d,%.6f,%.6f", r.shifted_counted ? 1 : 0,
                            r.shifted_hit_tokens, r.shifted_hit_tokens_moved, r.shifted_hit_blocks,
                            r.shifted_hit_rate(), r.prefix_plus_shifted_token_hit_rate());
    }
    csv += "\n";
  }
  return WriteFile(path, csv);
}

namespace {

// The SVG plot's geometry: a log-scale capacity axis [10^lo_exp, 10^hi_exp] and a 0-100% hit
// rate axis.
struct SvgFrame {
  static constexpr double kWidth = 800, kHeight = 500, kLeft = 70, kRight = 150, kTop = 40,
                          kBottom = 60;
  double plot_width = kWidth - kLeft - kRight;
  double plot_height = kHeight - kTop - kBottom;
  double lo_exp = 0, hi_exp = 1;
  double X(double capacity) const {
    return kLeft + plot_width * (std::log10(capacity) - lo_exp) / (hi_exp - lo_exp);
  }
  double Y(double rate) const { return kTop + plot_height * (1 - rate); }
};

SvgFrame FrameFor(const std::vector<CacheReplayResult>& results) {
  double lo = 1, hi = 10;
  if (!results.empty()) {
    lo = hi = static_cast<double>(results[0].capacity_blocks);
    for (const auto& r : results) {
      lo = std::min(lo, static_cast<double>(r.capacity_blocks));
      hi = std::max(hi, static_cast<double>(r.capacity_blocks));
    }
  }
  SvgFrame frame;
  frame.lo_exp = std::floor(std::log10(lo));
  frame.hi_exp = std::max(frame.lo_exp + 1, std::ceil(std::log10(hi)));
  return frame;
}

// Grid lines with their labels, the frame and the axis titles.
void AppendSvgAxes(const SvgFrame& f, std::string& svg) {
  for (int i = 0; i <= 10; ++i) {
    const double rate = i / 10.0;
    absl::StrAppendFormat(&svg,
                          "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"#ddd\"/>"
                          "<text x=\"%g\" y=\"%g\" text-anchor=\"end\">%d</text>\n",
                          f.kLeft, f.Y(rate), f.kLeft + f.plot_width, f.Y(rate), f.kLeft - 6,
                          f.Y(rate) + 4, i * 10);
  }
  for (double e = f.lo_exp; e <= f.hi_exp; ++e) {
    const double x = f.X(std::pow(10, e));
    absl::StrAppendFormat(&svg,
                          "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"#ddd\"/>"
                          "<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">1e%d</text>\n",
                          x, f.kTop, x, f.kTop + f.plot_height, x, f.kTop + f.plot_height + 18,
                          static_cast<int>(e));
  }
  absl::StrAppendFormat(&svg,
                        "<rect x=\"%g\" y=\"%g\" width=\"%g\" height=\"%g\" fill=\"none\" "
                        "stroke=\"black\"/>\n<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">"
                        "cache capacity (blocks, log scale)</text>\n<text x=\"18\" y=\"%g\" "
                        "text-anchor=\"middle\" transform=\"rotate(-90 18 %g)\">block hit rate "
                        "(%%)</text>\n",
                        f.kLeft, f.kTop, f.plot_width, f.plot_height, f.kLeft + f.plot_width / 2,
                        f.kHeight - 15, f.kTop + f.plot_height / 2, f.kTop + f.plot_height / 2);
}

// One line per policy, labelled at the right; then the infinite cache's rate, dashed. Returns
// nothing; `svg` grows.
void AppendSvgLines(const SvgFrame& f, const std::vector<CacheReplayResult>& results,
                    std::string& svg) {
  const char* colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"};
  int index = 0;
  for (const auto& [policy, rows] : ByPolicy(results)) {
    const char* color = colors[index % 6];
    std::string points;
    for (const auto* r : rows) {
      absl::StrAppendFormat(&points, "%g,%g ", f.X(static_cast<double>(r->capacity_blocks)),
                            f.Y(r->block_hit_rate()));
    }
    absl::StrAppendFormat(&svg,
                          "<polyline points=\"%s\" fill=\"none\" stroke=\"%s\" "
                          "stroke-width=\"2\"/>\n<text x=\"%g\" y=\"%g\" fill=\"%s\">%s</text>\n",
                          points, color, f.kLeft + f.plot_width + 10, f.kTop + 20 + 18 * index,
                          color, XmlEscape(policy));
    ++index;
  }
  if (results.empty()) return;
  const double inf = results[0].infinite_cache_block_hit_rate();
  absl::StrAppendFormat(&svg,
                        "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"gray\" "
                        "stroke-dasharray=\"6,4\"/>\n<text x=\"%g\" y=\"%g\" fill=\"gray\">"
                        "infinite cache</text>\n",
                        f.kLeft, f.Y(inf), f.kLeft + f.plot_width, f.Y(inf),
                        f.kLeft + f.plot_width + 10, f.kTop + 20 + 18 * index);
}

}  // namespace

std::string HitRateSvg(const std::vector<CacheReplayResult>& results, const std::string& title) {
  const SvgFrame frame = FrameFor(results);
  std::string svg = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%g\" height=\"%g\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" "
      "fill=\"white\"/>\n<text x=\"%g\" y=\"24\" text-anchor=\"middle\" "
      "font-size=\"15\">%s</text>\n",
      frame.kWidth, frame.kHeight, frame.kLeft + frame.plot_width / 2, XmlEscape(title));
  AppendSvgAxes(frame, svg);
  AppendSvgLines(frame, results, svg);
  svg += "</svg>\n";
  return svg;
}

absl::StatusOr<std::string> WriteHitRatePlot(const std::string& path,
                                             const std::vector<CacheReplayResult>& results,
                                             const std::string& title) {
  const std::string ext = std::filesystem::path(path).extension().string();
  if (ext != ".svg" && ext != ".png") {
    return absl::InvalidArgumentError(
        absl::StrFormat("plot file %s must end in .svg or .png", path));
  }
  if (absl::Status s = EnsureParentDir(path); !s.ok()) return s;
  if (!GnuplotAvailable()) {
    if (ext == ".png") {
      return absl::FailedPreconditionError(
          "gnuplot is not installed, so no PNG can be drawn; ask for an .svg plot instead");
    }
    if (absl::Status s = WriteFile(path, HitRateSvg(results, title)); !s.ok()) return s;
    return std::string("built-in SVG writer");
  }
  // One inline data block per policy.
  std::string script = absl::StrFormat(
      "set terminal %s size 900,560 font \"sans,11\"\nset output \"%s\"\nset title \"%s\"\n"
      "set logscale x\nset xlabel \"cache capacity (blocks)\"\nset ylabel \"block hit rate (%%)\"\n"
      "set yrange [0:100]\nset format x \"%%.0f\"\nset grid\nset key outside right\n",
      ext == ".png" ? "pngcairo" : "svg", absl::StrReplaceAll(path, {{"\"", "\\\""}}),
      absl::StrReplaceAll(title, {{"\"", "'"}}));
  const auto groups = ByPolicy(results);
  std::string plot = "plot ";
  std::string data;
  for (size_t g = 0; g < groups.size(); ++g) {
    absl::StrAppendFormat(&data, "$d%d << EOD\n", g);
    for (const auto* r : groups[g].second) {
      absl::StrAppendFormat(&data, "%d %.4f\n", r->capacity_blocks, 100 * r->block_hit_rate());
    }
    data += "EOD\n";
    absl::StrAppendFormat(&plot, "$d%d using 1:2 with linespoints lw 2 title \"%s\", ", g,
                          groups[g].first);
  }
  if (!results.empty()) {
    absl::StrAppendFormat(&plot, "%.4f with lines dt 2 lc rgb \"gray\" title \"infinite cache\"",
                          100 * results[0].infinite_cache_block_hit_rate());
  }
  script += data + plot + "\n";
  FILE* pipe = popen("gnuplot 1>&2", "w");
  if (pipe == nullptr) return absl::InternalError("cannot start gnuplot");
  std::fwrite(script.data(), 1, script.size(), pipe);
  const int rc = pclose(pipe);
  if (rc != 0) {
    return absl::InternalError(
        absl::StrFormat("gnuplot failed (exit status %d) drawing %s", rc, path));
  }
  return std::string("gnuplot");
}

}  // namespace pagedkv::replay

// Copyright 2026 The pagedkv Authors.
//
// Block residency histograms and the Prometheus text writer; see
// include/pagedkv/cache/cache_metrics.h.
#include "pagedkv/cache/cache_metrics.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace pagedkv {

Histogram::Histogram(std::vector<double> upper_bounds)
    : upper_bounds_(std::move(upper_bounds)), counts_(upper_bounds_.size() + 1, 0) {}

std::vector<double> Histogram::DefaultSecondsBounds() {
  std::vector<double> bounds;
  for (double decade = 0.001; decade < 1000.0; decade *= 10.0) {
    for (double step : {1.0, 2.0, 5.0}) bounds.push_back(decade * step);
  }
  bounds.push_back(1000.0);
  bounds.push_back(1800.0);
  return bounds;
}

void Histogram::Observe(double value) {
  const auto it = std::lower_bound(upper_bounds_.begin(), upper_bounds_.end(), value);
  ++counts_[static_cast<size_t>(it - upper_bounds_.begin())];
  ++count_;
  sum_ += value;
}

void Histogram::Clear() {
  std::fill(counts_.begin(), counts_.end(), 0);
  count_ = 0;
  sum_ = 0.0;
}

BlockLifecycleMetrics::BlockLifecycleMetrics(int32_t num_blocks,
                                             std::function<double()> now_seconds)
    : now_seconds_(std::move(now_seconds)),
      times_(static_cast<size_t>(std::max(num_blocks, 0))),
      lifetime_(Histogram::DefaultSecondsBounds()),
      idle_before_evict_(Histogram::DefaultSecondsBounds()),
      reuse_gap_(Histogram::DefaultSecondsBounds()) {}

double BlockLifecycleMetrics::Now() const {
  if (now_seconds_) return now_seconds_();
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The pool calls these with its own valid block ids; an id past the size given at construction
// (a pool larger than declared) is ignored rather than written out of bounds.
void BlockLifecycleMetrics::OnStored(BlockId block) {
  if (static_cast<size_t>(block) >= times_.size()) return;
  const double now = Now();
  times_[block] = Times{.stored = now, .last_access = now, .released = now};
}

void BlockLifecycleMetrics::OnHit(BlockId block) {
  if (static_cast<size_t>(block) >= times_.size()) return;
  const double now = Now();
  reuse_gap_.Observe(std::max(0.0, now - times_[block].last_access));
  times_[block].last_access = now;
}

void BlockLifecycleMetrics::OnReleased(BlockId block) {
  if (static_cast<size_t>(block) >= times_.size()) return;
  times_[block].released = Now();
}

void BlockLifecycleMetrics::OnEvicted(BlockId block) {
  if (static_cast<size_t>(block) >= times_.size()) return;
  const double now = Now();
  lifetime_.Observe(std::max(0.0, now - times_[block].stored));
  idle_before_evict_.Observe(std::max(0.0, now - times_[block].released));
}

void BlockLifecycleMetrics::Clear() {
  lifetime_.Clear();
  idle_before_evict_.Clear();
  reuse_gap_.Clear();
}

namespace {

bool ValidLabelName(const std::string& name) {
  if (name.empty() || name.rfind("__", 0) == 0) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

// Label values escape backslash, double quote and newline; HELP text backslash and newline.
std::string Escape(std::string_view text, bool quote) {
  std::string out;
  for (const char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (quote && c == '"') {
      out += "\\\"";
    } else {
      out += c;
    }
  }
  return out;
}

// Shortest text that reads back as the same double; "+Inf" / "NaN" as Prometheus spells them.
std::string FormatDouble(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  for (int precision = 15; precision < 17; ++precision) {
    std::string text = absl::StrFormat("%.*g", precision, v);
    if (std::strtod(text.c_str(), nullptr) == v) return text;
  }
  return absl::StrFormat("%.17g", v);
}

}  // namespace

absl::Status PrometheusWriter::CheckLabels(const PrometheusOptions& options) {
  for (const auto& [name, value] : options.labels) {
    if (!ValidLabelName(name) || name == "le") {
      return absl::InvalidArgumentError(absl::StrCat(
          "Prometheus label name '", name,
          "' is invalid: use [a-zA-Z_][a-zA-Z0-9_]*, not starting with __, and not 'le'"));
    }
  }
  return absl::OkStatus();
}

PrometheusWriter::PrometheusWriter(std::string* out, const PrometheusOptions& options) : out_(out) {
  for (const auto& [name, value] : options.labels) {
    if (!labels_.empty()) labels_ += ",";
    absl::StrAppend(&labels_, name, "=\"", Escape(value, /*quote=*/true), "\"");
  }
}

std::string PrometheusWriter::Labels(const std::string& le) const {
  std::string inner = labels_;
  if (!le.empty()) absl::StrAppend(&inner, inner.empty() ? "" : ",", "le=\"", le, "\"");
  return inner.empty() ? "" : absl::StrCat("{", inner, "}");
}

void PrometheusWriter::Header(const std::string& name, const std::string& help,
                              const std::string& type) {
  absl::StrAppend(out_, "# HELP ", name, " ", Escape(help, /*quote=*/false), "\n# TYPE ", name, " ",
                  type, "\n");
}

void PrometheusWriter::Counter(const std::string& name, const std::string& help, int64_t value) {
  Header(name, help, "counter");
  absl::StrAppend(out_, name, Labels(""), " ", value, "\n");
}

void PrometheusWriter::Gauge(const std::string& name, const std::string& help, double value) {
  Header(name, help, "gauge");
  absl::StrAppend(out_, name, Labels(""), " ", FormatDouble(value), "\n");
}

void PrometheusWriter::Histogram(const std::string& name, const std::string& help,
                                 const pagedkv::Histogram& h) {
  Header(name, help, "histogram");
  int64_t cumulative = 0;
  for (size_t i = 0; i < h.counts().size(); ++i) {
    cumulative += h.counts()[i];
    const std::string le =
        i < h.upper_bounds().size() ? FormatDouble(h.upper_bounds()[i]) : std::string("+Inf");
    absl::StrAppend(out_, name, "_bucket", Labels(le), " ", cumulative, "\n");
  }
  absl::StrAppend(out_, name, "_sum", Labels(""), " ", FormatDouble(h.sum()), "\n");
  absl::StrAppend(out_, name, "_count", Labels(""), " ", h.count(), "\n");
}

void WritePrefixCacheLookups(PrometheusWriter& w, const CacheStats& s) {
  w.Counter("pagedkv_prefix_cache_lookups_total", "Prefix-cache lookups (one per admission).",
            s.lookups);
  w.Counter("pagedkv_prefix_cache_queries_total",
            "Prompt tokens looked up in the prefix cache (vLLM's prefix_cache_queries).",
            s.queried_tokens);
  w.Counter("pagedkv_prefix_cache_hits_total",
            "Prompt tokens served from the prefix cache (vLLM's prefix_cache_hits).", s.hit_tokens);
}

}  // namespace pagedkv

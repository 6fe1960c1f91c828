// Copyright 2026 The pagedkv Authors.
#include "engine/tools/replay/progress_bar.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <utility>

namespace pagedkv::replay {

ProgressBar::ProgressBar(std::string label, int64_t total, const ProgressBarOptions& options)
    : label_(std::move(label)),
      total_(std::max<int64_t>(total, 1)),
      active_(options.enabled && isatty(STDERR_FILENO) == 1),
      delay_s_(options.delay_s),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

ProgressBar::~ProgressBar() { Finish(); }

void ProgressBar::Update(int64_t done) {
  if (!active_) return;
  const auto now = std::chrono::steady_clock::now();
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  if (elapsed < delay_s_ || std::chrono::duration<double>(now - last_draw_).count() < 0.1) return;
  last_draw_ = now;
  drawn_ = true;
  const double frac = std::clamp(static_cast<double>(done) / total_, 0.0, 1.0);
  constexpr int kWidth = 40;
  const int filled = static_cast<int>(frac * kWidth);
  std::string bar(static_cast<size_t>(filled), '#');
  bar.append(static_cast<size_t>(kWidth - filled), '.');
  const double eta = frac > 0 ? elapsed * (1 - frac) / frac : 0;
  std::fprintf(stderr, "\r%s [%s] %5.1f%%  %.0fs left ", label_.c_str(), bar.c_str(), 100 * frac,
               eta);
  std::fflush(stderr);
}

void ProgressBar::Finish() {
  if (drawn_) {
    std::fprintf(stderr, "\r%*s\r", static_cast<int>(label_.size()) + 70, "");
    std::fflush(stderr);
    drawn_ = false;
  }
}

}  // namespace pagedkv::replay

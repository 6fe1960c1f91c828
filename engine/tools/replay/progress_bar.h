// Copyright 2026 The pagedkv Authors.
//
// ProgressBar: a one-line progress bar on stderr, drawn only when stderr is a terminal and the
// run is long (nothing appears during the first second), so pipes and logs stay clean.
//
// Example:
//   ProgressBar bar("replay", total_blocks);
//   for (...) bar.Update(done);
//   bar.Finish();
#ifndef PAGEDKV_ENGINE_TOOLS_REPLAY_PROGRESS_BAR_H_
#define PAGEDKV_ENGINE_TOOLS_REPLAY_PROGRESS_BAR_H_

#include <chrono>
#include <cstdint>
#include <string>

#include "pagedkv/export.h"

namespace pagedkv::replay {

struct PAGEDKV_EXPORT ProgressBarOptions {
  bool enabled = true;   // false: never draw (e.g. --json or --no-progress)
  double delay_s = 1.0;  // draw only once the run has taken this long
};

class PAGEDKV_EXPORT ProgressBar {
 public:
  ProgressBar(std::string label, int64_t total, const ProgressBarOptions& options = {});
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  // Records `done` units (of total) and redraws at most ~10 times a second.
  void Update(int64_t done);
  // Clears the line if one was drawn.
  void Finish();

 private:
  std::string label_;
  int64_t total_;
  bool active_;  // stderr is a terminal and drawing is enabled
  bool drawn_ = false;
  double delay_s_;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
};

}  // namespace pagedkv::replay

#endif  // PAGEDKV_ENGINE_TOOLS_REPLAY_PROGRESS_BAR_H_

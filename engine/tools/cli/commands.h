// Copyright 2026 The pagedkv Authors.
//
// Subcommands of the `pagedkv` tool. Each Add*Command registers one subcommand on `app`; when that
// subcommand runs, its callback stores the process exit code in `*exit_code` (0 on success).
//
// Example (main.cc):
//   int exit_code = 0;
//   AddReplayCommand(app, &exit_code);
#ifndef PAGEDKV_ENGINE_TOOLS_CLI_COMMANDS_H_
#define PAGEDKV_ENGINE_TOOLS_CLI_COMMANDS_H_

#include "CLI/CLI.hpp"
#include "pagedkv/export.h"

namespace pagedkv::cli {

// `pagedkv replay`: prefix hit rates on built-in workloads and Mooncake traces
// (engine/tools/replay).
PAGEDKV_EXPORT void AddReplayCommand(CLI::App& app, int* exit_code);

// `pagedkv generate`: text generation with a llama2.c model on the paged engine (engine/runtime).
PAGEDKV_EXPORT void AddGenerateCommand(CLI::App& app, int* exit_code);

// `pagedkv serve`: OpenAI's HTTP API on the engine (engine/serve/http).
PAGEDKV_EXPORT void AddServeCommand(CLI::App& app, int* exit_code);

// `pagedkv study-shift`: shifted-position reuse study - re-rotation exactness, drift, quality
// (engine/runtime/shift).
PAGEDKV_EXPORT void AddStudyShiftCommand(CLI::App& app, int* exit_code);

// `pagedkv kv-events listen`: prints a KV event stream (kv_events_command.cc).
PAGEDKV_EXPORT void AddKvEventsCommand(CLI::App& app, int* exit_code);

}  // namespace pagedkv::cli

#endif  // PAGEDKV_ENGINE_TOOLS_CLI_COMMANDS_H_

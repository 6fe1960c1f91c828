// Copyright 2026 The pagedkv Authors.
//
// `pagedkv`: the command-line tool. Subcommands are registered from commands.h.
#include "CLI/CLI.hpp"
#include "engine/cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"pagedkv: paged KV cache, prefix caching and shifted-position reuse"};
  app.require_subcommand(1);
  int exit_code = 0;
  // One line per subcommand (see commands.h).
  pagedkv::cli::AddReplayCommand(app, &exit_code);
  pagedkv::cli::AddGenerateCommand(app, &exit_code);
  pagedkv::cli::AddStudyShiftCommand(app, &exit_code);
  pagedkv::cli::AddKvEventsCommand(app, &exit_code);
  CLI11_PARSE(app, argc, argv);
  return exit_code;
}

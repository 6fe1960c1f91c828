// Copyright 2026 The pagedkv Authors.
//
// `pagedkv`: the command-line tool. Subcommands are registered from commands.h.
#include <iostream>
#include <new>
#include <stdexcept>
#include <string>

#include "CLI/CLI.hpp"
#include "engine/tools/cli/commands.h"
#include "pagedkv/version.h"

int main(int argc, char** argv) {
  CLI::App app{"pagedkv: paged KV cache, prefix caching and shifted-position reuse"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string(pagedkv::VersionString()));
  int exit_code = 0;
  // One line per subcommand (see commands.h).
  pagedkv::cli::AddReplayCommand(app, &exit_code);
  pagedkv::cli::AddGenerateCommand(app, &exit_code);
  pagedkv::cli::AddServeCommand(app, &exit_code);
  pagedkv::cli::AddStudyShiftCommand(app, &exit_code);
  pagedkv::cli::AddKvEventsCommand(app, &exit_code);
  // The commands budget their memory and return errors; this is the last line of defence, so that
  // an allocation failure is a message and an exit code, never an abort.
  try {
    CLI11_PARSE(app, argc, argv);
  } catch (const std::bad_alloc&) {
    std::cerr << "pagedkv: out of memory; use smaller inputs or lower the limits\n";
    return 1;
  } catch (const std::length_error& e) {
    std::cerr << "pagedkv: a size is too large (" << e.what() << "); use smaller inputs\n";
    return 1;
  }
  return exit_code;
}

// aotpipe: the command-line front end of the library. Subcommands live in cmd_*.cpp.
#include "aotpipe/commands.h"
#include "aotpipe/cuda_plugin.h"

#include <CLI/CLI.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#ifndef AOTPIPE_VERSION
#define AOTPIPE_VERSION "unknown"
#endif

namespace {
// Ends the process without the exit-time destructors of the libraries: libtorch's and the CUDA
// libraries' take a fifth of a short run (a warm `aotpipe compile`), and nothing of ours needs
// them. Every command has closed its files when it returns; the streams are flushed here.
// Sanitizer builds exit normally: their leak check runs at exit.
[[noreturn]] void exit_now(int rc) {
  spdlog::shutdown();
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  std::exit(rc);
#else
  std::_Exit(rc);
#endif
}
// The command line parsed and its command run; what a command throws is reported here, with the
// command's name.
int run_command_line(int argc, char** argv) {
  CLI::App app{"aotpipe: ahead-of-time compilation of PyTorch ATen graphs", "aotpipe"};
  app.set_version_flag("--version", AOTPIPE_VERSION);
  app.require_subcommand(1);
  std::string log_level = "warn";
  app.add_option("--log-level", log_level, "Diagnostics on stderr: trace, debug, info, warn, error, off")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}))
      ->capture_default_str();
  bool verbose = false;
  app.add_flag("-v,--verbose", verbose, "Same as --log-level=info");

  std::vector<aotpipe::cli::Command> commands{
      aotpipe::cli::add_show_command(app),    aotpipe::cli::add_run_command(app),
      aotpipe::cli::add_compile_command(app), aotpipe::cli::add_gather_command(app),
      aotpipe::cli::add_cache_command(app),   aotpipe::cli::add_package_command(app),
  };

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; every usage error exits 2, as the commands' own usage errors do.
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }

  // Diagnostics go to stderr; reports (what a command prints as its result) to stdout.
  auto logger = spdlog::stderr_color_mt("aotpipe");
  logger->set_pattern("[%n] [%^%l%$] %v");
  spdlog::set_default_logger(logger);
  spdlog::set_level(verbose && log_level == "warn" ? spdlog::level::info : spdlog::level::from_str(log_level));

  for (auto& command : commands) {
    if (!command.app->parsed()) continue;
    try {
      // Before any ATen work: ATen asks once whether CUDA is there.
      aotpipe::cli::load_cuda_if_wanted(command.names_cuda && command.names_cuda());
      exit_now(command.run());
    } catch (const std::exception& e) {
      spdlog::critical("{}: {}", command.app->get_name(), e.what());
      exit_now(2);
    }
  }
  return 2;  // unreachable: a subcommand is required
}

}  // namespace

int main(int argc, char** argv) {
  // What escapes: setting up the options or the logger failed (out of memory, a closed stderr).
  try {
    return run_command_line(argc, argv);
  } catch (const std::exception& e) { std::fprintf(stderr, "aotpipe: %s\n", e.what()); } catch (...) {
    std::fprintf(stderr, "aotpipe: an unknown error\n");
  }
  return 2;
}

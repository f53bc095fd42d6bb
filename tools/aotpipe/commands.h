#pragma once
// The subcommands of the `aotpipe` tool, one file each (cmd_<name>.cpp). Each registers its
// options on the parent CLI11 app and returns what to run once the command line is parsed.
#include <CLI/CLI.hpp>

#include <functional>

namespace aotpipe::cli {

struct Command {
  CLI::App* app = nullptr;   // the subcommand, to test whether it was chosen
  std::function<int()> run;  // the exit status of the command
  // Whether the parsed command line names a CUDA device or backend: then CUDA is loaded before
  // the command runs (cuda_plugin.h). Empty: it never does.
  std::function<bool()> names_cuda = {};
};

// aotpipe show FILE...: parse, verify and print graphs back in the text form.
Command add_show_command(CLI::App& parent);
// aotpipe run INPUT... [--seed N] [--check-meta]: run graphs on random inputs, report each.
Command add_run_command(CLI::App& parent);
// aotpipe compile INPUT... [-j N] [--pipeline SPEC] [--partitioner P] [--out DIR] [--trace FILE]
// [--check]: compile graphs concurrently through the full pipeline, report each.
Command add_compile_command(CLI::App& parent);
// aotpipe gather MANIFEST|DIR...: the one report of a batch compiled with --shard K/N.
Command add_gather_command(CLI::App& parent);
// aotpipe cache stats|clear|explain INPUT...: the compile cache.
Command add_cache_command(CLI::App& parent);
// aotpipe package info FILE...: what packages (.aotpkg) hold, checked.
Command add_package_command(CLI::App& parent);

}  // namespace aotpipe::cli

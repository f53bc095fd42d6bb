// aotpipe show FILE...: parse each graph file, verify it and print it back in the text form.
// A torch.export archive (.pt2) is imported and printed with its graph signature as comments.
// With several graphs, each is preceded by a `# <file>` comment line (the parser skips it).
#include "aotpipe/commands.h"
#include "aotpipe/exported_programs.h"
#include "aotpipe/graph_files.h"
#include "aotpipe/load_graph.h"

#include <aotpipe/graph/printer.h>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <string>
#include <vector>

namespace aotpipe::cli {

Command add_show_command(CLI::App& parent) {
  auto paths = std::make_shared<std::vector<std::string>>();
  CLI::App* app = parent.add_subcommand(
      "show",
      "Parse, verify and print graph files (.aotg) in the canonical text form; import torch.export archives "
      "(.pt2) and print their graph and signature");
  app->add_option("files", *paths, "Graph files, or directories searched recursively for *.aotg and *.pt2")->required();

  return {app, [paths] {
            auto files = collect_graph_files(*paths, {kGraphExtension, kExportExtension});
            int failed = 0;
            bool first = true;
            for (const GraphFile& file : files) {
              if (!file.error.empty()) {
                fmt::print(stderr, "{}: error: {}\n", file.path.string(), file.error);
                ++failed;
                continue;
              }
              spdlog::info("reading {}", file.path.string());
              if (is_exported_program_file(file.path)) {
                try {
                  ExportedProgram program = load_exported_program(file.path);
                  if (files.size() > 1) fmt::print("{}# {}\n", first ? "" : "\n", file.path.string());
                  first = false;
                  fmt::print("{}{}", describe_exported_program(program), print_graph(program.graph()));
                  std::fflush(stdout);
                } catch (const std::exception& e) {
                  fmt::print(stderr, "{}: import error: {}\n", file.path.string(), strip_backtrace(e.what()));
                  ++failed;
                }
                continue;
              }
              LoadedGraph loaded = load_graph(file.path);
              if (loaded.failure) {
                fmt::print(stderr, "{}: {}: {}\n", file.path.string(), to_string(loaded.failure->stage),
                           loaded.failure->message);
                ++failed;
                continue;
              }
              if (files.size() > 1) fmt::print("{}# {}\n", first ? "" : "\n", file.path.string());
              first = false;
              fmt::print("{}", print_graph(*loaded.graph));
              std::fflush(stdout);
            }
            return failed ? 1 : 0;
          }};
}

}  // namespace aotpipe::cli

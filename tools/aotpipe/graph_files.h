#pragma once
// Finding and reading graph files: the IR text form (.aotg) and torch.export archives (.pt2).
#include <filesystem>
#include <string>
#include <vector>

namespace aotpipe::cli {

inline constexpr const char* kGraphExtension = ".aotg";
inline constexpr const char* kExportExtension = ".pt2";

// True for a torch.export archive (by its extension).
bool is_exported_program_file(const std::filesystem::path& path);

// One entry per graph file to process, in order. `error` is set for a command-line path that
// does not exist, a directory that cannot be listed or holds no graph file; such entries are
// failures to report.
struct GraphFile {
  std::filesystem::path path;
  std::string error;
};

// Expands command-line paths: a file is taken as is (whatever its extension); a directory
// contributes every file below it with one of `extensions`, recursively, sorted by path. A
// directory holding no such file is an error entry too.
std::vector<GraphFile> collect_graph_files(const std::vector<std::string>& paths,
                                           const std::vector<std::string>& extensions = {kGraphExtension});

// The name the file's graph will have in a batch's report and output folders: an .aotg file's
// declared `graph NAME(`, or the file's stem (a .pt2 archive, or a file that does not declare one).
// Reads only the start of the file.
std::string graph_name_hint(const GraphFile& file);

// Names made unique in order ("name", "name#2", ...). Applied to the hints of a whole batch, every
// MPI rank and --shard task computes the same names, so their output folders never collide.
std::vector<std::string> unique_names(const std::vector<std::string>& names_in_order);

// The whole file as text; throws std::runtime_error naming the file and the reason.
std::string read_text_file(const std::filesystem::path& path);

}  // namespace aotpipe::cli

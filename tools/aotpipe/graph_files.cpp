#include "aotpipe/graph_files.h"

#include <aotpipe/graph/parser.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <system_error>
#include <utility>

namespace aotpipe::cli {

namespace fs = std::filesystem;

bool is_exported_program_file(const fs::path& path) { return path.extension() == kExportExtension; }

std::vector<GraphFile> collect_graph_files(const std::vector<std::string>& paths,
                                           const std::vector<std::string>& extensions) {
  auto wanted = [&](const fs::path& p) {
    return std::find(extensions.begin(), extensions.end(), p.extension().string()) != extensions.end();
  };
  std::vector<GraphFile> files;
  for (const std::string& arg : paths) {
    fs::path path(arg);
    std::error_code ec;
    auto status = fs::status(path, ec);
    if (ec || !fs::exists(status)) {
      files.push_back({path, "no such file or directory"});
      continue;
    }
    if (!fs::is_directory(status)) {
      files.push_back({path, {}});
      continue;
    }
    std::vector<fs::path> found;
    fs::recursive_directory_iterator it(path, fs::directory_options::follow_directory_symlink, ec);
    for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (wanted(it->path()) && !it->is_directory()) found.push_back(it->path());
    }
    if (ec) {
      files.push_back({path, fmt::format("cannot list directory: {}", ec.message())});
      continue;
    }
    if (found.empty()) {
      files.push_back({path, fmt::format("directory holds no {} files", fmt::join(extensions, " or "))});
      continue;
    }
    std::sort(found.begin(), found.end());
    for (auto& p : found) files.push_back({std::move(p), {}});
  }
  return files;
}

std::string read_text_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(fmt::format("cannot open: {}", std::strerror(errno)));
  // One read of the size the file has now (a warm `aotpipe compile` hashes every file it is given),
  // then on to the end in case it grew meanwhile.
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  std::string text(ec ? 0 : static_cast<std::size_t>(size), '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  if (in.eof()) return text;  // shorter than file_size said
  char rest[4096];
  while (in.read(rest, sizeof rest) || in.gcount() > 0) text.append(rest, static_cast<std::size_t>(in.gcount()));
  if (in.bad()) throw std::runtime_error(fmt::format("cannot read: {}", std::strerror(errno)));
  return text;
}

std::string graph_name_hint(const GraphFile& file) {
  std::string stem = file.path.stem().string();
  if (!file.error.empty() || is_exported_program_file(file.path)) return stem;
  std::ifstream in(file.path, std::ios::binary);
  constexpr std::size_t kHeadBytes = std::size_t{64} * 1024;  // where a graph file names its graph
  std::string head(kHeadBytes, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<std::size_t>(std::max<std::streamsize>(in.gcount(), 0)));
  return peek_graph_name(head).value_or(std::move(stem));
}

std::vector<std::string> unique_names(const std::vector<std::string>& names_in_order) {
  std::vector<std::string> names;
  names.reserve(names_in_order.size());
  std::map<std::string, int> seen;
  for (std::string name : names_in_order) {
    const int n = ++seen[name];
    names.push_back(n > 1 ? fmt::format("{}#{}", name, n) : std::move(name));
  }
  return names;
}

}  // namespace aotpipe::cli

#pragma once
// A fresh folder for a test, removed with its files afterwards. Files and folders are removed one
// by one: libtorch exports its own std::filesystem::remove_all, which crashes.
#include <filesystem>
#include <string>
#include <vector>

#include <stdlib.h>
#include <unistd.h>

namespace aotpipe::testing {

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "aotpipe-test-XXXXXX").string();
    path = ::mkdtemp(pattern.data());
  }
  ~TempDir() {
    namespace fs = std::filesystem;
    std::vector<fs::path> folders;
    for (auto it = fs::recursive_directory_iterator(path); it != fs::recursive_directory_iterator(); ++it)
      if (it->is_directory())
        folders.push_back(it->path());
      else
        ::unlink(it->path().c_str());
    for (auto it = folders.rbegin(); it != folders.rend(); ++it) ::rmdir(it->c_str());
    ::rmdir(path.c_str());
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

}  // namespace aotpipe::testing

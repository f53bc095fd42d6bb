#include "fuzz_input.h"

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include <sys/mman.h>
#include <unistd.h>

namespace aotpipe::fuzz {

MemoryFile::MemoryFile(std::string_view bytes) : fd_(::memfd_create("aotpipe-fuzz-input", MFD_CLOEXEC)) {
  if (fd_ < 0) throw std::runtime_error("memfd_create failed");
  for (std::size_t done = 0; done < bytes.size();) {
    const ssize_t n = ::write(fd_, bytes.data() + done, bytes.size() - done);
    if (n <= 0) throw std::runtime_error("writing the memfd failed");
    done += static_cast<std::size_t>(n);
  }
  path_ = fmt::format("/proc/self/fd/{}", fd_);
}

MemoryFile::~MemoryFile() { ::close(fd_); }

void report_answer(std::string_view target, const char* rejection) {
  static const bool verbose = std::getenv("AOTPIPE_FUZZ_VERBOSE") != nullptr;
  if (!verbose) return;
  if (rejection)
    std::fprintf(stderr, "%.*s: rejected: %s\n", static_cast<int>(target.size()), target.data(), rejection);
  else
    std::fprintf(stderr, "%.*s: accepted\n", static_cast<int>(target.size()), target.data());
}

void undocumented_error(std::string_view target, std::string_view expected, const std::exception& e) {
  std::fprintf(stderr, "%.*s: expected %.*s or success, got another exception: %s\n", static_cast<int>(target.size()),
               target.data(), static_cast<int>(expected.size()), expected.data(), e.what());
  std::abort();
}

void property_failed(std::string_view target, std::string_view what) {
  std::fprintf(stderr, "%.*s: %.*s\n", static_cast<int>(target.size()), target.data(), static_cast<int>(what.size()),
               what.data());
  std::abort();
}

}  // namespace aotpipe::fuzz

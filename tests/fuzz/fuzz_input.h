#pragma once
// What the fuzz targets (tests/fuzz/*_fuzzer.cpp, docs/fuzzing.md) share: fuzz bytes as a file
// for the readers that take a path, and the rule every target applies to what a reader throws.
#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>
#include <string_view>

namespace aotpipe::fuzz {

// An anonymous in-memory file (memfd_create) holding `bytes`, opened by path as any file is
// (/proc/self/fd/N): the .pt2 and package readers take a path and may map what they read.
class MemoryFile {
 public:
  explicit MemoryFile(std::string_view bytes);
  ~MemoryFile();
  MemoryFile(const MemoryFile&) = delete;
  MemoryFile& operator=(const MemoryFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  int fd_ = -1;
  std::string path_;
};

inline std::string_view as_text(const uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// A reader must reject bad input with its documented error, whose message says what is wrong.
// Anything else that escapes it (std::out_of_range from a bounds check it forgot, a c10::Error
// it did not translate) is a finding: this prints what was thrown and aborts, so that libFuzzer
// keeps the input.
[[noreturn]] void undocumented_error(std::string_view target, std::string_view expected, const std::exception& e);

// Runs `read`; an `Expected` error is the reader's answer to bad input (false), anything else
// is a finding (undocumented_error). True when `read` returned.
// With AOTPIPE_FUZZ_VERBOSE set, says on stderr how each input was answered (for triage: which
// seeds a reader accepts, what it says of the others).
void report_answer(std::string_view target, const char* rejection);

template <class Expected, class Read>
bool rejects_only_with(std::string_view target, std::string_view expected, Read&& read) {
  try {
    read();
    report_answer(target, nullptr);
    return true;
  } catch (const Expected& e) {
    report_answer(target, e.what());
    return false;
  } catch (const std::exception& e) { undocumented_error(target, expected, e); }
}

// Aborts with `what`: a property the target checks (a round trip) does not hold.
[[noreturn]] void property_failed(std::string_view target, std::string_view what);

}  // namespace aotpipe::fuzz

#pragma once
// A file mapped copy-on-write (MAP_PRIVATE, readable and writable): its pages are read from disk
// when first touched, and writes to them stay in this process. Tensors made over it
// (tensor_over) hold the mapping, so it lives as long as the last of them.
//
// What a mapping cannot protect against: the file truncated or rewritten in place by another
// process while mapped (touching a page past its new end raises SIGBUS). Write a new file and
// rename it over the old one instead (as aotpipe's package writer does).
#include <ATen/core/Tensor.h>

#include <cstddef>
#include <filesystem>
#include <memory>

namespace aotpipe {

class MappedFile {
 public:
  // Throws std::runtime_error naming the file and the system's reason. An empty file maps to
  // no pages (data() is null, size() 0).
  static std::shared_ptr<const MappedFile> open(const std::filesystem::path& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::filesystem::path& path() const { return path_; }
  const char* data() const { return static_cast<const char*>(address_); }
  std::size_t size() const { return size_; }

 private:
  MappedFile(std::filesystem::path path, void* address, std::size_t size)
      : path_(std::move(path)), address_(address), size_(size) {}
  std::filesystem::path path_;
  void* address_;
  std::size_t size_;
};

// A tensor of `sizes` and `strides` (elements of `dtype`) whose storage is the file's bytes from
// `offset` on, copy-on-write; it keeps the mapping alive. The caller checks that the range lies
// in the file and that `offset` suits the dtype's alignment.
at::Tensor tensor_over(const std::shared_ptr<const MappedFile>& file, std::size_t offset, c10::IntArrayRef sizes,
                       c10::IntArrayRef strides, c10::ScalarType dtype);

}  // namespace aotpipe

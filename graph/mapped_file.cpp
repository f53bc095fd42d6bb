#include <aotpipe/graph/mapped_file.h>

#include <ATen/ops/from_blob.h>
#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace aotpipe {

namespace {
// Closed when the scope ends: the mapping keeps the file open by itself.
struct FileDescriptor {
  int fd;
  ~FileDescriptor() {
    if (fd >= 0) ::close(fd);
  }
};
}  // namespace

std::shared_ptr<const MappedFile> MappedFile::open(const std::filesystem::path& path) {
  auto fail = [&](std::string_view what) {
    return std::runtime_error(fmt::format("'{}': {}: {}", path.string(), what, std::strerror(errno)));
  };
  const FileDescriptor file{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (file.fd < 0) throw fail("cannot open it");
  struct stat st {};
  if (::fstat(file.fd, &st) != 0) throw fail("cannot stat it");
  if (!S_ISREG(st.st_mode)) throw std::runtime_error(fmt::format("'{}': not a regular file", path.string()));
  const auto size = static_cast<std::size_t>(st.st_size);
  void* address = nullptr;
  if (size > 0) {
    address = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, file.fd, 0);
    if (address == MAP_FAILED) throw fail("cannot map it");
  }
  return std::shared_ptr<const MappedFile>(new MappedFile(path, address, size));
}

MappedFile::~MappedFile() {
  if (address_) ::munmap(address_, size_);
}

at::Tensor tensor_over(const std::shared_ptr<const MappedFile>& file, std::size_t offset, c10::IntArrayRef sizes,
                       c10::IntArrayRef strides, c10::ScalarType dtype) {
  std::shared_ptr<const MappedFile> owner = file;
  return at::from_blob(
      const_cast<char*>(file->data()) + offset, sizes, strides, [owner](void*) mutable { owner.reset(); },
      at::TensorOptions().dtype(dtype).device(c10::kCPU));
}

}  // namespace aotpipe

#include <aotpipe/export/internal/torch_save_reader.h>
#include <aotpipe/graph/layout_bounds.h>
#include <aotpipe/graph/tensor_meta.h>

#include <caffe2/serialize/inline_container.h>
#include <caffe2/serialize/read_adapter_interface.h>
#include <fmt/format.h>
#include <torch/csrc/jit/serialization/import_read.h>
#include <torch/csrc/jit/serialization/storage_context.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>
#include <stdexcept>

namespace aotpipe::pt2 {
namespace {

// Reads what there is: libtorch's VectorReader and MemoryReadAdapter copy as many bytes as asked.
class BoundedBytes final : public caffe2::serialize::ReadAdapterInterface {
 public:
  BoundedBytes(const at::DataPtr& data, std::size_t size) : data_(static_cast<const char*>(data.get())), size_(size) {}
  std::size_t size() const override { return size_; }
  std::size_t read(uint64_t pos, void* buf, std::size_t n, const char* /*what*/) const override {
    if (pos >= size_) return 0;
    n = std::min<std::size_t>(n, size_ - pos);
    std::memcpy(buf, data_ + pos, n);
    return n;
  }

 private:
  const char* data_;
  std::size_t size_;
};

[[noreturn]] void fail(const std::string& message) { throw std::runtime_error(message); }

uint64_t little_endian(const unsigned char* p, std::size_t bytes) {
  uint64_t v = 0;
  for (std::size_t i = bytes; i-- > 0;) v = v << 8 | p[i];
  return v;
}

// Walks every opcode of a pickle (protocols 0 to 5) and checks that each argument, length-prefixed
// ones above all, lies inside it: torch's unpickler allocates a length before it reads. So does
// its memo: a PUT grows it to the entry's index (16 bytes an entry) whatever came before, and a
// pickle cannot hold more entries than it has bytes.
void check_pickle(const unsigned char* p, std::size_t size) {
  std::size_t at = 0;
  auto need = [&](std::size_t n, char op) {
    if (n > size - at)
      fail(fmt::format("pickle opcode 0x{:02x} at byte {} needs {} bytes, {} are left", static_cast<unsigned char>(op),
                       at - 1, n, size - at));
  };
  auto line = [&](char op) {
    const void* end = std::memchr(p + at, '\n', size - at);
    if (!end)
      fail(fmt::format("pickle opcode 0x{:02x} at byte {} has no end of line", static_cast<unsigned char>(op), at - 1));
    at = static_cast<const unsigned char*>(end) - p + 1;
  };
  auto memo_entry = [&](uint64_t entry, char op, std::size_t op_at) {
    if (entry >= size)
      fail(fmt::format("pickle opcode 0x{:02x} at byte {} puts memo entry {}, more than a pickle of {} bytes holds",
                       static_cast<unsigned char>(op), op_at, entry, size));
  };
  while (at < size) {
    const char op = static_cast<char>(p[at++]);
    switch (op) {
      case '.':
        return;  // STOP
      // No argument.
      case '(':
      case '0':
      case '1':
      case '2':
      case 'N':
      case 'a':
      case 'b':
      case 'd':
      case '}':
      case 'e':
      case 'l':
      case ']':
      case 'o':
      case 'R':
      case 's':
      case 't':
      case ')':
      case 'u':
      case 'Q':
      case '\x81':
      case '\x85':
      case '\x86':
      case '\x87':
      case '\x88':
      case '\x89':
      case '\x8f':
      case '\x90':
      case '\x91':
      case '\x92':
      case '\x93':
      case '\x94':
      case '\x97':
      case '\x98': break;
      // Fixed-size arguments.
      case 'K':
      case 'h':
      case 'q':
      case '\x80':
      case '\x82':
        need(1, op);
        at += 1;
        break;
      case 'M':
      case '\x83':
        need(2, op);
        at += 2;
        break;
      case 'J':
      case 'j':
      case '\x84':
        need(4, op);
        at += 4;
        break;
      case 'r':  // LONG_BINPUT
        need(4, op);
        memo_entry(little_endian(p + at, 4), op, at - 1);
        at += 4;
        break;
      case 'G':
      case '\x95':
        need(8, op);
        at += 8;
        break;
      // Length-prefixed arguments.
      case 'U':
      case 'C':
      case '\x8c':
      case '\x8a':
      case 'T':
      case 'B':
      case 'X':
      case '\x8b':
      case '\x8d':
      case '\x8e':
      case '\x96': {
        const std::size_t width = std::string_view("UC\x8c\x8a").find(op) != std::string_view::npos ? 1
                                  : std::string_view("TBX\x8b").find(op) != std::string_view::npos  ? 4
                                                                                                    : 8;
        need(width, op);
        const uint64_t length = little_endian(p + at, width);
        at += width;
        need(length, op);
        at += length;
        break;
      }
      // Arguments ending at a newline; GLOBAL and INST have two.
      case 'I':
      case 'L':
      case 'F':
      case 'S':
      case 'V':
      case 'P':
      case 'g': line(op); break;
      case 'p': {  // PUT: the entry in decimal
        const std::size_t op_at = at - 1, first = at;
        line(op);
        uint64_t entry = 0;
        for (std::size_t i = first; i + 1 < at; ++i)
          if (p[i] >= '0' && p[i] <= '9' && entry < (uint64_t{1} << 59)) entry = entry * 10 + (p[i] - '0');
        memo_entry(entry, op, op_at);
        break;
      }
      case 'c':
      case 'i':
        line(op);
        line(op);
        break;
      default:
        fail(fmt::format("pickle opcode 0x{:02x} at byte {} is not one this reader knows",
                         static_cast<unsigned char>(op), at - 1));
    }
  }
  fail("the pickle has no STOP opcode");
}

void check_tensors(const c10::IValue& v) {
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    if (!t.defined() || !t.has_storage()) return;
    const TensorMeta meta = TensorMeta::of(t);
    if (auto error = layout_error(meta)) fail(fmt::format("a tensor's layout: {}", *error));
    const auto bytes = static_cast<std::size_t>(storage_extent(meta)) * t.element_size();
    if (bytes > t.storage().nbytes())
      fail(fmt::format("a tensor ({}) reaches byte {} of a storage of {}", to_string(meta), bytes,
                       t.storage().nbytes()));
    return;
  }
  if (v.isTuple())
    for (const c10::IValue& e : v.toTupleRef().elements()) check_tensors(e);
  if (v.isList())
    for (const c10::IValue& e : v.toListRef()) check_tensors(e);
  if (v.isGenericDict())
    for (const auto& entry : v.toGenericDict()) {
      check_tensors(entry.key());
      check_tensors(entry.value());
    }
}

}  // namespace

std::optional<std::string> zip_overclaim(std::uint64_t zip_bytes, const ZipReadAt& read_at) {
  auto u16 = [](const unsigned char* p) { return static_cast<std::uint32_t>(p[0] | p[1] << 8); };
  auto u32 = [&](const unsigned char* p) { return u16(p) | u16(p + 2) << 16; };
  auto u64 = [&](const unsigned char* p) { return u32(p) | static_cast<std::uint64_t>(u32(p + 4)) << 32; };
  // The end-of-central-directory record: 22 bytes and a comment of up to 65535, at the end.
  constexpr std::size_t kEndRecord = 22;
  const std::size_t tail_size = static_cast<std::size_t>(std::min<std::uint64_t>(zip_bytes, kEndRecord + 65535));
  if (tail_size < kEndRecord) return std::nullopt;
  std::vector<unsigned char> tail(tail_size);
  if (!read_at(zip_bytes - tail_size, tail_size, tail.data())) return std::nullopt;
  std::size_t end = tail_size - kEndRecord + 1;
  while (end-- > 0 && u32(&tail[end]) != 0x06054b50) {}
  if (end == static_cast<std::size_t>(-1)) return std::nullopt;
  std::uint64_t entries = u16(&tail[end + 10]);
  std::uint64_t directory_size = u32(&tail[end + 12]);
  std::uint64_t directory_offset = u32(&tail[end + 16]);
  if (entries == 0xffff || directory_size == 0xffffffff || directory_offset == 0xffffffff) {
    // zip64: a locator just before the record points to the zip64 end record.
    const std::uint64_t end_at = zip_bytes - tail_size + end;
    unsigned char locator[20], record[56];
    if (end_at < 20 || !read_at(end_at - 20, 20, locator) || u32(locator) != 0x07064b50) return std::nullopt;
    if (!read_at(u64(locator + 8), 56, record) || u32(record) != 0x06064b50) return std::nullopt;
    entries = u64(record + 32);
    directory_size = u64(record + 40);
    directory_offset = u64(record + 48);
  }
  if (directory_size > zip_bytes || directory_offset > zip_bytes - directory_size) return std::nullopt;
  // An empty directory claims nothing (and its buffer would have no memory to read into).
  if (directory_size == 0) return std::nullopt;
  std::vector<unsigned char> directory(static_cast<std::size_t>(directory_size));
  if (!read_at(directory_offset, directory.size(), directory.data())) return std::nullopt;
  std::size_t at = 0;
  for (std::uint64_t e = 0; e < entries && at + 46 <= directory.size() && u32(&directory[at]) == 0x02014b50; ++e) {
    const std::size_t name_length = u16(&directory[at + 28]), extra_length = u16(&directory[at + 30]);
    const std::size_t comment_length = u16(&directory[at + 32]);
    if (at + 46 + name_length + extra_length > directory.size()) return std::nullopt;
    std::uint64_t claimed = u32(&directory[at + 24]);
    if (claimed == 0xffffffff) {
      // The zip64 extra field (id 1) holds the real size first.
      for (std::size_t x = at + 46 + name_length; x + 4 <= at + 46 + name_length + extra_length;
           x += 4 + u16(&directory[x + 2]))
        if (u16(&directory[x]) == 1 && u16(&directory[x + 2]) >= 8 && x + 12 <= directory.size())
          claimed = u64(&directory[x + 4]);
    }
    if (!zip_claim_fits(static_cast<std::size_t>(std::min<std::uint64_t>(claimed, SIZE_MAX)),
                        static_cast<std::size_t>(zip_bytes)))
      return fmt::format("record '{}' claims {} bytes",
                         std::string(reinterpret_cast<const char*>(&directory[at + 46]), name_length), claimed);
    at += 46 + name_length + extra_length + comment_length;
  }
  return std::nullopt;
}

c10::IValue load_torch_save(const at::DataPtr& bytes, std::size_t size) {
  const auto* data = static_cast<const unsigned char*>(bytes.get());
  if (auto overclaim = zip_overclaim(size, [&](std::uint64_t offset, std::size_t n, unsigned char* out) {
        if (offset > size || n > size - offset) return false;
        if (n > 0) std::memcpy(out, data + offset, n);
        return true;
      }))
    fail(fmt::format("{}, more than {} bytes can hold", *overclaim, size));
  caffe2::serialize::PyTorchStreamReader reader(std::make_shared<BoundedBytes>(bytes, size));
  // Every storage read here at the size its record has, not the size its pickle names.
  auto storages = std::make_shared<torch::jit::DeserializationStorageContext>();
  for (const std::string& record : reader.getAllRecords()) {
    const std::size_t record_size = reader.getRecordSize(record);
    if (!zip_claim_fits(record_size, size))
      fail(fmt::format("record '{}' claims {} bytes, more than {} bytes can hold", record, record_size, size));
    if (record.starts_with("data/") && !storages->hasStorage(record.substr(5))) {
      auto [data, n] = reader.getRecord(record);
      storages->addStorage(record.substr(5), at::Storage(c10::Storage::use_byte_size_t(), n, std::move(data),
                                                         /*allocator=*/nullptr, /*resizable=*/false));
    }
  }
  if (!reader.hasRecord("data.pkl")) fail("no data.pkl: not a torch.save file");
  auto [pickle, pickle_size] = reader.getRecord("data.pkl");
  check_pickle(static_cast<const unsigned char*>(pickle.get()), pickle_size);
  c10::IValue value = torch::jit::readArchiveAndTensors("data", /*pickle_prefix=*/"", /*tensor_prefix=*/"",
                                                        /*type_resolver=*/std::nullopt, /*obj_loader=*/std::nullopt,
                                                        /*device=*/std::nullopt, reader,
                                                        torch::jit::Unpickler::defaultTypeParser, storages);
  check_tensors(value);
  return value;
}

}  // namespace aotpipe::pt2

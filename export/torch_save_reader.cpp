#include <aotpipe/export/internal/torch_save_reader.h>
#include <aotpipe/graph/layout_bounds.h>
#include <aotpipe/graph/tensor_meta.h>

#include <caffe2/serialize/inline_container.h>
#include <caffe2/serialize/read_adapter_interface.h>
#include <fmt/format.h>
#include <torch/csrc/jit/serialization/import_read.h>
#include <torch/csrc/jit/serialization/storage_context.h>

#include <algorithm>
#include <cstring>
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
// ones above all, lies inside it: torch's unpickler allocates a length before it reads.
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
      case 'r':
      case '\x84':
        need(4, op);
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
      case 'g':
      case 'p': line(op); break;
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

c10::IValue load_torch_save(const at::DataPtr& bytes, std::size_t size) {
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

// The sample inputs of a .pt2 archive are a torch.save zip from an untrusted file: load_torch_save
// checks what libtorch's pickle_load trusts (each case below was a fuzzer finding: an overflow
// reading a zip past its end, a 4 GB string allocated for a length prefix, a tensor past its
// storage) and reads a good one as pickle_load does.
#include <aotpipe/export/internal/torch_save_reader.h>

#include <ATen/ATen.h>
#include <c10/core/CPUAllocator.h>
#include <caffe2/serialize/inline_container.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <unistd.h>
#include <map>

#include "pt2_test_support.h"

namespace aotpipe::pt2 {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using Records = std::map<std::string, std::string>;

std::string sample_inputs_zip() {
  caffe2::serialize::PyTorchStreamReader reader((testing::pt2_dir() / "dynamic_mlp.pt2").string());
  auto [data, size] = reader.getRecord("data/sample_inputs/model.pt");
  return {static_cast<const char*>(data.get()), size};
}

at::DataPtr bytes_of(const std::string& bytes) {
  at::DataPtr data = c10::GetCPUAllocator()->allocate(bytes.size());
  std::memcpy(data.get(), bytes.data(), bytes.size());
  return data;
}

Records records_of(const std::string& zip) {
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("aotpipe_torch_save_" + std::to_string(::getpid()) + ".pt");
  std::ofstream(path, std::ios::binary).write(zip.data(), static_cast<std::streamsize>(zip.size()));
  caffe2::serialize::PyTorchStreamReader reader(path.string());
  ::unlink(path.c_str());
  Records out;
  for (const std::string& name : reader.getAllRecords()) {
    if (name.starts_with(".data/") || name == "byteorder") continue;  // the writer adds its own
    auto [data, size] = reader.getRecord(name);
    out[name] = std::string(static_cast<const char*>(data.get()), size);
  }
  return out;
}

std::string zip_of(const Records& records) {
  std::string out;
  caffe2::serialize::PyTorchStreamWriter writer([&](const void* buf, std::size_t n) {
    out.append(static_cast<const char*>(buf), n);
    return n;
  });
  for (const auto& [name, bytes] : records) writer.writeRecord(name, bytes.data(), bytes.size());
  writer.writeEndOfFile();
  return out;
}

std::string load_error(const std::string& zip) {
  try {
    load_torch_save(bytes_of(zip), zip.size());
  } catch (const std::exception& e) { return e.what(); }
  return "no error";
}

TEST(TorchSaveReader, ReadsWhatPickleLoadReads) {
  const std::string zip = sample_inputs_zip();
  const c10::IValue expected = torch::jit::pickle_load(std::vector<char>(zip.begin(), zip.end()));
  for (const std::string& bytes : {zip, zip_of(records_of(zip))}) {
    const c10::IValue value = load_torch_save(bytes_of(bytes), bytes.size());
    ASSERT_TRUE(value.isTuple());
    const auto& args = value.toTupleRef().elements().at(0).toTupleRef().elements();
    const auto& want = expected.toTupleRef().elements().at(0).toTupleRef().elements();
    ASSERT_EQ(args.size(), want.size());
    for (std::size_t i = 0; i < args.size(); ++i) EXPECT_TRUE(at::equal(args[i].toTensor(), want[i].toTensor()));
  }
}

TEST(TorchSaveReader, ZipCutShortIsAnError) {
  const std::string zip = sample_inputs_zip();
  for (std::size_t keep : {zip.size() - 10, zip.size() / 2, std::size_t{30}})
    EXPECT_NE(load_error(zip.substr(0, keep)), "no error") << keep;
}

TEST(TorchSaveReader, StringLongerThanThePickleIsRefusedBeforeItIsAllocated) {
  Records records = records_of(sample_inputs_zip());
  records["data.pkl"] = std::string("\x80\x02X\xff\xff\xff\x7f", 7);
  EXPECT_THAT(load_error(zip_of(records)), HasSubstr("needs 2147483647 bytes, 0 are left"));
  records["data.pkl"] = std::string("\x80\x02\xff.", 4);
  EXPECT_THAT(load_error(zip_of(records)), HasSubstr("opcode 0xff at byte 2 is not one this reader knows"));
}

// Torch's unpickler grows its memo to the index a PUT names, 16 bytes an entry, whatever came
// before (pt2_archive fuzzer: LONG_BINPUT of entry 0x0f000000, 4 GB, out of memory).
TEST(TorchSaveReader, MemoEntryBeyondThePickleIsRefusedBeforeTheMemoGrows) {
  Records records = records_of(sample_inputs_zip());
  const std::string pickle = records["data.pkl"];
  ASSERT_EQ(pickle.back(), '.');
  // The result, put into a memo entry just before STOP: valid but for the entry.
  auto put_before_stop = [&](const std::string& put) { return pickle.substr(0, pickle.size() - 1) + put + "."; };
  records["data.pkl"] = put_before_stop(std::string("r\x00\x00\x00\x0f", 5));
  EXPECT_THAT(load_error(zip_of(records)), HasSubstr("puts memo entry 251658240, more than a pickle of"));
  records["data.pkl"] = put_before_stop("p99999999\n");
  EXPECT_THAT(load_error(zip_of(records)), HasSubstr("puts memo entry 99999999"));
  records["data.pkl"] = put_before_stop(std::string("r\x05\x00\x00\x00", 5));
  EXPECT_EQ(load_error(zip_of(records)), "no error") << "an entry within the pickle";
}

// Torch's zip reader extracts the version record in its constructor, at the size that record
// claims (pt2_records fuzzer: malloc of 3.9 GB): the directory is checked before it is built.
TEST(TorchSaveReader, VersionRecordClaimingGigabytesIsRefusedBeforeTheZipReaderIsBuilt) {
  std::string zip = sample_inputs_zip();
  ASSERT_TRUE(testing::claim_size(zip, "/version", 0xe7000000));
  EXPECT_THAT(load_error(zip), AllOf(HasSubstr("/version' claims 3875536896 bytes"), HasSubstr("can hold")));
  const auto overclaim = zip_overclaim(zip.size(), [&](std::uint64_t offset, std::size_t n, unsigned char* out) {
    if (offset > zip.size() || n > zip.size() - offset) return false;
    std::memcpy(out, zip.data() + offset, n);
    return true;
  });
  EXPECT_THAT(overclaim.value_or("fits"), HasSubstr("/version' claims 3875536896 bytes"));
}

// A zip whose central directory is empty (only the end record) claims nothing, and is never read
// with a zero-length buffer, which has no memory (pt2_records fuzzer: memcpy to null, UBSan).
TEST(TorchSaveReader, AnEmptyZipDirectoryClaimsNothingAndReadsNothing) {
  std::string zip(22, '\0');
  zip.replace(0, 4, "PK\x05\x06", 4);
  int zero_length_reads = 0;
  const auto overclaim = zip_overclaim(zip.size(), [&](std::uint64_t offset, std::size_t n, unsigned char* out) {
    if (n == 0) ++zero_length_reads;
    if (offset > zip.size() || n > zip.size() - offset) return false;
    if (n > 0) std::memcpy(out, zip.data() + offset, n);
    return true;
  });
  EXPECT_EQ(overclaim, std::nullopt);
  EXPECT_EQ(zero_length_reads, 0);
}

TEST(TorchSaveReader, TensorPastItsStorageIsRefused) {
  Records records = records_of(sample_inputs_zip());
  ASSERT_TRUE(records.count("data/0"));
  records["data/0"].resize(records["data/0"].size() / 2);
  EXPECT_THAT(load_error(zip_of(records)), HasSubstr("of a storage of"));
}

}  // namespace
}  // namespace aotpipe::pt2

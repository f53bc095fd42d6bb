// One record of a real .pt2 archive replaced by arbitrary bytes, the archive rewritten whole and
// valid (zip structure, CRCs): where the raw-archive target mostly meets zip checks, this one
// reaches the readers of the model's JSON, the weights' and constants' configs, the pickled
// sample inputs and the format records. The first byte picks the record; the rest replaces it.
// load_exported_program rejects bad records with Pt2Error only.
#include "fuzz_input.h"

#include <aotpipe/export/exported_program.h>

#include <caffe2/serialize/inline_container.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

using namespace aotpipe;

namespace {

struct Record {
  std::string name;
  std::string bytes;
};

// The seed archive's records (AOTPIPE_FUZZ_PT2_SEED, default examples/pt2/dynamic_mlp.pt2),
// without those every writer adds itself.
std::vector<Record>& records() {
  static std::vector<Record> all;
  return all;
}

bool writer_adds(const std::string& name) {
  return name == ".data/version" || name == "byteorder" || name == ".data/serialization_id";
}

// The records whose contents a reader parses (not tensor bytes): what an input replaces.
std::vector<std::size_t>& parsed_records() {
  static std::vector<std::size_t> indices;
  return indices;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* env = std::getenv("AOTPIPE_FUZZ_PT2_SEED");
  const std::string seed = env ? env : AOTPIPE_SOURCE_DIR "/examples/pt2/dynamic_mlp.pt2";
  caffe2::serialize::PyTorchStreamReader reader(seed);
  std::vector<std::string> names = reader.getAllRecords();
  std::sort(names.begin(), names.end());  // the selector's order (tests/fuzz/make_corpus.py's too)
  for (const std::string& name : names) {
    if (writer_adds(name)) continue;
    auto [data, size] = reader.getRecord(name);
    records().push_back({name, std::string(static_cast<const char*>(data.get()), size)});
    if (name.find("/weights/weight_") == std::string::npos) parsed_records().push_back(records().size() - 1);
  }
  if (parsed_records().empty()) {
    std::fprintf(stderr, "pt2_records: %s has no records to replace\n", seed.c_str());
    std::abort();
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::size_t replaced = parsed_records()[data[0] % parsed_records().size()];
  std::string archive;
  {
    caffe2::serialize::PyTorchStreamWriter writer([&archive](const void* bytes, std::size_t n) {
      archive.append(static_cast<const char*>(bytes), n);
      return n;
    });
    for (std::size_t i = 0; i < records().size(); ++i) {
      const std::string_view bytes =
          i == replaced ? fuzz::as_text(data + 1, size - 1) : std::string_view(records()[i].bytes);
      writer.writeRecord(records()[i].name, bytes.data(), bytes.size());
    }
    writer.writeEndOfFile();
  }
  const fuzz::MemoryFile file(archive);
  fuzz::rejects_only_with<Pt2Error>("pt2_records", "Pt2Error", [&] {
    const ExportedProgram program = load_exported_program(file.path());
    (void)program.graph();
  });
  return 0;
}

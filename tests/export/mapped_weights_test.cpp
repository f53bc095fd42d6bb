// The state of a .pt2 archive stays on disk until a call needs it: load_exported_program maps
// the weights (graph/mapped_file.h) and a compile reads only their metadata, so no page of the
// archive's tensors is resident in this process until the compiled program runs. Read from
// /proc/self/smaps: the resident size of the archive's mapping, which counts only pages this
// process touched (not the page cache). Also: writes stay in the process, and map_weights = false
// reads everything at load as before.
#include "pt2_test_support.h"

#include <aotpipe/export/compiled_exported_program.h>
#include <aotpipe/export/exported_program.h>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

namespace aotpipe {
namespace {

namespace fs = std::filesystem;
using testing::pt2_dir;

// The kB of `file` resident in this process (summed over its mappings); nullopt if not mapped.
std::optional<long> resident_kb(const fs::path& file) {
  std::ifstream smaps("/proc/self/smaps");
  const std::string target = fs::canonical(file).string();
  std::optional<long> total;
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    if (!line.empty() && std::isxdigit(static_cast<unsigned char>(line[0])) && line.find('-') != std::string::npos &&
        line.find(' ') != std::string::npos) {
      inside = line.size() >= target.size() && line.compare(line.size() - target.size(), target.size(), target) == 0;
      continue;
    }
    if (inside && line.rfind("Rss:", 0) == 0) {
      std::istringstream fields(line.substr(4));
      long kb = 0;
      fields >> kb;
      total = total.value_or(0) + kb;
    }
  }
  return total;
}

// A private copy of an example archive (its own inode: nothing else in the process maps it).
fs::path private_copy(const std::string& model) {
  const fs::path copy =
      fs::temp_directory_path() / ("aotpipe_mapped_weights_" + std::to_string(::getpid()) + "_" + model + ".pt2");
  fs::copy_file(pt2_dir() / (model + ".pt2"), copy, fs::copy_options::overwrite_existing);
  return copy;
}

TEST(MappedWeights, CompileReadsNoWeightAndACallReadsThem) {
  const fs::path path = private_copy("resnet_bn_train");
  {
    ExportedProgram program = load_exported_program(path);
    ASSERT_TRUE(resident_kb(path).has_value()) << "the archive's state is not mapped";
    EXPECT_EQ(*resident_kb(path), 0) << "loading touched the weights";
    CompiledExportedProgram compiled = compile_exported_program(program);
    const testing::EagerStep step = testing::load_eager_step("resnet_bn_train");
    compiled.compiled_state(step.inputs);
    EXPECT_EQ(*resident_kb(path), 0) << "compiling touched the weights";
    // A call reads them, and computes what eager PyTorch did.
    testing::check_eager_step(
        program.parameters(), program.buffers(), [&](const TensorList& in) { return compiled(in); }, step,
        "mapped resnet_bn_train");
    EXPECT_GT(*resident_kb(path), 0);
  }
  // The training step updated the running statistics in place: the file is as it was.
  ExportedProgram again = load_exported_program(path, {.map_weights = false});
  ExportedProgram original = load_exported_program(pt2_dir() / "resnet_bn_train.pt2", {.map_weights = false});
  ASSERT_EQ(again.buffers().size(), original.buffers().size());
  for (std::size_t i = 0; i < again.buffers().size(); ++i)
    EXPECT_TRUE(at::equal(again.buffers()[i].tensor, original.buffers()[i].tensor)) << again.buffers()[i].name;
  EXPECT_FALSE(resident_kb(path).has_value()) << "map_weights = false maps nothing";
  fs::remove(path);
}

TEST(MappedWeights, TiedNamesStayOneLeafOverTheMapping) {
  const fs::path path = private_copy("tied_lm_head");
  ExportedProgram program = load_exported_program(path);
  std::map<std::string, at::Tensor> by_name;
  for (const NamedTensor& p : program.parameters()) by_name[p.name] = p.tensor;
  ASSERT_TRUE(by_name.count("decoder.weight") && by_name.count("embed.weight"));
  EXPECT_TRUE(by_name["decoder.weight"].is_same(by_name["embed.weight"]));
  const testing::EagerStep step = testing::load_eager_step("tied_lm_head");
  CompiledExportedProgram compiled = compile_exported_program(program);
  testing::check_eager_step(
      program.parameters(), program.buffers(), [&](const TensorList& in) { return compiled(in); }, step,
      "mapped tied_lm_head");
  fs::remove(path);
}

}  // namespace
}  // namespace aotpipe

// Packages (.aotpkg): the example programs of examples/pt2/ written with write_package, loaded
// with load_package and stepped once, against what eager PyTorch computed (outputs, parameter
// gradients, buffers after the step); several sets of sizes; and every kind of bad package
// (truncated, corrupted, another format version, torch version, artifact schema, device or
// backend, weights missing, a call with sizes the package lacks), each a PackageError naming it.
#include "../runtime/temp_dir.h"
#include "pt2_test_support.h"

#include <aotpipe/export/compiled_exported_program.h>
#include <aotpipe/export/package_writer.h>
#include <aotpipe/package/load_package.h>
#include <aotpipe/package/package_format.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <ATen/autocast_mode.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <random>
#include <string>
#include <thread>

namespace aotpipe {
namespace {

using ::testing::HasSubstr;
using testing::pt2_dir;

// One folder for the process's packages, removed with them at exit.
std::filesystem::path scratch_dir() {
  static const testing::TempDir dir;
  return dir.path;
}

std::filesystem::path package_of(const std::string& model, const PackageOptions& options = {}) {
  const auto path = scratch_dir() / (model + ".aotpkg");
  write_package(load_exported_program(pt2_dir() / (model + ".pt2")), path, options);
  return path;
}

std::string read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// The message load_package throws for `path` (fails the test if it loads).
std::string load_error(const std::filesystem::path& path, LoadPackageOptions options = {}) {
  try {
    (void)load_package(path, options);
  } catch (const PackageError& e) { return e.what(); }
  ADD_FAILURE() << path << " loaded";
  return {};
}

// A copy of `from` whose manifest went through `edit` (checksums recomputed, so only the edit
// is wrong).
std::filesystem::path edited(const std::filesystem::path& from, const std::string& name,
                             const std::function<void(PackageManifest&, std::vector<std::string>&)>& edit) {
  const PackageFile file = open_package_file(from);
  PackageManifest manifest = file.manifest();
  std::vector<std::string> blobs;
  for (const PackageTensor& t : manifest.tensors) blobs.emplace_back(file.checked(t.blob, "tensor"));
  for (const PackageCompile& c : manifest.compiles) blobs.emplace_back(file.checked(c.artifact, "artifact"));
  edit(manifest, blobs);
  const auto to = scratch_dir() / (name + ".aotpkg");
  write_package_file(to, manifest, std::vector<std::string_view>(blobs.begin(), blobs.end()));
  return to;
}

// ---- programs ---------------------------------------------------------------------------------

class PackagedProgramTest : public ::testing::TestWithParam<std::string> {};

TEST_P(PackagedProgramTest, StepMatchesPyTorch) {
  const std::string& model = GetParam();
  const testing::EagerStep expected = testing::load_eager_step(model);
  const PackagedProgram program = load_package(package_of(model));
  EXPECT_EQ(program.name(), model);
  testing::check_eager_step(
      program.parameters(), program.buffers(), [&](const TensorList& in) { return program(in); }, expected,
      model + ".aotpkg");
}

// The models of exported_program_test whose archives hold a training step or an inference one.
INSTANTIATE_TEST_SUITE_P(Examples, PackagedProgramTest,
                         ::testing::Values("resnet_bn_train", "gpt_block_loss", "lstm_tagger", "unet_decoder_block",
                                           "buffer_mutation_const", "eval_classifier", "no_grad_region", "tied_lm_head",
                                           "autocast_regions", "vit_encoder_block"));

TEST(PackageTest, TiedParametersAreOneLeaf) {
  const PackagedProgram program = load_package(package_of("tied_lm_head"));
  const ExportedProgram exported = load_exported_program(pt2_dir() / "tied_lm_head.pt2");
  ASSERT_EQ(program.parameters().size(), exported.parameters().size());
  std::set<const c10::TensorImpl*> exported_unique, packaged_unique;
  for (const NamedTensor& p : exported.parameters()) exported_unique.insert(p.tensor.unsafeGetTensorImpl());
  for (const NamedTensor& p : program.parameters()) packaged_unique.insert(p.tensor.unsafeGetTensorImpl());
  EXPECT_LT(packaged_unique.size(), program.parameters().size()) << "tied_lm_head ties a weight";
  EXPECT_EQ(packaged_unique.size(), exported_unique.size());
  EXPECT_EQ(program.parameter_tensors().size(), packaged_unique.size());
  for (const at::Tensor& p : program.parameter_tensors()) EXPECT_TRUE(p.is_leaf() && p.requires_grad());
}

TEST(PackageTest, InferenceUnderNoGradAndTrainingUnderGrad) {
  const PackagedProgram program = load_package(package_of("gpt_block_loss"));
  const testing::EagerStep expected = testing::load_eager_step("gpt_block_loss");
  TensorList inference;
  {
    torch::NoGradGuard no_grad;
    inference = program(expected.inputs);
  }
  TensorList training = program(expected.inputs);
  ASSERT_EQ(inference.size(), training.size());
  for (std::size_t i = 0; i < training.size(); ++i) {
    EXPECT_FALSE(inference[i].requires_grad()) << "output " << i;
    testing::expect_close(inference[i], training[i].detach(), "output " + std::to_string(i));
  }
  EXPECT_TRUE(training[0].requires_grad());
}

TEST(PackageTest, SeveralSetsOfSizes) {
  PackageOptions options;
  options.sizes = {{{3, 8}}, {{5, 8}}};
  const PackagedProgram program = load_package(package_of("dynamic_mlp", options));
  EXPECT_EQ(program.manifest().compiles.size(), 4u);  // training and inference per set
  const ExportedProgram exported = load_exported_program(pt2_dir() / "dynamic_mlp.pt2");
  for (int64_t batch : {3, 5}) {
    const at::Tensor x = torch::randn({batch, 8});
    const TensorList expected = exported({x});
    torch::NoGradGuard no_grad;
    const TensorList actual = program({x});
    ASSERT_EQ(actual.size(), expected.size());
    testing::expect_close(actual[0], expected[0].detach(), "batch " + std::to_string(batch));
  }
  try {
    (void)program({torch::randn({4, 8})});
    ADD_FAILURE() << "batch 4 ran";
  } catch (const PackageError& e) {
    EXPECT_THAT(e.what(), HasSubstr("input 0 matches none"));
    EXPECT_THAT(e.what(), HasSubstr("f32[4, 8]"));
    EXPECT_THAT(e.what(), HasSubstr("f32[3, 8]"));
    EXPECT_THAT(e.what(), HasSubstr("f32[5, 8]"));
  }
}

// dynamic_mlp packaged for batch 3 only, its exported program, and load options that compile
// what the package lacks on demand from it.
struct BatchThreePackage {
  std::filesystem::path path;
  ExportedProgram exported = load_exported_program(pt2_dir() / "dynamic_mlp.pt2");
  LoadPackageOptions on_demand;
  BatchThreePackage() {
    PackageOptions options;
    options.sizes = {{{3, 8}}};
    path = package_of("dynamic_mlp", options);
    on_demand.compile_missing = compile_missing_from(exported);
  }
};

TEST(PackageTest, MissingSizesCompileOnDemandWhenAllowed) {
  const BatchThreePackage package;
  const ExportedProgram& exported = package.exported;
  const PackagedProgram program = load_package(package.path, package.on_demand);
  for (int repeat = 0; repeat < 2; ++repeat) {
    const at::Tensor x = torch::randn({4, 8});
    const TensorList expected = exported({x});
    torch::NoGradGuard no_grad;
    const TensorList actual = program({x});
    testing::expect_close(actual[0], expected[0].detach(), "batch 4, compiled on demand");
  }
  EXPECT_EQ(program.num_compiled_on_demand(), 1u) << "the second call reuses the first's compile";
  // A training call of the missing sizes: gradients as eager's.
  const at::Tensor x = torch::randn({4, 8});
  program({x})[0].sum().backward();
  const ExportedProgram reference = load_exported_program(pt2_dir() / "dynamic_mlp.pt2");
  reference({x})[0].sum().backward();
  for (std::size_t i = 0; i < program.parameters().size(); ++i)
    testing::expect_close(program.parameters()[i].tensor.grad(), reference.parameters()[i].tensor.grad(),
                          "grad of " + program.parameters()[i].name);
  EXPECT_EQ(program.num_compiled_on_demand(), 2u);
  // Sizes the export does not allow are still refused, naming the input.
  EXPECT_THROW((void)program({torch::randn({4, 9})}), Pt2Error);
}

// A package's compiles are made without autocast, which a trace records: a call under autocast is
// refused, naming it, unless the load can compile on demand, whose compile (made under autocast)
// computes what the exported program computes under it.
TEST(PackageTest, ACallUnderAutocastIsRefusedOrCompiledUnderIt) {
  const BatchThreePackage package;
  const ExportedProgram& exported = package.exported;
  const PackagedProgram plain = load_package(package.path), compiling = load_package(package.path, package.on_demand);
  const at::Tensor x = torch::randn({3, 8});
  torch::NoGradGuard no_grad;
  at::autocast::set_autocast_enabled(at::kCPU, true);
  std::string refused;
  try {
    (void)plain({x});
  } catch (const PackageError& e) { refused = e.what(); }
  const TensorList expected = exported({x});
  const TensorList actual = compiling({x});
  at::autocast::set_autocast_enabled(at::kCPU, false);
  EXPECT_THAT(refused, HasSubstr("called under autocast (cpu,BFloat16)"));
  ASSERT_EQ(expected[0].scalar_type(), at::kBFloat16);
  EXPECT_EQ(actual[0].scalar_type(), at::kBFloat16);
  testing::expect_close(actual[0].to(at::kFloat), expected[0].to(at::kFloat), "under autocast");
  EXPECT_EQ(compiling.num_compiled_on_demand(), 1u);
  // Outside autocast again, the package's own compile serves the call.
  EXPECT_EQ(compiling({x})[0].scalar_type(), at::kFloat);
  EXPECT_EQ(compiling.num_compiled_on_demand(), 1u);
}

TEST(PackageTest, SizesOutsideTheExportsRangeAreRefusedAtWrite) {
  PackageOptions options;
  options.sizes = {{{3, 17}}};  // dynamic_mlp's feature dimension is static (8)
  EXPECT_THROW(package_of("dynamic_mlp", options), Pt2Error);
}

TEST(PackageTest, ConcurrentCallsAgree) {
  const PackagedProgram program = load_package(package_of("gpt_block_loss"));
  const testing::EagerStep expected = testing::load_eager_step("gpt_block_loss");
  torch::NoGradGuard no_grad;
  const at::Tensor reference = program(expected.inputs)[0];
  std::vector<at::Tensor> results(4);
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < results.size(); ++t)
    threads.emplace_back([&, t] {
      torch::NoGradGuard inner;
      results[t] = program(expected.inputs)[0];
    });
  for (auto& thread : threads) thread.join();
  for (const at::Tensor& r : results) EXPECT_TRUE(at::equal(r, reference));
}

// ---- bad packages -----------------------------------------------------------------------------

class BadPackageTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { good_ = new std::filesystem::path(package_of("tied_lm_head")); }
  static void TearDownTestSuite() { delete good_; }
  static const std::filesystem::path& good() { return *good_; }
  static std::filesystem::path* good_;

  // Data section start (header + manifest, aligned).
  static std::size_t data_start(const std::string& bytes) {
    uint64_t manifest = 0;
    for (int i = 0; i < 8; ++i) manifest |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[16 + i])) << (8 * i);
    return (32 + manifest + kPackageAlignment - 1) / kPackageAlignment * kPackageAlignment;
  }
  static std::filesystem::path with_bytes(const std::string& name, const std::string& bytes) {
    const auto path = scratch_dir() / (name + ".aotpkg");
    write_bytes(path, bytes);
    return path;
  }
};
std::filesystem::path* BadPackageTest::good_ = nullptr;

TEST_F(BadPackageTest, TruncatedAnywhere) {
  const std::string bytes = read_bytes(good());
  for (std::size_t keep : {std::size_t{0}, std::size_t{7}, std::size_t{31}, std::size_t{40}, data_start(bytes) - 1,
                           data_start(bytes) + 10, bytes.size() - 65, bytes.size() - 1}) {
    const auto path = with_bytes("truncated", bytes.substr(0, keep));
    EXPECT_THAT(load_error(path), ::testing::AnyOf(HasSubstr("truncated"), HasSubstr("corrupted")))
        << "kept " << keep << " of " << bytes.size() << " bytes";
  }
}

TEST_F(BadPackageTest, NotAPackage) {
  EXPECT_THAT(load_error(with_bytes("text", std::string(100, 'x'))), HasSubstr("not an aotpipe package"));
  EXPECT_THAT(load_error(scratch_dir() / "absent.aotpkg"), HasSubstr("cannot open"));
  EXPECT_THAT(load_error(pt2_dir() / "tied_lm_head.pt2"), HasSubstr("not an aotpipe package"));
}

TEST_F(BadPackageTest, CorruptedBytesAreFound) {
  const std::string bytes = read_bytes(good());
  const PackageFile file = open_package_file(good());
  const std::size_t data = data_start(bytes);
  auto flip = [&](std::size_t at, const std::string& name) {
    std::string copy = bytes;
    copy[at] = static_cast<char>(copy[at] ^ 0x5a);
    return with_bytes(name, copy);
  };
  EXPECT_THAT(load_error(flip(40, "manifest")), HasSubstr("manifest is corrupted"));
  const PackageBlob& weight = file.manifest().tensors.back().blob;
  EXPECT_THAT(load_error(flip(data + weight.offset + weight.size / 2, "weight")),
              HasSubstr("stored tensor " + std::to_string(file.manifest().tensors.size() - 1) + " is corrupted"));
  const PackageBlob& artifact = file.manifest().compiles[0].artifact;
  EXPECT_THAT(load_error(flip(data + artifact.offset + 3, "artifact")),
              HasSubstr("compile 0 (its artifact) is corrupted"));
  // Without the up-front check, the artifact is checked at its first call.
  LoadPackageOptions no_verify;
  no_verify.verify = false;
  const PackagedProgram unchecked = load_package(scratch_dir() / "artifact.aotpkg", no_verify);
  EXPECT_THROW((void)unchecked(testing::load_eager_step("tied_lm_head").inputs), PackageError);
}

TEST_F(BadPackageTest, AnotherFormatVersion) {
  std::string bytes = read_bytes(good());
  bytes[8] = 2;
  EXPECT_THAT(load_error(with_bytes("v2", bytes)),
              HasSubstr("package format version 2; this build of aotpipe reads version 1"));
}

TEST_F(BadPackageTest, AnotherTorchVersion) {
  const auto path = edited(good(), "torch", [](PackageManifest& m, auto&) { m.torch_version = "1.13.1"; });
  EXPECT_THAT(load_error(path), HasSubstr("built with torch 1.13.1"));
}

TEST_F(BadPackageTest, AnotherArtifactSchema) {
  const auto path = edited(good(), "schema", [](PackageManifest& m, auto&) { m.artifact_schema += 100; });
  EXPECT_THAT(load_error(path), HasSubstr("schema version"));
}

TEST_F(BadPackageTest, AnotherDevice) {
  LoadPackageOptions on_cuda;
  on_cuda.device = c10::Device("cuda:0");
  EXPECT_THAT(load_error(good(), on_cuda), HasSubstr("was compiled for cpu; it cannot run on cuda:0"));
  if (!torch::cuda::is_available()) {
    const auto path = edited(good(), "cuda", [](PackageManifest& m, auto&) {
      m.device = c10::Device("cuda:0");
      m.cuda_arch = "sm_90";
    });
    EXPECT_THAT(load_error(path), HasSubstr("runs on cuda:0, which this process does not have"));
  }
}

TEST_F(BadPackageTest, UnknownBackend) {
  const auto path = edited(good(), "backend", [](PackageManifest& m, auto&) { m.backend = "tpu_xla"; });
  EXPECT_THAT(load_error(path), HasSubstr("backend 'tpu_xla', which this process lacks (it has: "));
}

// load_package finds the backend a manifest names by name (backend/backend_registry.h). This
// program never calls backends::cuda_graphs(): the CUDA-graph backend is registered because
// aotpipe::package links aotpipe::cuda, whose target forces the registration into the link. On
// CPU inputs its graphs run in the interpreter, so the step is the interpreter's.
TEST(PackageTest, TheBackendAManifestNamesIsFoundByName) {
  const auto path = edited(package_of("gpt_block_loss"), "gpt_block_loss_cuda_graphs",
                           [](PackageManifest& m, auto&) { m.backend = "cuda_graphs"; });
#ifdef AOTPIPE_TEST_CUDA_BACKEND
  const PackagedProgram program = load_package(path);
  const PackagedProgram reference = load_package(package_of("gpt_block_loss"));
  const testing::EagerStep expected = testing::load_eager_step("gpt_block_loss");
  const torch::NoGradGuard no_grad;
  const TensorList got = program(expected.inputs);
  const TensorList want = reference(expected.inputs);
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(at::equal(got[i], want[i])) << "output " << i;
#else
  EXPECT_THAT(load_error(path), HasSubstr("backend 'cuda_graphs', which this process lacks (it has: interpreter)"));
#endif
}

TEST_F(BadPackageTest, WeightsMissing) {
  const auto path = edited(good(), "weights", [](PackageManifest& m, auto&) { m.state[0].tensor = 99; });
  EXPECT_THAT(load_error(path),
              HasSubstr("the weights of '" + open_package_file(good()).manifest().state[0].name + "' are missing"));
  // A manifest whose tensor has fewer bytes than its sizes need.
  const auto shrunk = edited(good(), "short_weight", [](PackageManifest& m, auto& blobs) {
    blobs[0].resize(blobs[0].size() / 2);
    (void)m;
  });
  EXPECT_THAT(load_error(shrunk), HasSubstr("tensors[0]"));
}

TEST_F(BadPackageTest, MalformedArtifactWithAValidChecksum) {
  const auto path = edited(good(), "garbage_artifact", [](PackageManifest&, auto& blobs) { blobs.back() = "garbage"; });
  const PackagedProgram program = load_package(path);
  torch::NoGradGuard no_grad;  // the last compile is the inference one
  try {
    (void)program(testing::load_eager_step("tied_lm_head").inputs);
    ADD_FAILURE() << "a garbage artifact ran";
  } catch (const PackageError& e) { EXPECT_THAT(e.what(), HasSubstr("is malformed")); }
}

// The manifest mutated at random (a character replaced, removed or inserted; its checksum
// recomputed, so the reader sees the mutation): a load and a call either work or throw an
// exception naming what is wrong; nothing crashes, hangs or reads out of bounds (ASan builds).
TEST_F(BadPackageTest, RandomManifestMutationsNeverCrash) {
  const std::string bytes = read_bytes(good());
  uint64_t manifest_size = 0;
  for (int i = 0; i < 8; ++i)
    manifest_size |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[16 + i])) << (8 * i);
  const std::string manifest = bytes.substr(32, manifest_size);
  const std::string data = bytes.substr(data_start(bytes));
  const std::string alphabet = "0123456789-.,:[]{}\"aeflnrstux ";
  std::mt19937_64 random(46);
  const TensorList inputs = testing::load_eager_step("tied_lm_head").inputs;
  std::size_t loaded = 0, refused = 0;
  for (int trial = 0; trial < 300; ++trial) {
    std::string mutated = manifest;
    for (int edits = 1 + static_cast<int>(random() % 3); edits > 0; --edits) {
      const std::size_t at = random() % mutated.size();
      const char c = alphabet[random() % alphabet.size()];
      switch (random() % 3) {
        case 0: mutated[at] = c; break;
        case 1: mutated.erase(at, 1); break;
        default: mutated.insert(at, 1, c); break;
      }
    }
    // Header with the new length and checksum, padding, the same data section.
    std::string file = package_header(mutated) + mutated;
    file.resize((file.size() + kPackageAlignment - 1) / kPackageAlignment * kPackageAlignment, '\0');
    file += data;
    const auto path = with_bytes("mutated", file);
    try {
      const PackagedProgram program = load_package(path);
      ++loaded;
      (void)program(inputs);
    } catch (const std::exception& e) {
      ++refused;
      EXPECT_NE(std::string(e.what()), "") << "trial " << trial;
    }
  }
  EXPECT_GT(refused, 200u) << "most mutations break the manifest";
  RecordProperty("loaded", static_cast<int>(loaded));
}

TEST_F(BadPackageTest, WrongNumberOfInputs) {
  const PackagedProgram program = load_package(good());
  try {
    (void)program({});
    ADD_FAILURE() << "no inputs ran";
  } catch (const PackageError& e) { EXPECT_THAT(e.what(), HasSubstr("called with 0 inputs, the program takes 1")); }
}

}  // namespace
}  // namespace aotpipe

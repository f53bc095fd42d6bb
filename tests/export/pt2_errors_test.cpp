// Bad .pt2 input: each gives a Pt2Error that names what is wrong (file, node, input, kind), and
// nothing crashes. The bad archives are written by the test from a good one (rewrite_archive).
#include "pt2_test_support.h"

#include <aotpipe/export/exported_program.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <unistd.h>

namespace aotpipe {
namespace {

using nlohmann::json;
using ::testing::AllOf;
using testing::claim_size;
using ::testing::HasSubstr;
using testing::pt2_dir;
using testing::rewrite_archive;

class Pt2ErrorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("aotpipe_pt2_errors_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  // Not std::filesystem::remove_all: libtorch.so exports its own copy of it, which crashes.
  void TearDown() override {
    for (const auto& entry : std::filesystem::directory_iterator(dir_)) ::unlink(entry.path().c_str());
    ::rmdir(dir_.c_str());
  }

  // The error loading `path` gives ("no error" when it loads).
  static std::string load_error(const std::filesystem::path& path) {
    try {
      load_exported_program(path);
    } catch (const Pt2Error& e) { return e.what(); }
    return "no error";
  }
  // The error of a copy of `model` edited by `edit`.
  std::string edited_error(const std::filesystem::path& model, const std::function<void(json&)>& edit,
                           const std::function<void(const std::string&, std::string&)>& edit_record = {}) {
    const std::filesystem::path out = dir_ / ("edited_" + std::to_string(counter_++) + ".pt2");
    rewrite_archive(pt2_dir() / model, out, edit, edit_record);
    return load_error(out);
  }
  static json& node_named(json& model, const std::string& name) {
    for (json& node : model["graph_module"]["graph"]["nodes"])
      if (node["name"] == name) return node;
    throw std::runtime_error("no node " + name);
  }

  std::filesystem::path dir_;
  int counter_ = 0;
};

TEST_F(Pt2ErrorsTest, UnchangedCopyLoads) { EXPECT_EQ(edited_error("resnet_bn_train.pt2", nullptr), "no error"); }

TEST_F(Pt2ErrorsTest, MissingFile) {
  EXPECT_THAT(load_error(dir_ / "absent.pt2"), AllOf(HasSubstr("absent.pt2"), HasSubstr("no such file")));
}

TEST_F(Pt2ErrorsTest, TruncatedAndGarbageFiles) {
  std::ifstream in(pt2_dir() / "gpt_block_loss.pt2", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (std::size_t keep : {bytes.size() / 2, bytes.size() - 10, std::size_t{100}, std::size_t{0}}) {
    const std::filesystem::path truncated = dir_ / "truncated.pt2";
    std::ofstream(truncated, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(keep));
    EXPECT_THAT(load_error(truncated), HasSubstr("not a readable .pt2 archive")) << keep << " bytes";
  }
  const std::filesystem::path garbage = dir_ / "garbage.pt2";
  std::ofstream(garbage) << "graph g(%x: f32[2]):\n  return (%x)\n";
  EXPECT_THAT(load_error(garbage), HasSubstr("not a readable .pt2 archive"));
}

// A deflated zip entry may claim up to 4 GB (zip64: 2^64) whatever the file holds, and a record is
// allocated at its claimed size before it is extracted: such a claim is refused first.
// The version record is extracted by torch's zip reader as it is built, before any record could
// be asked about: the directory is checked first.
TEST_F(Pt2ErrorsTest, RecordClaimingMoreThanTheArchiveCanHoldIsRefused) {
  for (const std::string suffix : {"models/model.json", ".data/version"}) {
    std::ifstream in(pt2_dir() / "dynamic_mlp.pt2", std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ASSERT_TRUE(claim_size(bytes, suffix, 0xffffff00));
    const std::filesystem::path claiming = dir_ / "claiming.pt2";
    std::ofstream(claiming, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    EXPECT_THAT(load_error(claiming),
                AllOf(HasSubstr(suffix + "' claims 4294967040 bytes"), HasSubstr("more than an archive of")));
  }
}

TEST_F(Pt2ErrorsTest, ZipThatIsNotAnExport) {
  // torch.save writes a zip too.
  EXPECT_THAT(load_error(pt2_dir() / "gpt_block_loss.expected.pt"), HasSubstr("not a torch.export archive"));
}

TEST_F(Pt2ErrorsTest, UnsupportedVersions) {
  EXPECT_THAT(edited_error("dynamic_mlp.pt2", [](json& m) { m["schema_version"]["major"] = 9; }),
              HasSubstr("schema version 9.17 is not supported; this build reads schema 8.x"));
  EXPECT_THAT(edited_error("dynamic_mlp.pt2", nullptr,
                           [](const std::string& name, std::string& bytes) {
                             if (name == "archive_version") bytes = "1";
                           }),
              HasSubstr("archive version 1 is not supported"));
  EXPECT_THAT(edited_error("dynamic_mlp.pt2", [](json& m) { m.erase("schema_version"); }),
              HasSubstr("has no valid schema_version"));
}

TEST_F(Pt2ErrorsTest, UnknownOperatorIsNamed) {
  EXPECT_THAT(edited_error("unet_decoder_block.pt2",
                           [](json& m) { node_named(m, "silu")["target"] = "torch.ops.mylib.fancy_silu.default"; }),
              AllOf(HasSubstr("node 'silu'"), HasSubstr("operator mylib::fancy_silu is not registered in this process"),
                    HasSubstr("custom op")));
  EXPECT_THAT(edited_error("unet_decoder_block.pt2",
                           [](json& m) { node_named(m, "silu")["target"] = "torch.ops.aten.silu.no_such_overload"; }),
              HasSubstr("operator aten::silu.no_such_overload is not registered"));
}

TEST_F(Pt2ErrorsTest, HigherOrderOpsAreRefused) {
  EXPECT_THAT(edited_error("unet_decoder_block.pt2",
                           [](json& m) { node_named(m, "silu")["target"] = "torch.ops.higher_order.cond"; }),
              AllOf(HasSubstr("node 'silu'"), HasSubstr("higher-order operator cond is not supported")));
}

TEST_F(Pt2ErrorsTest, CustomObjectsAndTokensAreRefused) {
  EXPECT_THAT(edited_error("unet_decoder_block.pt2",
                           [](json& m) {
                             m["graph_module"]["signature"]["input_specs"][0] = json{
                                 {"custom_obj",
                                  {{"arg", {{"name", "obj"}, {"class_fqn", "x.Y"}}}, {"custom_obj_name", "my_obj"}}}};
                           }),
              AllOf(HasSubstr("input 'my_obj' is a custom object"), HasSubstr("not supported")));
  EXPECT_THAT(
      edited_error("unet_decoder_block.pt2",
                   [](json& m) {
                     m["graph_module"]["signature"]["input_specs"][0] = json{{"token", {{"arg", {{"name", "token"}}}}}};
                   }),
      HasSubstr("effect token"));
  EXPECT_THAT(
      edited_error(
          "unet_decoder_block.pt2",
          [](json& m) {
            m["graph_module"]["signature"]["output_specs"][0] = json{{"loss_output", {{"arg", {{"name", "silu"}}}}}};
          }),
      HasSubstr("joint forward-backward export"));
}

// Found by pt2_archive_fuzzer: a repeated graph input escaped as GraphError, not Pt2Error.
TEST_F(Pt2ErrorsTest, RepeatedGraphInputNameIsNamed) {
  EXPECT_THAT(edited_error("unet_decoder_block.pt2",
                           [](json& m) {
                             json& inputs = m["graph_module"]["graph"]["inputs"];
                             inputs[1] = inputs[0];
                           }),
              AllOf(HasSubstr("graph input 1 is named"), HasSubstr("as an earlier input is")));
}

TEST_F(Pt2ErrorsTest, MalformedArgumentsAreNamed) {
  EXPECT_THAT(edited_error("unet_decoder_block.pt2",
                           [](json& m) {
                             node_named(m, "silu")["inputs"][0]["arg"] = json{{"as_weird", 1}};
                           }),
              AllOf(HasSubstr("node 'silu'"), HasSubstr("argument 'self' has kind 'as_weird'")));
  EXPECT_THAT(
      edited_error("unet_decoder_block.pt2", [](json& m) { node_named(m, "silu")["inputs"][0]["name"] = "selfie"; }),
      AllOf(HasSubstr("node 'silu'"), HasSubstr("argument 'self' is missing")));
  EXPECT_THAT(edited_error("unet_decoder_block.pt2",
                           [](json& m) {
                             node_named(m, "silu")["inputs"][0]["arg"] = json{{"as_tensor", {{"name", "nowhere"}}}};
                           }),
              HasSubstr("reads 'nowhere', which no input or earlier node defines"));
  EXPECT_THAT(
      edited_error("unet_decoder_block.pt2", [](json& m) { m["graph_module"]["graph"]["nodes"][0]["inputs"] = 7; }),
      AllOf(HasSubstr("node 'conv_transpose2d'"), HasSubstr("json")));  // reported, not a crash
}

// A data-dependent size (u0: how many tokens an expert gets) passed to an operator: refused at
// load, naming the node, the argument and the symbol (sizes only flow into tensors' own shapes).
TEST_F(Pt2ErrorsTest, DataDependentSizeAsAnArgumentIsNamed) {
  EXPECT_THAT(
      edited_error(
          testing::data_dependent_dir() / "moe_routing.pt2",
          [](json& m) {
            node_named(m, "index_add_")["inputs"][1]["arg"] = json{{"as_sym_int", {{"as_name", "sym_size_int"}}}};
          }),
      AllOf(HasSubstr("node 'index_add_'"), HasSubstr("argument 'dim' is a size read from tensor values (u0)"),
            HasSubstr("not supported")));
}

// A number read from a tensor (`.item()`: aten::_local_scalar_dense returns a SymInt) is refused
// by name, unlike a size read from one.
TEST_F(Pt2ErrorsTest, DataDependentNumberIsNamed) {
  EXPECT_THAT(edited_error(testing::data_dependent_dir() / "moe_routing.pt2",
                           [](json& m) {
                             json& node = node_named(m, "sym_size_int");
                             node["target"] = "torch.ops.aten._local_scalar_dense.default";
                             node["inputs"].erase(1);  // (self, dim) -> (self)
                           }),
              AllOf(HasSubstr("node 'sym_size_int'"), HasSubstr("returns a number read from tensor values"),
                    HasSubstr(".item()")));
}

TEST_F(Pt2ErrorsTest, MissingStateIsNamed) {
  EXPECT_THAT(edited_error("resnet_bn_train.pt2", nullptr,
                           [](const std::string& name, std::string& bytes) {
                             if (name != "data/weights/model_weights_config.json") return;
                             json config = json::parse(bytes);
                             config["config"].erase("fc.bias");
                             bytes = config.dump();
                           }),
              AllOf(HasSubstr("parameter 'fc.bias'"), HasSubstr("neither the weights nor the constants")));
}

}  // namespace
}  // namespace aotpipe

#include "test_support.h"

#include <aotpipe/pipeline/pipeline_parser.h>
#include <aotpipe/pipeline/stage_registry.h>

#include <gtest/gtest.h>

namespace aotpipe {
namespace {

using testing::error_message_of;
using testing::RecordingContext;
using testing::RecordStage;

TEST(PipelineText, SplitsElementsAndParameters) {
  const auto specs = parse_pipeline_text(" metadata, dedupe ,partition( min_cut ),group(b,c(x)),compile ");
  ASSERT_EQ(specs.size(), 5u);
  EXPECT_EQ(specs[0].name, "metadata");
  EXPECT_EQ(specs[0].offset, 1u);
  EXPECT_EQ(specs[1].name, "dedupe");
  EXPECT_EQ(specs[2].name, "partition");
  EXPECT_EQ(specs[2].parameters, "min_cut");
  EXPECT_EQ(specs[3].name, "group");
  EXPECT_EQ(specs[3].parameters, "b,c(x)");
  EXPECT_EQ(specs[4].name, "compile");
  EXPECT_TRUE(specs[4].parameters.empty());
  EXPECT_TRUE(parse_pipeline_text("  ").empty());
}

TEST(PipelineText, RejectsMalformedText) {
  for (const char* bad : {"a,,b", "a,", ",a", "a(b", "a)b", "a b", "a(x)y", "1a"}) {
    EXPECT_THROW(parse_pipeline_text(bad), PipelineParseError) << bad;
  }
  EXPECT_EQ(error_message_of<PipelineParseError>([] { parse_pipeline_text("a,part(min_cut"); }),
            "invalid pipeline 'a,part(min_cut': '(' is never closed at offset 6");
}

// A stage configured by its parameter text, like partition(min_cut).
class ParameterisedStage {
 public:
  explicit ParameterisedStage(std::string mode) : mode_(std::move(mode)) {
    if (mode_ != "default" && mode_ != "min_cut") throw std::invalid_argument("mode must be default or min_cut");
  }
  std::string_view name() const noexcept { return "partition"; }
  std::string description() const { return "partition(" + mode_ + ")"; }
  Task<void> run(RecordingContext& context, const JobEnv&) const {
    context.ran.push_back(description());
    co_return;
  }

 private:
  std::string mode_;
};

struct Metadata : RecordStage {
  Metadata() : RecordStage("metadata") {}
};

class PipelineRegistry : public ::testing::Test {
 protected:
  PipelineRegistry() {
    registry.add<Metadata>("metadata");
    for (const char* name : {"dedupe", "synthetic_base", "joint", "compile"}) {
      registry.add(name, [name](std::string_view) { return RecordStage(name); });
    }
    registry.add("partition", [](std::string_view parameters) {
      return ParameterisedStage(parameters.empty() ? "default" : std::string(parameters));
    });
  }
  StageRegistry<RecordingContext> registry;
};

TEST_F(PipelineRegistry, BuildsThePipelineAndPrintsItBack) {
  const std::string text = "metadata,dedupe,synthetic_base,joint,partition(min_cut),compile";
  const Pipeline<RecordingContext> pipeline = registry.parse(text);
  EXPECT_EQ(pipeline.stage_names(),
            (std::vector<std::string_view>{"metadata", "dedupe", "synthetic_base", "joint", "partition", "compile"}));
  EXPECT_EQ(pipeline.to_string(), text);
}

TEST_F(PipelineRegistry, UnknownStageListsTheKnownOnes) {
  EXPECT_EQ(error_message_of<PipelineParseError>([this] { registry.parse("metadata,dedup,compile"); }),
            "unknown stage 'dedup' at offset 9 in pipeline 'metadata,dedup,compile'; known stages: compile, "
            "dedupe, group, joint, metadata, partition, synthetic_base");
}

TEST_F(PipelineRegistry, FactoryErrorsNameTheStage) {
  EXPECT_EQ(error_message_of<PipelineParseError>([this] { registry.parse("partition(max_flow)"); }),
            "stage 'partition' at offset 0 in pipeline 'partition(max_flow)' rejected its parameters "
            "'max_flow': mode must be default or min_cut");
  EXPECT_THROW(registry.parse("metadata(x)"), PipelineParseError) << "metadata takes no parameters";
}

TEST_F(PipelineRegistry, NestedGroupsRoundTrip) {
  const Pipeline<RecordingContext> pipeline = registry.parse("metadata,group(dedupe,group(joint)),compile");
  EXPECT_EQ(pipeline.stage_names(), (std::vector<std::string_view>{"metadata", "group", "compile"}));
  EXPECT_EQ(pipeline.to_string(), "metadata,group(dedupe,group(joint)),compile");
  EXPECT_THROW(registry.parse("group(dedupe,nope)"), PipelineParseError);
}

TEST_F(PipelineRegistry, RejectsDuplicateAndMalformedNames) {
  EXPECT_THROW(registry.add("dedupe", [](std::string_view) { return RecordStage("x"); }), std::invalid_argument);
  EXPECT_THROW(registry.add("two words", [](std::string_view) { return RecordStage("x"); }), std::invalid_argument);
}

}  // namespace
}  // namespace aotpipe

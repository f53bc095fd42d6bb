// Analyses cached in a context and invalidated by what each stage of a pipeline preserved
// (pipeline/analysis_manager.h).
#include <aotpipe/pipeline/analysis_manager.h>
#include <aotpipe/pipeline/pipeline.h>
#include <aotpipe/pipeline/scheduler.h>
#include <aotpipe/pipeline/sync_wait.h>

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

namespace aotpipe::testing {
namespace {

struct Program {
  explicit Program(std::string initial) : text(std::move(initial)) {}
  std::string text;
  AnalysisManager<Program> analyses;
  int length_runs = 0;  // how often LengthAnalysis computed
};

struct LengthAnalysis {
  using Result = std::size_t;
  static constexpr std::string_view name = "length";
  std::size_t run(Program& program) const {
    ++program.length_runs;
    return program.text.size();
  }
};

struct VowelsAnalysis {
  using Result = std::vector<char>;
  static constexpr std::string_view name = "vowels";
  std::vector<char> run(Program& program) const {
    std::vector<char> vowels;
    for (char c : program.text)
      if (std::string_view("aeiou").find(c) != std::string_view::npos) vowels.push_back(c);
    return vowels;
  }
};

TEST(AnalysisManager, ComputesOnceAndServesTheCachedResult) {
  Program program("hello");
  EXPECT_EQ(program.analyses.cached<LengthAnalysis>(), nullptr);
  EXPECT_EQ(program.analyses.get<LengthAnalysis>(program), 5u);
  program.text = "changed without telling";  // nobody invalidated: the cached result is served
  EXPECT_EQ(program.analyses.get<LengthAnalysis>(program), 5u);
  EXPECT_EQ(program.length_runs, 1);
  EXPECT_EQ(program.analyses.get<VowelsAnalysis>(program), (std::vector<char>{'a', 'e', 'i', 'o', 'u', 'e', 'i'}));
  EXPECT_EQ(program.analyses.cached_names(), (std::vector<std::string_view>{"length", "vowels"}));
}

TEST(AnalysisManager, StoreReplacesAndInvalidateKeepsWhatIsPreserved) {
  Program program("abc");
  program.analyses.store<LengthAnalysis>(42);
  EXPECT_EQ(program.analyses.get<LengthAnalysis>(program), 42u);
  EXPECT_EQ(program.length_runs, 0);
  program.analyses.store<LengthAnalysis>(7);
  EXPECT_EQ(*program.analyses.cached<LengthAnalysis>(), 7u);
  (void)program.analyses.get<VowelsAnalysis>(program);

  program.analyses.invalidate(PreservedAnalyses::all());
  EXPECT_EQ(program.analyses.cached_names().size(), 2u);
  program.analyses.invalidate(PreservedAnalyses::none().preserve<VowelsAnalysis>());
  EXPECT_EQ(program.analyses.cached<LengthAnalysis>(), nullptr);
  EXPECT_NE(program.analyses.cached<VowelsAnalysis>(), nullptr);
  program.analyses.invalidate(PreservedAnalyses::all().abandon<VowelsAnalysis>());
  EXPECT_TRUE(program.analyses.cached_names().empty());
}

TEST(PreservedAnalyses, PreserveAndAbandonOverrideEachOther) {
  EXPECT_TRUE(PreservedAnalyses::all().preserved<LengthAnalysis>());
  EXPECT_FALSE(PreservedAnalyses::none().preserved<LengthAnalysis>());
  PreservedAnalyses preserved = PreservedAnalyses::all();
  preserved.abandon<LengthAnalysis>();
  EXPECT_FALSE(preserved.preserved<LengthAnalysis>());
  EXPECT_TRUE(preserved.preserved<VowelsAnalysis>());
  EXPECT_FALSE(preserved.preserves_all());
  preserved.preserve<LengthAnalysis>();
  EXPECT_TRUE(preserved.preserved<LengthAnalysis>());
  EXPECT_TRUE(preserved.preserves_all());
}

// Stages: one that computes the length as a by-product and keeps it, one that only reads, one
// that rewrites the text and says so, one that says nothing (Task<void>).
struct Measure {
  std::string_view name() const { return "measure"; }
  Task<PreservedAnalyses> run(Program& program, const JobEnv&) const {
    program.analyses.store<LengthAnalysis>(program.text.size());
    co_return PreservedAnalyses::none().preserve<LengthAnalysis>();
  }
};
struct Read {
  std::string_view name() const { return "read"; }
  Task<PreservedAnalyses> run(Program& program, const JobEnv&) const {
    (void)program.analyses.get<LengthAnalysis>(program);
    co_return PreservedAnalyses::all();
  }
};
struct Append {
  std::string_view name() const { return "append"; }
  Task<PreservedAnalyses> run(Program& program, const JobEnv&) const {
    program.text += "!";
    co_return PreservedAnalyses::none();
  }
};
struct Silent {
  std::string_view name() const { return "silent"; }
  Task<void> run(Program&, const JobEnv&) const { co_return; }
};

std::vector<std::string_view> cached_after(Pipeline<Program> pipeline, Program& program) {
  Scheduler scheduler(1);
  sync_wait(pipeline.run(program, JobEnv{.job_name = "p", .scheduler = scheduler}));
  return program.analyses.cached_names();
}

TEST(PipelineAnalyses, EachStagesReportIsAppliedAfterIt) {
  {
    Program program("abc");
    Pipeline<Program> pipeline;
    pipeline.add(Measure{}).add(Read{});
    EXPECT_EQ(cached_after(pipeline, program), std::vector<std::string_view>{"length"});
    EXPECT_EQ(program.length_runs, 0);  // Read was served the stored result
  }
  {
    Program program("abc");
    Pipeline<Program> pipeline;
    pipeline.add(Measure{}).add(Append{}).add(Read{});
    EXPECT_EQ(cached_after(pipeline, program), std::vector<std::string_view>{"length"});
    EXPECT_EQ(program.length_runs, 1);  // dropped after Append, computed again
    EXPECT_EQ(*program.analyses.cached<LengthAnalysis>(), 4u);
  }
  {
    Program program("abc");
    Pipeline<Program> pipeline;
    pipeline.add(Measure{}).add(Silent{});
    EXPECT_TRUE(cached_after(pipeline, program).empty());  // a stage that says nothing preserves nothing
  }
  {
    Program program("abc");
    Pipeline<Program> pipeline;
    pipeline.add(Measure{}).add(
        FunctionStage<Program>("lambda", [](Program&, const JobEnv&) -> Task<void> { co_return; }));
    EXPECT_TRUE(cached_after(pipeline, program).empty());
  }
}

// Runs `inner` nested in a pipeline that reads the length after it; returns how often the length
// was computed.
int length_runs_after_nested(Pipeline<Program> inner) {
  Program program("abc");
  Pipeline<Program> outer;
  outer.add(std::move(inner)).add(Read{});
  EXPECT_EQ(cached_after(outer, program), std::vector<std::string_view>{"length"});
  return program.length_runs;
}

TEST(PipelineAnalyses, ANestedPipelineAppliesItsStagesReports) {
  Pipeline<Program> keeps("keeps");
  keeps.add(Measure{}).add(Read{});
  EXPECT_EQ(length_runs_after_nested(keeps), 0);
  Pipeline<Program> ends_silent("ends_silent");
  ends_silent.add(Measure{}).add(Silent{});
  EXPECT_EQ(length_runs_after_nested(ends_silent), 1);
}

}  // namespace
}  // namespace aotpipe::testing

// The CLI's per-graph summary (tools/aotpipe/compile_report.h): taking the compile's own
// partition for the partitioner that made it gives the numbers a fresh partition gives.
#include "aotpipe/compile_jobs.h"
#include "aotpipe/compile_report.h"

#include <aotpipe/runtime/compile_batch.h>
#include <aotpipe/runtime/compile_pipeline.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

namespace aotpipe::cli {
namespace {

TEST(EffectivePartitioner, ThePipelinesLastPartitionStageElseTheConfiguredOne) {
  EXPECT_EQ(effective_partitioner(default_compile_pipeline_text(), "min_cut"), "min_cut");
  EXPECT_EQ(effective_partitioner(default_compile_pipeline_text(), "default"), "default");
  EXPECT_EQ(effective_partitioner("metadata,joint,partition(default),compile", "min_cut"), "default");
  EXPECT_EQ(effective_partitioner("metadata,group(joint,partition(default)),compile", "min_cut"), "default");
  EXPECT_EQ(effective_partitioner("joint,partition(default),partition,compile", "min_cut"), "min_cut");
  EXPECT_EQ(effective_partitioner("joint,partition(default),group(partition),compile", "min_cut"), "min_cut");
  EXPECT_EQ(effective_partitioner("metadata,joint,compile", "min_cut"), "min_cut");
}

// Every training graph of the corpus, compiled with each partitioner.
TEST(Summarize, ReusingTheCompilesPartitionGivesTheNumbersOfAFreshOne) {
  std::size_t training = 0;
  for (const char* name : {"min_cut", "default"}) {
    JobSettings settings{"", 0, false, partitioner_named(name), nullptr};
    std::vector<CompileJob> jobs;
    for (const GraphFile& file : collect_graph_files({AOTPIPE_EXAMPLES_DIR}, {kGraphExtension, kExportExtension})) {
      GraphRow row;
      PreparedGraph prepared = prepare(file, settings, row);
      ASSERT_TRUE(prepared.job) << file.path << ": " << row.message;
      jobs.push_back(std::move(*prepared.job));
    }
    for (const CompileResult& result : compile_batch(std::move(jobs))) {
      ASSERT_TRUE(result.ok()) << result.name << ": " << result.message;
      const CompileState& state = *result.output->state();
      if (!state.traced.joint) continue;
      ++training;
      const GraphSummary fresh = summarize(state);
      const GraphSummary reused = summarize(state, name);
      for (auto [got, want] :
           {std::pair{reused.min_cut, fresh.min_cut}, {reused.default_partition, fresh.default_partition}}) {
        ASSERT_TRUE(got && want) << result.name;
        EXPECT_EQ(got->saved, want->saved) << result.name << " (" << name << ")";
        EXPECT_EQ(got->saved_bytes, want->saved_bytes) << result.name << " (" << name << ")";
        EXPECT_EQ(got->recomputed, want->recomputed) << result.name << " (" << name << ")";
      }
    }
  }
  EXPECT_GE(training, 100u) << "the corpus's training graphs, twice";
}

}  // namespace
}  // namespace aotpipe::cli

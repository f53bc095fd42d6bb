// The CLI's per-graph summary (tools/aotpipe/compile_report.h): taking the compile's own
// partition for the partitioner that made it (as the partition stage records it) gives the
// numbers a fresh partition gives.
#include "aotpipe/compile_jobs.h"
#include "aotpipe/compile_report.h"

#include <aotpipe/driver/compile_batch.h>
#include <aotpipe/pipeline/identified.h>
#include <aotpipe/pipeline/sync_wait.h>
#include <aotpipe/stages/compile_stages.h>
#include <aotpipe/stages/partition/default_partition.h>
#include <aotpipe/stages/partition/min_cut_partition.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

namespace aotpipe::cli {
namespace {

std::string identity(const Partitioner& p) { return identity_of(p).value_or("unnamed"); }

// The partition stage records which partitioner made the partition: the pipeline text's last
// partition stage, else the configured one (min_cut by default).
TEST(PartitionStage, RecordsThePartitionerThatRan) {
  const std::string min_cut = identity(partitioners::min_cut_rematerialization_partition());
  const std::string default_p = identity(partitioners::default_partition());
  ASSERT_NE(min_cut, default_p);
  const Function fn = [](const TensorList& a) { return TensorList{(a[0].sin() * a[1]).sum()}; };
  struct Case {
    const char* pipeline;
    const char* configured;
    std::string expected;
  };
  for (const Case& c : {Case{"metadata,dedupe,synthetic_base,joint,partition,compile", "min_cut", min_cut},
                        Case{"metadata,dedupe,synthetic_base,joint,partition,compile", "default", default_p},
                        Case{"metadata,joint,partition(default),compile", "min_cut", default_p},
                        Case{"metadata,group(joint,partition(default)),compile", "min_cut", default_p},
                        Case{"metadata,joint,partition(default),partition,compile", "min_cut", min_cut},
                        Case{"metadata,joint,partition(default),group(partition),compile", "min_cut", min_cut}}) {
    const Pipeline<CompileState> pipeline = compile_stage_registry().parse(c.pipeline, "aot");
    AotConfig config;
    config.partition_fn = partitioner_named(c.configured);
    JobEnv env{"case", default_compile_scheduler()};
    const CompileOutput out =
        sync_wait(compile_async("case", fn, {at::randn({3}).requires_grad_(), at::randn({3})}, config, pipeline, env));
    ASSERT_TRUE(out.state()->partition) << c.pipeline;
    EXPECT_EQ(out.state()->partition->partitioner, c.expected) << c.pipeline << " with " << c.configured;
  }
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
      EXPECT_EQ(state.partition->partitioner, identity(partitioner_named(name))) << result.name;
      const GraphSummary summary = summarize(state);
      for (auto [got, partitioner] : {std::pair{summary.min_cut, partitioners::min_cut_rematerialization_partition()},
                                      {summary.default_partition, partitioners::default_partition()}}) {
        const PartitionResult fresh = partitioner(*state.traced.joint);
        ASSERT_TRUE(got) << result.name;
        EXPECT_EQ(got->saved, fresh.saved_values.size()) << result.name << " (" << name << ")";
        EXPECT_EQ(got->saved_bytes, fresh.saved_bytes) << result.name << " (" << name << ")";
        EXPECT_EQ(got->recomputed, fresh.recomputed.size()) << result.name << " (" << name << ")";
      }
    }
  }
  EXPECT_GE(training, 100u) << "the corpus's training graphs, twice";
}

}  // namespace
}  // namespace aotpipe::cli

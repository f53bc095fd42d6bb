// aotpipe compile's file records (tools/aotpipe/file_records.h): the digest follows the file's
// bytes and extension and each option of the batch, not the file's path; a record is refused
// when the file changed after its digest was taken; a record's row survives any text.
#include "aotpipe/file_records.h"

#include "../runtime/temp_dir.h"

#include <aotpipe/runtime/artifact_serialization.h>
#include <aotpipe/driver/aot_function.h>
#include <aotpipe/cache/compile_cache.h>
#include <aotpipe/stages/compile_stages.h>
#include <aotpipe/stages/partition/default_partition.h>
#include <aotpipe/stages/partition/min_cut_partition.h>

#include <caffe2/serialize/inline_container.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace aotpipe::cli {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

struct Records : ::testing::Test {
  TempDir dir;
  std::shared_ptr<CompileCache> cache = [this] {
    CompileCacheOptions options;
    options.directory = dir.path / "cache";
    options.on_warning = [this](std::string_view m) { warnings.emplace_back(m); };
    return std::make_shared<CompileCache>(std::move(options));
  }();
  std::vector<std::string> warnings;

  JobSettings settings() const {
    return {"", 0, false, partitioners::min_cut_rematerialization_partition(), cache, {}};
  }
  std::string digest(const JobSettings& s, const fs::path& file) const {
    auto records = FileRecords::open(s, default_compile_pipeline_text());
    EXPECT_TRUE(records);
    return records->digest_of(file).value();
  }
  fs::path write(const std::string& name, const std::string& text) const {
    std::ofstream(dir.path / name, std::ios::binary) << text;
    return dir.path / name;
  }
};

TEST_F(Records, TheDigestFollowsTheBytesTheExtensionAndEachOptionNotThePath) {
  const fs::path file = write("a.aotg", "graph g():\n  return ()\n");
  const std::string base = digest(settings(), file);
  EXPECT_EQ(digest(settings(), write("b.aotg", "graph g():\n  return ()\n")), base);
  EXPECT_NE(digest(settings(), write("c.aotg", "graph g():\n  return ()\n# changed\n")), base);
  // The same bytes as a .pt2 are read as an archive: not one, so no digest (its compile reports why).
  EXPECT_FALSE(FileRecords::open(settings(), default_compile_pipeline_text())
                   ->digest_of(write("a.pt2", "graph g():\n  return ()\n")));
  JobSettings s = settings();
  s.seed = 1;
  EXPECT_NE(digest(s, file), base);
  s = settings();
  s.device = "cuda:0";
  EXPECT_NE(digest(s, file), base);
  s = settings();
  s.no_cpu_fallback = true;
  EXPECT_NE(digest(s, file), base);
  s = settings();
  s.partitioner = partitioners::default_partition();
  EXPECT_NE(digest(s, file), base);
  auto records = FileRecords::open(settings(), "metadata,dedupe,synthetic_base,joint,partition(default),compile");
  EXPECT_NE(records->digest_of(file).value(), base);
  EXPECT_FALSE(FileRecords::open(settings(), "metadata,my_stage,compile"));  // bypassed: nothing to point at
  s.cache = nullptr;
  EXPECT_FALSE(FileRecords::open(s, default_compile_pipeline_text()));
  EXPECT_FALSE(FileRecords::open(settings(), default_compile_pipeline_text())->digest_of(dir.path / "absent.aotg"));
}

// Flips the byte at `offset` of `file`.
void flip_byte(const fs::path& file, std::size_t offset) {
  std::fstream f(file, std::ios::binary | std::ios::in | std::ios::out);
  f.seekg(static_cast<std::streamoff>(offset));
  const char c = static_cast<char>(f.get() ^ 0x5a);
  f.seekp(static_cast<std::streamoff>(offset));
  f.put(c);
}

// A .pt2 archive's digest covers what a compile on metadata reads (the model's JSON, the
// weights' metadata) and not the weights' bytes, which it never reads.
TEST_F(Records, AnArchivesDigestFollowsItsProgramNotItsWeights) {
  const fs::path original = fs::path(AOTPIPE_EXAMPLES_DIR) / "pt2" / "tied_lm_head.pt2";
  const fs::path copy = dir.path / "tied_lm_head.pt2";
  fs::copy_file(original, copy);
  const std::string base = digest(settings(), copy);
  std::size_t weight = 0, model = 0;
  {
    caffe2::serialize::PyTorchStreamReader reader(copy.string());
    for (const std::string& record : reader.getAllRecords()) {
      if (record.starts_with("data/weights/") && !record.ends_with(".json") && reader.getRecordSize(record) > 0)
        weight = reader.getRecordOffset(record);
      if (record.starts_with("models/") && record.ends_with(".json")) model = reader.getRecordOffset(record);
    }
  }
  ASSERT_GT(weight, 0u);
  ASSERT_GT(model, 0u);
  flip_byte(copy, weight);
  EXPECT_EQ(digest(settings(), copy), base) << "a weight's bytes changed the digest";
  flip_byte(copy, model + 10);
  EXPECT_NE(digest(settings(), copy), base) << "the model's JSON did not";
}

GraphRow compiled_row() {
  GraphRow row;
  row.summary = GraphSummary{true, 10, 4, 6, PartitionNumbers{2, 64, 0}, PartitionNumbers{1, 32, 1}};
  row.backend_notes = {"not UTF-8: \xff\xfe"};
  return row;
}

TEST_F(Records, ARecordOfAFileChangedSinceItsDigestIsNotStored) {
  const fs::path file = write("a.aotg", "graph g():\n  return ()\n");
  auto records = FileRecords::open(settings(), default_compile_pipeline_text());
  const std::string before = records->digest_of(file).value();
  write("a.aotg", "graph g():\n  return ()\n# edited while it compiled\n");
  records->store(file, before, std::string(32, 'a'), compiled_row());
  EXPECT_EQ(cache->stats().records, 0u);
  EXPECT_EQ(cache->load_record(before), std::nullopt);
}

TEST_F(Records, ARecordPointsAtItsEntryAndKeepsItsRow) {
  const fs::path file = fs::path(AOTPIPE_EXAMPLES_DIR) / "mlp_layer.aotg";
  auto records = FileRecords::open(settings(), default_compile_pipeline_text());
  const std::string digest = records->digest_of(file).value();
  GraphRow row;
  PreparedGraph prepared = prepare({file, ""}, settings(), row);
  ASSERT_TRUE(prepared.job) << row.message;
  const CompileJob& job = *prepared.job;
  const CompileOutput compiled = compile(job.name, job.fn, job.example_args, job.config, job.program, job.cache);
  ASSERT_EQ(compiled.cache.outcome, CacheOutcome::Miss);

  records->store(file, digest, std::string(32, 'a'), compiled_row());  // an entry that does not exist
  EXPECT_EQ(records->load(digest), std::nullopt);                      // a miss; the record is kept
  EXPECT_EQ(cache->stats().records, 1u);
  records->store(file, digest, compiled.cache.key, compiled_row());
  const std::optional<FileRecords::Hit> hit = records->load(digest);
  ASSERT_TRUE(hit);
  EXPECT_EQ(serialize_artifact(*hit->artifact), serialize_artifact(*compiled.artifact));
  ASSERT_TRUE(hit->row.summary);
  EXPECT_EQ(hit->row.summary->ops, 10u);
  EXPECT_EQ(hit->row.summary->min_cut->saved_bytes, 32);
  EXPECT_EQ(hit->row.summary->default_partition->saved, 2u);
  ASSERT_EQ(hit->row.backend_notes.size(), 1u);
  EXPECT_EQ(hit->row.backend_notes[0].rfind("not UTF-8: ", 0), 0u);  // stored, its bad bytes replaced
  EXPECT_TRUE(warnings.empty());

  // A record naming no key is refused and removed.
  cache->store_record(digest, R"({"entry": "../../elsewhere", "row": {}})");
  EXPECT_EQ(records->load(digest), std::nullopt);
  EXPECT_EQ(cache->stats().records, 0u);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("not a key"), std::string::npos) << warnings[0];
}

}  // namespace
}  // namespace aotpipe::cli

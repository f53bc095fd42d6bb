// The CLI's batch handout (tools/aotpipe/work_chunks.h) and batch-wide graph names
// (tools/aotpipe/graph_files.h): what MPI ranks and --shard tasks must agree on.
#include "aotpipe/graph_files.h"
#include "aotpipe/work_chunks.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <numeric>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

namespace aotpipe::cli {
namespace {

namespace fs = std::filesystem;

std::vector<std::size_t> iota(std::size_t n) {
  std::vector<std::size_t> v(n);
  std::iota(v.begin(), v.end(), 0);
  return v;
}

const std::vector<std::uintmax_t> kUniform(10000, 1);

TEST(ChunkDispenser, HandsOutEveryIndexOnceInTheGivenOrder) {
  const std::vector<std::size_t> order = {7, 3, 9, 0, 1, 2, 4, 5, 6, 8};
  ChunkDispenser chunks(order, {5, 0, 3, 1, 1, 9, 2, 7, 4, 4}, 2);
  std::vector<std::size_t> seen;
  for (auto chunk = chunks.next(1); !chunk.empty(); chunk = chunks.next(1))
    seen.insert(seen.end(), chunk.begin(), chunk.end());
  EXPECT_EQ(seen, order);
  EXPECT_EQ(chunks.remaining(), 0u);
  EXPECT_TRUE(chunks.next(4).empty()) << "an emptied dispenser keeps answering 'done'";
}

TEST(ChunkDispenser, EqualCostsChunksShrinkAsTheBatchDrainsButNeverBelowTheAskersMinimum) {
  ChunkDispenser chunks(iota(728), kUniform, 4);  // the 8x corpus over 4 ranks
  std::vector<std::size_t> sizes;
  for (auto chunk = chunks.next(3); !chunk.empty(); chunk = chunks.next(3)) sizes.push_back(chunk.size());
  ASSERT_GE(sizes.size(), 3u);
  EXPECT_EQ(sizes.front(), 91u) << "remaining / (2 x workers)";
  EXPECT_TRUE(std::is_sorted(sizes.rbegin(), sizes.rend())) << "sizes never grow";
  for (std::size_t i = 0; i + 1 < sizes.size(); ++i) EXPECT_GE(sizes[i], 3u) << "chunk " << i;
  EXPECT_LE(sizes.back(), 3u);
  EXPECT_EQ(std::accumulate(sizes.begin(), sizes.end(), std::size_t{0}), 728u);
  EXPECT_LT(sizes.size(), 728u / 3) << "chunks, not single graphs";
}

TEST(ChunkDispenser, ABiggerMinimumWinsOverTheGuidedSize) {
  ChunkDispenser chunks(iota(100), kUniform, 8);
  EXPECT_EQ(chunks.next(32).size(), 32u);
  EXPECT_EQ(chunks.next(1).size(), 5u);  // ceil(68 / 16)
}

// Largest first, sized by count, the first chunk would hold most of the work; by cost, each chunk
// holds about remaining cost / (2 x workers), so the expensive files are spread over the askers.
TEST(ChunkDispenser, ChunksAreSizedByCostNotByCount) {
  std::vector<std::uintmax_t> costs(400, 1);
  for (std::size_t i = 0; i < 8; ++i) costs[i] = 100;  // 8 heavy files: 800 of the total 1192
  ChunkDispenser chunks(iota(400), costs, 2);
  std::vector<std::uintmax_t> chunk_costs;
  std::vector<std::size_t> sizes;
  for (auto chunk = chunks.next(1); !chunk.empty(); chunk = chunks.next(1)) {
    std::uintmax_t cost = 0;
    for (std::size_t i : chunk) cost += costs[i];
    chunk_costs.push_back(cost);
    sizes.push_back(chunk.size());
  }
  EXPECT_EQ(sizes[0], 3u) << "ceil(1192 / 4) = 298: three heavy files";
  EXPECT_EQ(sizes[1], 3u) << "ceil(892 / 4) = 223";
  EXPECT_EQ(sizes[2], 2u) << "ceil(592 / 4) = 148: the last two heavy files";
  EXPECT_EQ(sizes[3], 98u) << "ceil(392 / 4): then the light ones, many to a chunk";
  EXPECT_TRUE(std::is_sorted(chunk_costs.rbegin(), chunk_costs.rend())) << "chunk costs never grow";
  EXPECT_EQ(std::accumulate(sizes.begin(), sizes.end(), std::size_t{0}), 400u);
}

TEST(ChunkDispenser, ConcurrentAskersGetDisjointChunksCoveringTheBatch) {
  ChunkDispenser chunks(iota(5000), kUniform, 8);
  std::mutex mutex;
  std::vector<std::size_t> seen;
  std::vector<std::thread> askers;
  for (int t = 0; t < 8; ++t)
    askers.emplace_back([&] {
      for (auto chunk = chunks.next(2); !chunk.empty(); chunk = chunks.next(2)) {
        std::lock_guard lock(mutex);
        seen.insert(seen.end(), chunk.begin(), chunk.end());
      }
    });
  for (auto& t : askers) t.join();
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, iota(5000));
}

class TempFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("work_chunks_test." + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    for (const auto& entry : fs::directory_iterator(dir_)) ::unlink(entry.path().c_str());
    ::rmdir(dir_.c_str());
  }
  GraphFile write(const std::string& name, const std::string& text) {
    const fs::path path = dir_ / name;
    std::ofstream(path, std::ios::binary) << text;
    return {path, {}};
  }
  fs::path dir_;
};

TEST_F(TempFiles, LargestFirstByFileSizeThenByPath) {
  const std::vector<GraphFile> files = {write("b.aotg", "12"), write("a.aotg", "1234"), write("c.aotg", "1234"),
                                        write("d.aotg", "")};
  const std::vector<std::size_t> order = largest_first(files, estimated_costs(files));
  EXPECT_EQ(order, (std::vector<std::size_t>{1, 2, 0, 3}));
  const GraphFile missing{dir_ / "missing.aotg", "no such file"};
  EXPECT_EQ(estimated_costs({missing}), std::vector<std::uintmax_t>{0});
}

TEST_F(TempFiles, TheNameHintIsTheDeclaredGraphNameOrTheStem) {
  EXPECT_EQ(graph_name_hint(write("x.aotg", "# a comment\n\n  # another\ngraph mlp_layer(%x: f32[2]):\n")),
            "mlp_layer");
  EXPECT_EQ(graph_name_hint(write("q.aotg", "graph \"a \\\"quoted\\\" name\"(%x: f32[2]):\n")), "a \"quoted\" name");
  EXPECT_EQ(graph_name_hint(write("ns.aotg", "graph my.mod::block_1(%x: f32[2]):\n")), "my.mod::block_1");
  EXPECT_EQ(graph_name_hint(write("empty.aotg", "")), "empty");
  EXPECT_EQ(graph_name_hint(write("garbage.aotg", "\x7f\x01graph g(")), "garbage");
  EXPECT_EQ(graph_name_hint(write("graphx.aotg", "graphx g(%x: f32[2]):\n")), "graphx");
  EXPECT_EQ(graph_name_hint(write("open.aotg", "graph \"unterminated\n")), "open");
  EXPECT_EQ(graph_name_hint(write("model.pt2", "graph not_read(")), "model") << "an archive is named by its stem";
  EXPECT_EQ(graph_name_hint(GraphFile{dir_ / "gone.aotg", "no such file"}), "gone");
}

TEST(UniqueNames, SuffixesInOrder) {
  EXPECT_EQ(unique_names({"a", "b", "a", "a", "b", "c"}),
            (std::vector<std::string>{"a", "b", "a#2", "a#3", "b#2", "c"}));
  EXPECT_TRUE(unique_names({}).empty());
}

}  // namespace
}  // namespace aotpipe::cli

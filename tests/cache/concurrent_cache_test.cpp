// The compile cache under concurrency (also run under ThreadSanitizer with libtorch, label
// tsan-torch): sixteen threads compiling the same graphs through one cache compile each once
// (single flight) and are served the rest; sixteen caches on one folder (independent writers,
// as processes) race to publish the same entries and leave whole ones that a reader loads.
#include "../runtime/temp_dir.h"

#include <aotpipe/graph/parser.h>
#include <aotpipe/driver/aot_function.h>
#include <aotpipe/cache/compile_cache.h>
#include <aotpipe/runtime/graph_function.h>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

namespace aotpipe {
namespace {

namespace fs = std::filesystem;

using testing::TempDir;

struct Warnings {
  std::mutex mutex;
  std::vector<std::string> seen;
  std::shared_ptr<CompileCache> cache_in(const fs::path& dir) {
    CompileCacheOptions options;
    options.directory = dir;
    options.on_warning = [this](std::string_view m) {
      std::lock_guard lock(mutex);
      seen.emplace_back(m);
    };
    return std::make_shared<CompileCache>(std::move(options));
  }
};

// Example graphs without tensor constants, as programs.
struct Program {
  std::shared_ptr<const Graph> graph;
  TensorList args;
};
std::vector<Program> programs() {
  std::vector<Program> out;
  for (const char* name : {"mlp_layer", "views", "unet_up_block", "relu_inplace_input"}) {
    std::ifstream in(fs::path(AOTPIPE_EXAMPLES_DIR) / (std::string(name) + ".aotg"));
    std::stringstream text;
    text << in.rdbuf();
    auto graph = std::make_shared<const Graph>(parse_graph(text.str()));
    out.push_back({graph, metadata_example_args(*graph)});
  }
  return out;
}

CacheOutcome compile_with(const Program& p, std::shared_ptr<CompileCache> cache) {
  return compile(p.graph->name(), graph_function(p.graph), p.args, {}, p.graph, std::move(cache)).cache.outcome;
}

TEST(ConcurrentCache, SixteenThreadsCompileEachGraphOnce) {
  TempDir dir;
  Warnings warnings;
  const auto cache = warnings.cache_in(dir.path);
  const std::vector<Program> all = programs();
  std::atomic<int> bypassed{0};
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < 16; ++t)
    threads.emplace_back([&, t] {
      for (std::size_t k = 0; k < all.size(); ++k)
        if (compile_with(all[(k + t) % all.size()], cache) == CacheOutcome::Bypassed) ++bypassed;
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(bypassed.load(), 0);
  // Single flight: each distinct graph compiled once; the other compiles were served.
  EXPECT_EQ(cache->counters().misses, all.size());
  EXPECT_EQ(cache->counters().hits, 15 * all.size());
  EXPECT_TRUE(warnings.seen.empty()) << warnings.seen.front();
}

TEST(ConcurrentCache, IndependentWritersOfOneFolderLeaveWholeEntries) {
  TempDir dir;
  Warnings warnings;
  const std::vector<Program> all = programs();
  std::vector<std::thread> writers;
  for (int t = 0; t < 16; ++t)
    writers.emplace_back([&] {
      const auto cache = warnings.cache_in(dir.path);  // one per thread: no single flight between them
      for (const Program& p : all) (void)compile_with(p, cache);
    });
  for (auto& t : writers) t.join();
  const auto reader = warnings.cache_in(dir.path);
  for (const Program& p : all) EXPECT_EQ(compile_with(p, reader), CacheOutcome::Hit);
  EXPECT_EQ(reader->stats().entries, all.size());
  EXPECT_EQ(reader->stats().temporary_files, 0u);
  EXPECT_TRUE(warnings.seen.empty()) << warnings.seen.front();
}

}  // namespace
}  // namespace aotpipe

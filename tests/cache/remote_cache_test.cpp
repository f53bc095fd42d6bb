// The compile cache's Redis level against a real redis-server started on a free port: two caches
// with different local folders share compiles through it; a corrupted remote entry is
// recompiled with a warning and replaced; Redis stopped in the middle of a batch costs one
// warning and nothing else. Skips, saying why, where redis-server or hiredis is missing.
#include "../runtime/temp_dir.h"

#include <aotpipe/graph/parser.h>
#include <aotpipe/driver/aot_function.h>
#include <aotpipe/cache/compile_cache.h>
#include <aotpipe/runtime/graph_function.h>

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <thread>

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace aotpipe {
namespace {

using ::testing::HasSubstr;
using testing::TempDir;

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof addr;
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &length);
  ::close(fd);
  return ntohs(addr.sin_port);
}

// redis-server on a free port, in memory only, stopped by the destructor (or stop()).
class RedisServer {
 public:
  RedisServer() : port_(free_port()) {
    const std::string port = std::to_string(port_);
    std::vector<std::string> args = {"redis-server", "--port", port,         "--bind", "127.0.0.1", "--save", "",
                                     "--appendonly", "no",     "--loglevel", "warning"};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t quiet;  // its log is not the test's
    ::posix_spawn_file_actions_init(&quiet);
    ::posix_spawn_file_actions_addopen(&quiet, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    if (::posix_spawnp(&pid_, "redis-server", &quiet, nullptr, argv.data(), environ) != 0) pid_ = 0;
    ::posix_spawn_file_actions_destroy(&quiet);
  }
  ~RedisServer() { stop(); }
  bool started() const { return pid_ != 0; }
  std::string url() const { return fmt::format("redis://127.0.0.1:{}", port_); }
  // Waits until the server answers (it starts in milliseconds; at most 10 s).
  bool ready() const {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      try {
        (void)redis_remote_cache(url())->get("ping");
        return true;
      } catch (const RemoteCacheError&) { std::this_thread::yield(); }
    }
    return false;
  }
  void stop() {
    if (!pid_) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = 0;
  }

 private:
  int port_;
  pid_t pid_ = 0;
};

struct Warnings {
  std::mutex mutex;
  std::vector<std::string> seen;
  std::shared_ptr<CompileCache> cache(const std::filesystem::path& dir, const std::string& remote_url) {
    CompileCacheOptions options;
    options.directory = dir;
    options.remote = redis_remote_cache(remote_url);
    options.on_warning = [this](std::string_view m) {
      std::lock_guard lock(mutex);
      seen.emplace_back(m);
    };
    return std::make_shared<CompileCache>(std::move(options));
  }
};

// A small graph program; `k` makes distinct programs.
CompileOutput compile_program(int k, std::shared_ptr<CompileCache> cache) {
  auto graph = std::make_shared<const Graph>(parse_graph(fmt::format(R"(graph g(%x: f32[4, {0}] requires_grad):
  %y: f32[4, {0}] = aten::sin(%x)
  %z: f32[] = aten::sum(%y)
  return (%z)
)",
                                                                     k + 1)));
  return compile(fmt::format("p{}", k), graph_function(graph), metadata_example_args(*graph), {}, graph,
                 std::move(cache));
}

class RemoteCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!redis_remote_cache_available()) GTEST_SKIP() << "aotpipe was built without hiredis (libhiredis-dev)";
    if (!server_.started()) GTEST_SKIP() << "redis-server is not installed (Debian package redis-server)";
    ASSERT_TRUE(server_.ready()) << "redis-server did not answer on " << server_.url();
  }
  RedisServer server_;
  Warnings warnings_;
};

TEST_F(RemoteCacheTest, TwoLocalFoldersShareCompilesThroughRedis) {
  TempDir first_dir, second_dir;
  auto first = warnings_.cache(first_dir.path, server_.url());
  auto second = warnings_.cache(second_dir.path, server_.url());
  EXPECT_EQ(compile_program(0, first).cache.outcome, CacheOutcome::Miss);
  const CompileOutput hit = compile_program(0, second);
  EXPECT_EQ(hit.cache.outcome, CacheOutcome::Hit);
  EXPECT_EQ(second->counters().remote_hits, 1u);
  EXPECT_EQ(second->stats().entries, 1u);  // the remote hit is kept locally
  EXPECT_EQ(compile_program(0, second).cache.outcome, CacheOutcome::Hit);
  EXPECT_EQ(second->counters().remote_hits, 1u);  // ...and served from there next
  const at::Tensor x = at::randn({4, 1});
  EXPECT_TRUE(at::allclose(hit.runtime({x})[0], x.sin().sum()));
  EXPECT_TRUE(warnings_.seen.empty()) << warnings_.seen.front();
}

TEST_F(RemoteCacheTest, ACorruptedRemoteEntryIsRecompiledAndReplaced) {
  TempDir a, b, c;
  const std::string key = compile_program(1, warnings_.cache(a.path, server_.url())).cache.key;
  redis_remote_cache(server_.url())->put(key, "AOTPCACH but not an entry");
  const CompileOutput again = compile_program(1, warnings_.cache(b.path, server_.url()));
  EXPECT_EQ(again.cache.outcome, CacheOutcome::Miss);
  ASSERT_EQ(warnings_.seen.size(), 1u);
  EXPECT_THAT(warnings_.seen[0], HasSubstr("remote compile cache entry " + key));
  EXPECT_THAT(warnings_.seen[0], HasSubstr("unusable"));
  EXPECT_EQ(compile_program(1, warnings_.cache(c.path, server_.url())).cache.outcome, CacheOutcome::Hit);
}

TEST_F(RemoteCacheTest, RedisStoppedMidBatchCostsOneWarningAndNoCompile) {
  TempDir dir;
  auto cache = warnings_.cache(dir.path, server_.url());
  EXPECT_EQ(compile_program(2, cache).cache.outcome, CacheOutcome::Miss);
  server_.stop();
  for (int k = 3; k < 6; ++k) {
    const CompileOutput out = compile_program(k, cache);
    EXPECT_EQ(out.cache.outcome, CacheOutcome::Miss);
    const at::Tensor x = at::randn({4, k + 1});
    EXPECT_TRUE(at::allclose(out.runtime({x})[0], x.sin().sum()));
  }
  EXPECT_EQ(compile_program(2, cache).cache.outcome, CacheOutcome::Hit);  // the local level still works
  EXPECT_TRUE(cache->counters().remote_failed);
  ASSERT_EQ(warnings_.seen.size(), 1u);
  EXPECT_THAT(warnings_.seen[0], HasSubstr("the remote cache is off for the rest of this run"));
}

TEST(RemoteCacheUrl, MalformedUrlsAreRefusedByName) {
  if (!redis_remote_cache_available()) GTEST_SKIP() << "aotpipe was built without hiredis (libhiredis-dev)";
  for (const char* url : {"http://host:1", "redis://:6379", "redis://host:99999", "redis://host:port"})
    EXPECT_THROW(redis_remote_cache(url), std::invalid_argument) << url;
}

}  // namespace
}  // namespace aotpipe

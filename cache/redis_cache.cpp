// The Redis remote cache on hiredis (built when CMake finds it; redis_cache_unavailable.cpp
// otherwise).
#include <aotpipe/cache/remote_cache.h>

#include <fmt/format.h>
#include <hiredis/hiredis.h>

#include <charconv>
#include <mutex>
#include <vector>

namespace aotpipe {
namespace {

struct Endpoint {
  std::string host;
  int port = 6379;
};

Endpoint parse_url(std::string_view url) {
  constexpr std::string_view scheme = "redis://";
  if (!url.starts_with(scheme))
    throw std::invalid_argument(fmt::format("remote cache '{}': expected redis://HOST:PORT", url));
  std::string_view rest = url.substr(scheme.size());
  if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  Endpoint e;
  const auto colon = rest.rfind(':');
  e.host = std::string(rest.substr(0, colon));
  if (colon != std::string_view::npos) {
    const std::string_view port = rest.substr(colon + 1);
    auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), e.port);
    if (ec != std::errc() || ptr != port.data() + port.size() || e.port <= 0 || e.port > 65535)
      throw std::invalid_argument(fmt::format("remote cache '{}': bad port '{}'", url, port));
  }
  if (e.host.empty()) throw std::invalid_argument(fmt::format("remote cache '{}': no host", url));
  return e;
}

struct ReplyDeleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

class RedisCache final : public RemoteCache {
 public:
  RedisCache(std::string url, Endpoint endpoint, RedisCacheOptions options)
      : url_(std::move(url)), endpoint_(std::move(endpoint)), options_(std::move(options)) {}
  ~RedisCache() override {
    if (context_) redisFree(context_);
  }

  std::string describe() const override { return url_; }

  std::optional<std::string> get(std::string_view key) override {
    const std::string full = options_.key_prefix + std::string(key);
    std::lock_guard lock(mutex_);
    Reply reply = command({"GET", full});
    if (reply->type == REDIS_REPLY_NIL) return std::nullopt;
    if (reply->type != REDIS_REPLY_STRING) fail(fmt::format("GET answered reply type {}", reply->type));
    return std::string(reply->str, reply->len);
  }

  void put(std::string_view key, std::string_view value) override {
    if (value.size() > options_.max_entry_bytes) return;
    const std::string full = options_.key_prefix + std::string(key);
    std::lock_guard lock(mutex_);
    Reply reply = command({"SET", full, value});
    if (reply->type != REDIS_REPLY_STATUS) fail(fmt::format("SET answered reply type {}", reply->type));
  }

 private:
  [[noreturn]] void fail(const std::string& what) {
    throw RemoteCacheError(fmt::format("remote cache {}: {}", url_, what));
  }

  void connect() {
    const timeval tv{static_cast<time_t>(options_.timeout.count() / 1000),
                     static_cast<suseconds_t>(options_.timeout.count() % 1000 * 1000)};
    context_ = redisConnectWithTimeout(endpoint_.host.c_str(), endpoint_.port, tv);
    if (!context_) fail("cannot allocate a connection");
    if (context_->err) {
      const std::string why = context_->errstr;
      redisFree(context_);
      context_ = nullptr;
      fail(fmt::format("cannot connect: {}", why));
    }
    redisSetTimeout(context_, tv);
  }

  Reply command(std::initializer_list<std::string_view> words) {
    if (!context_) connect();
    std::vector<const char*> argv;
    std::vector<std::size_t> lengths;
    for (std::string_view w : words) {
      argv.push_back(w.data());
      lengths.push_back(w.size());
    }
    auto* raw = static_cast<redisReply*>(
        redisCommandArgv(context_, static_cast<int>(argv.size()), argv.data(), lengths.data()));
    if (!raw) {
      const std::string why = context_->errstr;
      redisFree(context_);  // a failed context cannot be reused
      context_ = nullptr;
      fail(why.empty() ? "no reply" : why);
    }
    Reply reply(raw);
    if (reply->type == REDIS_REPLY_ERROR) fail(std::string(reply->str, reply->len));
    return reply;
  }

  std::string url_;
  Endpoint endpoint_;
  RedisCacheOptions options_;
  std::mutex mutex_;
  redisContext* context_ = nullptr;
};

}  // namespace

std::shared_ptr<RemoteCache> redis_remote_cache(std::string_view url, RedisCacheOptions options) {
  return std::make_shared<RedisCache>(std::string(url), parse_url(url), std::move(options));
}

bool redis_remote_cache_available() { return true; }

}  // namespace aotpipe

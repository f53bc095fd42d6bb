#pragma once
// A second level under the local compile cache, shared by every machine and run (Redis). Its
// values are whole cache entries, the same bytes as local ones, and they are checked the same
// way on read (compile_cache.h): a remote that anyone can write cannot make a reader run code
// or trust a damaged entry. See docs/cache.md.
#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace aotpipe {

// A failed remote operation (connection, timeout, protocol); the compile cache turns the remote
// off for the rest of the process at the first one.
class RemoteCacheError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class RemoteCache {
 public:
  virtual ~RemoteCache() = default;
  virtual std::string describe() const = 0;  // "redis://host:port"
  // The value stored under `key`, nullopt when there is none. Throws RemoteCacheError.
  virtual std::optional<std::string> get(std::string_view key) = 0;
  // Stores `value` under `key` (a value over the size cap is skipped). Throws RemoteCacheError.
  virtual void put(std::string_view key, std::string_view value) = 0;
};

struct RedisCacheOptions {
  std::chrono::milliseconds timeout{1000};              // connect and each command
  std::size_t max_entry_bytes = std::size_t{64} << 20;  // larger entries stay local
  std::string key_prefix = "aotpipe:compile:";
};

// A Redis server as a remote cache: `url` is redis://HOST:PORT. Connects on first use, one
// connection shared by the process's threads (commands are serialized). Throws
// std::invalid_argument for a malformed URL, or when aotpipe was built without hiredis.
std::shared_ptr<RemoteCache> redis_remote_cache(std::string_view url, RedisCacheOptions options = {});

// Whether this build has the Redis client (hiredis).
bool redis_remote_cache_available();

}  // namespace aotpipe

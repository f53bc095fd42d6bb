// redis_remote_cache for a build without hiredis (CMake did not find it).
#include <aotpipe/cache/remote_cache.h>

#include <string>

namespace aotpipe {

std::shared_ptr<RemoteCache> redis_remote_cache(std::string_view url, RedisCacheOptions) {
  throw std::invalid_argument("remote cache '" + std::string(url) +
                              "': this aotpipe was built without the Redis client (hiredis; install libhiredis-dev)");
}

bool redis_remote_cache_available() { return false; }

}  // namespace aotpipe

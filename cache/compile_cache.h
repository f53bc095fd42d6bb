#pragma once
// The persistent compile cache (PyTorch's AOTAutogradCache): compiled artifacts on disk, keyed
// by everything the compile depends on (cache/cache_key.h), so a process that compiles the
// same graphs again runs only post_compile.
//
//   auto cache = std::make_shared<CompileCache>();   // $XDG_CACHE_HOME/aotpipe/compile
//   auto f = aot_function(fn, config, cache);        // first call: a hit if any process compiled it
//
// Entries are plain data (compiled_artifact.h), checked on read and never executed: a header
// with the format version, the key and a checksum (XXH3-128) of the payload; a truncated, garbage or
// wrong-version entry is removed and recompiled with a warning, never trusted. Writes are
// atomic (a temporary file in the entry's folder, then rename), so concurrent processes and a
// process killed mid-write leave only whole entries. The folder is kept under a size bound by
// removing the least recently used entries (a hit refreshes an entry's time when it is more
// than an hour old), as ccache does.
// Within a process, identical compiles in flight at the same time compile once (single flight).
//
// Thread-safe: one CompileCache may serve every compile of a process.
#include <aotpipe/pipeline/scheduler.h>
#include <aotpipe/cache/cache_key.h>
#include <aotpipe/runtime/compiled_artifact.h>
#include <aotpipe/cache/remote_cache.h>

#include <atomic>
#include <coroutine>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace aotpipe {

struct CompileCacheOptions {
  std::filesystem::path directory;       // empty: CompileCache::default_directory()
  std::uint64_t max_bytes = 1ull << 30;  // bound on the entries' total size (1 GiB)
  // Where warnings go (a corrupt entry, a failed write); empty: standard error.
  std::function<void(std::string_view)> on_warning;
  // A second level shared by machines and runs (remote_cache.h), e.g. redis_remote_cache(url).
  // Looked up after a local miss (a remote hit is written to the local folder too) and written
  // after every compile. Its entries are checked as local ones are; its first failure turns it
  // off for the rest of the process with one warning, never failing or losing a compile.
  std::shared_ptr<RemoteCache> remote;
};

// What the cache did for one compile.
enum class CacheOutcome {
  Off,       // no cache configured
  Bypassed,  // not cacheable (CacheReport::note says why)
  Miss,      // compiled, then stored
  Hit,       // loaded; only post_compile ran
};
std::string_view to_string(CacheOutcome outcome);

struct CacheReport {
  CacheOutcome outcome = CacheOutcome::Off;
  std::string key;   // the entry's digest (Miss, Hit)
  std::string note;  // Bypassed: why; Miss: a warning about the entry found, if any
};

struct CompileCacheCounters {
  std::size_t hits = 0, misses = 0, bypassed = 0, stores = 0;
  std::size_t evictions = 0;    // entries and records removed to keep the bound
  std::size_t rejected = 0;     // unusable entries and records removed
  std::size_t remote_hits = 0;  // hits served by the remote (included in hits)
  bool remote_failed = false;   // the remote was turned off after an error
  std::size_t mapped = 0;       // local hits whose entry was mapped rather than read
};

struct CompileCacheStats {
  std::filesystem::path directory;
  std::size_t entries = 0;
  std::size_t records = 0;  // CompileCache::store_record's
  std::uint64_t bytes = 0;  // entries and records
  std::uint64_t max_bytes = 0;
  std::size_t temporary_files = 0;  // left by writers that were killed
};

class CompileCache {
 public:
  explicit CompileCache(CompileCacheOptions options = {});

  // $XDG_CACHE_HOME/aotpipe/compile, else $HOME/.cache/aotpipe/compile.
  static std::filesystem::path default_directory();
  // The entry format version; entries of another version are recompiled.
  static constexpr std::uint32_t kEntryVersion = 1;

  const std::filesystem::path& directory() const noexcept { return directory_; }
  std::filesystem::path entry_path(std::string_view digest) const;

  // The verified artifact stored under `key`, or null when there is none or it is unusable (then
  // the entry is removed and `warning`, when given, says why).
  std::shared_ptr<CompiledArtifact> load(const CacheKey& key, std::string* warning = nullptr);
  // Publishes `artifact` under `key` atomically; never throws (a failure is a warning).
  void store(const CacheKey& key, const CompiledArtifact& artifact);

  // --- Records (ccache's manifests) ---------------------------------------------------------
  // Small data a caller keeps beside the entries under a digest of its own: what lets it find an
  // entry more cheaply than by computing the entry's key. `aotpipe compile` keeps "this graph
  // file's bytes with these options compiled to entry K; its report row was R", so a warm run
  // neither parses the file nor keys its program. Records are framed and checked as entries are
  // (a damaged one is removed with a warning, and is a miss), count towards the size bound, are
  // evicted and cleared with the entries, and stay local (never sent to the remote level).
  std::optional<std::string> load_record(std::string_view digest, std::string* warning = nullptr);
  void store_record(std::string_view digest, std::string_view payload);  // never throws (a failure warns)
  // A record its caller found unusable (its payload does not parse): removed with a warning.
  void reject_record(std::string_view digest, std::string_view why, std::string* warning = nullptr);

  // Whether entries of 256 KiB or more are mapped rather than read: the folder is on a local
  // filesystem (docs/cache.md).
  bool maps_large_entries() const;

  CompileCacheStats stats() const;
  // Removes every entry, record and temporary file.
  void clear();
  CompileCacheCounters counters() const;
  // Counts one compile's outcome (the compile entry points do).
  void count(CacheOutcome outcome);

  void warn(std::string_view message) const;

  // --- Single flight ------------------------------------------------------------------------
  // The first compile of a key leads: it compiles and finishes the flight with its artifact
  // (null when it failed). Compiles of the same key that start meanwhile follow: they await the
  // leader's artifact instead of compiling (and compile themselves if the leader failed).
  class Flight;
  struct FlightTicket {
    std::shared_ptr<Flight> flight;
    bool leader = false;
  };
  FlightTicket join_flight(const std::string& digest);
  void finish_flight(const std::string& digest, const std::shared_ptr<Flight>& flight,
                     std::shared_ptr<const CompiledArtifact> artifact);

  class Flight {
   public:
    // Resumes the awaiting coroutine on `scheduler` once the leader finishes; yields its artifact.
    struct Awaiter {
      Flight& flight;
      Scheduler& scheduler;
      bool await_ready() const;
      bool await_suspend(std::coroutine_handle<> handle) const;
      std::shared_ptr<const CompiledArtifact> await_resume() const;
    };
    Awaiter wait(Scheduler& scheduler) { return Awaiter{*this, scheduler}; }

   private:
    friend class CompileCache;
    mutable std::mutex mutex_;
    bool done_ = false;
    std::shared_ptr<const CompiledArtifact> artifact_;
    mutable std::vector<std::pair<std::coroutine_handle<>, Scheduler*>> waiters_;
  };

 private:
  std::string entry_file(std::string_view digest) const;  // entry_path, as a string
  std::string cache_file(std::string_view digest, std::string_view suffix) const;
  void reject_record_file(const std::string& path, std::string_view why, std::string* warning);
  void evict_if_needed(std::uint64_t added);
  std::uint64_t scan_bytes() const;
  // Writes a whole entry to `path` atomically; throws on failure.
  void publish(const std::filesystem::path& path, std::string_view entry);
  std::shared_ptr<CompiledArtifact> load_remote(const CacheKey& key, std::string* warning);
  void remote_failed(const RemoteCacheError& error);
  bool remote_on() const { return remote_ && !remote_off_.load(); }

  std::filesystem::path directory_;
  std::uint64_t max_bytes_;
  std::function<void(std::string_view)> on_warning_;
  std::shared_ptr<RemoteCache> remote_;
  std::atomic<bool> remote_off_{false};

  std::mutex flights_mutex_;
  std::map<std::string, std::shared_ptr<Flight>, std::less<>> flights_;

  std::mutex size_mutex_;
  std::uint64_t known_bytes_ = 0;  // the folder's size as this process last scanned it plus its writes
  bool scanned_ = false;

  std::atomic<std::size_t> hits_{0}, misses_{0}, bypassed_{0}, stores_{0}, evictions_{0}, rejected_{0}, remote_hits_{0},
      mapped_{0};
};

}  // namespace aotpipe

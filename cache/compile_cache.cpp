#include <aotpipe/cache/compile_cache.h>

#include <aotpipe/runtime/artifact_serialization.h>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <system_error>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

namespace aotpipe {
namespace fs = std::filesystem;

namespace {

// An entry: magic, format version, the key it was stored under, the payload's length and
// checksum (XXH3-128), then the payload (serialize_artifact).
constexpr char kMagic[8] = {'A', 'O', 'T', 'P', 'C', 'A', 'C', 'H'};
constexpr std::string_view kEntrySuffix = ".entry";
constexpr std::string_view kRecordSuffix = ".record";  // records have an entry's frame
constexpr std::string_view kTempPrefix = ".tmp-";
constexpr std::size_t kChecksumDigits = 32;  // content_hash_hex

template <typename T>
void put(std::string& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof value);
}

template <typename T>
std::optional<T> take(std::string_view& in) {
  if (in.size() < sizeof(T)) return std::nullopt;
  T value;
  std::memcpy(&value, in.data(), sizeof value);
  in.remove_prefix(sizeof value);
  return value;
}

// A whole file's bytes, and what keeps them alive: a string, or a mapping of the file.
struct FileContents {
  std::shared_ptr<const void> owner;
  std::string_view bytes;
  struct timespec mtime {};
  bool mapped = false;
};

// Entries this large are mapped rather than read where the folder is on a local filesystem: a
// read copies them into fresh memory, whose page faults cost more than the copy (an entry with
// 6 MB of constants: 4 ms read, 0.5 ms mapped and checksummed). Not on network filesystems,
// where a file another machine removes would fault the mapping; our writers never change a
// published file in place (they rename whole files over it), so locally a mapping only ever
// sees the bytes it was checked with.
constexpr std::size_t kMapEntriesFrom = std::size_t{256} * 1024;

bool is_local_filesystem(int fd) {
  struct statfs fs {};
  if (::fstatfs(fd, &fs) != 0) return false;
  switch (static_cast<unsigned long>(fs.f_type)) {
    case 0xEF53:      // ext2/3/4
    case 0x58465342:  // xfs
    case 0x9123683E:  // btrfs
    case 0x01021994:  // tmpfs
    case 0x794C7630:  // overlayfs
    case 0xF2F52010:  // f2fs
    case 0x2FC12FC1:  // zfs
      return true;
    default: return false;
  }
}

struct Mapping {
  void* address;
  std::size_t size;
  Mapping(void* a, std::size_t n) : address(a), size(n) {}
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping() { ::munmap(address, size); }
};

std::optional<FileContents> map_file(int fd, std::size_t size) {
  void* address = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
  if (address == MAP_FAILED) return std::nullopt;
  auto mapping = std::make_shared<const Mapping>(address, size);
  // Changed in place since fstat (no aotpipe writer does that): a read finds out how.
  struct stat st {};
  if (::fstat(fd, &st) != 0 || static_cast<std::size_t>(st.st_size) != size) return std::nullopt;
  FileContents file;
  file.mapped = true;
  file.bytes = std::string_view(static_cast<const char*>(address), size);
  file.owner = std::move(mapping);
  return file;
}

// Reads `fd` whole into `bytes`, sized to the file beforehand (it may have grown or shrunk since).
bool read_into(int fd, std::string& bytes) {
  std::size_t done = 0;
  for (;;) {
    if (done == bytes.size()) {
      // At fstat's size: a read into a small buffer says whether the file grew since, without
      // growing (and copying) the whole string to find out.
      char probe[4096];
      const ssize_t n = ::read(fd, probe, sizeof probe);
      if (n <= 0) return n == 0;
      bytes.append(probe, static_cast<std::size_t>(n));
      done += static_cast<std::size_t>(n);
      continue;
    }
    const ssize_t n = ::read(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) return false;
    if (n == 0) {
      bytes.resize(done);  // shrunk since fstat
      return true;
    }
    done += static_cast<std::size_t>(n);
  }
}

std::optional<FileContents> read_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  struct stat st {};
  std::optional<FileContents> file;
  if (::fstat(fd, &st) == 0) {
    const auto size = static_cast<std::size_t>(st.st_size);
    if (size >= kMapEntriesFrom && is_local_filesystem(fd)) file = map_file(fd, size);
    if (!file) {
      auto bytes = std::make_shared<std::string>(size, '\0');
      if (read_into(fd, *bytes)) file = FileContents{bytes, *bytes, {}};
    }
    if (file) file->mtime = st.st_mtim;
  }
  ::close(fd);
  return file;
}

// A hit refreshes its entry's time (eviction removes the least recently used first) only when
// the time is older than this: eviction needs no finer order, and hits then cost no writes.
constexpr std::int64_t kRefreshAfterSeconds = 3600;

bool needs_refresh(const struct timespec& mtime) {
  const auto now =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch());
  return now.count() - mtime.tv_sec > kRefreshAfterSeconds;
}

bool write_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

bool is_entry(const fs::path& path) { return path.extension() == kEntrySuffix; }
bool is_record(const fs::path& path) { return path.extension() == kRecordSuffix; }
bool is_temporary(const fs::path& path) { return path.filename().string().starts_with(kTempPrefix); }

struct FileInfo {
  fs::path path;
  std::uint64_t bytes = 0;
  struct timespec mtime {};
};

// Entries and temporary files under `root` (missing: none).
std::vector<FileInfo> list_files(const fs::path& root) {
  std::vector<FileInfo> files;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    struct stat st {};
    if (::stat(it->path().c_str(), &st) != 0) continue;
    files.push_back({it->path(), static_cast<std::uint64_t>(st.st_size), st.st_mtim});
  }
  return files;
}

bool older(const struct timespec& a, const struct timespec& b) {
  return a.tv_sec != b.tv_sec ? a.tv_sec < b.tv_sec : a.tv_nsec < b.tv_nsec;
}

}  // namespace

std::string_view to_string(CacheOutcome outcome) {
  switch (outcome) {
    case CacheOutcome::Off: return "off";
    case CacheOutcome::Bypassed: return "bypassed";
    case CacheOutcome::Miss: return "miss";
    case CacheOutcome::Hit: return "hit";
  }
  return "?";
}

CompileCache::CompileCache(CompileCacheOptions options)
    : directory_(options.directory.empty() ? default_directory() : std::move(options.directory)),
      max_bytes_(options.max_bytes),
      on_warning_(std::move(options.on_warning)),
      remote_(std::move(options.remote)) {}

fs::path CompileCache::default_directory() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return fs::path(xdg) / "aotpipe" / "compile";
  if (const char* home = std::getenv("HOME"); home && *home) return fs::path(home) / ".cache" / "aotpipe" / "compile";
  return fs::temp_directory_path() / "aotpipe-compile-cache";
}

fs::path CompileCache::entry_path(std::string_view digest) const { return entry_file(digest); }

std::string CompileCache::entry_file(std::string_view digest) const { return cache_file(digest, kEntrySuffix); }

std::string CompileCache::cache_file(std::string_view digest, std::string_view suffix) const {
  // Built as a string: std::filesystem's operator/ splits and copies the path at every step.
  const std::string_view shard = digest.substr(0, std::min<std::size_t>(2, digest.size()));
  std::string path = directory_.native();
  if (!path.empty() && path.back() != '/') path += '/';
  fmt::format_to(std::back_inserter(path), "v{}/{}/{}{}", kEntryVersion, shard, digest, suffix);
  return path;
}

void CompileCache::warn(std::string_view message) const {
  if (on_warning_)
    on_warning_(message);
  else
    fmt::print(stderr, "aotpipe: warning: {}\n", message);
}

void CompileCache::count(CacheOutcome outcome) {
  switch (outcome) {
    case CacheOutcome::Hit: hits_.fetch_add(1); break;
    case CacheOutcome::Miss: misses_.fetch_add(1); break;
    case CacheOutcome::Bypassed: bypassed_.fetch_add(1); break;
    case CacheOutcome::Off: break;
  }
}

namespace {

// The artifact of a whole entry stored under `key`, or why it is unusable.
struct Opened {
  std::shared_ptr<CompiledArtifact> artifact;
  std::string why;
};

// The payload of a whole framed file (an entry or a record) stored under `digest`, or why it is
// unusable.
struct Unframed {
  std::string_view payload;
  std::string why;  // empty: usable
};

Unframed unframe(std::string_view in, std::string_view digest) {
  if (in.size() < sizeof kMagic || std::memcmp(in.data(), kMagic, sizeof kMagic) != 0)
    return {{}, "not an aotpipe cache entry"};
  in.remove_prefix(sizeof kMagic);
  const auto version = take<std::uint32_t>(in);
  if (!version) return {{}, "truncated header"};
  if (*version != CompileCache::kEntryVersion)
    return {{}, fmt::format("entry format {}, this build reads {}", *version, CompileCache::kEntryVersion)};
  const auto key_length = take<std::uint32_t>(in);
  if (!key_length || in.size() < *key_length) return {{}, "truncated header"};
  if (in.substr(0, *key_length) != digest) return {{}, "stored under another key"};
  in.remove_prefix(*key_length);
  const auto payload_length = take<std::uint64_t>(in);
  if (!payload_length || in.size() < kChecksumDigits) return {{}, "truncated header"};
  const std::string_view checksum = in.substr(0, kChecksumDigits);
  in.remove_prefix(kChecksumDigits);
  if (in.size() != *payload_length)
    return {{}, fmt::format("truncated: {} payload bytes of {}", in.size(), *payload_length)};
  if (content_hash_hex(in) != checksum) return {{}, "checksum mismatch"};
  return {in, ""};
}

std::string frame(std::string_view digest, std::string_view payload) {
  std::string framed;
  framed.reserve(payload.size() + 128);
  framed.append(kMagic, sizeof kMagic);
  put<std::uint32_t>(framed, CompileCache::kEntryVersion);
  put<std::uint32_t>(framed, static_cast<std::uint32_t>(digest.size()));
  framed += digest;
  put<std::uint64_t>(framed, payload.size());
  framed += content_hash_hex(payload);
  framed += payload;
  return framed;
}

Opened open_entry(std::shared_ptr<const void> owner, std::string_view entry, const CacheKey& key,
                  const std::string& origin, std::function<void()> on_malformed_graph = nullptr) {
  const Unframed unframed = unframe(entry, key.digest);
  if (!unframed.why.empty()) return {nullptr, unframed.why};
  try {
    return {std::make_shared<CompiledArtifact>(
                deserialize_artifact(std::move(owner), unframed.payload, origin, std::move(on_malformed_graph))),
            ""};
  } catch (const std::exception& e) { return {nullptr, e.what()}; }
}

std::string make_entry(const CacheKey& key, const CompiledArtifact& artifact) {
  return frame(key.digest, serialize_artifact(artifact));
}

}  // namespace

std::shared_ptr<CompiledArtifact> CompileCache::load(const CacheKey& key, std::string* warning) {
  const std::string path = entry_file(key.digest);
  if (std::optional<FileContents> file = read_file(path)) {
    // A graph found malformed when first decoded (only a forged entry can hold one: the checksum
    // covers them) removes the entry, so that the next compile of the key recompiles it.
    Opened opened = open_entry(file->owner, file->bytes, key, fmt::format("compile cache entry {}", path),
                               [path] { ::unlink(path.c_str()); });
    if (opened.artifact) {
      if (file->mapped) mapped_.fetch_add(1);
      if (needs_refresh(file->mtime)) ::utimensat(AT_FDCWD, path.c_str(), nullptr, 0);  // used: evicted last
      return opened.artifact;
    }
    rejected_.fetch_add(1);
    const std::string message =
        fmt::format("compile cache entry {} is unusable ({}); compiling again and replacing it", path, opened.why);
    warn(message);
    if (warning) *warning = message;
    ::unlink(path.c_str());
  }
  return remote_on() ? load_remote(key, warning) : nullptr;
}

std::shared_ptr<CompiledArtifact> CompileCache::load_remote(const CacheKey& key, std::string* warning) {
  std::optional<std::string> fetched;
  try {
    fetched = remote_->get(key.digest);
  } catch (const RemoteCacheError& e) {
    remote_failed(e);
    return nullptr;
  }
  if (!fetched) return nullptr;
  const auto bytes = std::make_shared<const std::string>(std::move(*fetched));
  Opened opened = open_entry(bytes, *bytes, key,
                             fmt::format("remote compile cache entry {} on {}", key.digest, remote_->describe()));
  if (opened.artifact) {
    // A remote entry is decoded whole before it is kept: a forged one must not reach the local
    // folder of every machine that fetches it.
    try {
      (void)opened.artifact->traced();
      (void)opened.artifact->partition();
    } catch (const ArtifactFormatError& e) { opened = {nullptr, e.what()}; }
  }
  if (!opened.artifact) {
    rejected_.fetch_add(1);
    const std::string message =
        fmt::format("remote compile cache entry {} on {} is unusable ({}); compiling again and replacing it",
                    key.digest, remote_->describe(), opened.why);
    warn(message);
    if (warning) *warning = message;
    return nullptr;
  }
  remote_hits_.fetch_add(1);
  try {
    publish(entry_path(key.digest), *bytes);  // the next lookup is local
    evict_if_needed(bytes->size());
  } catch (const std::exception& e) {
    warn(fmt::format("compile cache: could not keep the remote entry {} locally ({})", key.digest, e.what()));
  }
  return opened.artifact;
}

void CompileCache::remote_failed(const RemoteCacheError& error) {
  if (remote_off_.exchange(true)) return;  // one warning
  warn(fmt::format("{}; the remote cache is off for the rest of this run (compiles are not affected)", error.what()));
}

void CompileCache::publish(const fs::path& path, std::string_view entry) {
  fs::create_directories(path.parent_path());
  // Unique per process (pid) and within it (a process-wide serial: caches on one folder may
  // be several objects).
  static std::atomic<std::uint64_t> serial{0};
  const std::string temp = (path.parent_path() / fmt::format("{}{}-{}-{}", kTempPrefix, ::getpid(), serial.fetch_add(1),
                                                             path.stem().string()))
                               .string();
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "cannot create " + temp);
  const bool written = write_all(fd, entry);
  const int errno_after_write = errno;
  ::close(fd);
  if (!written) {
    ::unlink(temp.c_str());
    throw std::system_error(errno_after_write, std::generic_category(), "cannot write " + temp);
  }
  // Atomic publish: readers see the old entry or the whole new one, never a part.
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    const int error = errno;
    ::unlink(temp.c_str());
    throw std::system_error(error, std::generic_category(), "cannot publish " + path.string());
  }
}

void CompileCache::store(const CacheKey& key, const CompiledArtifact& artifact) {
  std::string entry;
  try {
    entry = make_entry(key, artifact);
    publish(entry_path(key.digest), entry);
    stores_.fetch_add(1);
    evict_if_needed(entry.size());
  } catch (const std::exception& e) {
    warn(fmt::format("compile cache: could not store {} ({}); the compile itself is not affected", artifact.name,
                     e.what()));
  }
  if (entry.empty() || !remote_on()) return;
  try {
    remote_->put(key.digest, entry);
  } catch (const RemoteCacheError& e) { remote_failed(e); }
}

std::optional<std::string> CompileCache::load_record(std::string_view digest, std::string* warning) {
  const std::string path = cache_file(digest, kRecordSuffix);
  std::optional<FileContents> file = read_file(path);
  if (!file) return std::nullopt;
  const Unframed unframed = unframe(file->bytes, digest);
  if (unframed.why.empty()) {
    if (needs_refresh(file->mtime)) ::utimensat(AT_FDCWD, path.c_str(), nullptr, 0);
    return std::string(unframed.payload);
  }
  reject_record_file(path, unframed.why, warning);
  return std::nullopt;
}

void CompileCache::reject_record_file(const std::string& path, std::string_view why, std::string* warning) {
  rejected_.fetch_add(1);
  const std::string message = fmt::format("compile cache record {} is unusable ({}); removing it", path, why);
  warn(message);
  if (warning) *warning = message;
  ::unlink(path.c_str());
}

void CompileCache::reject_record(std::string_view digest, std::string_view why, std::string* warning) {
  reject_record_file(cache_file(digest, kRecordSuffix), why, warning);
}

void CompileCache::store_record(std::string_view digest, std::string_view payload) {
  try {
    const std::string framed = frame(digest, payload);
    publish(cache_file(digest, kRecordSuffix), framed);
    evict_if_needed(framed.size());
  } catch (const std::exception& e) {
    warn(fmt::format("compile cache: could not store the record {} ({}); nothing else is affected", digest, e.what()));
  }
}

std::uint64_t CompileCache::scan_bytes() const {
  std::uint64_t bytes = 0;
  for (const FileInfo& f : list_files(directory_)) bytes += f.bytes;
  return bytes;
}

void CompileCache::evict_if_needed(std::uint64_t added) {
  std::lock_guard lock(size_mutex_);
  if (!scanned_) {
    known_bytes_ = scan_bytes();  // includes what was just added
    scanned_ = true;
  } else {
    known_bytes_ += added;
  }
  if (known_bytes_ <= max_bytes_) return;
  // Over the bound: rescan (other processes write too), then drop the least recently used
  // entries down to 90% of the bound, and temporary files of killed writers older than an hour.
  std::vector<FileInfo> files = list_files(directory_);
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  const auto hour_ago = std::chrono::duration_cast<std::chrono::seconds>(now).count() - 3600;
  std::uint64_t total = 0;
  std::vector<FileInfo> entries;
  for (FileInfo& f : files) {
    if (is_temporary(f.path) && f.mtime.tv_sec < hour_ago) {
      ::unlink(f.path.c_str());
      continue;
    }
    total += f.bytes;
    if (is_entry(f.path) || is_record(f.path)) entries.push_back(std::move(f));
  }
  std::sort(entries.begin(), entries.end(),
            [](const FileInfo& a, const FileInfo& b) { return older(a.mtime, b.mtime); });
  const std::uint64_t target = max_bytes_ / 10 * 9;
  for (const FileInfo& f : entries) {
    if (total <= target) break;
    if (::unlink(f.path.c_str()) == 0) evictions_.fetch_add(1);
    total -= f.bytes;
  }
  known_bytes_ = total;
}

CompileCacheStats CompileCache::stats() const {
  CompileCacheStats stats;
  stats.directory = directory_;
  stats.max_bytes = max_bytes_;
  for (const FileInfo& f : list_files(directory_)) {
    if (is_entry(f.path)) {
      ++stats.entries;
      stats.bytes += f.bytes;
    } else if (is_record(f.path)) {
      ++stats.records;
      stats.bytes += f.bytes;
    } else if (is_temporary(f.path)) {
      ++stats.temporary_files;
    }
  }
  return stats;
}

void CompileCache::clear() {
  // Files only, then the emptied folders, deepest first (no remove_all: see docs/cache.md).
  std::vector<fs::path> folders;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(directory_, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_directory(ec))
      folders.push_back(it->path());
    else if (is_entry(it->path()) || is_record(it->path()) || is_temporary(it->path()))
      ::unlink(it->path().c_str());
  }
  for (auto it = folders.rbegin(); it != folders.rend(); ++it) ::rmdir(it->c_str());
  std::lock_guard lock(size_mutex_);
  scanned_ = false;
}

CompileCacheCounters CompileCache::counters() const {
  return {hits_.load(),     misses_.load(),      bypassed_.load(),   stores_.load(), evictions_.load(),
          rejected_.load(), remote_hits_.load(), remote_off_.load(), mapped_.load()};
}

bool CompileCache::maps_large_entries() const {
  std::error_code ec;
  fs::create_directories(directory_, ec);
  const int fd = ::open(directory_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool local = is_local_filesystem(fd);
  ::close(fd);
  return local;
}

// --- Single flight ------------------------------------------------------------------------------

CompileCache::FlightTicket CompileCache::join_flight(const std::string& digest) {
  std::lock_guard lock(flights_mutex_);
  auto [it, fresh] = flights_.try_emplace(digest);
  if (fresh) it->second = std::make_shared<Flight>();
  return {it->second, fresh};
}

void CompileCache::finish_flight(const std::string& digest, const std::shared_ptr<Flight>& flight,
                                 std::shared_ptr<const CompiledArtifact> artifact) {
  {
    std::lock_guard lock(flights_mutex_);
    if (auto it = flights_.find(digest); it != flights_.end() && it->second == flight) flights_.erase(it);
  }
  std::vector<std::pair<std::coroutine_handle<>, Scheduler*>> waiters;
  {
    std::lock_guard lock(flight->mutex_);
    flight->done_ = true;
    flight->artifact_ = std::move(artifact);
    waiters.swap(flight->waiters_);
  }
  for (auto& [handle, scheduler] : waiters) scheduler->enqueue(handle);
}

bool CompileCache::Flight::Awaiter::await_ready() const {
  std::lock_guard lock(flight.mutex_);
  return flight.done_;
}

bool CompileCache::Flight::Awaiter::await_suspend(std::coroutine_handle<> handle) const {
  std::lock_guard lock(flight.mutex_);
  if (flight.done_) return false;  // finished in between: resume at once
  flight.waiters_.emplace_back(handle, &scheduler);
  return true;
}

std::shared_ptr<const CompiledArtifact> CompileCache::Flight::Awaiter::await_resume() const {
  std::lock_guard lock(flight.mutex_);
  return flight.artifact_;
}

}  // namespace aotpipe

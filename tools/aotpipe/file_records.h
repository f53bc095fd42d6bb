#pragma once
// Warm `aotpipe compile` runs that neither parse a graph file nor key its program: the compile
// cache's records (CompileCache::store_record) of "this file's bytes, compiled with these
// options, are entry K; the report's row was R" (ccache's direct mode). A record's digest covers
// the file's bytes and everything else the compile depends on (the cache key's configuration
// ingredients, the seed of the random constants, --device, grad mode, the accelerators this
// process has), so a warm run reads
// and hashes the file, loads entry K and takes the report's numbers from the record, instead of
// loading the file, making its example inputs, hashing its canonical program and decoding the
// artifact's graphs to count their ops and run the other partitioner.
// A record whose entry is gone, or that does not parse, is a miss: the file is compiled (or
// found by its key) as without records, and the record written again.
#include "aotpipe/batch_report.h"
#include "aotpipe/compile_jobs.h"

#include <aotpipe/cache/compile_cache.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace aotpipe::cli {

// A record's contents: the key of the entry it points at and the report row of that compile.
struct FileRecord {
  std::string entry;  // a cache key's digest
  GraphRow row;       // a compiled graph's row (ok, with a summary)
};
// Reads a record's payload (JSON, untrusted: from the cache folder or Redis). Throws an
// exception saying what is wrong (nlohmann::json's, or std::invalid_argument) for anything else.
FileRecord parse_file_record(std::string_view payload);

class FileRecords {
 public:
  // Null when the batch's compiles are not cached (no cache, or a configuration the cache
  // bypasses: then there is nothing for a record to point at).
  static std::unique_ptr<FileRecords> open(const JobSettings& settings, std::string_view pipeline_text);

  // The digest of `file`'s record: its bytes and the batch's options. Nullopt when the file
  // cannot be read (its compile reports that).
  std::optional<std::string> digest_of(const std::filesystem::path& file) const;

  struct Hit {
    std::shared_ptr<const CompiledArtifact> artifact;  // entry K, loaded and checked
    GraphRow row;  // the record's report numbers (summary, CPU fallbacks, backend notes)
  };
  // The record's entry and row; nullopt on a miss (no record, its entry gone or unusable, a
  // record that does not parse: removed with a warning).
  std::optional<Hit> load(const std::string& digest) const;
  // After a compile (or a hit found by key) of `file`, whose digest was `digest` before it was
  // loaded: its entry's key and its report row. Nothing is stored when the file changed since
  // (its bytes no longer have that digest), and a failure only warns.
  void store(const std::filesystem::path& file, const std::string& digest, std::string_view entry_key,
             const GraphRow& row) const;

  const AotConfig& config() const { return config_; }  // the batch's compile configuration

 private:
  FileRecords(std::shared_ptr<CompileCache> cache, AotConfig config, std::string options_digest);
  std::shared_ptr<CompileCache> cache_;
  AotConfig config_;
  std::string options_digest_;  // of every ingredient but the file's bytes
};

}  // namespace aotpipe::cli

#pragma once
// A batch compiled in shards without MPI: `aotpipe compile --shard K/N` compiles the K-th of N
// deterministic shards (Slurm job arrays, Kubernetes Indexed Jobs: one task per K) and writes a
// manifest; `aotpipe gather` merges the manifests into the one report and names missing shards.
#include "aotpipe/batch_report.h"
#include "aotpipe/graph_files.h"

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace aotpipe::cli {

struct ShardSpec {
  std::size_t index = 0;  // K, from 0 (as $SLURM_ARRAY_TASK_ID with --array=0-(N-1), or $JOB_COMPLETION_INDEX)
  std::size_t count = 1;  // N
};

// "K/N" with 0 <= K < N; throws std::invalid_argument naming what is wrong.
ShardSpec parse_shard(std::string_view text);

// The shard of each file of the batch, balanced by estimated cost (the file's size): largest
// first, each to the shard with the least cost so far (the lower index on a tie); ties between
// files broken by path. Depends only on the paths and sizes, so every task computes the same
// assignment. A file that cannot be read costs 0.
std::vector<std::size_t> assign_shards(const std::vector<GraphFile>& files, std::size_t count);

// What one shard did, for `aotpipe gather`.
struct ShardManifest {
  ShardSpec shard;
  std::string batch_id;                    // the same for every shard of one batch (files and N)
  std::size_t batch_files = 0;             // graph files in the whole batch
  std::vector<std::string> stages;         // the top-level stages (the table's columns)
  std::vector<std::size_t> batch_indices;  // of each row, in the whole batch
  std::vector<GraphRow> rows;
  double wall_seconds = 0;
  std::size_t threads = 0;
  std::string host;
};

// A name for the batch: a hash of its files' paths, in order, and of N.
std::string batch_id(const std::vector<GraphFile>& files, std::size_t count);

// <out>/shards/shard-K-of-N.json
std::filesystem::path default_manifest_path(const std::filesystem::path& out_dir, const ShardSpec& shard);

// The manifests of one batch merged: the rows in batch order (each with its origin, "shard K on
// HOST"), the slowest shard's wall time, the workers, and the shards without a manifest. Throws
// std::runtime_error naming two manifests of different batches. A shard given twice: the later.
struct MergedBatch {
  std::vector<GraphRow> rows;
  std::vector<std::string> stages;
  std::size_t batch_files = 0;
  std::size_t num_shards = 0;
  std::size_t shards_present = 0;
  double wall_seconds = 0;
  std::size_t threads = 0;
  std::size_t hosts = 0;
  std::vector<std::size_t> missing;
};
MergedBatch merge_manifests(const std::vector<std::pair<std::string, ShardManifest>>& manifests,
                            std::string_view unit = "shard");

// The manifest as JSON text, and back (throws std::runtime_error naming `where`).
std::string manifest_json(const ShardManifest& manifest);
ShardManifest parse_manifest(const std::string& text, const std::string& where);

// Written atomically (a temporary file in the same folder, then renamed): a killed task leaves
// no half manifest. Throws std::runtime_error naming the file.
void write_manifest(const std::filesystem::path& path, const ShardManifest& manifest);
// Throws std::runtime_error naming the file and what is wrong.
ShardManifest read_manifest(const std::filesystem::path& path);

}  // namespace aotpipe::cli

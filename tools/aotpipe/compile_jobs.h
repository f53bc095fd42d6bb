#pragma once
// Graph files and torch.export archives turned into compile jobs: what `aotpipe compile`
// compiles and what `aotpipe cache explain` computes keys for, made the same way.
#include "aotpipe/batch_report.h"
#include "aotpipe/graph_files.h"

#include <aotpipe/export/exported_program.h>
#include <aotpipe/driver/compile_batch.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace aotpipe::cli {

// What every job of a batch shares.
struct JobSettings {
  std::string device;  // empty: as the graph files say
  uint64_t seed = 0;   // of the graph files' random constants
  bool no_cpu_fallback = false;
  Partitioner partitioner;
  std::shared_ptr<CompileCache> cache;  // null: no cache
  Compiler backend;                     // empty: the interpreter
};

// The configuration of every job of a batch (a .pt2 job adds its num_params_buffers).
AotConfig job_config(const JobSettings& settings);

// The backends `--backend` names: those registered (backend/backend_registry.h), and
// "cuda_graphs" where the build has the CUDA plugin, which naming it loads (cuda_plugin.h).
// backend_named throws CLI::ValidationError naming --backend for a backend not registered.
std::vector<std::string> backend_names();
Compiler backend_named(const std::string& name);

// The partitioners `--partitioner` names: "auto", the backend's choice (backend/backend_traits.h:
// min-cut fitted to the interpreter, default for cuda_graphs), which is the empty Partitioner,
// and "min_cut" (PyTorch's settings) and "default".
std::vector<std::string> partitioner_names();
Partitioner partitioner_option(const std::string& name);

// The CLI's compile cache in `directory` (empty: CompileCache::default_directory()), its warnings
// logged; `remote_url` (redis://HOST:PORT), when given, adds the Redis level. Throws
// CLI::ValidationError naming --remote-cache for a URL the build cannot use.
std::shared_ptr<CompileCache> open_compile_cache(const std::string& directory, const std::string& remote_url = {});

// A graph file (or torch.export archive) loaded and turned into a compile job, or the reason it
// could not be (then `row` names the stage and says why).
struct PreparedGraph {
  std::shared_ptr<Graph> graph;            // an .aotg file
  std::optional<ExportedProgram> program;  // a .pt2 archive
  std::optional<CompileJob> job;
};

// The job of `file`, compiled on metadata examples of its inputs (no data, no device needed);
// job.program is the graph it runs, for the cache key. Fills row.name (the graph's).
PreparedGraph prepare(const GraphFile& file, const JobSettings& settings, GraphRow& row);

}  // namespace aotpipe::cli

#include "aotpipe/compile_jobs.h"
#include "aotpipe/cuda_plugin.h"
#include "aotpipe/exported_programs.h"
#include "aotpipe/load_graph.h"
#include "aotpipe/random_inputs.h"

#include <aotpipe/backend/backend_registry.h>
#include <aotpipe/graph/device_retarget.h>
#include <aotpipe/runtime/graph_function.h>

#include <ATen/CPUGeneratorImpl.h>
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>

namespace aotpipe::cli {

std::vector<std::string> backend_names() {
  std::vector<std::string> names = registered_backends();
#ifdef AOTPIPE_HAVE_CUDA_PLUGIN
  // Registered once the plugin is loaded, which naming it does (cuda_plugin.h).
  if (std::find(names.begin(), names.end(), "cuda_graphs") == names.end()) names.emplace_back("cuda_graphs");
#endif
  return names;
}

Compiler backend_named(const std::string& name) {
  if (name == "interpreter") return {};
  if (std::optional<Compiler> backend = find_backend(name)) return *std::move(backend);
  const std::vector<std::string> names = backend_names();
  if (std::find(names.begin(), names.end(), name) != names.end())
    throw CLI::ValidationError(
        "--backend", "'" + name + "' comes with CUDA, which this process did not load (AOTPIPE_LOAD_CUDA=0?)");
  throw CLI::ValidationError("--backend", "'" + name + "' is not a backend of this build (it has: " +
                                              fmt::format("{}", fmt::join(names, ", ")) + ")");
}

std::vector<std::string> partitioner_names() { return {"auto", "min_cut", "default"}; }

Partitioner partitioner_option(const std::string& name) {
  return name == "auto" ? Partitioner{} : partitioner_named(name);
}

AotConfig job_config(const JobSettings& settings) {
  AotConfig config;
  config.partition_fn = settings.partitioner;
  config.allow_cpu_fallback = !settings.no_cpu_fallback;
  config.fw_compiler = settings.backend;
  return config;
}

namespace {

CompileJob make_job(std::string name, Function fn, TensorList example_args, const JobSettings& settings,
                    std::shared_ptr<const Graph> program) {
  for (const at::Tensor& arg : example_args)
    if (arg.defined()) require_cuda_for(arg.device(), fmt::format("graph '{}'", name));
  return CompileJob{std::move(name),      std::move(fn),      std::move(example_args),
                    job_config(settings), std::move(program), settings.cache};
}

// A .pt2 archive: its flat function (lifted state, then user inputs) compiled on metadata examples
// of its graph's inputs, as an .aotg graph is.
void prepare_exported(const GraphFile& file, const JobSettings& settings, GraphRow& row, PreparedGraph& prepared) {
  try {
    LoadExportedProgramOptions load;
    if (!settings.device.empty()) load.device = c10::Device(settings.device);
    prepared.program = load_exported_program(file.path, load);
  } catch (const std::exception& e) {
    row.failed_stage = "import error";
    row.message = strip_backtrace(e.what());
    return;
  }
  const ExportedProgram& program = *prepared.program;
  row.name = program.name();
  try {
    // The archive outlives the batch (PreparedGraph owns it): the key's graph need not own it.
    std::shared_ptr<const Graph> graph(std::shared_ptr<const Graph>(), &program.graph());
    CompileJob job =
        make_job(row.name, program.flat_function(), compile_example_args(program), settings, std::move(graph));
    job.config.num_params_buffers = program.lifted_tensors().size();
    prepared.job = std::move(job);
  } catch (const std::exception& e) {
    row.failed_stage = "unsupported";
    row.message = strip_backtrace(e.what());
  }
}

}  // namespace

std::shared_ptr<CompileCache> open_compile_cache(const std::string& directory, const std::string& remote_url) {
  CompileCacheOptions cache;
  cache.directory = directory;
  cache.on_warning = [](std::string_view message) { spdlog::warn("{}", message); };
  if (!remote_url.empty()) {
    try {
      cache.remote = redis_remote_cache(remote_url);
    } catch (const std::invalid_argument& e) { throw CLI::ValidationError("--remote-cache", e.what()); }
  }
  return std::make_shared<CompileCache>(std::move(cache));
}

PreparedGraph prepare(const GraphFile& file, const JobSettings& settings, GraphRow& row) {
  PreparedGraph prepared;
  row.name = file.path.stem().string();  // until the graph's own name is known
  if (!file.error.empty()) {
    row.failed_stage = to_string(FailureStage::Read);
    row.message = file.error;
    return prepared;
  }
  if (is_exported_program_file(file.path)) {
    prepare_exported(file, settings, row, prepared);
    return prepared;
  }
  LoadedGraph loaded = load_graph(file.path);
  if (loaded.failure) {
    row.failed_stage = to_string(loaded.failure->stage);
    row.message = loaded.failure->message;
    return prepared;
  }
  prepared.graph = std::make_shared<Graph>(std::move(*loaded.graph));
  row.name = prepared.graph->name();
  try {
    if (!settings.device.empty()) retarget_device(*prepared.graph, c10::Device(settings.device));
    auto gen = at::make_generator<at::CPUGeneratorImpl>(settings.seed);
    bind_random_constants(*prepared.graph, gen);
    // Compiles are fake: metadata examples, so no data is made and no device is needed.
    prepared.job = make_job(row.name, graph_function(prepared.graph), metadata_example_args(*prepared.graph), settings,
                            prepared.graph);
  } catch (const std::exception& e) {
    row.failed_stage = "unsupported";
    row.message = strip_backtrace(e.what());
  }
  return prepared;
}

}  // namespace aotpipe::cli

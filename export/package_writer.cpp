#include <aotpipe/export/package_writer.h>
#include <aotpipe/package/package_format.h>
#include <aotpipe/package/package_versions.h>
#include <aotpipe/runtime/artifact_serialization.h>
#include <aotpipe/driver/aot_function.h>
#include <aotpipe/graph/example_tensor.h>

#include <ATen/core/grad_mode.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <unordered_map>

namespace aotpipe {

namespace {

// The program's lifted state, in graph input order, each with its kind and name.
struct LiftedState {
  std::vector<PackageStateEntry> entries;
  TensorList tensors;  // one per entry; tied names hold the same tensor
};

LiftedState lifted_state(const ExportedProgram& program) {
  LiftedState state;
  state.tensors = program.lifted_tensors();
  for (const signature::InputSpec& spec : program.signature().input_specs) {
    PackageStateEntry entry;
    switch (spec.kind) {
      case signature::InputKind::Parameter: entry.kind = PackageStateEntry::Kind::Parameter; break;
      case signature::InputKind::Buffer: entry.kind = PackageStateEntry::Kind::Buffer; break;
      case signature::InputKind::ConstantTensor: entry.kind = PackageStateEntry::Kind::Constant; break;
      default: continue;
    }
    entry.name = spec.target.value_or(spec.arg.name);
    entry.persistent = spec.persistent.value_or(true);
    state.entries.push_back(std::move(entry));
  }
  if (state.entries.size() != state.tensors.size())
    throw PackageError(fmt::format("program '{}': {} lifted inputs in the signature, {} state tensors", program.name(),
                                   state.entries.size(), state.tensors.size()));
  return state;
}

// The user inputs' metadata for one set of sizes (null: the export's); dtypes are the export's.
std::vector<TensorMeta> user_input_metas(const ExportedProgram& program, const std::vector<std::vector<int64_t>>* sizes,
                                         c10::Device device) {
  const Graph& graph = program.graph();
  const std::size_t first = graph.num_inputs() - program.num_user_inputs();
  std::vector<TensorMeta> metas;
  for (std::size_t i = 0; i < program.num_user_inputs(); ++i) {
    const TensorMeta& exported = *graph.input(first + i)->meta();
    metas.push_back(TensorMeta::contiguous(sizes ? Dims((*sizes)[i]) : exported.sizes, exported.dtype, device));
  }
  return metas;
}

std::vector<std::vector<TensorMeta>> size_sets(const ExportedProgram& program, const PackageOptions& options) {
  if (options.sizes.empty()) {
    const auto& sample = program.sample_inputs();
    if (!sample || sample->size() != program.num_user_inputs())
      return {user_input_metas(program, nullptr, options.device)};
    std::vector<std::vector<int64_t>> sizes;
    for (const at::Tensor& t : *sample) sizes.push_back(t.sizes().vec());
    return {user_input_metas(program, &sizes, options.device)};
  }
  std::vector<std::vector<TensorMeta>> sets;
  for (std::size_t k = 0; k < options.sizes.size(); ++k) {
    const auto& set = options.sizes[k];
    if (set.size() != program.num_user_inputs())
      throw Pt2Error(fmt::format("program '{}': sizes set {} has {} inputs, the program takes {}", program.name(), k,
                                 set.size(), program.num_user_inputs()));
    sets.push_back(user_input_metas(program, &set, options.device));
  }
  return sets;
}

}  // namespace

PackageSummary write_package(const ExportedProgram& program, const std::filesystem::path& path,
                             const PackageOptions& options) {
  LiftedState state = lifted_state(program);
  PackageManifest manifest;
  manifest.aotpipe_version = package_versions::aotpipe();
  manifest.aotpipe_build = package_versions::aotpipe_build();
  manifest.torch_version = package_versions::torch();
  manifest.artifact_schema = package_versions::artifact_schema();
  if (options.device.is_cuda()) manifest.cuda_arch = package_versions::cuda_arch(options.device);
  manifest.name = program.name();
  manifest.device = options.device;
  manifest.backend = options.backend;
  manifest.num_user_inputs = program.num_user_inputs();

  // The state, each tensor once: its bytes (on the CPU, contiguous) and its entries.
  TensorList stored;  // keeps the bytes alive until the file is written
  std::vector<std::string_view> blobs;
  std::unordered_map<const c10::TensorImpl*, std::size_t> index_of;
  PackageSummary summary;
  for (std::size_t i = 0; i < state.entries.size(); ++i) {
    const at::Tensor& t = state.tensors[i];
    PackageStateEntry& entry = state.entries[i];
    if (!t.defined() || t.is_meta() || !t.has_storage() || is_metadata_example(t))
      throw PackageError(fmt::format("program '{}': the weights of {} '{}' are missing (no data to store)",
                                     program.name(), to_string(entry.kind), entry.name));
    auto [it, fresh] = index_of.try_emplace(t.unsafeGetTensorImpl(), stored.size());
    entry.tensor = it->second;
    entry.requires_grad = t.requires_grad();
    if (!fresh) continue;
    at::Tensor bytes = t.detach().to(c10::kCPU).contiguous();
    manifest.tensors.push_back({TensorMeta::contiguous(bytes.sizes(), bytes.scalar_type()), {}});
    blobs.emplace_back(static_cast<const char*>(bytes.data_ptr()), bytes.nbytes());
    summary.state_bytes += bytes.nbytes();
    stored.push_back(std::move(bytes));
  }
  manifest.state = state.entries;

  // The compiles, on metadata examples of the state (tied names one example) and the inputs.
  AotConfig config = options.config;
  config.num_params_buffers = state.tensors.size();
  std::vector<std::string> artifacts;
  for (const std::vector<TensorMeta>& inputs : size_sets(program, options)) {
    TensorList user_examples;
    for (const TensorMeta& meta : inputs) user_examples.push_back(metadata_example(meta));
    const std::shared_ptr<const Graph> graph = program.graph_for(user_examples);
    TensorList args;
    TensorList example_of(stored.size());  // per stored tensor: tied names get one example
    for (std::size_t i = 0; i < state.tensors.size(); ++i) {
      at::Tensor& example = example_of[state.entries[i].tensor];
      if (!example.defined()) {
        TensorMeta meta = *graph->input(i)->meta();
        meta.requires_grad = false;
        example = metadata_example(meta);
        if (state.tensors[i].requires_grad()) example.requires_grad_(true);
      }
      args.push_back(example);
    }
    args.insert(args.end(), user_examples.begin(), user_examples.end());
    for (const bool grad_mode : {true, false}) {
      if ((grad_mode && !options.training) || (!grad_mode && !options.inference)) continue;
      at::AutoGradMode mode(grad_mode);
      const std::string name = fmt::format("{}[{}]{}", program.name(), artifacts.size(), grad_mode ? "" : ".inference");
      CompileOutput out = compile(name, program.flat_function(), args, config, graph);
      if (!out.artifact || why_not_artifact(*out.state()))
        throw PackageError(fmt::format("program '{}': its compile cannot be stored: {}", program.name(),
                                       why_not_artifact(*out.state()).value_or("no artifact")));
      PackageCompile compile_record;
      compile_record.grad_mode = grad_mode;
      for (const at::Tensor& a : args) compile_record.requires_grad.push_back(a.requires_grad());
      compile_record.user_inputs = inputs;
      compile_record.training = out.artifact->training;
      manifest.compiles.push_back(std::move(compile_record));
      artifacts.push_back(serialize_artifact(*out.artifact));
    }
  }
  for (const std::string& bytes : artifacts) blobs.emplace_back(bytes);
  summary.compiles = manifest.compiles.size();
  summary.tensors = manifest.tensors.size();
  write_package_file(path, std::move(manifest), blobs);
  summary.file_bytes = std::filesystem::file_size(path);
  return summary;
}

CompileOnDemand compile_missing_from(ExportedProgram program, AotConfig config) {
  config.num_params_buffers = program.lifted_tensors().size();
  return [program = std::move(program), config = std::move(config)](const TensorList& flat) {
    const std::size_t lifted = config.num_params_buffers;
    if (flat.size() != lifted + program.num_user_inputs())
      throw PackageError(fmt::format("program '{}' takes {} state tensors and {} inputs; the call has {} arguments",
                                     program.name(), lifted, program.num_user_inputs(), flat.size()));
    const TensorList user(flat.begin() + static_cast<std::ptrdiff_t>(lifted), flat.end());
    std::shared_ptr<const Graph> graph = program.graph_for(user);
    return compile(program.name() + ".on_demand", program.flat_function(), flat, config, std::move(graph)).runtime;
  };
}

}  // namespace aotpipe

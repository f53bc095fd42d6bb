#include <aotpipe/export/compiled_exported_program.h>
#include <aotpipe/export/internal/region_program.h>

#include <fmt/format.h>

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

namespace aotpipe {

namespace {

// A program with data-dependent sizes, compiled in regions: one RegionProgram per specialization
// (graph_for's graphs are kept by the program, so their addresses key them).
class RegionCompiles {
 public:
  RegionCompiles(AotConfig config, std::string name, std::shared_ptr<CompileCache> cache)
      : config_(std::move(config)), name_(std::move(name)), cache_(std::move(cache)) {}

  const pt2::RegionProgram& of(const Graph& graph) const {
    std::lock_guard lock(mutex_);
    auto& slot = programs_[&graph];
    if (!slot) slot = std::make_unique<pt2::RegionProgram>(graph, config_, name_, cache_);
    return *slot;
  }
  std::size_t num_compiled() const {
    std::lock_guard lock(mutex_);
    std::size_t n = 0;
    for (const auto& [graph, regions] : programs_) n += regions->num_compiled();
    return n;
  }

 private:
  AotConfig config_;
  std::string name_;
  std::shared_ptr<CompileCache> cache_;
  mutable std::mutex mutex_;
  mutable std::map<const Graph*, std::unique_ptr<pt2::RegionProgram>> programs_;
};

}  // namespace

struct CompiledExportedProgram::Impl {
  ExportedProgram program;
  std::optional<CompiledFunction> compiled;  // the program as one graph
  std::shared_ptr<RegionCompiles> regions;   // or, with data-dependent sizes, in regions
  LiftedNames lifted;

  void require_one_graph() const {
    if (!compiled)
      throw Pt2Error(fmt::format(
          "{}: the program has data-dependent sizes and is compiled in regions: it has no single compile state "
          "or graph signature",
          program.path().string()));
  }

  TensorList flat_args(const TensorList& user_inputs) const {
    TensorList args = program.lifted_tensors();
    args.insert(args.end(), user_inputs.begin(), user_inputs.end());
    return args;
  }
};

namespace {

LiftedNames lifted_names(const ExportedProgram& program) {
  LiftedNames names;
  for (const signature::InputSpec& spec : program.signature().input_specs) {
    switch (spec.kind) {
      case signature::InputKind::Parameter: names.parameters.push_back(*spec.target); break;
      case signature::InputKind::Buffer:
        names.buffers.push_back(*spec.target);
        if (spec.persistent == false) names.non_persistent_buffers.push_back(*spec.target);
        break;
      case signature::InputKind::ConstantTensor: names.constants.push_back(*spec.target); break;
      default: break;
    }
  }
  return names;
}

}  // namespace

CompiledExportedProgram compile_exported_program(ExportedProgram program, AotConfig config,
                                                 std::shared_ptr<CompileCache> cache) {
  auto names = lifted_names(program);
  std::optional<CompiledFunction> compiled_fn;
  std::shared_ptr<RegionCompiles> regions;
  if (program.data_dependent_dims().empty()) {
    config.num_params_buffers = program.lifted_tensors().size();
    compiled_fn.emplace(program.flat_function(), std::move(config), program.name(), std::move(cache));
  } else {
    regions = std::make_shared<RegionCompiles>(std::move(config), program.name(), std::move(cache));
  }
  auto impl = std::make_shared<CompiledExportedProgram::Impl>(
      CompiledExportedProgram::Impl{std::move(program), std::move(compiled_fn), std::move(regions), std::move(names)});
  CompiledExportedProgram compiled;
  compiled.impl_ = std::move(impl);
  return compiled;
}

TensorList CompiledExportedProgram::operator()(const TensorList& user_inputs) const {
  // Sizes are checked against the export before anything compiles (a compile would fail with
  // the same error, but inside a stage).
  if (impl_->regions) {
    return impl_->program.run_graph_with(
        user_inputs, [&](const Graph& graph, const TensorList& args) { return impl_->regions->of(graph)(args); });
  }
  impl_->program.graph_for(user_inputs);
  return (*impl_->compiled)(impl_->flat_args(user_inputs));
}

const ExportedProgram& CompiledExportedProgram::program() const { return impl_->program; }
std::size_t CompiledExportedProgram::num_compiled() const {
  return impl_->compiled ? impl_->compiled->num_compiled() : impl_->regions->num_compiled();
}

std::size_t CompiledExportedProgram::num_compiled_regions(const TensorList& user_inputs) const {
  if (!impl_->regions) return 0;
  return impl_->regions->of(*impl_->program.graph_for(user_inputs)).num_compiled_regions();
}

std::shared_ptr<const CompileState> CompiledExportedProgram::compiled_state(const TensorList& user_inputs) const {
  impl_->require_one_graph();
  impl_->program.graph_for(user_inputs);
  return impl_->compiled->compiled_state(impl_->flat_args(user_inputs));
}

ExportGraphSignature CompiledExportedProgram::graph_signature(const TensorList& user_inputs) const {
  return build_graph_signature(*compiled_state(user_inputs), impl_->lifted, user_inputs.size());
}

}  // namespace aotpipe

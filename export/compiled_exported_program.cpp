#include <aotpipe/export/compiled_exported_program.h>

#include <fmt/format.h>

namespace aotpipe {

struct CompiledExportedProgram::Impl {
  ExportedProgram program;
  CompiledFunction compiled;
  LiftedNames lifted;

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
  config.num_params_buffers = program.lifted_tensors().size();
  Function fn = program.flat_function();
  CompiledFunction compiled_fn(std::move(fn), std::move(config), program.name(), std::move(cache));
  auto names = lifted_names(program);
  auto impl = std::make_shared<CompiledExportedProgram::Impl>(
      CompiledExportedProgram::Impl{std::move(program), std::move(compiled_fn), std::move(names)});
  CompiledExportedProgram compiled;
  compiled.impl_ = std::move(impl);
  return compiled;
}

TensorList CompiledExportedProgram::operator()(const TensorList& user_inputs) const {
  // Sizes are checked against the export before anything compiles (a compile would fail with
  // the same error, but inside a stage).
  impl_->program.graph_for(user_inputs);
  return impl_->compiled(impl_->flat_args(user_inputs));
}

const ExportedProgram& CompiledExportedProgram::program() const { return impl_->program; }
std::size_t CompiledExportedProgram::num_compiled() const { return impl_->compiled.num_compiled(); }

std::shared_ptr<const CompileState> CompiledExportedProgram::compiled_state(const TensorList& user_inputs) const {
  impl_->program.graph_for(user_inputs);
  return impl_->compiled.compiled_state(impl_->flat_args(user_inputs));
}

ExportGraphSignature CompiledExportedProgram::graph_signature(const TensorList& user_inputs) const {
  return build_graph_signature(*compiled_state(user_inputs), impl_->lifted, user_inputs.size());
}

}  // namespace aotpipe

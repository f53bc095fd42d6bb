#pragma once
// compile_exported_program: a torch.export program compiled ahead of time by aotpipe's pipeline,
// as PyTorch's ep.run_decompositions() + aot_function would: functionalized, decomposed to core
// ATen, split into forward and backward when a call needs gradients; a program with
// data-dependent sizes in regions around them. See docs/export.md.
#include <aotpipe/export/exported_program.h>
#include <aotpipe/driver/aot_function.h>

#include <memory>

namespace aotpipe {

class CompiledExportedProgram {
 public:
  // Returns the user outputs. Parameters are leaves that receive .grad on backward; buffer and
  // input mutations land in the program's buffers and the inputs, as in eager. A call compiles
  // on first use of its sizes (each symbolic dimension checked against its range); a training
  // compile when grad mode is on and a parameter or input requires grad, inference otherwise.
  TensorList operator()(const TensorList& user_inputs) const;

  const ExportedProgram& program() const;
  std::size_t num_compiled() const;  // compiles made so far (over all regions, for one in regions)
  // A program with data-dependent sizes (ExportedProgram::data_dependent_dims) is compiled in
  // regions: each run of calls of known sizes is compiled as a function of its own, the calls
  // that return or read a data-dependent size run as exported between them (docs/export.md).
  // How many regions are compiled for calls with the sizes of `user_inputs`; 0 for a program
  // compiled as one graph.
  std::size_t num_compiled_regions(const TensorList& user_inputs) const;
  // The compile serving a call with `user_inputs` (compiling it if needed): its graphs take the
  // lifted tensors, then the user inputs. Throws Pt2Error for a program compiled in regions.
  std::shared_ptr<const CompileState> compiled_state(const TensorList& user_inputs) const;
  // The graph signature of that compile, in torch.export's terms (parameters, buffers with
  // their persistence, constants, user inputs; mutations, user outputs, gradients).
  ExportGraphSignature graph_signature(const TensorList& user_inputs) const;

 private:
  friend CompiledExportedProgram compile_exported_program(ExportedProgram program, AotConfig config,
                                                          std::shared_ptr<CompileCache> cache);
  struct Impl;
  std::shared_ptr<const Impl> impl_;
};

// `cache`: where each compile is looked up first and stored after (null: none).
CompiledExportedProgram compile_exported_program(ExportedProgram program, AotConfig config = {},
                                                 std::shared_ptr<CompileCache> cache = nullptr);

}  // namespace aotpipe

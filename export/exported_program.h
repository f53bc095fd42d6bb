#pragma once
// Loading torch.export programs: the `.pt2` archives `torch.export.save` writes. See
// docs/export.md and docs/pt2-format-2.11.md (the format facts this reader honours).
//
// An ExportedProgram is the archive's graph in aotpipe's IR (each node the exact ATen overload
// the export recorded), its graph signature (InputSpec/OutputSpec kinds, names, FQNs), its state
// (parameters, buffers, lifted constants) and its sample inputs. It can be run eagerly, and
// compiled with compile_exported_program (compiled_exported_program.h), with no Python anywhere.
#include <aotpipe/graph/graph.h>
#include <aotpipe/graph/named_tensor.h>
#include <aotpipe/export/graph_signature.h>
#include <aotpipe/stages/compile_state.h>

#include <c10/core/Device.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace aotpipe {

// Everything that is wrong with an archive or a call of its program: the message names the
// file, and where it applies the node, the input or the dimension.
class Pt2Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A symbolic dimension of the export (torch.export.Dim): calls may give any size in [min, max].
struct SymbolicDim {
  std::string symbol;  // "s77"
  int64_t min = 0;
  int64_t max = 0;
  bool operator==(const SymbolicDim&) const = default;
};

struct LoadExportedProgramOptions {
  // Where the program runs: its graph's values and device arguments, its state and its sample
  // inputs move there (like `aotpipe compile --device`). Where this machine lacks the device,
  // the state stays on the CPU and only compiles from metadata work (the CLI's), not calls.
  std::optional<c10::Device> device;
  // The state stays in the archive until something touches it: parameters, buffers and constants
  // stored uncompressed (as torch.export writes them) are views of the file mapped copy-on-write,
  // so loading and compiling read none of their bytes and a call reads each page once; writes
  // (an optimizer step) stay in this process. Do not rewrite the archive in place while the
  // program is loaded (write a new file and rename it). false: every tensor is read at load.
  bool map_weights = true;
  // A compile (flat_function) traces the program with the formulas of ATen's fused activations
  // replaced by those kernels (GPT-2's and BLOOM's tanh GELU, erf GELU, x*sigmoid(x):
  // graph/formula_fusion.h): one kernel each way instead of ten calls and their derivatives, and
  // only x kept for the backward. Results equal the formula's to rounding. The program's own
  // graph (graph(), operator()) stays as exported. false: compiles trace it as exported too.
  bool fuse_formulas = true;
};

class ExportedProgram {
 public:
  const std::string& name() const;  // the archive's file stem
  const std::filesystem::path& path() const;
  // "TRAINING" (torch.export.export) or "ATEN" (after ep.run_decompositions()).
  const std::string& dialect() const;
  const std::string& torch_version() const;  // of the exporting torch

  // The graph, specialized to the export's sample sizes. Inputs: the lifted parameters, buffers
  // and constants, then the user inputs (the order of signature().input_specs); outputs: the
  // mutated buffers and inputs, then the user outputs (the order of output_specs).
  const Graph& graph() const;
  // The graph specialized to the sizes of `user_inputs` (one per size, kept): checks every
  // symbolic dimension against its range and every static one against the export, naming the
  // input and dimension. Throws Pt2Error.
  std::shared_ptr<const Graph> graph_for(const TensorList& user_inputs) const;

  const ExportGraphSignature& signature() const;
  const std::vector<SymbolicDim>& symbolic_dims() const;
  // Sizes the program reads from tensor values (torch.export's unbacked u0, u1, ...: nonzero's
  // or torch.where's count, as a mixture of experts routes tokens), with the ranges the export
  // derived. Such a program runs (operator(), with autograd); it does not compile as one graph
  // (flat_function() throws naming them: a compile specializes every size), but
  // compile_exported_program compiles its regions of known sizes.
  const std::vector<SymbolicDim>& data_dependent_dims() const;

  // Leaves that require grad as exported. Tied parameters (one tensor under several names, as
  // named_parameters(remove_duplicate=False) lists them) are one tensor here too: their uses
  // accumulate into one .grad, as in eager.
  const std::vector<NamedTensor>& parameters() const;
  const std::vector<NamedTensor>& buffers() const;    // persistent and non-persistent
  const std::vector<NamedTensor>& constants() const;  // lifted tensor constants
  // One tensor per lifted input of the graph, in graph input order (parameters, buffers,
  // constants): the leading arguments of flat_function().
  TensorList lifted_tensors() const;
  std::size_t num_user_inputs() const;
  // The archive's sample inputs (flattened args then kwargs), when it has them.
  const std::optional<TensorList>& sample_inputs() const;

  // Runs the program eagerly on its state: returns the user outputs; buffer and input
  // mutations land in the buffers and inputs, as the exported module's call does.
  TensorList operator()(const TensorList& user_inputs) const;
  // The program with graph_for(user_inputs)'s calls run by `run` (given that graph and its
  // inputs, the lifted tensors then the user inputs, returning its outputs) instead of the
  // interpreter; mutations land and the user outputs are returned, as operator() does. How a
  // program compiled in regions runs (compile_exported_program, for data-dependent sizes).
  using GraphRun = std::function<TensorList(const Graph& graph, const TensorList& inputs)>;
  TensorList run_graph_with(const TensorList& user_inputs, const GraphRun& run) const;
  // The program as a flat function of [lifted tensors..., user inputs...] returning the user
  // outputs and writing mutations into its arguments: what a compile traces (with its formulas
  // fused, LoadExportedProgramOptions::fuse_formulas). Throws Pt2Error for a program with
  // data-dependent sizes, naming them and the node that returns the first.
  Function flat_function() const;

 private:
  friend ExportedProgram load_exported_program(const std::filesystem::path&, LoadExportedProgramOptions);
  struct Impl;
  static std::shared_ptr<Impl> load(const std::filesystem::path& path, const LoadExportedProgramOptions& options);
  std::shared_ptr<const Impl> impl_;
};

// Reads a .pt2 archive. Throws Pt2Error naming the file and what is wrong: not a zip archive
// (or truncated), not a torch.export archive, an archive or schema version this build does not
// read, an operator not registered in this process, higher-order ops, custom objects, tokens,
// a data-dependent size passed to an operator, non-tensor inputs or outputs, a state tensor
// missing from the archive.
ExportedProgram load_exported_program(const std::filesystem::path& path, LoadExportedProgramOptions options = {});

// What a compile of the archive on metadata examples depends on, as bytes to hash: every record's
// name and size, and the contents of every record but the state's tensors (the weights' and
// constants' data, which such a compile never reads). The model's JSON, the weights' and
// constants' configs (their tensors' metadata) and the sample inputs are in. Reads no tensor
// data, so keying a many-GB archive costs what reading its JSON does. Throws Pt2Error.
std::string archive_compile_ingredients(const std::filesystem::path& path);

}  // namespace aotpipe

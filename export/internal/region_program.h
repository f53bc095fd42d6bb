#pragma once
// A graph with data-dependent sizes compiled in regions, as torch.compile compiles around a graph
// break: each maximal run of calls whose values all have metadata (known sizes) and at least
// kMinCompiledCalls calls is compiled as a function of its own (aot_function: functionalized,
// partitioned, a backend; an autograd function when it needs gradients), and the calls that
// return or read a value of data-dependent size run as exported (the interpreter) between them,
// with eager autograd joining the two. See docs/export.md.
#include <aotpipe/driver/aot_function.h>
#include <aotpipe/graph/graph.h>
#include <aotpipe/graph/interpreter.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace aotpipe::pt2 {

class RegionProgram {
 public:
  // Runs of fewer calls with known sizes (a select between two experts) run as exported: a
  // compile of its own would cost more than it saves.
  static constexpr std::size_t kMinCompiledCalls = 4;

  // `graph` is one specialization of the program (its user input sizes fixed); each region's
  // compile is named `name`.region<k> and uses `config` (num_params_buffers is 0: a region's
  // inputs are whatever earlier regions and the program's inputs give it).
  RegionProgram(const Graph& graph, const AotConfig& config, const std::string& name,
                const std::shared_ptr<CompileCache>& cache);

  // `graph`'s calling convention: its inputs in, its outputs out.
  TensorList operator()(const TensorList& inputs) const;

  std::size_t num_compiled_regions() const;
  std::size_t num_interpreted_regions() const;
  std::size_t num_compiled() const;  // compiles made so far, over all compiled regions

 private:
  struct Region {
    std::vector<std::uint32_t> inputs;   // slots (value ids of the graph) read
    std::vector<std::uint32_t> outputs;  // slots written
    std::optional<CompiledFunction> compiled;
    std::optional<Interpreter> interpreted;
  };
  std::vector<Region> regions_;
  std::vector<std::uint32_t> graph_inputs_, graph_outputs_;
  std::size_t num_slots_ = 0;
};

}  // namespace aotpipe::pt2

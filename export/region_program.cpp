#include <aotpipe/export/internal/region_program.h>
#include <aotpipe/graph/formula_fusion.h>
#include <aotpipe/graph/passes.h>

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <utility>

namespace aotpipe::pt2 {
namespace {

// A run of consecutive calls that are all compiled or all interpreted.
struct Run {
  bool compiled = false;
  std::vector<const Node*> calls;
};

// Whether every size `node` reads and every result a later node reads is known (has metadata),
// and its results are tensors (what a compiled function returns).
bool known_sizes(const Node& node, const std::vector<std::size_t>& readers) {
  bool known = true;
  node.for_each_input([&](const Value* v) { known = known && (!v->is_tensor() || v->meta() != nullptr); });
  for (const Value* out : node.outputs())
    known = known && (readers[out->id()] == 0 || (out->is_tensor() && out->meta() != nullptr));
  return known;
}

// The calls in order, cut where known_sizes changes; runs of known sizes too short to compile
// join their neighbours.
std::vector<Run> split_into_runs(const Graph& graph) {
  std::vector<std::size_t> readers(graph.value_id_limit(), 0);
  for (const Node* node : graph.nodes()) node->for_each_input([&](const Value* v) { ++readers[v->id()]; });
  for (const Value* out : graph.outputs()) ++readers[out->id()];
  std::vector<Run> runs;
  auto append = [&](bool compiled, const std::vector<const Node*>& calls) {
    if (runs.empty() || runs.back().compiled != compiled) runs.push_back({compiled, {}});
    runs.back().calls.insert(runs.back().calls.end(), calls.begin(), calls.end());
  };
  std::vector<Run> raw;
  for (const Node* node : graph.nodes()) {
    if (!node->is_call()) continue;  // tensor constants: copied into each region that reads one
    const bool known = known_sizes(*node, readers);
    if (raw.empty() || raw.back().compiled != known) raw.push_back({known, {}});
    raw.back().calls.push_back(node);
  }
  for (const Run& run : raw) append(run.compiled && run.calls.size() >= RegionProgram::kMinCompiledCalls, run.calls);
  return runs;
}

}  // namespace

RegionProgram::RegionProgram(const Graph& graph, const AotConfig& config, const std::string& name,
                             const std::shared_ptr<CompileCache>& cache) {
  num_slots_ = graph.value_id_limit();
  for (const Value* in : graph.inputs()) graph_inputs_.push_back(in->id());
  for (const Value* out : graph.outputs()) {
    if (!out->is_input() && !out->producer()->is_call())
      throw GraphError(
          fmt::format("{}: output %{} is a tensor constant, which a program compiled in regions does "
                      "not return",
                      name, out->name()));
    graph_outputs_.push_back(out->id());
  }
  const std::vector<Run> runs = split_into_runs(graph);
  // Per value: the run that defines it, and the last run that reads it (graph outputs: after all).
  constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();
  std::vector<std::size_t> defined_in(num_slots_, kNone), last_read_in(num_slots_, 0);
  for (std::size_t r = 0; r < runs.size(); ++r)
    for (const Node* node : runs[r].calls) {
      for (const Value* out : node->outputs()) defined_in[out->id()] = r;
      node->for_each_input([&](const Value* v) { last_read_in[v->id()] = std::max(last_read_in[v->id()], r); });
    }
  for (const Value* out : graph.outputs()) last_read_in[out->id()] = kNone;

  AotConfig region_config = config;
  region_config.num_params_buffers = 0;
  for (std::size_t r = 0; r < runs.size(); ++r) {
    std::vector<Value*> inputs, outputs;
    std::vector<char> taken(num_slots_, 0);
    for (const Node* node : runs[r].calls) {
      node->for_each_input([&](Value* v) {
        const bool outside = v->is_input() || (v->producer()->is_call() && defined_in[v->id()] != r);
        if (outside && !taken[v->id()]) {
          taken[v->id()] = 1;
          inputs.push_back(v);
        }
      });
      // What later regions read, and the results of in-place calls no one reads (their writes
      // into the region's inputs must happen).
      const bool mutates = node->schema().is_mutable();
      for (Value* out : node->outputs())
        if (last_read_in[out->id()] > r || (mutates && last_read_in[out->id()] == 0 && defined_in[out->id()] == r))
          outputs.push_back(out);
    }
    if (outputs.empty()) continue;
    Graph sub = extract_subgraph(graph, inputs, outputs, fmt::format("{}_region{}", graph.name(), regions_.size()));
    Region region;
    for (const Value* v : inputs) region.inputs.push_back(v->id());
    for (const Value* v : outputs) region.outputs.push_back(v->id());
    if (runs[r].compiled) {
      // Compiled regions trace activation formulas as their kernels, as whole-program compiles do.
      fuse_pointwise_formulas(sub);
      auto interpreter = std::make_shared<Interpreter>(sub);
      Function fn = [interpreter](const TensorList& args) { return interpreter->run(args); };
      region.compiled.emplace(std::move(fn), region_config, fmt::format("{}.region{}", name, regions_.size()), cache);
    } else {
      region.interpreted.emplace(sub);
    }
    regions_.push_back(std::move(region));
  }
}

TensorList RegionProgram::operator()(const TensorList& inputs) const {
  if (inputs.size() != graph_inputs_.size())
    throw GraphError(fmt::format("the program takes {} inputs, got {}", graph_inputs_.size(), inputs.size()));
  std::vector<at::Tensor> slots(num_slots_);
  for (std::size_t i = 0; i < inputs.size(); ++i) slots[graph_inputs_[i]] = inputs[i];
  for (const Region& region : regions_) {
    TensorList args;
    args.reserve(region.inputs.size());
    for (std::uint32_t s : region.inputs) args.push_back(slots[s]);
    TensorList outs = region.compiled ? (*region.compiled)(args) : region.interpreted->run(std::move(args));
    for (std::size_t k = 0; k < region.outputs.size() && k < outs.size(); ++k)
      slots[region.outputs[k]] = std::move(outs[k]);
  }
  TensorList result;
  result.reserve(graph_outputs_.size());
  for (std::uint32_t s : graph_outputs_) result.push_back(slots[s]);
  return result;
}

std::size_t RegionProgram::num_compiled_regions() const {
  return static_cast<std::size_t>(
      std::count_if(regions_.begin(), regions_.end(), [](const Region& r) { return r.compiled.has_value(); }));
}

std::size_t RegionProgram::num_interpreted_regions() const { return regions_.size() - num_compiled_regions(); }

std::size_t RegionProgram::num_compiled() const {
  std::size_t n = 0;
  for (const Region& r : regions_)
    if (r.compiled) n += r.compiled->num_compiled();
  return n;
}

}  // namespace aotpipe::pt2

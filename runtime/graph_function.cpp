#include <aotpipe/graph/example_tensor.h>
#include <aotpipe/graph/interpreter.h>
#include <aotpipe/graph/random_tensor.h>
#include <aotpipe/runtime/graph_function.h>

#include <fmt/format.h>

namespace aotpipe {

Function graph_function(std::shared_ptr<const Graph> graph) {
  for (std::size_t i = 0; i < graph->num_inputs(); ++i) {
    const Value* input = graph->input(i);
    if (input->type() != ValueType::Tensor)
      throw GraphError(fmt::format("graph '{}': input {} (%{}) is {}, but a compiled function takes only tensors",
                                   graph->name(), i, input->name(), to_string(input->type())));
  }
  for (std::size_t i = 0; i < graph->num_outputs(); ++i) {
    const Value* output = graph->outputs()[i];
    if (output->type() != ValueType::Tensor)
      throw GraphError(fmt::format("graph '{}': output {} (%{}) is {}, but a compiled function returns only tensors",
                                   graph->name(), i, output->name(), to_string(output->type())));
  }
  // Built once: the interpreter's program is immutable and may run on many threads at once.
  auto interpreter = std::make_shared<const Interpreter>(*graph);
  return [interpreter, graph = std::move(graph)](const TensorList& args) { return interpreter->run(args); };
}

Function graph_function_in_float64(const Graph& graph) {
  auto promoted = std::make_shared<Graph>(graph);
  for (const auto& [key, tensor] : graph.tensor_constants())
    if (tensor.defined() && tensor.is_floating_point()) promoted->bind_constant(key, tensor.to(c10::kDouble));
  return graph_function(std::move(promoted));
}

namespace {

template <class Make>
TensorList args_from_meta(const Graph& graph, Make&& make) {
  TensorList args;
  args.reserve(graph.num_inputs());
  for (std::size_t i = 0; i < graph.num_inputs(); ++i) {
    const Value* input = graph.input(i);
    if (!input->meta())
      throw GraphError(fmt::format("graph '{}': input {} (%{}) has no TensorMeta", graph.name(), i, input->name()));
    at::Tensor t = make(*input->meta());
    if (input->meta()->requires_grad) t.requires_grad_(true);
    args.push_back(std::move(t));
  }
  return args;
}

}  // namespace

TensorList example_args(const Graph& graph, at::Generator& gen) {
  return args_from_meta(graph, [&gen](const TensorMeta& meta) { return random_tensor(meta, gen); });
}

TensorList metadata_example_args(const Graph& graph) {
  return args_from_meta(graph, [](TensorMeta meta) {
    meta.requires_grad = false;  // set by args_from_meta, as for real examples
    return metadata_example(meta);
  });
}

}  // namespace aotpipe

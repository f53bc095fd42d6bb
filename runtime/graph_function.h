#pragma once
// A Graph as a user program: the interpreter runs it on whatever tensors it is given, real ones
// or the tracer's, so a graph file can be compiled like a C++ function (`aotpipe compile`).
#include <aotpipe/graph/graph.h>
#include <aotpipe/stages/compile_state.h>

#include <ATen/core/Generator.h>

#include <memory>

namespace aotpipe {

// Throws GraphError naming the graph and the input when an input is not a tensor (a compiled
// function takes a flat list of tensors) or an output is not a tensor.
Function graph_function(std::shared_ptr<const Graph> graph);

// The same program with its floating tensor constants in float64: the float64 reference that
// `aotpipe compile --check` measures float32 error against (the graph's own float32 constants
// would meet float64 inputs and refuse them).
Function graph_function_in_float64(const Graph& graph);

// One tensor per input, exactly as its TensorMeta says (sizes, strides, storage offset, dtype,
// device, requires_grad), each on a fresh storage filled from `gen`: normal values for floating
// and complex dtypes, 0/1 for bool, small non-negative integers (0..7) otherwise. Throws
// GraphError naming the input for one without metadata.
TensorList example_args(const Graph& graph, at::Generator& gen);

// One metadata example (graph/example_tensor.h) per input: what a compile needs, with no data
// and no device memory, so a graph whose inputs are on cuda:0 compiles on a machine without a
// GPU. Throws GraphError naming the input for one without metadata.
TensorList metadata_example_args(const Graph& graph);

}  // namespace aotpipe

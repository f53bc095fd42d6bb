#pragma once
// The calling convention every layer shares: flat tensors in, flat tensors out. Defined once,
// here; the names are part of the public API (see docs/user-guide.md). Inside namespace aotpipe
// they never clash with at::TensorList (an ArrayRef view) or torch::autograd::Function (a CRTP
// base for custom autograd functions): those are always written qualified.
#include <ATen/core/Tensor.h>

#include <functional>
#include <vector>

namespace aotpipe {

class Graph;        // graph/graph.h
struct TensorMeta;  // graph/tensor_meta.h

using TensorList = std::vector<at::Tensor>;

// A user program. It may mutate its inputs in place and return views of its inputs or of its
// intermediates, exactly like eager PyTorch code.
using Function = std::function<TensorList(const TensorList&)>;

// What a backend compiler returns: boxed, arguments by value so it may free them early.
using CompiledGraph = std::function<TensorList(TensorList)>;

// A backend compiler: gets a functional ATen graph and the metadata of its example inputs.
using Compiler = std::function<CompiledGraph(const Graph&, const std::vector<TensorMeta>&)>;

}  // namespace aotpipe

#pragma once
// Constant folding: the calls of a graph whose results depend on none of its inputs, only on its
// tensor constants and literal arguments (a causal mask from `full` and `triu`, position ids from
// `arange`), as Inductor's constant folding and PyTorch's freezing find them. Such a call gives
// the same result at every run, so a backend may compute it once and keep it as a constant.
#include <aotpipe/graph/graph.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace aotpipe {

struct ConstantFoldingOptions {
  // A result bigger than this stays computed at every run, and so does everything computed from
  // it: a folded value is held for the graph's lifetime, where a computed one lives one run.
  int64_t max_result_bytes = int64_t{16} << 20;
};

// Per node of graph.nodes(): whether it is a call that may be folded. Its value arguments are
// tensor constants or results of foldable calls, and it is none of: an op drawing random numbers
// or taking a generator, a mutating op, a call under autocast, a call whose result a graph output
// is or shares memory with (a caller may write into an output, or hold it across runs), a result
// over the size limit or without TensorMeta.
std::vector<bool> foldable_calls(const Graph& graph, const ConstantFoldingOptions& options = {});

}  // namespace aotpipe

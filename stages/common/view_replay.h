#pragma once
// View replay (PyTorch's ViewMetaSequence / Tensor._view_func): regenerate an aliased output by
// re-applying the view ops that made it, rather than one as_strided, so that the regenerated
// tensor has the same autograd history (e.g. TransposeBackward0, not AsStridedBackward0), and
// cross-dtype views such as view_as_real work. When replay is impossible or lands on different
// geometry, gen_alias_from_base falls back to as_strided, as PyTorch does.
#include <aotpipe/graph/graph.h>

#include <ATen/core/Tensor.h>

#include <memory>
#include <optional>

namespace aotpipe {

class Interpreter;

// The chain of view ops from a base value to a view, as a one-input graph (base -> view).
class ViewReplay {
 public:
  explicit ViewReplay(Graph chain);
  const Graph& graph() const { return *graph_; }
  // Applies the chain to `base` (any tensor with the chain start's geometry, real or traced).
  at::Tensor apply(const at::Tensor& base) const;
  bool operator==(const ViewReplay& other) const;

 private:
  std::shared_ptr<const Graph> graph_;
  std::shared_ptr<const Interpreter> interpreter_;
};

// True for a call whose op returns an alias of its first argument without writing to any
// argument (aten::view, transpose, select, split.Tensor, ...).
bool is_view_call(const Node& node);

// The view chain ending in `value`: its defining view calls back to the first value not made by
// a view call. Nullopt when `value` is not made by a view call, or the chain reads other graph
// values (e.g. view_as(other)), which the replay could not provide.
std::optional<ViewReplay> extract_view_replay(const Graph& graph, const Value* value);

}  // namespace aotpipe

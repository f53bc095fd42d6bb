#pragma once
// The operator classes the min-cut partitioner decides with: PyTorch's OpTypes and
// get_default_op_list() (torch/_functorch/partitioners.py), keyed by op packet name
// ("aten::mul" covers every overload of mul, as get_aten_target() does in Python).
#include <aotpipe/graph/graph.h>

#include <string>
#include <string_view>
#include <unordered_set>

namespace aotpipe::partitioners {

// The pseudo packet of one element of a multi-output op (FX's operator.getitem).
inline constexpr std::string_view kGetItem = "getitem";

struct OpTypes {
  std::unordered_set<std::string> fusible;            // recomputable | random
  std::unordered_set<std::string> compute_intensive;  // mm, bmm, addmm, convolution, attention...
  std::unordered_set<std::string> random;             // native_dropout, rand_like, randn_like
  std::unordered_set<std::string> view;               // view, t, expand, slice, select...
  std::unordered_set<std::string> recomputable;       // the allowlist (incl. every pointwise op)

  bool is_fusible(std::string_view packet) const { return fusible.count(std::string(packet)) > 0; }
  bool is_compute_intensive(std::string_view packet) const { return compute_intensive.count(std::string(packet)) > 0; }
  bool is_random(std::string_view packet) const { return random.count(std::string(packet)) > 0; }
  bool is_view(std::string_view packet) const { return view.count(std::string(packet)) > 0; }
  bool is_recomputable(std::string_view packet) const { return recomputable.count(std::string(packet)) > 0; }
};

// PyTorch 2.11's get_default_op_list(), aten ops only (the prims and Python operator entries
// never occur in aotpipe graphs). Built once; thread-safe.
const OpTypes& default_op_types();

// Every aten packet with an overload tagged `pointwise` (PyTorch's pointwise_ops()), read
// from the dispatcher's registrations.
const std::unordered_set<std::string>& pointwise_packets();

// "aten::mul" for aten::mul.Tensor / aten::mul.Scalar.
std::string packet_name(const Node& node);
std::string packet_name(const c10::OperatorName& name);

}  // namespace aotpipe::partitioners

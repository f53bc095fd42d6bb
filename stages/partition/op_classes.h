#pragma once
// The operator classes the min-cut partitioner decides with: PyTorch's OpTypes and
// get_default_op_list() (torch/_functorch/partitioners.py), keyed by op packet name
// ("aten::mul" covers every overload of mul, as get_aten_target() does in Python).
#include <aotpipe/graph/graph.h>

#include <string>
#include <functional>
#include <string_view>
#include <unordered_set>

namespace aotpipe::partitioners {

// The pseudo packet of one element of a multi-output op (FX's operator.getitem).
inline constexpr std::string_view kGetItem = "getitem";

// A set of packet names that answers string_view queries without building a std::string
// (the partitioner asks five questions per node of every joint graph).
struct PacketHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view packet) const noexcept { return std::hash<std::string_view>{}(packet); }
};
using PacketSet = std::unordered_set<std::string, PacketHash, std::equal_to<>>;

struct OpTypes {
  PacketSet fusible;            // recomputable | random
  PacketSet compute_intensive;  // mm, bmm, addmm, convolution, attention...
  PacketSet random;             // native_dropout, rand_like, randn_like
  PacketSet view;               // view, t, expand, slice, select...
  PacketSet recomputable;       // the allowlist (incl. every pointwise op)

  bool is_fusible(std::string_view packet) const { return fusible.contains(packet); }
  bool is_compute_intensive(std::string_view packet) const { return compute_intensive.contains(packet); }
  bool is_random(std::string_view packet) const { return random.contains(packet); }
  bool is_view(std::string_view packet) const { return view.contains(packet); }
  bool is_recomputable(std::string_view packet) const { return recomputable.contains(packet); }
};

// PyTorch 2.11's get_default_op_list(), aten ops only (the prims and Python operator entries
// never occur in aotpipe graphs). Built once; thread-safe.
const OpTypes& default_op_types();

// Every aten packet with an overload tagged `pointwise` (PyTorch's pointwise_ops()), read
// from the dispatcher's registrations.
const PacketSet& pointwise_packets();

}  // namespace aotpipe::partitioners

#pragma once
// Internal to the partitioners: the joint graph seen as PyTorch's partitioners see an FX graph.
//
// One PNode per FX node: a placeholder per graph input, a node per single-result call, and for
// an op with several results (or a Tensor[] result) a tuple node plus one `getitem` node per
// result that something reads, as make_fx records them. A last pseudo node stands for FX's
// `output` node, so that "users" mean what they mean in Python (the output counts as a user).
#include <aotpipe/graph/graph.h>

#include <c10/util/SmallVector.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace aotpipe::partitioners::detail {

enum class PKind : std::uint8_t { Placeholder, Constant, Call, Tuple, GetItem, Output };

struct PNode {
  PKind kind = PKind::Call;
  // Views of strings the joint graph (or the dispatcher) owns: a view is built for every joint.
  std::string_view name;                            // the value's name (tuple nodes: the first result's)
  const Node* node = nullptr;                       // defining node of the joint graph (null for placeholders/output)
  Value* value = nullptr;                           // the value this node stands for (null for tuple and output)
  std::string_view packet;                          // "aten::mul", "getitem"; empty for placeholders and constants
  c10::SmallVector<int, 4> inputs;                  // distinct nodes read, in argument order (FX all_input_nodes)
  c10::SmallVector<int, 4> positional_tensor_args;  // FX node.args entries that are nodes, repeats kept
  c10::SmallVector<int, 4> users;                   // distinct readers in graph order (the output node included)
  bool is_primal = false;
  bool is_tangent = false;
  bool tagged_forward = false;   // attrs()["phase"] == "forward" (PyTorch's partitioner_tag is_forward)
  bool tagged_backward = false;  // attrs()["phase"] == "backward"
  bool mutable_op = false;       // the op may write an argument (schema alias info)
  bool is_tensor = false;        // a tensor value (placeholders, calls, getitems, constants)
  bool is_sym = false;           // a number value (FX's sym nodes: int, float, bool, Scalar)
  std::int64_t size = 0;         // PyTorch's _size_of: bytes of the tensor(s), 1 or 4 for numbers
};

// The node's name as PyTorch's partitioner would print it (a tuple node: "<first result>#tuple").
std::string display_name(const PNode& node);

struct JointView {
  std::vector<PNode> nodes;   // graph order: placeholders, then nodes; the output node last
  int output = -1;            // index of the output pseudo node
  std::vector<int> of_value;  // by Value::id: the PNode standing for the value, -1 for none
  // The PNode of `v`; throws std::out_of_range for a value without one.
  int index_of(const Value* v) const {
    const int i = v->id() < of_value.size() ? of_value[v->id()] : -1;
    if (i < 0) throw std::out_of_range("partition: %" + v->name() + " has no node in the joint view");
    return i;
  }
  std::vector<int> primals, tangents;
  std::vector<Value*> fwd_outputs, bwd_outputs;  // the joint's output values, split
  std::size_t num_primals = 0;
};

// Throws std::invalid_argument when the counts do not fit the graph.
JointView build_joint_view(const Graph& graph, std::size_t num_primals, std::size_t num_fwd_outputs);

// PyTorch's classify_nodes(): which nodes the forward needs, which the backward needs.
struct NodeInfo {
  std::vector<char> required_fw;       // computable from the primals and needed for forward outputs
  std::vector<char> required_bw;       // tangents_closure + the backward outputs
  std::vector<char> tangents_closure;  // the tangents and everything computed from them
  std::vector<int> fw_order;           // position among required_fw nodes, -1 otherwise
  std::vector<int> required_fw_nodes;  // in graph order
  std::size_t num_required_bw = 0;
};
// Throws PartitionError when a forward output depends on the tangents.
NodeInfo classify_nodes(const JointView& view);

// A value of a TensorMeta-less tensor (an undefined result) counts 0 bytes.
std::int64_t value_size(const Value& value);

}  // namespace aotpipe::partitioners::detail

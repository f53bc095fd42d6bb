#pragma once
// The aotpipe graph IR: a functional ATen program in SSA form.
//
// A Graph has ordered, named inputs (placeholders), a list of nodes in execution order and an
// output list. A call node invokes one ATen overload, resolved once to a c10::OperatorHandle
// from its qualified name ("aten::mul.Tensor"); it takes arguments (values, constants or
// lists of values) in schema order and defines one value per returned item (an op returning
// `Tensor[]` defines one value per element). Values carry a TensorMeta when they are tensors.
// See docs/ir.md for the text form.
#include <aotpipe/graph/block_cache.h>
#include <aotpipe/graph/tensor_meta.h>

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/ivalue.h>
#include <c10/util/SmallVector.h>

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <variant>
#include <vector>

namespace aotpipe {

class Graph;
class Node;

// The kind of a value. Tensors carry TensorMeta; the scalar kinds are for ops that return
// numbers (e.g. aten::sym_size.int) and graph inputs that are numbers.
enum class ValueType : std::uint8_t { Tensor, Int, Float, Bool, Scalar };
std::string_view to_string(ValueType type);

// A trace makes one per recorded value and frees them all with its graph (graph/block_cache.h).
class Value : public BlockAllocated<Value> {
 public:
  const std::string& name() const { return name_; }
  ValueType type() const { return type_; }
  bool is_tensor() const { return type_ == ValueType::Tensor; }
  // Null when the value is not a tensor or its metadata is unknown.
  const TensorMeta* meta() const { return meta_ ? &*meta_ : nullptr; }
  void set_meta(TensorMeta meta) { meta_ = std::move(meta); }
  // Fresh default metadata, to be filled in place: a TensorMeta moved in copies its sizes and
  // strides (held in place), which a tracer would otherwise do for every value it records.
  TensorMeta& emplace_meta() { return meta_.emplace(); }
  // The node that defines this value; null for graph inputs.
  Node* producer() const { return producer_; }
  std::size_t output_index() const { return output_index_; }
  bool is_input() const { return producer_ == nullptr; }
  Graph* graph() const { return graph_; }
  // Dense within its graph: 0, 1, 2, ... in order of creation, never reused (erasing leaves
  // gaps), below Graph::value_id_limit(). Passes index flat tables by it instead of hashing.
  std::uint32_t id() const { return id_; }

 private:
  friend class Graph;
  friend class Node;
  // The metadata by rvalue reference: each move of a TensorMeta copies its sizes and strides
  // (held in place), which a by-value parameter would do once more per value.
  Value(Graph* graph, std::string name, ValueType type, std::optional<TensorMeta>&& meta)
      : graph_(graph), name_(std::move(name)), type_(type), meta_(std::move(meta)) {}

 private:
  Graph* graph_;
  std::uint32_t id_ = 0;
  std::string name_;
  ValueType type_;
  std::optional<TensorMeta> meta_;
  Node* producer_ = nullptr;
  std::size_t output_index_ = 0;
};

// A list argument of values (`Tensor[]`, or `Tensor?[]` where null entries stand for None).
struct ValueList {
  std::vector<Value*> values;
  bool operator==(const ValueList&) const = default;
};

// One argument of a call: a value of the graph, a constant (int, float, bool, None, string,
// int list, dtype (stored as int, as in the dispatcher), device...), or a list of values.
class Argument {
 public:
  Argument(Value* value) : repr_(value) {}                                // NOLINT(google-explicit-constructor)
  Argument(c10::IValue constant) : repr_(std::move(constant)) {}          // NOLINT
  Argument(ValueList list) : repr_(std::move(list)) {}                    // NOLINT
  Argument(int64_t v) : repr_(c10::IValue(v)) {}                          // NOLINT
  Argument(int v) : repr_(c10::IValue(static_cast<int64_t>(v))) {}        // NOLINT
  Argument(double v) : repr_(c10::IValue(v)) {}                           // NOLINT
  Argument(bool v) : repr_(c10::IValue(v)) {}                             // NOLINT
  Argument(std::vector<int64_t> v) : repr_(c10::IValue(std::move(v))) {}  // NOLINT
  static Argument none() { return Argument(c10::IValue()); }

  bool is_value() const { return std::holds_alternative<Value*>(repr_); }
  bool is_constant() const { return std::holds_alternative<c10::IValue>(repr_); }
  bool is_value_list() const { return std::holds_alternative<ValueList>(repr_); }
  Value* value() const { return std::get<Value*>(repr_); }
  const c10::IValue& constant() const { return std::get<c10::IValue>(repr_); }
  const ValueList& value_list() const { return std::get<ValueList>(repr_); }
  ValueList& value_list() { return std::get<ValueList>(repr_); }
  // Calls f(Value*) for every value this argument reads (list entries that are None skipped).
  template <class F>
  void for_each_value(F&& f) const {
    if (is_value()) {
      f(value());
    } else if (is_value_list()) {
      for (Value* v : value_list().values)
        if (v) f(v);
    }
  }
  // Replaces every value v this argument reads by f(v).
  template <class F>
  void remap_values(F&& f) {
    if (is_value()) {
      repr_ = static_cast<Value*>(f(value()));
    } else if (is_value_list()) {
      for (Value*& v : value_list().values)
        if (v) v = f(v);
    }
  }
  void replace_value(Value* from, Value* to) {
    remap_values([&](Value* v) { return v == from ? to : v; });
  }

 private:
  std::variant<Value*, c10::IValue, ValueList> repr_;
};

enum class NodeKind : std::uint8_t {
  Call,      // an ATen operator call
  Constant,  // a named tensor constant of the graph (Graph::tensor_constants)
};

class Node : public BlockAllocated<Node> {
 public:
  NodeKind kind() const { return kind_; }
  bool is_call() const { return kind_ == NodeKind::Call; }
  // Call nodes: the resolved operator and its schema.
  const c10::OperatorHandle& op() const;
  const c10::FunctionSchema& schema() const;
  // "aten::mul.Tensor"; "aten::mm" for an overload with an empty name.
  std::string qualified_name() const;
  // "%mul = aten::mul.Tensor" (first defined value and op), how errors name a node.
  std::string label() const;
  // Constant nodes: the key into Graph::tensor_constants().
  const std::string& constant_name() const { return constant_name_; }

  const std::vector<Argument>& args() const { return args_; }
  std::vector<Argument>& args() { return args_; }
  std::span<Value* const> outputs() const { return {outputs_.data(), outputs_.size()}; }
  Value* output(std::size_t i = 0) const {
    if (i >= outputs_.size()) throw std::out_of_range("Node::output: index out of range");
    return outputs_[i];
  }
  std::size_t num_outputs() const { return outputs_.size(); }
  // Values read by this node, in argument order, repeats kept.
  std::vector<Value*> inputs() const;
  // Calls f(Value*) for each of inputs() without building the vector (passes walk every node).
  template <class F>
  void for_each_input(F&& f) const {
    for (const Argument& arg : args_) arg.for_each_value(f);
  }

  // Free-form annotations carried through copies and the text form (e.g. phase=backward).
  std::map<std::string, std::string>& attrs() { return attrs_; }
  const std::map<std::string, std::string>& attrs() const { return attrs_; }
  Graph* graph() const { return graph_; }
  // True when the op may write to an argument (schema alias info says so): never dead code.
  bool has_side_effects() const;

  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;
  ~Node();  // deletes the values it defines
  // Dense within its graph, as Value::id: below Graph::node_id_limit().
  std::uint32_t id() const { return id_; }

 private:
  friend class Graph;
  explicit Node(Graph* graph, NodeKind kind) : graph_(graph), kind_(kind) {}

 private:
  Graph* graph_;
  std::uint32_t id_ = 0;
  NodeKind kind_;
  std::optional<c10::OperatorHandle> op_;
  std::string constant_name_;
  std::vector<Argument> args_;
  // Owned (deleted with the node); inline for up to three results (a
  // batch norm makes three): every recorded call makes one.
  c10::SmallVector<Value*, 3> outputs_;
  std::map<std::string, std::string> attrs_;
};

// Describes one value a new call node defines; unset fields are derived from the schema.
struct OutputSpec {
  std::string name;  // empty: a fresh name from the op's base name ("mul", "mul_1", ...)
  std::optional<TensorMeta> meta;
  std::optional<ValueType> type;
};

// Thrown for misuse of the IR API (unknown op, wrong arity...), naming what is wrong.
class GraphError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Resolves "aten::mul.Tensor" / "aten::mm" / "aten::mm.default" to a dispatcher handle.
c10::OperatorHandle resolve_operator(std::string_view qualified_name);

class Graph {
 public:
  explicit Graph(std::string name = "graph");
  Graph(const Graph& other);
  Graph& operator=(const Graph& other);
  Graph(Graph&&) noexcept;
  Graph& operator=(Graph&&) noexcept;
  ~Graph();

  const std::string& name() const { return name_; }
  void set_name(std::string name) { name_ = std::move(name); }

  // --- inputs ---
  Value* add_input(std::string name, TensorMeta meta);
  Value* add_input(std::string name, ValueType type, std::optional<TensorMeta> meta = std::nullopt);
  std::size_t num_inputs() const { return inputs_.size(); }
  std::span<Value* const> inputs() const { return {inputs_.data(), inputs_.size()}; }
  Value* input(std::size_t i) const { return inputs_.at(i); }

  // --- nodes ---
  // Appends (or inserts before `before`) a call. `args` may stop early: missing trailing
  // arguments take their schema defaults; a missing argument without default is an error.
  // An op returning `Tensor[]` needs `outputs` to say how many values it defines.
  Node* add_call(const c10::OperatorHandle& op, std::vector<Argument> args, std::vector<OutputSpec> outputs = {},
                 Node* before = nullptr);
  // The same, with the outputs described in the caller's storage (names and metadata are moved
  // out of it): a tracer records every op this way, without a vector to allocate per call.
  Node* add_call(const c10::OperatorHandle& op, std::vector<Argument> args, std::span<OutputSpec> outputs,
                 Node* before = nullptr);
  Node* add_call(std::string_view qualified_name, std::vector<Argument> args, std::vector<OutputSpec> outputs = {},
                 Node* before = nullptr);
  // A named tensor constant (a tensor the program closed over, never baked into a node).
  Value* add_constant(const std::string& key, at::Tensor tensor, std::string value_name = {}, Node* before = nullptr);
  // Declares a constant's key without data (the text form carries no tensor data); the
  // tensor must be bound with bind_constant before the graph runs.
  Value* add_constant_ref(std::string key, TensorMeta meta, std::string value_name = {}, Node* before = nullptr);
  void bind_constant(const std::string& key, at::Tensor tensor);
  const std::map<std::string, at::Tensor>& tensor_constants() const { return tensor_constants_; }

  std::size_t num_nodes() const { return nodes_.size(); }
  // Bounds of Value::id and Node::id: a flat table of this size has a slot for each.
  std::size_t value_id_limit() const { return next_value_id_; }
  std::size_t node_id_limit() const { return next_node_id_; }
  std::span<Node* const> nodes() const { return {nodes_.data(), nodes_.size()}; }
  // Removes a node; its outputs must be unused (checked).
  void erase_node(Node* node);
  // Removes several nodes at once (one pass, whatever their number): no remaining node and no
  // graph output may read what they define (checked).
  void erase_nodes(std::span<Node* const> nodes);
  // Moves an existing node before `before` (null: to the end).
  void move_node(Node* node, Node* before);
  // Puts the nodes in the given order: a permutation of nodes() in which every node comes after
  // the producers of the values it reads (both checked; the graph is unchanged on a refusal).
  void reorder_nodes(std::span<Node* const> order);
  std::size_t index_of(const Node* node) const;

  // --- outputs ---
  void set_outputs(std::vector<Value*> outputs);
  std::size_t num_outputs() const { return outputs_.size(); }
  std::span<Value* const> outputs() const { return {outputs_.data(), outputs_.size()}; }

  // Replaces every use of `from` (node arguments and graph outputs) by `to`.
  void replace_all_uses(Value* from, Value* to);
  // For every value, the nodes that read it (one entry per reading node), computed afresh.
  std::map<const Value*, std::vector<Node*>> compute_uses() const;

  // Value lookup by name (null when absent) and fresh-name generation.
  Value* find_value(std::string_view name) const;
  std::string fresh_name(std::string_view hint);
  // Renames a value (the new name must be free).
  void rename(Value* value, std::string name);

  std::string to_string() const;

 private:
  // An empty name takes a fresh one from `fresh_hint` (as fresh_name does).
  Value* new_value(std::string name, ValueType type, std::optional<TensorMeta>&& meta,
                   std::string_view fresh_hint = "v");
  void insert_node(std::unique_ptr<Node> node, Node* before);
  void delete_contents();
  void copy_from(const Graph& other);

  std::string name_;
  // Inputs and nodes are owned (delete_contents): one vector each, which nodes() and inputs() view.
  std::vector<Value*> inputs_;
  std::vector<Node*> nodes_;
  std::vector<Value*> outputs_;
  std::map<std::string, at::Tensor> tensor_constants_;
  // Value names -> values, and the next suffix per name hint (fresh_name). Every recorded op
  // makes and checks names, so graph.cpp keeps them in open-addressing tables whose keys view
  // the values' own names (no second copy, no allocation per entry). Made on first use: a
  // moved-from graph has none.
  struct NameIndex;
  std::unique_ptr<NameIndex> names_;
  NameIndex& names();
  template <class Take>
  void fresh_name_into(std::string& out, std::string_view hint, Take&& take);
  std::uint32_t next_value_id_ = 0, next_node_id_ = 0;
  std::unique_ptr<Node> new_node(NodeKind kind);
};

std::ostream& operator<<(std::ostream& os, const Graph& graph);

}  // namespace aotpipe

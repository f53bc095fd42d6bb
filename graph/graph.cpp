#include <aotpipe/graph/graph.h>

#include <aotpipe/graph/array_cache.h>
#include <aotpipe/graph/printer.h>

#include <ATen/core/Tensor.h>
#include <c10/util/SmallVector.h>
#include <boost/unordered/unordered_flat_map.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <ostream>
#include <unordered_map>
#include <utility>

namespace aotpipe {

std::string_view to_string(ValueType type) {
  switch (type) {
    case ValueType::Tensor: return "Tensor";
    case ValueType::Int: return "int";
    case ValueType::Float: return "float";
    case ValueType::Bool: return "bool";
    case ValueType::Scalar: return "Scalar";
  }
  return "?";
}

// ----------------------------------------------------------------------------------------------
// Node

const c10::OperatorHandle& Node::op() const {
  if (!op_)
    throw GraphError(
        fmt::format("node defining %{} is not an operator call", outputs_.empty() ? "?" : output()->name()));
  return *op_;
}

const c10::FunctionSchema& Node::schema() const { return op().schema(); }

std::string Node::qualified_name() const {
  if (!op_) return "constant";
  const auto& name = op_->operator_name();
  return name.overload_name.empty() ? name.name : name.name + "." + name.overload_name;
}

std::string Node::label() const {
  return fmt::format("{} = {}", outputs_.empty() ? "<no result>" : "%" + output()->name(), qualified_name());
}

std::vector<Value*> Node::inputs() const {
  std::vector<Value*> result;
  for (const Argument& arg : args_) arg.for_each_value([&](Value* v) { result.push_back(v); });
  return result;
}

Node::~Node() {
  for (Value* v : outputs_) delete v;
}

bool Node::has_side_effects() const { return op_ && op_->schema().is_mutable(); }

// ----------------------------------------------------------------------------------------------
// Operator resolution

namespace {

struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};

// The dispatcher's lookup by name parses the name and takes its lock: resolved names are
// remembered per thread (no lock at all), as PyTorch keeps typed handles in statics. Operators
// are not deregistered while a process compiles (PyTorch's own cached handles assume the same).
c10::OperatorHandle find_operator(std::string_view qualified_name) {
  thread_local std::unordered_map<std::string, c10::OperatorHandle, StringHash, std::equal_to<>> resolved;
  if (auto it = resolved.find(qualified_name); it != resolved.end()) return it->second;
  std::string text(qualified_name);
  auto ns = text.find("::");
  if (ns == std::string::npos)
    throw GraphError(fmt::format("operator '{}' is not qualified (expected e.g. aten::mul.Tensor)", text));
  auto dot = text.find('.', ns + 2);
  std::string name = dot == std::string::npos ? text : text.substr(0, dot);
  std::string overload = dot == std::string::npos ? "" : text.substr(dot + 1);
  if (overload == "default") overload.clear();
  auto handle = c10::Dispatcher::singleton().findSchema({name, overload});
  if (!handle) throw GraphError(fmt::format("unknown operator '{}'", text));
  resolved.emplace(std::move(text), *handle);
  return *handle;
}

}  // namespace

c10::OperatorHandle resolve_operator(std::string_view qualified_name) { return find_operator(qualified_name); }

// ----------------------------------------------------------------------------------------------
// Graph

struct Graph::NameIndex {
  // Names are short ("view_12", "primals_3"): up to 16 bytes are read as two words and multiplied
  // together here (the table mixes the result further, as for any hash not marked avalanching);
  // longer ones take std::hash. std::hash alone was 2% of a trace, most of it when the table grows
  // and hashes every name again.
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept {
      if (s.size() > 16) return std::hash<std::string_view>{}(s);
      std::uint64_t low = 0, high = 0;
      std::memcpy(&low, s.data(), std::min<std::size_t>(s.size(), 8));
      if (s.size() > 8) std::memcpy(&high, s.data() + 8, s.size() - 8);
      return (low * 0x9E3779B97F4A7C15ull) ^ ((high + s.size()) * 0xC2B2AE3D27D4EB4Full);
    }
  };
  // Keys view Value::name_ of the value they map to (values are never moved).
  // Its arrays are recycled per thread (graph/array_cache.h): they grow with every trace.
  boost::unordered_flat_map<std::string_view, Value*, Hash, std::equal_to<>,
                            RecyclingAllocator<std::pair<const std::string_view, Value*>>>
      values;
  // The next suffix per fresh-name hint. A graph uses few hints (one per kind of op), so they
  // sit inline and are found by a linear scan; past kInlineHints they move to a hash table. A
  // table per graph was a heap allocation of a kilobyte on every trace.
  class HintCounters {
   public:
    std::size_t& operator[](std::string_view hint) {
      if (!table_.empty()) return in_table(hint);
      // A tracer names every result after its op's schema name, the same string each time: a
      // small table by the hint's address finds its entry without the scan (the text is still
      // compared, an address may be reused by another string).
      std::uint8_t& recent = recent_[(reinterpret_cast<std::uintptr_t>(hint.data()) >> 3) % recent_.size()];
      if (recent != 0 && inline_[recent - 1].first == hint) return inline_[recent - 1].second;
      for (std::size_t i = 0; i < inline_.size(); ++i)
        if (inline_[i].first == hint) {
          recent = static_cast<std::uint8_t>(i + 1);
          return inline_[i].second;
        }
      if (inline_.size() < kInlineHints) {
        inline_.emplace_back(std::string(hint), 0);
        recent = static_cast<std::uint8_t>(inline_.size());
        return inline_.back().second;
      }
      for (auto& [name, next] : inline_) table_.emplace(std::move(name), next);
      inline_.clear();
      return in_table(hint);
    }

   private:
    std::size_t& in_table(std::string_view hint) {
      auto it = table_.find(hint);
      if (it == table_.end()) it = table_.emplace(std::string(hint), 0).first;
      return it->second;
    }
    static constexpr std::size_t kInlineHints = 32;  // below 256: recent_ holds an index + 1 in a byte
    c10::SmallVector<std::pair<std::string, std::size_t>, 8> inline_;
    std::array<std::uint8_t, 32> recent_{};  // 0: none
    boost::unordered_flat_map<std::string, std::size_t, Hash, std::equal_to<>> table_;
  };
  HintCounters counters;
};

Graph::NameIndex& Graph::names() {
  // Not reserved ahead: a table of 32 slots made a 10-op trace 13% slower than growing it.
  if (!names_) names_ = std::make_unique<NameIndex>();
  return *names_;
}

Graph::Graph(std::string name) : name_(std::move(name)) {}
Graph::Graph(const Graph& other) {
  try {
    copy_from(other);
  } catch (...) {
    delete_contents();  // no destructor runs for a graph whose construction failed
    throw;
  }
}
Graph& Graph::operator=(const Graph& other) {
  if (this != &other) {
    Graph copy(other);
    *this = std::move(copy);
  }
  return *this;
}
Graph::Graph(Graph&& other) noexcept { *this = std::move(other); }
Graph& Graph::operator=(Graph&& other) noexcept {
  if (this == &other) return *this;
  delete_contents();
  name_ = std::move(other.name_);
  inputs_ = std::exchange(other.inputs_, {});
  nodes_ = std::exchange(other.nodes_, {});
  outputs_ = std::move(other.outputs_);
  tensor_constants_ = std::move(other.tensor_constants_);
  names_ = std::move(other.names_);
  next_value_id_ = other.next_value_id_;
  next_node_id_ = other.next_node_id_;
  // Values and nodes point back at their graph.
  for (Value* v : inputs_) v->graph_ = this;
  for (Node* n : nodes_) {
    n->graph_ = this;
    for (Value* v : n->outputs_) v->graph_ = this;
  }
  return *this;
}
Graph::~Graph() { delete_contents(); }

void Graph::delete_contents() {
  for (Node* n : nodes_) delete n;
  for (Value* v : inputs_) delete v;
  nodes_.clear();
  inputs_.clear();
}

void Graph::copy_from(const Graph& other) {
  name_ = other.name_;
  tensor_constants_ = other.tensor_constants_;
  std::vector<Value*> map(other.value_id_limit(), nullptr);  // by the other graph's Value::id
  auto mapped = [&](const Value* v) {
    Value* m = v->id() < map.size() ? map[v->id()] : nullptr;
    if (!m) throw GraphError(fmt::format("graph '{}': %{} is read before it is defined", other.name_, v->name()));
    return m;
  };
  for (Value* v : other.inputs())
    map[v->id()] = add_input(v->name(), v->type(), v->meta() ? std::optional(*v->meta()) : std::nullopt);
  for (const Node* n : other.nodes()) {
    auto node = new_node(n->kind_);
    node->op_ = n->op_;
    node->constant_name_ = n->constant_name_;
    node->attrs_ = n->attrs_;
    node->args_ = n->args_;
    for (Argument& arg : node->args_) arg.remap_values([&](Value* used) { return mapped(used); });
    for (Value* out : n->outputs()) {
      Value* copy = new_value(out->name(), out->type(), out->meta() ? std::optional(*out->meta()) : std::nullopt);
      copy->producer_ = node.get();
      copy->output_index_ = node->outputs_.size();
      node->outputs_.push_back(copy);
      map[out->id()] = copy;
    }
    insert_node(std::move(node), nullptr);
  }
  for (Value* out : other.outputs()) outputs_.push_back(mapped(out));
  if (other.names_) names().counters = other.names_->counters;
}

std::unique_ptr<Node> Graph::new_node(NodeKind kind) {
  auto node = std::unique_ptr<Node>(new Node(this, kind));
  node->id_ = next_node_id_++;
  return node;
}

Value* Graph::new_value(std::string name, ValueType type, std::optional<TensorMeta>&& meta,
                        std::string_view fresh_hint) {
  auto value = std::unique_ptr<Value>(new Value(this, std::move(name), type, std::move(meta)));
  auto& values = names().values;
  if (value->name_.empty()) {
    // The first free candidate, found by the insertion itself (one lookup each).
    fresh_name_into(value->name_, fresh_hint,
                    [&](std::string_view candidate) { return values.try_emplace(candidate, value.get()).second; });
  } else if (!values.try_emplace(value->name_, value.get()).second) {
    throw GraphError(fmt::format("graph '{}': duplicate value name %{}", name_, value->name_));
  }
  value->id_ = next_value_id_++;
  return value.release();
}

Value* Graph::add_input(std::string name, TensorMeta meta) {
  return add_input(std::move(name), ValueType::Tensor, std::move(meta));
}

Value* Graph::add_input(std::string name, ValueType type, std::optional<TensorMeta> meta) {
  Value* value = new_value(std::move(name), type, std::move(meta), "arg");
  try {
    inputs_.push_back(value);
  } catch (...) {
    names().values.erase(std::string_view(value->name_));
    delete value;
    throw;
  }
  return value;
}

void Graph::insert_node(std::unique_ptr<Node> node, Node* before) {
  std::size_t pos = before ? index_of(before) : nodes_.size();
  nodes_.insert(nodes_.begin() + static_cast<std::ptrdiff_t>(pos), node.get());
  (void)node.release();  // owned by nodes_ now
}

std::size_t Graph::index_of(const Node* node) const {
  auto it = std::find(nodes_.begin(), nodes_.end(), node);
  if (it == nodes_.end()) throw GraphError(fmt::format("graph '{}': node is not in this graph", name_));
  return static_cast<std::size_t>(it - nodes_.begin());
}

namespace {
ValueType value_type_of_return(const c10::TypePtr& type) {
  switch (type->kind()) {
    case c10::TypeKind::TensorType: return ValueType::Tensor;
    case c10::TypeKind::IntType:
    case c10::TypeKind::SymIntType: return ValueType::Int;
    case c10::TypeKind::FloatType: return ValueType::Float;
    case c10::TypeKind::BoolType: return ValueType::Bool;
    case c10::TypeKind::NumberType: return ValueType::Scalar;
    default: throw GraphError("unsupported return type " + type->str());
  }
}

bool is_list_of_tensors(const c10::TypePtr& type) {
  return type->kind() == c10::TypeKind::ListType &&
         type->expectRef<c10::ListType>().getElementType()->kind() == c10::TypeKind::TensorType;
}
}  // namespace

Node* Graph::add_call(std::string_view qualified_name, std::vector<Argument> args, std::vector<OutputSpec> outputs,
                      Node* before) {
  return add_call(resolve_operator(qualified_name), std::move(args), std::move(outputs), before);
}

Node* Graph::add_call(const c10::OperatorHandle& op, std::vector<Argument> args, std::vector<OutputSpec> outputs,
                      Node* before) {
  return add_call(op, std::move(args), std::span<OutputSpec>(outputs), before);
}

Node* Graph::add_call(const c10::OperatorHandle& op, std::vector<Argument> args, std::span<OutputSpec> outputs,
                      Node* before) {
  const auto& schema = op.schema();
  auto node = new_node(NodeKind::Call);
  node->op_ = op;
  const auto& formals = schema.arguments();
  auto describe = [&] {
    return fmt::format("{}{}", schema.name(), schema.overload_name().empty() ? "" : "." + schema.overload_name());
  };
  if (args.size() > formals.size())
    throw GraphError(
        fmt::format("{}: {} arguments given, the schema takes {}", describe(), args.size(), formals.size()));
  for (std::size_t i = args.size(); i < formals.size(); ++i) {
    if (!formals[i].default_value())
      throw GraphError(fmt::format("{}: missing argument {} '{}' (no default)", describe(), i, formals[i].name()));
    args.emplace_back(*formals[i].default_value());
  }
  node->args_ = std::move(args);

  // The values this call defines: one per return, or one per element of a `Tensor[]` return.
  c10::SmallVector<ValueType, 4> types;
  const auto& returns = schema.returns();
  if (returns.size() == 1 && is_list_of_tensors(returns[0].type())) {
    types.assign(outputs.size(), ValueType::Tensor);
  } else {
    for (const auto& ret : returns) {
      if (is_list_of_tensors(ret.type()))
        throw GraphError(fmt::format("{}: a Tensor[] return beside other returns is not supported", describe()));
      types.push_back(value_type_of_return(ret.type()));
    }
    if (!outputs.empty() && outputs.size() != types.size())
      throw GraphError(
          fmt::format("{}: {} outputs described, the schema returns {}", describe(), outputs.size(), types.size()));
  }
  // Named values are in the name index, which views their names: nothing may fail once the
  // first is made but a duplicate name, after which the names made so far leave the index.
  if (before) (void)index_of(before);
  const std::string_view base = std::string_view(schema.name()).substr(schema.name().find("::") + 2);
  node->outputs_.reserve(types.size());
  try {
    for (std::size_t i = 0; i < types.size(); ++i) {
      Value* v = outputs.empty() ? new_value({}, types[i], std::optional<TensorMeta>(), base)
                                 : new_value(std::move(outputs[i].name), outputs[i].type.value_or(types[i]),
                                             std::move(outputs[i].meta), base);
      v->producer_ = node.get();
      v->output_index_ = i;
      node->outputs_.push_back(v);
    }
  } catch (...) {
    for (const Value* v : node->outputs_) names().values.erase(std::string_view(v->name_));
    throw;
  }
  Node* raw = node.get();
  insert_node(std::move(node), before);
  return raw;
}

Value* Graph::add_constant(const std::string& key, at::Tensor tensor, std::string value_name, Node* before) {
  TensorMeta meta = TensorMeta::of(tensor);
  Value* v = add_constant_ref(key, std::move(meta), std::move(value_name), before);
  tensor_constants_[key] = std::move(tensor);
  return v;
}

Value* Graph::add_constant_ref(std::string key, TensorMeta meta, std::string value_name, Node* before) {
  if (before) (void)index_of(before);  // before the value is named (see add_call)
  auto node = new_node(NodeKind::Constant);
  Value* v = new_value(std::move(value_name), ValueType::Tensor, std::move(meta), key);
  node->constant_name_ = std::move(key);
  v->producer_ = node.get();
  node->outputs_.push_back(v);
  insert_node(std::move(node), before);
  return v;
}

void Graph::bind_constant(const std::string& key, at::Tensor tensor) { tensor_constants_[key] = std::move(tensor); }

void Graph::erase_node(Node* node) { erase_nodes(std::span<Node* const>(&node, 1)); }

void Graph::erase_nodes(std::span<Node* const> doomed) {
  if (doomed.empty()) return;
  // Flat by Node::id (a node of another graph is refused before its id is used).
  std::vector<char> set(next_node_id_, 0);
  std::size_t distinct = 0;
  for (const Node* n : doomed) {
    if (n->graph_ != this) throw GraphError(fmt::format("graph '{}': node is not in this graph", name_));
    if (!set[n->id_]) ++distinct;
    set[n->id_] = 1;
  }
  auto is_doomed = [&](const Node* n) { return n->graph_ == this && set[n->id_]; };
  auto still_used = [&](const Value* v) {
    return GraphError(
        fmt::format("graph '{}': cannot erase the node defining %{}: the value is still used", name_, v->name()));
  };
  auto defined_by_doomed = [&](const Value* v) { return v->producer() && is_doomed(v->producer()); };
  std::size_t members = 0;
  for (const Node* n : nodes_) {
    if (is_doomed(n)) {
      ++members;
      continue;
    }
    n->for_each_input([&](const Value* v) {
      if (defined_by_doomed(v)) throw still_used(v);
    });
  }
  if (members != distinct) throw GraphError(fmt::format("graph '{}': node is not in this graph", name_));
  for (const Value* v : outputs_)
    if (defined_by_doomed(v)) throw still_used(v);
  for (const Node* node : doomed)
    for (const Value* out : node->outputs()) names().values.erase(std::string_view(out->name()));
  std::erase_if(nodes_, [&](Node* n) {
    if (!is_doomed(n)) return false;
    delete n;
    return true;
  });
}

void Graph::move_node(Node* node, Node* before) {
  if (node == before) return;
  std::size_t pos = index_of(node);
  if (before) (void)index_of(before);  // refused before the node leaves its place
  std::unique_ptr<Node> owned(nodes_[pos]);
  nodes_.erase(nodes_.begin() + static_cast<std::ptrdiff_t>(pos));
  insert_node(std::move(owned), before);
}

void Graph::reorder_nodes(std::span<Node* const> order) {
  if (order.size() != nodes_.size())
    throw GraphError(fmt::format("graph '{}': a new order of {} nodes for {}", name_, order.size(), nodes_.size()));
  std::vector<char> placed(next_node_id_, 0);
  for (const Node* n : order) {
    if (!n || n->graph_ != this || placed[n->id_])
      throw GraphError(fmt::format("graph '{}': the new order is not a permutation of its nodes", name_));
    n->for_each_input([&](const Value* v) {
      if (v->producer_ && !placed[v->producer_->id_])
        throw GraphError(
            fmt::format("graph '{}': the new order puts {} before the producer of %{}", name_, n->label(), v->name()));
    });
    placed[n->id_] = 1;
  }
  nodes_.assign(order.begin(), order.end());
}

void Graph::set_outputs(std::vector<Value*> outputs) {
  for (Value* v : outputs)
    if (!v || v->graph() != this)
      throw GraphError(fmt::format("graph '{}': an output is not a value of this graph", name_));
  outputs_ = std::move(outputs);
}

void Graph::replace_all_uses(Value* from, Value* to) {
  for (Node* n : nodes_)
    for (Argument& arg : n->args_) arg.replace_value(from, to);
  std::replace(outputs_.begin(), outputs_.end(), from, to);
}

std::map<const Value*, std::vector<Node*>> Graph::compute_uses() const {
  std::map<const Value*, std::vector<Node*>> uses;
  for (Node* n : nodes_) {
    std::vector<Value*> read = n->inputs();
    std::sort(read.begin(), read.end());
    read.erase(std::unique(read.begin(), read.end()), read.end());
    for (Value* v : read) uses[v].push_back(n);
  }
  return uses;
}

Value* Graph::find_value(std::string_view name) const {
  if (!names_) return nullptr;
  auto it = names_->values.find(name);
  return it == names_->values.end() ? nullptr : it->second;
}

// The first name of the hint's sequence (hint, hint_1, hint_2...; an empty hint is "v") that
// `take` accepts, written into `out`. No formatting library: every recorded node asks for one.
template <class Take>
void Graph::fresh_name_into(std::string& out, std::string_view hint, Take&& take) {
  if (hint.empty()) hint = "v";
  std::size_t& next = names().counters[hint];
  do {
    out.clear();  // then appended to: cheaper than assign's general replace, for every value
    out.append(hint);
    if (next != 0) {
      char digits[24];
      const auto end = std::to_chars(digits, digits + sizeof digits, next).ptr;
      out.push_back('_');
      out.append(digits, end);
    }
    ++next;
  } while (!take(std::string_view(out)));
}

std::string Graph::fresh_name(std::string_view hint) {
  std::string name;
  fresh_name_into(name, hint, [&](std::string_view candidate) { return !names().values.contains(candidate); });
  return name;
}

void Graph::rename(Value* value, std::string name) {
  if (value->name_ == name) return;
  auto& values = names().values;
  if (values.contains(std::string_view(name)))
    throw GraphError(fmt::format("graph '{}': cannot rename to %{}: name taken", name_, name));
  values.erase(std::string_view(value->name_));
  value->name_ = std::move(name);
  values.emplace(value->name_, value);
}

std::string Graph::to_string() const { return print_graph(*this); }

std::ostream& operator<<(std::ostream& os, const Graph& graph) { return os << graph.to_string(); }

}  // namespace aotpipe

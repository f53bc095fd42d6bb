#include <aotpipe/graph/autocast_region.h>
#include <aotpipe/graph/interpreter.h>
#include <aotpipe/graph/memory_plan.h>
#include <aotpipe/graph/kernel_arguments.h>
#include <aotpipe/graph/op_properties.h>

#include <ATen/core/Tensor.h>
#include <ATen/core/stack.h>
#include <fmt/format.h>

#include <unordered_map>

namespace aotpipe {

namespace {
constexpr int kNoSlot = -1;

struct SlotRead {
  int slot = kNoSlot;  // kNoSlot: None (in a Tensor?[] list)
  bool move = false;   // last read of the slot: hand the value over
};

struct ArgSource {
  enum class Kind { Slot, Constant, TensorList, OptionalTensorList } kind = Kind::Constant;
  SlotRead read;
  c10::IValue constant;
  std::vector<SlotRead> list;
};

struct Instruction {
  c10::OperatorHandle op;
  std::vector<ArgSource> args;
  std::vector<int> outputs;  // kNoSlot: nobody reads the value, drop it at once
  bool list_return = false;
  std::string label;                                // "%mul = aten::mul.Tensor" for error messages
  std::vector<std::optional<TensorMeta>> declared;  // filled only with InterpreterOptions::check_meta
  std::optional<AutocastRegion> autocast;           // the node ran under torch.autocast in the program
  // InterpreterOptions::reinplace: the in-place twin, and the result's layout self must have.
  std::optional<c10::OperatorHandle> inplace;
  std::optional<TensorMeta> inplace_layout;
  std::size_t inplace_arg = 0;  // the argument written: self, or `other` of a commutative op
};
}  // namespace

struct Interpreter::Program {
  std::string graph_name;
  std::size_t num_slots = 0;
  std::vector<int> input_slots;  // kNoSlot: unused input, released on entry
  std::vector<std::pair<int, at::Tensor>> constants;
  std::vector<Instruction> instructions;
  std::vector<SlotRead> outputs;
  std::size_t num_reinplaceable = 0;
};

namespace {
bool is_optional_tensor_list(const c10::TypePtr& type) {
  c10::TypePtr t =
      type->kind() == c10::TypeKind::OptionalType ? type->expectRef<c10::OptionalType>().getElementType() : type;
  if (t->kind() != c10::TypeKind::ListType) return false;
  return t->expectRef<c10::ListType>().getElementType()->kind() == c10::TypeKind::OptionalType;
}

// Where the static conditions of re-inplacing hold for `node` (reinplace_candidates), the first
// candidate read here for the last time.
void plan_reinplace(Instruction& instr, const Node& node) {
  // Under autocast a functional op may cast its arguments where its in-place twin would not.
  if (instr.autocast) return;
  for (std::size_t k : reinplace_candidates(node)) {
    if (instr.args[k].kind != ArgSource::Kind::Slot || !instr.args[k].read.move) continue;
    instr.inplace_arg = k;
    instr.inplace = pointwise_inplace_variant(node.op());
    instr.inplace_layout = *node.output()->meta();
    return;
  }
}

// The run-time half: nothing but the stack holds the tensor or shares its storage.
bool may_write_in_place(const Instruction& instr, const c10::IValue& self) {
  if (!self.isTensor()) return false;
  const at::Tensor& t = self.toTensor();
  if (!t.defined() || t.use_count() != 1 || !t.has_storage() || t.storage().use_count() != 1 || t.requires_grad())
    return false;
  const TensorMeta& want = *instr.inplace_layout;
  return t.scalar_type() == want.dtype && t.sizes() == c10::IntArrayRef(want.sizes) &&
         t.strides() == c10::IntArrayRef(want.strides) && t.storage_offset() == want.storage_offset;
}

}  // namespace

Interpreter::Interpreter(const Graph& graph, InterpreterOptions options) {
  auto program = std::make_shared<Program>();
  program->graph_name = graph.name();
  // Flat tables by Value::id (a value of another graph is refused by `id_of`).
  const std::size_t num_ids = graph.value_id_limit();
  auto id_of = [&](const Value* v) -> std::size_t {
    if (v->graph() != &graph || v->id() >= num_ids)
      throw GraphError(
          fmt::format("interpreter: graph '{}' reads %{}, a value of another graph", graph.name(), v->name()));
    return v->id();
  };
  std::vector<int> slot_of(num_ids, -1);
  auto assign = [&](const Value* v) { return slot_of[id_of(v)] = static_cast<int>(program->num_slots++); };

  // Last reader of every value: (instruction index, position of the read inside it).
  // Graph outputs are read "after" every instruction.
  using Position = std::pair<std::size_t, std::size_t>;
  constexpr Position kUnread{static_cast<std::size_t>(-1), static_cast<std::size_t>(-1)};
  std::vector<Position> last_read(num_ids, kUnread);
  auto is_read = [&](const Value* v) { return last_read[id_of(v)] != kUnread; };
  const auto nodes = graph.nodes();
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    std::size_t k = 0;
    nodes[i]->for_each_input([&](const Value* v) { last_read[id_of(v)] = {i, k++}; });
  }
  for (std::size_t k = 0; k < graph.num_outputs(); ++k) last_read[id_of(graph.outputs()[k])] = {nodes.size(), k};

  for (Value* in : graph.inputs()) program->input_slots.push_back(is_read(in) ? assign(in) : kNoSlot);

  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const Node& node = *nodes[i];
    if (!node.is_call()) {
      auto it = graph.tensor_constants().find(node.constant_name());
      if (it == graph.tensor_constants().end())
        throw GraphError(fmt::format("interpreter: graph '{}': constant \"{}\" (%{}) has no tensor bound", graph.name(),
                                     node.constant_name(), node.output()->name()));
      program->constants.emplace_back(assign(node.output()), it->second);
      continue;
    }
    Instruction instr{node.op(), {}, {}, false, node.label(), {}, AutocastRegion::of(node), {}, {}, 0};
    std::size_t k = 0;
    auto read = [&](const Value* v) {
      const std::size_t id = id_of(v);
      if (slot_of[id] < 0)
        throw GraphError(fmt::format("interpreter: graph '{}': {} reads %{} before its definition", graph.name(),
                                     instr.label, v->name()));
      return SlotRead{slot_of[id], last_read[id] == Position{i, k++}};
    };
    const auto& formals = node.schema().arguments();
    for (std::size_t a = 0; a < node.args().size(); ++a) {
      const Argument& arg = node.args()[a];
      ArgSource src;
      if (arg.is_value()) {
        src.kind = ArgSource::Kind::Slot;
        src.read = read(arg.value());
      } else if (arg.is_constant()) {
        src.constant = kernel_constant(arg.constant(), a < formals.size() ? &formals[a] : nullptr);
      } else {
        src.kind = a < formals.size() && is_optional_tensor_list(formals[a].type())
                       ? ArgSource::Kind::OptionalTensorList
                       : ArgSource::Kind::TensorList;
        for (Value* v : arg.value_list().values) src.list.push_back(v ? read(v) : SlotRead{});
      }
      instr.args.push_back(std::move(src));
    }
    if (options.reinplace) plan_reinplace(instr, node);
    if (instr.inplace) ++program->num_reinplaceable;
    const auto& returns = node.schema().returns();
    instr.list_return = returns.size() == 1 && returns[0].type()->kind() == c10::TypeKind::ListType;
    for (Value* out : node.outputs()) {
      instr.outputs.push_back(is_read(out) ? assign(out) : kNoSlot);
      if (options.check_meta) instr.declared.push_back(out->meta() ? std::optional(*out->meta()) : std::nullopt);
    }
    program->instructions.push_back(std::move(instr));
  }
  for (std::size_t k = 0; k < graph.num_outputs(); ++k) {
    const Value* v = graph.outputs()[k];
    const std::size_t id = id_of(v);
    if (slot_of[id] < 0)
      throw GraphError(
          fmt::format("interpreter: graph '{}': output {} (%{}) is not defined", graph.name(), k, v->name()));
    program->outputs.push_back({slot_of[id], last_read[id] == Position{nodes.size(), k}});
  }
  program_ = std::move(program);
}

Interpreter::~Interpreter() = default;
Interpreter::Interpreter(Interpreter&&) noexcept = default;
Interpreter& Interpreter::operator=(Interpreter&&) noexcept = default;

std::size_t Interpreter::num_slots() const { return program_->num_slots; }
std::size_t Interpreter::num_reinplaceable() const { return program_->num_reinplaceable; }

namespace {
c10::IValue take(std::vector<c10::IValue>& slots, const SlotRead& r) {
  return r.move ? std::move(slots[static_cast<std::size_t>(r.slot)]) : slots[static_cast<std::size_t>(r.slot)];
}

// Sizes, strides and dtype (not requires_grad or device: the graph may run elsewhere).
void check_meta(const Instruction& instr, std::size_t k, const c10::IValue& produced, const std::string& graph_name) {
  if (instr.declared.empty() || !instr.declared[k] || !produced.isTensor()) return;
  const TensorMeta& want = *instr.declared[k];
  TensorMeta got = TensorMeta::of(produced.toTensor());
  got.requires_grad = want.requires_grad;
  got.device = want.device;
  if (got.sizes != want.sizes || got.strides != want.strides || got.dtype != want.dtype ||
      got.storage_offset != want.storage_offset) {
    std::string label = instr.label;
    if (k > 0) label = fmt::format("output {} of {}", k, instr.label);
    throw GraphError(fmt::format("interpreter: graph '{}': {} produced {}, declared {}", graph_name, label,
                                 to_string(got), to_string(want)));
  }
}

c10::IValue build_list(std::vector<c10::IValue>& slots, const ArgSource& src) {
  if (src.kind == ArgSource::Kind::TensorList) {
    c10::List<at::Tensor> list;
    list.reserve(src.list.size());
    for (const SlotRead& r : src.list) list.push_back(take(slots, r).toTensor());
    return list;
  }
  c10::List<std::optional<at::Tensor>> list;
  list.reserve(src.list.size());
  for (const SlotRead& r : src.list) {
    if (r.slot == kNoSlot)
      list.push_back(std::nullopt);
    else
      list.push_back(take(slots, r).toTensor());
  }
  return list;
}
}  // namespace

std::vector<c10::IValue> Interpreter::run_boxed(std::vector<c10::IValue> inputs) const {
  const Program& p = *program_;
  if (inputs.size() != p.input_slots.size())
    throw GraphError(fmt::format("interpreter: graph '{}' takes {} inputs, got {}", p.graph_name, p.input_slots.size(),
                                 inputs.size()));
  std::vector<c10::IValue> slots(p.num_slots);
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (p.input_slots[i] != kNoSlot) slots[static_cast<std::size_t>(p.input_slots[i])] = std::move(inputs[i]);
  }
  inputs.clear();  // inputs nobody reads are released here
  for (const auto& [slot, tensor] : p.constants) slots[static_cast<std::size_t>(slot)] = tensor;

  torch::jit::Stack stack;
  for (const Instruction& instr : p.instructions) {
    stack.clear();
    stack.reserve(instr.args.size());
    for (const ArgSource& src : instr.args) {
      switch (src.kind) {
        case ArgSource::Kind::Slot: stack.push_back(take(slots, src.read)); break;
        case ArgSource::Kind::Constant: stack.push_back(src.constant); break;
        default: stack.push_back(build_list(slots, src));
      }
    }
    try {
      std::optional<AutocastGuard> autocast;
      if (instr.autocast) autocast.emplace(*instr.autocast);
      const bool in_place = instr.inplace && may_write_in_place(instr, stack[instr.inplace_arg]);
      if (in_place && instr.inplace_arg != 0) std::swap(stack[0], stack[instr.inplace_arg]);
      (in_place ? *instr.inplace : instr.op).callBoxed(stack);
    } catch (const std::exception& e) {
      throw GraphError(fmt::format("interpreter: graph '{}': {} failed: {}", p.graph_name, instr.label, e.what()));
    }
    if (instr.list_return) {
      auto results = stack.at(0).toTensorVector();
      if (results.size() != instr.outputs.size())
        throw GraphError(fmt::format("interpreter: graph '{}': {} returned {} tensors, the graph expects {}",
                                     p.graph_name, instr.label, results.size(), instr.outputs.size()));
      for (std::size_t k = 0; k < results.size(); ++k) {
        check_meta(instr, k, results[k], p.graph_name);
        if (instr.outputs[k] != kNoSlot) slots[static_cast<std::size_t>(instr.outputs[k])] = std::move(results[k]);
      }
    } else {
      for (std::size_t k = 0; k < instr.outputs.size(); ++k) {
        check_meta(instr, k, stack[k], p.graph_name);
        if (instr.outputs[k] != kNoSlot) slots[static_cast<std::size_t>(instr.outputs[k])] = std::move(stack[k]);
      }
    }
  }
  std::vector<c10::IValue> outputs;
  outputs.reserve(p.outputs.size());
  for (const SlotRead& r : p.outputs) outputs.push_back(take(slots, r));
  return outputs;
}

std::vector<at::Tensor> Interpreter::run(std::vector<at::Tensor> inputs) const {
  std::vector<c10::IValue> boxed;
  boxed.reserve(inputs.size());
  for (at::Tensor& t : inputs) boxed.emplace_back(std::move(t));
  inputs.clear();
  std::vector<c10::IValue> results = run_boxed(std::move(boxed));
  std::vector<at::Tensor> tensors;
  tensors.reserve(results.size());
  for (std::size_t k = 0; k < results.size(); ++k) {
    if (!results[k].isTensor())
      throw GraphError(fmt::format("interpreter: graph '{}': output {} is a {}, not a tensor (use run_boxed)",
                                   program_->graph_name, k, results[k].tagKind()));
    tensors.push_back(std::move(results[k]).toTensor());
  }
  return tensors;
}

}  // namespace aotpipe

#include <aotpipe/graph/autocast_region.h>
#include <aotpipe/graph/constant_folding.h>
#include <aotpipe/graph/grad_mode_region.h>
#include <aotpipe/graph/interpreter.h>
#include <aotpipe/graph/memory_plan.h>
#include <aotpipe/graph/run_arena.h>
#include <aotpipe/graph/kernel_arguments.h>
#include <aotpipe/graph/op_properties.h>

#include <ATen/core/Tensor.h>
#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/core/grad_mode.h>
#include <ATen/core/stack.h>
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <memory>
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
  std::optional<bool> grad_region;                  // the node ran under no_grad (or enable_grad in it)
  // InterpreterOptions::reinplace: the in-place twin, and the result's layout self must have.
  std::optional<c10::OperatorHandle> inplace;
  std::optional<TensorMeta> inplace_layout;
  std::size_t inplace_arg = 0;  // the argument written: self, or `other` of a commutative op
  // InterpreterOptions::plan_memory: the out= overload, and where in the arena its result goes.
  std::optional<c10::OperatorHandle> out_op;
  struct PlacedResult {
    TensorMeta meta;
    int64_t element_offset = 0;  // in elements of meta.dtype
  };
  std::optional<PlacedResult> out_result;
  // Every result is memory of its own by the schemas (memory_root), as the plan assumes: a kernel
  // that returns a view of the arena instead would let the plan reuse bytes the view still reads.
  bool fresh_results = false;
  // A result it reads exists only under grad mode (result_needs_grad_mode): run with grad mode on,
  // below autograd.
  bool grad_mode = false;
};

// The process-wide counts of InterpreterCounters.
struct Counters {
  std::atomic<std::uint64_t> planned_runs{0};
  std::atomic<std::uint64_t> unplanned_runs{0};
  std::atomic<std::uint64_t> out_calls_refused{0};
  std::atomic<std::uint64_t> out_calls_out_of_memory{0};
  std::atomic<std::uint64_t> folded_calls{0};
};
Counters& counters() {
  static Counters c;
  return c;
}
}  // namespace

struct Interpreter::Program {
  std::string graph_name;
  std::size_t num_slots = 0;
  std::vector<int> input_slots;  // kNoSlot: unused input, released on entry
  std::vector<std::pair<int, at::Tensor>> constants;
  std::vector<Instruction> instructions;
  std::vector<SlotRead> outputs;
  std::size_t num_reinplaceable = 0;
  // InterpreterOptions::plan_memory (arena_bytes 0: no call writes into an arena).
  std::size_t arena_bytes = 0;
  c10::Device arena_device{c10::kCPU};
  std::size_t num_planned_calls = 0;
  std::vector<std::optional<TensorMeta>> input_metas;  // what a planned run's inputs must match
  // InterpreterOptions::fold_constants: the calls computed once, at the first run, and the slots
  // of their results that the other instructions read, kept from then on as constants are.
  std::vector<Instruction> fold_instructions;
  std::vector<int> folded_slots;
  mutable std::once_flag fold_once;
  mutable std::vector<std::pair<int, c10::IValue>> folded;
  // Per instruction: its out kernel refused once (an op whose out= form takes fewer cases than its
  // functional one); it runs the functional op from then on.
  std::unique_ptr<std::atomic<bool>[]> out_refused;
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

// Dtype, sizes and strides as declared (the storage offset is the caller's question).
bool same_layout(const at::Tensor& t, const TensorMeta& meta) {
  return t.scalar_type() == meta.dtype && t.sizes() == c10::IntArrayRef(meta.sizes) &&
         t.strides() == c10::IntArrayRef(meta.strides);
}

// The run-time half: nothing but the stack holds the tensor or shares its storage.
bool may_write_in_place(const Instruction& instr, const c10::IValue& self) {
  if (!self.isTensor()) return false;
  const at::Tensor& t = self.toTensor();
  if (!t.defined() || t.use_count() != 1 || !t.has_storage() || t.storage().use_count() != 1 || t.requires_grad())
    return false;
  return same_layout(t, *instr.inplace_layout) && t.storage_offset() == instr.inplace_layout->storage_offset;
}

// The device whose arena a graph's planned calls write into: a GPU's where a call result is on
// one (a CUDA graph may begin with an op on a 0-dim CPU scalar, which stays on the CPU), else the
// first call result's when it is the CPU (the fresh results of calls elsewhere are left to their
// kernels).
std::optional<c10::Device> arena_device_of(const Graph& graph) {
  std::optional<c10::Device> first;
  for (const Node* node : graph.nodes()) {
    if (!node->is_call()) continue;
    for (const Value* out : node->outputs()) {
      if (!out->meta()) continue;
      const c10::Device d = out->meta()->device;
      if (d.is_cuda()) return d;
      if (!first) first = d;
    }
  }
  if (first && first->is_cpu()) return first;
  return std::nullopt;
}

// Whether `op` sees where a tensor starts in its storage: it takes a storage offset (as_strided,
// as_strided_scatter, set_) or returns one.
bool reads_storage_offset(const c10::OperatorHandle& op) {
  if (op.operator_name().name == "aten::sym_storage_offset") return true;
  for (const c10::Argument& a : op.schema().arguments())
    if (a.name() == "storage_offset") return true;
  return false;
}

// The calls that may write into the arena, with their out= overloads: outside autocast (an
// out= op is not cast as its functional twin is), every result a dense tensor of known layout on
// the arena's device.
std::unordered_map<const Node*, c10::OperatorHandle> out_calls_of(const Graph& graph, c10::Device device) {
  std::unordered_map<const Node*, c10::OperatorHandle> calls;
  for (const Node* node : graph.nodes()) {
    if (!node->is_call() || AutocastRegion::of(*node) || grad_mode_region_of(*node)) continue;
    bool fits = true;
    for (const Value* out : node->outputs())
      fits = fits && out->meta() && out->meta()->device == device && !c10::isQIntType(out->meta()->dtype);
    if (!fits) continue;
    const c10::DispatchKey backend = c10::computeDispatchKey(node->output()->meta()->dtype, c10::kStrided, device);
    if (auto out = out_variant(node->op(), backend)) calls.emplace(node, *out);
  }
  // A tensor in the arena starts at an offset in it: memory that an op reads by its storage offset
  // (as_strided's, sym_storage_offset) stays the kernel's.
  for (const Node* node : graph.nodes()) {
    if (!node->is_call() || !reads_storage_offset(node->op())) continue;
    node->for_each_input([&](const Value* v) {
      if (const Value* owner = allocation_of(*v)) calls.erase(owner->producer());
    });
  }
  return calls;
}

// Makes `instr` write its result through `out_op` into the arena, where the plan placed it.
void attach_out_call(Instruction& instr, const Node& node, const c10::OperatorHandle& out_op,
                     const PlannedTensor& placed) {
  const TensorMeta& meta = *node.output()->meta();
  const auto element = static_cast<std::size_t>(c10::elementSize(meta.dtype));
  instr.out_op = out_op;
  instr.out_result = {meta, static_cast<int64_t>(placed.offset / element) + meta.storage_offset};
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

  const std::vector<bool> folded = options.fold_constants ? foldable_calls(graph) : std::vector<bool>{};
  auto is_folded = [&](std::size_t i) { return !folded.empty() && folded[i]; };
  std::vector<bool> read_by_run(num_ids, false);  // by slot: a value the instructions run every time read

  std::unordered_map<const Node*, c10::OperatorHandle> out_calls;
  std::vector<const PlannedTensor*> planned_of(num_ids, nullptr);
  MemoryPlan plan;
  const std::optional<c10::Device> arena_device = options.plan_memory ? arena_device_of(graph) : std::nullopt;
  if (arena_device) {
    out_calls = out_calls_of(graph, *arena_device);
    for (std::size_t i = 0; i < nodes.size(); ++i)
      if (is_folded(i)) out_calls.erase(nodes[i]);  // computed once: kept, not placed
    plan = plan_memory(graph, [&](const Node& node) { return out_calls.count(&node) > 0; });
    // The checker costs little beside the plan, and a wrong plan would corrupt values silently.
    if (auto overlap = plan_overlap(plan))
      throw GraphError(fmt::format("interpreter: graph '{}': unsound memory plan: {}", graph.name(), *overlap));
    for (const PlannedTensor& t : plan.tensors) planned_of[id_of(t.value)] = &t;
    program->arena_device = *arena_device;
    for (const Value* in : graph.inputs())
      program->input_metas.push_back(in->meta() ? std::optional(*in->meta()) : std::nullopt);
  }

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
    Instruction instr{
        node.op(), {}, {}, false, node.label(), {}, AutocastRegion::of(node), grad_mode_region_of(node), {},
        {},        0,  {}, {}};
    std::size_t k = 0;
    auto read = [&](const Value* v) {
      const std::size_t id = id_of(v);
      if (slot_of[id] < 0)
        throw GraphError(fmt::format("interpreter: graph '{}': {} reads %{} before its definition", graph.name(),
                                     instr.label, v->name()));
      const int slot = slot_of[id];
      const bool last = last_read[id] == Position{i, k++};
      if (!is_folded(i)) read_by_run[static_cast<std::size_t>(slot)] = true;
      // A folded call never takes a value the other instructions still read (it runs once).
      return SlotRead{slot, last && !(is_folded(i) && read_by_run[static_cast<std::size_t>(slot)])};
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
    if (arena_device)  // only a run on the arena checks it
      instr.fresh_results = std::all_of(node.outputs().begin(), node.outputs().end(),
                                        [](const Value* out) { return memory_root(*out) == out; });
    if (instr.inplace) ++program->num_reinplaceable;
    if (auto it = out_calls.find(&node); it != out_calls.end() && planned_of[id_of(node.output())]) {
      attach_out_call(instr, node, it->second, *planned_of[id_of(node.output())]);
      ++program->num_planned_calls;
    }
    const auto& returns = node.schema().returns();
    instr.list_return = returns.size() == 1 && returns[0].type()->kind() == c10::TypeKind::ListType;
    for (Value* out : node.outputs()) {
      instr.grad_mode = instr.grad_mode || (is_read(out) && result_needs_grad_mode(node.op(), instr.outputs.size()));
      instr.outputs.push_back(is_read(out) ? assign(out) : kNoSlot);
      if (options.check_meta) instr.declared.push_back(out->meta() ? std::optional(*out->meta()) : std::nullopt);
    }
    (is_folded(i) ? program->fold_instructions : program->instructions).push_back(std::move(instr));
  }
  for (std::size_t k = 0; k < graph.num_outputs(); ++k) {
    const Value* v = graph.outputs()[k];
    const std::size_t id = id_of(v);
    if (slot_of[id] < 0)
      throw GraphError(
          fmt::format("interpreter: graph '{}': output {} (%{}) is not defined", graph.name(), k, v->name()));
    program->outputs.push_back({slot_of[id], last_read[id] == Position{nodes.size(), k}});
    read_by_run[static_cast<std::size_t>(slot_of[id])] = true;
  }
  for (const Instruction& instr : program->fold_instructions)
    for (int slot : instr.outputs)
      if (slot != kNoSlot && read_by_run[static_cast<std::size_t>(slot)]) program->folded_slots.push_back(slot);
  if (program->num_planned_calls > 0) {
    program->arena_bytes = plan.arena_bytes;
    program->out_refused = std::make_unique<std::atomic<bool>[]>(program->instructions.size());
  }
  program_ = std::move(program);
}

Interpreter::~Interpreter() = default;
Interpreter::Interpreter(Interpreter&&) noexcept = default;
Interpreter& Interpreter::operator=(Interpreter&&) noexcept = default;

std::size_t Interpreter::num_slots() const { return program_->num_slots; }
std::size_t Interpreter::num_reinplaceable() const { return program_->num_reinplaceable; }
std::size_t Interpreter::num_planned_calls() const { return program_->num_planned_calls; }
std::size_t Interpreter::num_folded_calls() const { return program_->fold_instructions.size(); }
std::size_t Interpreter::arena_bytes() const { return program_->arena_bytes; }

InterpreterCounters interpreter_counters() {
  const Counters& c = counters();
  return {.planned_runs = c.planned_runs.load(),
          .unplanned_runs = c.unplanned_runs.load(),
          .out_calls_refused = c.out_calls_refused.load(),
          .folded_calls = c.folded_calls.load(),
          .out_calls_out_of_memory = c.out_calls_out_of_memory.load()};
}

namespace {
c10::IValue take(std::vector<c10::IValue>& slots, const SlotRead& r) {
  return r.move ? std::move(slots[static_cast<std::size_t>(r.slot)]) : slots[static_cast<std::size_t>(r.slot)];
}

// Sizes, strides and dtype (not requires_grad or device: the graph may run elsewhere), and the
// storage offset, except in the arena, where every tensor starts where the plan put it.
void check_meta(const Instruction& instr, std::size_t k, const c10::IValue& produced, const c10::Storage& arena,
                const std::string& graph_name) {
  if (instr.declared.empty() || !instr.declared[k] || !produced.isTensor()) return;
  // A result made only under grad mode (a workspace), where the run needs none: nobody reads it.
  if (!produced.toTensor().defined() && instr.outputs[k] == kNoSlot) return;
  const TensorMeta& want = *instr.declared[k];
  TensorMeta got = TensorMeta::of(produced.toTensor());
  got.requires_grad = want.requires_grad;
  got.device = want.device;
  if (arena && produced.toTensor().has_storage() && produced.toTensor().storage().is_alias_of(arena))
    got.storage_offset = want.storage_offset;
  if (got.sizes != want.sizes || got.strides != want.strides || got.dtype != want.dtype ||
      got.storage_offset != want.storage_offset) {
    std::string label = instr.label;
    if (k > 0) label = fmt::format("output {} of {}", k, instr.label);
    throw GraphError(fmt::format("interpreter: graph '{}': {} produced {}, declared {}", graph_name, label,
                                 to_string(got), to_string(want)));
  }
}

// Whether a run may use the memory plan: every input has the layout the plan was made for, on its
// device, and no out= kernel would be asked to record autograd history (they refuse arguments
// that require grad while grad mode is on).
bool inputs_fit_plan(const std::vector<std::optional<TensorMeta>>& metas, const std::vector<c10::IValue>& inputs) {
  const bool grad_mode = at::GradMode::is_enabled();
  for (std::size_t k = 0; k < metas.size() && k < inputs.size(); ++k) {
    if (!metas[k]) continue;
    if (!inputs[k].isTensor()) return false;
    const at::Tensor& t = inputs[k].toTensor();
    if (!t.defined() || t.device() != metas[k]->device || !same_layout(t, *metas[k]) ||
        (grad_mode && t.requires_grad()))
      return false;
  }
  return true;
}

enum class OutCall {
  Written,      // the result is in the arena
  Refused,      // the kernel takes fewer cases than its functional op: never ask it again
  OutOfMemory,  // it found no memory for a workspace: a lack of the moment, not of the kernel
};

// Runs `instr`'s out= kernel on the arguments in `stack`, writing its result where the plan put
// it. Where it fails, the stack is as it was.
OutCall run_out_call(const Instruction& instr, const c10::Storage& arena, torch::jit::Stack& stack,
                     const std::string& graph_name) {
  torch::jit::Stack arguments = stack;
  stack.push_back(arena_tensor(arena, instr.out_result->meta, instr.out_result->element_offset));
  try {
    instr.out_op->callBoxed(stack);
  } catch (const c10::OutOfMemoryError&) {
    stack = std::move(arguments);
    return OutCall::OutOfMemory;
  } catch (const std::exception&) {
    stack = std::move(arguments);
    return OutCall::Refused;
  }
  // A kernel that resized its result (metadata that did not match the kernel) may have written
  // over another planned tensor: fail loudly rather than return what it computed.
  const at::Tensor& t = stack.at(0).toTensor();
  if (!same_layout(t, instr.out_result->meta) || !t.storage().is_alias_of(arena))
    throw GraphError(fmt::format("interpreter: graph '{}': {} (out= kernel {}) resized its planned result {} to {}",
                                 graph_name, instr.label, c10::toString(instr.out_op->operator_name()),
                                 to_string(instr.out_result->meta), to_string(TensorMeta::of(t))));
  return OutCall::Written;
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
// What a run's instructions share: its value table and stack, its arena (none: no out= call).
struct RunContext {
  std::vector<c10::IValue>& slots;
  torch::jit::Stack& stack;
  const c10::Storage& arena;
  const std::string& graph_name;
};

// A result the schema calls fresh that the kernel made a view of planned memory: the plan would
// hand those bytes to another tensor while the view still reads them, and every value after it
// would be wrong without a word. Such an op belongs in returns_hidden_view.
void check_outside_arena(const Instruction& instr, std::size_t k, const c10::IValue& produced, const RunContext& run) {
  if (!produced.isTensor() || !produced.toTensor().has_storage() ||
      !produced.toTensor().storage().is_alias_of(run.arena))
    return;
  throw GraphError(
      fmt::format("interpreter: graph '{}': output {} of {} is a view of planned memory, where its schema "
                  "declares a fresh tensor (the memory plan would reuse those bytes while it lives)",
                  run.graph_name, k, instr.label));
}

// Runs one instruction: its arguments from the slots, its results into them. `out_refused`: the
// instruction's flag that its out= kernel refused once (null: never try it).
void execute(const Instruction& instr, std::atomic<bool>* out_refused, RunContext& run) {
  std::vector<c10::IValue>& slots = run.slots;
  torch::jit::Stack& stack = run.stack;
  stack.clear();
  stack.reserve(instr.args.size());
  for (const ArgSource& src : instr.args) {
    switch (src.kind) {
      case ArgSource::Kind::Slot: stack.push_back(take(slots, src.read)); break;
      case ArgSource::Kind::Constant: stack.push_back(src.constant); break;
      default: stack.push_back(build_list(slots, src));
    }
  }
  bool done = false;
  bool in_place = false;
  try {
    std::optional<at::AutoGradMode> region_grad_mode;
    if (instr.grad_region) region_grad_mode.emplace(*instr.grad_region);
    if (run.arena && instr.out_op && out_refused && !out_refused->load(std::memory_order_relaxed)) {
      const OutCall out = run_out_call(instr, run.arena, stack, run.graph_name);
      done = out == OutCall::Written;
      if (out == OutCall::Refused) {
        out_refused->store(true, std::memory_order_relaxed);
        counters().out_calls_refused.fetch_add(1);
      }
      // Out of memory: this call runs its functional op (which raises the error eager would if it
      // finds no memory either); the next run asks the out kernel again.
      if (out == OutCall::OutOfMemory) counters().out_calls_out_of_memory.fetch_add(1);
    }
    if (!done) {
      std::optional<AutocastGuard> autocast;
      if (instr.autocast) autocast.emplace(*instr.autocast);
      std::optional<at::AutoDispatchBelowADInplaceOrView> below_autograd;
      std::optional<at::AutoGradMode> grad_mode;
      if (instr.grad_mode) below_autograd.emplace(), grad_mode.emplace(true);
      in_place = instr.inplace && may_write_in_place(instr, stack[instr.inplace_arg]);
      if (in_place && instr.inplace_arg != 0) std::swap(stack[0], stack[instr.inplace_arg]);
      (in_place ? *instr.inplace : instr.op).callBoxed(stack);
    }
  } catch (const GraphError&) { throw; } catch (c10::OutOfMemoryError& e) {
    // Keeps its type, as eager's does: a caller may catch it, free memory or take a smaller batch.
    e.add_context(fmt::format("interpreter: graph '{}': {} failed", run.graph_name, instr.label));
    throw;
  } catch (const std::exception& e) {
    throw GraphError(fmt::format("interpreter: graph '{}': {} failed: {}", run.graph_name, instr.label, e.what()));
  }
  const bool kernel_allocated = run.arena && !done && !in_place && instr.fresh_results;
  if (instr.list_return) {
    auto results = stack.at(0).toTensorVector();
    if (results.size() != instr.outputs.size())
      throw GraphError(fmt::format("interpreter: graph '{}': {} returned {} tensors, the graph expects {}",
                                   run.graph_name, instr.label, results.size(), instr.outputs.size()));
    for (std::size_t k = 0; k < results.size(); ++k) {
      if (kernel_allocated) check_outside_arena(instr, k, results[k], run);
      check_meta(instr, k, results[k], run.arena, run.graph_name);
      if (instr.outputs[k] != kNoSlot) slots[static_cast<std::size_t>(instr.outputs[k])] = std::move(results[k]);
    }
  } else {
    for (std::size_t k = 0; k < instr.outputs.size(); ++k) {
      if (kernel_allocated) check_outside_arena(instr, k, stack[k], run);
      check_meta(instr, k, stack[k], run.arena, run.graph_name);
      if (instr.outputs[k] != kNoSlot) slots[static_cast<std::size_t>(instr.outputs[k])] = std::move(stack[k]);
    }
  }
}
}  // namespace

std::vector<c10::IValue> Interpreter::run_boxed(std::vector<c10::IValue> inputs) const {
  const Program& p = *program_;
  if (inputs.size() != p.input_slots.size())
    throw GraphError(fmt::format("interpreter: graph '{}' takes {} inputs, got {}", p.graph_name, p.input_slots.size(),
                                 inputs.size()));
  const bool use_arena = p.arena_bytes > 0 && inputs_fit_plan(p.input_metas, inputs);
  if (p.arena_bytes > 0) (use_arena ? counters().planned_runs : counters().unplanned_runs).fetch_add(1);
  std::optional<ArenaLease> lease;
  if (use_arena) lease.emplace(p.arena_bytes, p.arena_device);
  const c10::Storage no_arena;
  const c10::Storage& arena = lease ? lease->storage() : no_arena;
  std::vector<c10::IValue> slots(p.num_slots);
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (p.input_slots[i] != kNoSlot) slots[static_cast<std::size_t>(p.input_slots[i])] = std::move(inputs[i]);
  }
  inputs.clear();  // inputs nobody reads are released here
  for (const auto& [slot, tensor] : p.constants) slots[static_cast<std::size_t>(slot)] = tensor;
  torch::jit::Stack stack;
  if (!p.fold_instructions.empty()) {
    std::call_once(p.fold_once, [&] {
      std::vector<c10::IValue> scratch = slots;  // the constants (and this run's inputs: never read)
      RunContext fold{scratch, stack, no_arena, p.graph_name};
      for (const Instruction& instr : p.fold_instructions) execute(instr, nullptr, fold);
      for (int slot : p.folded_slots) p.folded.emplace_back(slot, std::move(scratch[static_cast<std::size_t>(slot)]));
      counters().folded_calls.fetch_add(p.fold_instructions.size());
    });
    for (const auto& [slot, value] : p.folded) slots[static_cast<std::size_t>(slot)] = value;
  }

  RunContext run{slots, stack, arena, p.graph_name};
  for (std::size_t i = 0; i < p.instructions.size(); ++i)
    execute(p.instructions[i], p.out_refused ? &p.out_refused[i] : nullptr, run);
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

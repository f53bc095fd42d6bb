#include <aotpipe/stages/partition/internal/joint_view.h>

#include <aotpipe/stages/partition/partition_error.h>
#include <aotpipe/stages/partition/op_classes.h>

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>
#include <unordered_set>

namespace aotpipe::partitioners::detail {

std::int64_t value_size(const Value& value) {
  switch (value.type()) {
    case ValueType::Tensor: return value.meta() ? value.meta()->nbytes() : 0;
    case ValueType::Float:
    case ValueType::Scalar: return 4;  // PyTorch: SymFloat
    default: return 1;                 // SymInt, SymBool
  }
}

std::string display_name(const PNode& node) {
  std::string name(node.name);
  if (node.kind == PKind::Tuple) name += "#tuple";
  return name;
}

namespace {

bool is_tuple_op(const Node& node) {
  const auto& returns = node.schema().returns();
  if (returns.size() != 1) return true;
  return returns[0].type()->kind() == c10::TypeKind::ListType;
}

void add_user(PNode& producer, int user) {
  if (std::find(producer.users.begin(), producer.users.end(), user) == producer.users.end())
    producer.users.push_back(user);
}

}  // namespace

JointView build_joint_view(const Graph& graph, std::size_t num_primals, std::size_t num_fwd_outputs) {
  if (num_primals > graph.num_inputs())
    throw std::invalid_argument(fmt::format("partition: num_primals = {} but graph '{}' has {} inputs", num_primals,
                                            graph.name(), graph.num_inputs()));
  if (num_fwd_outputs > graph.num_outputs())
    throw std::invalid_argument(fmt::format("partition: num_fwd_outputs = {} but graph '{}' has {} outputs",
                                            num_fwd_outputs, graph.name(), graph.num_outputs()));
  JointView view;
  view.num_primals = num_primals;
  view.nodes.reserve(graph.num_inputs() + graph.num_nodes() * 2 + 1);
  view.of_value.assign(graph.value_id_limit(), -1);

  // Which values something reads (tuple results nobody reads get no getitem node), by Value::id.
  std::vector<char> read(graph.value_id_limit(), 0);
  for (const Node* n : graph.nodes())
    for (const Argument& arg : n->args()) arg.for_each_value([&](Value* v) { read[v->id()] = 1; });
  for (Value* v : graph.outputs()) read[v->id()] = 1;

  for (std::size_t i = 0; i < graph.num_inputs(); ++i) {
    Value* v = graph.input(i);
    PNode p;
    p.kind = PKind::Placeholder;
    p.name = v->name();
    p.value = v;
    p.is_primal = i < num_primals;
    p.is_tangent = !p.is_primal;
    p.is_tensor = v->is_tensor();
    p.is_sym = !v->is_tensor();
    p.size = value_size(*v);
    view.of_value[v->id()] = static_cast<int>(view.nodes.size());
    if (p.is_primal)
      view.primals.push_back(static_cast<int>(view.nodes.size()));
    else
      view.tangents.push_back(static_cast<int>(view.nodes.size()));
    view.nodes.push_back(std::move(p));
  }

  for (const Node* n : graph.nodes()) {
    auto phase = n->attrs().find("phase");
    const bool fwd_tag = phase != n->attrs().end() && phase->second == "forward";
    const bool bwd_tag = phase != n->attrs().end() && phase->second == "backward";
    const int self = static_cast<int>(view.nodes.size());
    PNode p;
    p.node = n;
    p.tagged_forward = fwd_tag;
    p.tagged_backward = bwd_tag;
    if (!n->is_call()) {
      p.kind = PKind::Constant;
      p.value = n->output();
      p.name = p.value->name();
      p.is_tensor = true;
      p.size = value_size(*p.value);
      view.of_value[p.value->id()] = self;
      view.nodes.push_back(std::move(p));
      continue;
    }
    p.packet = n->schema().operator_name().name;  // "aten::mul" for every overload, viewed in the schema
    p.mutable_op = n->has_side_effects();
    const auto& formals = n->schema().arguments();
    for (std::size_t a = 0; a < n->args().size(); ++a) {
      const Argument& arg = n->args()[a];
      arg.for_each_value([&](Value* v) {
        int producer = view.index_of(v);
        if (std::find(p.inputs.begin(), p.inputs.end(), producer) == p.inputs.end()) p.inputs.push_back(producer);
      });
      if (arg.is_value() && a < formals.size() && !formals[a].kwarg_only())
        p.positional_tensor_args.push_back(view.index_of(arg.value()));
    }
    for (int in : p.inputs) add_user(view.nodes[static_cast<std::size_t>(in)], self);
    if (!is_tuple_op(*n)) {
      p.kind = PKind::Call;
      p.value = n->output();
      p.name = p.value->name();
      p.is_tensor = p.value->is_tensor();
      p.is_sym = !p.is_tensor;
      p.size = value_size(*p.value);
      view.of_value[p.value->id()] = self;
      view.nodes.push_back(std::move(p));
      continue;
    }
    p.kind = PKind::Tuple;
    p.name = n->num_outputs() ? std::string_view(n->output(0)->name()) : std::string_view("node");
    for (Value* out : n->outputs()) p.size += value_size(*out);
    view.nodes.push_back(std::move(p));
    for (Value* out : n->outputs()) {
      if (!read[out->id()]) continue;
      const int item = static_cast<int>(view.nodes.size());
      PNode g;
      g.kind = PKind::GetItem;
      g.node = n;
      g.value = out;
      g.name = out->name();
      g.packet = kGetItem;
      g.inputs = {self};
      g.positional_tensor_args = {self};
      g.tagged_forward = fwd_tag;
      g.tagged_backward = bwd_tag;
      g.is_tensor = out->is_tensor();
      g.is_sym = !g.is_tensor;
      g.size = value_size(*out);
      view.nodes[static_cast<std::size_t>(self)].users.push_back(item);
      view.of_value[out->id()] = item;
      view.nodes.push_back(std::move(g));
    }
  }

  PNode out;
  out.kind = PKind::Output;
  out.name = "output";
  out.packet = "output";
  view.output = static_cast<int>(view.nodes.size());
  for (std::size_t i = 0; i < graph.num_outputs(); ++i) {
    Value* v = graph.outputs()[i];
    int producer = view.index_of(v);
    if (std::find(out.inputs.begin(), out.inputs.end(), producer) == out.inputs.end()) out.inputs.push_back(producer);
    add_user(view.nodes[static_cast<std::size_t>(producer)], view.output);
    (i < num_fwd_outputs ? view.fwd_outputs : view.bwd_outputs).push_back(v);
  }
  view.nodes.push_back(std::move(out));
  return view;
}

NodeInfo classify_nodes(const JointView& view) {
  const std::size_t n = view.nodes.size();
  NodeInfo info;
  info.required_fw.assign(n, 0);
  info.required_bw.assign(n, 0);
  info.tangents_closure.assign(n, 0);
  info.fw_order.assign(n, -1);

  // required_bw_nodes: the tangents (and backward-only mutations) and all their users.
  for (std::size_t i = 0; i < n; ++i) {
    const PNode& p = view.nodes[i];
    if (p.kind == PKind::Output) continue;
    if (p.is_tangent || (p.mutable_op && p.tagged_backward)) info.required_bw[i] = 1;
    if (info.required_bw[i])
      for (int u : p.users)
        if (u != view.output) info.required_bw[static_cast<std::size_t>(u)] = 1;
  }
  info.tangents_closure = info.required_bw;
  for (Value* v : view.bwd_outputs) info.required_bw[static_cast<std::size_t>(view.index_of(v))] = 1;

  // required_fw_nodes: the forward-only graph (inputs: primals; outputs: forward outputs).
  std::vector<char> valid(n, 0);
  for (std::size_t i = 0; i < n; ++i) {
    const PNode& p = view.nodes[i];
    switch (p.kind) {
      case PKind::Placeholder: valid[i] = static_cast<char>(p.is_primal); break;
      case PKind::Constant: valid[i] = 1; break;
      case PKind::Output: break;
      default: {
        if (p.mutable_op && p.tagged_backward) break;  // _must_be_in_backward
        bool ok = true;
        for (int in : p.inputs) ok = ok && valid[static_cast<std::size_t>(in)];
        valid[i] = static_cast<char>(ok);
      }
    }
  }
  std::vector<char> live(n, 0);
  std::vector<int> work;
  for (Value* v : view.fwd_outputs) {
    int p = view.index_of(v);
    if (!valid[static_cast<std::size_t>(p)])
      throw PartitionError(fmt::format("partition: forward output %{} depends on the tangents", v->name()));
    work.push_back(p);
  }
  for (std::size_t i = 0; i < n; ++i)
    if (valid[i] && (view.nodes[i].mutable_op || view.nodes[i].kind == PKind::Placeholder))
      work.push_back(static_cast<int>(i));
  while (!work.empty()) {
    int p = work.back();
    work.pop_back();
    if (live[static_cast<std::size_t>(p)]) continue;
    live[static_cast<std::size_t>(p)] = 1;
    for (int in : view.nodes[static_cast<std::size_t>(p)].inputs) work.push_back(in);
  }
  int order = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (live[i] && valid[i]) {
      info.required_fw[i] = 1;
      info.fw_order[i] = order++;
      info.required_fw_nodes.push_back(static_cast<int>(i));
    }
  }
  info.num_required_bw = static_cast<std::size_t>(std::count(info.required_bw.begin(), info.required_bw.end(), 1));
  return info;
}

}  // namespace aotpipe::partitioners::detail

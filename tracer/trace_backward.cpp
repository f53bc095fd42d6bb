#include <aotpipe/tracer/internal/trace_backward.h>

#include <ATen/core/grad_mode.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/input_buffer.h>
#include <torch/csrc/autograd/variable.h>

#include <queue>
#include <unordered_map>
#include <unordered_set>

namespace aotpipe::detail {
namespace {

using torch::autograd::Edge;
using torch::autograd::InputBuffer;
using torch::autograd::Node;
using torch::autograd::variable_list;

struct Capture {
  uint32_t input_nr;
  std::size_t slot;
};

struct NodeState {
  bool needed = false;  // leads to a captured input: runs
  std::vector<Capture> captures;
  int dependencies = 0;
  std::optional<InputBuffer> buffer;
};

struct BySequenceNr {
  bool operator()(const std::shared_ptr<Node>& a, const std::shared_ptr<Node>& b) const {
    return a->sequence_nr() < b->sequence_nr();
  }
};

}  // namespace

std::vector<at::Tensor> trace_backward(const std::vector<at::Tensor>& outputs, const std::vector<at::Tensor>& inputs,
                                       const std::vector<at::Tensor>& grad_outputs) {
  TORCH_CHECK(outputs.size() == grad_outputs.size(), "trace_backward: ", outputs.size(), " outputs but ",
              grad_outputs.size(), " gradients");
  std::unordered_map<Node*, NodeState> state;
  std::vector<at::Tensor> result(inputs.size());

  // Where each input's gradient arrives (an AccumulateGrad for a leaf): captured, not run.
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const Edge edge = torch::autograd::impl::gradient_edge(inputs[i]);
    TORCH_CHECK(edge.function, "trace_backward: input ", i, " does not require grad");
    state[edge.function.get()].captures.push_back({edge.input_nr, i});
  }

  // Root edges and their gradients, validated as the engine validates grad_outputs.
  torch::autograd::edge_list roots;
  for (const at::Tensor& out : outputs) roots.push_back(torch::autograd::impl::gradient_edge(out));
  variable_list root_grads(grad_outputs.begin(), grad_outputs.end());
  torch::autograd::validate_outputs(roots, root_grads, [](const std::string& msg) { return "trace_backward: " + msg; });

  // needed: post-order over the reachable graph. A node is needed when it has captures' targets
  // below it; a capture-only node (AccumulateGrad) itself is not run.
  std::unordered_set<Node*> visited;
  std::vector<std::pair<Node*, std::size_t>> stack;
  auto leads_to_capture = [&](Node* n) {
    auto it = state.find(n);
    return it != state.end() && (it->second.needed || !it->second.captures.empty());
  };
  for (const Edge& root : roots) {
    if (!root.function || !visited.insert(root.function.get()).second) continue;
    stack.emplace_back(root.function.get(), 0);
    while (!stack.empty()) {
      auto& [node, next] = stack.back();
      if (next < node->next_edges().size()) {
        const Edge& e = node->next_edges()[next++];
        if (e.function && visited.insert(e.function.get()).second) stack.emplace_back(e.function.get(), 0);
        continue;
      }
      for (const Edge& e : node->next_edges())
        if (e.function && leads_to_capture(e.function.get())) state[node].needed = true;
      stack.pop_back();
    }
  }
  // Dependencies among the nodes that take part (needed, or holding captures).
  for (auto& [node, st] : state) {
    if (!st.needed) continue;
    for (const Edge& e : node->next_edges())
      if (e.function && leads_to_capture(e.function.get())) ++state[e.function.get()].dependencies;
  }

  std::priority_queue<std::shared_ptr<Node>, std::vector<std::shared_ptr<Node>>, BySequenceNr> ready;
  // Adds a gradient to the input buffer of the edge's node; null when that node takes no part.
  auto accumulate = [&](const Edge& e, at::Tensor grad) -> NodeState* {
    if (!e.function || !leads_to_capture(e.function.get())) return nullptr;
    NodeState& st = state[e.function.get()];
    if (!st.buffer) st.buffer.emplace(e.function->num_inputs());
    st.buffer->add(e.input_nr, std::move(grad), std::nullopt, std::nullopt, e.function.get());
    return &st;
  };
  // Roots with dependencies wait for them; a root reached twice is queued once it is complete.
  std::unordered_set<Node*> queued_roots;
  for (std::size_t i = 0; i < roots.size(); ++i)
    if (NodeState* st = accumulate(roots[i], root_grads[i]);
        st && st->dependencies == 0 && queued_roots.insert(roots[i].function.get()).second)
      ready.push(roots[i].function);

  at::AutoGradMode no_grad(false);  // create_graph=false
  while (!ready.empty()) {
    std::shared_ptr<Node> fn = ready.top();
    ready.pop();
    NodeState& st = state[fn.get()];
    variable_list grads = std::move(st.buffer->buffer);  // what InputBuffer::variables does (not exported)
    st.buffer.reset();
    for (const auto& hook : fn->tensor_pre_hooks()) grads = (*hook)(grads);
    for (const auto& [_, hook] : fn->retains_grad_hooks()) grads = (*hook)(grads);
    for (const Capture& c : st.captures) result[c.slot] = grads[c.input_nr];
    if (!st.needed) continue;
    for (const auto& hook : fn->pre_hooks()) grads = (*hook)(grads);
    fn->will_release_variables();
    variable_list produced = (*fn)(variable_list(grads));
    fn->release_variables();
    for (const auto& hook : fn->post_hooks()) produced = (*hook)(produced, grads);
    torch::autograd::validate_outputs(fn->next_edges(), produced,
                                      [&](const std::string& msg) { return "Function " + fn->name() + ": " + msg; });
    for (std::size_t k = 0; k < fn->next_edges().size(); ++k) {
      const Edge& e = fn->next_edges()[k];
      if (NodeState* next = accumulate(e, produced[k]); next && --next->dependencies == 0) ready.push(e.function);
    }
  }
  return result;
}

}  // namespace aotpipe::detail

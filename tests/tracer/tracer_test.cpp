// The tracer against eager ATen: each function of a small corpus is traced (fake and real
// mode, with and without functionalization), the graph run in the interpreter and compared
// with calling the function eagerly; joint graphs' gradients are compared with
// torch::autograd::grad; the error cases are asserted with their messages.
#include <aotpipe/graph/example_tensor.h>
#include <aotpipe/graph/interpreter.h>
#include <aotpipe/tracer/tracer.h>
#include <aotpipe/graph/verifier.h>

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/library.h>

#include <atomic>
#include <set>
#include <string>
#include <thread>

#include "test_support.h"

namespace aotpipe {
namespace {

using testing::tensor_lists_close;

// A deep copy that keeps aliasing between the tensors of the list (views of one storage stay
// views of one new storage) and requires_grad.
TensorList clone_inputs(const TensorList& xs) {
  std::map<const c10::StorageImpl*, at::Tensor> bases;
  TensorList out;
  for (const auto& x : xs) {
    auto& base = bases[x.storage().unsafeGetStorageImpl()];
    const auto nbytes = static_cast<int64_t>(x.storage().nbytes());
    if (!base.defined())
      base = at::empty({0}, x.options().dtype(at::kByte)).set_(x.storage(), 0, {nbytes}, {1}).clone();
    at::Tensor y = at::empty({0}, x.options().requires_grad(false))
                       .set_(base.storage(), x.storage_offset(), x.sizes(), x.strides());
    if (x.requires_grad()) y.requires_grad_(true);
    out.push_back(y);
  }
  return out;
}

TensorList detach_all(const TensorList& xs) {
  TensorList out;
  for (const auto& x : xs) out.push_back(x.defined() ? x.detach() : x);
  return out;
}

std::set<std::string> ops_of(const Graph& g) {
  std::set<std::string> ops;
  for (Node* n : g.nodes())
    if (n->is_call()) ops.insert(n->qualified_name());
  return ops;
}

// The verifier's defaults: every input and every read or returned tensor value has TensorMeta
// (an op's unread result may be an undefined tensor, e.g. native_layer_norm_backward's
// unrequested gradients, and needs none).
void verify_traced(const Graph& g) { verify(g); }

bool has_inplace_op(const Graph& g) {
  for (Node* n : g.nodes())
    if (n->is_call() && n->has_side_effects()) return true;
  return false;
}

// Runs `g` on copies of `inputs`; returns outputs (and leaves the copies' mutations visible
// through `mutated`).
TensorList run_graph(const Graph& g, const TensorList& inputs, TensorList* mutated = nullptr) {
  TensorList copies = detach_all(clone_inputs(inputs));
  TensorList out = Interpreter(g, {.check_meta = true}).run(copies);
  if (mutated) *mutated = copies;
  return out;
}

struct Case {
  std::string name;
  TraceFunction fn;
  std::function<TensorList()> inputs;
  double tol = 1e-5;
};

at::Tensor rn(std::vector<int64_t> sizes) { return at::randn(sizes, at::TensorOptions().dtype(at::kFloat)); }

std::vector<Case> corpus() {
  std::vector<Case> cases;
  cases.push_back({"mlp",
                   [](const TensorList& a) {
                     auto h = at::relu(at::linear(a[0], a[1], a[2]));
                     auto o = at::linear(h, a[3], a[4]);
                     return TensorList{at::log_softmax(o, 1)};
                   },
                   [] {
                     return TensorList{rn({4, 8}), rn({16, 8}), rn({16}), rn({3, 16}), rn({3})};
                   }});
  cases.push_back({"conv_bn_relu",
                   [](const TensorList& a) {
                     auto y = at::conv2d(a[0], a[1], a[2], {1, 1}, {1, 1});
                     y = at::batch_norm(y, a[3], a[4], {}, {}, /*training=*/true, 0.1, 1e-5, false);
                     return TensorList{at::relu(y)};
                   },
                   [] {
                     return TensorList{rn({2, 3, 6, 6}), rn({4, 3, 3, 3}), rn({4}), rn({4}), rn({4})};
                   },
                   1e-4});
  cases.push_back({"attention",
                   [](const TensorList& a) {
                     auto x = a[0];  // [B, T, D]
                     auto q = at::matmul(x, a[1]), k = at::matmul(x, a[2]), v = at::matmul(x, a[3]);
                     auto s = at::matmul(q, k.transpose(-2, -1)) / std::sqrt(8.0);
                     auto p = at::softmax(s, -1);
                     auto o = at::matmul(p, v);
                     return TensorList{at::layer_norm(o + x, {8})};
                   },
                   [] {
                     return TensorList{rn({2, 5, 8}), rn({8, 8}), rn({8, 8}), rn({8, 8})};
                   },
                   1e-4});
  cases.push_back(
      {"lstm_cell",
       [](const TensorList& a) {
         auto gates = at::linear(a[0], a[3], a[5]) + at::linear(a[1], a[4], a[6]);
         auto chunks = gates.chunk(4, 1);
         auto i = chunks[0].sigmoid(), f = chunks[1].sigmoid(), g = chunks[2].tanh(), o = chunks[3].sigmoid();
         auto c = f * a[2] + i * g;
         auto h = o * c.tanh();
         return TensorList{h, c};
       },
       [] {
         return TensorList{rn({3, 4}), rn({3, 5}), rn({3, 5}), rn({20, 4}), rn({20, 5}), rn({20}), rn({20})};
       },
       1e-5});
  cases.push_back({"inplace_views",
                   [](const TensorList& a) {
                     auto y = a[0].clone();
                     y.mul_(2);
                     auto v = y.view(-1);
                     v.add_(1);
                     auto t = y.t();
                     t.narrow(0, 0, 1).zero_();
                     auto z = y.unsqueeze(0).expand({2, 3, 4}).sum(0);
                     return TensorList{y, z, y.diagonal()};
                   },
                   [] {
                     return TensorList{rn({3, 4})};
                   }});
  cases.push_back({"factories",
                   [](const TensorList& a) {
                     auto z = at::zeros({3, 4}, a[0].options());
                     auto o = at::ones({4});
                     auto r = at::arange(4, a[0].options());
                     auto f = at::full({3, 1}, 2.5, a[0].options());
                     return TensorList{a[0] + z + o * r + f, at::eye(3, a[0].options())};
                   },
                   [] {
                     return TensorList{rn({3, 4})};
                   }});
  cases.push_back({"view_heavy",
                   [](const TensorList& a) {
                     auto parts = a[0].split(2, 1);   // [4, 2] x 3
                     auto rows = parts[1].unbind(0);  // 4 x [2]
                     auto p = a[0].permute({1, 0}).contiguous().unsqueeze(0).squeeze(0);
                     auto s = a[0].as_strided({2, 2}, {1, 6}, 1);
                     auto y = p.clone();
                     y.select(0, 1).mul_(rows[2].sum());
                     y.narrow(1, 0, 2).add_(s.t().repeat({3, 1}));
                     auto w = at::where(a[0] > 0, a[0], 0.5);  // a wrapped-number scalar
                     return TensorList{y, parts[2].expand({2, 4, 2}), w, a[0].flatten()[3] * 1};
                   },
                   [] {
                     return TensorList{rn({4, 6})};
                   }});
  return cases;
}

class TracerCorpus : public ::testing::TestWithParam<std::tuple<std::size_t, TraceMode, bool>> {};

TEST_P(TracerCorpus, GraphEqualsEager) {
  auto [index, mode, functionalize] = GetParam();
  Case c = corpus()[index];
  at::manual_seed(static_cast<uint64_t>(index));
  TensorList inputs = c.inputs();
  TensorList expected = c.fn(clone_inputs(inputs));
  TraceOptions options;
  options.mode = mode;
  options.functionalize = functionalize;
  TraceResult r = trace_program(c.fn, inputs, options);
  verify_traced(r.graph);
  if (functionalize) EXPECT_FALSE(has_inplace_op(r.graph)) << r.graph.to_string();
  TensorList actual = run_graph(r.graph, inputs);
  actual.resize(r.num_user_outputs);
  EXPECT_TRUE(tensor_lists_close(detach_all(expected), actual, c.tol, c.tol)) << c.name << "\n" << r.graph.to_string();
}

std::string corpus_name(const ::testing::TestParamInfo<TracerCorpus::ParamType>& info) {
  auto [index, mode, functionalize] = info.param;
  return corpus()[index].name + (mode == TraceMode::Fake ? "_fake" : "_real") + (functionalize ? "_functional" : "");
}

INSTANTIATE_TEST_SUITE_P(Corpus, TracerCorpus,
                         ::testing::Combine(::testing::Range<std::size_t>(0, 7),
                                            ::testing::Values(TraceMode::Fake, TraceMode::Real), ::testing::Bool()),
                         corpus_name);

// Joint graphs: gradients equal eager autograd.
class TracerJoint : public ::testing::TestWithParam<std::tuple<std::size_t, bool>> {};

TEST_P(TracerJoint, GradientsEqualEager) {
  auto [index, functionalize] = GetParam();
  Case c = corpus()[index];
  at::manual_seed(static_cast<uint64_t>(100 + index));
  TensorList inputs = c.inputs();
  for (auto& x : inputs)
    if (at::isFloatingType(x.scalar_type())) x.requires_grad_(true);
  // Eager.
  TensorList eager_in = clone_inputs(inputs);
  TensorList eager_out = c.fn(eager_in);
  TensorList diff_outs, tangents;
  at::manual_seed(7);
  for (auto& o : eager_out)
    if (o.requires_grad()) {
      diff_outs.push_back(o);
      tangents.push_back(at::randn(o.sizes(), o.options().requires_grad(false)));
    }
  TensorList grads = torch::autograd::grad(diff_outs, eager_in, tangents, false, false, true);
  // Traced.
  TraceOptions options;
  options.functionalize = functionalize;
  TraceResult r = trace_joint(c.fn, inputs, options);
  verify_traced(r.graph);
  ASSERT_EQ(r.num_tangents, tangents.size());
  ASSERT_EQ(r.num_grad_outputs, inputs.size());
  const bool expect_backward = c.name != "factories";  // add's backward records no op
  EXPECT_EQ(r.has_backward, expect_backward);
  std::size_t backward_nodes = 0;
  for (Node* n : r.graph.nodes()) {
    ASSERT_TRUE(n->attrs().count("phase")) << r.graph.to_string();
    backward_nodes += n->attrs().at("phase") == "backward";
  }
  if (expect_backward) EXPECT_GT(backward_nodes, 0u);
  if (functionalize) EXPECT_FALSE(has_inplace_op(r.graph)) << r.graph.to_string();
  TensorList graph_in = detach_all(inputs);
  for (auto& t : tangents) graph_in.push_back(t);
  TensorList out = Interpreter(r.graph).run(graph_in);
  TensorList fw(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(eager_out.size()));
  TensorList gr(out.begin() + static_cast<std::ptrdiff_t>(eager_out.size()),
                out.begin() + static_cast<std::ptrdiff_t>(eager_out.size() + inputs.size()));
  for (std::size_t i = 0; i < grads.size(); ++i)
    if (!grads[i].defined()) grads[i] = at::zeros_like(inputs[i]);
  EXPECT_TRUE(tensor_lists_close(detach_all(eager_out), fw, c.tol, c.tol)) << r.graph.to_string();
  EXPECT_TRUE(tensor_lists_close(detach_all(grads), gr, 1e-4, 1e-4)) << r.graph.to_string();
}

std::string joint_name(const ::testing::TestParamInfo<TracerJoint::ParamType>& info) {
  auto [index, functionalize] = info.param;
  return corpus()[index].name + (functionalize ? "_functional" : "");
}

// inplace_views (index 4) mutates a clone only; factories (5) have no parameters to differentiate
// beyond the input. All are differentiable.
INSTANTIATE_TEST_SUITE_P(Corpus, TracerJoint,
                         ::testing::Combine(::testing::Range<std::size_t>(0, 7), ::testing::Bool()), joint_name);

TEST(Tracer, LinearDecomposesLikeMakeFx) {
  Graph g = trace([](const TensorList& a) { return TensorList{at::linear(a[0], a[1], a[2]).relu().sum()}; },
                  {rn({2, 3}), rn({4, 3}), rn({4})});
  std::vector<std::string> ops;
  for (Node* n : g.nodes()) ops.push_back(n->qualified_name());
  // make_fx: t, addmm, relu, sum (see docs/tracer.md).
  EXPECT_EQ(ops, (std::vector<std::string>{"aten::t", "aten::addmm", "aten::relu", "aten::sum"})) << g.to_string();
  for (Node* n : g.nodes())
    for (Value* v : n->outputs()) EXPECT_NE(v->meta(), nullptr);
  EXPECT_EQ(g.outputs()[0]->meta()->sizes, std::vector<int64_t>{});
}

TEST(Tracer, InferenceModeStillDecomposesCompositeImplicit) {
  c10::InferenceMode guard;
  Graph g = trace([](const TensorList& a) { return TensorList{at::linear(a[0], a[1])}; }, {rn({2, 3}), rn({4, 3})});
  EXPECT_EQ(ops_of(g), (std::set<std::string>{"aten::t", "aten::mm"})) << g.to_string();
}

// SiLU's backward is one call, as eager runs it and as PyTorch's AOTAutograd records it, not the
// sigmoid/ones/sub/mul/add chain of its CompositeImplicitAutograd kernel (which a tracing tensor's
// autograd key used to pick); in fake and real traces alike, and with the gradient eager gives.
TEST(Tracer, SiluBackwardIsRecordedAsOneCall) {
  for (TraceMode mode : {TraceMode::Fake, TraceMode::Real}) {
    at::Tensor x = rn({4, 8}).requires_grad_(true);
    at::Tensor tangent = rn({4, 8});
    TraceOptions options;
    options.mode = mode;
    TraceResult r = trace_joint([](const TensorList& a) { return TensorList{at::silu(a[0])}; }, {x}, options);
    std::multiset<std::string> backward_ops;
    for (Node* n : r.graph.nodes())
      if (n->attrs().at("phase") == "backward") backward_ops.insert(n->qualified_name());
    EXPECT_EQ(backward_ops, (std::multiset<std::string>{"aten::silu_backward"})) << r.graph.to_string();
    EXPECT_FALSE(has_inplace_op(r.graph)) << r.graph.to_string();
    TensorList out = Interpreter(r.graph).run({x.detach(), tangent});
    at::Tensor eager_grad = torch::autograd::grad({at::silu(x)}, {x}, {tangent})[0];
    EXPECT_TRUE(testing::tensors_close(eager_grad, out.at(1), 0, 0));
  }
}

TEST(Tracer, FunctionalizationRemovesInplaceAndReportsInputMutations) {
  TensorList inputs{rn({2, 3}), rn({4, 3})};
  TraceOptions options;
  options.functionalize = true;
  TraceResult r = trace_program(
      [](const TensorList& a) {
        a[0].add_(1);
        a[1].t_();
        return TensorList{a[0].view(-1), a[0] * 2};
      },
      inputs, options);
  EXPECT_FALSE(has_inplace_op(r.graph)) << r.graph.to_string();
  ASSERT_EQ(r.inputs.size(), 2u);
  EXPECT_TRUE(r.inputs[0].mutates_data);
  EXPECT_FALSE(r.inputs[0].mutates_metadata);
  EXPECT_FALSE(r.inputs[1].mutates_data);
  EXPECT_TRUE(r.inputs[1].mutates_metadata);
  ASSERT_EQ(r.num_user_outputs, 2u);
  EXPECT_EQ(r.graph.num_outputs(), 4u);
  EXPECT_EQ(r.outputs[0].aliased_input, std::optional<std::size_t>(0));
  EXPECT_FALSE(r.outputs[1].aliased_input.has_value());
  // The graph's extra outputs are the new values of the mutated inputs.
  TensorList out = run_graph(r.graph, inputs);
  EXPECT_TRUE(testing::tensors_close(inputs[0] + 1, out[*r.inputs[0].mutated_output_index]));
  EXPECT_TRUE(testing::tensors_close(inputs[1].t(), out[*r.inputs[1].mutated_output_index]));
  EXPECT_TRUE(testing::tensors_close((inputs[0] + 1).view(-1), out[0]));
}

TEST(Tracer, InputMutationThroughAViewIsDetected) {
  TensorList inputs{rn({3, 4})};
  TraceOptions options;
  options.functionalize = true;
  TraceResult r = trace_program(
      [](const TensorList& a) {
        a[0].view(-1).narrow(0, 2, 3).mul_(2);
        return TensorList{a[0].sum()};
      },
      inputs, options);
  EXPECT_FALSE(has_inplace_op(r.graph)) << r.graph.to_string();
  ASSERT_TRUE(r.inputs[0].mutates_data);
  at::Tensor expected = inputs[0].clone();
  expected.view(-1).narrow(0, 2, 3).mul_(2);
  TensorList out = run_graph(r.graph, inputs);
  EXPECT_TRUE(testing::tensors_close(expected, out[*r.inputs[0].mutated_output_index]));
  EXPECT_TRUE(testing::tensors_close(expected.sum(), out[0]));
}

TEST(Tracer, NonFunctionalGraphKeepsInplaceOpsAndMutatesInputs) {
  TensorList inputs{rn({2, 3})};
  Graph g = trace(
      [](const TensorList& a) {
        a[0].mul_(3);
        return TensorList{a[0] + 1};
      },
      inputs);
  EXPECT_TRUE(ops_of(g).count("aten::mul_.Scalar")) << g.to_string();
  TensorList mutated;
  TensorList out = run_graph(g, inputs, &mutated);
  EXPECT_TRUE(testing::tensors_close(inputs[0] * 3, mutated[0]));
  EXPECT_TRUE(testing::tensors_close(inputs[0] * 3 + 1, out[0]));
}

TEST(Tracer, InputMetadataAndAliasingKept) {
  at::Tensor base = rn({4, 6});
  at::Tensor a = base.t();              // strided
  at::Tensor b = base.narrow(1, 2, 3);  // offset
  at::Tensor c = rn({5}).requires_grad_(true);
  std::vector<bool> shared;
  TraceResult r = trace_program(
      [&](const TensorList& x) {
        shared.push_back(x[0].storage().is_alias_of(x[1].storage()));
        shared.push_back(x[0].storage().is_alias_of(x[2].storage()));
        return TensorList{x[0].sum() + x[1].sum(), x[2] * 2};
      },
      {a, b, c});
  EXPECT_EQ(shared, (std::vector<bool>{true, false}));
  const TensorMeta* ma = r.graph.input(0)->meta();
  const TensorMeta* mb = r.graph.input(1)->meta();
  EXPECT_EQ(ma->strides, (std::vector<int64_t>{1, 6}));
  EXPECT_EQ(mb->storage_offset, 2);
  EXPECT_TRUE(r.graph.input(2)->meta()->requires_grad);
  // The example inputs are untouched and still alias.
  EXPECT_TRUE(a.storage().is_alias_of(b.storage()));
}

TEST(Tracer, RealModeDoesNotModifyExampleInputs) {
  at::Tensor x = rn({3});
  at::Tensor before = x.clone();
  TraceOptions options;
  options.mode = TraceMode::Real;
  trace(
      [](const TensorList& a) {
        a[0].add_(5);
        return TensorList{a[0]};
      },
      {x}, options);
  EXPECT_TRUE(at::equal(x, before));
}

TEST(Tracer, ClosedOverTensorsBecomeNamedConstants) {
  at::Tensor w = rn({3, 3});
  at::Tensor b = rn({3});
  Graph g = trace([&](const TensorList& a) { return TensorList{at::matmul(a[0], w) + b + w.sum()}; }, {rn({2, 3})});
  EXPECT_EQ(g.tensor_constants().size(), 2u) << g.to_string();
  std::size_t constant_nodes = 0;
  for (Node* n : g.nodes()) constant_nodes += n->kind() == NodeKind::Constant;
  EXPECT_EQ(constant_nodes, 2u);
  at::Tensor x = rn({2, 3});
  EXPECT_TRUE(testing::tensors_close(at::matmul(x, w) + b + w.sum(), Interpreter(g).run({x})[0]));
}

TEST(Tracer, FactoryOpsAreCaptured) {
  Graph g = trace(
      [](const TensorList& a) {
        return TensorList{at::zeros({2, 3}, a[0].options()) + a[0] + at::ones({3})};
      },
      {rn({2, 3})});
  auto ops = ops_of(g);
  EXPECT_TRUE(ops.count("aten::zeros")) << g.to_string();
  EXPECT_TRUE(ops.count("aten::ones")) << g.to_string();
  EXPECT_TRUE(g.tensor_constants().empty());
}

TEST(Tracer, DecompositionTable) {
  TraceOptions options;
  options.decompositions["aten::gelu"] = [](const std::vector<c10::IValue>& args) {
    at::Tensor x = args[0].toTensor();
    return std::vector<c10::IValue>{x * 0.5 * (1.0 + at::erf(x * M_SQRT1_2))};
  };
  at::Tensor x = rn({4});
  Graph g = trace([](const TensorList& a) { return TensorList{at::gelu(a[0])}; }, {x}, options);
  auto ops = ops_of(g);
  EXPECT_FALSE(ops.count("aten::gelu")) << g.to_string();
  EXPECT_TRUE(ops.count("aten::erf")) << g.to_string();
  EXPECT_TRUE(testing::tensors_close(at::gelu(x), Interpreter(g).run({x})[0], 1e-5, 1e-6));
}

TEST(Tracer, OpWithoutMetaKernelUsesCpuFallbackOrFails) {
  // aten::_cdist_forward has no C++ Meta kernel in libtorch 2.11.
  auto fn = [](const TensorList& a) { return TensorList{at::_cdist_forward(a[0], a[1], 2.0, std::nullopt)}; };
  TensorList inputs{rn({3, 4}), rn({5, 4})};
  Graph g = trace(fn, inputs);
  EXPECT_EQ(g.outputs()[0]->meta()->sizes, (std::vector<int64_t>{3, 5}));
  EXPECT_TRUE(testing::tensors_close(fn(inputs)[0], Interpreter(g).run(inputs)[0], 1e-5, 1e-5));
  TraceOptions strict;
  strict.allow_cpu_fallback = false;
  try {
    trace(fn, inputs, strict);
    FAIL() << "expected a TraceError";
  } catch (const TraceError& e) {
    EXPECT_NE(std::string(e.what()).find("aten::_cdist_forward: has no Meta kernel"), std::string::npos) << e.what();
  }
}

void expect_trace_error(const TraceFunction& fn, const TensorList& inputs, const std::string& needle,
                        TraceOptions options = {}) {
  try {
    trace(fn, inputs, options);
    FAIL() << "expected a TraceError containing: " << needle;
  } catch (const TraceError& e) { EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what(); }
}

// Functionalization checks each in-place op on meta copies before running its functional
// variant; the tracer skips that run for foreach ops where nothing can fail. Both sides: a valid
// step is recorded functionally and computes what eager does, and every call eager refuses is
// refused by the trace too.
TEST(Tracer, FunctionalizedForeachInplaceOpsMatchEagerAndItsErrors) {
  TensorList inputs{rn({2, 3}), rn({4}), rn({2, 3}), rn({4})};
  auto step = [](const TensorList& a) {
    at::_foreach_addcmul_(TensorList{a[0], a[1]}, TensorList{a[2], a[3]}, TensorList{a[2], a[3]}, 0.5);
    at::_foreach_mul_(TensorList{a[0], a[1]}, at::ArrayRef<at::Scalar>{2.0, 3});
    return TensorList{a[0] + a[1].sum()};
  };
  TraceOptions options;
  options.functionalize = true;
  TraceResult r = trace_program(step, inputs, options);
  EXPECT_FALSE(has_inplace_op(r.graph)) << r.graph.to_string();
  EXPECT_TRUE(ops_of(r.graph).count("aten::_foreach_addcmul.Scalar")) << r.graph.to_string();
  TensorList eager_inputs;
  for (const auto& t : inputs) eager_inputs.push_back(t.clone());
  const TensorList expected = step(eager_inputs);
  TensorList out = run_graph(r.graph, inputs);
  EXPECT_TRUE(testing::tensors_close(expected[0], out[0]));
  for (std::size_t k : {0u, 1u}) {
    ASSERT_TRUE(r.inputs[k].mutates_data);
    EXPECT_TRUE(testing::tensors_close(eager_inputs[k], out[*r.inputs[k].mutated_output_index]));
  }

  auto refused_like_eager = [&](const TraceFunction& fn, const TensorList& args, const std::string& needle) {
    TensorList copies;
    for (const auto& t : args) copies.push_back(t.clone());
    EXPECT_ANY_THROW(fn(copies)) << "eager accepts it: " << needle;
    expect_trace_error(fn, args, needle, options);
  };
  // `other` would broadcast `self` to a larger shape.
  refused_like_eager(
      [](const TensorList& a) {
        at::_foreach_add_(TensorList{a[0]}, TensorList{a[1]});
        return TensorList{a[0]};
      },
      {rn({3}), rn({2, 3})}, "aten::_foreach_add_.List");
  // The result (float) cannot be stored in an integer `self`.
  refused_like_eager(
      [](const TensorList& a) {
        at::_foreach_add_(TensorList{a[0]}, 1.5);
        return TensorList{a[0]};
      },
      {at::ones({3}, at::kLong)}, "aten::_foreach_add_.Scalar");
  // `self` overlaps itself (an expanded view).
  refused_like_eager(
      [](const TensorList& a) {
        at::_foreach_add_(TensorList{a[0].expand({2, 3})}, 1.0);
        return TensorList{a[0]};
      },
      {rn({3})}, "aten::_foreach_add_.Scalar");
  // Lists of different lengths, tensors and scalars.
  refused_like_eager(
      [](const TensorList& a) {
        at::_foreach_add_(TensorList{a[0], a[1]}, TensorList{a[0]});
        return TensorList{a[0]};
      },
      {rn({3}), rn({3})}, "Tensor lists must have the same number of tensors");  // autograd's check, above the tracer
  refused_like_eager(
      [](const TensorList& a) {
        at::_foreach_mul_(TensorList{a[0], a[1]}, at::ArrayRef<at::Scalar>{2.0});
        return TensorList{a[0]};
      },
      {rn({3}), rn({3})}, "aten::_foreach_mul_.ScalarList");
}

// An optional tensor list (`Tensor[]?`: no aten op of libtorch 2.11 has one, custom ops may):
// its tensors are graph values, and None stays a constant.
void sum_optional_list(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  const c10::IValue xs = (*stack)[stack->size() - 2];
  at::Tensor result = (*stack)[stack->size() - 1].toTensor().clone();
  if (xs.isTensorList())
    for (const at::Tensor& x : xs.toTensorList()) result = result + x;
  stack->resize(stack->size() - 2);
  stack->push_back(result);
}

TORCH_LIBRARY_FRAGMENT(aotpipe_test, m) { m.def("sum_optional_list(Tensor[]? xs, Tensor base) -> Tensor"); }
TORCH_LIBRARY_IMPL(aotpipe_test, CompositeExplicitAutograd, m) {
  m.impl("sum_optional_list", torch::CppFunction::makeFromBoxedFunction<&sum_optional_list>());
}

TEST(Tracer, OptionalTensorListArgumentsAreGraphValues) {
  const c10::OperatorHandle op = c10::Dispatcher::singleton().findSchemaOrThrow("aotpipe_test::sum_optional_list", "");
  auto call = [&](std::optional<TensorList> xs, const at::Tensor& base) {
    torch::jit::Stack stack{xs ? c10::IValue(*xs) : c10::IValue(), base};
    op.callBoxed(&stack);
    return stack.back().toTensor();
  };
  TensorList inputs{rn({3}), rn({3}), rn({3})};
  for (TraceMode mode : {TraceMode::Fake, TraceMode::Real}) {
    TraceOptions options;
    options.mode = mode;
    TraceResult with = trace_program(
        [&](const TensorList& a) {
          return TensorList{call(TensorList{a[0], a[1]}, a[2])};
        },
        inputs, options);
    const Node* node = with.graph.nodes().back();
    ASSERT_TRUE(node->args()[0].is_value_list()) << with.graph.to_string();
    EXPECT_EQ(node->args()[0].value_list().values,
              (std::vector<Value*>{with.graph.inputs()[0], with.graph.inputs()[1]}));
    EXPECT_TRUE(testing::tensors_close(inputs[0] + inputs[1] + inputs[2], run_graph(with.graph, inputs)[0]));
    TraceResult without =
        trace_program([&](const TensorList& a) { return TensorList{call(std::nullopt, a[2])}; }, inputs, options);
    ASSERT_TRUE(without.graph.nodes().back()->args()[0].is_constant()) << without.graph.to_string();
    EXPECT_TRUE(testing::tensors_close(inputs[2], run_graph(without.graph, inputs)[0]));
  }
}

TEST(Tracer, ItemIsAnErrorInFakeMode) {
  expect_trace_error(
      [](const TensorList& a) {
        double v = a[0].sum().item<double>();
        return TensorList{a[0] * v};
      },
      {rn({3})}, "aten::_local_scalar_dense: its output (value or shape) depends on tensor data");
}

TEST(Tracer, NonzeroIsAnErrorInFakeMode) {
  expect_trace_error([](const TensorList& a) { return TensorList{at::nonzero(a[0])}; }, {rn({3})},
                     "aten::nonzero: its output (value or shape) depends on tensor data");
}

// Indexing with integer tensors has a data-independent shape (the boolean-mask form does not):
// a fake trace runs it on its Meta kernel, as PyTorch's fake tensors do (Swin's position bias).
TEST(Tracer, IntegerIndexingIsTracedInFakeMode) {
  Graph g = trace(
      [](const TensorList& a) {
        return TensorList{at::index(a[0], c10::List<std::optional<at::Tensor>>({a[1].view({-1})}))};
      },
      {rn({10, 4}), at::tensor({1, 2, 3, 0}, at::kLong).view({2, 2})});
  EXPECT_TRUE(ops_of(g).count("aten::index.Tensor"));
  EXPECT_EQ(g.outputs()[0]->meta()->sizes, (std::vector<int64_t>{4, 4}));
  expect_trace_error(
      [](const TensorList& a) {
        return TensorList{at::index(a[0], c10::List<std::optional<at::Tensor>>({a[0].select(1, 0) > 0}))};
      },
      {rn({10, 4})}, "aten::index.Tensor: its output (value or shape) depends on tensor data");
}

// A node of a torch.autocast region (attrs()["autocast"], as the .pt2 importer marks them) runs
// under that state in the interpreter, and so in a trace: libtorch's autocast kernels record
// eager's casts, on the CPU and on a fake CUDA device; a region of another device type casts
// nothing, as eager's autocast leaves other devices' tensors alone.
TEST(Tracer, AutocastRegionNodesRecordEagersCasts) {
  struct Case {
    c10::Device device;
    const char* region;
    c10::ScalarType expected;
  };
  for (const Case& c :
       {Case{c10::Device("cpu"), "cpu,BFloat16", c10::kBFloat16}, Case{c10::Device("cuda:0"), "cuda,Half", c10::kHalf},
        Case{c10::Device("cuda:0"), "cuda,default", c10::kHalf}, Case{c10::Device("cpu"), "cuda,Half", c10::kFloat},
        Case{c10::Device("cpu"), "cpu,off", c10::kFloat}}) {
    SCOPED_TRACE(std::string(c.region) + " on " + c.device.str());
    Graph region("region");
    auto input = [&](const char* name, std::vector<int64_t> sizes) {
      return region.add_input(name, TensorMeta::contiguous(std::move(sizes), c10::kFloat, c.device, false));
    };
    Value* x = input("x", {4, 8});
    Value* w = input("w", {16, 8});
    Value* b = input("b", {16});
    Node* linear = region.add_call("aten::linear", {x, w, b});
    linear->attrs()["autocast"] = c.region;
    region.set_outputs({region.add_call("aten::relu", {linear->output()})->output()});
    const auto interpreter = std::make_shared<Interpreter>(region);
    TensorList examples;
    for (const Value* in : region.inputs()) examples.push_back(metadata_example(*in->meta()));
    Graph traced = trace([interpreter](const TensorList& a) { return interpreter->run(a); }, examples);
    std::size_t casts = 0;
    for (const Node* node : traced.nodes())
      if (node->is_call() && node->qualified_name() == "aten::_to_copy") {
        EXPECT_EQ(node->output()->meta()->dtype, c.expected);
        ++casts;
      }
    EXPECT_EQ(casts, c.expected == c10::kFloat ? 0u : 3u);  // input, weight and bias
    EXPECT_EQ(traced.outputs()[0]->meta()->dtype, c.expected);
    EXPECT_EQ(traced.outputs()[0]->meta()->device, c.device);
  }
}

TEST(Tracer, DataDependentOpsWorkInRealMode) {
  TraceOptions options;
  options.mode = TraceMode::Real;
  Graph g =
      trace([](const TensorList& a) { return TensorList{at::nonzero(a[0])}; }, {at::tensor({0.f, 1.f, 2.f})}, options);
  EXPECT_TRUE(ops_of(g).count("aten::nonzero"));
}

TEST(Tracer, TensorOfAnotherTraceIsAnError) {
  at::Tensor leaked;
  trace(
      [&](const TensorList& a) {
        leaked = a[0] * 2;
        return TensorList{leaked};
      },
      {rn({3})});
  expect_trace_error([&](const TensorList& a) { return TensorList{a[0] + leaked}; }, {rn({3})},
                     "aten::add.Tensor: an argument is a tensor of another trace");
  // Outside any trace, the leaked tensor is refused too, never a crash.
  try {
    (void)(leaked + 1);
    FAIL() << "expected an error";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what_without_backtrace()).find("trace has already ended"), std::string::npos);
  }
}

TEST(Tracer, ExceptionInUserCodePropagates) {
  try {
    trace([](const TensorList& a) -> TensorList { throw std::runtime_error("boom"); }, {rn({3})});
    FAIL();
  } catch (const TraceError& e) { EXPECT_NE(std::string(e.what()).find("boom"), std::string::npos); }
  // The thread is usable afterwards: plain eager ops are not intercepted.
  at::Tensor x = rn({3});
  EXPECT_TRUE(at::equal(x + 0, x));
}

TEST(Tracer, ConcurrentTracesOnEightThreads) {
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  std::vector<std::string> failures(8);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      try {
        at::Tensor x = at::randn({t + 2, 3}).requires_grad_(true);
        at::Tensor w = at::randn({4, 3}).requires_grad_(true);
        auto fn = [t](const TensorList& a) { return TensorList{(at::linear(a[0], a[1]).tanh() * (t + 1)).sum(0)}; };
        TraceOptions options;
        options.functionalize = (t % 2) == 0;
        TraceResult r = trace_joint(fn, {x, w}, options);
        // Eager reference.
        auto out = fn({x, w})[0];
        at::Tensor tangent = at::ones_like(out);
        auto grads = torch::autograd::grad({out}, {x, w}, {tangent});
        TensorList res = Interpreter(r.graph).run({x.detach(), w.detach(), tangent});
        if (testing::tensors_close(out.detach(), res[0], 1e-5, 1e-5) &&
            testing::tensors_close(grads[0], res[1], 1e-5, 1e-5) &&
            testing::tensors_close(grads[1], res[2], 1e-5, 1e-5))
          ++ok;
        else
          failures[t] = r.graph.to_string();
      } catch (const std::exception& e) { failures[t] = e.what(); }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(ok.load(), 8);
  for (auto& f : failures) EXPECT_EQ(f, "");
}

}  // namespace
}  // namespace aotpipe

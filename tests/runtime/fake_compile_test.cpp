// Truly fake compiles: the model zoo (examples/models) compiles with the CPU fallback refused, at
// small and at ImageNet/LM batch sizes, on the CPU and for cuda:0 (no GPU needed); a fake trace of
// each model records exactly the metadata a real trace records (aotpipe's Meta kernels in model
// context); and the fallback, where an op is still uncovered, is counted per op or refused with
// the op's name.
#include <aotpipe/graph/example_tensor.h>
#include <aotpipe/tracer/tracer.h>
#include <aotpipe/driver/aot_function.h>

#include <model_zoo.h>

#include <fmt/format.h>

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <string>

namespace aotpipe {
namespace {

// Real inputs of the model's metadata: random floats, small valid indices, a {0, -1e4} mask.
TensorList real_inputs(const zoo::ZooModel& model) {
  TensorList args;
  for (const TensorMeta& meta : model.inputs) {
    at::Tensor t;
    if (at::isFloatingType(meta.dtype)) {
      t = at::empty_strided(meta.sizes, meta.strides, at::TensorOptions().dtype(meta.dtype)).normal_();
    } else {
      t = at::randint(0, 2, meta.sizes, at::TensorOptions().dtype(meta.dtype));
    }
    if (meta.requires_grad) t.requires_grad_(true);
    args.push_back(t);
  }
  return args;
}

AotConfig fake_only() {
  AotConfig config;
  config.allow_cpu_fallback = false;
  return config;
}

class ZooTest : public ::testing::TestWithParam<std::string> {};

zoo::ZooModel model_named(const std::string& name, int64_t batch, c10::Device device = c10::kCPU) {
  for (zoo::ZooModel& m : zoo::all_models(batch, device))
    if (m.name == name) return std::move(m);
  throw std::invalid_argument("no zoo model " + name);
}

std::vector<std::string> zoo_names() {
  std::vector<std::string> names;
  for (const zoo::ZooModel& m : zoo::all_models(1)) names.push_back(m.name);
  return names;
}

// The whole pipeline with the fallback refused: a fallback would fail the compile naming the op.
TEST_P(ZooTest, CompilesWithoutCpuFallbackOnCpuAndCuda) {
  for (c10::Device device : {c10::Device(c10::kCPU), c10::Device(c10::kCUDA, 0)})
    for (int64_t batch : {1, 256}) {
      const zoo::ZooModel model = model_named(GetParam(), batch, device);
      SCOPED_TRACE(fmt::format("{} batch {} on {}", model.name, batch, device.str()));
      CompileOutput out = compile(model.name, model.fn, zoo::metadata_examples(model), fake_only());
      EXPECT_TRUE(out.state()->cpu_fallbacks.empty());
      const bool training = out.state()->traced.training();
      const bool optimizer_step = model.name == "adam_foreach_step";
      EXPECT_EQ(training, !optimizer_step);
      // The compiled graphs carry the batch and the device of the inputs.
      const Graph& forward = training ? out.state()->partition->forward : *out.state()->traced.inference_graph;
      ASSERT_FALSE(forward.inputs().empty());
      EXPECT_EQ(forward.inputs()[0]->meta()->device, device);
      if (model.inputs[0].sizes.size() > 1 && !optimizer_step) EXPECT_EQ(forward.inputs()[0]->meta()->sizes[0], batch);
    }
}

// Fake and real traces of the same model at a small batch record the same graph, value for value
// (sizes, strides, storage offset, dtype): the Meta kernels agree with the CPU kernels in context.
TEST_P(ZooTest, FakeTraceRecordsWhatARealTraceRecords) {
  at::manual_seed(0);
  const zoo::ZooModel model = model_named(GetParam(), 2);
  const TensorList inputs = real_inputs(model);
  TraceOptions fake;
  fake.functionalize = true;
  fake.allow_cpu_fallback = false;
  TraceOptions real = fake;
  real.mode = TraceMode::Real;
  const TraceResult fake_trace = trace_joint(model.fn, inputs, fake);
  const TraceResult real_trace = trace_joint(model.fn, inputs, real);
  EXPECT_TRUE(fake_trace.cpu_fallbacks.empty());
  const auto& fake_nodes = fake_trace.graph.nodes();
  const auto& real_nodes = real_trace.graph.nodes();
  ASSERT_EQ(fake_nodes.size(), real_nodes.size());
  std::size_t compared = 0;
  for (std::size_t i = 0; i < fake_nodes.size(); ++i) {
    const Node* f = fake_nodes[i];
    const Node* r = real_nodes[i];
    ASSERT_EQ(f->qualified_name(), r->qualified_name()) << "node " << i;
    ASSERT_EQ(f->outputs().size(), r->outputs().size()) << f->qualified_name();
    for (std::size_t k = 0; k < f->outputs().size(); ++k) {
      const TensorMeta* fm = f->outputs()[k]->meta();
      const TensorMeta* rm = r->outputs()[k]->meta();
      ASSERT_EQ(fm == nullptr, rm == nullptr) << f->qualified_name();
      if (!fm) continue;
      EXPECT_EQ(to_string(*fm), to_string(*rm)) << "node " << i << " " << f->qualified_name() << " output " << k;
      ++compared;
    }
  }
  EXPECT_GT(compared, 10u);
}

INSTANTIATE_TEST_SUITE_P(Zoo, ZooTest, ::testing::ValuesIn(zoo_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

// An op aotpipe has no Meta kernel for: _cdist_forward (what cdist runs for p != 2 or small inputs).
TensorList uses_cdist(const TensorList& a) { return {at::_cdist_forward(at::relu(a[0]), a[1], 1.0, std::nullopt)}; }

TEST(CpuFallbackTest, RefusedCompileNamesTheFirstUncoveredOp) {
  const TensorList args = {at::randn({4, 3}), at::randn({5, 3})};
  try {
    compile("cdist", uses_cdist, args, fake_only());
    FAIL() << "expected the compile to refuse the CPU fallback";
  } catch (const std::exception& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("aten::_cdist_forward"));
    EXPECT_THAT(e.what(), ::testing::HasSubstr("allow_cpu_fallback is off"));
    EXPECT_THAT(e.what(), ::testing::Not(::testing::HasSubstr("aten::relu")));
  }
}

TEST(CpuFallbackTest, AllowedFallbackIsCountedPerOpAndTrace) {
  const TensorList args = {at::randn({4, 3}), at::randn({5, 3})};
  CompileOutput out = compile("cdist", uses_cdist, args);
  // Inference: the metadata trace and the inference trace each call it once.
  EXPECT_EQ(out.state()->cpu_fallbacks, (CpuFallbackCounts{{"aten::_cdist_forward", 2}}));
  const TraceResult traced = trace_program(uses_cdist, args);
  EXPECT_EQ(traced.cpu_fallbacks, (CpuFallbackCounts{{"aten::_cdist_forward", 1}}));
  EXPECT_EQ(total_cpu_fallback_calls(out.state()->cpu_fallbacks), 2u);
  // And the compiled function is still right.
  EXPECT_TRUE(at::allclose(out.runtime(args)[0], uses_cdist(args)[0]));
}

// An LSTM with projections (proj_size) keeps libtorch's own composite instead of the cell-op
// decomposition; its gradients must still flow.
TEST(LstmDecompositionTest, ProjectionsKeepTheirGradients) {
  constexpr int64_t batch = 2, steps = 3, features = 4, hidden = 6, proj = 3;
  at::manual_seed(0);
  const TensorList inputs = {at::randn({steps, batch, features}),
                             at::randn({1, batch, proj}),
                             at::randn({1, batch, hidden}),
                             at::randn({4 * hidden, features}).requires_grad_(),
                             at::randn({4 * hidden, proj}).requires_grad_(),
                             at::randn({4 * hidden}).requires_grad_(),
                             at::randn({4 * hidden}).requires_grad_(),
                             at::randn({proj, hidden}).requires_grad_()};
  auto fresh = [&] {
    TensorList copy;
    for (const at::Tensor& t : inputs) copy.push_back(t.detach().clone().requires_grad_(t.requires_grad()));
    return copy;
  };
  Function fn = [](const TensorList& a) {
    auto [out, h, c] = at::lstm(a[0], {a[1], a[2]}, {a[3], a[4], a[5], a[6], a[7]}, /*has_biases=*/true, 1, 0.0,
                                /*train=*/true, /*bidirectional=*/false, /*batch_first=*/false);
    return TensorList{(out * out).sum() + h.sum()};
  };
  const TensorList eager_inputs = fresh(), compiled_inputs = fresh();
  fn(eager_inputs)[0].backward();
  CompileOutput compiled = compile("lstm_projections", fn, compiled_inputs);
  compiled.runtime(compiled_inputs)[0].backward();
  for (std::size_t i = 3; i < inputs.size(); ++i) {
    ASSERT_TRUE(compiled_inputs[i].grad().defined()) << "input " << i;
    EXPECT_GT(eager_inputs[i].grad().abs().sum().item<double>(), 0) << "input " << i;
    EXPECT_TRUE(at::allclose(compiled_inputs[i].grad(), eager_inputs[i].grad(), 1e-4, 1e-5)) << "input " << i;
  }
}

// gru and rnn_tanh/rnn_relu are traced as per-step cells (PyTorch's gru_impl and rnn_*_input
// decompositions), as the LSTM is: two layers, both directions, batch first; the compiled
// training step must give eager's outputs and every weight's gradient.
class RecurrentDecompositionTest : public ::testing::TestWithParam<std::string> {};

TEST_P(RecurrentDecompositionTest, MatchesEagerWithGradients) {
  const std::string kind = GetParam();
  constexpr int64_t batch = 2, steps = 3, features = 4, hidden = 5, layers = 2;
  const int64_t gates = kind == "gru" ? 3 : 1;
  at::manual_seed(0);
  TensorList inputs = {at::randn({batch, steps, features}), at::randn({2 * layers, batch, hidden})};
  for (int64_t layer = 0; layer < layers; ++layer)
    for (int direction = 0; direction < 2; ++direction) {
      const int64_t in = layer == 0 ? features : 2 * hidden;
      for (const auto& sizes :
           {std::vector<int64_t>{gates * hidden, in}, {gates * hidden, hidden}, {gates * hidden}, {gates * hidden}})
        inputs.push_back(at::randn(sizes).requires_grad_());
    }
  auto fresh = [&] {
    TensorList copy;
    for (const at::Tensor& t : inputs) copy.push_back(t.detach().clone().requires_grad_(t.requires_grad()));
    return copy;
  };
  Function fn = [kind](const TensorList& a) {
    const std::vector<at::Tensor> params(a.begin() + 2, a.end());
    using Layers = std::tuple<at::Tensor, at::Tensor> (*)(const at::Tensor&, const at::Tensor&, at::TensorList, bool,
                                                          int64_t, double, bool, bool, bool);
    const Layers run = kind == "gru"        ? static_cast<Layers>(&at::gru)
                       : kind == "rnn_tanh" ? static_cast<Layers>(&at::rnn_tanh)
                                            : static_cast<Layers>(&at::rnn_relu);
    auto [out, h] = run(a[0], a[1], params, /*has_biases=*/true, layers, 0.0, /*train=*/true,
                        /*bidirectional=*/true, /*batch_first=*/true);
    return TensorList{out, h, (out * out).sum() + h.sum()};
  };
  const TensorList eager_inputs = fresh(), compiled_inputs = fresh();
  const TensorList eager = fn(eager_inputs);
  eager[2].backward();
  CompileOutput compiled = compile(kind, fn, compiled_inputs);
  std::set<std::string> ops;
  for (const Node* n : compiled.state()->traced.joint->graph.nodes()) ops.insert(n->qualified_name());
  EXPECT_FALSE(ops.count("aten::" + kind + ".input")) << "the layer op was traced as it is";
  const TensorList got = compiled.runtime(compiled_inputs);
  for (std::size_t k = 0; k < 2; ++k)
    EXPECT_TRUE(at::allclose(got[k], eager[k], 1e-5, 1e-6)) << kind << " output " << k;
  got[2].backward();
  for (std::size_t i = 2; i < inputs.size(); ++i) {
    ASSERT_TRUE(compiled_inputs[i].grad().defined()) << kind << " input " << i;
    EXPECT_GT(eager_inputs[i].grad().abs().sum().item<double>(), 0) << kind << " input " << i;
    EXPECT_TRUE(at::allclose(compiled_inputs[i].grad(), eager_inputs[i].grad(), 1e-4, 1e-5)) << kind << " input " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Kinds, RecurrentDecompositionTest, ::testing::Values("gru", "rnn_tanh", "rnn_relu"));

// one_hot with its classes given (LongT5's transient-global attention; MoE routers): eager's CPU
// path checks the classes with min().item() and max().item(), which a fake trace cannot read. It
// is traced as ATen computes it for fake tensors, eq(labels.unsqueeze(-1), arange(classes)), and
// the compiled step equals eager's, gradients included; with classes -1, whose size is read from
// the data, the compile fails naming the read.
TEST(OneHotDecomposition, CompilesFakeAndMatchesEager) {
  at::manual_seed(0);
  const at::Tensor labels = at::randint(0, 5, {3, 4});
  const at::Tensor weight = at::randn({3, 4, 5}).requires_grad_();
  Function fn = [](const TensorList& a) {
    const at::Tensor hot = at::one_hot(a[0], 5);
    return TensorList{hot, (hot * a[1]).sum()};
  };
  const TensorList eager_inputs = {labels, weight.detach().clone().requires_grad_()};
  const TensorList compiled_inputs = {labels, weight.detach().clone().requires_grad_()};
  const TensorList eager = fn(eager_inputs);
  eager[1].backward();
  CompileOutput compiled = compile("one_hot", fn, compiled_inputs, fake_only());
  const TensorList got = compiled.runtime(compiled_inputs);
  EXPECT_TRUE(at::equal(got[0], eager[0]));
  EXPECT_EQ(got[0].scalar_type(), at::kLong);
  EXPECT_TRUE(at::allclose(got[1], eager[1]));
  got[1].backward();
  ASSERT_TRUE(compiled_inputs[1].grad().defined());
  EXPECT_TRUE(at::equal(compiled_inputs[1].grad(), eager_inputs[1].grad()));

  Function unknown_classes = [](const TensorList& a) { return TensorList{at::one_hot(a[0]).sum()}; };
  try {
    compile("one_hot_unknown_classes", unknown_classes, {labels}, fake_only());
    FAIL() << "one_hot(labels) reads its number of classes from the data";
  } catch (const std::exception& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("aten::_local_scalar_dense"));
    EXPECT_THAT(e.what(), ::testing::HasSubstr("depends on tensor data"));
  }
}

}  // namespace
}  // namespace aotpipe

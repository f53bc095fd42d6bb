// Compiling CUDA programs on a machine without a GPU: metadata examples on cuda:0, fake tracing
// with device-true fake tensors, and every value of the joint, forward and backward graphs on
// the device eager would put it on (asserted value by value). Runs everywhere; it makes no CUDA
// call, so on this machine (no GPU) any CUDA call would fail the test.
#include <aotpipe/graph/example_tensor.h>
#include <aotpipe/tracer/tracer.h>
#include <aotpipe/driver/aot_function.h>

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <set>
#include <sstream>

namespace aotpipe {
namespace {

const c10::Device kCuda0(c10::kCUDA, 0);
const c10::Device kCpu(c10::kCPU);

at::Tensor on(c10::Device device, std::vector<int64_t> sizes, bool requires_grad = false,
              c10::ScalarType dtype = c10::kFloat) {
  return metadata_example(TensorMeta::contiguous(std::move(sizes), dtype, device, requires_grad));
}

// Each tensor value of `g` must be on cuda:0, except those `cpu_ok` names (values eager keeps on
// the CPU: 0-dim CPU inputs and what forwards them unchanged).
void expect_devices(const Graph& g, const std::function<bool(const Value*)>& cpu_ok) {
  std::size_t checked = 0;
  auto check = [&](const Value* v) {
    const TensorMeta* m = v->meta();
    if (!m) return;  // an undefined result nothing reads
    const c10::Device want = cpu_ok(v) ? kCpu : kCuda0;
    EXPECT_EQ(m->device, want) << "graph " << g.name() << ": %" << v->name();
    ++checked;
  };
  for (const Value* in : g.inputs()) check(in);
  for (const Node* n : g.nodes())
    for (const Value* out : n->outputs()) check(out);
  EXPECT_GT(checked, 0u);
}

const auto all_cuda = [](const Value*) { return false; };

struct Compiled {
  CompileOutput output;
  const Graph& joint() const { return output.state()->traced.joint->graph; }
  const Graph& forward() const { return output.state()->partition->forward; }
  const Graph& backward() const { return output.state()->partition->backward; }
};

Compiled compile_training(const std::string& name, Function fn, TensorList examples) {
  Compiled c{compile(name, std::move(fn), std::move(examples))};
  EXPECT_TRUE(c.output.state()->traced.training()) << name << ": expected a training compile";
  return c;
}

void expect_all_graphs(const Compiled& c, const std::function<bool(const Value*)>& cpu_ok) {
  expect_devices(c.joint(), cpu_ok);
  expect_devices(c.forward(), cpu_ok);
  expect_devices(c.backward(), cpu_ok);
}

TEST(DeviceCompile, FactoriesTakeTheInputsDevice) {
  auto c = compile_training("factories",
                            [](const TensorList& a) {
                              const at::Tensor& x = a[0];
                              at::Tensor y = x * at::ones_like(x) + at::zeros({4, 8}, x.options()) +
                                             at::arange(8, x.options()) + x.new_zeros({4, 8}) +
                                             at::empty_like(x).fill_(1) + at::full_like(x, 2.0);
                              return TensorList{(y * at::rand_like(x)).sum()};
                            },
                            {on(kCuda0, {4, 8}, true)});
  expect_all_graphs(c, all_cuda);
  std::ostringstream text;
  text << c.forward();
  EXPECT_THAT(text.str(), ::testing::HasSubstr("device=cuda:0"));
  EXPECT_THAT(text.str(), ::testing::Not(::testing::HasSubstr("device(\"cpu\")")));
}

TEST(DeviceCompile, ToBFloat16ThenMmForwardAndBackward) {
  auto c =
      compile_training("bf16_mm",
                       [](const TensorList& a) {
                         return TensorList{at::mm(a[0].to(at::kBFloat16), a[1].to(at::kBFloat16)).to(at::kFloat).sum()};
                       },
                       {on(kCuda0, {8, 16}, true), on(kCuda0, {16, 4}, true)});
  expect_all_graphs(c, all_cuda);
  std::size_t bf16_values = 0;
  for (const Node* n : c.backward().nodes())
    for (const Value* v : n->outputs())
      if (v->meta() && v->meta()->dtype == at::kBFloat16) ++bf16_values;
  EXPECT_GT(bf16_values, 0u) << "the backward mm runs in bf16";
}

TEST(DeviceCompile, ConvBatchNormTraining) {
  auto c = compile_training(
      "conv_bn",
      [](const TensorList& a) {
        at::Tensor y = at::conv2d(a[0], a[1], a[2], 1, 1);
        y = at::batch_norm(y, a[3], a[4], a[5], a[6], /*training=*/true, 0.1, 1e-5, /*cudnn_enabled=*/true);
        return TensorList{at::relu(y).sum()};
      },
      {on(kCuda0, {2, 3, 8, 8}, true), on(kCuda0, {4, 3, 3, 3}, true), on(kCuda0, {4}, true), on(kCuda0, {4}, true),
       on(kCuda0, {4}, true), on(kCuda0, {4}), on(kCuda0, {4})});
  expect_all_graphs(c, all_cuda);
  // The running statistics are mutated inputs (cudnn_batch_norm decomposed as PyTorch does).
  const auto& info = c.output.state()->function.meta.input_info;
  EXPECT_TRUE(info[5].mutates_data);
  EXPECT_TRUE(info[6].mutates_data);
  for (const Node* n : c.joint().nodes()) EXPECT_NE(n->qualified_name(), "aten::cudnn_batch_norm");
}

TEST(DeviceCompile, LogSoftmaxNllLossWithCpuScalarScale) {
  auto c = compile_training(
      "nll_scaled", [](const TensorList& a) { return TensorList{at::nll_loss(at::log_softmax(a[0], 1), a[1]) * a[2]}; },
      {on(kCuda0, {6, 10}, true), on(kCuda0, {6}, false, at::kLong), on(kCpu, {}, false)});
  // Only the 0-dim CPU scale stays on the CPU (as an input, or saved for the backward as is).
  auto scale_only = [](const Value* v) {
    return v->meta()->sizes.empty() && v->is_input() && v->name().find("3") != std::string::npos;
  };
  expect_devices(c.joint(), scale_only);
  expect_devices(c.forward(), [](const Value* v) { return v->is_input() && v->name() == "primals_3"; });
  // The backward reads the scale: it is a saved value on the CPU, 0-dim.
  expect_devices(c.backward(), [](const Value* v) {
    return v->is_input() && v->meta()->sizes.empty() && v->meta()->device.is_cpu();
  });
  std::size_t cuda_outputs = 0;
  for (const Value* out : c.forward().outputs()) cuda_outputs += out->meta()->device == kCuda0 ? 1 : 0;
  EXPECT_GT(cuda_outputs, 0u);
}

TEST(DeviceCompile, LstmCellTakesTheFusedCudaKernel) {
  // On CUDA, lstm_cell is _thnn_fused_lstm_cell (no CPU kernel): traced with aotpipe's Meta kernels.
  auto c =
      compile_training("lstm_cell",
                       [](const TensorList& a) {
                         auto [h, cell] = at::lstm_cell(a[0], {a[1], a[2]}, a[3], a[4], a[5], a[6]);
                         return TensorList{(h * cell).sum()};
                       },
                       {on(kCuda0, {4, 8}, true), on(kCuda0, {4, 16}), on(kCuda0, {4, 16}), on(kCuda0, {64, 8}, true),
                        on(kCuda0, {64, 16}, true), on(kCuda0, {64}, true), on(kCuda0, {64}, true)});
  expect_all_graphs(c, all_cuda);
  std::set<std::string> ops;
  for (const Node* n : c.joint().nodes()) ops.insert(n->qualified_name());
  EXPECT_TRUE(ops.count("aten::_thnn_fused_lstm_cell")) << "forward";
  EXPECT_TRUE(ops.count("aten::_thnn_fused_lstm_cell_backward_impl")) << "backward";
}

TEST(DeviceCompile, GruAndRnnLayersTraceAsCellOpsWithoutAGpu) {
  // Eager's gru/rnn_tanh ask cuDNN whether it takes the input, which needs a driver: traced as
  // per-step cells instead (PyTorch's decompositions), every value on cuda:0.
  for (const std::string kind : {"gru", "rnn_tanh"}) {
    const int64_t gates = kind == "gru" ? 3 : 1;
    auto c = compile_training(
        kind,
        [kind](const TensorList& a) {
          using Layers = std::tuple<at::Tensor, at::Tensor> (*)(const at::Tensor&, const at::Tensor&, at::TensorList,
                                                                bool, int64_t, double, bool, bool, bool);
          const Layers run = kind == "gru" ? static_cast<Layers>(&at::gru) : static_cast<Layers>(&at::rnn_tanh);
          auto [out, h] = run(a[0], a[1], {a[2], a[3], a[4], a[5]}, /*has_biases=*/true, 1, 0.0, /*train=*/true,
                              /*bidirectional=*/false, /*batch_first=*/true);
          return TensorList{out.sum() + h.sum()};
        },
        {on(kCuda0, {2, 3, 4}), on(kCuda0, {1, 2, 5}), on(kCuda0, {gates * 5, 4}, true),
         on(kCuda0, {gates * 5, 5}, true), on(kCuda0, {gates * 5}, true), on(kCuda0, {gates * 5}, true)});
    expect_all_graphs(c, all_cuda);
    EXPECT_EQ(total_cpu_fallback_calls(c.output.state()->cpu_fallbacks), 0u) << kind;
    for (const Node* n : c.joint().nodes()) {
      EXPECT_NE(n->qualified_name(), "aten::" + kind + ".input");
      EXPECT_EQ(n->qualified_name().find("cudnn"), std::string::npos) << n->qualified_name();
    }
  }
}

TEST(DeviceCompile, WeightNormTakesTheFusedKernel) {
  // torch.nn.utils.weight_norm over the first dimension: _weight_norm_interface and its backward,
  // traced on aotpipe's Meta kernels.
  auto c = compile_training(
      "weight_norm",
      [](const TensorList& a) { return TensorList{at::conv1d(a[0], at::_weight_norm(a[1], a[2], 0)).sum()}; },
      {on(kCuda0, {2, 4, 9}, true), on(kCuda0, {6, 4, 3}, true), on(kCuda0, {6, 1, 1}, true)});
  expect_all_graphs(c, all_cuda);
  std::set<std::string> ops;
  for (const Node* n : c.joint().nodes()) ops.insert(n->qualified_name());
  EXPECT_TRUE(ops.count("aten::_weight_norm_interface")) << "forward";
  EXPECT_TRUE(ops.count("aten::_weight_norm_interface_backward")) << "backward";
  EXPECT_EQ(total_cpu_fallback_calls(c.output.state()->cpu_fallbacks), 0u) << "no CPU stand-in ran";
}

TEST(DeviceCompile, MixedDevicesAreRejectedNamingOpAndInputs) {
  try {
    trace([](const TensorList& a) { return TensorList{at::mm(a[0], a[1])}; }, {on(kCuda0, {2, 3}), on(kCpu, {3, 2})});
    FAIL() << "expected a TraceError";
  } catch (const TraceError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("aten::mm"));
    EXPECT_THAT(e.what(), ::testing::HasSubstr("'self' (%arg0) is on cuda:0"));
    EXPECT_THAT(e.what(), ::testing::HasSubstr("'mat2' (%arg1) is on cpu"));
  }
  try {
    trace([](const TensorList& a) { return TensorList{a[0] + a[1]}; },
          {on(kCuda0, {3}), on(c10::Device(c10::kCUDA, 1), {3})});
    FAIL() << "expected a TraceError";
  } catch (const TraceError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("aten::add.Tensor"));
    EXPECT_THAT(e.what(), ::testing::HasSubstr("cuda:1"));
  }
  // A 0-dim CPU tensor with a CUDA tensor is fine in either order, and so is copy_ across devices.
  Graph g = trace(
      [](const TensorList& a) {
        return TensorList{a[1] * a[0], a[0] * a[1]};
      },
      {on(kCpu, {}), on(kCuda0, {3})});
  for (const Value* out : g.outputs()) EXPECT_EQ(out->meta()->device, kCuda0);
  TraceOptions functional;
  functional.functionalize = true;
  TraceResult copied = trace_program(
      [](const TensorList& a) {
        a[0].copy_(a[1]);
        return TensorList{a[0] + 1};
      },
      {on(kCuda0, {2, 3}), on(kCpu, {2, 3})}, functional);
  for (const Value* out : copied.graph.outputs()) EXPECT_EQ(out->meta()->device, kCuda0);
}

TEST(DeviceCompile, CpuFallbackKeepsTheReportedDevice) {
  // relu and native_dropout have no C++ Meta kernel: they run on CPU stand-ins but report cuda:0.
  Graph g = trace([](const TensorList& a) { return TensorList{at::dropout(at::relu(a[0]), 0.5, true)}; },
                  {on(kCuda0, {4, 4})});
  for (const Node* n : g.nodes())
    for (const Value* v : n->outputs())
      if (v->meta()) EXPECT_EQ(v->meta()->device, kCuda0) << v->name();
}

TEST(DeviceCompile, CallingWithTensorsElsewhereIsAClearError) {
  CompileOutput out =
      compile("sin_cuda", [](const TensorList& a) { return TensorList{a[0].sin()}; }, {on(kCuda0, {3})});
  try {
    out.runtime({at::randn({3})});
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("input 0 is on cpu, but the function was compiled for cuda:0"));
  }
}

TEST(DeviceCompile, MetadataExamplesReportTheirDevice) {
  at::Tensor x = on(kCuda0, {2, 3}, true);
  EXPECT_TRUE(is_metadata_example(x));
  EXPECT_EQ(x.device(), kCuda0);
  EXPECT_EQ(x.sizes(), at::IntArrayRef({2, 3}));
  EXPECT_TRUE(x.requires_grad());
  EXPECT_FALSE(is_metadata_example(at::randn({2})));
  TraceOptions real;
  real.mode = TraceMode::Real;
  EXPECT_THROW(trace([](const TensorList& a) { return TensorList{a[0] * 2}; }, {x}, real), TraceError);
}

}  // namespace
}  // namespace aotpipe

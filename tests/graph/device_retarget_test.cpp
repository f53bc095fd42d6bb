// retarget_device: what `aotpipe compile --device cuda:0` does to a graph written for the CPU.
// Runs without a GPU (constants then become metadata examples on the device).
#include <aotpipe/graph/device_retarget.h>
#include <aotpipe/graph/parser.h>

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

namespace aotpipe {
namespace {

const c10::Device kGpu("cuda:0");

TEST(DeviceRetarget, MovesValuesFactoriesAndConstantsButNotWrappedNumbers) {
  Graph g("g");
  Value* x = g.add_input("x", TensorMeta::contiguous({4}));
  at::Tensor half = at::scalar_to_tensor(0.5);
  half.unsafeGetTensorImpl()->set_wrapped_number(true);  // `x * 0.5` as an exporter passes it
  Value* scalar = g.add_constant("mul.other", half);
  Value* table = g.add_constant("table", at::ones({4}));
  Node* mul = g.add_call("aten::mul.Tensor", {x, scalar}, {OutputSpec{"", TensorMeta::contiguous({4}), {}}});
  Node* ones = g.add_call(
      "aten::ones",
      {std::vector<int64_t>{4}, Argument::none(), Argument::none(), Argument(c10::IValue(c10::Device(c10::kCPU)))},
      {OutputSpec{"", TensorMeta::contiguous({4}), {}}});
  Node* add = g.add_call("aten::add.Tensor", {mul->output(), table}, {OutputSpec{"", TensorMeta::contiguous({4}), {}}});
  Node* sum = g.add_call("aten::add.Tensor", {add->output(), ones->output()},
                         {OutputSpec{"", TensorMeta::contiguous({4}), {}}});
  g.set_outputs({sum->output()});

  EXPECT_GT(retarget_device(g, kGpu), 0u);
  EXPECT_EQ(x->meta()->device, kGpu);
  EXPECT_EQ(table->meta()->device, kGpu);
  EXPECT_EQ(g.tensor_constants().at("table").device(), kGpu);
  for (Node* node : {mul, ones, add, sum}) EXPECT_EQ(node->output()->meta()->device, kGpu) << node->qualified_name();
  EXPECT_EQ(ones->args()[3].constant().toDevice(), kGpu);
  // The wrapped number stays what eager passes a CUDA kernel: a CPU scalar.
  EXPECT_TRUE(scalar->meta()->device.is_cpu());
  const at::Tensor& kept = g.tensor_constants().at("mul.other");
  EXPECT_TRUE(kept.is_cpu());
  EXPECT_TRUE(kept.unsafeGetTensorImpl()->is_wrapped_number());
}

constexpr const char* kCpuAttention = R"(graph attention(%q: f32[1, 2, 8, 4], %k: f32[1, 2, 8, 4], %v: f32[1, 2, 8, 4]):
  %o: f32[1, 2, 8, 4], %lse: f32[1, 2, 8] = aten::_scaled_dot_product_flash_attention_for_cpu(%q, %k, %v, 0.0, True, scale=0.5)
  %y: f32[1, 2, 8, 4] = aten::mul.Tensor(%o, %o)
  return (%y{}))";

TEST(DeviceRetarget, CpuAttentionBecomesTheCompositeTheDevicePicksFrom) {
  Graph g = parse_graph(fmt::format(fmt::runtime(kCpuAttention), ""));
  retarget_device(g, kGpu);
  ASSERT_EQ(g.num_nodes(), 2u);
  const Node* sdpa = g.nodes()[0];
  EXPECT_EQ(sdpa->qualified_name(), "aten::scaled_dot_product_attention");
  EXPECT_EQ(sdpa->args()[0].value(), g.input(0));
  EXPECT_TRUE(sdpa->args()[3].is_constant() && sdpa->args()[3].constant().isNone());  // attn_mask
  EXPECT_EQ(sdpa->args()[5].constant().toBool(), true);                               // is_causal
  EXPECT_EQ(sdpa->args()[6].constant().toDouble(), 0.5);                              // scale
  EXPECT_EQ(g.nodes()[1]->args()[0].value(), sdpa->output());
  EXPECT_EQ(sdpa->output()->meta()->device, kGpu);

  // Its logsumexp read (a graph output here): the CPU kernel stays, and eager on the device
  // would fail the same way (the compile names it).
  Graph read = parse_graph(fmt::format(fmt::runtime(kCpuAttention), ", %lse"));
  retarget_device(read, kGpu);
  EXPECT_EQ(read.nodes()[0]->qualified_name(), "aten::_scaled_dot_product_flash_attention_for_cpu");

  // For the CPU nothing changes.
  Graph cpu = parse_graph(fmt::format(fmt::runtime(kCpuAttention), ""));
  retarget_device(cpu, c10::Device(c10::kCPU));
  EXPECT_EQ(cpu.nodes()[0]->qualified_name(), "aten::_scaled_dot_product_flash_attention_for_cpu");
}

}  // namespace
}  // namespace aotpipe

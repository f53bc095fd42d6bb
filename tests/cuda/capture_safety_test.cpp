// Which graphs the CUDA-graph backend refuses to capture, decided from the graph alone: runs
// everywhere (no GPU), on graphs written for cuda:0 and on compiles of CUDA metadata examples.
#include <aotpipe/cuda/capture_safety.h>
#include <aotpipe/cuda/cuda_graphs.h>
#include <aotpipe/backend/backend_registry.h>
#include <aotpipe/backend/backend_traits.h>
#include <aotpipe/pipeline/identified.h>
#include <aotpipe/graph/example_tensor.h>
#include <aotpipe/graph/parser.h>
#include <aotpipe/driver/aot_function.h>

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace aotpipe {
namespace {

using ::testing::HasSubstr;

std::optional<std::string> refusal(std::string_view text) { return cuda_graph_refusal(parse_graph(text)); }

TEST(CudaGraphSafety, AcceptsAFunctionalGraphOnTheGpu) {
  EXPECT_EQ(refusal(R"(graph ok(%x: f32[4, 8] device=cuda:0, %s: f32[]):
  %y: f32[4, 8] device=cuda:0 = aten::mul.Tensor(%x, %s)
  %z: f32[4, 8] device=cuda:0, %mask: b8[4, 8] device=cuda:0 = aten::native_dropout(%y, 0.5, True)
  return (%z))"),
            std::nullopt)
      << "a 0-dim CPU input is a scalar the runtime copies in; random ops replay with fresh draws";
}

// Memory-efficient attention returns its RNG state (philox seed, offset) on the host; without
// dropout no kernel reads it, so a replay may hand out the capture's. With dropout it is refused.
TEST(CudaGraphSafety, UnreadHostOutputsAreTheRngStateOfAttentionWithoutDropout) {
  auto graph_with_dropout = [](const char* dropout) {
    return parse_graph(fmt::format(R"(graph g(%q: f32[2, 4, 16, 32] device=cuda:0):
  %o: f32[2, 4, 16, 32] device=cuda:0, %lse: f32[2, 4, 32] device=cuda:0, %seed: i64[] device=cuda:0, %offset: i64[] device=cuda:0 = aten::_scaled_dot_product_efficient_attention(%q, %q, %q, None, True, {}, True)
  return (%o, %lse, %seed, %offset, %q))",
                                   dropout));
  };
  EXPECT_EQ(cuda_graph_refusal(graph_with_dropout("0.0")), std::nullopt);
  EXPECT_EQ(unread_host_outputs(graph_with_dropout("0.0")), (std::vector<bool>{false, false, true, true, false}));
  EXPECT_EQ(unread_host_outputs(graph_with_dropout("0.1")), (std::vector<bool>(5, false)));
}

TEST(CudaGraphSafety, AGraphOfViewsHasNothingToReplay) {
  auto why = refusal(R"(graph g(%x: f32[4, 8] device=cuda:0):
  %t: f32[8, 4] device=cuda:0 = aten::t(%x)
  %v: f32[32] device=cuda:0 = aten::view(%x, [32])
  return (%t, %v, %x))");
  ASSERT_TRUE(why);
  EXPECT_THAT(*why, HasSubstr("launches no kernel"));
}

TEST(CudaGraphSafety, RefusesAnInputOffTheGpuNamingIt) {
  auto why = refusal(R"(graph g(%x: f32[4] device=cuda:0, %w: f32[4]):
  %y: f32[4] device=cuda:0 = aten::add.Tensor(%x, %x)
  return (%y, %w))");
  ASSERT_TRUE(why);
  EXPECT_THAT(*why, HasSubstr("input 1 (%w) is on cpu"));
}

TEST(CudaGraphSafety, RefusesAnOpThatMakesAHostTensor) {
  auto why = refusal(R"(graph g(%x: f32[4] device=cuda:0):
  %c: f32[4] = aten::_to_copy(%x, device=device("cpu"))
  return (%c))");
  ASSERT_TRUE(why);
  EXPECT_THAT(*why, HasSubstr("aten::_to_copy makes %c on cpu"));
}

TEST(CudaGraphSafety, RefusesADataDependentOp) {
  auto why = refusal(R"(graph g(%x: f32[4] device=cuda:0):
  %n: i64[3, 1] device=cuda:0 = aten::nonzero(%x)
  return (%n))");
  ASSERT_TRUE(why);
  EXPECT_THAT(*why, HasSubstr("aten::nonzero has a data-dependent output"));
}

TEST(CudaGraphSafety, RefusesAWriteIntoAGraphInput) {
  auto why = refusal(R"(graph g(%x: f32[4] device=cuda:0):
  %y: f32[4] device=cuda:0 = aten::sin(%x)
  %x2: f32[4] device=cuda:0 = aten::copy_(%x, %y)
  return (%y))");
  ASSERT_TRUE(why);
  EXPECT_THAT(*why, HasSubstr("aten::copy_ writes into graph input %x (argument 'self')"));
  // A write into an intermediate stays inside the graph: fine.
  EXPECT_EQ(refusal(R"(graph g(%x: f32[4] device=cuda:0):
  %y: f32[4] device=cuda:0 = aten::sin(%x)
  %y2: f32[4] device=cuda:0 = aten::mul_.Tensor(%y, %y)
  return (%y2))"),
            std::nullopt);
}

// A compile for cuda:0 from metadata examples (no GPU needed): a refused graph is compiled to the
// interpreter and the refusal is in the compile result's backend notes.
TEST(CudaGraphSafety, ACompileReportsARefusalAsABackendNote) {
  const c10::Device gpu(c10::kCUDA, 0);
  TensorList examples{metadata_example(TensorMeta::contiguous({4, 8}, at::kFloat, gpu, /*requires_grad=*/true))};
  AotConfig config;
  config.fw_compiler = backends::cuda_graphs();
  CompileOutput host_copy = compile(
      "host_copy",
      [](const TensorList& a) {
        return TensorList{a[0].sin(), a[0].to(at::kCPU)};
      },
      examples, config);
  ASSERT_FALSE(host_copy.state()->compiled.notes.empty());
  EXPECT_THAT(
      host_copy.state()->compiled.notes[0],
      ::testing::AllOf(HasSubstr("cuda_graphs: graph"), HasSubstr("runs in the interpreter"), HasSubstr("on cpu")));

  CompileOutput on_gpu = compile(
      "on_gpu", [](const TensorList& a) { return TensorList{a[0].sin().relu()}; }, examples, config);
  EXPECT_THAT(on_gpu.state()->compiled.notes, ::testing::IsEmpty());
}

// The backend is registered by name: what load_package and the CLI find for a manifest's or
// --backend's "cuda_graphs", with the traits and cache identity of backends::cuda_graphs(). (This
// program calls backends::cuda_graphs() itself; that linking alone registers it is
// package_test's TheBackendAManifestNamesIsFoundByName.)
TEST(CudaGraphSafety, TheBackendIsRegisteredByName) {
  const std::vector<std::string> names = registered_backends();
  EXPECT_NE(std::find(names.begin(), names.end(), "cuda_graphs"), names.end());
  const std::optional<Compiler> found = find_backend("cuda_graphs");
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(identity_of(*found), identity_of(backends::cuda_graphs()));
  EXPECT_FALSE(backend_traits_of(*found).recomputation_pays);
}

}  // namespace
}  // namespace aotpipe

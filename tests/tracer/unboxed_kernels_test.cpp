// The tracer records the frequent functional ops through unboxed kernels and everything else
// through its boxed fallback (fallback.cpp). Which path a call takes must not change the trace: for
// every model of the zoo, on the CPU and (fake) on a CUDA device, forward and joint, plain and
// functionalized, the graph traced normally equals, as text, the graph traced with every call
// sent to the fallback; and the unboxed kernels did record part of it.
#include <aotpipe/graph/example_tensor.h>
#include <aotpipe/tracer/internal/unboxed_kernels.h>
#include <aotpipe/tracer/tracer.h>

#include <model_zoo.h>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace aotpipe {
namespace {

enum class Kind { Forward, ForwardFunctionalized, Joint };

std::string trace_text(const zoo::ZooModel& model, Kind kind) {
  TraceOptions options;
  options.functionalize = kind != Kind::Forward;
  const TensorList examples = zoo::metadata_examples(model);
  TraceResult r =
      kind == Kind::Joint ? trace_joint(model.fn, examples, options) : trace_program(model.fn, examples, options);
  EXPECT_TRUE(r.cpu_fallbacks.empty()) << model.name;
  return r.graph.to_string();
}

void expect_same_trace_either_path(c10::Device device) {
  for (const zoo::ZooModel& model : zoo::all_models(2, device)) {
    for (Kind kind : {Kind::Forward, Kind::ForwardFunctionalized, Kind::Joint}) {
      SCOPED_TRACE(model.name + " on " + device.str() + ", kind " + std::to_string(static_cast<int>(kind)));
      const std::size_t before = detail::unboxed_calls();
      const std::string unboxed = trace_text(model, kind);
      // Adam's step is foreach ops alone, which no unboxed kernel records.
      if (model.name != "adam_foreach_step")
        EXPECT_GT(detail::unboxed_calls(), before) << "no call took an unboxed kernel";
      std::string boxed;
      {
        detail::UnboxedKernelsOff off;
        const std::size_t before_off = detail::unboxed_calls();
        boxed = trace_text(model, kind);
        EXPECT_EQ(detail::unboxed_calls(), before_off);
      }
      EXPECT_EQ(unboxed, boxed);
    }
  }
}

TEST(UnboxedKernels, RecordWhatTheFallbackRecordsForEveryZooModelOnTheCpu) {
  expect_same_trace_either_path(c10::Device(c10::kCPU));
}

TEST(UnboxedKernels, RecordWhatTheFallbackRecordsForEveryZooModelOnACudaDevice) {
  expect_same_trace_either_path(c10::Device(c10::kCUDA, 0));  // fake: no GPU needed
}

// Calls the unboxed kernels decline go to the fallback, which decides them as before: a CPU
// scalar tensor beside a CUDA tensor (devices differ), a closed-over real tensor (a constant), a
// call whose Meta kernel fails (the error names the op).
TEST(UnboxedKernels, LeaveMixedDevicesConstantsAndFailuresToTheFallback) {
  const TensorMeta cuda_meta = TensorMeta::contiguous({2, 3}, at::kFloat, c10::Device(c10::kCUDA, 0));
  const at::Tensor constant = at::ones({2, 3});
  auto mixed = [&](const TensorList& in) -> TensorList {
    return {at::mul(in[0], at::scalar_tensor(2.0)), at::add(in[0].to(c10::kCPU), constant)};
  };
  const TensorList examples = {metadata_example(cuda_meta)};
  const std::string unboxed = trace(mixed, examples).to_string();
  std::string boxed;
  {
    detail::UnboxedKernelsOff off;
    boxed = trace(mixed, examples).to_string();
  }
  EXPECT_EQ(unboxed, boxed);

  auto mismatched = [](const TensorList& in) -> TensorList { return {at::add(in[0], in[1])}; };
  const TensorList bad = {metadata_example(TensorMeta::contiguous({2, 3})),
                          metadata_example(TensorMeta::contiguous({4, 5}))};
  try {
    (void)trace(mismatched, bad);
    ADD_FAILURE() << "a trace of mismatched shapes succeeded";
  } catch (const TraceError& e) {
    EXPECT_NE(std::string(e.what()).find("aten::add.Tensor"), std::string::npos) << e.what();
  }
}

// Factories (no tensor argument: the mode's trace), ops given a device (it decides the results'
// device; in a fake trace the kernel gets meta) and ops on lists of tensors take the unboxed path,
// one call each, and record what the fallback records, on the CPU and on a fake CUDA device.
TEST(UnboxedKernels, RecordFactoriesDevicesAndTensorListsAsTheFallbackDoes) {
  using Program = std::function<at::Tensor(const at::Tensor&, const at::Tensor&)>;
  const std::vector<std::pair<std::string, Program>> programs = {
      {"zeros on the inputs' device",
       [](const at::Tensor& x, const at::Tensor&) {
         return at::zeros({2, 3}, x.options());
       }},
      {"empty, default device", [](const at::Tensor&, const at::Tensor&) { return at::empty({4}); }},
      {"arange", [](const at::Tensor& x, const at::Tensor&) { return at::arange(5, x.options().dtype(at::kLong)); }},
      {"scalar_tensor", [](const at::Tensor&, const at::Tensor&) { return at::scalar_tensor(2.0); }},
      {"full_like", [](const at::Tensor& x, const at::Tensor&) { return at::full_like(x, 3.0); }},
      {"zeros_like of another dtype",
       [](const at::Tensor& x, const at::Tensor&) { return at::zeros_like(x, x.options().dtype(at::kDouble)); }},
      {"empty_like on the CPU",
       [](const at::Tensor& x, const at::Tensor&) { return at::empty_like(x, x.options().device(c10::kCPU)); }},
      {"to the CPU as double", [](const at::Tensor& x, const at::Tensor&) { return x.to(c10::kCPU, at::kDouble); }},
      {"new_zeros", [](const at::Tensor& x, const at::Tensor&) { return x.new_zeros({3}); }},
      {"cat",
       [](const at::Tensor& x, const at::Tensor& y) {
         return at::cat({x, y}, 0);
       }},
      {"stack",
       [](const at::Tensor& x, const at::Tensor& y) {
         return at::stack({x, y});
       }},
  };
  for (c10::Device device : {c10::Device(c10::kCPU), c10::Device(c10::kCUDA, 0)}) {
    const TensorMeta meta = TensorMeta::contiguous({2, 3}, at::kFloat, device);
    const TensorList examples = {metadata_example(meta), metadata_example(meta)};
    for (const auto& [name, program] : programs) {
      SCOPED_TRACE(name + " on " + device.str());
      auto fn = [&](const TensorList& in) -> TensorList { return {program(in[0], in[1])}; };
      const std::size_t before = detail::unboxed_calls();
      TraceResult unboxed = trace_program(fn, examples);
      EXPECT_GT(detail::unboxed_calls(), before) << "the call took the fallback";
      EXPECT_TRUE(unboxed.cpu_fallbacks.empty());
      std::string boxed;
      {
        detail::UnboxedKernelsOff off;
        boxed = trace(fn, examples).to_string();
      }
      EXPECT_EQ(unboxed.graph.to_string(), boxed);
    }
    // The device a factory or a device argument names wins over the inputs'.
    auto devices = [](const TensorList& in) -> TensorList {
      return {at::zeros({2}, in[0].options()), at::empty({2}), in[0].to(c10::kCPU)};
    };
    const Graph g = trace(devices, examples);
    ASSERT_EQ(g.outputs().size(), 3u);
    EXPECT_EQ(g.outputs()[0]->meta()->device, device);
    EXPECT_EQ(g.outputs()[1]->meta()->device, c10::Device(c10::kCPU));
    EXPECT_EQ(g.outputs()[2]->meta()->device, c10::Device(c10::kCPU));
  }
  // A list holding a closed-over real tensor, and a factory outside any trace, are not the
  // unboxed path's: the fallback makes the tensor a constant; the factory runs as in eager.
  const at::Tensor constant = at::ones({2, 3});
  auto with_constant = [&](const TensorList& in) -> TensorList { return {at::cat({in[0], constant}, 0)}; };
  const TensorList cpu_examples = {metadata_example(TensorMeta::contiguous({2, 3}))};
  std::string boxed;
  {
    detail::UnboxedKernelsOff off;
    boxed = trace(with_constant, cpu_examples).to_string();
  }
  EXPECT_EQ(trace(with_constant, cpu_examples).to_string(), boxed);
  EXPECT_NE(boxed.find("_tensor_constant"), std::string::npos) << boxed;
  const std::size_t before = detail::unboxed_calls();
  const at::Tensor eager = at::zeros({2, 2});
  EXPECT_EQ(detail::unboxed_calls(), before);
  EXPECT_TRUE(eager.is_cpu() && eager.sum().item<float>() == 0.0f);
}

}  // namespace
}  // namespace aotpipe

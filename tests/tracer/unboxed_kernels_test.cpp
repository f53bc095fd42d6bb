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

#include <string>
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

}  // namespace
}  // namespace aotpipe

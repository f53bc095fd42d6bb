// Per-call time on a GPU, eager vs aot_function (interpreter backend), side by side in one run:
// a 1-element op, a chain of 100 elementwise ops, an MLP; forward only (no grad) and forward +
// backward. Each figure is the median over repeats of (N calls + a device synchronize) / N.
//   cuda_call_bench [--calls N] [--repeats R]
#include <aotpipe/runtime/aot_function.h>

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAFunctions.h>
#include <fmt/format.h>
#include <torch/cuda.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <string>

using aotpipe::TensorList;

namespace {

double median_us_per_call(const std::function<void()>& call, int calls, int repeats) {
  std::vector<double> samples;
  for (int r = 0; r < repeats; ++r) {
    c10::cuda::device_synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) call();
    c10::cuda::device_synchronize();
    const auto t1 = std::chrono::steady_clock::now();
    samples.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / calls);
  }
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

struct Program {
  std::string name;
  aotpipe::Function fn;
  std::function<TensorList(bool requires_grad)> inputs;
};

}  // namespace

int main(int argc, char** argv) {
  int calls = 200;
  int repeats = 7;
  for (int i = 1; i + 1 < argc; ++i) {
    if (!std::strcmp(argv[i], "--calls")) calls = std::stoi(argv[++i]);
    if (!std::strcmp(argv[i], "--repeats")) repeats = std::stoi(argv[++i]);
  }
  if (!torch::cuda::is_available()) {
    fmt::print("no CUDA GPU: nothing to measure\n");
    return 0;
  }
  const c10::Device cuda(c10::kCUDA, 0);
  std::vector<Program> programs;
  programs.push_back({"1-element sin", [](const TensorList& a) { return TensorList{a[0].sin()}; },
                      [&](bool rg) { return TensorList{at::randn({1}, cuda).requires_grad_(rg)}; }});
  programs.push_back({"100-op chain",
                      [](const TensorList& a) {
                        at::Tensor x = a[0];
                        for (int i = 0; i < 25; ++i) x = ((x * 1.01).sin() + 0.5).relu();
                        return TensorList{x};
                      },
                      [&](bool rg) { return TensorList{at::randn({1024}, cuda).requires_grad_(rg)}; }});
  programs.push_back({"MLP 64x512x512x10",
                      [](const TensorList& a) {
                        at::Tensor h = at::relu(at::linear(a[0], a[1], a[2]));
                        return TensorList{at::linear(h, a[3], a[4])};
                      },
                      [&](bool rg) {
                        return TensorList{at::randn({64, 512}, cuda), at::randn({512, 512}, cuda).requires_grad_(rg),
                                          at::randn({512}, cuda).requires_grad_(rg),
                                          at::randn({10, 512}, cuda).requires_grad_(rg),
                                          at::randn({10}, cuda).requires_grad_(rg)};
                      }});
  fmt::print("device: {}; {} calls x {} repeats, median us per call\n", at::cuda::getDeviceProperties(0)->name, calls,
             repeats);
  fmt::print("{:<20} {:>12} {:>12} {:>8} {:>12} {:>12} {:>8}\n", "program", "eager fw", "aotpipe fw", "ratio",
             "eager fw+bw", "aotpipe fw+bw", "ratio");
  for (const Program& p : programs) {
    aotpipe::CompiledFunction compiled = aotpipe::aot_function(p.fn);
    double eager_fw, comp_fw, eager_bw, comp_bw;
    {
      at::NoGradGuard no_grad;
      TensorList in = p.inputs(false);
      (void)compiled(in);
      eager_fw = median_us_per_call([&] { (void)p.fn(in); }, calls, repeats);
      comp_fw = median_us_per_call([&] { (void)compiled(in); }, calls, repeats);
    }
    TensorList in = p.inputs(true);
    (void)compiled(in);
    auto fw_bw = [&](const aotpipe::Function& f) {
      return [&in, f] {
        TensorList out = f(in);
        out[0].sum().backward();
      };
    };
    eager_bw = median_us_per_call(fw_bw(p.fn), calls, repeats);
    comp_bw = median_us_per_call(fw_bw([&compiled](const TensorList& a) { return compiled(a); }), calls, repeats);
    fmt::print("{:<20} {:>12.1f} {:>12.1f} {:>8.2f} {:>12.1f} {:>12.1f} {:>8.2f}\n", p.name, eager_fw, comp_fw,
               comp_fw / eager_fw, eager_bw, comp_bw, comp_bw / eager_bw);
  }
  return 0;
}

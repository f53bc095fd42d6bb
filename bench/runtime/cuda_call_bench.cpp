// Per-call time on a GPU, side by side in one run: eager, aot_function with the interpreter
// backend, and aot_function with the CUDA-graph backend (without and with a stream sync after each
// call), against the floor: the GPU time per call of the same kernels, measured with CUDA events
// over back-to-back replays of a raw CUDA graph of the eager program. Programs: a 1-element op,
// chains of 10/100/1000 elementwise ops, an MLP, a transformer block at batch 2; forward only
// (no grad) and forward + backward. Each time is the median over repeats of
// (N calls + a device synchronize) / N.
//   cuda_call_bench [--calls N] [--repeats R] [--only NAME] [--partitioner min_cut|default] [--lend]
// (min_cut, the default, recomputes cheap forward ops in the backward: with backends that do not
// fuse them, that is a kernel each; `default` saves what the backward reads instead. --lend: the
// forward lends its saved values to the backward instead of copying them, CudaGraphOptions::
// lend_saved_outputs).
#include <aotpipe/cuda/cuda_graphs.h>
#include <aotpipe/driver/aot_function.h>
#include <aotpipe/stages/partition/default_partition.h>
#include <aotpipe/stages/partition/min_cut_partition.h>

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <fmt/format.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/cuda.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <optional>
#include <string>

using aotpipe::TensorList;

namespace {

const c10::Device kCuda(c10::kCUDA, 0);

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

// GPU time per call of `body`'s kernels: `body` captured once into a raw CUDA graph (global
// capture mode, as make_graphed_callables: the backward runs on autograd's device thread), then
// replayed back to back between two events, so the GPU never waits for the host.
std::optional<double> floor_us_per_call(const std::function<void()>& body, int calls, int repeats) {
  try {
    const c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool();
    at::cuda::CUDAGraph graph;
    {
      const c10::cuda::CUDAStreamGuard guard(side);
      for (int i = 0; i < 3; ++i) body();  // warm-up on the capture stream
      side.synchronize();
      graph.capture_begin();
      body();
      graph.capture_end();
    }
    std::vector<double> samples;
    for (int r = 0; r < repeats; ++r) {
      at::cuda::CUDAEvent start(cudaEventDefault), stop(cudaEventDefault);
      const c10::cuda::CUDAStream stream = c10::cuda::getCurrentCUDAStream();
      graph.replay();  // the first replay after instantiation uploads the graph
      start.record(stream);
      for (int i = 0; i < calls; ++i) graph.replay();
      stop.record(stream);
      stop.synchronize();
      samples.push_back(start.elapsed_time(stop) * 1000.0 / calls);
    }
    std::sort(samples.begin(), samples.end());
    return samples[samples.size() / 2];
  } catch (const std::exception& e) {
    fmt::print(stderr, "floor: capture failed: {}\n", e.what());
    return std::nullopt;
  }
}

struct Program {
  std::string name;
  aotpipe::Function fn;
  std::function<TensorList(bool requires_grad)> inputs;
};

at::Tensor randn(at::IntArrayRef sizes, bool requires_grad = false, double scale = 1.0) {
  return (at::randn(sizes, kCuda) * scale).requires_grad_(requires_grad);
}

Program chain(int ops) {
  return {fmt::format("chain {}", ops),
          [ops](const TensorList& a) {
            at::Tensor x = a[0];
            for (int i = 0; i < ops; ++i) {
              switch (i % 4) {
                case 0: x = x * 1.01; break;
                case 1: x = x.sin(); break;
                case 2: x = x + 0.5; break;
                default: x = x.relu(); break;
              }
            }
            return TensorList{x};
          },
          [](bool rg) { return TensorList{randn({1024}, rg)}; }};
}

Program transformer_block() {
  constexpr int64_t B = 2, T = 16, D = 256, H = 4;
  return {"transformer block",
          [](const TensorList& a) {
            const at::Tensor& x = a[0];
            at::Tensor h = at::layer_norm(x, {D}, a[1], a[2]);
            at::Tensor qkv = at::linear(h, a[3], a[4]).view({B, T, 3, H, D / H}).permute({2, 0, 3, 1, 4});
            at::Tensor att = at::scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], {}, 0.0, /*is_causal=*/true);
            at::Tensor y = x + at::linear(att.transpose(1, 2).reshape({B, T, D}), a[5], a[6]);
            h = at::layer_norm(y, {D}, a[7], a[8]);
            return TensorList{y + at::linear(at::gelu(at::linear(h, a[9], a[10])), a[11], a[12])};
          },
          [](bool rg) {
            return TensorList{randn({B, T, D}),
                              at::ones({D}, kCuda).requires_grad_(rg),
                              at::zeros({D}, kCuda).requires_grad_(rg),
                              randn({3 * D, D}, rg, 0.05),
                              randn({3 * D}, rg, 0.05),
                              randn({D, D}, rg, 0.05),
                              randn({D}, rg, 0.05),
                              at::ones({D}, kCuda).requires_grad_(rg),
                              at::zeros({D}, kCuda).requires_grad_(rg),
                              randn({4 * D, D}, rg, 0.05),
                              randn({4 * D}, rg, 0.05),
                              randn({D, 4 * D}, rg, 0.05),
                              randn({D}, rg, 0.05)};
          }};
}

std::vector<Program> programs() {
  std::vector<Program> p;
  p.push_back({"1-element sin", [](const TensorList& a) { return TensorList{a[0].sin()}; },
               [](bool rg) { return TensorList{randn({1}, rg)}; }});
  for (int ops : {10, 100, 1000}) p.push_back(chain(ops));
  p.push_back({"MLP 64x512x512x10",
               [](const TensorList& a) {
                 at::Tensor h = at::relu(at::linear(a[0], a[1], a[2]));
                 return TensorList{at::linear(h, a[3], a[4])};
               },
               [](bool rg) {
                 return TensorList{randn({64, 512}), randn({512, 512}, rg, 0.05), randn({512}, rg, 0.05),
                                   randn({10, 512}, rg, 0.05), randn({10}, rg, 0.05)};
               }});
  p.push_back(transformer_block());
  return p;
}

std::string cell(std::optional<double> v) { return v ? fmt::format("{:.1f}", *v) : std::string("-"); }
std::string ratio(double a, std::optional<double> b) { return b ? fmt::format("{:.2f}", a / *b) : std::string("-"); }

void print_row(const std::string& name, double eager, double interp, double graphs, double eager_sync,
               double graphs_sync, std::optional<double> floor) {
  fmt::print("{:<20} {:>9.1f} {:>9.1f} {:>9.1f} {:>10.1f} {:>10.1f} {:>8} {:>9} {:>9}\n", name, eager, interp, graphs,
             eager_sync, graphs_sync, cell(floor), ratio(eager, graphs), ratio(graphs, floor));
}

}  // namespace

int main(int argc, char** argv) {
  int calls = 200;
  int repeats = 7;
  std::string only;
  std::string partitioner = "min_cut";
  bool lend = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--lend")) lend = true;
    if (i + 1 >= argc) break;
    if (!std::strcmp(argv[i], "--partitioner")) partitioner = argv[++i];
    if (!std::strcmp(argv[i], "--calls")) calls = std::stoi(argv[++i]);
    if (!std::strcmp(argv[i], "--repeats")) repeats = std::stoi(argv[++i]);
    if (!std::strcmp(argv[i], "--only")) only = argv[++i];
  }
  if (!torch::cuda::is_available()) {
    fmt::print("no CUDA GPU: nothing to measure\n");
    return 0;
  }
  aotpipe::AotConfig interp_config;
  interp_config.partition_fn = partitioner == "default" ? aotpipe::partitioners::default_partition()
                                                        : aotpipe::partitioners::min_cut_rematerialization_partition();
  aotpipe::AotConfig graphs_config = interp_config;
  graphs_config.fw_compiler = aotpipe::backends::cuda_graphs({.lend_saved_outputs = lend});
  fmt::print("device: {}; {} calls x {} repeats; partitioner {}{}; median us per call\n",
             at::cuda::getDeviceProperties(0)->name, calls, repeats, partitioner, lend ? "; saved values lent" : "");
  const std::string header =
      fmt::format("{:<20} {:>9} {:>9} {:>9} {:>10} {:>10} {:>8} {:>9} {:>9}\n", "program", "eager", "interp", "graphs",
                  "eager+sync", "graph+sync", "floor", "eager/gr", "gr/floor");
  for (const bool backward : {false, true}) {
    fmt::print("\n{}\n{}", backward ? "forward + backward (loss = out.sum())" : "forward only (no grad)", header);
    for (const Program& p : programs()) {
      if (!only.empty() && p.name != only) continue;
      try {
        aotpipe::CompiledFunction interp = aotpipe::aot_function(p.fn, interp_config);
        aotpipe::CompiledFunction graphs = aotpipe::aot_function(p.fn, graphs_config);
        std::optional<at::NoGradGuard> no_grad;
        if (!backward) no_grad.emplace();
        TensorList in = p.inputs(backward);
        TensorList params;
        for (const at::Tensor& t : in)
          if (t.requires_grad()) params.push_back(t);
        auto run = [&](const aotpipe::Function& f) {
          return [&in, backward, f] {
            TensorList out = f(in);
            if (backward) out[0].sum().backward();
          };
        };
        auto synced = [](const std::function<void()>& f) {
          return [f] {
            f();
            c10::cuda::getCurrentCUDAStream().synchronize();
          };
        };
        const aotpipe::Function eager_fn = p.fn;
        const aotpipe::Function interp_fn = [&interp](const TensorList& a) { return interp(a); };
        const aotpipe::Function graphs_fn = [&graphs](const TensorList& a) { return graphs(a); };
        run(interp_fn)();  // compile, capture
        run(graphs_fn)();
        run(eager_fn)();
        const double eager = median_us_per_call(run(eager_fn), calls, repeats);
        const double interpreted = median_us_per_call(run(interp_fn), calls, repeats);
        const double replayed = median_us_per_call(run(graphs_fn), calls, repeats);
        const double eager_sync = median_us_per_call(synced(run(eager_fn)), calls, repeats);
        const double replayed_sync = median_us_per_call(synced(run(graphs_fn)), calls, repeats);
        const std::optional<double> floor = floor_us_per_call(
            [&] {
              TensorList out = p.fn(in);
              if (backward) (void)torch::autograd::grad({out[0].sum()}, params);
            },
            calls, repeats);
        print_row(p.name, eager, interpreted, replayed, eager_sync, replayed_sync, floor);
      } catch (const std::exception& e) { fmt::print("{:<20} failed: {}\n", p.name, e.what()); }
    }
  }
  const aotpipe::CudaGraphCounters c = aotpipe::cuda_graph_counters();
  fmt::print(
      "\ncuda_graphs: {} graphs captured, {} calls replayed, {} calls in the interpreter; {} lent, {} read in "
      "place, {} taken back\n",
      c.captures, c.replays, c.fallback_calls, c.lent_values, c.lent_inputs_read, c.lent_values_copied);
  return 0;
}

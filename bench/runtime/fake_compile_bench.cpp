// Fake compiles cost the same at any batch size: compile time and peak memory of model-zoo
// training blocks at batch 1 and 256 (each in a fresh process, so peak memory is its own), then,
// per model, the tracing cost against the meta-dispatch floor and the whole compile against one
// meta pass of the program. Prints tables (docs/benchmarks.md):
//
//   build/bench/runtime/fake_compile_bench [--repeats N] [--batch-ms MS] [--floor-only] [--concurrent-fw-bw]
// (--concurrent-fw-bw: every compile sets AotConfig::compile_fw_bw_concurrently.)
#include <aotpipe/graph/example_tensor.h>
#include <aotpipe/tracer/tracer.h>
#include <aotpipe/driver/aot_function.h>

#include <model_zoo.h>

#include "median_time.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/autograd.h>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

namespace {

using namespace aotpipe;

int repeats = 5;
double batch_ms = 5;       // the floor table's batches of back-to-back calls last at least this long
AotConfig compile_config;  // what every compile of this run uses

// VmHWM (peak resident set) of this process, in MiB.
double peak_rss_mib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  return -1;
}

using aotpipe::bench::median_ms;

zoo::ZooModel model_named(const std::string& name, int64_t batch) {
  for (zoo::ZooModel& m : zoo::all_models(batch))
    if (m.name == name) return std::move(m);
  throw std::invalid_argument("no zoo model " + name);
}

// The examples with requires_grad off: what the trace column traces (a forward, no autograd).
TensorList no_grad_examples_of(const zoo::ZooModel& model) {
  TensorList args;
  for (TensorMeta meta : model.inputs) {
    meta.requires_grad = false;
    args.push_back(metadata_example(meta));
  }
  return args;
}

// Plain meta tensors (no tracing): what the floor runs on.
TensorList meta_inputs(const zoo::ZooModel& model, bool with_grad) {
  TensorList args;
  for (const TensorMeta& meta : model.inputs) {
    at::Tensor t = at::empty_strided(meta.sizes, meta.strides, at::TensorOptions().dtype(meta.dtype).device(at::kMeta));
    if (with_grad && meta.requires_grad) t.requires_grad_(true);
    args.push_back(t);
  }
  return args;
}

// Child mode: one model at one batch; prints "compile_ms rss_before_mib peak_rss_mib fallback_calls".
int run_one(const std::string& name, int64_t batch) {
  const zoo::ZooModel model = model_named(name, batch);
  const TensorList args = zoo::metadata_examples(model);
  compile(model.name, model.fn, args, compile_config);  // warm-up: first-call costs (op lookup, kernels' statics)
  const double before = peak_rss_mib();
  std::size_t fallbacks = 0;
  const double ms = median_ms(
      [&] {
        fallbacks =
            total_cpu_fallback_calls(compile(model.name, model.fn, args, compile_config).state()->cpu_fallbacks);
      },
      repeats);
  fmt::print("{:.3f} {:.1f} {:.1f} {}\n", ms, before, peak_rss_mib(), fallbacks);
  return 0;
}

struct OneResult {
  double ms = 0, before = 0, peak = 0;
  std::size_t fallbacks = 0;
};

OneResult spawn_one(const std::string& self, const std::string& name, int64_t batch) {
  const std::string command = fmt::format("'{}' --one {} {} --repeats {}{}", self, name, batch, repeats,
                                          compile_config.compile_fw_bw_concurrently ? " --concurrent-fw-bw" : "");
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
  OneResult r;
  if (!pipe || std::fscanf(pipe.get(), "%lf %lf %lf %zu", &r.ms, &r.before, &r.peak, &r.fallbacks) != 4)
    throw std::runtime_error("child failed: " + command);
  return r;
}

// Batch 1 and 256 compiled alternately in this process (side by side, so machine noise hits both
// alike), one compile at a time; the median of each.
std::array<double, 2> side_by_side_ms(const std::string& name) {
  const zoo::ZooModel small = model_named(name, 1), large = model_named(name, 256);
  const TensorList small_args = zoo::metadata_examples(small), large_args = zoo::metadata_examples(large);
  auto compile_small = [&] { (void)compile(small.name, small.fn, small_args, compile_config); };
  auto compile_large = [&] { (void)compile(large.name, large.fn, large_args, compile_config); };
  return bench::interleaved_median_ms(repeats, /*batch_ms=*/0, compile_small, compile_large);
}

void batch_table(const std::string& self) {
  fmt::print(
      "Compile (all stages, training) at batch 1 and 256: time side by side in one process (median of {} "
      "alternating compiles); memory in a fresh process per row\n\n",
      repeats);
  fmt::print("{:<24} {:>6} {:>11} {:>12} {:>14} {:>13} {:>9}\n", "model", "batch", "compile ms", "RSS before MiB",
             "peak RSS MiB", "compile MiB", "fallback");
  for (const char* name : {"resnet50_bottleneck", "unet_up_block", "vit_b16_encoder_layer"}) {
    const OneResult small = spawn_one(self, name, 1), large = spawn_one(self, name, 256);
    const auto [small_ms, large_ms] = side_by_side_ms(name);
    for (auto [batch, ms, r] : {std::tuple{1, small_ms, small}, std::tuple{256, large_ms, large}})
      fmt::print("{:<24} {:>6} {:>11.2f} {:>14.1f} {:>14.1f} {:>13.1f} {:>9}\n", name, batch, ms, r.before, r.peak,
                 r.peak - r.before, r.fallbacks);
    fmt::print("{:<24} {:>6} {:>11.2f}x {:>27} {:>12.1f}\n", "", "256/1", large_ms / small_ms, "",
               (large.peak - large.before) - (small.peak - small.before));
  }
}

void floor_table() {
  fmt::print(
      "\nAgainst the meta-dispatch floor (batch 32, in process; per call, median of {} alternating batches of "
      "calls, each batch at least {} ms)\n",
      repeats, batch_ms);
  fmt::print("  trace: fake trace of the forward (no autograd), vs the forward run on plain meta tensors\n");
  fmt::print("  compile: all stages (training), vs forward+backward run on plain meta tensors\n");
  fmt::print(
      "  added ops: what tracing the forward twice over adds, vs what running it twice adds (a trace's fixed\n"
      "    costs, such as making its inputs and its graph, left out)\n\n");
  fmt::print("{:<24} {:>5} {:>10} {:>10} {:>8} {:>8} {:>10} {:>11} {:>11} {:>9}\n", "model", "ops", "floor fw", "trace",
             "trace/", "us/op", "added ops", "floor fw+bw", "compile", "compile/");
  fmt::print("{:<24} {:>5} {:>10} {:>10} {:>8} {:>8} {:>10} {:>11} {:>11} {:>9}\n", "", "", "ms", "ms", "floor",
             "trace", "trace/flr", "ms", "ms", "floor");
  // Two passes over the models: the twice-over traces' large graphs change the heap that later
  // traces run on (interleaved with them, an LSTM's trace measured 10% slower), so they run
  // only once every other column is measured.
  struct Row {
    std::size_t ops = 0;
    double floor_fw_ms = 0, trace_ms = 0, floor_joint_ms = 0, compile_ms = 0, added_ratio = 0;
  };
  const std::vector<zoo::ZooModel> models = zoo::all_models(32);
  std::vector<Row> rows(models.size());
  for (bool added_ops_pass : {false, true}) {
    for (std::size_t m = 0; m < models.size(); ++m) {
      const zoo::ZooModel& model = models[m];
      Row& row = rows[m];
      const TensorList plain = meta_inputs(model, false);
      const TensorList examples = zoo::metadata_examples(model), no_grad_examples = no_grad_examples_of(model);
      // Forward: the program on meta tensors vs its fake trace. Joint: forward + backward on meta
      // tensors vs the whole compile. Measured side by side, and so are the added ops' four.
      auto floor_fw = [&] {
        at::NoGradGuard g;
        (void)model.fn(plain);
      };
      auto trace = [&] { (void)trace_program(model.fn, no_grad_examples); };
      if (added_ops_pass) {
        // The forward twice over, both results kept: the second pass costs what one more copy
        // of the program's ops costs, in the trace and on plain meta tensors alike.
        auto twice = [&](const TensorList& inputs) {
          TensorList outs = model.fn(inputs), more = model.fn(inputs);
          outs.insert(outs.end(), more.begin(), more.end());
          return outs;
        };
        auto floor_fw_twice = [&] {
          at::NoGradGuard g;
          (void)twice(plain);
        };
        auto trace_twice = [&] { (void)trace_program(twice, no_grad_examples); };
        const auto [once_floor, once_trace, twice_floor, twice_trace] =
            bench::interleaved_median_ms(repeats, batch_ms, floor_fw, trace, floor_fw_twice, trace_twice);
        row.added_ratio = (twice_trace - once_trace) / (twice_floor - once_floor);
        continue;
      }
      auto floor_joint = [&] {
        const TensorList with_grad = meta_inputs(model, true);
        TensorList outs = model.fn(with_grad);
        std::vector<at::Tensor> params;
        for (const auto& t : with_grad)
          if (t.requires_grad()) params.push_back(t);
        std::vector<at::Tensor> diff_outs, grads_out;
        for (const auto& o : outs)
          if (o.requires_grad()) diff_outs.push_back(o), grads_out.push_back(at::ones_like(o));
        if (!params.empty() && !diff_outs.empty())
          (void)torch::autograd::grad(diff_outs, params, grads_out, false, false, true);
      };
      auto compile_all = [&] { (void)compile(model.name, model.fn, examples, compile_config); };
      row.ops = trace_program(model.fn, no_grad_examples).graph.nodes().size();
      const auto [floor_fw_ms, trace_ms, floor_joint_ms, compile_ms] =
          bench::interleaved_median_ms(repeats, batch_ms, floor_fw, trace, floor_joint, compile_all);
      row.floor_fw_ms = floor_fw_ms, row.trace_ms = trace_ms, row.floor_joint_ms = floor_joint_ms;
      row.compile_ms = compile_ms;
    }
  }
  for (std::size_t m = 0; m < models.size(); ++m) {
    const Row& r = rows[m];
    fmt::print("{:<24} {:>5} {:>10.3f} {:>10.3f} {:>7.1f}x {:>8.1f} {:>9.1f}x {:>11.3f} {:>11.3f} {:>8.1f}x\n",
               models[m].name, r.ops, r.floor_fw_ms, r.trace_ms, r.trace_ms / r.floor_fw_ms,
               1000 * r.trace_ms / std::max<std::size_t>(r.ops, 1), r.added_ratio, r.floor_joint_ms, r.compile_ms,
               r.compile_ms / r.floor_joint_ms);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  for (std::size_t i = 0; i + 1 < args.size(); ++i)
    if (args[i] == "--repeats")
      repeats = std::stoi(args[i + 1]);
    else if (args[i] == "--batch-ms")
      batch_ms = std::stod(args[i + 1]);
  compile_config.compile_fw_bw_concurrently = std::find(args.begin(), args.end(), "--concurrent-fw-bw") != args.end();
  at::set_num_threads(1);
  if (args.size() >= 3 && args[0] == "--one") return run_one(args[1], std::stoll(args[2]));
  // For a profiler: `--loop trace|compile|floor MODEL N` runs one column's work N times (floor:
  // the forward on plain meta tensors, what the trace column is compared with).
  if (args.size() >= 4 && args[0] == "--loop") {
    const zoo::ZooModel model = model_named(args[2], 32);
    const TensorList examples = zoo::metadata_examples(model), no_grad_examples = no_grad_examples_of(model);
    const TensorList plain = meta_inputs(model, false);
    (void)trace_program(model.fn, no_grad_examples);  // loads aotpipe's Meta kernels, which the floor uses too
    for (int i = 0, n = std::stoi(args[3]); i < n; ++i) {
      if (args[1] == "trace") {
        (void)trace_program(model.fn, no_grad_examples);
      } else if (args[1] == "floor") {
        at::NoGradGuard g;
        (void)model.fn(plain);
      } else {
        (void)compile(model.name, model.fn, examples, compile_config);
      }
    }
    return 0;
  }
  const bool all = std::find(args.begin(), args.end(), "--floor-only") == args.end();
  if (all) batch_table(argv[0]);
  floor_table();
  return 0;
}

// Training-step time and GPU memory of one exported program on a CUDA device under one backend
// and partitioner, for bench/export/gpt2_cuda_step.py, which runs it once per configuration (a
// process each: GPU memory figures of one configuration only) beside PyTorch eager and prints
// one table.
//
//   cuda_step_bench PT2 --backend interpreter|planned|cuda_graphs|cuda_graphs_lend|cuda_graphs_static
//                   [--partitioner auto|min_cut|default] [--samples N] [--batch-ms MS] [--device cuda|cpu]
//
// --device cpu runs the same measurement on the CPU (memory from tools/memory_meter), so that the
// benchmark's plumbing is tested where there is no GPU (tests/export: gpt2_step_bench_on_cpu).
//
// One JSON line, milliseconds and bytes:
//   first_step_ms  load + compile + the first training step, from scratch
//   compile_ms     the training compile at the sample inputs
//   step_ms        one training step (forward, backward with fixed gradients, .grad reset, then a
//                  device synchronize), median of batches
//   state_bytes    GPU memory of the loaded program's state and sample inputs
//   peak_bytes     the most GPU memory a steady step holds beyond state_bytes (a CUDA graph's
//                  static memory, held between steps, included)
//   ops_forward, ops_backward, partitioner, notes (the backends'), captures, replays, fallback_calls,
//   lent_values, lent_inputs_read, lent_values_copied (cuda_graphs), planned_runs, unplanned_runs,
//   out_calls_refused, out_calls_out_of_memory (planned)
#include <aotpipe/cuda/cuda_graphs.h>
#include <aotpipe/export/compiled_exported_program.h>
#include <aotpipe/graph/interpreter.h>
#include <aotpipe/stages/partition/default_partition.h>
#include <aotpipe/stages/partition/min_cut_partition.h>

#include "cpu_memory_meter.h"
#include "median_time.h"
#include "training_step.h"

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <nlohmann/json.hpp>

#include <iostream>
#include <string>

namespace {

namespace bench = aotpipe::bench;

// Where the step runs, and how its memory is read there.
struct Device {
  c10::Device device;
  void synchronize() const {
    if (device.is_cuda()) c10::cuda::device_synchronize();
  }
  // Bytes allocated now (CUDA: the caching allocator's; CPU: tensors made since start_counting).
  std::int64_t allocated_bytes() const { return device.is_cuda() ? cuda_bytes(false) : aotpipe_meter_live_bytes(); }
  void start_counting() const {
    if (device.is_cuda())
      c10::cuda::CUDACachingAllocator::emptyCache();
    else
      aotpipe_meter_start();
  }
  // The most bytes `step()` held at once beyond `before` (what was allocated when it started).
  template <class F>
  std::int64_t peak_bytes(std::int64_t before, F&& step) const {
    if (!device.is_cuda()) return aotpipe::peak_cpu_bytes(step);
    c10::cuda::CUDACachingAllocator::resetPeakStats(c10::cuda::current_device());
    step();
    return cuda_bytes(true) - before;
  }

 private:
  static std::int64_t cuda_bytes(bool peak) {
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(c10::cuda::current_device());
    const auto& aggregate = stats.allocated_bytes[static_cast<std::size_t>(c10::CachingAllocator::StatType::AGGREGATE)];
    return peak ? aggregate.peak : aggregate.current;
  }
};

aotpipe::AotConfig config_for(const std::string& backend, const std::string& partitioner) {
  aotpipe::AotConfig config;
  if (backend == "cuda_graphs") {
    config.fw_compiler = aotpipe::backends::cuda_graphs();
  } else if (backend == "cuda_graphs_lend") {
    config.fw_compiler = aotpipe::backends::cuda_graphs({.lend_saved_outputs = true});
  } else if (backend == "cuda_graphs_static") {
    config.fw_compiler = aotpipe::backends::cuda_graphs({.outputs = aotpipe::CudaGraphOptions::Outputs::static_alias});
  } else if (backend == "planned") {
    config.fw_compiler = aotpipe::backends::planned_interpreter();
  } else if (backend != "interpreter") {
    throw std::invalid_argument("unknown backend '" + backend + "'");
  }
  if (partitioner == "min_cut") {
    config.partition_fn = aotpipe::partitioners::min_cut_rematerialization_partition();
  } else if (partitioner == "default") {
    config.partition_fn = aotpipe::partitioners::default_partition();
  } else if (partitioner != "auto") {
    throw std::invalid_argument("unknown partitioner '" + partitioner + "'");
  }
  return config;
}

nlohmann::json measure(const std::filesystem::path& pt2, const aotpipe::AotConfig& config, int samples, double batch_ms,
                       const Device& on) {
  const aotpipe::LoadExportedProgramOptions load_options{.device = on.device, .map_weights = false};
  nlohmann::json row;
  row["first_step_ms"] = bench::elapsed_ms([&] {
    aotpipe::ExportedProgram program = aotpipe::load_exported_program(pt2, load_options);
    aotpipe::CompiledExportedProgram compiled = aotpipe::compile_exported_program(program, config);
    bench::TrainingStep{[&](const aotpipe::TensorList& in) { return compiled(in); }, &program,
                        bench::sample_inputs(program)}();
    on.synchronize();
  });
  // The planned backend's arenas stay cached on the threads that ran it (on a GPU the backward's
  // on autograd's device thread); the measured program would reuse them and its peak leave them
  // out. This frees every thread's.
  aotpipe::release_cached_arenas();
  on.start_counting();
  const std::int64_t before = on.allocated_bytes();
  aotpipe::ExportedProgram program = aotpipe::load_exported_program(pt2, load_options);
  const aotpipe::TensorList inputs = bench::sample_inputs(program);
  row["state_bytes"] = on.allocated_bytes() - before;
  aotpipe::CompiledExportedProgram compiled = aotpipe::compile_exported_program(program, config);
  std::shared_ptr<const aotpipe::CompileState> state;
  row["compile_ms"] = bench::elapsed_ms([&] { state = compiled.compiled_state(inputs); });
  if (state->partition) {
    row["ops_forward"] = state->partition->forward.num_nodes();
    row["ops_backward"] = state->partition->backward.num_nodes();
    row["partitioner"] = state->partition->partitioner;
    row["saved"] = state->partition->saved_values.size();
  }
  row["notes"] = state->compiled.notes;
  const bench::TrainingStep train{[&](const aotpipe::TensorList& in) { return compiled(in); }, &program, inputs};
  auto step = [&] {
    train();
    on.synchronize();
  };
  step();  // the capture, for CUDA graphs
  step();
  row["peak_bytes"] = on.peak_bytes(before + row["state_bytes"].get<std::int64_t>(), step);
  row["step_ms"] = bench::interleaved_median_ms(samples, batch_ms, step)[0];
  const aotpipe::CudaGraphCounters counters = aotpipe::cuda_graph_counters();
  row["captures"] = counters.captures;
  row["replays"] = counters.replays;
  row["fallback_calls"] = counters.fallback_calls;
  row["lent_values"] = counters.lent_values;
  row["lent_values_copied"] = counters.lent_values_copied;
  row["lent_inputs_read"] = counters.lent_inputs_read;
  // The planned backend: runs on its plan, runs off it (inputs not laid out as traced), refusals.
  const aotpipe::InterpreterCounters interpreter = aotpipe::interpreter_counters();
  row["planned_runs"] = interpreter.planned_runs;
  row["unplanned_runs"] = interpreter.unplanned_runs;
  row["out_calls_refused"] = interpreter.out_calls_refused;
  row["out_calls_out_of_memory"] = interpreter.out_calls_out_of_memory;
  return row;
}

}  // namespace

int main(int argc, char** argv) {
  std::filesystem::path pt2;
  std::string backend = "interpreter";
  std::string partitioner = "auto";
  int samples = 7;
  double batch_ms = 200;
  std::string device = "cuda";
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string arg = argv[i];
      auto next = [&]() -> std::string {
        if (i + 1 >= argc) throw std::invalid_argument(arg + " needs a value");
        return argv[++i];
      };
      if (arg == "--backend") {
        backend = next();
      } else if (arg == "--partitioner") {
        partitioner = next();
      } else if (arg == "--samples") {
        samples = std::max(1, std::stoi(next()));
      } else if (arg == "--batch-ms") {
        batch_ms = std::stod(next());
      } else if (arg == "--device") {
        device = next();
        if (device != "cuda" && device != "cpu") throw std::invalid_argument("--device is cuda or cpu, not " + device);
      } else if (pt2.empty() && !arg.starts_with("-")) {
        pt2 = arg;
      } else {
        throw std::invalid_argument("unknown argument '" + arg + "'");
      }
    }
    if (pt2.empty()) throw std::invalid_argument("no .pt2 archive given");
    const Device on{device == "cpu" ? c10::Device(c10::kCPU) : c10::Device(c10::kCUDA, 0)};
    if (on.device.is_cpu() && !aotpipe_meter_install())
      throw std::runtime_error("the CPU memory meter could not be installed");
    nlohmann::json row = measure(pt2, config_for(backend, partitioner), samples, batch_ms, on);
    row["backend"] = backend;
    row["config_partitioner"] = partitioner;
    std::cout << row.dump() << std::endl;
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "cuda_step_bench: " << e.what()
              << "\nusage: cuda_step_bench PT2 --backend interpreter|planned|cuda_graphs|cuda_graphs_lend|"
                 "cuda_graphs_static [--partitioner auto|min_cut|default] [--samples N] [--batch-ms MS] "
                 "[--device cuda|cpu]\n";
    return 2;
  }
}

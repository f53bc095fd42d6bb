// Training-step time and GPU memory of one exported program on a CUDA device under one backend
// and partitioner, for bench/export/gpt2_cuda_step.py, which runs it once per configuration (a
// process each: GPU memory figures of one configuration only) beside PyTorch eager and prints
// one table.
//
//   cuda_step_bench PT2 --backend interpreter|planned|cuda_graphs|cuda_graphs_lend|cuda_graphs_static
//                   [--partitioner auto|min_cut|default] [--samples N] [--batch-ms MS]
//
// One JSON line, milliseconds and bytes:
//   first_step_ms  load + compile + the first training step, from scratch
//   compile_ms     the training compile at the sample inputs
//   step_ms        one training step (forward, backward with fixed gradients, .grad reset, then a
//                  device synchronize), median of batches
//   state_bytes    GPU memory of the loaded program's state and sample inputs
//   peak_bytes     the most GPU memory a steady step holds beyond state_bytes (a CUDA graph's
//                  static memory, held between steps, included)
//   ops_forward, ops_backward, partitioner, notes (the backends'), captures, replays, fallback_calls
#include <aotpipe/cuda/cuda_graphs.h>
#include <aotpipe/export/compiled_exported_program.h>
#include <aotpipe/stages/partition/default_partition.h>
#include <aotpipe/stages/partition/min_cut_partition.h>

#include "median_time.h"
#include "training_step.h"

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <nlohmann/json.hpp>

#include <iostream>
#include <string>

namespace {

namespace bench = aotpipe::bench;

std::int64_t allocated_bytes(bool peak) {
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(c10::cuda::current_device());
  const auto& aggregate = stats.allocated_bytes[static_cast<std::size_t>(c10::CachingAllocator::StatType::AGGREGATE)];
  return peak ? aggregate.peak : aggregate.current;
}

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

nlohmann::json measure(const std::filesystem::path& pt2, const aotpipe::AotConfig& config, int samples,
                       double batch_ms) {
  const aotpipe::LoadExportedProgramOptions on_gpu{.device = c10::Device(c10::kCUDA, 0), .map_weights = false};
  nlohmann::json row;
  row["first_step_ms"] = bench::elapsed_ms([&] {
    aotpipe::ExportedProgram program = aotpipe::load_exported_program(pt2, on_gpu);
    aotpipe::CompiledExportedProgram compiled = aotpipe::compile_exported_program(program, config);
    bench::TrainingStep{[&](const aotpipe::TensorList& in) { return compiled(in); }, &program,
                        bench::sample_inputs(program)}();
    c10::cuda::device_synchronize();
  });
  c10::cuda::CUDACachingAllocator::emptyCache();
  const std::int64_t before = allocated_bytes(false);
  aotpipe::ExportedProgram program = aotpipe::load_exported_program(pt2, on_gpu);
  const aotpipe::TensorList inputs = bench::sample_inputs(program);
  row["state_bytes"] = allocated_bytes(false) - before;
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
    c10::cuda::device_synchronize();
  };
  step();  // the capture, for CUDA graphs
  step();
  c10::cuda::CUDACachingAllocator::resetPeakStats(c10::cuda::current_device());
  step();
  row["peak_bytes"] = allocated_bytes(true) - before - row["state_bytes"].get<std::int64_t>();
  row["step_ms"] = bench::interleaved_median_ms(samples, batch_ms, step)[0];
  const aotpipe::CudaGraphCounters counters = aotpipe::cuda_graph_counters();
  row["captures"] = counters.captures;
  row["replays"] = counters.replays;
  row["fallback_calls"] = counters.fallback_calls;
  row["lent_values"] = counters.lent_values;
  row["lent_values_copied"] = counters.lent_values_copied;
  row["lent_inputs_read"] = counters.lent_inputs_read;
  return row;
}

}  // namespace

int main(int argc, char** argv) {
  std::filesystem::path pt2;
  std::string backend = "interpreter";
  std::string partitioner = "auto";
  int samples = 7;
  double batch_ms = 200;
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
      } else if (pt2.empty() && !arg.starts_with("-")) {
        pt2 = arg;
      } else {
        throw std::invalid_argument("unknown argument '" + arg + "'");
      }
    }
    if (pt2.empty()) throw std::invalid_argument("no .pt2 archive given");
    nlohmann::json row = measure(pt2, config_for(backend, partitioner), samples, batch_ms);
    row["backend"] = backend;
    row["config_partitioner"] = partitioner;
    std::cout << row.dump() << std::endl;
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "cuda_step_bench: " << e.what()
              << "\nusage: cuda_step_bench PT2 --backend interpreter|planned|cuda_graphs|cuda_graphs_static "
                 "[--partitioner auto|min_cut|default] [--samples N] [--batch-ms MS]\n";
    return 2;
  }
}

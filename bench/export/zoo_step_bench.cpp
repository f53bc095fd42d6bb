// Step times of the model zoo (tests/zoo/export_zoo.py's archives), for bench/export/zoo_table.py,
// which runs it in rounds interleaved with PyTorch eager's steps and prints the zoo table.
//
//   zoo_step_bench --zoo DIR [--only NAME,...] [--samples N] [--batch-ms MS] [--serve]
//
// Per model, one JSON line with milliseconds:
//   load_ms          load_exported_program of NAME.train.pt2
//   compile_ms       compile_exported_program + the training compile at the sample inputs
//   first_step_ms    load + compile + the first training step (forward and backward), from scratch
//   compiled_step_ms one training step of the compiled program (forward, backward with fixed
//                    gradients, .grad reset), median of interleaved batches
//   planned_step_ms  the compiled step with the planned backend (backends::planned_interpreter:
//                    out= kernels writing into one arena per graph run, docs/memory.md)
//   interpreted_step_ms  the same step through the exported program run by the interpreter
//   compiled_eval_ms, planned_eval_ms, interpreted_eval_ms  one eval-mode call (NAME.eval.pt2) under no_grad
//   compiled_peak_bytes, planned_peak_bytes, interpreted_peak_bytes  the most CPU memory the first
//                    training step
//                    after the compile holds at once beyond what was live before it (tensors
//                    allocated during the step, counted by tools/memory_meter until freed)
//   ops_forward, ops_backward  nodes of the compiled forward and backward graphs
//   train_error      why the training step failed, where it did (the other figures are absent)
//   data_dependent   the program's data-dependent sizes (u0, ...): it is compiled in regions
//                    (compiled_regions of them compiled; compile_ms is the first compiled call,
//                    which compiles them; no ops_ counts)
//
// --serve: after the rows, prints `ready` and keeps every model's compiled training step; each
// stdin line `NAME N` runs one untimed step, then N timed ones, and prints their milliseconds
// (one number; `error ...` for a model without one). zoo_table.py alternates these batches with
// eager's, milliseconds apart, for its paired ratios; EOF ends the process.
#include <aotpipe/backend/backends.h>
#include <aotpipe/export/compiled_exported_program.h>
#include <aotpipe/graph/interpreter.h>

#include "cpu_memory_meter.h"
#include "median_time.h"
#include "training_step.h"

#include <nlohmann/json.hpp>
#include <torch/csrc/autograd/grad_mode.h>
#include <torch/utils.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

using aotpipe::TensorList;
namespace bench = aotpipe::bench;

using Step = bench::TrainingStep;
using bench::sample_inputs;

// A model's compiled training step, kept for --serve (the step points into the other two).
struct KeptStep {
  aotpipe::ExportedProgram program;
  aotpipe::CompiledExportedProgram compiled;
  Step step;
};

std::unique_ptr<KeptStep> measure_training(const std::filesystem::path& train, nlohmann::json& row, int samples,
                                           double batch_ms) {
  row["first_step_ms"] = bench::elapsed_ms([&] {
    aotpipe::ExportedProgram program = aotpipe::load_exported_program(train);
    aotpipe::CompiledExportedProgram compiled = aotpipe::compile_exported_program(program);
    Step{[&](const TensorList& in) { return compiled(in); }, &program, sample_inputs(program)}();
  });
  auto kept = std::make_unique<KeptStep>();
  aotpipe::ExportedProgram& program = kept->program;
  row["load_ms"] = bench::elapsed_ms([&] { program = aotpipe::load_exported_program(train); });
  aotpipe::CompiledExportedProgram& compiled = kept->compiled;
  compiled = aotpipe::compile_exported_program(program);
  const TensorList inputs = sample_inputs(program);
  if (program.data_dependent_dims().empty()) {
    std::shared_ptr<const aotpipe::CompileState> state;
    row["compile_ms"] = bench::elapsed_ms([&] { state = compiled.compiled_state(inputs); });
    if (state->partition) {
      row["ops_forward"] = state->partition->forward.num_nodes();
      row["ops_backward"] = state->partition->backward.num_nodes();
    }
  } else {  // compiled in regions: the first call compiles them
    for (const aotpipe::SymbolicDim& dim : program.data_dependent_dims()) row["data_dependent"].push_back(dim.symbol);
    row["compile_ms"] = bench::elapsed_ms([&] { compiled(inputs); });
    row["compiled_regions"] = compiled.num_compiled_regions(inputs);
  }
  Step& compiled_step = kept->step;
  compiled_step = Step{[&compiled](const TensorList& in) { return compiled(in); }, &program, inputs};
  // The planned backend compiles its own load, for its own parameters' .grad.
  aotpipe::ExportedProgram planned_program = aotpipe::load_exported_program(train);
  aotpipe::CompiledExportedProgram planned =
      aotpipe::compile_exported_program(planned_program, {.fw_compiler = aotpipe::backends::planned_interpreter()});
  Step planned_step{[&](const TensorList& in) { return planned(in); }, &planned_program, inputs};
  // The interpreted program gets its own load: the two steps must not share parameters' .grad.
  aotpipe::ExportedProgram interpreted = aotpipe::load_exported_program(train);
  Step interpreted_step{[&](const TensorList& in) { return interpreted(in); }, &interpreted, inputs};
  // The first steps (after one that makes the seeds): what a backend allocates once, an
  // arena, is counted too.
  const TensorList seeds = [&] {
    aotpipe::ExportedProgram scratch = aotpipe::load_exported_program(train);
    Step first{[&](const TensorList& in) { return scratch(in); }, &scratch, inputs};
    first();
    return first.seeds;
  }();
  compiled_step.seeds = planned_step.seeds = interpreted_step.seeds = seeds;
  row["compiled_peak_bytes"] = aotpipe::peak_cpu_bytes(compiled_step);
  aotpipe::release_cached_arenas();  // the planned step's first arena is its own, not an earlier model's
  row["planned_peak_bytes"] = aotpipe::peak_cpu_bytes(planned_step);
  row["interpreted_peak_bytes"] = aotpipe::peak_cpu_bytes(interpreted_step);
  const auto steps = bench::interleaved_median_ms(samples, batch_ms, compiled_step, planned_step, interpreted_step);
  row["compiled_step_ms"] = steps[0];
  row["planned_step_ms"] = steps[1];
  row["interpreted_step_ms"] = steps[2];
  return kept;
}

void measure_inference(const std::filesystem::path& eval_path, nlohmann::json& row, int samples, double batch_ms) {
  aotpipe::ExportedProgram eval = aotpipe::load_exported_program(eval_path);
  aotpipe::CompiledExportedProgram eval_compiled = aotpipe::compile_exported_program(eval);
  aotpipe::CompiledExportedProgram eval_planned =
      aotpipe::compile_exported_program(eval, {.fw_compiler = aotpipe::backends::planned_interpreter()});
  const TensorList eval_inputs = sample_inputs(eval);
  torch::NoGradGuard no_grad;
  auto compiled_eval = [&] { eval_compiled(eval_inputs); };
  auto planned_eval = [&] { eval_planned(eval_inputs); };
  auto interpreted_eval = [&] { eval(eval_inputs); };
  const auto evals = bench::interleaved_median_ms(samples, batch_ms, compiled_eval, planned_eval, interpreted_eval);
  row["compiled_eval_ms"] = evals[0];
  row["planned_eval_ms"] = evals[1];
  row["interpreted_eval_ms"] = evals[2];
}

// A model whose training step fails (a program PyTorch cannot differentiate either) still gets
// its inference timed; the error is the row's "train_error".
nlohmann::json measure(const std::filesystem::path& zoo, const std::string& name, int samples, double batch_ms,
                       std::unique_ptr<KeptStep>& kept) {
  nlohmann::json row{{"model", name}};
  try {
    kept = measure_training(zoo / (name + ".train.pt2"), row, samples, batch_ms);
  } catch (const std::exception& e) { row["train_error"] = e.what(); }
  measure_inference(zoo / (name + ".eval.pt2"), row, samples, batch_ms);
  return row;
}

// --serve's loop: `NAME N` lines on stdin, the milliseconds of N steps of NAME's kept step out.
void serve(const std::map<std::string, std::unique_ptr<KeptStep>>& kept) {
  std::cout << "ready" << std::endl;
  std::string name;
  int steps = 0;
  while (std::cin >> name >> steps) {
    const auto found = kept.find(name);
    if (found == kept.end() || !found->second) {
      std::cout << "error no compiled training step for '" << name << "'" << std::endl;
      continue;
    }
    try {
      found->second->step();  // warm again: caches and the other process's idle threads (zoo_table.py)
      std::cout << bench::elapsed_ms(found->second->step, std::max(1, steps)) << std::endl;
    } catch (const std::exception& e) { std::cout << "error " << e.what() << std::endl; }
  }
}

}  // namespace

namespace {
int run_bench(int argc, char** argv) {
  if (!aotpipe_meter_install()) {
    std::cerr << "zoo_step_bench: cannot install the CPU memory meter\n";
    return 2;
  }
  std::filesystem::path zoo;
  std::set<std::string> only;
  int samples = 7;
  double batch_ms = 50;
  bool serving = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(arg + " needs a value");
      return argv[++i];
    };
    // The next argument read by `parse` (std::stoi, std::stod), or an error naming the option.
    auto number = [&](auto parse, const char* what) {
      const std::string text = next();
      try {
        return parse(text);
      } catch (const std::logic_error&) {
        std::string message = arg;
        message.append(" needs ").append(what).append(", got '").append(text).append("'");
        throw std::invalid_argument(message);
      }
    };
    if (arg == "--zoo") {
      zoo = next();
    } else if (arg == "--only") {
      std::stringstream names(next());
      for (std::string n; std::getline(names, n, ',');) only.insert(n);
    } else if (arg == "--samples") {
      samples = std::max(1, number([](const std::string& t) { return std::stoi(t); }, "an integer"));
    } else if (arg == "--batch-ms") {
      batch_ms = number([](const std::string& t) { return std::stod(t); }, "a number");
    } else if (arg == "--serve") {
      serving = true;
    } else {
      std::cerr << "usage: zoo_step_bench --zoo DIR [--only NAME,...] [--samples N] [--batch-ms MS] [--serve]\n";
      return 2;
    }
  }
  std::ifstream manifest_file(zoo / "manifest.json");
  if (!manifest_file) {
    std::cerr << "zoo_step_bench: no manifest.json in '" << zoo.string() << "' (scripts/zoo-export)\n";
    return 2;
  }
  const nlohmann::json manifest = nlohmann::json::parse(manifest_file);
  int failures = 0;
  std::map<std::string, std::unique_ptr<KeptStep>> kept;
  for (const nlohmann::json& entry : manifest.at("models")) {
    const std::string name = entry.at("name");
    if ((!only.empty() && !only.count(name)) || entry.value("status", "") == "export_failed") continue;
    std::unique_ptr<KeptStep> step;
    try {
      std::cout << measure(zoo, name, samples, batch_ms, step).dump() << std::endl;
    } catch (const std::exception& e) {
      std::cout << nlohmann::json{{"model", name}, {"error", e.what()}}.dump() << std::endl;
      ++failures;
    }
    if (serving) kept[name] = std::move(step);
  }
  if (serving) serve(kept);
  return failures ? 1 : 0;
}
}  // namespace

int main(int argc, char** argv) {
  // A bad argument (--samples x) or an unreadable zoo: a message and a failing status, not an abort.
  try {
    return run_bench(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "zoo_step_bench: " << e.what() << "\n";
    return 2;
  }
}

// Load and compile time of torch.export archives, for bench/export/pt2_vs_python.py (which runs
// PyTorch's side and prints the table).
//
//   pt2_import_bench [--repeat N] ARCHIVE...
//
// Per archive, one JSON line: {"archive", "load_ms", "compile_ms", "ops_forward", "ops_backward"},
// medians of N runs (default 7) after one warm-up:
//   load     load_exported_program: the zip records, the JSON, the state tensors, the import of the
//            graph at the sample sizes (every node resolved and checked);
//   compile  aotpipe::compile of the program's flat function on its state and sample inputs, the
//            whole default pipeline (metadata, dedupe, synthetic base, joint, min-cut partition,
//            interpreter backend); a training compile (parameters require grad, grad mode on).
#include <aotpipe/export/exported_program.h>
#include <aotpipe/driver/aot_function.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <class F>
double time_ms(F&& f) {
  const auto start = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  int repeat = 7;
  std::vector<std::string> archives;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--repeat" && i + 1 < argc) {
      repeat = std::max(1, std::atoi(argv[++i]));
    } else {
      archives.push_back(arg);
    }
  }
  for (const std::string& path : archives) {
    std::vector<double> load, compile;
    std::size_t forward = 0, backward = 0;
    for (int r = 0; r <= repeat; ++r) {  // run 0 warms up
      aotpipe::ExportedProgram program;
      const double l = time_ms([&] { program = aotpipe::load_exported_program(path); });
      aotpipe::TensorList args = program.lifted_tensors();
      for (const at::Tensor& t : *program.sample_inputs()) args.push_back(t);
      aotpipe::AotConfig config;
      config.num_params_buffers = program.lifted_tensors().size();
      aotpipe::CompileOutput out;
      const double c = time_ms([&] { out = aotpipe::compile(program.name(), program.flat_function(), args, config); });
      if (r == 0) {
        if (out.state()->partition) {
          forward = out.state()->partition->forward.num_nodes();
          backward = out.state()->partition->backward.num_nodes();
        }
        continue;
      }
      load.push_back(l);
      compile.push_back(c);
    }
    std::cout << "{\"archive\": \"" << path << "\", \"load_ms\": " << median(load)
              << ", \"compile_ms\": " << median(compile) << ", \"ops_forward\": " << forward
              << ", \"ops_backward\": " << backward << "}" << std::endl;
  }
  return 0;
}

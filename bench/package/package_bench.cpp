// package_bench MODEL.pt2 MODEL.aotpkg [RUNS]: the cold start of a training step, side by side in
// one process, RUNS times each (medians), on the archive's sample inputs:
//   package   ready: load_package (map, check every checksum, the state as views of the file);
//             its first step decodes the artifact and hands it to the backend (no trace, no stage)
//   compile   ready: load_exported_program + compile_exported_program + the compile for these
//             inputs (compiled_state: the whole pipeline)
// then the first training step and a warm one of each (forward + backward). The binary links the full library;
// examples/train_package is the runtime-only consumer (its size: tests/aotpkg/runtime_only_check.sh).
#include <aotpipe/export/compiled_exported_program.h>
#include <aotpipe/package/load_package.h>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <vector>

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void step(const std::function<aotpipe::TensorList(const aotpipe::TensorList&)>& call,
          const aotpipe::TensorList& inputs) {
  call(inputs).at(0).backward();
}

struct Timing {
  std::vector<double> ready, first, warm;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void report(const char* name, const Timing& t) {
  fmt::print("| {:<8} | {:>9.1f} | {:>10.1f} | {:>9.1f} | {:>11.1f} |\n", name, 1e3 * median(t.ready),
             1e3 * median(t.first), 1e3 * median(t.warm), 1e3 * (median(t.ready) + median(t.first)));
}

// Times `make` (ready), then two training steps of what it made.
template <typename Make>
void measure(Timing& t, const aotpipe::TensorList& inputs, Make make) {
  auto start = std::chrono::steady_clock::now();
  auto program = make();
  t.ready.push_back(seconds_since(start));
  start = std::chrono::steady_clock::now();
  step([&](const aotpipe::TensorList& in) { return program(in); }, inputs);
  t.first.push_back(seconds_since(start));
  start = std::chrono::steady_clock::now();
  step([&](const aotpipe::TensorList& in) { return program(in); }, inputs);
  t.warm.push_back(seconds_since(start));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    fmt::print(stderr, "usage: {} MODEL.pt2 MODEL.aotpkg [RUNS]\n", argv[0]);
    return 2;
  }
  const int runs = argc > 3 ? std::atoi(argv[3]) : 5;
  const aotpipe::TensorList inputs = *aotpipe::load_exported_program(argv[1]).sample_inputs();
  Timing package, compile;
  for (int r = 0; r < runs; ++r) {
    measure(package, inputs, [&] { return aotpipe::load_package(argv[2]); });
    measure(compile, inputs, [&] {
      aotpipe::CompiledExportedProgram program =
          aotpipe::compile_exported_program(aotpipe::load_exported_program(argv[1]));
      (void)program.compiled_state(inputs);
      return program;
    });
  }
  fmt::print("{} runs each, {} (medians, ms)\n\n", runs, argv[1]);
  fmt::print("| path     |     ready | first step | warm step | ready+first |\n|---|---:|---:|---:|---:|\n");
  report("package", package);
  report("compile", compile);
  return 0;
}

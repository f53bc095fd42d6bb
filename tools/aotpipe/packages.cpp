#include "aotpipe/packages.h"
#include "aotpipe/compile_jobs.h"
#include "aotpipe/cuda_plugin.h"

#include <aotpipe/export/package_writer.h>
#include <aotpipe/graph/random_tensor.h>
#include <aotpipe/package/load_package.h>
#include <aotpipe/stages/partition/partition_stage.h>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/grad_mode.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <stdexcept>

namespace aotpipe::cli {

std::vector<std::vector<int64_t>> parse_sizes(const std::string& text) {
  std::vector<std::vector<int64_t>> sets;
  std::size_t start = 0;
  for (;;) {
    const std::size_t end = text.find(',', start);
    const std::string item = text.substr(start, end == std::string::npos ? std::string::npos : end - start);
    std::vector<int64_t> dims;
    std::size_t pos = 0;
    while (!item.empty() && pos <= item.size()) {
      const std::size_t x = item.find('x', pos);
      const std::string dim = item.substr(pos, x == std::string::npos ? std::string::npos : x - pos);
      std::size_t used = 0;
      long long value = -1;
      try {
        value = std::stoll(dim, &used);
      } catch (const std::exception&) { used = 0; }
      if (dim.empty() || used != dim.size() || value < 0)
        throw std::invalid_argument(
            fmt::format("--sizes '{}': '{}' is not a size (sizes look like 8x256,8x256)", text, dim));
      dims.push_back(value);
      if (x == std::string::npos) break;
      pos = x + 1;
    }
    sets.push_back(std::move(dims));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return sets;
}

int write_package_command(const PackageRequest& request) {
  PackageOptions options;
  if (!request.device.empty()) options.device = c10::Device(request.device);
  for (const std::string& text : request.sizes) options.sizes.push_back(parse_sizes(text));
  options.backend = request.backend;
  options.config.fw_compiler = backend_named(request.backend);
  options.config.partition_fn = partitioner_option(request.partitioner);
  options.config.allow_cpu_fallback = !request.no_cpu_fallback;
  LoadExportedProgramOptions load;
  if (!request.device.empty()) load.device = options.device;
  const auto start = std::chrono::steady_clock::now();
  const ExportedProgram program = load_exported_program(request.program, load);
  const PackageSummary summary = write_package(program, request.package, options);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  fmt::print("{}: {} compile(s) of '{}' for {}, {} state tensor(s) ({:.1f} MB), {:.1f} MB in {:.2f} s\n",
             request.package.string(), summary.compiles, program.name(), options.device.str(), summary.tensors,
             static_cast<double>(summary.state_bytes) / 1e6, static_cast<double>(summary.file_bytes) / 1e6, seconds);
  return 0;
}

std::string describe_package(const PackageFile& file) {
  const PackageManifest& m = file.manifest();
  std::string out;
  out += fmt::format("package     {}\n", file.path().string());
  out += fmt::format("program     {} ({} user input(s))\n", m.name, m.num_user_inputs);
  out += fmt::format("format      version {}, {} bytes\n", m.format_version, file.file_size());
  out +=
      fmt::format("built with  aotpipe {} ({}), torch {}, artifact schema {}{}\n", m.aotpipe_version, m.aotpipe_build,
                  m.torch_version, m.artifact_schema, m.cuda_arch ? ", CUDA " + *m.cuda_arch : std::string());
  out += fmt::format("device      {}\nbackend     {}\n", m.device.str(), m.backend);
  std::size_t counts[3] = {0, 0, 0};
  for (const PackageStateEntry& s : m.state) ++counts[static_cast<int>(s.kind)];
  uint64_t state_bytes = 0;
  for (const PackageTensor& t : m.tensors) state_bytes += t.blob.size;
  out += fmt::format("state       {} parameter(s), {} buffer(s), {} constant(s): {} tensor(s) stored, {} bytes\n",
                     counts[0], counts[1], counts[2], m.tensors.size(), state_bytes);
  out += "compiles\n";
  for (std::size_t k = 0; k < m.compiles.size(); ++k) {
    const PackageCompile& c = m.compiles[k];
    std::vector<std::string> inputs;
    for (const TensorMeta& meta : c.user_inputs)
      inputs.push_back(fmt::format("{}{}", dtype_short_name(meta.dtype), meta.sizes.vec()));
    out += fmt::format("  [{}] {:<9} grad mode {:<3}  {}  ({} bytes)\n", k, c.training ? "training" : "inference",
                       c.grad_mode ? "on" : "off", fmt::join(inputs, ", "), c.artifact.size);
  }
  return out;
}

PackageRun run_package(const std::filesystem::path& path, uint64_t seed) {
  const PackagedProgram program = load_package(path);
  const PackageManifest& m = program.manifest();
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  PackageRun run;
  run.num_inputs = m.num_user_inputs;
  run.num_compiles = m.compiles.size();
  for (const PackageCompile& c : m.compiles) {
    TensorList inputs;
    for (const TensorMeta& meta : c.user_inputs) inputs.push_back(random_tensor(meta, gen));
    at::AutoGradMode mode(c.grad_mode);
    const auto start = std::chrono::steady_clock::now();
    TensorList outputs = program(inputs);
    if (c.training) {
      at::Tensor total;
      for (const at::Tensor& out : outputs)
        if (out.defined() && out.requires_grad()) total = total.defined() ? total.add(out.sum()) : out.sum();
      if (total.defined()) total.backward();
    }
    run.ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    run.num_outputs = outputs.size();
  }
  return run;
}

bool packages_name_cuda(const std::vector<std::string>& inputs) {
  for (const std::string& input : inputs) {
    if (!input.ends_with(kPackageExtension)) continue;
    try {
      const PackageFile file = open_package_file(input);
      if (names_cuda(file.manifest().device.str(), file.manifest().backend)) return true;
    } catch (const std::exception&) {
      continue;  // the command says what is wrong with it
    }
  }
  return false;
}

}  // namespace aotpipe::cli

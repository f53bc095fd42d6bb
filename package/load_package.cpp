#include <aotpipe/package/load_package.h>
#include <aotpipe/graph/autocast_region.h>
#include <aotpipe/package/package_format.h>
#include <aotpipe/package/package_versions.h>
#include <aotpipe/backend/backend_registry.h>
#include <aotpipe/pipeline/lazy.h>
#include <aotpipe/runtime/artifact_serialization.h>
#include <aotpipe/runtime/post_compile.h>

#include <ATen/core/grad_mode.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

namespace aotpipe {

namespace {

std::string describe(const TensorMeta& meta) {
  return fmt::format("{}{} on {}", dtype_short_name(meta.dtype), meta.sizes.vec(), meta.device.str());
}

// Strides of size-0 and size-1 dimensions do not change what a kernel reads.
bool same_layout(const TensorMeta& compiled, const at::Tensor& t) {
  if (t.scalar_type() != compiled.dtype || t.device() != compiled.device) return false;
  if (!std::equal(compiled.sizes.begin(), compiled.sizes.end(), t.sizes().begin(), t.sizes().end())) return false;
  for (std::size_t d = 0; d < compiled.sizes.size(); ++d)
    if (compiled.sizes[d] > 1 && compiled.strides[d] != t.stride(static_cast<int64_t>(d))) return false;
  return true;
}

// Backends register by name where their library is linked: the CUDA-graph backend with aotpipe::cuda.
Compiler backend_named(const PackageManifest& m, const std::filesystem::path& path) {
  if (std::optional<Compiler> backend = find_backend(m.backend)) return *std::move(backend);
  throw PackageError(fmt::format("package '{}': compiled for the backend '{}', which this process lacks (it has: {})",
                                 path.string(), m.backend, fmt::join(registered_backends(), ", ")));
}

// The flat arguments' requires_grad, as a compile's manifest records it.
std::vector<bool> requires_grad_pattern(const TensorList& flat) {
  std::vector<bool> pattern(flat.size());
  for (std::size_t i = 0; i < flat.size(); ++i) pattern[i] = flat[i].defined() && flat[i].requires_grad();
  return pattern;
}

}  // namespace

struct PackagedProgram::Impl {
  PackageFile file;
  c10::Device device = c10::Device(c10::kCPU);
  Compiler backend;
  std::vector<NamedTensor> parameters, buffers, constants;
  TensorList lifted;                      // graph input order
  bool verified = false;                  // every blob's checksum was checked at load
  std::vector<Lazy<RuntimeFn>> compiles;  // per manifest compile, decoded on its first call
  CompileOnDemand compile_missing;
  mutable std::mutex on_demand_mutex;
  mutable std::unordered_map<std::string, RuntimeFn> on_demand;  // by call_signature

  const PackageManifest& manifest() const { return file.manifest(); }

  // Compile `k` made callable: its artifact decoded and handed to the backend.
  RuntimeFn decode(std::size_t k) const {
    const PackageCompile& compile = manifest().compiles[k];
    const std::string what = fmt::format("compile {} (its artifact)", k);
    const std::string_view bytes = verified ? file.bytes(compile.artifact) : file.checked(compile.artifact, what);
    std::shared_ptr<const CompiledArtifact> artifact;
    try {
      artifact = std::make_shared<const CompiledArtifact>(
          deserialize_artifact(file.owner(), bytes, fmt::format("package '{}' {}", file.path().string(), what)));
    } catch (const ArtifactFormatError& e) {
      throw PackageError(fmt::format("package '{}': {} is malformed: {}", file.path().string(), what, e.what()));
    }
    if (artifact->training != compile.training)
      throw PackageError(fmt::format("package '{}': {} disagrees with the manifest about having a backward",
                                     file.path().string(), what));
    AotConfig config;
    config.fw_compiler = backend;
    return post_compile(artifact, compile_on_first_call(artifact, config));
  }

  bool matches(const PackageCompile& c, const TensorList& user_inputs) const {
    for (std::size_t i = 0; i < user_inputs.size(); ++i)
      if (!user_inputs[i].defined() || !same_layout(c.user_inputs[i], user_inputs[i])) return false;
    return true;
  }

  // The callable of a call no compile serves, compiled on demand once per signature.
  RuntimeFn on_demand_runtime(bool grad_mode, const std::vector<bool>& requires_grad, const TensorList& flat,
                              const TensorList& user_inputs, const std::string& autocast) const {
    std::string key = (grad_mode ? "grad" : "no_grad") + autocast;
    for (const bool r : requires_grad) key += r ? '1' : '0';
    for (const at::Tensor& t : user_inputs) {
      const TensorMeta meta = TensorMeta::of(t);
      key += fmt::format("|{}{}{}", describe(meta), meta.strides.vec(), meta.storage_offset);
    }
    std::lock_guard lock(on_demand_mutex);  // one compile per signature; calls of others wait
    auto it = on_demand.find(key);
    if (it == on_demand.end()) it = on_demand.emplace(key, compile_missing(flat)).first;
    return it->second;
  }

  // The compile a call with `flat` arguments runs, as CompiledExportedProgram picks one: the
  // training compile under grad mode when something requires grad, the inference one otherwise;
  // null when none serves it.
  const Lazy<RuntimeFn>* find(bool grad_mode, const std::vector<bool>& requires_grad,
                              const TensorList& user_inputs) const {
    const std::vector<PackageCompile>& all = manifest().compiles;
    for (std::size_t k = 0; k < all.size(); ++k)
      if (all[k].grad_mode == grad_mode && all[k].requires_grad == requires_grad && matches(all[k], user_inputs))
        return &compiles[k];
    // No autograd needed: any inference compile of these sizes serves (frozen parameters).
    const bool needs_autograd =
        grad_mode && std::find(requires_grad.begin(), requires_grad.end(), true) != requires_grad.end();
    if (!needs_autograd)
      for (std::size_t k = 0; k < all.size(); ++k)
        if (!all[k].training && matches(all[k], user_inputs)) return &compiles[k];
    return nullptr;
  }

  PackageError no_compile(bool grad_mode, const std::vector<bool>& requires_grad, const TensorList& user_inputs) const {
    const PackageManifest& m = manifest();
    std::string call;
    for (std::size_t i = 0; i < user_inputs.size(); ++i)
      call += fmt::format("{}input {}: {}{}", i ? ", " : "", i,
                          user_inputs[i].defined() ? describe(TensorMeta::of(user_inputs[i])) : "undefined",
                          requires_grad[m.state.size() + i] ? " requiring grad" : "");
    std::string have;
    for (const PackageCompile& c : m.compiles) {
      std::vector<std::string> inputs;
      for (const TensorMeta& meta : c.user_inputs) inputs.push_back(describe(meta));
      have += fmt::format("\n  {} (grad mode {}): {}", c.training ? "training" : "inference",
                          c.grad_mode ? "on" : "off", fmt::join(inputs, ", "));
    }
    // Name the first input no compile of this mode has.
    std::string which;
    for (std::size_t i = 0; i < user_inputs.size() && which.empty(); ++i) {
      bool any = false;
      for (const PackageCompile& c : m.compiles)
        any |= c.grad_mode == grad_mode && user_inputs[i].defined() && same_layout(c.user_inputs[i], user_inputs[i]);
      if (!any) which = fmt::format(" (input {} matches none)", i);
    }
    return PackageError(fmt::format("package '{}' ({}): no compile for this call with grad mode {}: {}{}; it has:{}",
                                    m.name, file.path().string(), grad_mode ? "on" : "off", call, which, have));
  }
};

namespace {

void check_versions(const PackageManifest& m, const std::filesystem::path& path, c10::Device device) {
  auto fail = [&](const std::string& what) {
    return PackageError(fmt::format("package '{}': {}", path.string(), what));
  };
  if (m.torch_version != package_versions::torch())
    throw fail(fmt::format("built with torch {}, this process has torch {}: compile the package again with this torch",
                           m.torch_version, package_versions::torch()));
  if (m.artifact_schema != package_versions::artifact_schema())
    throw fail(fmt::format("its artifacts have schema version {}, this build of aotpipe reads {}: compile it again",
                           m.artifact_schema, package_versions::artifact_schema()));
  if (device.is_cuda() && m.cuda_arch) {
    const std::optional<std::string> here = package_versions::cuda_arch(device);
    if (here && *here != *m.cuda_arch)
      throw fail(fmt::format("built for CUDA architecture {}, {} is {}: compile it again on this GPU", *m.cuda_arch,
                             device.str(), *here));
  }
}

}  // namespace

PackagedProgram load_package(const std::filesystem::path& path, LoadPackageOptions options) {
  auto impl = std::make_shared<PackagedProgram::Impl>();
  impl->file = open_package_file(path);
  const PackageManifest& m = impl->file.manifest();
  const c10::Device device = options.device.value_or(m.device);
  if (device != m.device)
    throw PackageError(
        fmt::format("package '{}' was compiled for {}; it cannot run on {} (compile it again with "
                    "--device {})",
                    path.string(), m.device.str(), device.str(), device.str()));
  if (device.is_cuda() && !package_versions::has_device(device))
    throw PackageError(
        fmt::format("package '{}' runs on {}, which this process does not have", path.string(), device.str()));
  check_versions(m, path, device);
  impl->device = device;
  impl->backend = backend_named(m, path);
  impl->compile_missing = std::move(options.compile_missing);

  // The state: views of the mapped file (CPU) or copies on the device; one tensor per stored
  // tensor, so tied names stay one leaf.
  TensorList stored(m.tensors.size());
  for (std::size_t i = 0; i < m.tensors.size(); ++i) {
    const PackageTensor& t = m.tensors[i];
    if (options.verify) impl->file.checked(t.blob, fmt::format("stored tensor {}", i));
    at::Tensor view = impl->file.tensor(t.blob, t.meta);
    stored[i] = device.is_cpu() ? view : view.to(device);
  }
  for (const PackageStateEntry& s : m.state) {
    at::Tensor& t = stored[s.tensor];
    if (s.kind == PackageStateEntry::Kind::Parameter && s.requires_grad) t.requires_grad_(true);
    impl->lifted.push_back(t);
    NamedTensor named{s.name, t};
    switch (s.kind) {
      case PackageStateEntry::Kind::Parameter: impl->parameters.push_back(std::move(named)); break;
      case PackageStateEntry::Kind::Buffer: impl->buffers.push_back(std::move(named)); break;
      case PackageStateEntry::Kind::Constant: impl->constants.push_back(std::move(named)); break;
    }
  }
  for (std::size_t k = 0; k < m.compiles.size(); ++k) {
    if (options.verify) impl->file.checked(m.compiles[k].artifact, fmt::format("compile {} (its artifact)", k));
    impl->compiles.push_back(Lazy<RuntimeFn>::deferred([raw = impl.get(), k] { return raw->decode(k); }));
  }
  impl->verified = options.verify;
  PackagedProgram program;
  program.impl_ = std::move(impl);
  return program;
}

TensorList PackagedProgram::operator()(const TensorList& user_inputs) const {
  const Impl& impl = *impl_;
  if (user_inputs.size() != impl.manifest().num_user_inputs)
    throw PackageError(fmt::format("package '{}': called with {} inputs, the program takes {}", impl.manifest().name,
                                   user_inputs.size(), impl.manifest().num_user_inputs));
  TensorList flat = impl.lifted;
  flat.insert(flat.end(), user_inputs.begin(), user_inputs.end());
  const bool grad_mode = at::GradMode::is_enabled();
  const std::vector<bool> requires_grad = requires_grad_pattern(flat);
  // A package's compiles are made without autocast; a trace records autocast's casts, so none of
  // them computes what eager computes under it. Only a compile on demand, made under it, does.
  const std::string autocast = ambient_autocast_text();
  if (autocast.empty()) {
    if (const Lazy<RuntimeFn>* compiled = impl.find(grad_mode, requires_grad, user_inputs))
      return compiled->get()(std::move(flat));
    if (!impl.compile_missing) throw impl.no_compile(grad_mode, requires_grad, user_inputs);
  } else if (!impl.compile_missing) {
    throw PackageError(fmt::format(
        "package '{}' ({}): called under autocast ({}), but its compiles were made without it and would not compute "
        "what eager does under it: call it outside autocast, export the model with its autocast region inside, or "
        "load it with a compiler linked (LoadPackageOptions::compile_missing)",
        impl.manifest().name, impl.file.path().string(), autocast));
  }
  const RuntimeFn runtime = impl.on_demand_runtime(grad_mode, requires_grad, flat, user_inputs, autocast);
  return runtime(std::move(flat));
}

std::size_t PackagedProgram::num_compiled_on_demand() const {
  std::lock_guard lock(impl_->on_demand_mutex);
  return impl_->on_demand.size();
}

const std::string& PackagedProgram::name() const { return impl_->manifest().name; }
c10::Device PackagedProgram::device() const { return impl_->device; }
std::size_t PackagedProgram::num_user_inputs() const { return impl_->manifest().num_user_inputs; }
const std::vector<NamedTensor>& PackagedProgram::parameters() const { return impl_->parameters; }
const std::vector<NamedTensor>& PackagedProgram::buffers() const { return impl_->buffers; }
const std::vector<NamedTensor>& PackagedProgram::constants() const { return impl_->constants; }
const PackageManifest& PackagedProgram::manifest() const { return impl_->manifest(); }

TensorList PackagedProgram::parameter_tensors() const {
  TensorList unique;
  std::unordered_set<const c10::TensorImpl*> seen;
  for (const NamedTensor& p : impl_->parameters)
    if (seen.insert(p.tensor.unsafeGetTensorImpl()).second) unique.push_back(p.tensor);
  return unique;
}

}  // namespace aotpipe

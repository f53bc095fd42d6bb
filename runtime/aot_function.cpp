#include <aotpipe/pipeline/scheduler.h>
#include <aotpipe/pipeline/sync_wait.h>
#include <aotpipe/runtime/aot_function.h>
#include <aotpipe/runtime/aot_runtime.h>
#include <aotpipe/runtime/torch_thread_state.h>

#include <ATen/core/grad_mode.h>
#include <fmt/format.h>

#include <mutex>
#include <unordered_map>

namespace aotpipe {

Scheduler& default_compile_scheduler() {
  static Scheduler* scheduler = [] {
    propagate_torch_thread_state().release();  // for the rest of the process
    return new Scheduler();  // never destroyed: compiled functions may outlive static teardown
  }();
  return *scheduler;
}

Task<CompileOutput> compile_async(std::string name, Function fn, TensorList example_args, AotConfig config,
                                  const Pipeline<CompileState>& pipeline, const JobEnv& env) {
  auto state = std::make_shared<CompileState>();
  state->name = std::move(name);
  state->config = std::move(config);
  state->fn = std::move(fn);
  state->args = std::move(example_args);
  co_await pipeline.run(*state, env);
  RuntimeFn runtime = apply_runtime_wrappers(state->wrappers, make_runtime(artifacts_of(*state)));
  co_return CompileOutput{std::move(runtime), std::move(state)};
}

CompileOutput compile(std::string name, Function fn, TensorList example_args, AotConfig config) {
  static const Pipeline<CompileState> pipeline = default_compile_pipeline();
  JobEnv env{name, default_compile_scheduler()};
  return sync_wait(compile_async(name, std::move(fn), std::move(example_args), std::move(config), pipeline, env));
}

std::string input_signature(const TensorList& args) {
  fmt::memory_buffer key;
  fmt::format_to(std::back_inserter(key), "g{}", at::GradMode::is_enabled() ? 1 : 0);
  std::unordered_map<const void*, std::size_t> first_impl, first_storage, first_base;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const at::Tensor& t = args[i];
    if (!t.defined()) {
      fmt::format_to(std::back_inserter(key), "|u");
      continue;
    }
    const std::size_t dup = first_impl.emplace(t.unsafeGetTensorImpl(), i).first->second;
    const std::size_t alias = first_storage.emplace(t.storage().unsafeGetStorageImpl(), i).first->second;
    const void* base = t.is_view() ? static_cast<const void*>(t._base().unsafeGetTensorImpl()) : nullptr;
    const std::size_t base_group = base ? first_base.emplace(base, i).first->second : i;
    fmt::format_to(std::back_inserter(key), "|{}{}{}s{}t{}o{}r{}l{}d{}a{}b{}", static_cast<int>(t.scalar_type()),
                   t.device().str(), t.layout() == at::kStrided ? "" : "L", fmt::join(t.sizes(), ","),
                   fmt::join(t.strides(), ","), t.storage_offset(), t.requires_grad() ? 1 : 0, t.is_leaf() ? 1 : 0,
                   dup, alias, base_group);
  }
  return fmt::to_string(key);
}

struct CompiledFunction::Impl {
  Function fn;
  AotConfig config;
  std::string name;
  mutable std::mutex mutex;
  mutable std::unordered_map<std::string, std::shared_ptr<const CompileOutput>> cache;

  std::shared_ptr<const CompileOutput> lookup(const TensorList& args) const {
    const std::string key = input_signature(args);
    {
      std::lock_guard lock(mutex);
      if (auto it = cache.find(key); it != cache.end()) return it->second;
    }
    std::size_t serial = 0;
    {
      std::lock_guard lock(mutex);
      serial = cache.size();
    }
    auto compiled = std::make_shared<const CompileOutput>(compile(fmt::format("{}#{}", name, serial), fn, args, config));
    std::lock_guard lock(mutex);
    return cache.emplace(key, std::move(compiled)).first->second;
  }
};

CompiledFunction::CompiledFunction(Function fn, AotConfig config, std::string name)
    : impl_(std::make_shared<Impl>()) {
  impl_->fn = std::move(fn);
  impl_->config = std::move(config);
  impl_->name = std::move(name);
}

TensorList CompiledFunction::operator()(const TensorList& args) const { return impl_->lookup(args)->runtime(args); }

std::size_t CompiledFunction::num_compiled() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->cache.size();
}

std::shared_ptr<const CompileState> CompiledFunction::compiled_state(const TensorList& args) const {
  return impl_->lookup(args)->state;
}

CompiledFunction aot_function(Function fn, AotConfig config) { return CompiledFunction(std::move(fn), std::move(config)); }

}  // namespace aotpipe

#include <aotpipe/pipeline/scheduler.h>
#include <aotpipe/pipeline/sync_wait.h>
#include <aotpipe/driver/aot_function.h>
#include <aotpipe/runtime/aot_runtime.h>
#include <aotpipe/cache/cache_key.h>
#include <aotpipe/runtime/post_compile.h>
#include <aotpipe/driver/torch_thread_state.h>

#include <fmt/format.h>

#include <mutex>
#include <unordered_map>

namespace aotpipe {

Scheduler& default_compile_scheduler() {
  static Scheduler* scheduler = [] {
    propagate_torch_thread_state().release();  // for the rest of the process
    return new Scheduler();                    // never destroyed: compiled functions may outlive static teardown
  }();
  return *scheduler;
}

namespace {

// The leader's side of a single flight: finishes it whatever happens (a failed compile leaves
// null, and the followers compile themselves).
struct FlightLead {
  CompileCache* cache = nullptr;
  std::string digest;
  std::shared_ptr<CompileCache::Flight> flight;
  std::shared_ptr<const CompiledArtifact> artifact;
  FlightLead() = default;
  FlightLead(const FlightLead&) = delete;
  FlightLead& operator=(const FlightLead&) = delete;
  ~FlightLead() {
    if (cache) cache->finish_flight(digest, flight, std::move(artifact));
  }
};

// A cache hit: post_compile alone. Its graphs are decoded and backend-compiled when they first
// run, and its CompileState when first inspected.
CompileOutput finish_from_artifact(std::shared_ptr<const CompiledArtifact> artifact, const AotConfig& config,
                                   CacheReport report) {
  CompiledGraphs graphs = compile_on_first_call(artifact, config);
  CompileOutput out;
  out.set_state(Lazy<std::shared_ptr<const CompileState>>::deferred(
      [artifact, config, graphs]() -> std::shared_ptr<const CompileState> {
        return state_of(*artifact, config, graphs);
      }));
  out.runtime = post_compile(artifact, std::move(graphs));
  out.artifact = std::move(artifact);
  out.cache = std::move(report);
  return out;
}

}  // namespace

Task<CompileOutput> compile_async(std::string name, Function fn, TensorList example_args, AotConfig config,
                                  const Pipeline<CompileState>& pipeline, const JobEnv& env,
                                  std::shared_ptr<const Graph> program, std::shared_ptr<CompileCache> cache) {
  CacheReport report;
  std::optional<CacheKey> key;
  FlightLead lead;
  if (cache) {
    std::shared_ptr<const CompiledArtifact> found;
    {
      StageRunScope scope(env, "cache lookup");
      std::exception_ptr error;
      try {
        CacheKeyOrBypass k = make_cache_key(program.get(), fn, example_args, config, pipeline.to_string());
        if (!k.key) {
          report = {CacheOutcome::Bypassed, "", std::move(k.bypass_reason)};
        } else {
          key = std::move(k.key);
          report.key = key->digest;
          CompileCache::FlightTicket ticket = cache->join_flight(key->digest);
          if (ticket.leader) {
            lead.cache = cache.get();
            lead.digest = key->digest;
            lead.flight = ticket.flight;
          } else {
            found = co_await ticket.flight->wait(env.scheduler);  // the leader's compile
          }
          if (!found) {
            std::shared_ptr<CompiledArtifact> loaded = cache->load(*key, &report.note);
            if (loaded) loaded->name = name;
            found = std::move(loaded);
            lead.artifact = found;
          } else if (found->name != name) {
            auto renamed = std::make_shared<CompiledArtifact>(*found);  // shares the graphs
            renamed->name = name;
            found = std::move(renamed);
          }
        }
      } catch (...) { error = std::current_exception(); }
      if (error) scope.failed(std::move(error));
      scope.succeeded();
    }
    if (found) {
      report.outcome = CacheOutcome::Hit;
      cache->count(CacheOutcome::Hit);
      StageRunScope scope(env, "cache hit");
      CompileOutput out = finish_from_artifact(std::move(found), config, std::move(report));
      scope.succeeded();
      co_return out;
    }
  }

  auto state = std::make_shared<CompileState>();
  state->name = std::move(name);
  state->config = config;
  state->function.fn = std::move(fn);
  state->function.args = std::move(example_args);
  co_await pipeline.run(*state, env);
  std::shared_ptr<const CompiledArtifact> artifact = artifact_of(*state);
  if (key) {
    if (auto why = why_not_artifact(*state)) {
      report = {CacheOutcome::Bypassed, "", std::move(*why)};
    } else {
      report.outcome = CacheOutcome::Miss;
      StageRunScope scope(env, "cache store");
      cache->store(*key, *artifact);
      lead.artifact = artifact;
      scope.succeeded();
    }
  }
  if (cache) cache->count(report.outcome);
  CompileOutput out;
  out.runtime = post_compile(artifact, state->compiled, state->wrappers);
  out.artifact = std::move(artifact);
  out.set_state(Lazy<std::shared_ptr<const CompileState>>::made(std::move(state)));
  out.cache = std::move(report);
  co_return out;
}

CompileOutput compile(const std::string& name, Function fn, TensorList example_args, AotConfig config,
                      std::shared_ptr<const Graph> program, std::shared_ptr<CompileCache> cache) {
  static const Pipeline<CompileState> pipeline = default_compile_pipeline();
  JobEnv env{name, default_compile_scheduler()};
  return sync_wait(compile_async(name, std::move(fn), std::move(example_args), std::move(config), pipeline, env,
                                 std::move(program), std::move(cache)));
}

struct CompiledFunction::Impl {
  Function fn;
  AotConfig config;
  std::string name;
  std::shared_ptr<CompileCache> compile_cache;
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
    auto compiled = std::make_shared<const CompileOutput>(
        compile(fmt::format("{}#{}", name, serial), fn, args, config, nullptr, compile_cache));
    std::lock_guard lock(mutex);
    return cache.emplace(key, std::move(compiled)).first->second;
  }
};

CompiledFunction::CompiledFunction(Function fn, AotConfig config, std::string name, std::shared_ptr<CompileCache> cache)
    : impl_(std::make_shared<Impl>()) {
  impl_->fn = std::move(fn);
  impl_->config = std::move(config);
  impl_->name = std::move(name);
  impl_->compile_cache = std::move(cache);
}

TensorList CompiledFunction::operator()(const TensorList& args) const { return impl_->lookup(args)->runtime(args); }

std::size_t CompiledFunction::num_compiled() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->cache.size();
}

std::shared_ptr<const CompileState> CompiledFunction::compiled_state(const TensorList& args) const {
  return impl_->lookup(args)->state();
}

CompiledFunction aot_function(Function fn, AotConfig config, std::shared_ptr<CompileCache> cache) {
  return CompiledFunction(std::move(fn), std::move(config), "aot_function", std::move(cache));
}

}  // namespace aotpipe

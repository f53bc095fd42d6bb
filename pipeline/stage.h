#pragma once
// Stage: a named, asynchronous transformation of a per-compile context.
//
// As in LLVM's new pass manager there is no base class: any type with
//
//   std::string_view name() const;                        (or anything convertible)
//   Task<PreservedAnalyses> run(Context& context, const JobEnv& env) const;
//     or Task<void> run(...) const, which preserves no analysis (analysis_manager.h)
//
// is a Stage<Context>, and AnyStage<Context> holds one by value (type erasure). `run` is const
// on purpose: one stage object serves every job of a batch at the same time, so it keeps no
// state between runs (see the threading contract in docs/pipeline.md). A stage may also have
// `std::string description() const`, its textual form with parameters, e.g.
// "partition(min_cut)"; by default the description is the name.
#include <aotpipe/pipeline/analysis_manager.h>
#include <aotpipe/pipeline/job_env.h>
#include <aotpipe/pipeline/task.h>

#include <concepts>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>

namespace aotpipe {

template <typename S, typename Context>
concept Stage = std::move_constructible<S> && requires(const S& stage, Context& context, const JobEnv& env) {
  { stage.name() } -> std::convertible_to<std::string_view>;
  requires std::same_as<decltype(stage.run(context, env)), Task<void>> ||
      std::same_as<decltype(stage.run(context, env)), Task<PreservedAnalyses>>;
};

namespace detail {
// A Task<void> stage's run, as one that preserves nothing.
inline Task<PreservedAnalyses> preserving_none(Task<void> run) {
  co_await std::move(run);
  co_return PreservedAnalyses::none();
}
}  // namespace detail

template <typename Context>
class AnyStage {
 public:
  template <typename S>
  requires(!std::same_as<std::remove_cvref_t<S>, AnyStage> && Stage<std::remove_cvref_t<S>, Context>)
      AnyStage(S&& stage)  // NOLINT(google-explicit-constructor): stages are added by value
      : model_(std::make_shared<const Model<std::remove_cvref_t<S>>>(std::forward<S>(stage))) {}

  std::string_view name() const { return model_->name(); }
  std::string description() const { return model_->description(); }
  // The stage object must outlive the returned task (the pipeline holding it does).
  Task<PreservedAnalyses> run(Context& context, const JobEnv& env) const { return model_->run(context, env); }

 private:
  struct Concept {
    virtual ~Concept() = default;
    virtual std::string_view name() const = 0;
    virtual std::string description() const = 0;
    virtual Task<PreservedAnalyses> run(Context& context, const JobEnv& env) const = 0;
  };

  template <typename S>
  struct Model final : Concept {
    template <typename Arg>
    explicit Model(Arg&& arg) : stage(std::forward<Arg>(arg)) {}
    std::string_view name() const override { return stage.name(); }
    std::string description() const override {
      if constexpr (requires {
                      { stage.description() } -> std::convertible_to<std::string>;
                    }) {
        return stage.description();
      } else {
        return std::string(stage.name());
      }
    }
    Task<PreservedAnalyses> run(Context& context, const JobEnv& env) const override {
      if constexpr (std::same_as<decltype(stage.run(context, env)), Task<void>>) {
        return detail::preserving_none(stage.run(context, env));
      } else {
        return stage.run(context, env);
      }
    }
    S stage;
  };

  // Shared and immutable: copying a pipeline copies pointers, and run() is const.
  std::shared_ptr<const Concept> model_;
};

// A stage from a name and a callable `Task<void>(Context&, const JobEnv&)`, for small stages
// and tests; it preserves no analysis. The callable is stored in the stage; a capturing lambda coroutine is safe here
// because the stage (holding the closure) outlives every run.
template <typename Context>
class FunctionStage {
 public:
  using Body = std::function<Task<void>(Context&, const JobEnv&)>;
  FunctionStage(std::string name, Body body) : name_(std::move(name)), body_(std::move(body)) {}
  std::string_view name() const noexcept { return name_; }
  Task<void> run(Context& context, const JobEnv& env) const { return body_(context, env); }

 private:
  std::string name_;
  Body body_;
};

}  // namespace aotpipe

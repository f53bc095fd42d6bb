#pragma once
// Pipeline: an ordered list of stages, itself a stage (so pipelines nest).
//
// It runs its stages one after another on the job's context, with the job's hooks around each,
// the context's analyses invalidated after each by what the stage preserved (when the context
// has them, analysis_manager.h), and a stop check before each: once the job's stop token is triggered no further stage
// starts and OperationCancelled is thrown. A failing stage becomes a StageError naming the job
// and the stage. A pipeline is edited before it runs; while runs are in flight it must not be
// modified (it is shared read-only by every job, like the stages in it).
#include <aotpipe/pipeline/errors.h>
#include <aotpipe/pipeline/instrumentation.h>
#include <aotpipe/pipeline/stage.h>

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace aotpipe {
namespace detail {
// The index of the first stage called `wanted`; throws std::out_of_range naming the known ones.
std::size_t index_of_stage(std::span<const std::string_view> names, std::string_view wanted, std::string_view pipeline);
void check_insert_position(std::size_t index, std::size_t size, std::string_view pipeline);
[[noreturn]] void throw_cancelled_before(const JobEnv& env, std::string_view stage);
std::string join_descriptions(std::span<const std::string> descriptions);
}  // namespace detail

template <typename Context>
class Pipeline {
 public:
  explicit Pipeline(std::string name = "pipeline") : name_(std::move(name)) {}

  std::string_view name() const noexcept { return name_; }

  // --- Listing -------------------------------------------------------------------------------
  std::size_t size() const noexcept { return stages_.size(); }
  bool empty() const noexcept { return stages_.empty(); }
  const AnyStage<Context>& operator[](std::size_t index) const { return stages_.at(index); }
  std::vector<std::string_view> stage_names() const {
    std::vector<std::string_view> names;
    names.reserve(stages_.size());
    for (const auto& stage : stages_) names.push_back(stage.name());
    return names;
  }
  bool contains(std::string_view stage) const {
    for (const auto& candidate : stages_) {
      if (candidate.name() == stage) return true;
    }
    return false;
  }
  // The textual form, which parse_pipeline() reads back: "metadata,dedupe,partition(min_cut)".
  std::string to_string() const {
    std::vector<std::string> descriptions;
    descriptions.reserve(stages_.size());
    for (const auto& stage : stages_) descriptions.push_back(stage.description());
    return detail::join_descriptions(descriptions);
  }
  // As a nested stage: "group(b,c)".
  std::string description() const { return name_ + "(" + to_string() + ")"; }

  // --- Editing (names refer to the first stage of that name) ----------------------------------
  Pipeline& add(AnyStage<Context> stage) {
    stages_.push_back(std::move(stage));
    return *this;
  }
  Pipeline& insert(std::size_t index, AnyStage<Context> stage) {
    detail::check_insert_position(index, stages_.size(), name_);
    stages_.insert(stages_.begin() + static_cast<std::ptrdiff_t>(index), std::move(stage));
    return *this;
  }
  Pipeline& insert_before(std::string_view existing, AnyStage<Context> stage) {
    return insert(index_of(existing), std::move(stage));
  }
  Pipeline& insert_after(std::string_view existing, AnyStage<Context> stage) {
    return insert(index_of(existing) + 1, std::move(stage));
  }
  Pipeline& replace(std::string_view existing, AnyStage<Context> stage) {
    stages_[index_of(existing)] = std::move(stage);
    return *this;
  }
  Pipeline& remove(std::string_view existing) {
    stages_.erase(stages_.begin() + static_cast<std::ptrdiff_t>(index_of(existing)));
    return *this;
  }

  // --- Running -------------------------------------------------------------------------------
  // Returns all analyses preserved: each stage's report has been applied already.
  Task<PreservedAnalyses> run(Context& context, const JobEnv& env) const {
    for (const AnyStage<Context>& stage : stages_) {
      if (env.stop_token.stop_requested()) detail::throw_cancelled_before(env, stage.name());
      StageRunScope scope(env, stage.name());
      std::exception_ptr error;
      PreservedAnalyses preserved;
      try {
        preserved = co_await stage.run(context, env);
      } catch (...) { error = std::current_exception(); }
      if (error) scope.failed(std::move(error));
      if constexpr (HasAnalyses<Context>) context.analyses.invalidate(preserved);
      scope.succeeded();
    }
    co_return PreservedAnalyses::all();
  }

 private:
  std::size_t index_of(std::string_view existing) const {
    const auto names = stage_names();
    return detail::index_of_stage(names, existing, name_);
  }

  std::string name_;
  std::vector<AnyStage<Context>> stages_;
};

}  // namespace aotpipe

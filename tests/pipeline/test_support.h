#pragma once
// Shared by the pipeline tests: a context type that records what ran, and stages for it.
#include <aotpipe/pipeline/pipeline.h>
#include <aotpipe/pipeline/stage.h>

#include <gtest/gtest.h>

#include <functional>
#include <memory>

#include <stdexcept>
#include <string>
#include <vector>

namespace aotpipe::testing {

// A task that is already complete, for stages with nothing to await.
inline Task<void> completed() { co_return; }

struct RecordingContext {
  std::vector<std::string> ran;  // stage names, in order
};

// Appends its label to the context's log.
class RecordStage {
 public:
  explicit RecordStage(std::string label) : label_(std::move(label)) {}
  std::string_view name() const noexcept { return label_; }
  Task<void> run(RecordingContext& context, const JobEnv&) const {
    context.ran.push_back(label_);
    co_return;
  }

 private:
  std::string label_;
};

// Throws std::runtime_error(message) when run.
class ThrowingStage {
 public:
  ThrowingStage(std::string label, std::string message) : label_(std::move(label)), message_(std::move(message)) {}
  std::string_view name() const noexcept { return label_; }
  Task<void> run(RecordingContext&, const JobEnv&) const {
    throw std::runtime_error(message_);
    co_return;
  }

 private:
  std::string label_;
  std::string message_;
};

// A pipeline ready to be shared by the jobs of a batch.
inline std::shared_ptr<const Pipeline<RecordingContext>> share(Pipeline<RecordingContext> pipeline) {
  return std::make_shared<const Pipeline<RecordingContext>>(std::move(pipeline));
}

// The what() of the exception of type E that `action` throws; fails the test if none is thrown.
template <typename E>
std::string error_message_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const E& error) { return error.what(); }
  ADD_FAILURE() << "expected an exception";
  return {};
}

}  // namespace aotpipe::testing

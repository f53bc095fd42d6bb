#pragma once
// The exceptions of the pipeline machinery.
#include <exception>
#include <stdexcept>
#include <string>

namespace aotpipe {

// A stage of a job threw. Carries the job name, the stage name (the innermost stage when
// pipelines nest) and the original exception, also reachable with std::rethrow_if_nested.
class StageError : public std::runtime_error, public std::nested_exception {
 public:
  // Construct it while handling the original exception, which std::nested_exception captures:
  //   catch (...) { throw StageError(job, stage); }
  StageError(std::string job, std::string stage);

  const std::string& job() const noexcept { return job_; }
  const std::string& stage() const noexcept { return stage_; }
  std::exception_ptr original() const noexcept { return nested_ptr(); }

 private:
  std::string job_;
  std::string stage_;
};

// A job stopped because its stop token was triggered (batch cancellation or timeout): raised
// at the next stage boundary, or by cancellable waits such as sleep_for().
class OperationCancelled : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The message of any exception: what() for std::exception, a fixed text otherwise.
std::string describe_exception(const std::exception_ptr& error);

}  // namespace aotpipe

#include <aotpipe/pipeline/errors.h>

#include <fmt/format.h>

namespace aotpipe {

std::string describe_exception(const std::exception_ptr& error) {
  if (!error) return "no error";
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) { return e.what(); } catch (...) {
    return "unknown exception (not derived from std::exception)";
  }
}

StageError::StageError(std::string job, std::string stage)
    : std::runtime_error(
          fmt::format("job '{}': stage '{}' failed: {}", job, stage, describe_exception(std::current_exception()))),
      job_(std::move(job)),
      stage_(std::move(stage)) {}

}  // namespace aotpipe

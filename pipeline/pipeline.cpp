#include <aotpipe/pipeline/pipeline.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <stdexcept>

namespace aotpipe::detail {

std::size_t index_of_stage(std::span<const std::string_view> names, std::string_view wanted,
                           std::string_view pipeline) {
  const auto found = std::ranges::find(names, wanted);
  if (found == names.end()) {
    throw std::out_of_range(
        fmt::format("pipeline '{}' has no stage '{}'; its stages: {}", pipeline, wanted, fmt::join(names, ", ")));
  }
  return static_cast<std::size_t>(found - names.begin());
}

void check_insert_position(std::size_t index, std::size_t size, std::string_view pipeline) {
  if (index > size) {
    throw std::out_of_range(
        fmt::format("cannot insert at position {} of pipeline '{}', which has {} stages", index, pipeline, size));
  }
}

void throw_cancelled_before(const JobEnv& env, std::string_view stage) {
  throw OperationCancelled(fmt::format("job '{}' cancelled before stage '{}'", env.job_name, stage));
}

std::string join_descriptions(std::span<const std::string> descriptions) {
  return fmt::format("{}", fmt::join(descriptions, ","));
}

}  // namespace aotpipe::detail

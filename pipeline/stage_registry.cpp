#include <aotpipe/pipeline/stage_registry.h>

#include <aotpipe/pipeline/errors.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace aotpipe::detail {

void throw_unknown_stage(const StageSpec& spec, std::string_view text, const std::vector<std::string_view>& known) {
  throw PipelineParseError(fmt::format("unknown stage '{}' at offset {} in pipeline '{}'; known stages: {}", spec.name,
                                       spec.offset, text, fmt::join(known, ", ")));
}

void throw_factory_failed(const StageSpec& spec, std::string_view text) {
  throw PipelineParseError(fmt::format("stage '{}' at offset {} in pipeline '{}' rejected its parameters '{}': {}",
                                       spec.name, spec.offset, text, spec.parameters,
                                       describe_exception(std::current_exception())));
}

void check_no_parameters(std::string_view stage, std::string_view parameters) {
  if (!parameters.empty()) { throw std::invalid_argument(fmt::format("stage '{}' takes no parameters", stage)); }
}

void check_new_stage_name(std::string_view name, bool already_registered) {
  if (already_registered) throw std::invalid_argument(fmt::format("stage '{}' is already registered", name));
  bool valid = false;
  try {
    const auto specs = parse_pipeline_text(name);
    valid = specs.size() == 1 && specs.front().name == name;
  } catch (const PipelineParseError&) {}
  if (!valid) throw std::invalid_argument(fmt::format("'{}' is not a valid stage name", name));
}

}  // namespace aotpipe::detail

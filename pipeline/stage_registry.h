#pragma once
// StageRegistry: stage names -> factories, and parse_pipeline() from text.
//
//   StageRegistry<CompileContext> registry;
//   registry.add("dedupe", [](std::string_view params) { return DedupeStage{}; });
//   registry.add("partition", [](std::string_view params) { return PartitionStage(params); });
//   Pipeline<CompileContext> p = registry.parse("dedupe,partition(min_cut)");
//
// "group(...)" is built in: its parameters are a nested pipeline read with the same registry.
#include <aotpipe/pipeline/pipeline.h>
#include <aotpipe/pipeline/pipeline_parser.h>

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace aotpipe {
namespace detail {
[[noreturn]] void throw_unknown_stage(const StageSpec& spec, std::string_view text,
                                      const std::vector<std::string_view>& known);
[[noreturn]] void throw_factory_failed(const StageSpec& spec, std::string_view text);
void check_no_parameters(std::string_view stage, std::string_view parameters);
void check_new_stage_name(std::string_view name, bool already_registered);
}  // namespace detail

template <typename Context>
class StageRegistry {
 public:
  // Gets the text between the parentheses (empty when there are none); throws to reject it.
  using Factory = std::function<AnyStage<Context>(std::string_view parameters)>;

  static constexpr std::string_view group_name = "group";

  StageRegistry() {
    factories_.emplace(std::string(group_name), [this](std::string_view parameters) -> AnyStage<Context> {
      return parse(parameters, std::string(group_name));
    });
  }
  // The "group" factory refers to this registry.
  StageRegistry(const StageRegistry&) = delete;
  StageRegistry& operator=(const StageRegistry&) = delete;

  // Throws std::invalid_argument if the name is taken or malformed.
  StageRegistry& add(std::string name, Factory factory) {
    detail::check_new_stage_name(name, factories_.contains(name));
    factories_.emplace(std::move(name), std::move(factory));
    return *this;
  }

  // A stage type built with its default constructor, taking no parameters.
  template <Stage<Context> S>
  StageRegistry& add(std::string name) {
    return add(name, factory_without_parameters<S>(name));
  }
  // The factory of such a stage: it rejects any parameter, naming the stage.
  template <Stage<Context> S>
  static Factory factory_without_parameters(std::string name) {
    return [name = std::move(name)](std::string_view parameters) -> AnyStage<Context> {
      detail::check_no_parameters(name, parameters);
      return S{};
    };
  }

  bool contains(std::string_view name) const { return factories_.find(name) != factories_.end(); }

  std::vector<std::string_view> names() const {
    std::vector<std::string_view> names;
    for (const auto& [name, factory] : factories_) names.push_back(name);
    return names;
  }

  // Throws PipelineParseError for malformed text, an unknown stage (listing the known ones)
  // or a factory that rejects its parameters.
  Pipeline<Context> parse(std::string_view text, std::string pipeline_name = "pipeline") const {
    Pipeline<Context> pipeline(std::move(pipeline_name));
    for (const StageSpec& spec : parse_pipeline_text(text)) {
      const auto factory = factories_.find(spec.name);
      if (factory == factories_.end()) detail::throw_unknown_stage(spec, text, names());
      try {
        pipeline.add(factory->second(spec.parameters));
      } catch (const PipelineParseError&) {
        throw;  // from a nested pipeline: already names its position
      } catch (...) { detail::throw_factory_failed(spec, text); }
    }
    return pipeline;
  }

 private:
  std::map<std::string, Factory, std::less<>> factories_;
};

}  // namespace aotpipe

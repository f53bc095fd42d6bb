// Pipeline text (`aotpipe compile --pipeline`) on arbitrary text: the compile stages' registry
// builds a pipeline or rejects the text with std::invalid_argument (PipelineParseError, an
// unknown stage, a stage's parameters it refuses), nested groups included.
#include "fuzz_input.h"

#include <aotpipe/stages/compile_stages.h>

using namespace aotpipe;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  fuzz::rejects_only_with<std::invalid_argument>("pipeline_text", "std::invalid_argument", [&] {
    (void)compile_stage_registry().parse(fuzz::as_text(data, size));
  });
  return 0;
}

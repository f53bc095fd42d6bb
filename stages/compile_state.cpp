// The runtime wrappers of the plans are in stages/common/runtime_wrapper.cpp: a stored artifact
// made callable links them without the partitioner this file's defaults name.
#include <aotpipe/stages/compile_state.h>
#include <aotpipe/backend/backend_traits.h>
#include <aotpipe/backend/compiler_defaults.h>
#include <aotpipe/stages/partition/default_partition.h>
#include <aotpipe/stages/partition/min_cut_partition.h>

#include <utility>

namespace aotpipe {

AotConfig resolve_defaults(AotConfig config) {
  auto compilers = default_compilers(config.fw_compiler, config.bw_compiler, config.inference_compiler);
  config.fw_compiler = std::move(compilers.forward);
  config.bw_compiler = std::move(compilers.backward);
  config.inference_compiler = std::move(compilers.inference);
  if (!config.partition_fn) {
    const BackendTraits traits = backend_traits_of(config.fw_compiler);
    partitioners::MinCutOptions min_cut;
    min_cut.ban_recompute_used_far_apart = traits.fuses_recomputed_ops;
    config.partition_fn = traits.recomputation_pays ? partitioners::min_cut_rematerialization_partition(min_cut)
                                                    : partitioners::default_partition();
  }
  return config;
}

}  // namespace aotpipe

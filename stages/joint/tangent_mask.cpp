// forward_tangent_mask (joint.h) apart from the joint's tracing: the artifact codec checks a
// stored artifact with it, and a package's runtime links it without the tracer.
#include <aotpipe/stages/joint/joint.h>

namespace aotpipe {

std::vector<bool> forward_tangent_mask(const ViewAndMutationMeta& meta) {
  std::vector<bool> mask;
  for (std::size_t i : meta.mutated_inp_runtime_indices) mask.push_back(meta.input_info[i].gets_tangent());
  for (const auto& out : meta.output_info) mask.push_back(out.gets_tangent());
  for (std::size_t i = 0; i < meta.num_intermediate_bases; ++i) mask.push_back(true);
  return mask;
}

}  // namespace aotpipe

#pragma once
// merge_view_inputs (Note [Handling mutations on an input that aliases other inputs]): inputs
// that share a storage, overlap, and of which one has a data mutation are replaced by one
// synthetic base; the function regenerates them as views of it.
#include <aotpipe/graph/calling_convention.h>
#include <aotpipe/graph/tensor_meta.h>
#include <aotpipe/stages/metadata/view_and_mutation_meta.h>

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace aotpipe {

// Note [Synthetic Base Info Metadata]: for each OUTER argument (the caller's), where the
// function's argument comes from in the new (merged) argument list: an index, or a view of
// one of the synthetic bases.
struct ViewOfSyntheticBase {
  std::size_t base_idx;
  TensorMeta view;  // sizes, strides, absolute storage offset, dtype of the original argument
  bool requires_grad = false;
  bool operator==(const ViewOfSyntheticBase&) const = default;
};
using SyntheticBaseArg = std::variant<std::size_t, ViewOfSyntheticBase>;

struct MergedInputs {
  TensorList args;                        // [synthetic bases..., other args...]
  std::vector<std::string> descriptions;  // per new argument, e.g. "base of inputs 1, 4" / "input 0"
  std::vector<SyntheticBaseArg> info;     // per outer argument
};

// nullopt: no synthetic base is needed (the happy path). Throws std::invalid_argument for the
// cases PyTorch rejects: aliased mutated inputs of different dtypes, and (training only)
// aliased inputs that are not views of one differentiable base.
std::optional<MergedInputs> merge_view_inputs(const TensorList& args, const std::vector<InputAliasInfo>& input_info,
                                              bool is_inference);

// The function's arguments regenerated from the merged ones (_unpack_synthetic_bases).
TensorList unpack_synthetic_bases(const TensorList& merged, const std::vector<SyntheticBaseArg>& info);

// create_synthetic_base_metadata: the metadata of the function over the merged arguments, and
// the outer indices of aliased arguments with metadata mutations (returned as extra outputs).
std::pair<ViewAndMutationMeta, std::vector<std::size_t>> create_synthetic_base_metadata(
    const ViewAndMutationMeta& meta, const std::vector<SyntheticBaseArg>& info, const TensorList& outer_args,
    const TensorList& inner_args);

}  // namespace aotpipe

#pragma once
// The post-compile halves of the analysis stages as plain data (PyTorch's CompilerWrapper
// post_compile state). A compile records one plan per stage that needs a runtime half; the
// runtime is rebuilt from the plans alone, so a cached compile (cache/compile_cache.h) needs
// nothing but them and the graphs.
#include <aotpipe/graph/calling_convention.h>
#include <aotpipe/stages/metadata/view_and_mutation_meta.h>

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <variant>
#include <vector>

namespace aotpipe {

// Dedupe (stages/dedupe): how the caller's arguments map onto the compiled graph's.
struct DedupeInfo {
  bool specialized = false;               // strategy 2 ran: the inner function takes fewer arguments
  std::vector<bool> keep_arg_mask;        // per outer argument: kept in the inner convention
  std::vector<std::size_t> add_dupe_map;  // per outer argument: its inner index
  // The duplicate pattern the graph was compiled for: per argument, the first argument that is
  // the same tensor (itself when it is the first).
  std::vector<std::size_t> first_occurrence;

  TensorList remove_dupe_args(TensorList args) const;
  TensorList add_dupe_args(const TensorList& args) const;
  bool operator==(const DedupeInfo&) const = default;
};

// Synthetic base (stages/synthetic_base): how the caller's aliased arguments are merged.
struct SyntheticBaseInfo {
  bool needed = false;
  bool is_inference = false;
  std::vector<InputAliasInfo> outer_input_info;  // metadata of the caller's arguments
  std::vector<std::size_t> aliased_arg_idx_with_metadata_mutations;
  bool operator==(const SyntheticBaseInfo&) const = default;
};

using RuntimePlan = std::variant<DedupeInfo, SyntheticBaseInfo>;

}  // namespace aotpipe

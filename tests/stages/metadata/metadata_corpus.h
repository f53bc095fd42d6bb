#pragma once
// The metadata corpus: the C++ twins of the cases of metadata_oracle.py (same names, same ops,
// same example inputs). metadata_diff_test.cpp compares aotpipe::collect_metadata on these with
// PyTorch's run_functionalized_fw_and_collect_metadata on the Python ones.
#include <aotpipe/stages/metadata/collect_metadata.h>

#include <functional>
#include <string>
#include <vector>

namespace aotpipe::testing {

struct MetadataCase {
  std::string name;
  aotpipe::Function fn;
  // Fresh example inputs at every call (deterministic: ones/arange).
  std::function<aotpipe::TensorList()> make_inputs;
  bool keep_input_mutations = false;
  // False: collect_metadata is called under at::NoGradGuard (an inference compile; Python runs
  // the analysis under torch.no_grad()).
  bool grad_enabled = true;
};

const std::vector<MetadataCase>& metadata_corpus();
const MetadataCase* find_metadata_case(const std::string& name);

}  // namespace aotpipe::testing

#pragma once
// NamedTensor: a program's parameter, buffer or lifted constant by its fully qualified name, as
// an exported program (export/exported_program.h) and a package (package/load_package.h) list
// their state.
#include <ATen/core/Tensor.h>

#include <string>

namespace aotpipe {

struct NamedTensor {
  std::string name;  // "layer1.bn1.running_mean"
  at::Tensor tensor;
};

}  // namespace aotpipe

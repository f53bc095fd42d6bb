#pragma once
// Properties of ATen operators that more than one component decides on.
#include <ATen/core/dispatch/Dispatcher.h>

namespace aotpipe {

// Ops whose output value or shape depends on tensor data, so computing them needs the data on
// the host: `item`, `nonzero`, `masked_select`, `unique`..., and any op tagged
// data_dependent_output or dynamic_output_shape. A fake trace refuses them (as Python raises
// DataDependentOutputException / DynamicOutputShapeException); a CUDA graph cannot hold them
// (they synchronise with the host).
bool has_data_dependent_output(const c10::OperatorHandle& op);

}  // namespace aotpipe

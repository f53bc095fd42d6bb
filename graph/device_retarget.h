#pragma once
// Moves a whole program to another device: what `aotpipe compile --device cuda:0` does to a graph
// written for the CPU before compiling it (no data is touched; the graph's values, its inputs,
// its factory ops' `device` arguments and its tensor constants all name the new device).
#include <aotpipe/graph/graph.h>

#include <c10/core/Device.h>

namespace aotpipe {

// Every TensorMeta (inputs and node results) and every Device constant argument that names the
// CPU now names `device`; values already on another device are left alone. Tensor constants are
// moved to `device` when this machine has it and otherwise replaced by metadata examples (a
// compile reads only their metadata); wrapped numbers (Python scalars passed for a Tensor
// parameter) stay CPU scalars, as in eager. A CPU-only kernel the CPU picked for a composite op
// (the CPU flash attention of scaled_dot_product_attention, its logsumexp unread) becomes that
// op again, so the device picks its own; every `view` becomes `reshape`, which copies where the
// device's kernels left strides no view allows (torch.export records `contiguous()` as nothing
// and `reshape` as `view` where the CPU's strides were contiguous). Returns the number of changes.
std::size_t retarget_device(Graph& graph, c10::Device device);

// True when this process can put tensors on `device` (CPU and meta always; cuda:N when a GPU
// with that index is present). Asks the device's guard, which may initialise its driver.
bool device_available(c10::Device device);

}  // namespace aotpipe

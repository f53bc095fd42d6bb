#pragma once
#include <stdexcept>

namespace aotpipe::partitioners {

// A joint graph the partitioners cannot split: a forward output that depends on the tangents,
// a value the backward needs that can be neither saved nor recomputed, an output no subgraph can
// compute. The message names the value (and, for min-cut, a path of infinite edges).
class PartitionError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace aotpipe::partitioners

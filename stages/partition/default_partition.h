#pragma once
// PyTorch's default_partition (torch/_functorch/partitioners.py): the forward is what ran before
// the backward in the traced program; every forward value the backward reads is saved.
// See docs/stages/partition.md.
#include <aotpipe/stages/partition/partition_error.h>
#include <aotpipe/stages/partition/partitioner.h>

namespace aotpipe::partitioners {

// The forward graph holds the joint's nodes up to the last node tagged phase=forward (the
// tracer's tag; PyTorch's partitioner_tag "is_forward"), nodes that depend on the tangents
// excluded (PyTorch excludes the tangents alone); in a joint graph
// without phase tags, the nodes the forward outputs need (by data flow). Saved:
// every forward value read by a later node or returned by the joint (views as they are, e.g.
// `t(w)`; multi-output ops' results one by one), then dropped if the backward does not read
// it. The backward graph keeps the joint's order. Throws PartitionError.
Partitioner default_partition();

// The same as a plain function.
PartitionResult default_partition(const JointGraph& joint);

}  // namespace aotpipe::partitioners

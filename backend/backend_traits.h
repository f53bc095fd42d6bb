#pragma once
// What a backend compiler declares about itself beyond its callable, for the compile to decide
// by (PyTorch decides the same by backend: Inductor's graphs get the min-cut partitioner, the
// kernel-running aot_eager's the default one).
#include <aotpipe/graph/calling_convention.h>

namespace aotpipe {

struct BackendTraits {
  // Whether recomputing cheap forward ops in the backward, instead of saving their results (the
  // min-cut partitioner), pays with this backend. It does where recomputed ops cost little
  // against the memory they save: a fusing backend, or the interpreter on the CPU. It does not
  // where each op is a kernel launch of its own that the backend cannot hide: the CUDA-graph
  // backend replays one launch per recomputed op, and a chain of 100 pointwise ops ran 1.56x its
  // kernel floor on an H100 (docs/cuda-graphs.md). A compile whose AotConfig names no partitioner
  // takes min-cut where this is true and the default partitioner (save what the backward reads)
  // where it is false.
  bool recomputation_pays = true;
  // Whether the backend fuses a recomputed op into the kernel of the op that reads it (Inductor
  // does; the interpreter and the planned backend run one ATen kernel per op). Min-cut's
  // ban_recompute_used_far_apart is a fusion heuristic: it bans recomputing an op for a reader
  // that comes after an unfusible op, which it could not be fused with. Where nothing fuses, that
  // holds of every reader alike, and the ban only makes the cut save more: Swin2SR's cosine
  // attention saved two more 32 KB values per block than eager's autograd (docs/zoo.md). A
  // compile whose AotConfig names no partitioner applies the ban only where this is true.
  bool fuses_recomputed_ops = false;
};

// `compiler` declaring `traits`. A named compiler (named_compiler) keeps its name, so the compile
// cache still keys on it.
Compiler with_backend_traits(Compiler compiler, BackendTraits traits);

// What `compiler` declared; the defaults above for one that declared nothing.
BackendTraits backend_traits_of(const Compiler& compiler);

}  // namespace aotpipe

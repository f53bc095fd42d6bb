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
};

// `compiler` declaring `traits`. A named compiler (named_compiler) keeps its name, so the compile
// cache still keys on it.
Compiler with_backend_traits(Compiler compiler, BackendTraits traits);

// What `compiler` declared; the defaults above for one that declared nothing.
BackendTraits backend_traits_of(const Compiler& compiler);

}  // namespace aotpipe

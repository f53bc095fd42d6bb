#pragma once
// Pointwise formulas that compute what one ATen kernel computes, replaced by that kernel.
//
// Models write activations out as formulas: GPT-2's `gelu_new` is
// 0.5*x*(1 + tanh(sqrt(2/pi)*(x + 0.044715*x^3))), BLOOM's GELU the same factored differently,
// older BERTs' x*0.5*(1 + erf(x/sqrt(2))). Traced, each is eight to ten calls, and autograd
// differentiates every one, keeping their intermediates for the backward; aten::gelu is one
// kernel, and its backward one more that reads only x. A backend that runs ATen kernels fuses
// nothing itself: this is the fusion it gets. A compile of an exported program traces the
// program with these formulas replaced (export/exported_program.h, fuse_formulas).
//
// The kernel evaluates the same expression with the same float32 constants, associated
// differently: results equal the formula's to a few units in the last place, not bit for bit, as
// any fusing compiler's.
#include <aotpipe/graph/graph.h>

#include <cstddef>
#include <string>
#include <vector>

namespace aotpipe {

struct FusedFormula {
  std::string kernel;     // what replaced it: "aten::gelu(approximate='tanh')"
  std::string value;      // the value it computes (the kernel's result keeps the name)
  std::size_t calls = 0;  // how many calls it replaced
};

// Replaces, in graph order, every value computed from one floating tensor x and scalar constants
// by add, sub, rsub, mul, div (by a constant), neg, integer pow and one tanh, erf or sigmoid,
// which as a polynomial in x and that function (coefficients equal to 1e-6 relative, float32's
// precision and a little; 1e-12 for float64 x) is
//   0.5*x*(1 + tanh(sqrt(2/pi)*(x + 0.044715*x^3)))  -> aten::gelu(x, approximate="tanh")
//   0.5*x*(1 + erf(x/sqrt(2)))                       -> aten::gelu(x)
//   x*sigmoid(x)                                     -> aten::silu(x)
// when nothing else reads its intermediates (nor the graph's outputs), every call of it makes a
// tensor of x's dtype and sizes (no broadcast, no promotion), none is in an autocast region
// (autocast runs pow in float32), and no call from its first to its last writes memory (an
// in-place op of the training IR: the formula's reads of x would not all see the same values). The kernel's call takes the value's name, TensorMeta and the
// formula's last call's attributes; scalar constants left unread are removed.
std::vector<FusedFormula> fuse_pointwise_formulas(Graph& graph);

}  // namespace aotpipe

#pragma once
// The backward of a 1x1 convolution as matrix products, where that is faster on the CPU.
//
// A 1x1 convolution is a matrix product over the positions of its input (Inductor's
// conv_1x1_as_mm). On the CPU, oneDNN's convolution_backward is slow where the weight is large and
// the activations small (a ResNeXt downsample, 1024 -> 2048 channels on 2x2 positions: 7.7 ms
// against 1.9 ms as two mm calls on 2 cores; docs/stages/compile.md has the table). Its forward is not
// (oneDNN's forward was as fast as mm or faster on every shape measured), so only the backward is
// lowered. A kernel-running backend calls lower_convolution_backward on a copy of each CPU graph
// it compiles.
#include <aotpipe/graph/graph.h>

#include <cstddef>
#include <vector>

namespace aotpipe {

struct ConvolutionLoweringOptions {
  // Only where the weight dominates (the cost rule below); false: every 1x1 kernel that can be
  // lowered, for benchmarks measuring the rule (bench/graph/convolution_lowering_bench.cpp).
  bool only_where_faster = true;
};

// The calls of `graph` that lower_convolution_backward rewrites: aten::convolution_backward of a
// 1x1 kernel (not transposed, one group, no padding, any stride and dilation) on the CPU in float
// or double, outside autocast, whose results have the layout a contiguous tensor has, and where
// the weight has at least as many elements as the gradient and input rows together
// (N*Ho*Wo*(C_in+C_out) <= C_in*C_out): the shapes where the product was faster in that table.
std::vector<const Node*> lowerable_convolution_backwards(const Graph& graph,
                                                         const ConvolutionLoweringOptions& options = {});

// Replaces each of those calls by permute/clone/mm calls computing the same gradients (up to the
// order of summation) with the same sizes, strides and dtype, and a bias gradient by a sum. The
// new calls carry the node's attributes (its phase) and TensorMeta. Returns the number replaced.
std::size_t lower_convolution_backward(Graph& graph, const ConvolutionLoweringOptions& options = {});

}  // namespace aotpipe

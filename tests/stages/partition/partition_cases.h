#pragma once
// The functions the partitioner tests run, each with example inputs. The same names and
// shapes are defined in partition_oracle.py, which runs PyTorch's own partitioners on them.
#include <aotpipe/tracer/tracer.h>

#include <functional>
#include <string>
#include <vector>

namespace aotpipe::testing {

struct PartitionCase {
  std::string name;
  TraceFunction fn;
  std::function<TensorList()> inputs;  // fresh example inputs (seeded), requires_grad set
  bool random = false;                 // draws random numbers: reseed before every run to compare
  std::string no_oracle_reason;        // non-empty: partition_oracle.py cannot run it, and why
};

// mlp, cos3, mul3, add4_cos2, softmax, layer_norm_ish, layer_norm, conv_relu, mm_tanh, sum_dim,
// gelu_chain, partial_grad, dropout_mul (random), sin_chain (300 ops), ladder (~700 nodes),
// closure_constant, view_outputs.
const std::vector<PartitionCase>& partition_cases();
const PartitionCase& partition_case(const std::string& name);

}  // namespace aotpipe::testing

#pragma once
// Properties of ATen operators that more than one component decides on.
#include <ATen/core/dispatch/Dispatcher.h>

#include <optional>

namespace aotpipe {

// Ops whose output value or shape depends on tensor data, so computing them needs the data on
// the host: `item`, `nonzero`, `masked_select`, `unique`..., and any op tagged
// data_dependent_output or dynamic_output_shape. A fake trace refuses them (as Python raises
// DataDependentOutputException / DynamicOutputShapeException); a CUDA graph cannot hold them
// (they synchronise with the host).
bool has_data_dependent_output(const c10::OperatorHandle& op);

// Ops whose schema declares fresh results but whose kernels return views of `self`: `_unsafe_view`,
// `unsafe_split`, `unsafe_split_with_sizes`, `unsafe_chunk` (the "unsafe" is that autograd does
// not track the alias; PyTorch's SchemaCheckMode exempts them for it). nn.GRU and nn.LSTM
// decompose into unsafe_split. Whoever reasons about memory from schemas must ask this too.
bool returns_hidden_view(const c10::OperatorHandle& op);

// Whether result `result` of `op` exists only when the kernel runs with grad mode on: the
// workspace of `mkldnn_rnn_layer` (oneDNN's LSTM layer, kept for a CPU LSTM), which only its
// backward reads. A compiled forward runs with grad mode off (autograd records the compiled
// function, not its calls), so a runner of a graph that reads that result turns grad mode on
// around the call, with autograd kept out.
bool result_needs_grad_mode(const c10::OperatorHandle& op, std::size_t result);

// The in-place overload of a pointwise op (`aten::add_.Tensor` for `aten::add.Tensor`): tagged
// pointwise, one fresh tensor result, and an in-place twin that takes the same arguments with
// `self` written. Where the result has self's dtype, sizes and strides, the twin computes the
// same values into self, which a caller may use when nothing else can see self (re-inplacing).
std::optional<c10::OperatorHandle> pointwise_inplace_variant(const c10::OperatorHandle& op);

// The out= overload of a functional op of one tensor result (`aten::add.out` for
// `aten::add.Tensor`, `aten::sum.IntList_out` for `aten::sum.dim_IntList`) that has a kernel of its
// own for `backend` (CPU, CUDA): the same arguments, then a `Tensor(a!) out`, which it writes and
// returns. A caller gives it memory it planned instead of letting the kernel allocate. nullopt
// where ATen only generates the overload (a wrapper that runs the functional kernel and copies: no
// gain), for ops drawing random numbers (an out kernel may draw them differently), and for ops of
// several results (their out kernels cannot be called boxed in libtorch 2.11: op_properties.cpp).
std::optional<c10::OperatorHandle> out_variant(const c10::OperatorHandle& op, c10::DispatchKey backend);

}  // namespace aotpipe

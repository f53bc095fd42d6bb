// Meta kernels of the fused RNN cells: CUDA-only kernels (no CPU kernel to fall back on), so a
// CUDA LSTM cell cannot be traced without them. (aten::lstm itself is decomposed into cell ops by
// the tracer, as PyTorch does: the fused layers' workspace sizes are their libraries' to know.)
#include <aotpipe/tracer/internal/meta_support.h>

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>

namespace aotpipe::detail {
namespace {

// rnn_cell_checkSizes (torch/_meta_registrations.py) for a gate count of `gates`.
void check_rnn_cell_sizes(const at::Tensor& input_gates, const at::Tensor& hidden_gates,
                          const std::optional<at::Tensor>& input_bias, const std::optional<at::Tensor>& hidden_bias,
                          int64_t gates, const at::Tensor& prev_hidden) {
  TORCH_CHECK(input_gates.dim() == 2, "input_gates should be 2-dimensional, got ", input_gates.dim());
  TORCH_CHECK(input_gates.sizes() == hidden_gates.sizes(), "input_gates ", input_gates.sizes(), " and hidden_gates ",
              hidden_gates.sizes(), " differ");
  const int64_t gates_size = input_gates.size(1);
  for (const auto* bias : {&input_bias, &hidden_bias})
    if (*bias && (*bias)->defined()) {
      TORCH_CHECK((*bias)->dim() == 1 && (*bias)->numel() == gates_size, "a bias of ", (*bias)->sizes(),
                  " does not match gates of size ", gates_size);
    }
  TORCH_CHECK(
      prev_hidden.dim() == 2 && prev_hidden.size(0) == input_gates.size(0) && prev_hidden.size(1) * gates == gates_size,
      "hidden state ", prev_hidden.sizes(), " does not match gates ", input_gates.sizes());
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> thnn_fused_lstm_cell_meta(const at::Tensor& input_gates,
                                                                         const at::Tensor& hidden_gates,
                                                                         const at::Tensor& cx,
                                                                         const std::optional<at::Tensor>& input_bias,
                                                                         const std::optional<at::Tensor>& hidden_bias) {
  check_rnn_cell_sizes(input_gates, hidden_gates, input_bias, hidden_bias, 4, cx);
  at::Tensor workspace = at::empty_like(input_gates, at::MemoryFormat::Contiguous);
  at::Tensor hy = at::empty_like(cx, at::MemoryFormat::Contiguous);
  at::Tensor cy = at::empty_like(cx, at::MemoryFormat::Contiguous);
  return {hy, cy, workspace};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> thnn_fused_lstm_cell_backward_impl_meta(
    const std::optional<at::Tensor>& grad_hy, const std::optional<at::Tensor>& grad_cy, const at::Tensor& cx,
    const at::Tensor& cy, const at::Tensor& workspace, bool has_bias) {
  const bool has_hy = grad_hy && grad_hy->defined();
  const bool has_cy = grad_cy && grad_cy->defined();
  if (!has_hy && !has_cy) return {at::Tensor(), at::Tensor(), at::Tensor()};
  const at::Tensor& some_grad = has_hy ? *grad_hy : *grad_cy;
  TORCH_CHECK(some_grad.sizes() == cx.sizes() && cy.sizes() == cx.sizes(), "gradient ", some_grad.sizes(), ", cx ",
              cx.sizes(), " and cy ", cy.sizes(), " must have the same sizes");
  TORCH_CHECK(workspace.dim() == 2 && workspace.size(0) == cx.size(0) && workspace.size(1) == 4 * cx.size(1),
              "workspace ", workspace.sizes(), " does not match cx ", cx.sizes());
  at::Tensor grad_gates = at::empty_like(workspace, at::MemoryFormat::Contiguous);
  at::Tensor grad_cx = at::empty_like(cx, at::MemoryFormat::Contiguous);
  at::Tensor grad_bias = has_bias ? grad_gates.sum(0, /*keepdim=*/false) : at::Tensor();
  return {grad_gates, grad_cx, grad_bias};
}

}  // namespace

void register_rnn_meta(MetaRegistrar& m) {
  m.impl("_thnn_fused_lstm_cell", TORCH_FN(thnn_fused_lstm_cell_meta));
  m.impl("_thnn_fused_lstm_cell_backward_impl", TORCH_FN(thnn_fused_lstm_cell_backward_impl_meta));
}

}  // namespace aotpipe::detail

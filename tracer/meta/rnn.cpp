// Meta kernels of the fused RNN kernels: the CUDA-only cells (no CPU kernel to fall back on), so a
// CUDA LSTM cell cannot be traced without them, and oneDNN's LSTM layer, which the tracer keeps for
// a CPU LSTM as eager runs it (autograd_decompositions.cpp; libtorch has Meta kernels for neither).
#include <aotpipe/tracer/internal/meta_kernels.h>
#include <aotpipe/tracer/internal/meta_support.h>

#include <ATen/core/Tensor.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/mkldnn_rnn_layer.h>
#include <ATen/ops/zeros.h>

#include <map>
#include <mutex>
#include <tuple>

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

// oneDNN's LSTM layer keeps its gates for the backward in a workspace whose size only oneDNN knows
// (a primitive descriptor's, with its own padding). Asked of oneDNN once per shape by running the
// layer on zeros of the same sizes, under grad mode as the kernel needs to make one.
int64_t mkldnn_lstm_workspace_bytes(int64_t steps, int64_t batch, int64_t input_size, int64_t hidden,
                                    at::ScalarType dtype, bool reverse) {
  using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, at::ScalarType, bool>;
  static std::mutex mutex;
  static std::map<Key, int64_t> known;
  const Key key{steps, batch, input_size, hidden, dtype, reverse};
  {
    std::lock_guard lock(mutex);
    if (auto it = known.find(key); it != known.end()) return it->second;
  }
  const at::TensorOptions options = at::TensorOptions(dtype).device(c10::kCPU);
  const at::AutoGradMode grad_mode(true);
  const at::Tensor state = at::zeros({batch, hidden}, options);
  const at::Tensor workspace = std::get<3>(at::mkldnn_rnn_layer(
      at::zeros({steps, batch, input_size}, options), at::zeros({4 * hidden, input_size}, options),
      at::zeros({4 * hidden, hidden}, options), at::zeros({4 * hidden}, options), at::zeros({4 * hidden}, options),
      state, state, reverse, {}, kMkldnnLstmMode, hidden, 1, /*has_biases=*/true, false, false, /*train=*/true));
  TORCH_CHECK(workspace.defined(), "mkldnn_rnn_layer made no workspace under grad mode");
  std::lock_guard lock(mutex);
  return known.emplace(key, workspace.numel()).first->second;
}

// The kernel's own checks would come from oneDNN; these are the ones a wrong trace would hit.
void check_mkldnn_lstm_layer(const at::Tensor& input, const at::Tensor& w0, const at::Tensor& w1, const at::Tensor& hx,
                             const at::Tensor& cx, int64_t mode, int64_t hidden_size) {
  TORCH_CHECK(mode == kMkldnnLstmMode, "mkldnn_rnn_layer: aotpipe's Meta kernel covers the LSTM (mode ",
              kMkldnnLstmMode, "), got mode ", mode);
  TORCH_CHECK(input.dim() == 3, "mkldnn_rnn_layer: input must be [steps, batch, features], got ", input.sizes());
  TORCH_CHECK(w0.dim() == 2 && w0.size(0) == 4 * hidden_size && w0.size(1) == input.size(2) && w1.dim() == 2 &&
                  w1.size(0) == 4 * hidden_size && w1.size(1) == hidden_size,
              "mkldnn_rnn_layer: weights ", w0.sizes(), " and ", w1.sizes(), " do not match input ", input.sizes(),
              " and hidden size ", hidden_size);
  TORCH_CHECK(hx.sizes() == cx.sizes() && hx.numel() == input.size(1) * hidden_size, "mkldnn_rnn_layer: states ",
              hx.sizes(), " and ", cx.sizes(), " do not match batch ", input.size(1), " and hidden size ", hidden_size);
}

// Results as the CPU kernel makes them: the output time first (the caller transposed a batch-first
// input), the workspace only under grad mode.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> mkldnn_rnn_layer_meta(
    const at::Tensor& input, const at::Tensor& w0, const at::Tensor& w1, const at::Tensor& /*w2*/,
    const at::Tensor& /*w3*/, const at::Tensor& hx, const at::Tensor& cx, bool reverse, at::IntArrayRef /*batch_sizes*/,
    int64_t mode, int64_t hidden_size, int64_t /*num_layers*/, bool /*has_biases*/, bool /*bidirectional*/,
    bool /*batch_first*/, bool /*train*/) {
  check_mkldnn_lstm_layer(input, w0, w1, hx, cx, mode, hidden_size);
  at::Tensor output = at::empty({input.size(0), input.size(1), hidden_size}, input.options());
  at::Tensor hy = at::empty(hx.sizes(), hx.options());
  at::Tensor cy = at::empty(cx.sizes(), cx.options());
  at::Tensor workspace;
  if (at::GradMode::is_enabled())
    workspace = at::empty({mkldnn_lstm_workspace_bytes(input.size(0), input.size(1), input.size(2), hidden_size,
                                                       input.scalar_type(), reverse)},
                          input.options().dtype(at::kByte));
  return {output, hy, cy, workspace};
}

// Gradients in float32 (oneDNN's), the bias's twice (one per bias of the layer); none when no
// gradient arrived.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>
mkldnn_rnn_layer_backward_meta(const at::Tensor& input, const at::Tensor& w0, const at::Tensor& w1,
                               const at::Tensor& w2, const at::Tensor& /*w3*/, const at::Tensor& hx,
                               const at::Tensor& cx, const at::Tensor& /*output*/, const at::Tensor& /*hy*/,
                               const at::Tensor& /*cy*/, const std::optional<at::Tensor>& grad_output,
                               const std::optional<at::Tensor>& grad_hy, const std::optional<at::Tensor>& grad_cy,
                               bool /*reverse*/, int64_t mode, int64_t hidden_size, int64_t /*num_layers*/,
                               bool /*has_biases*/, bool /*train*/, bool /*bidirectional*/,
                               at::IntArrayRef /*batch_sizes*/, bool /*batch_first*/, const at::Tensor& workspace) {
  auto given = [](const std::optional<at::Tensor>& g) { return g && g->defined(); };
  if (!given(grad_output) && !given(grad_hy) && !given(grad_cy))
    return {at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  check_mkldnn_lstm_layer(input, w0, w1, hx, cx, mode, hidden_size);
  TORCH_CHECK(workspace.defined() && workspace.scalar_type() == at::kByte,
              "mkldnn_rnn_layer_backward: the forward's workspace is missing (the forward ran without grad mode)");
  auto fp32 = [](const at::Tensor& like) { return at::empty(like.sizes(), like.options().dtype(at::kFloat)); };
  return {fp32(input), fp32(w0), fp32(w1), fp32(w2), fp32(w2), fp32(hx), fp32(cx)};
}

}  // namespace

void register_rnn_meta(MetaRegistrar& m) {
  m.impl("_thnn_fused_lstm_cell", TORCH_FN(thnn_fused_lstm_cell_meta));
  m.impl("_thnn_fused_lstm_cell_backward_impl", TORCH_FN(thnn_fused_lstm_cell_backward_impl_meta));
  m.impl("mkldnn_rnn_layer", TORCH_FN(mkldnn_rnn_layer_meta));
  m.impl("mkldnn_rnn_layer_backward", TORCH_FN(mkldnn_rnn_layer_backward_meta));
}

}  // namespace aotpipe::detail

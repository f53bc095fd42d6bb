// Decompositions above autograd, for tracing tensors only (their autograd key is
// AutogradPrivateUse1): ops whose eager kernel hides a mutation or a backend's choice, or reads
// the data where the op's result does not depend on it, rewritten as PyTorch's decompositions for
// AOTAutograd rewrite them.
#include <aotpipe/tracer/internal/meta_kernels.h>
#include <aotpipe/tracer/internal/tracing_tensor.h>

#include <ATen/ATen.h>
#include <ATen/ops/lstm_native.h>
#include <ATen/ops/mkldnn_rnn_layer.h>
#include <ATen/ops/one_hot_native.h>
#include <ATen/ops/scaled_dot_product_attention_native.h>
#include <torch/library.h>

#include <algorithm>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace aotpipe::detail {

void link_autograd_decompositions() {}

namespace {

// C++'s batch_norm (what torch::nn::BatchNorm*d calls) reaches aten::native_batch_norm, which
// updates running_mean/running_var in place although its schema does not say so: functionalization
// would miss the mutation and leave it in the graph as a hidden side effect on the inputs. PyTorch
// decomposes the op on the Autograd key for AOTAutograd into _native_batch_norm_legit*, whose
// schemas declare the mutation (torch/_decomp/decompositions.py, native_batch_norm_decomposition);
// so do we, for tracing tensors only (their autograd key is AutogradPrivateUse1).
std::tuple<at::Tensor, at::Tensor, at::Tensor> traced_native_batch_norm(const at::Tensor& input,
                                                                        const std::optional<at::Tensor>& weight,
                                                                        const std::optional<at::Tensor>& bias,
                                                                        const std::optional<at::Tensor>& running_mean,
                                                                        const std::optional<at::Tensor>& running_var,
                                                                        bool training, double momentum, double eps) {
  const bool has_mean = running_mean && running_mean->defined();
  const bool has_var = running_var && running_var->defined();
  if (!has_mean && !has_var) return at::_native_batch_norm_legit(input, weight, bias, training, momentum, eps);
  TORCH_CHECK(has_mean && has_var,
              "native_batch_norm: running_mean and running_var must both be given or both be None");
  at::Tensor mean = *running_mean;
  at::Tensor var = *running_var;
  if (training) return at::_native_batch_norm_legit(input, weight, bias, mean, var, training, momentum, eps);
  return at::_native_batch_norm_legit_no_training(input, weight, bias, mean, var, momentum, eps);
}

// On a CUDA tensor, batch_norm picks cudnn_batch_norm, which has no Meta or CPU kernel and hides
// the same running-stat update: PyTorch decomposes it on the Autograd key into native_batch_norm
// (torch/_decomp/decompositions.py, cudnn_batch_norm), and so do we, with the same extra result.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> traced_cudnn_batch_norm(
    const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
    const std::optional<at::Tensor>& running_mean, const std::optional<at::Tensor>& running_var, bool training,
    double exponential_average_factor, double epsilon) {
  auto [out, mean, invstd] = traced_native_batch_norm(input, weight, bias, running_mean, running_var, training,
                                                      exponential_average_factor, epsilon);
  at::Tensor reserve = input.new_zeros({0}, input.options().dtype(at::kByte));
  if (training) return {out, mean, invstd, reserve};
  return {out, weight.new_zeros({0}), weight.new_zeros({0}), reserve};
}

// aten::lstm, gru and rnn_tanh/rnn_relu pick a fused backend kernel (mkldnn_rnn_layer on the
// CPU, _cudnn_rnn on CUDA, where even asking whether cuDNN takes the input needs a GPU) whose
// workspace size only the backend library knows. PyTorch decomposes them on the Autograd key into
// per-step cell ops (torch/_decomp/decompositions.py: _rnn_helper, one_layer_rnn, lstm_impl,
// gru_impl, rnn_tanh_input), so the traced graph is plain ATen and fake-traceable on any device;
// so do we, with two exceptions for the LSTM: its projections (proj_size) keep libtorch's
// composite, and on the CPU, where eager runs oneDNN's layer, so does the trace
// (lstm_runs_mkldnn_layers: aotpipe's backends run kernels, they do not fuse cells). Dropout
// between layers is applied in training, as eager does.

// One step of a cell: the step's input gates (the input's projection, computed for every step at
// once), the hidden state before the step ([1, batch, hidden]; the LSTM's is h and c), the layer's
// hidden-to-hidden weight and bias. Returns the state after it; its first element is the output.
using RecurrentCell = std::vector<at::Tensor> (*)(const at::Tensor& input_gates, const std::vector<at::Tensor>& state,
                                                  const at::Tensor& hh_weight,
                                                  const std::optional<at::Tensor>& hh_bias);

std::vector<at::Tensor> lstm_cell(const at::Tensor& input_gates, const std::vector<at::Tensor>& state,
                                  const at::Tensor& hh_weight, const std::optional<at::Tensor>& hh_bias) {
  auto gates = (at::linear(state[0], hh_weight, hh_bias) + input_gates).chunk(4, 2);
  at::Tensor cy = gates[1].sigmoid() * state[1] + gates[0].sigmoid() * gates[2].tanh();
  return {gates[3].sigmoid() * cy.tanh(), cy};
}

std::vector<at::Tensor> gru_cell(const at::Tensor& input_gates, const std::vector<at::Tensor>& state,
                                 const at::Tensor& hh_weight, const std::optional<at::Tensor>& hh_bias) {
  auto igates = input_gates.chunk(3, 1);
  auto hgates = at::linear(state[0], hh_weight, hh_bias).chunk(3, 2);
  at::Tensor reset = (hgates[0] + igates[0]).sigmoid();
  at::Tensor update = (hgates[1] + igates[1]).sigmoid();
  at::Tensor candidate = (igates[2] + hgates[2] * reset).tanh();
  return {(state[0] - candidate) * update + candidate};
}

template <at::Tensor (*Nonlinearity)(const at::Tensor&)>
std::vector<at::Tensor> simple_rnn_cell(const at::Tensor& input_gates, const std::vector<at::Tensor>& state,
                                        const at::Tensor& hh_weight, const std::optional<at::Tensor>& hh_bias) {
  return {Nonlinearity(at::linear(state[0], hh_weight, hh_bias) + input_gates)};
}

// One direction of one layer over the sequence (time first). `state`: the initial states, each
// [batch, hidden]. Returns the steps' outputs concatenated, and the final states.
std::pair<at::Tensor, std::vector<at::Tensor>> traced_recurrent_layer(const at::Tensor& input,
                                                                      std::vector<at::Tensor> state,
                                                                      at::ArrayRef<at::Tensor> params, bool has_biases,
                                                                      bool reverse, RecurrentCell cell) {
  std::optional<at::Tensor> ih_bias, hh_bias;
  if (has_biases) ih_bias = params[2], hh_bias = params[3];
  for (at::Tensor& s : state) s = s.unsqueeze(0);
  at::Tensor precomputed = at::linear(input, params[0], ih_bias);
  if (reverse) precomputed = precomputed.flip(0);
  std::vector<at::Tensor> steps;
  for (const at::Tensor& step_input : precomputed.unbind(0)) {
    state = cell(step_input, state, params[1], hh_bias);
    steps.push_back(state[0]);
  }
  if (reverse) std::reverse(steps.begin(), steps.end());
  for (at::Tensor& s : state) s = s.squeeze(0);
  return {at::cat(steps, 0), std::move(state)};
}

// Every layer and direction. `hx`: per kind of state (h; h and c), [layers * directions, batch,
// hidden]. Returns the output and, per kind, the final states stacked as hx is.
std::pair<at::Tensor, std::vector<at::Tensor>> traced_recurrent(const char* op, const at::Tensor& input,
                                                                at::TensorList hx, at::TensorList params,
                                                                bool has_biases, int64_t num_layers, double dropout,
                                                                bool train, bool bidirectional, bool batch_first,
                                                                RecurrentCell cell) {
  const std::size_t group = has_biases ? 4 : 2;
  const int64_t directions = bidirectional ? 2 : 1;
  TORCH_CHECK(params.size() == group * static_cast<std::size_t>(num_layers * directions), op, ": expected ",
              group * num_layers * directions, " parameters, got ", params.size());
  at::Tensor layer_input = batch_first ? input.transpose(0, 1) : input;
  std::vector<std::vector<at::Tensor>> finals(hx.size());
  for (int64_t layer = 0; layer < num_layers; ++layer) {
    std::vector<at::Tensor> outputs;
    for (int64_t direction = 0; direction < directions; ++direction) {
      const int64_t index = layer * directions + direction;
      std::vector<at::Tensor> initial;
      for (const at::Tensor& h : hx) initial.push_back(h[index]);
      auto [out, state] = traced_recurrent_layer(layer_input, std::move(initial), params.slice(index * group, group),
                                                 has_biases, direction == 1, cell);
      outputs.push_back(out);
      for (std::size_t kind = 0; kind < state.size(); ++kind) finals[kind].push_back(state[kind]);
    }
    layer_input = bidirectional ? at::cat(outputs, outputs[0].dim() - 1) : outputs[0];
    if (dropout != 0 && train && layer < num_layers - 1) layer_input = at::dropout(layer_input, dropout, true);
  }
  std::vector<at::Tensor> stacked;
  stacked.reserve(finals.size());
  for (const auto& states : finals) stacked.push_back(at::stack(states, 0));
  return {batch_first ? layer_input.transpose(0, 1) : layer_input, std::move(stacked)};
}

// Whether eager's LSTM runs oneDNN's fused layer (aten::mkldnn_rnn_layer) for these arguments, as
// ATen's use_mkldnn decides: float32 CPU tensors, oneDNN enabled; and, for the one kernel aotpipe
// keeps, biases and no projections (what nn.LSTM has by default). The layer has its own backward
// (mkldnn_rnn_layer_backward), so the compiled step runs the kernels eager runs: one call per
// layer and direction instead of a dozen small ops per time step. (PyTorch's AOTAutograd always
// decomposes, for Inductor to fuse the cells; aotpipe's backends run ATen kernels.)
bool lstm_runs_mkldnn_layers(const at::Tensor& input, at::TensorList hx, at::TensorList params, bool has_biases) {
  if (!at::hasMKLDNN() || !at::globalContext().userEnabledMkldnn() || !has_biases) return false;
  if (input.unsafeGetTensorImpl()->has_symbolic_sizes_strides() || input.numel() == 0) return false;
  auto cpu_float = [](const at::Tensor& t) { return t.device().is_cpu() && t.scalar_type() == at::kFloat; };
  return cpu_float(input) && std::all_of(hx.begin(), hx.end(), cpu_float) &&
         std::all_of(params.begin(), params.end(), cpu_float) && hx[0].size(2) == hx[1].size(2);
}

// ATen's mkldnn_rnn (aten/src/ATen/native/mkldnn/RNN.cpp), op for op: the input time first and
// contiguous, one mkldnn_rnn_layer per layer and direction, directions concatenated, dropout
// between layers in training.
std::tuple<at::Tensor, at::Tensor, at::Tensor> traced_mkldnn_lstm(const at::Tensor& input, at::TensorList hx,
                                                                  at::TensorList params, int64_t num_layers,
                                                                  double dropout, bool train, bool bidirectional,
                                                                  bool batch_first) {
  constexpr std::size_t group = 4;  // weight_ih, weight_hh, bias_ih, bias_hh
  const int64_t directions = bidirectional ? 2 : 1;
  TORCH_CHECK(params.size() == group * static_cast<std::size_t>(num_layers * directions), "lstm: expected ",
              group * num_layers * directions, " parameters, got ", params.size());
  const int64_t hidden_size = hx[0].size(2);
  at::Tensor layer_input = (batch_first ? input.transpose(0, 1) : input).contiguous();
  const at::Tensor h0 = hx[0].contiguous(), c0 = hx[1].contiguous();
  std::vector<at::Tensor> hy, cy;
  for (int64_t layer = 0; layer < num_layers; ++layer) {
    std::vector<at::Tensor> outputs;
    for (int64_t direction = 0; direction < directions; ++direction) {
      const int64_t index = layer * directions + direction;
      const at::TensorList w = params.slice(static_cast<std::size_t>(index) * group, group);
      auto [out, h, c, workspace] = at::mkldnn_rnn_layer(layer_input, w[0], w[1], w[2], w[3], h0[index], c0[index],
                                                         direction == 1, {}, kMkldnnLstmMode, hidden_size, num_layers,
                                                         /*has_biases=*/true, bidirectional, batch_first, train);
      outputs.push_back(out);
      hy.push_back(h);
      cy.push_back(c);
    }
    layer_input = bidirectional ? at::cat(outputs, -1) : outputs[0];
    if (dropout != 0 && train && layer < num_layers - 1) layer_input = at::dropout(layer_input, dropout, true);
  }
  return {batch_first ? layer_input.transpose(0, 1) : layer_input, at::stack(hy, 0), at::stack(cy, 0)};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> traced_lstm(const at::Tensor& input, at::TensorList hx,
                                                           at::TensorList params, bool has_biases, int64_t num_layers,
                                                           double dropout, bool train, bool bidirectional,
                                                           bool batch_first) {
  TORCH_CHECK(hx.size() == 2, "lstm expects two hidden states, got ", hx.size());
  if (hx[0].size(2) != hx[1].size(2)) {
    // Projections: libtorch's own composite, whose ops still go through autograd (excluding the
    // autograd key around at::lstm instead would record them without gradients).
    return at::native::lstm(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first);
  }
  if (lstm_runs_mkldnn_layers(input, hx, params, has_biases))
    return traced_mkldnn_lstm(input, hx, params, num_layers, dropout, train, bidirectional, batch_first);
  auto [output, finals] = traced_recurrent("lstm", input, hx, params, has_biases, num_layers, dropout, train,
                                           bidirectional, batch_first, &lstm_cell);
  return {output, finals[0], finals[1]};
}

// The op's name, for its errors.
template <RecurrentCell Cell>
constexpr const char* single_state_op() {
  if constexpr (Cell == &gru_cell) return "gru";
  if constexpr (Cell == &simple_rnn_cell<&at::tanh>) return "rnn_tanh";
  return "rnn_relu";
}

template <RecurrentCell Cell>
std::tuple<at::Tensor, at::Tensor> traced_single_state(const at::Tensor& input, const at::Tensor& hx,
                                                       at::TensorList params, bool has_biases, int64_t num_layers,
                                                       double dropout, bool train, bool bidirectional,
                                                       bool batch_first) {
  auto [output, finals] = traced_recurrent(single_state_op<Cell>(), input, {hx}, params, has_biases, num_layers,
                                           dropout, train, bidirectional, batch_first, Cell);
  return {output, finals[0]};
}

// one_hot with its number of classes given, as ATen computes it for Meta and Python tensors (what
// PyTorch's fake tensors, so AOTAutograd, trace): eq(self.unsqueeze(-1), arange(num_classes)).
// Eager's CPU path checks every class with min().item() and max().item() before a scatter, reads
// of the data a fake trace cannot make; like torch.compile, the compiled program does not check
// (a class out of range gives a row of zeros, not an error). With num_classes -1 the size itself
// is read from the data: eager's composite, which only a real trace can run.
at::Tensor traced_one_hot(const at::Tensor& self, int64_t num_classes) {
  if (num_classes == -1) return at::native::one_hot(self, num_classes);
  TORCH_CHECK(self.dtype() == at::kLong, "one_hot is only applicable to index tensor of type LongTensor.");
  return at::eq(self.unsqueeze(-1), at::arange(num_classes, self.options())).to(at::kLong);
}

// scaled_dot_product_attention as eager's composite, which asks the device which fused kernel to
// run (flash, memory-efficient, cuDNN) from its architecture, the dtype and the mask. For CUDA
// on a machine without a GPU that answer is "math" (matmuls and a softmax): the same values, more
// time and memory on the GPU. The compile says so, once per process, rather than silently.
at::Tensor traced_scaled_dot_product_attention(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                                               const std::optional<at::Tensor>& attn_mask, double dropout_p,
                                               bool is_causal, std::optional<double> scale, bool enable_gqa) {
  if (query.device().is_cuda() && !at::hasCUDA()) {
    TORCH_WARN_ONCE("aotpipe: scaled_dot_product_attention is compiled for ", query.device().str(),
                    " on a machine without a GPU, so it is recorded in its math form (matmuls and a softmax), not as "
                    "the flash or memory-efficient attention eager runs on a GPU: the same values, more time and "
                    "memory. Compile on a machine with the target GPU to record the fused kernels.");
  }
  return at::native::scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal, scale,
                                                  enable_gqa);
}

TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) {
  m.impl("native_batch_norm", TORCH_FN(traced_native_batch_norm));
  m.impl("scaled_dot_product_attention", TORCH_FN(traced_scaled_dot_product_attention));
  m.impl("one_hot", TORCH_FN(traced_one_hot));
  m.impl("cudnn_batch_norm", TORCH_FN(traced_cudnn_batch_norm));
  m.impl("lstm.input", TORCH_FN(traced_lstm));
  m.impl("gru.input", TORCH_FN(traced_single_state<&gru_cell>));
  m.impl("rnn_tanh.input", TORCH_FN(traced_single_state<&simple_rnn_cell<&at::tanh>>));
  m.impl("rnn_relu.input", TORCH_FN(traced_single_state<&simple_rnn_cell<&at::relu>>));
}

// The opposite case: ops that eager differentiates with their own autograd formula on the CPU
// but that a tracing tensor would see decomposed. The dispatcher gives an Autograd<Backend> key
// the op's CompositeImplicitAutograd kernel when <Backend> has no kernel of its own: the CPU has
// one for `silu_backward`, PrivateUse1 (the tracing tensor's backend) none. So a traced backward
// recorded sigmoid, ones, sub, mul, add, mul, mul (seven results alive where eager's one fused
// kernel makes one), while PyTorch's AOTAutograd, whose fake tensors dispatch as the CPU or CUDA,
// records one `aten::silu_backward`. A kernel on PrivateUse1 makes AutogradPrivateUse1 take the
// autograd formula as AutogradCPU does. It is never reached: the Fake key's fallback, above
// PrivateUse1, records and runs every op of a tracing tensor.
void unreachable_private_use1_kernel(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack*) {
  TORCH_CHECK(false, "aotpipe tracer: ", op.operator_name(), " reached PrivateUse1, which a tracing tensor never does");
}

bool differentiated_by_its_formula_on_cpu(const c10::OperatorHandle& op) {
  using c10::DispatchKey;
  return op.hasKernelForDispatchKey(DispatchKey::CompositeImplicitAutograd) &&
         op.hasKernelForDispatchKey(DispatchKey::Autograd) && op.hasKernelForDispatchKey(DispatchKey::CPU) &&
         op.hasKernelForDispatchKey(DispatchKey::Meta) && !op.hasKernelForDispatchKey(DispatchKey::PrivateUse1) &&
         !op.hasKernelForDispatchKey(DispatchKey::CompositeExplicitAutograd);
}

// At load, before any trace: registering while another thread dispatches would race.
[[maybe_unused]] const bool kept_with_their_formula = [] {
  static torch::Library library(torch::Library::IMPL, "aten", c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
  for (const c10::OperatorName& name : c10::Dispatcher::singleton().getAllOpNames()) {
    if (name.name.rfind("aten::", 0) != 0) continue;
    const std::optional<c10::OperatorHandle> op = c10::Dispatcher::singleton().findOp(name);
    if (!op || !op->hasSchema() || !differentiated_by_its_formula_on_cpu(*op)) continue;
    const std::string qualified = name.overload_name.empty() ? name.name : name.name + "." + name.overload_name;
    library.impl(qualified.substr(6).c_str(),
                 torch::CppFunction::makeFromBoxedFunction<&unreachable_private_use1_kernel>());
  }
  return true;
}();

}  // namespace
}  // namespace aotpipe::detail

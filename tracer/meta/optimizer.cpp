// Meta kernels of the fused optimizer steps (torch.optim.Adam/AdamW/SGD with fused=True): they
// update their lists in place and return nothing, so the Meta kernel is the CPU kernel's checks.
// Functionalization turns them into _fused_adam & co., whose generated kernels clone the lists and
// call these.
#include <aotpipe/tracer/internal/meta_support.h>

#include <ATen/core/Tensor.h>

namespace aotpipe::detail {
namespace {

using at::Tensor;
using at::TensorList;

void check_list(TensorList params, TensorList list, const char* name) {
  TORCH_CHECK(list.size() == params.size(), "Expected ", name, ".size() == n_tensors to be true, but got false.");
  for (std::size_t i = 0; i < list.size(); ++i)
    TORCH_CHECK(list[i].scalar_type() == params[i].scalar_type(), "expected scalar type ", params[i].scalar_type(),
                " but found ", list[i].scalar_type());
}

void check_adam(TensorList params, TensorList grads, TensorList exp_avgs, TensorList exp_avg_sqs,
                TensorList max_exp_avg_sqs, TensorList state_steps, bool amsgrad) {
  check_list(params, grads, "grads");
  check_list(params, exp_avgs, "exp_avgs");
  check_list(params, exp_avg_sqs, "exp_avg_sqs");
  if (amsgrad) {
    check_list(params, max_exp_avg_sqs, "max_exp_avg_sqs");
  } else {
    TORCH_CHECK(max_exp_avg_sqs.empty(), "Expected max_exp_avg_sqs.empty() to be true, but got false.");
  }
  TORCH_CHECK(state_steps.size() == params.size(),
              "Expected state_steps.size() == n_tensors to be true, but got false.");
}

void fused_adam_meta(at::TensorList params, at::TensorList grads, at::TensorList exp_avgs, at::TensorList exp_avg_sqs,
                     at::TensorList max_exp_avg_sqs, at::TensorList state_steps, double, double, double, double, double,
                     bool amsgrad, bool, const std::optional<Tensor>&, const std::optional<Tensor>&) {
  check_adam(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, amsgrad);
}

void fused_adam_tensor_lr_meta(at::TensorList params, at::TensorList grads, at::TensorList exp_avgs,
                               at::TensorList exp_avg_sqs, at::TensorList max_exp_avg_sqs, at::TensorList state_steps,
                               const Tensor&, double, double, double, double, bool amsgrad, bool,
                               const std::optional<Tensor>&, const std::optional<Tensor>&) {
  check_adam(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, amsgrad);
}

void check_sgd(TensorList params, TensorList grads, TensorList momentum_buffers, double momentum) {
  check_list(params, grads, "grads");
  if (momentum != 0) {
    check_list(params, momentum_buffers, "momentum_buffer_list");
  } else {
    TORCH_CHECK(momentum_buffers.empty(), "Expected momentum_buffer_list.empty() to be true, but got false.");
  }
}

void fused_sgd_meta(at::TensorList params, at::TensorList grads, at::TensorList momentum_buffers, double,
                    double momentum, double, double, bool, bool, bool, const std::optional<Tensor>&,
                    const std::optional<Tensor>&) {
  check_sgd(params, grads, momentum_buffers, momentum);
}

void fused_sgd_tensor_lr_meta(at::TensorList params, at::TensorList grads, at::TensorList momentum_buffers, double,
                              double momentum, const Tensor&, double, bool, bool, bool, const std::optional<Tensor>&,
                              const std::optional<Tensor>&) {
  check_sgd(params, grads, momentum_buffers, momentum);
}

}  // namespace

void register_optimizer_meta(MetaRegistrar& m) {
  m.impl("_fused_adam_", TORCH_FN(fused_adam_meta));
  m.impl("_fused_adam_.tensor_lr", TORCH_FN(fused_adam_tensor_lr_meta));
  m.impl("_fused_adamw_", TORCH_FN(fused_adam_meta));
  m.impl("_fused_adamw_.tensor_lr", TORCH_FN(fused_adam_tensor_lr_meta));
  m.impl("_fused_sgd_", TORCH_FN(fused_sgd_meta));
  m.impl("_fused_sgd_.tensor_lr", TORCH_FN(fused_sgd_tensor_lr_meta));
}

}  // namespace aotpipe::detail

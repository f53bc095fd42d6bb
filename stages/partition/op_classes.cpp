#include <aotpipe/stages/partition/op_classes.h>

#include <ATen/core/dispatch/Dispatcher.h>

#include <initializer_list>

namespace aotpipe::partitioners {
namespace {

void add_aten(PacketSet& set, std::initializer_list<const char*> names) {
  for (const char* n : names) set.insert(std::string("aten::") + n);
}

OpTypes make_default_op_types() {
  OpTypes t;
  auto& r = t.recomputable;
  // default_recomputable_ops, in PyTorch's order.
  add_aten(r, {"add",         "sub",         "div",
               "atan2",       "mul",         "max",
               "min",         "pow",         "remainder",
               "fmod",        "__and__",     "__or__",
               "__xor__",     "__lshift__",  "__rshift__",
               "eq",          "ne",          "ge",
               "gt",          "le",          "lt",
               "abs",         "bitwise_not", "ceil",
               "floor",       "frac",        "neg",
               "relu",        "round",       "silu",
               "trunc",       "log",         "log10",
               "log1p",       "log2",        "lgamma",
               "exp",         "expm1",       "erf",
               "erfc",        "cos",         "acos",
               "cosh",        "sin",         "asin",
               "sinh",        "tan",         "atan",
               "tanh",        "atanh",       "sqrt",
               "rsqrt",       "reciprocal",  "sigmoid",
               "softplus",    "threshold",   "threshold_backward",
               "clamp",       "where",       "lerp",
               "addcmul",     "gelu",        "gelu_backward",
               "sum",         "mean",        "_grad_sum_to_size",
               "sum_to_size", "amax",        "to",
               "type_as",     "squeeze",     "unsqueeze",
               "rsub",        "_to_copy"});
  r.insert(std::string(kGetItem));
  // recomputable_view_ops
  add_aten(t.view, {"squeeze", "unsqueeze", "alias", "view", "slice", "t", "expand", "as_strided", "permute", "select",
                    "split"});
  add_aten(r, {"clone",         "_to_copy",   "full_like",    "var",
               "std",           "select",     "_unsafe_view", "view",
               "expand",        "slice",      "reshape",      "broadcast_tensors",
               "scalar_tensor", "ones",       "new_zeros",    "lift_fresh_copy",
               "arange",        "triu",       "var_mean",     "isinf",
               "any",           "full",       "as_strided",   "zeros",
               "empty",         "empty_like", "argmax",       "maximum"});
  add_aten(r, {"index", "gather"});
  r.insert(t.view.begin(), t.view.end());
  r.insert(pointwise_packets().begin(), pointwise_packets().end());
  add_aten(r, {"zeros_like"});

  add_aten(t.random, {"native_dropout", "rand_like", "randn_like"});
  add_aten(t.compute_intensive,
           {"mm", "convolution", "convolution_backward", "bmm", "addmm", "_scaled_dot_product_flash_attention",
            "_scaled_dot_product_efficient_attention", "_flash_attention_forward", "_efficient_attention_forward",
            "upsample_bilinear2d", "_scaled_mm"});
  t.fusible = t.recomputable;
  t.fusible.insert(t.random.begin(), t.random.end());
  return t;
}

}  // namespace

const PacketSet& pointwise_packets() {
  static const PacketSet packets = [] {
    PacketSet out;
    auto& dispatcher = c10::Dispatcher::singleton();
    for (const c10::OperatorName& name : dispatcher.getAllOpNames()) {
      if (name.name.rfind("aten::", 0) != 0) continue;
      auto handle = dispatcher.findOp(name);
      if (handle && handle->hasSchema() && handle->hasTag(at::Tag::pointwise)) out.insert(name.name);
    }
    return out;
  }();
  return packets;
}

const OpTypes& default_op_types() {
  static const OpTypes types = make_default_op_types();
  return types;
}

}  // namespace aotpipe::partitioners

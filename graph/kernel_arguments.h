#pragma once
// How a node's constant argument reaches a kernel through the boxed calling convention, shared
// by the interpreter and shape propagation.
#include <ATen/core/function_schema.h>
#include <ATen/core/ivalue.h>

namespace aotpipe {

// `constant` for the schema argument `formal`. An undefined tensor is written None (the text form
// has nothing else for it), but a plain `Tensor` parameter wants an undefined Tensor, not None:
// a backward formula passes the forward's absent attn_bias on that way.
inline c10::IValue kernel_constant(const c10::IValue& constant, const c10::Argument* formal) {
  if (constant.isNone() && formal && formal->type()->kind() == c10::TypeKind::TensorType)
    return c10::IValue(at::Tensor());
  return constant;
}

}  // namespace aotpipe

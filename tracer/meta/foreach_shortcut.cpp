// Results of functional pointwise foreach ops made from metadata alone. Functionalization turns an
// optimizer's in-place foreach steps into these (_foreach_add.List, _foreach_sqrt...), and
// libtorch's Meta kernel for them is the composite loop: one dispatched op and one TensorIterator
// per list element, a fifth of an Adam step's compile. Where every element's result follows from
// its metadata alone, the tracer makes them directly. TensorIterator gives a pointwise result the
// layout its operands share when they are dense and alike; dimensions of size 1 (whose strides
// are free) and empty tensors it lays out by rules of its own, so those are left to libtorch.
// tests/tracer/foreach_shortcut_test.cpp compares every overload with libtorch's kernel.
#include <aotpipe/tracer/internal/meta_kernels.h>

#include <ATen/EmptyTensor.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/MemoryFormat.h>

#include <algorithm>
#include <array>
#include <string_view>

namespace aotpipe::detail {

namespace {

constexpr std::string_view kForeachPrefix = "aten::_foreach_";

bool plain_number(const c10::IValue& v) { return v.isDouble() || v.isInt() || v.isBool(); }

// An element whose result TensorIterator lays out as the element itself is laid out, or, for a
// contiguous one, contiguously.
bool shortcut_element(const at::Tensor& t) {
  if (t.numel() == 0) return false;
  if (t.is_contiguous()) return true;
  const auto sizes = t.sizes();
  return std::find(sizes.begin(), sizes.end(), 1) == sizes.end() && t.is_non_overlapping_and_dense();
}

}  // namespace

bool is_foreach_inplace(const c10::FunctionSchema& schema) {
  const std::string_view name = schema.name();
  if (!name.starts_with(kForeachPrefix) || !name.ends_with("_") || !schema.returns().empty()) return false;
  const auto& args = schema.arguments();
  if (args.empty() || !args[0].alias_info() || !args[0].alias_info()->isWrite()) return false;
  const auto* list = args[0].type()->castRaw<c10::ListType>();
  return list && list->getElementType()->kind() == c10::TypeKind::TensorType;
}

bool is_foreach_pointwise(const c10::FunctionSchema& schema) {
  const std::string_view name = schema.name();
  if (!name.starts_with(kForeachPrefix) || name.ends_with("_")) return false;
  // Reductions, and copies and fills (not arithmetic of their operands).
  static constexpr std::array<std::string_view, 5> excluded = {"norm", "max", "powsum", "copy", "zero"};
  if (std::find(excluded.begin(), excluded.end(), name.substr(kForeachPrefix.size())) != excluded.end()) return false;
  const auto& returns = schema.returns();
  if (returns.size() != 1 || returns[0].type()->kind() != c10::TypeKind::ListType) return false;
  return returns[0].type()->expectRef<c10::ListType>().getElementType()->kind() == c10::TypeKind::TensorType;
}

const c10::IValue* alike_foreach_operands(const std::vector<c10::IValue>& stack, std::size_t first,
                                          ForeachAlike alike) {
  const c10::IValue* reference = nullptr;
  for (std::size_t i = first; i < stack.size() && !reference; ++i)
    if (stack[i].isTensorList()) reference = &stack[i];
  if (!reference) return nullptr;
  const c10::List<at::Tensor> elements = reference->toTensorList();
  if (elements.empty() || !elements.get(0).defined()) return nullptr;
  const c10::ScalarType dtype = elements.get(0).scalar_type();
  if (!c10::isFloatingType(dtype)) return nullptr;  // integer and bool results follow promotion rules
  for (std::size_t i = first; i < stack.size(); ++i) {
    const c10::IValue& arg = stack[i];
    if (arg.isTensorList()) {
      const c10::List<at::Tensor> list = arg.toTensorList();
      if (list.size() != elements.size()) return nullptr;
      for (std::size_t k = 0; k < list.size(); ++k) {
        const at::Tensor& t = list.get(k);
        const at::Tensor& e = elements.get(k);
        if (!t.defined() || !t.is_meta() || t.scalar_type() != dtype || t.sizes() != e.sizes() ||
            (alike == ForeachAlike::SizesAndStrides && t.strides() != e.strides()))
          return nullptr;
      }
    } else if (arg.isList()) {  // a scalar list, whatever its element type (all lists are generic)
      if (arg.toListRef().size() != elements.size()) return nullptr;
      for (const c10::IValue& e : arg.toListRef())
        if (!plain_number(e)) return nullptr;
    } else if (!(plain_number(arg) || arg.isNone())) {
      return nullptr;  // a tensor operand (broadcast against each element), a complex scalar
    }
  }
  return reference;
}

bool run_foreach_pointwise_shortcut(std::vector<c10::IValue>& stack, std::size_t first) {
  const c10::IValue* reference = alike_foreach_operands(stack, first, ForeachAlike::SizesAndStrides);
  if (!reference) return false;
  const c10::List<at::Tensor> elements = reference->toTensorList();
  // Where the list is not `self` (_foreach_pow.ScalarAndTensor: a scalar base), libtorch's results
  // are contiguous whatever the list's layout: only contiguous lists are answered.
  const bool self_is_list = reference == &stack[first];
  for (const at::Tensor& t : elements)
    if (!shortcut_element(t) || !(self_is_list || t.is_contiguous())) return false;
  const c10::ScalarType dtype = elements.get(0).scalar_type();
  std::vector<at::Tensor> results;
  results.reserve(elements.size());
  for (const at::Tensor& e : elements) {
    results.emplace_back(e.is_contiguous() ? at::detail::empty_meta(e.sizes(), dtype, c10::MemoryFormat::Contiguous)
                                           : at::detail::empty_strided_meta(e.sizes(), e.strides(), dtype));
  }
  stack.resize(first);
  stack.emplace_back(std::move(results));
  return true;
}

}  // namespace aotpipe::detail

// The tracer's shortcut for functional pointwise foreach ops (tracer/meta/foreach_shortcut.cpp)
// against libtorch's own Meta kernel, for every such overload libtorch registers: where it
// answers, the results must equal libtorch's exactly (sizes, every stride, offset, dtype), it must
// answer for the layouts it is meant for, and it must leave everything else to libtorch.
#include <aotpipe/tracer/internal/meta_kernels.h>

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

namespace aotpipe {
namespace {

using at::Tensor;
using c10::IValue;

at::TensorOptions meta(at::ScalarType dtype) { return at::TensorOptions().dtype(dtype).device(at::kMeta); }

// Three list elements laid out one way each; `answers`: whether the shortcut is meant to take them.
struct ElementSet {
  std::string name;
  bool answers;
  bool contiguous;  // every element
  std::function<std::vector<Tensor>(at::ScalarType)> make;
};

std::vector<ElementSet> element_sets() {
  return {
      {"contiguous, 0-dim, 1-d", true, true,
       [](at::ScalarType d) {
         return std::vector<Tensor>{at::empty({2, 3}, meta(d)), at::empty({}, meta(d)), at::empty({4}, meta(d))};
       }},
      {"channels_last, transposed, 3-d permuted", true, false,
       [](at::ScalarType d) {
         return std::vector<Tensor>{at::empty({2, 3, 4, 5}, meta(d)).contiguous(at::MemoryFormat::ChannelsLast),
                                    at::empty({4, 3}, meta(d)).t(), at::empty({2, 3, 4}, meta(d)).permute({2, 0, 1})};
       }},
      {"size-1 dims, contiguous with free strides", true, true,
       [](at::ScalarType d) {
         return std::vector<Tensor>{at::empty({1, 3}, meta(d)), at::empty({3, 1}, meta(d)),
                                    at::empty({8}, meta(d)).as_strided({1, 3}, {7, 1})};
       }},
      {"size-1 dim, not contiguous", false, false,
       [](at::ScalarType d) {
         return std::vector<Tensor>{at::empty({2, 3}, meta(d)), at::empty({3, 1, 4}, meta(d)).permute({2, 1, 0}),
                                    at::empty({4}, meta(d))};
       }},
      {"a strided slice (not dense)", false, false,
       [](at::ScalarType d) {
         return std::vector<Tensor>{at::empty({2, 3}, meta(d)), at::empty({6, 3}, meta(d)).slice(0, 0, 6, 2),
                                    at::empty({4}, meta(d))};
       }},
      {"an empty element", false, true,
       [](at::ScalarType d) {
         return std::vector<Tensor>{at::empty({2, 3}, meta(d)), at::empty({0, 3}, meta(d)), at::empty({4}, meta(d))};
       }},
      {"an expanded element (overlapping)", false, false,
       [](at::ScalarType d) {
         return std::vector<Tensor>{at::empty({2, 3}, meta(d)), at::empty({1, 3}, meta(d)).expand({2, 3}),
                                    at::empty({4}, meta(d))};
       }},
  };
}

// The same elements with element 0 laid out otherwise (its dimensions in reverse order in
// memory): a second list like this one does not match the first's strides.
std::vector<Tensor> restrided(const std::vector<Tensor>& elements) {
  std::vector<Tensor> out = elements;
  std::vector<int64_t> sizes = out[0].sizes().vec(), order(sizes.size());
  std::reverse(sizes.begin(), sizes.end());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(order.size() - 1 - i);
  out[0] = at::empty(sizes, out[0].options()).permute(order);
  return out;
}

struct Sample {
  std::string label;
  std::vector<IValue> args;
  bool answers;
};

// Arguments for `schema`, or an error naming an argument type the test does not know.
std::vector<Sample> samples_for(const c10::FunctionSchema& schema, std::string& unknown) {
  std::vector<Sample> out;
  for (at::ScalarType dtype : {at::kFloat, at::kDouble, at::kBFloat16, at::kLong}) {
    for (const ElementSet& set : element_sets()) {
      for (int variant = 0; variant < 3; ++variant) {  // 0 as made, 1 later lists restrided, 2 complex scalar
        std::vector<IValue> args;
        bool lists = false, answers = set.answers && dtype != at::kLong;
        // A list that is not `self` (a scalar base of pow) is answered only when contiguous.
        const bool self_is_list = schema.arguments()[0].type()->kind() == c10::TypeKind::ListType;
        if (!self_is_list && !set.contiguous) answers = false;
        bool variant_applies = false;
        for (const c10::Argument& arg : schema.arguments()) {
          const c10::TypePtr& type = arg.type();
          if (type->kind() == c10::TypeKind::ListType &&
              type->expectRef<c10::ListType>().getElementType()->kind() == c10::TypeKind::TensorType) {
            std::vector<Tensor> elements = set.make(dtype);
            if (variant == 1 && lists) {
              elements = restrided(elements);
              variant_applies = answers = false;
            }
            args.emplace_back(elements);
            lists = true;
          } else if (type->kind() == c10::TypeKind::ListType) {  // Scalar[]
            args.emplace_back(c10::List<c10::Scalar>({0.5, 2, 3.0}));
          } else if (type->kind() == c10::TypeKind::NumberType) {  // Scalar
            if (variant == 2) {
              args.emplace_back(c10::complex<double>(0.5, 1.0));
              variant_applies = true;
              answers = false;
            } else {
              args.emplace_back(0.5);
            }
          } else if (type->kind() == c10::TypeKind::TensorType) {  // a tensor operand: left to libtorch
            args.emplace_back(at::empty({}, meta(dtype)));
            answers = false;
          } else {
            unknown = type->str();
            return {};
          }
        }
        if (variant != 0 && !variant_applies) continue;
        out.push_back({fmt::format("{} {} variant {}", c10::toString(dtype), set.name, variant), args, answers});
      }
    }
  }
  return out;
}

std::vector<const c10::OperatorHandle*> foreach_pointwise_ops(std::vector<c10::OperatorHandle>& storage) {
  for (const c10::OperatorName& name : c10::Dispatcher::singleton().getAllOpNames()) {
    auto op = c10::Dispatcher::singleton().findSchema(name);
    if (op && detail::is_foreach_pointwise(op->schema())) storage.push_back(*op);
  }
  std::vector<const c10::OperatorHandle*> out;
  for (const auto& op : storage) out.push_back(&op);
  return out;
}

std::string describe(const Tensor& t) {
  return fmt::format("{} {} stride {} offset {}", c10::toString(t.scalar_type()), t.sizes(), t.strides(),
                     t.storage_offset());
}

TEST(ForeachShortcut, EqualsLibtorchsMetaKernelForEveryOverload) {
  detail::link_meta_kernels();  // the trace's Meta kernels are libtorch's and aotpipe's
  std::vector<c10::OperatorHandle> storage;
  const auto ops = foreach_pointwise_ops(storage);
  ASSERT_GE(ops.size(), 60u) << "libtorch 2.11 has about 70 functional pointwise foreach overloads";
  std::size_t answered = 0, declined = 0;
  for (const c10::OperatorHandle* op : ops) {
    const std::string name = op->schema().name() + "." + op->schema().overload_name();
    std::string unknown;
    const std::vector<Sample> samples = samples_for(op->schema(), unknown);
    ASSERT_TRUE(unknown.empty()) << name << ": no sample for an argument of type " << unknown;
    std::size_t answered_here = 0;
    for (const Sample& sample : samples) {
      std::vector<IValue> shortcut_stack = sample.args, libtorch_stack = sample.args;
      const bool took = detail::run_foreach_pointwise_shortcut(shortcut_stack, 0);
      EXPECT_EQ(took, sample.answers) << name << " [" << sample.label << "]";
      if (!took) {
        ++declined;
        EXPECT_EQ(shortcut_stack.size(), sample.args.size()) << name << ": a declined call changed the stack";
        continue;
      }
      ++answered, ++answered_here;
      try {
        op->callBoxed(libtorch_stack);
      } catch (const std::exception& e) {
        ADD_FAILURE() << name << " [" << sample.label << "]: answered where libtorch refuses: " << e.what();
        continue;
      }
      ASSERT_EQ(shortcut_stack.size(), 1u);
      ASSERT_EQ(libtorch_stack.size(), 1u);
      const auto mine = shortcut_stack[0].toTensorList(), theirs = libtorch_stack[0].toTensorList();
      ASSERT_EQ(mine.size(), theirs.size()) << name;
      for (std::size_t i = 0; i < mine.size(); ++i) {
        const Tensor a = mine.get(i), b = theirs.get(i);
        EXPECT_TRUE(a.is_meta());
        EXPECT_TRUE(a.sizes() == b.sizes() && a.strides() == b.strides() && a.storage_offset() == b.storage_offset() &&
                    a.scalar_type() == b.scalar_type())
            << name << " [" << sample.label << "] element " << i << ": shortcut " << describe(a) << ", libtorch "
            << describe(b);
      }
    }
    const bool tensor_operand =
        std::any_of(op->schema().arguments().begin(), op->schema().arguments().end(),
                    [](const c10::Argument& a) { return a.type()->kind() == c10::TypeKind::TensorType; });
    if (!tensor_operand) EXPECT_GT(answered_here, 0u) << name << ": never answered";
  }
  std::cout << "answered " << answered << ", declined " << declined << " calls of " << ops.size() << " overloads\n";
}

// What is not a functional pointwise foreach op is never taken.
TEST(ForeachShortcut, OnlyFunctionalPointwiseForeachOpsQualify) {
  auto schema = [](const char* name, const char* overload) {
    auto op = c10::Dispatcher::singleton().findSchema({name, overload});
    EXPECT_TRUE(op.has_value()) << name;
    return op ? &op->schema() : nullptr;
  };
  EXPECT_TRUE(detail::is_foreach_pointwise(*schema("aten::_foreach_add", "List")));
  EXPECT_TRUE(detail::is_foreach_pointwise(*schema("aten::_foreach_sqrt", "")));
  EXPECT_TRUE(detail::is_foreach_pointwise(*schema("aten::_foreach_pow", "ScalarAndTensor")));
  EXPECT_FALSE(detail::is_foreach_pointwise(*schema("aten::_foreach_add_", "List")));  // in place
  EXPECT_FALSE(detail::is_foreach_pointwise(*schema("aten::_foreach_norm", "Scalar")));
  EXPECT_FALSE(detail::is_foreach_pointwise(*schema("aten::_foreach_max", "")));
  EXPECT_FALSE(detail::is_foreach_pointwise(*schema("aten::_foreach_copy", "")));
  EXPECT_FALSE(detail::is_foreach_pointwise(*schema("aten::_foreach_add", "List_out")));  // returns nothing
  EXPECT_FALSE(detail::is_foreach_pointwise(*schema("aten::add", "Tensor")));

  // The in-place ones (whose functionalization check the tracer may skip) are a kind apart.
  EXPECT_TRUE(detail::is_foreach_inplace(*schema("aten::_foreach_add_", "List")));
  EXPECT_TRUE(detail::is_foreach_inplace(*schema("aten::_foreach_addcmul_", "ScalarList")));
  EXPECT_TRUE(detail::is_foreach_inplace(*schema("aten::_foreach_zero_", "")));
  EXPECT_FALSE(detail::is_foreach_inplace(*schema("aten::_foreach_add", "List")));
  EXPECT_FALSE(detail::is_foreach_inplace(*schema("aten::add_", "Tensor")));
  std::size_t inplace = 0;
  for (const c10::OperatorName& name : c10::Dispatcher::singleton().getAllOpNames()) {
    auto op = c10::Dispatcher::singleton().findSchema(name);
    if (!op) continue;
    const c10::FunctionSchema& s = op->schema();
    EXPECT_FALSE(detail::is_foreach_inplace(s) && detail::is_foreach_pointwise(s)) << s.name();
    inplace += detail::is_foreach_inplace(s);
  }
  EXPECT_GE(inplace, 60u) << "libtorch 2.11 has about 70 in-place foreach overloads";
}

}  // namespace
}  // namespace aotpipe

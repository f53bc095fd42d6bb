#include <aotpipe/graph/meta_propagation.h>

#include <random>

#include "test_support.h"

namespace aotpipe::testing {

Graph random_graph(uint64_t seed, int num_nodes) {
  std::mt19937_64 rng(seed);
  auto pick = [&](auto n) { return static_cast<std::size_t>(rng() % static_cast<uint64_t>(n)); };
  Graph g("random_" + std::to_string(seed));
  // All tensors of one "family" share a shape so binary ops always apply.
  const std::vector<int64_t> shape{3, 4};
  std::vector<Value*> pool;
  int num_inputs = 1 + static_cast<int>(pick(3));
  for (int i = 0; i < num_inputs; ++i)
    pool.push_back(g.add_input("in" + std::to_string(i), TensorMeta::contiguous(shape)));
  auto any = [&] { return pool[pick(pool.size())]; };
  auto add = [&](std::string_view op, std::vector<Argument> args, std::size_t n_outputs = 0) {
    std::vector<OutputSpec> specs(n_outputs);
    Node* node = g.add_call(op, std::move(args), std::move(specs));
    infer_node_meta(*node);
    return node;
  };
  for (int i = 0; i < num_nodes; ++i) {
    switch (pick(12)) {
      case 0: {
        static const char* unary[] = {"aten::sin", "aten::cos",  "aten::exp",    "aten::sqrt",
                                      "aten::neg", "aten::tanh", "aten::sigmoid"};
        pool.push_back(add(unary[pick(7)], {any()})->output());
        break;
      }
      case 1:
        pool.push_back(add("aten::add.Tensor", {any(), any(), static_cast<double>(pick(5)) * 0.25})->output());
        break;
      case 2: pool.push_back(add("aten::mul.Tensor", {any(), any()})->output()); break;
      case 3:
        pool.push_back(add("aten::mul.Scalar", {any(), pick(2) ? Argument(int64_t{3}) : Argument(-1.5e-3)})->output());
        break;
      case 4: {
        // Reduce, then broadcast back by adding to a full-shape value.
        Value* r =
            add("aten::sum.dim_IntList", {any(), std::vector<int64_t>{static_cast<int64_t>(pick(2))}, true})->output();
        pool.push_back(add("aten::add.Tensor", {any(), r})->output());
        break;
      }
      case 5: {
        Value* t = add("aten::transpose.int", {any(), 0, 1})->output();
        Value* c = add("aten::clone", {t, c10::IValue(static_cast<int64_t>(c10::MemoryFormat::Contiguous))})->output();
        pool.push_back(add("aten::view", {c, shape})->output());
        break;
      }
      case 6: {
        // (var_mean has no C++ meta kernel: its Python meta registration does the work there.)
        Node* mm = add("aten::aminmax", {any(), int64_t{1}, true}, 2);
        pool.push_back(add("aten::sub.Tensor", {any(), mm->output(1)})->output());
        break;
      }
      case 7: {
        Node* split = add("aten::split.Tensor", {any(), 2, 1}, 2);
        pool.push_back(add("aten::cat", {ValueList{{split->output(1), split->output(0)}}, 1})->output());
        break;
      }
      case 8: {
        Value* d = add("aten::_to_copy", {any(), c10::IValue(static_cast<int64_t>(c10::ScalarType::Double))})->output();
        pool.push_back(add("aten::_to_copy", {d, c10::IValue(static_cast<int64_t>(c10::ScalarType::Float))})->output());
        break;
      }
      case 9: {
        // (where.self has no C++ meta kernel either; gt + mul keep a bool-typed value in play.)
        Value* mask = add("aten::gt.Scalar", {any(), 0.0})->output();
        pool.push_back(add("aten::mul.Tensor", {add("aten::maximum", {any(), any()})->output(), mask})->output());
        break;
      }
      case 10: {
        Value* idx =
            add("aten::arange.start", {0, 3, c10::IValue(static_cast<int64_t>(c10::ScalarType::Long))})->output();
        pool.push_back(add("aten::index.Tensor", {any(), ValueList{{idx}}})->output());
        break;
      }
      default: pool.push_back(add("aten::clamp", {any(), -1.0, c10::IValue(2.5)})->output()); break;
    }
  }
  std::vector<Value*> outputs{pool.back()};
  if (pool.size() > 2) outputs.push_back(pool[pick(pool.size() - 1)]);
  g.set_outputs(outputs);
  return g;
}

}  // namespace aotpipe::testing

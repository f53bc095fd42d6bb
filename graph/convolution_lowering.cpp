#include <aotpipe/graph/autocast_region.h>
#include <aotpipe/graph/convolution_lowering.h>
#include <aotpipe/graph/meta_propagation.h>

#include <c10/core/MemoryFormat.h>

#include <algorithm>
#include <array>
#include <string>
#include <utility>
#include <optional>

namespace aotpipe {

namespace {

// What a lowerable convolution_backward computes, read from its node.
struct PointwiseConvolutionBackward {
  Value* grad_output = nullptr;  // [N, O, Ho, Wo]
  Value* input = nullptr;        // [N, C, H, W]
  Value* weight = nullptr;       // [O, C, 1, 1], contiguous
  int64_t n = 0, c = 0, h = 0, w = 0, o = 0, ho = 0, wo = 0;
  std::array<int64_t, 2> stride{1, 1};
  std::array<bool, 3> mask{false, false, false};  // grad input, grad weight, grad bias

  // The positions the kernel read: the rows of both products.
  int64_t rows() const { return n * ho * wo; }
};

std::optional<std::vector<int64_t>> int_list(const Argument& arg) {
  if (!arg.is_constant() || !arg.constant().isIntList()) return std::nullopt;
  return arg.constant().toIntVector();
}

bool is_float_on_cpu(const TensorMeta& meta) {
  return meta.device.is_cpu() && (meta.dtype == c10::ScalarType::Float || meta.dtype == c10::ScalarType::Double);
}

// The declared result `k` has the dtype and the contiguous layout of `sizes`.
bool result_is_contiguous(const Node& node, std::size_t k, const TensorMeta& like, const Dims& sizes) {
  const TensorMeta* meta = node.output(k)->meta();
  return meta && meta->dtype == like.dtype && meta->sizes == sizes && meta->strides == contiguous_strides(sizes) &&
         meta->storage_offset == 0;
}

std::optional<PointwiseConvolutionBackward> match_lowerable(const Node& node,
                                                            const ConvolutionLoweringOptions& options) {
  if (!node.is_call() || node.schema().name() != "aten::convolution_backward" || !node.schema().overload_name().empty())
    return std::nullopt;
  const auto& args = node.args();
  if (args.size() != 11 || !args[0].is_value() || !args[1].is_value() || !args[2].is_value()) return std::nullopt;
  if (AutocastRegion::of(node)) return std::nullopt;  // mm is on autocast's lower-precision list
  PointwiseConvolutionBackward conv{args[0].value(), args[1].value(), args[2].value()};
  const TensorMeta* go = conv.grad_output->meta();
  const TensorMeta* x = conv.input->meta();
  const TensorMeta* wt = conv.weight->meta();
  if (!go || !x || !wt || !is_float_on_cpu(*x) || go->dtype != x->dtype || wt->dtype != x->dtype ||
      !go->device.is_cpu() || !wt->device.is_cpu())
    return std::nullopt;
  if (x->sizes.size() != 4 || go->sizes.size() != 4 || wt->sizes.size() != 4 || !wt->is_contiguous())
    return std::nullopt;
  auto stride = int_list(args[4]);
  auto padding = int_list(args[5]);
  auto output_padding = int_list(args[8]);
  const bool plain = args[7].is_constant() && args[7].constant().isBool() && !args[7].constant().toBool() &&
                     args[9].is_constant() && args[9].constant().isInt() && args[9].constant().toInt() == 1;
  if (!plain || !stride || stride->size() != 2 || (*stride)[0] < 1 || (*stride)[1] < 1 || !padding ||
      *padding != std::vector<int64_t>{0, 0} || !output_padding || *output_padding != std::vector<int64_t>{0, 0})
    return std::nullopt;
  if (!args[10].is_constant() || !args[10].constant().isBoolList()) return std::nullopt;
  const c10::List<bool> mask = args[10].constant().toBoolList();
  if (mask.size() != 3) return std::nullopt;
  for (std::size_t k = 0; k < 3; ++k) conv.mask[k] = mask.get(k);

  conv.n = x->sizes[0], conv.c = x->sizes[1], conv.h = x->sizes[2], conv.w = x->sizes[3];
  conv.o = wt->sizes[0];
  conv.stride = {(*stride)[0], (*stride)[1]};
  conv.ho = conv.h == 0 ? 0 : (conv.h - 1) / conv.stride[0] + 1;
  conv.wo = conv.w == 0 ? 0 : (conv.w - 1) / conv.stride[1] + 1;
  if (wt->sizes != Dims{conv.o, conv.c, 1, 1} || go->sizes != Dims{conv.n, conv.o, conv.ho, conv.wo})
    return std::nullopt;
  if (conv.rows() == 0 || conv.c == 0 || conv.o == 0) return std::nullopt;
  // The cost rule (measured, docs/stages/compile.md): the product wins where the weight dominates.
  if (options.only_where_faster && conv.rows() * (conv.c + conv.o) > conv.c * conv.o) return std::nullopt;

  if (conv.mask[0] && !result_is_contiguous(node, 0, *x, x->sizes)) return std::nullopt;
  if (conv.mask[1] && !result_is_contiguous(node, 1, *x, wt->sizes)) return std::nullopt;
  if (conv.mask[2] && !result_is_contiguous(node, 2, *x, Dims{conv.o})) return std::nullopt;
  return conv;
}

// Emits calls before one node, each with the node's attributes and inferred TensorMeta.
class Emitter {
 public:
  Emitter(Graph& graph, Node& at) : graph_(graph), at_(at) {}

  Value* call(std::string_view op, std::vector<Argument> args) {
    Node* node = graph_.add_call(op, std::move(args), {}, &at_);
    node->attrs() = at_.attrs();
    infer_node_meta(*node);
    emitted_.push_back(node);
    return node->output();
  }
  // x with the positions as rows and the channels as columns: [N*Ho*Wo, channels], row-major.
  Value* rows_of(Value* x, int64_t rows, int64_t channels) {
    Value* nhwc = call("aten::permute", {x, std::vector<int64_t>{0, 2, 3, 1}});
    Value* dense = call("aten::clone", {nhwc, c10::IValue(c10::MemoryFormat::Contiguous)});
    return call("aten::_unsafe_view", {dense, std::vector<int64_t>{rows, channels}});
  }
  const std::vector<Node*>& emitted() const { return emitted_; }

 private:
  Graph& graph_;
  Node& at_;
  std::vector<Node*> emitted_;
};

// The gradients of `conv`, computed before `node`; nullptr where the mask asks for none.
std::array<Value*, 3> emit_gradients(Emitter& emit, const PointwiseConvolutionBackward& conv) {
  // [P, O]; only the bias gradient reads none.
  Value* grad_rows = conv.mask[0] || conv.mask[1] ? emit.rows_of(conv.grad_output, conv.rows(), conv.o) : nullptr;
  std::array<Value*, 3> grads{nullptr, nullptr, nullptr};
  if (conv.mask[0]) {
    Value* weight = emit.call("aten::view", {conv.weight, std::vector<int64_t>{conv.o, conv.c}});
    Value* product = emit.call("aten::mm", {grad_rows, weight});  // [P, C]
    Value* nhwc = emit.call("aten::_unsafe_view", {product, std::vector<int64_t>{conv.n, conv.ho, conv.wo, conv.c}});
    Value* nchw = emit.call("aten::permute", {nhwc, std::vector<int64_t>{0, 3, 1, 2}});
    if (conv.stride == std::array<int64_t, 2>{1, 1}) {
      grads[0] = emit.call("aten::clone", {nchw, c10::IValue(c10::MemoryFormat::Contiguous)});
    } else {
      // The positions the strided kernel read get their gradient; the others none.
      Value* zeros = emit.call("aten::new_zeros", {conv.input, std::vector<int64_t>{conv.n, conv.c, conv.h, conv.w}});
      const std::vector<int64_t> read_sizes{conv.n, conv.c, conv.ho, conv.wo};
      const std::vector<int64_t> read_strides{conv.c * conv.h * conv.w, conv.h * conv.w, conv.stride[0] * conv.w,
                                              conv.stride[1]};
      grads[0] = emit.call("aten::as_strided_scatter", {zeros, nchw, read_sizes, read_strides, int64_t{0}});
    }
  }
  if (conv.mask[1]) {
    Value* input = conv.input;
    if (conv.stride[0] > 1) input = emit.call("aten::slice.Tensor", {input, 2, int64_t{0}, conv.h, conv.stride[0]});
    if (conv.stride[1] > 1) input = emit.call("aten::slice.Tensor", {input, 3, int64_t{0}, conv.w, conv.stride[1]});
    Value* input_rows = emit.rows_of(input, conv.rows(), conv.c);  // [P, C]
    Value* grad_columns = emit.call("aten::t", {grad_rows});
    Value* product = emit.call("aten::mm", {grad_columns, input_rows});  // [O, C]
    grads[1] = emit.call("aten::_unsafe_view", {product, std::vector<int64_t>{conv.o, conv.c, 1, 1}});
  }
  if (conv.mask[2])
    grads[2] = emit.call("aten::sum.dim_IntList", {conv.grad_output, std::vector<int64_t>{0, 2, 3}, false});
  return grads;
}

// The lowerable calls of `graph`, each with what it computes.
std::vector<std::pair<Node*, PointwiseConvolutionBackward>> matches(const Graph& graph,
                                                                    const ConvolutionLoweringOptions& options) {
  std::vector<std::pair<Node*, PointwiseConvolutionBackward>> found;
  for (Node* node : graph.nodes())
    if (auto conv = match_lowerable(*node, options)) found.emplace_back(node, *conv);
  return found;
}

}  // namespace

std::vector<const Node*> lowerable_convolution_backwards(const Graph& graph,
                                                         const ConvolutionLoweringOptions& options) {
  std::vector<const Node*> found;
  for (const auto& [node, conv] : matches(graph, options)) found.push_back(node);
  return found;
}

std::size_t lower_convolution_backward(Graph& graph, const ConvolutionLoweringOptions& options) {
  std::size_t lowered = 0;
  const auto targets = matches(graph, options);
  if (targets.empty()) return 0;
  const auto uses = graph.compute_uses();
  for (const auto& [node, conv] : targets) {
    // A result the mask leaves undefined is never read in a traced graph; if one were, keep the call.
    bool unread_undefined = true;
    for (std::size_t k = 0; k < 3; ++k)
      if (!conv.mask[k])
        unread_undefined = unread_undefined && !uses.contains(node->output(k)) &&
                           !std::ranges::count(graph.outputs(), node->output(k));
    if (!unread_undefined) continue;
    Emitter emit(graph, *node);
    const std::array<Value*, 3> grads = emit_gradients(emit, conv);
    // The rules in match_lowerable() promise the declared layouts; a result that differs anyway keeps the
    // original call (its emitted calls are dropped) rather than change what the graph computes.
    bool same = true;
    for (std::size_t k = 0; k < 3; ++k)
      if (grads[k]) same = same && grads[k]->meta() && grads[k]->meta()->same_layout(*node->output(k)->meta());
    if (!same) {
      graph.erase_nodes(emit.emitted());
      continue;
    }
    std::array<std::string, 3> names;
    for (std::size_t k = 0; k < 3; ++k) {
      if (!grads[k]) continue;
      names[k] = node->output(k)->name();
      grads[k]->set_meta(*node->output(k)->meta());  // requires_grad as declared
      graph.replace_all_uses(node->output(k), grads[k]);
    }
    graph.erase_node(node);
    // The gradients keep their names: error messages and printed graphs still say %convolution_backward.
    for (std::size_t k = 0; k < 3; ++k)
      if (grads[k]) graph.rename(grads[k], names[k]);
    ++lowered;
  }
  return lowered;
}

}  // namespace aotpipe

// Differential test of aotpipe's Meta kernels (tracer/meta/): every registered op, over generated
// argument combinations (contiguous, channels_last, transposed, offset views, broadcasting,
// 0-size, non-default dtypes, optional arguments set and unset), runs once on real CPU tensors and
// once on meta tensors with the same metadata; the outputs must agree in sizes, significant
// strides (those of dimensions longer than 1, as PyTorch's meta tests compare), storage offset,
// dtype, definedness and in which arguments or earlier outputs they alias. Like PyTorch's OpInfo
// meta tests (test/test_meta.py), against the kernels a C++ process really has.
#include <aotpipe/tracer/internal/meta_kernels.h>

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace aotpipe {
namespace {

using at::Tensor;
using c10::IValue;

struct Sample {
  std::string label;
  std::vector<IValue> args;
};
using Samples = std::vector<Sample>;

// ---- tensors in many layouts -------------------------------------------------------------------

Tensor randn(at::IntArrayRef sizes, at::ScalarType dtype = at::kFloat) { return at::randn(sizes).to(dtype); }

// A tensor of `sizes` laid out in one of several ways (same values semantics, different strides).
struct Layout {
  std::string name;
  std::function<Tensor(at::IntArrayRef, at::ScalarType)> make;
};

std::vector<Layout> layouts(std::size_t rank) {
  std::vector<Layout> out;
  out.push_back({"contiguous", [](at::IntArrayRef s, at::ScalarType d) { return randn(s, d); }});
  if (rank == 4)
    out.push_back({"channels_last", [](at::IntArrayRef s, at::ScalarType d) {
                     return randn(s, d).contiguous(at::MemoryFormat::ChannelsLast);
                   }});
  if (rank >= 2)
    out.push_back({"transposed", [](at::IntArrayRef s, at::ScalarType d) {  // last two dims swapped in memory
                     std::vector<int64_t> t(s.begin(), s.end());
                     std::swap(t[t.size() - 1], t[t.size() - 2]);
                     return randn(t, d).transpose(-1, -2);
                   }});
  if (rank >= 1)
    out.push_back({"offset_slice", [](at::IntArrayRef s, at::ScalarType d) {  // non-dense, storage offset 1
                     std::vector<int64_t> big(s.begin(), s.end());
                     big.back() = big.back() * 2 + 1;
                     return randn(big, d).narrow(-1, 1, s.back() * 2).slice(-1, 0, s.back() * 2, 2);
                   }});
  return out;
}

// ---- the differential check --------------------------------------------------------------------

struct Aliasing {
  // For each output tensor: "arg N" / "output N" / "" (fresh).
  std::vector<std::string> sources;
};

// Meta twins of the CPU arguments: one meta storage per CPU storage, so aliasing is kept.
struct MetaMirror {
  std::unordered_map<const c10::StorageImpl*, Tensor> storages;
  Tensor operator()(const Tensor& t) {
    if (!t.defined()) return t;
    auto& base = storages[t.storage().unsafeGetStorageImpl()];
    if (!base.defined())
      base = at::empty({static_cast<int64_t>(t.storage().nbytes())},
                       at::TensorOptions().dtype(at::kByte).device(at::kMeta));
    Tensor m =
        at::empty({0}, t.options().device(at::kMeta)).set_(base.storage(), t.storage_offset(), t.sizes(), t.strides());
    return m;
  }
  IValue operator()(const IValue& v) {
    if (v.isTensor()) return (*this)(v.toTensor());
    if (v.isTensorList()) {
      std::vector<Tensor> out;
      for (const Tensor& t : v.toTensorList()) out.push_back((*this)(t));
      return out;
    }
    if (v.isList()) {  // Tensor?[]
      bool tensors = false;
      for (const IValue& e : v.toListRef()) tensors |= e.isTensor();
      if (!tensors) return v;
      c10::List<std::optional<Tensor>> out;
      for (const IValue& e : v.toListRef())
        out.push_back(e.isTensor() ? std::optional<Tensor>((*this)(e.toTensor())) : std::nullopt);
      return out;
    }
    return v;
  }
};

std::vector<Tensor> flat_tensors(const std::vector<IValue>& values) {
  std::vector<Tensor> out;
  for (const IValue& v : values) {
    if (v.isTensor())
      out.push_back(v.toTensor());
    else if (v.isTensorList())
      for (const Tensor& t : v.toTensorList()) out.push_back(t);
    else if (v.isNone())
      out.push_back(Tensor());
  }
  return out;
}

Aliasing aliasing_of(const std::vector<Tensor>& args, const std::vector<Tensor>& outs) {
  Aliasing a;
  for (std::size_t i = 0; i < outs.size(); ++i) {
    std::string source;
    if (outs[i].defined() && outs[i].has_storage()) {
      for (std::size_t k = 0; k < args.size() && source.empty(); ++k)
        if (args[k].defined() && args[k].has_storage() && args[k].storage().is_alias_of(outs[i].storage()) &&
            args[k].storage().nbytes() > 0)
          source = fmt::format("arg {}", k);
      for (std::size_t k = 0; k < i && source.empty(); ++k)
        if (outs[k].defined() && outs[k].has_storage() && outs[k].storage().is_alias_of(outs[i].storage()) &&
            outs[k].storage().nbytes() > 0)
          source = fmt::format("output {}", k);
    }
    a.sources.push_back(source);
  }
  return a;
}

std::vector<int64_t> significant_strides(const Tensor& t) {
  std::vector<int64_t> s;
  if (t.numel() == 0) return s;
  for (int64_t d = 0; d < t.dim(); ++d) s.push_back(t.size(d) > 1 ? t.stride(d) : -1);
  return s;
}

std::string describe(const Tensor& t) {
  if (!t.defined()) return "undefined";
  return fmt::format("{} sizes={} strides={} offset={}", c10::toString(t.scalar_type()), t.sizes(), t.strides(),
                     t.storage_offset());
}

// Runs one sample both ways; returns the differences (empty: equal).
std::vector<std::string> compare(const c10::OperatorHandle& op, const Sample& sample) {
  std::vector<std::string> diffs;
  std::vector<IValue> cpu_stack = sample.args;
  MetaMirror mirror;
  std::vector<IValue> meta_stack;
  for (const IValue& v : sample.args) meta_stack.push_back(mirror(v));
  const std::vector<Tensor> cpu_args = flat_tensors(cpu_stack), meta_args = flat_tensors(meta_stack);

  std::string cpu_error, meta_error;
  try {
    op.callBoxed(cpu_stack);
  } catch (const std::exception& e) { cpu_error = e.what(); }
  try {
    op.callBoxed(meta_stack);
  } catch (const std::exception& e) { meta_error = e.what(); }
  if (!cpu_error.empty() || !meta_error.empty()) {
    // Both must refuse (an argument error), or neither.
    if (cpu_error.empty() != meta_error.empty())
      diffs.push_back(fmt::format("CPU {} but meta {}",
                                  cpu_error.empty() ? "ran" : "raised: " + cpu_error.substr(0, 200),
                                  meta_error.empty() ? "ran" : "raised: " + meta_error.substr(0, 200)));
    return diffs;
  }
  const std::vector<Tensor> cpu_out = flat_tensors(cpu_stack), meta_out = flat_tensors(meta_stack);
  if (cpu_out.size() != meta_out.size()) {
    diffs.push_back(fmt::format("{} outputs on CPU, {} on meta", cpu_out.size(), meta_out.size()));
    return diffs;
  }
  for (std::size_t i = 0; i < cpu_out.size(); ++i) {
    const Tensor &c = cpu_out[i], &m = meta_out[i];
    const bool same =
        c.defined() == m.defined() && (!c.defined() || (c.sizes() == m.sizes() && c.scalar_type() == m.scalar_type() &&
                                                        significant_strides(c) == significant_strides(m) &&
                                                        (c.numel() == 0 || c.storage_offset() == m.storage_offset())));
    if (!same) diffs.push_back(fmt::format("output {}: CPU {} vs meta {}", i, describe(c), describe(m)));
  }
  const Aliasing ca = aliasing_of(cpu_args, cpu_out), ma = aliasing_of(meta_args, meta_out);
  for (std::size_t i = 0; i < ca.sources.size(); ++i)
    if (ca.sources[i] != ma.sources[i])
      diffs.push_back(fmt::format("output {} aliases '{}' on CPU but '{}' on meta", i, ca.sources[i], ma.sources[i]));
  return diffs;
}

// ---- samples per op ------------------------------------------------------------------------------

const std::vector<at::ScalarType> kFloatTypes = {at::kFloat, at::kDouble, at::kBFloat16};

// Every layout of every shape, in every dtype: f(label, tensor).
void for_each_tensor(const std::vector<std::vector<int64_t>>& shapes, const std::vector<at::ScalarType>& dtypes,
                     const std::function<void(const std::string&, const Tensor&)>& f) {
  for (const auto& shape : shapes)
    for (const Layout& layout : layouts(shape.size()))
      for (at::ScalarType dtype : dtypes)
        f(fmt::format("{} {} {}", fmt::join(shape, "x"), layout.name, c10::toString(dtype)), layout.make(shape, dtype));
}

const std::vector<std::vector<int64_t>> kShapes = {{2, 3, 4, 5}, {6, 7}, {0, 3}, {5}, {}};

Samples unary_samples(const std::function<std::vector<IValue>(const Tensor&)>& args_of) {
  Samples s;
  for_each_tensor(kShapes, kFloatTypes, [&](const std::string& l, const Tensor& t) { s.push_back({l, args_of(t)}); });
  return s;
}

Samples binary_broadcast_samples(const std::function<std::vector<IValue>(const Tensor&, const Tensor&)>& args_of) {
  Samples s;
  for_each_tensor(kShapes, kFloatTypes, [&](const std::string& l, const Tensor& t) {
    s.push_back({l + " same", args_of(randn(t.sizes(), t.scalar_type()), t)});
    s.push_back({l + " reversed", args_of(t, randn(t.sizes(), t.scalar_type()))});
  });
  s.push_back({"broadcast row", args_of(randn({4, 5}), randn({5}))});
  s.push_back({"broadcast both", args_of(randn({4, 1}), randn({1, 5}))});
  s.push_back({"channels_last vs broadcast",
               args_of(randn({2, 3, 4, 5}).contiguous(at::MemoryFormat::ChannelsLast), randn({3, 1, 1}))});
  s.push_back({"mixed dtypes", args_of(randn({4, 5}, at::kDouble), randn({4, 5}))});
  return s;
}

Samples batch_norm_inputs(
    const std::function<void(Samples&, const std::string&, const Tensor& input, const std::optional<Tensor>& w,
                             const std::optional<Tensor>& b, const std::optional<Tensor>& rm,
                             const std::optional<Tensor>& rv)>& add) {
  Samples s;
  for_each_tensor({{4, 3, 5, 5}, {4, 3}, {4, 3, 7}}, {at::kFloat, at::kDouble, at::kBFloat16},
                  [&](const std::string& l, const Tensor& x) {
                    const auto pdt = x.scalar_type() == at::kBFloat16 ? at::kFloat : x.scalar_type();
                    for (bool affine : {true, false})
                      for (bool stats : {true, false}) {
                        std::optional<Tensor> w, b, rm, rv;
                        if (affine) w = randn({3}, pdt), b = randn({3}, pdt);
                        if (stats) rm = randn({3}, pdt), rv = at::rand({3}).to(pdt) + 1;
                        add(s, fmt::format("{} affine={} stats={}", l, affine, stats), x, w, b, rm, rv);
                      }
                  });
  // A reduced-precision input with reduced-precision parameters: not the mixed case.
  add(s, "bf16 params", randn({4, 3, 5, 5}, at::kBFloat16), randn({3}, at::kBFloat16), randn({3}, at::kBFloat16),
      randn({3}, at::kBFloat16), (at::rand({3}) + 1).to(at::kBFloat16));
  return s;
}

std::vector<int64_t> bool_mask(std::array<bool, 3> m) { return {m[0], m[1], m[2]}; }
const std::vector<std::array<bool, 3>> kMasks = {{true, true, true}, {true, false, false}, {false, true, true}};

IValue mask_ivalue(std::array<bool, 3> m) { return c10::List<bool>({m[0], m[1], m[2]}); }

std::map<std::string, std::function<Samples()>> sample_table() {
  std::map<std::string, std::function<Samples()>> t;
  t["aten::relu"] = [] { return unary_samples([](const Tensor& x) { return std::vector<IValue>{x}; }); };
  t["aten::relu_"] = [] {
    return unary_samples([](const Tensor& x) { return std::vector<IValue>{x.clone(at::MemoryFormat::Preserve)}; });
  };
  t["aten::hardtanh"] = [] {
    return unary_samples([](const Tensor& x) { return std::vector<IValue>{x, at::Scalar(0), at::Scalar(6)}; });
  };
  t["aten::hardtanh_"] = [] {
    return unary_samples([](const Tensor& x) {
      return std::vector<IValue>{x.clone(at::MemoryFormat::Preserve), at::Scalar(-1), at::Scalar(1)};
    });
  };
  t["aten::hardtanh_backward"] = [] {
    return binary_broadcast_samples([](const Tensor& g, const Tensor& x) {
      return std::vector<IValue>{g, x, at::Scalar(-1), at::Scalar(1)};
    });
  };
  t["aten::where.self"] = [] {
    Samples s = binary_broadcast_samples([](const Tensor& a, const Tensor& b) {
      return std::vector<IValue>{at::rand(a.sizes()) > 0.5, a, b};
    });
    s.push_back({"uint8 condition", {(at::rand({4, 5}) > 0.5).to(at::kByte), randn({4, 5}), randn({4, 5})}});
    s.push_back({"broadcast condition", {at::rand({5}) > 0.5, randn({4, 5}), randn({4, 1})}});
    s.push_back({"transposed condition", {(at::rand({5, 4}) > 0.5).t(), randn({4, 5}), randn({4, 5})}});
    s.push_back({"0-dim other", {at::rand({4, 5}) > 0.5, randn({4, 5}), at::scalar_tensor(2.0, at::kDouble)}});
    s.push_back({"float condition (refused)", {at::rand({4, 5}), randn({4, 5}), randn({4, 5})}});
    return s;
  };
  t["aten::where.self_out"] = [] {
    Samples s = binary_broadcast_samples([](const Tensor& a, const Tensor& b) {
      return std::vector<IValue>{at::rand(a.sizes()) > 0.5, a, b,
                                 at::empty({0}, at::promote_types(a.scalar_type(), b.scalar_type()))};
    });
    s.push_back({"presized out", {at::rand({4, 5}) > 0.5, randn({4, 5}), randn({4, 5}), at::empty({4, 5})}});
    s.push_back({"channels_last out",
                 {at::rand({2, 3, 4, 5}) > 0.5, randn({2, 3, 4, 5}), randn({2, 3, 4, 5}),
                  at::empty({2, 3, 4, 5}).contiguous(at::MemoryFormat::ChannelsLast)}});
    s.push_back({"wrong out dtype (refused)",
                 {at::rand({4, 5}) > 0.5, randn({4, 5}), randn({4, 5}), at::empty({0}, at::kDouble)}});
    return s;
  };
  t["aten::abs.out"] = [] {
    Samples s = unary_samples([](const Tensor& x) { return std::vector<IValue>{x, at::empty({0}, x.options())}; });
    s.push_back({"presized out", {randn({4, 5}), at::empty({4, 5})}});
    s.push_back({"int64", {at::randint(-5, 5, {4, 5}), at::empty({0}, at::kLong)}});
    return s;
  };
  t["aten::flip"] = [] {
    Samples s;
    for_each_tensor({{2, 3, 4, 5}, {6, 7}, {0, 3}}, kFloatTypes, [&](const std::string& l, const Tensor& x) {
      s.push_back({l + " dim0", {x, std::vector<int64_t>{0}}});
      s.push_back({l + " dims -1,0", {x, std::vector<int64_t>{-1, 0}}});
    });
    s.push_back({"repeated dim (refused)", {randn({3, 4}), std::vector<int64_t>{0, 0}}});
    return s;
  };
  t["aten::log_sigmoid_forward"] = [] { return unary_samples([](const Tensor& x) { return std::vector<IValue>{x}; }); };
  t["aten::log_sigmoid_backward"] = [] {
    return unary_samples([](const Tensor& x) {
      auto [out, buffer] = at::log_sigmoid_forward(x);
      return std::vector<IValue>{randn(x.sizes(), x.scalar_type()), x, buffer};
    });
  };
  t["aten::mse_loss_backward"] = [] {
    Samples s;
    for_each_tensor({{4, 5}, {2, 3, 4, 5}, {0, 3}}, kFloatTypes, [&](const std::string& l, const Tensor& x) {
      for (int64_t reduction : {0, 1, 2}) {
        Tensor grad = reduction == 0 ? randn(x.sizes(), x.scalar_type()) : randn({}, x.scalar_type());
        s.push_back(
            {fmt::format("{} reduction={}", l, reduction), {grad, x, randn(x.sizes(), x.scalar_type()), reduction}});
      }
    });
    return s;
  };
  t["aten::smooth_l1_loss_backward.grad_input"] = [] {
    Samples s;
    for_each_tensor({{4, 5}, {2, 3, 4, 5}}, kFloatTypes, [&](const std::string& l, const Tensor& x) {
      for (int64_t reduction : {0, 1}) {
        Tensor grad = reduction == 0 ? randn(x.sizes(), x.scalar_type()) : randn({}, x.scalar_type());
        s.push_back({fmt::format("{} reduction={}", l, reduction),
                     {grad, x, randn(x.sizes(), x.scalar_type()), reduction, 1.0,
                      at::zeros_like(x, at::MemoryFormat::Contiguous)}});
      }
    });
    s.push_back({"negative beta", {randn({4}), randn({4}), randn({4}), int64_t{0}, -1.0, at::zeros({4})}});
    return s;
  };
  t["aten::native_dropout"] = [] {
    Samples s;
    for_each_tensor(kShapes, kFloatTypes, [&](const std::string& l, const Tensor& x) {
      s.push_back({l + " p=0.5 train", {x, 0.5, std::optional<bool>(true)}});
      s.push_back({l + " p=0 train", {x, 0.0, std::optional<bool>(true)}});
      s.push_back({l + " p=1 train", {x, 1.0, std::optional<bool>(true)}});
      s.push_back({l + " eval", {x, 0.5, std::optional<bool>(false)}});
      s.push_back({l + " train unset", {x, 0.5, IValue()}});
    });
    return s;
  };
  t["aten::native_dropout_backward"] = [] {
    Samples s;
    for_each_tensor(kShapes, kFloatTypes, [&](const std::string& l, const Tensor& g) {
      s.push_back({l, {g, at::rand(g.sizes()) > 0.5, 2.0}});
    });
    s.push_back({"float mask", {randn({3}), randn({3}), 2.0}});
    return s;
  };
  // Normalization.
  auto batch_norm = [](bool legit) {
    return batch_norm_inputs([legit](Samples& s, const std::string& l, const Tensor& x, const std::optional<Tensor>& w,
                                     const std::optional<Tensor>& b, const std::optional<Tensor>& rm,
                                     const std::optional<Tensor>& rv) {
      for (bool training : {true, false}) {
        if (legit && !rm) continue;      // the overload with stats takes tensors
        if (!training && !rm) continue;  // invalid: libtorch's CPU kernel reads the missing stats (crashes)
        s.push_back({fmt::format("{} training={}", l, training),
                     {x, w ? IValue(*w) : IValue(), b ? IValue(*b) : IValue(), rm ? IValue(rm->clone()) : IValue(),
                      rv ? IValue(rv->clone()) : IValue(), training, 0.1, 1e-5}});
      }
    });
  };
  t["aten::native_batch_norm"] = [batch_norm] { return batch_norm(false); };
  t["aten::_native_batch_norm_legit"] = [batch_norm] { return batch_norm(true); };
  t["aten::_native_batch_norm_legit.no_stats"] = [] {
    return batch_norm_inputs([](Samples& s, const std::string& l, const Tensor& x, const std::optional<Tensor>& w,
                                const std::optional<Tensor>& b, const std::optional<Tensor>&,
                                const std::optional<Tensor>&) {
      s.push_back({l, {x, w ? IValue(*w) : IValue(), b ? IValue(*b) : IValue(), true, 0.1, 1e-5}});
    });
  };
  t["aten::_native_batch_norm_legit_no_training"] = [] {
    return batch_norm_inputs([](Samples& s, const std::string& l, const Tensor& x, const std::optional<Tensor>& w,
                                const std::optional<Tensor>& b, const std::optional<Tensor>& rm,
                                const std::optional<Tensor>& rv) {
      if (rm) s.push_back({l, {x, w ? IValue(*w) : IValue(), b ? IValue(*b) : IValue(), *rm, *rv, 0.1, 1e-5}});
    });
  };
  t["aten::native_batch_norm_backward"] = [] {
    return batch_norm_inputs([](Samples& s, const std::string& l, const Tensor& x, const std::optional<Tensor>& w,
                                const std::optional<Tensor>& b, const std::optional<Tensor>& rm,
                                const std::optional<Tensor>& rv) {
      for (bool training : {true, false}) {
        if (!training && !rm) continue;
        auto [out, save_mean, save_invstd] =
            at::native_batch_norm(x, w, b, rm ? std::optional<Tensor>(rm->clone()) : std::nullopt,
                                  rv ? std::optional<Tensor>(rv->clone()) : std::nullopt, training, 0.1, 1e-5);
        for (auto mask : kMasks)
          s.push_back({fmt::format("{} training={} mask={}", l, training, fmt::join(bool_mask(mask), "")),
                       {randn(x.sizes(), x.scalar_type()).contiguous(x.suggest_memory_format()), x,
                        w ? IValue(*w) : IValue(), rm ? IValue(*rm) : IValue(), rv ? IValue(*rv) : IValue(), save_mean,
                        save_invstd, training, 1e-5, mask_ivalue(mask)}});
      }
    });
  };
  auto layer_norm_cases =
      [](const std::function<void(Samples&, const std::string&, const Tensor&, std::vector<int64_t>,
                                  const std::optional<Tensor>&, const std::optional<Tensor>&)>& add) {
        Samples s;
        for_each_tensor({{2, 3, 8}, {4, 8}, {0, 8}}, {at::kFloat, at::kDouble, at::kBFloat16},
                        [&](const std::string& l, const Tensor& x) {
                          const auto pdt = x.scalar_type() == at::kBFloat16 ? at::kFloat : x.scalar_type();
                          for (bool affine : {true, false}) {
                            std::vector<int64_t> shape{x.size(-1)};
                            std::optional<Tensor> w, b;
                            if (affine) w = randn(shape, pdt), b = randn(shape, pdt);
                            add(s, fmt::format("{} affine={}", l, affine), x, shape, w, b);
                          }
                          if (x.dim() == 3) {
                            std::vector<int64_t> shape{x.size(-2), x.size(-1)};
                            add(s, l + " 2-d normalized", x, shape, randn(shape, pdt), std::nullopt);
                          }
                        });
        add(s, "bf16 params", randn({4, 8}, at::kBFloat16), {8}, randn({8}, at::kBFloat16), randn({8}, at::kBFloat16));
        add(s, "wrong weight shape (refused)", randn({4, 8}), {8}, randn({7}), std::nullopt);
        return s;
      };
  t["aten::native_layer_norm"] = [layer_norm_cases] {
    return layer_norm_cases([](Samples& s, const std::string& l, const Tensor& x, std::vector<int64_t> shape,
                               const std::optional<Tensor>& w, const std::optional<Tensor>& b) {
      s.push_back({l, {x, shape, w ? IValue(*w) : IValue(), b ? IValue(*b) : IValue(), 1e-5}});
    });
  };
  t["aten::native_layer_norm_backward"] = [layer_norm_cases] {
    return layer_norm_cases([](Samples& s, const std::string& l, const Tensor& x, std::vector<int64_t> shape,
                               const std::optional<Tensor>& w, const std::optional<Tensor>& b) {
      if (w && w->sizes() != at::IntArrayRef(shape)) return;
      auto [out, mean, rstd] = at::native_layer_norm(x, shape, w, b, 1e-5);
      for (auto mask : kMasks)
        if (!(mask[1] && !w) && !(mask[2] && !b))  // libtorch's CPU kernel fails on it (autograd never asks)
          s.push_back({fmt::format("{} mask={}", l, fmt::join(bool_mask(mask), "")),
                       {randn(x.sizes(), x.scalar_type()), x, shape, mean, rstd, w ? IValue(*w) : IValue(),
                        b ? IValue(*b) : IValue(), mask_ivalue(mask)}});
    });
  };
  auto group_norm_cases =
      [](const std::function<void(Samples&, const std::string&, const Tensor&, const std::optional<Tensor>&,
                                  const std::optional<Tensor>&)>& add) {
        Samples s;
        for_each_tensor({{2, 6, 4, 4}, {2, 6, 5}, {2, 6}}, {at::kFloat, at::kDouble, at::kBFloat16},
                        [&](const std::string& l, const Tensor& x) {
                          const auto pdt = x.scalar_type() == at::kBFloat16 ? at::kFloat : x.scalar_type();
                          add(s, l + " affine", x, randn({6}, pdt), randn({6}, pdt));
                          add(s, l + " plain", x, std::nullopt, std::nullopt);
                        });
        return s;
      };
  auto hxw = [](const Tensor& x) { return x.dim() > 2 ? x.numel() / (x.size(0) * x.size(1)) : int64_t{1}; };
  t["aten::native_group_norm"] = [group_norm_cases, hxw] {
    Samples s = group_norm_cases([hxw](Samples& s, const std::string& l, const Tensor& x,
                                       const std::optional<Tensor>& w, const std::optional<Tensor>& b) {
      s.push_back(
          {l,
           {x, w ? IValue(*w) : IValue(), b ? IValue(*b) : IValue(), x.size(0), x.size(1), hxw(x), int64_t{3}, 1e-5}});
    });
    s.push_back({"groups do not divide (refused)",
                 {randn({2, 6, 4}), IValue(), IValue(), int64_t{2}, int64_t{6}, int64_t{4}, int64_t{4}, 1e-5}});
    return s;
  };
  t["aten::native_group_norm_backward"] = [group_norm_cases, hxw] {
    return group_norm_cases([hxw](Samples& s, const std::string& l, const Tensor& x, const std::optional<Tensor>& w,
                                  const std::optional<Tensor>& b) {
      if (!x.is_contiguous(x.suggest_memory_format())) return;  // the forward refuses it (tested there)
      auto [out, mean, rstd] = at::native_group_norm(x, w, b, x.size(0), x.size(1), hxw(x), 3, 1e-5);
      for (auto mask : kMasks) {
        if (!w && (mask[1] || mask[2])) continue;  // libtorch's CPU kernel fails on it (autograd never asks)
        if (!mask[0] && x.dim() > 2 && x.is_contiguous(at::MemoryFormat::ChannelsLast) && !x.is_contiguous())
          continue;  // libtorch's channels_last CPU kernel writes through the missing grad_input (crashes)
        s.push_back({fmt::format("{} mask={}", l, fmt::join(bool_mask(mask), "")),
                     {randn(x.sizes(), x.scalar_type()).contiguous(x.suggest_memory_format()), x, mean, rstd,
                      w ? IValue(*w) : IValue(), x.size(0), x.size(1), hxw(x), int64_t{3}, mask_ivalue(mask)}});
      }
    });
  };
  // Weight norm over the first or the last dimension (v in any layout; g shaped as
  // torch.nn.utils.weight_norm makes it: v's sizes with ones except at dim).
  auto weight_norm_cases =
      [](const std::function<void(Samples&, const std::string&, const Tensor&, const Tensor&, int64_t)>& add) {
        Samples s;
        for_each_tensor({{4, 3, 5}, {6, 7}, {5}}, {at::kFloat, at::kDouble, at::kBFloat16},
                        [&](const std::string& l, const Tensor& v) {
                          for (int64_t dim : {int64_t{0}, v.dim() - 1}) {
                            std::vector<int64_t> g_sizes(static_cast<std::size_t>(v.dim()), 1);
                            g_sizes[static_cast<std::size_t>(dim)] = v.size(dim);
                            add(s, fmt::format("{} dim={}", l, dim), v, randn(g_sizes, v.scalar_type()), dim);
                          }
                        });
        return s;
      };
  t["aten::_weight_norm_interface"] = [weight_norm_cases] {
    return weight_norm_cases([](Samples& s, const std::string& l, const Tensor& v, const Tensor& g, int64_t dim) {
      s.push_back({l, {v, g, dim}});
    });
  };
  t["aten::_weight_norm_interface_backward"] = [weight_norm_cases] {
    return weight_norm_cases([](Samples& s, const std::string& l, const Tensor& v, const Tensor& g, int64_t dim) {
      auto [w, norms] = at::_weight_norm_interface(v, g, dim);
      s.push_back({l, {randn(v.sizes(), v.scalar_type()), v, g, norms, dim}});
    });
  };
  // Convolution.
  struct ConvCase {
    std::string label;
    std::vector<int64_t> input, weight;
    std::vector<int64_t> stride, padding, dilation, output_padding;
    bool transposed;
    int64_t groups;
  };
  auto conv_cases = [] {
    return std::vector<ConvCase>{
        {"2d", {2, 4, 8, 8}, {6, 4, 3, 3}, {1}, {1}, {1}, {0}, false, 1},
        {"2d stride2 pad0", {2, 4, 9, 9}, {6, 4, 3, 3}, {2, 2}, {0, 0}, {1, 1}, {0}, false, 1},
        {"2d 1x1", {2, 4, 8, 8}, {6, 4, 1, 1}, {1}, {0}, {1}, {0}, false, 1},
        {"2d dilated", {2, 4, 9, 9}, {6, 4, 3, 3}, {1}, {2}, {2}, {0}, false, 1},
        {"2d groups2", {2, 4, 8, 8}, {6, 2, 3, 3}, {1}, {1}, {1}, {0}, false, 2},
        {"2d depthwise", {2, 4, 8, 8}, {4, 1, 3, 3}, {1}, {1}, {1}, {0}, false, 4},
        {"2d transposed", {2, 4, 5, 5}, {4, 6, 2, 2}, {2}, {0}, {1}, {0}, true, 1},
        {"2d transposed outpad", {2, 4, 5, 5}, {4, 6, 3, 3}, {2}, {1}, {1}, {1}, true, 1},
        {"1d", {2, 4, 10}, {6, 4, 3}, {1}, {1}, {1}, {0}, false, 1},
        {"1d transposed", {2, 4, 10}, {4, 6, 3}, {2}, {1}, {1}, {1}, true, 1},
        {"3d", {1, 2, 4, 5, 5}, {3, 2, 3, 3, 3}, {1}, {1}, {1}, {0}, false, 1},
        {"0 batch", {0, 4, 8, 8}, {6, 4, 3, 3}, {1}, {1}, {1}, {0}, false, 1},
        {"kernel too big (refused)", {2, 4, 2, 2}, {6, 4, 3, 3}, {1}, {0}, {1}, {0}, false, 1},
    };
  };
  auto conv_tensors = [](const ConvCase& c, bool input_cl, bool weight_cl, at::ScalarType dtype) {
    Tensor x = randn(c.input, dtype), w = randn(c.weight, dtype);
    if (input_cl && x.dim() == 4) x = x.contiguous(at::MemoryFormat::ChannelsLast);
    if (weight_cl && w.dim() == 4) w = w.contiguous(at::MemoryFormat::ChannelsLast);
    if (input_cl && x.dim() == 5) x = x.contiguous(at::MemoryFormat::ChannelsLast3d);
    return std::pair{x, w};
  };
  t["aten::convolution"] = [conv_cases, conv_tensors] {
    Samples s;
    for (const ConvCase& c : conv_cases())
      for (bool input_cl : {false, true})
        for (bool weight_cl : {false, true})
          for (at::ScalarType dtype : {at::kFloat, at::kDouble, at::kBFloat16})
            for (bool bias : {true, false}) {
              auto [x, w] = conv_tensors(c, input_cl, weight_cl, dtype);
              const int64_t out_channels = c.transposed ? c.weight[1] * c.groups : c.weight[0];
              s.push_back({fmt::format("{} input_cl={} weight_cl={} {} bias={}", c.label, input_cl, weight_cl,
                                       c10::toString(dtype), bias),
                           {x, w, bias ? IValue(randn({out_channels}, dtype)) : IValue(), c.stride, c.padding,
                            c.dilation, c.transposed, c.output_padding, c.groups}});
            }
    return s;
  };
  t["aten::convolution_backward"] = [conv_cases, conv_tensors] {
    Samples s;
    for (const ConvCase& c : conv_cases()) {
      if (c.label.find("refused") != std::string::npos) continue;
      for (bool input_cl : {false, true})
        for (bool weight_cl : {false, true})
          for (at::ScalarType dtype : {at::kFloat, at::kDouble})
            for (auto mask : {std::array<bool, 3>{true, true, true}, std::array<bool, 3>{true, false, false},
                              std::array<bool, 3>{false, true, true}, std::array<bool, 3>{false, false, true},
                              std::array<bool, 3>{false, true, false}}) {
              auto [x, w] = conv_tensors(c, input_cl, weight_cl, dtype);
              Tensor out = at::convolution(x, w, std::nullopt, c.stride, c.padding, c.dilation, c.transposed,
                                           c.output_padding, c.groups);
              const int64_t out_channels = c.transposed ? c.weight[1] * c.groups : c.weight[0];
              s.push_back({fmt::format("{} input_cl={} weight_cl={} {} mask={}", c.label, input_cl, weight_cl,
                                       c10::toString(dtype), fmt::join(bool_mask(mask), "")),
                           {randn(out.sizes(), dtype).contiguous(out.suggest_memory_format()), x, w,
                            std::vector<int64_t>{out_channels}, c.stride, c.padding, c.dilation, c.transposed,
                            c.output_padding, c.groups, mask_ivalue(mask)}});
            }
    }
    return s;
  };
  // Indexing.
  t["aten::index_select"] = [] {
    Samples s;
    for_each_tensor({{5, 4}, {3, 4, 5}}, {at::kFloat, at::kDouble}, [&](const std::string& l, const Tensor& x) {
      for (int64_t dim : {0, 1, -1})
        for (at::ScalarType it : {at::kLong, at::kInt})
          s.push_back(
              {fmt::format("{} dim={} {}", l, dim, c10::toString(it)), {x, dim, at::randint(0, 3, {6}).to(it)}});
      s.push_back({l + " empty index", {x, int64_t{0}, at::empty({0}, at::kLong)}});
    });
    s.push_back({"0-dim self", {randn({}), int64_t{0}, at::zeros({1}, at::kLong)}});
    s.push_back({"0-dim index", {randn({5, 4}), int64_t{0}, at::scalar_tensor(2, at::kLong)}});
    s.push_back({"2-d index (refused)", {randn({5, 4}), int64_t{0}, at::zeros({2, 2}, at::kLong)}});
    s.push_back({"float index (refused)", {randn({5, 4}), int64_t{0}, at::zeros({2})}});
    return s;
  };
  t["aten::embedding_dense_backward"] = [] {
    Samples s;
    for (at::ScalarType dtype : {at::kFloat, at::kDouble, at::kBFloat16})
      for (int64_t padding_idx : {-1, 2})
        for (bool freq : {false, true}) {
          s.push_back({fmt::format("{} padding={} freq={}", c10::toString(dtype), padding_idx, freq),
                       {randn({3, 4, 8}, dtype), at::randint(0, 10, {3, 4}), int64_t{10}, padding_idx, freq}});
        }
    s.push_back({"transposed grad", {randn({8, 5}).t(), at::randint(0, 10, {5}), int64_t{10}, int64_t{-1}, false}});
    return s;
  };
  struct BagCase {
    std::string label;
    at::ScalarType dtype;
    at::ScalarType index_type;
    int64_t mode;
    bool include_last_offset, per_sample;
    int64_t padding_idx;
  };
  auto bag_cases = [] {
    std::vector<BagCase> cases;
    for (at::ScalarType dtype : {at::kFloat, at::kDouble})
      for (at::ScalarType it : {at::kLong, at::kInt})
        for (int64_t mode : {0, 1, 2})
          for (bool last : {false, true})
            for (int64_t padding : {-1, 2}) {
              cases.push_back({fmt::format("{} {} mode={} last={} padding={}", c10::toString(dtype), c10::toString(it),
                                           mode, last, padding),
                               dtype, it, mode, last, false, padding});
              if (mode == 0)
                cases.push_back({fmt::format("{} {} per_sample last={} padding={}", c10::toString(dtype),
                                             c10::toString(it), last, padding),
                                 dtype, it, mode, last, true, padding});
            }
    return cases;
  };
  auto bag_args = [](const BagCase& c) {
    Tensor weight = randn({10, 8}, c.dtype);
    Tensor indices = at::randint(0, 10, {12}).to(c.index_type);
    Tensor offsets = at::tensor(std::vector<int64_t>{0, 3, 7, 12}).to(c.index_type);
    if (!c.include_last_offset) offsets = offsets.narrow(0, 0, 3).clone();
    std::optional<Tensor> psw;
    if (c.per_sample) psw = randn({12}, c.dtype);
    return std::tuple{weight, indices, offsets, psw};
  };
  auto bag_forward = [bag_cases, bag_args] {
    Samples s;
    for (const BagCase& c : bag_cases()) {
      auto [weight, indices, offsets, psw] = bag_args(c);
      s.push_back({c.label,
                   {weight, indices, offsets, false, c.mode, false, psw ? IValue(*psw) : IValue(),
                    c.include_last_offset, c.padding_idx}});
    }
    return s;
  };
  t["aten::_embedding_bag"] = bag_forward;
  t["aten::_embedding_bag_forward_only"] = bag_forward;
  auto bag_backward = [bag_cases, bag_args](bool dense) {
    Samples s;
    for (const BagCase& c : bag_cases()) {
      auto [weight, indices, offsets, psw] = bag_args(c);
      auto [out, offset2bag, bag_size, max_indices] =
          at::_embedding_bag(weight, indices, offsets, false, c.mode, false, psw, c.include_last_offset, c.padding_idx);
      Tensor grad = randn(out.sizes(), c.dtype);
      if (dense && offset2bag.numel() == 0) continue;  // the fast sum path leaves it empty: not a valid input
      if (dense)
        s.push_back({c.label,
                     {grad, indices, offset2bag, bag_size, max_indices, int64_t{10}, false, c.mode,
                      psw ? IValue(*psw) : IValue(), c.padding_idx}});
      else
        s.push_back({c.label,
                     {grad, indices, offsets, offset2bag, bag_size, max_indices, int64_t{10}, false, c.mode, false,
                      psw ? IValue(*psw) : IValue(), c.padding_idx}});
    }
    return s;
  };
  t["aten::_embedding_bag_dense_backward"] = [bag_backward] { return bag_backward(true); };
  t["aten::_embedding_bag_backward"] = [bag_backward] { return bag_backward(false); };
  // Reductions.
  auto variance = [] {
    Samples s;
    for_each_tensor(
        {{3, 4, 5}, {6}, {0, 4}, {}}, {at::kFloat, at::kDouble, at::kComplexFloat},
        [&](const std::string& l, const Tensor& x) {
          std::vector<std::optional<std::vector<int64_t>>> dims = {std::nullopt, std::vector<int64_t>{}};
          if (x.dim() >= 1) dims.push_back(std::vector<int64_t>{-1});
          if (x.dim() >= 3) dims.push_back(std::vector<int64_t>{0, 2});
          for (const auto& d : dims)
            for (bool keepdim : {false, true})
              for (int correction : {0, 1})
                s.push_back({fmt::format("{} dim={} keepdim={} correction={}", l,
                                         d ? fmt::format("{}", fmt::join(*d, ",")) : "None", keepdim, correction),
                             {x, d ? IValue(*d) : IValue(), IValue(at::Scalar(correction)), keepdim}});
        });
    s.push_back({"int64 (refused)", {at::randint(0, 5, {4}), IValue(), IValue(), false}});
    return s;
  };
  t["aten::var.correction"] = variance;
  t["aten::std.correction"] = variance;
  t["aten::var_mean.correction"] = variance;
  t["aten::std_mean.correction"] = variance;
  // Attention.
  auto attention =
      [](const std::function<void(Samples&, const std::string&, const Tensor&, const Tensor&, const Tensor&, bool,
                                  const std::optional<Tensor>&, std::optional<double>)>& add) {
        Samples s;
        for (at::ScalarType dtype : {at::kFloat, at::kDouble, at::kBFloat16})
          for (bool bthd : {false, true})  // q/k/v as transposed views of [B, T, H, D] (what split-heads produce)
            for (bool causal : {false, true})
              for (bool mask : {false, true}) {
                auto make = [&](int64_t t) {
                  return bthd ? randn({2, t, 3, 8}, dtype).transpose(1, 2) : randn({2, 3, t, 8}, dtype);
                };
                Tensor q = make(5), k = make(causal ? 5 : 6), v = make(causal ? 5 : 6);
                std::optional<Tensor> m;
                if (mask) m = randn({5, causal ? 5 : 6}, dtype);
                if (mask && causal) continue;
                add(s, fmt::format("{} bthd={} causal={} mask={}", c10::toString(dtype), bthd, causal, mask), q, k, v,
                    causal, m, mask ? std::optional<double>(0.25) : std::nullopt);
              }
        return s;
      };
  t["aten::_scaled_dot_product_flash_attention_for_cpu"] = [attention] {
    return attention([](Samples& s, const std::string& l, const Tensor& q, const Tensor& k, const Tensor& v,
                        bool causal, const std::optional<Tensor>& m, std::optional<double> scale) {
      s.push_back({l, {q, k, v, 0.0, causal, m ? IValue(*m) : IValue(), scale ? IValue(*scale) : IValue()}});
    });
  };
  t["aten::_scaled_dot_product_flash_attention_for_cpu_backward"] = [attention] {
    return attention([](Samples& s, const std::string& l, const Tensor& q, const Tensor& k, const Tensor& v,
                        bool causal, const std::optional<Tensor>& m, std::optional<double> scale) {
      auto [out, lse] = at::_scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, causal, m, scale);
      s.push_back({l,
                   {randn(out.sizes(), out.scalar_type()), q, k, v, out, lse, 0.0, causal, m ? IValue(*m) : IValue(),
                    scale ? IValue(*scale) : IValue()}});
    });
  };
  // Second batch: masks and comparisons, activations, reductions, pooling, padding, losses.
  t["aten::isnan"] = [] {
    Samples s = unary_samples([](const Tensor& x) { return std::vector<IValue>{x}; });
    s.push_back({"int64", {at::randint(0, 5, {4, 5})}});
    return s;
  };
  for (const char* op : {"aten::logical_and.out", "aten::logical_or.out", "aten::logical_xor.out"})
    t[op] = [] {
      Samples s = binary_broadcast_samples([](const Tensor& a, const Tensor& b) {
        return std::vector<IValue>{a, b, at::empty({0}, at::kBool)};
      });
      s.push_back({"float out", {randn({4, 5}), randn({4, 5}), at::empty({0})}});
      s.push_back({"presized channels_last out",
                   {randn({2, 3, 4, 5}), randn({2, 3, 4, 5}),
                    at::empty({2, 3, 4, 5}, at::kBool).contiguous(at::MemoryFormat::ChannelsLast)}});
      return s;
    };
  t["aten::logical_not.out"] = [] {
    Samples s = unary_samples([](const Tensor& x) { return std::vector<IValue>{x, at::empty({0}, at::kBool)}; });
    s.push_back({"int64 out", {randn({4, 5}), at::empty({0}, at::kLong)}});
    return s;
  };
  t["aten::rsub.Tensor"] = [] {
    return binary_broadcast_samples([](const Tensor& a, const Tensor& b) {
      return std::vector<IValue>{a, b, at::Scalar(2)};
    });
  };
  t["aten::floor_divide"] = [] {
    Samples s = binary_broadcast_samples([](const Tensor& a, const Tensor& b) {
      return std::vector<IValue>{a, b + 3};
    });
    s.push_back({"int64", {at::randint(0, 9, {4, 5}), at::randint(1, 3, {5})}});
    return s;
  };
  t["aten::logit"] = [] {
    Samples s = unary_samples([](const Tensor& x) { return std::vector<IValue>{x, IValue()}; });
    s.push_back({"eps", {at::rand({4, 5}), 1e-6}});
    s.push_back({"int64 (promoted)", {at::randint(0, 2, {4, 5}), IValue()}});
    return s;
  };
  t["aten::hardswish"] = [] { return unary_samples([](const Tensor& x) { return std::vector<IValue>{x}; }); };
  t["aten::hardswish_backward"] = [] {
    return binary_broadcast_samples([](const Tensor& g, const Tensor& x) { return std::vector<IValue>{g, x}; });
  };
  t["aten::prod"] = [] {
    Samples s = unary_samples([](const Tensor& x) { return std::vector<IValue>{x, IValue()}; });
    s.push_back({"int32 -> int64", {at::randint(0, 3, {4}, at::kInt), IValue()}});
    s.push_back({"dtype given", {randn({4}), IValue(at::kDouble)}});
    return s;
  };
  t["aten::nansum"] = [] {
    Samples s;
    for_each_tensor({{3, 4, 5}, {6}, {0, 4}}, {at::kFloat, at::kDouble}, [&](const std::string& l, const Tensor& x) {
      s.push_back({l + " all", {x, IValue(), false, IValue()}});
      s.push_back({l + " dim -1 keepdim", {x, std::vector<int64_t>{-1}, true, IValue()}});
    });
    s.push_back({"int -> int64", {at::randint(0, 3, {4, 2}, at::kInt), IValue(), false, IValue()}});
    s.push_back({"complex (refused)", {randn({4}, at::kComplexFloat), IValue(), false, IValue()}});
    return s;
  };
  for (const char* op : {"aten::min", "aten::max"})
    t[op] = [] {
      Samples s = unary_samples([](const Tensor& x) { return std::vector<IValue>{x}; });
      s.push_back({"int64", {at::randint(0, 9, {4, 5})}});
      return s;
    };
  t["aten::dot"] = [] {
    Samples s;
    for (at::ScalarType d : {at::kFloat, at::kDouble, at::kLong})
      s.push_back({c10::toString(d), {randn({5}, d), randn({5}, d)}});
    s.push_back({"strided", {randn({10}).slice(0, 0, 10, 2), randn({5})}});
    s.push_back({"mixed dtypes (refused)", {randn({5}), randn({5}, at::kDouble)}});
    s.push_back({"2-d (refused)", {randn({5, 1}), randn({5})}});
    return s;
  };
  t["aten::trace"] = [] {
    Samples s;
    for_each_tensor({{4, 5}, {3, 3}, {0, 2}}, {at::kFloat, at::kDouble}, [&](const std::string& l, const Tensor& x) {
      s.push_back({l, {x}});
    });
    s.push_back({"int32 -> int64", {at::randint(0, 3, {3, 3}, at::kInt)}});
    s.push_back({"3-d (refused)", {randn({2, 2, 2})}});
    return s;
  };
  auto pool_inputs = [](const std::function<void(Samples&, const std::string&, const Tensor&)>& add) {
    Samples s;
    for_each_tensor({{2, 3, 7, 9}, {3, 7, 9}}, {at::kFloat, at::kDouble, at::kBFloat16},
                    [&](const std::string& l, const Tensor& x) { add(s, l, x); });
    return s;
  };
  t["aten::_adaptive_avg_pool2d"] = [pool_inputs] {
    Samples s = pool_inputs([](Samples& s, const std::string& l, const Tensor& x) {
      for (auto out : {std::vector<int64_t>{1, 1}, std::vector<int64_t>{3, 4}, std::vector<int64_t>{7, 9}})
        s.push_back({fmt::format("{} out={}", l, fmt::join(out, "x")), {x, out}});
    });
    s.push_back({"2-d (refused)", {randn({7, 9}), std::vector<int64_t>{3, 3}}});
    return s;
  };
  t["aten::_adaptive_avg_pool2d_backward"] = [pool_inputs] {
    return pool_inputs([](Samples& s, const std::string& l, const Tensor& x) {
      Tensor out = at::_adaptive_avg_pool2d(x, {3, 4});
      s.push_back({l, {randn(out.sizes(), x.scalar_type()).contiguous(out.suggest_memory_format()), x}});
    });
  };
  t["aten::reflection_pad2d"] = [pool_inputs] {
    Samples s = pool_inputs([](Samples& s, const std::string& l, const Tensor& x) {
      s.push_back({l + " pad 1,2,3,0", {x, std::vector<int64_t>{1, 2, 3, 0}}});
      s.push_back({l + " pad 0", {x, std::vector<int64_t>{0, 0, 0, 0}}});
    });
    s.push_back({"pad too big (refused)", {randn({1, 2, 3, 3}), std::vector<int64_t>{3, 0, 0, 0}}});
    return s;
  };
  t["aten::reflection_pad2d_backward"] = [pool_inputs] {
    return pool_inputs([](Samples& s, const std::string& l, const Tensor& x) {
      const std::vector<int64_t> pad{1, 2, 3, 0};
      Tensor out = at::reflection_pad2d(x, pad);
      s.push_back({l, {randn(out.sizes(), x.scalar_type()), x, pad}});
    });
  };
  t["aten::roll"] = [] {
    Samples s;
    for_each_tensor({{2, 3, 4, 5}, {6, 7}}, kFloatTypes, [&](const std::string& l, const Tensor& x) {
      s.push_back({l + " dim 1", {x, std::vector<int64_t>{2}, std::vector<int64_t>{1}}});
      s.push_back({l + " dims 0,-1", {x, std::vector<int64_t>{1, -3}, std::vector<int64_t>{0, -1}}});
      s.push_back({l + " flattened", {x, std::vector<int64_t>{3}, std::vector<int64_t>{}}});
    });
    s.push_back({"misaligned (refused)", {randn({3, 4}), std::vector<int64_t>{1, 2}, std::vector<int64_t>{0}}});
    return s;
  };
  // FFT primitives: the result's strides follow the input's layout and which dimensions are
  // transformed (batch dimensions first, by stride).
  const std::vector<std::vector<int64_t>> fft_dims = {{-1}, {0}, {1, 2}, {2, 1}, {0, 2}, {0, 1, 2}};
  auto fft_inputs = [](const std::vector<at::ScalarType>& dtypes,
                       const std::function<void(const std::string&, const Tensor&)>& f) {
    for_each_tensor({{2, 3, 4, 5}, {4, 6, 5}}, dtypes, f);
    f("permuted 4x6x5", randn({5, 4, 6}, dtypes[0]).permute({1, 2, 0}));
  };
  auto wrap = [](std::vector<int64_t> dims, int64_t rank) {
    for (int64_t& d : dims) d = d < 0 ? d + rank : d;
    return dims;
  };
  t["aten::_fft_c2c"] = [=] {
    Samples s;
    fft_inputs({at::kComplexFloat, at::kComplexDouble}, [&](const std::string& l, const Tensor& x) {
      for (const auto& dims : fft_dims)
        for (bool forward : {true, false})
          s.push_back({fmt::format("{} dims={} forward={}", l, dims, forward),
                       {x, wrap(dims, x.dim()), int64_t{forward ? 0 : 2}, forward}});
      s.push_back({l + " no dims", {x, std::vector<int64_t>{}, int64_t{0}, true}});
    });
    s.push_back({"real input (refused)", {randn({4, 5}), std::vector<int64_t>{1}, int64_t{0}, true}});
    return s;
  };
  t["aten::_fft_r2c"] = [=] {
    Samples s;
    fft_inputs({at::kFloat, at::kDouble}, [&](const std::string& l, const Tensor& x) {
      for (const auto& dims : fft_dims)
        for (bool onesided : {true, false})
          s.push_back({fmt::format("{} dims={} onesided={}", l, dims, onesided),
                       {x, wrap(dims, x.dim()), int64_t{1}, onesided}});
    });
    s.push_back(
        {"complex input (refused)", {randn({4, 5}, at::kComplexFloat), std::vector<int64_t>{1}, int64_t{0}, true}});
    return s;
  };
  t["aten::_fft_c2r"] = [=] {
    Samples s;
    fft_inputs({at::kComplexFloat, at::kComplexDouble}, [&](const std::string& l, const Tensor& x) {
      for (const auto& dims : fft_dims) {
        const std::vector<int64_t> d = wrap(dims, x.dim());
        for (int64_t odd : {0, 1})
          s.push_back({fmt::format("{} dims={} last={}", l, dims, 2 * (x.size(d.back()) - 1) + odd),
                       {x, d, int64_t{2}, 2 * (x.size(d.back()) - 1) + odd}});
      }
    });
    s.push_back({"real input (refused)", {randn({4, 5}), std::vector<int64_t>{1}, int64_t{0}, int64_t{8}}});
    return s;
  };
  // im2col / col2im (nn.Unfold / nn.Fold): batched and not, every argument away from its default.
  struct UnfoldCase {
    std::string label;
    std::vector<int64_t> kernel, dilation, padding, stride;
  };
  const std::vector<UnfoldCase> unfold_cases = {{"3x3", {3, 3}, {1, 1}, {0, 0}, {1, 1}},
                                                {"2x3 dilated padded strided", {2, 3}, {2, 1}, {1, 2}, {2, 1}},
                                                {"1x1 stride 2", {1, 1}, {1, 1}, {0, 0}, {2, 2}}};
  t["aten::im2col"] = [=] {
    Samples s;
    for_each_tensor({{2, 3, 7, 8}, {3, 7, 8}}, kFloatTypes, [&](const std::string& l, const Tensor& x) {
      for (const UnfoldCase& c : unfold_cases)
        s.push_back({l + " " + c.label, {x, c.kernel, c.dilation, c.padding, c.stride}});
    });
    s.push_back({"kernel larger than the input (refused)",
                 {randn({1, 2, 2, 2}), std::vector<int64_t>{3, 3}, std::vector<int64_t>{1, 1},
                  std::vector<int64_t>{0, 0}, std::vector<int64_t>{1, 1}}});
    s.push_back({"2-d input (refused)",
                 {randn({7, 8}), std::vector<int64_t>{3, 3}, std::vector<int64_t>{1, 1}, std::vector<int64_t>{0, 0},
                  std::vector<int64_t>{1, 1}}});
    return s;
  };
  t["aten::col2im"] = [=] {
    Samples s;
    for (const UnfoldCase& c : unfold_cases)
      for (bool batched : {true, false})
        for (at::ScalarType d : kFloatTypes) {
          Tensor image = batched ? randn({2, 3, 7, 8}, d) : randn({3, 7, 8}, d);
          Tensor cols = at::im2col(image, c.kernel, c.dilation, c.padding, c.stride);
          const std::string l = fmt::format("{} batched={} {}", c.label, batched, c10::toString(d));
          s.push_back({l, {cols, std::vector<int64_t>{7, 8}, c.kernel, c.dilation, c.padding, c.stride}});
          s.push_back({l + " transposed",
                       {cols.transpose(-1, -2).contiguous().transpose(-1, -2), std::vector<int64_t>{7, 8}, c.kernel,
                        c.dilation, c.padding, c.stride}});
        }
    s.push_back({"blocks that do not match output_size (refused)",
                 {randn({2, 27, 5}), std::vector<int64_t>{7, 8}, std::vector<int64_t>{3, 3}, std::vector<int64_t>{1, 1},
                  std::vector<int64_t>{0, 0}, std::vector<int64_t>{1, 1}}});
    return s;
  };
  t["aten::glu_backward"] = [] {
    Samples s;
    for_each_tensor({{2, 4, 6}, {6, 8}}, kFloatTypes, [&](const std::string& l, const Tensor& x) {
      for (int64_t dim : {int64_t{-1}, int64_t{0}}) {
        std::vector<int64_t> half(x.sizes().begin(), x.sizes().end());
        half[static_cast<std::size_t>(dim < 0 ? dim + x.dim() : dim)] /= 2;
        s.push_back({fmt::format("{} dim={}", l, dim), {randn(half, x.scalar_type()), x, dim}});
      }
    });
    s.push_back({"odd dimension (refused)", {randn({2, 3}), randn({2, 5}), int64_t{1}}});
    s.push_back({"0-d (refused)", {randn({}), randn({}), int64_t{0}}});
    return s;
  };
  t["aten::binary_cross_entropy"] = [] {
    Samples s;
    for_each_tensor(
        {{4, 5}, {2, 3, 4, 5}, {0, 3}}, {at::kFloat, at::kDouble}, [&](const std::string& l, const Tensor& x) {
          Tensor p = x.sigmoid();
          for (int64_t reduction : {0, 1, 2})
            for (bool weight : {false, true})
              s.push_back({fmt::format("{} reduction={} weight={}", l, reduction, weight),
                           {p, at::rand(x.sizes()).to(x.scalar_type()),
                            weight ? IValue(at::rand(x.sizes()).to(x.scalar_type())) : IValue(), reduction}});
        });
    return s;
  };
  t["aten::binary_cross_entropy_backward"] = [] {
    Samples s;
    for_each_tensor({{4, 5}, {2, 3, 4, 5}}, {at::kFloat, at::kDouble}, [&](const std::string& l, const Tensor& x) {
      Tensor p = x.sigmoid();
      for (int64_t reduction : {0, 1}) {
        Tensor grad = reduction == 0 ? randn(x.sizes(), x.scalar_type()) : randn({}, x.scalar_type());
        s.push_back({fmt::format("{} reduction={}", l, reduction),
                     {grad, p, at::rand(x.sizes()).to(x.scalar_type()), IValue(), reduction}});
      }
    });
    return s;
  };
  auto nll2d = [](const std::function<void(Samples&, const std::string&, const Tensor&, const Tensor&,
                                           const std::optional<Tensor>&, int64_t)>& add) {
    Samples s;
    for (bool cl : {false, true})
      for (at::ScalarType d : {at::kFloat, at::kDouble})
        for (bool weight : {false, true})
          for (int64_t reduction : {0, 1, 2}) {
            Tensor x = randn({2, 4, 3, 5}, d).log_softmax(1);
            if (cl) x = x.contiguous(at::MemoryFormat::ChannelsLast);
            add(s, fmt::format("channels_last={} {} weight={} reduction={}", cl, c10::toString(d), weight, reduction),
                x, at::randint(0, 4, {2, 3, 5}), weight ? std::optional<Tensor>(at::rand({4}).to(d)) : std::nullopt,
                reduction);
          }
    return s;
  };
  t["aten::nll_loss2d_forward"] = [nll2d] {
    Samples s = nll2d([](Samples& s, const std::string& l, const Tensor& x, const Tensor& target,
                         const std::optional<Tensor>& w, int64_t reduction) {
      s.push_back({l, {x, target, w ? IValue(*w) : IValue(), reduction, int64_t{-100}}});
    });
    s.push_back({"3-d target of the wrong size (refused)",
                 {randn({2, 4, 3, 5}), at::zeros({2, 3, 4}, at::kLong), IValue(), int64_t{1}, int64_t{-100}}});
    return s;
  };
  t["aten::nll_loss2d_backward"] = [nll2d] {
    return nll2d([](Samples& s, const std::string& l, const Tensor& x, const Tensor& target,
                    const std::optional<Tensor>& w, int64_t reduction) {
      auto [out, total] = at::nll_loss2d_forward(x, target, w, reduction, -100);
      s.push_back({l,
                   {randn(out.sizes(), x.scalar_type()), x, target, w ? IValue(*w) : IValue(), reduction, int64_t{-100},
                    total}});
    });
  };
  // Fused optimizer steps: in place, no results; the Meta kernel must refuse what the CPU refuses.
  auto optimizer_lists = [](int n, at::ScalarType dtype) {
    std::vector<Tensor> out;
    const std::vector<std::vector<int64_t>> shapes = {{3, 4}, {5}, {2, 2, 2}};
    for (int i = 0; i < n; ++i) out.push_back(randn(shapes[i % shapes.size()], dtype));
    return out;
  };
  auto adam = [optimizer_lists](bool tensor_lr) {
    Samples s;
    for (at::ScalarType d : {at::kFloat, at::kDouble})
      for (bool amsgrad : {false, true})
        for (int bad : {0, 1, 2, 3}) {  // 0: valid; 1: a short grads list; 2: max_exp_avg_sqs given iff not
                                        // amsgrad (both refused); 3: a grad of another dtype
          std::vector<Tensor> params = optimizer_lists(3, d), grads = optimizer_lists(bad == 1 ? 2 : 3, d);
          if (bad == 3) grads[1] = grads[1].to(d == at::kFloat ? at::kDouble : at::kFloat);
          const bool with_max = amsgrad != (bad == 2);
          std::vector<Tensor> max_sqs = with_max ? optimizer_lists(3, d) : std::vector<Tensor>{};
          std::vector<Tensor> steps = {at::ones({}), at::ones({}), at::ones({})};
          std::vector<IValue> args = {params, grads, optimizer_lists(3, d), optimizer_lists(3, d), max_sqs, steps};
          args.push_back(tensor_lr ? IValue(at::scalar_tensor(0.01)) : IValue(0.01));
          for (IValue v : {IValue(0.9), IValue(0.999), IValue(0.0), IValue(1e-8), IValue(amsgrad), IValue(false),
                           IValue(), IValue()})
            args.push_back(v);
          s.push_back({fmt::format("{} amsgrad={} case={}", c10::toString(d), amsgrad, bad), args});
        }
    return s;
  };
  t["aten::_fused_adam_"] = [adam] { return adam(false); };
  t["aten::_fused_adam_.tensor_lr"] = [adam] { return adam(true); };
  t["aten::_fused_adamw_"] = [adam] { return adam(false); };
  t["aten::_fused_adamw_.tensor_lr"] = [adam] { return adam(true); };
  auto sgd = [optimizer_lists](bool tensor_lr) {
    Samples s;
    for (at::ScalarType d : {at::kFloat, at::kDouble})
      for (double momentum : {0.0, 0.9})
        for (int bad : {0, 1, 2}) {  // 0: valid; 1: a short grads list; 2: buffers given iff no momentum (refused)
          std::vector<Tensor> params = optimizer_lists(3, d), grads = optimizer_lists(bad == 1 ? 2 : 3, d);
          const bool with_buffers = (momentum != 0) != (bad == 2);
          std::vector<Tensor> buffers = with_buffers ? optimizer_lists(3, d) : std::vector<Tensor>{};
          std::vector<IValue> args = {params, grads, buffers, 0.0, momentum};
          args.push_back(tensor_lr ? IValue(at::scalar_tensor(0.01)) : IValue(0.01));
          for (IValue v : {IValue(0.0), IValue(false), IValue(false), IValue(true), IValue(), IValue()})
            args.push_back(v);
          s.push_back({fmt::format("{} momentum={} case={}", c10::toString(d), momentum, bad), args});
        }
    return s;
  };
  t["aten::_fused_sgd_"] = [sgd] { return sgd(false); };
  t["aten::_fused_sgd_.tensor_lr"] = [sgd] { return sgd(true); };
  // oneDNN's LSTM layer (mode 2) as eager's CPU LSTM calls it: time first, per layer and direction;
  // the workspace's size is the Meta kernel's question to oneDNN. (No bad case: the CPU kernel
  // hands oneDNN the data pointers unchecked, where the Meta kernel refuses weights of another
  // width.)
  struct LstmLayer {
    int64_t steps, batch, features, hidden;
    bool reverse;
  };
  const std::vector<LstmLayer> lstm_layers = {
      {5, 3, 4, 6, false}, {5, 3, 4, 6, true}, {1, 1, 8, 2, false}, {7, 2, 12, 16, true}, {2, 4, 3, 5, false}};
  auto lstm_layer_args = [](const LstmLayer& l) {
    const Tensor h = randn({l.batch, l.hidden}), c = randn({l.batch, l.hidden});
    return std::vector<IValue>{randn({l.steps, l.batch, l.features}),
                               randn({4 * l.hidden, l.features}),
                               randn({4 * l.hidden, l.hidden}),
                               randn({4 * l.hidden}),
                               randn({4 * l.hidden}),
                               h,
                               c,
                               l.reverse,
                               c10::List<int64_t>(),
                               int64_t{2},
                               l.hidden,
                               int64_t{1},
                               true,
                               false,
                               false,
                               true};
  };
  auto lstm_label = [](const LstmLayer& l) {
    return fmt::format("steps={} batch={} features={} hidden={} reverse={}", l.steps, l.batch, l.features, l.hidden,
                       l.reverse);
  };
  t["aten::mkldnn_rnn_layer"] = [=] {
    Samples s;
    for (const LstmLayer& l : lstm_layers) s.push_back({lstm_label(l), lstm_layer_args(l)});
    return s;
  };
  t["aten::mkldnn_rnn_layer_backward"] = [=] {
    Samples s;
    for (const LstmLayer& l : lstm_layers) {
      std::vector<IValue> forward = lstm_layer_args(l);
      auto op = c10::Dispatcher::singleton().findSchemaOrThrow("aten::mkldnn_rnn_layer", "");
      std::vector<IValue> results = forward;
      op.callBoxed(results);  // output, hy, cy, workspace
      std::vector<std::array<bool, 3>> masks = kMasks;
      masks.push_back({false, false, false});  // none: no gradients at all
      for (auto mask : masks) {                // which of the output's, hy's and cy's gradients arrived
        std::vector<IValue> args(forward.begin(), forward.begin() + 7);
        for (std::size_t k = 0; k < 3; ++k) args.push_back(results[k]);
        for (std::size_t k = 0; k < 3; ++k)
          args.push_back(mask[k] ? IValue(randn(results[k].toTensor().sizes())) : IValue());
        for (IValue v : {forward[7], forward[9], forward[10], forward[11], forward[12], forward[15], forward[13],
                         forward[8], forward[14], results[3]})
          args.push_back(v);
        s.push_back({fmt::format("{} grads={}", lstm_label(l), fmt::join(bool_mask(mask), "")), args});
      }
    }
    return s;
  };
  return t;
}

// Kernels with no CPU twin to compare against: checked on a GPU (tests/cuda) and by the CUDA
// model corpus, not here.
const std::map<std::string, std::string> kNoCpuKernel = {
    {"aten::_thnn_fused_lstm_cell", "CUDA-only kernel"},
    {"aten::_thnn_fused_lstm_cell_backward_impl", "CUDA-only kernel"},
    {"aten::_scaled_dot_product_efficient_attention", "CUDA-only kernel"},
    {"aten::_scaled_dot_product_efficient_attention_backward", "CUDA-only kernel"},
    {"aten::_scaled_dot_product_flash_attention", "CUDA-only kernel"},
    {"aten::_scaled_dot_product_flash_attention_backward", "CUDA-only kernel"},
    {"aten::_scaled_dot_product_cudnn_attention", "CUDA-only kernel"},
    {"aten::_scaled_dot_product_cudnn_attention_backward", "CUDA-only kernel"},
};

TEST(MetaKernelDiffTest, EveryRegisteredKernelHasSamples) {
  const auto table = sample_table();
  for (const std::string& op : detail::aotpipe_meta_kernel_ops())
    EXPECT_TRUE(table.count(op) || kNoCpuKernel.count(op)) << op << " has a Meta kernel but no differential samples";
  for (const auto& [op, samples] : table)
    EXPECT_NE(std::find(detail::aotpipe_meta_kernel_ops().begin(), detail::aotpipe_meta_kernel_ops().end(), op),
              detail::aotpipe_meta_kernel_ops().end())
        << op << " has samples but aotpipe registers no Meta kernel for it";
}

TEST(MetaKernelDiffTest, MetaEqualsCpuKernel) {
  at::manual_seed(0);
  std::size_t compared = 0;
  for (const auto& [name, make_samples] : sample_table()) {
    const auto dot = name.find('.');
    const std::string base = name.substr(0, dot), overload = dot == std::string::npos ? "" : name.substr(dot + 1);
    auto op = c10::Dispatcher::singleton().findSchema({base, overload});
    ASSERT_TRUE(op.has_value()) << name;
    std::size_t failures = 0;
    const Samples samples = make_samples();
    EXPECT_GE(samples.size(), 4u) << name << ": too few samples";
    for (const Sample& sample : samples) {
      ++compared;
      for (const std::string& diff : compare(*op, sample)) {
        if (++failures <= 400) ADD_FAILURE() << name << " [" << sample.label << "]: " << diff;
      }
    }
    if (failures > 400) ADD_FAILURE() << name << ": " << failures - 400 << " more differences";
  }
  std::cout << "compared " << compared << " samples of " << sample_table().size() << " ops\n";
}

}  // namespace
}  // namespace aotpipe

#pragma once
// What the Meta kernel files of tracer/meta/ share: registration that records the op names.
#include <ATen/core/Tensor.h>
#include <torch/library.h>

#include <string>
#include <utility>

namespace aotpipe::detail {

// The names registered so far (registry.cpp).
void record_meta_kernel(std::string qualified_name);

class MetaRegistrar {
 public:
  explicit MetaRegistrar(torch::Library& library) : library_(library) {}
  template <class Kernel>
  MetaRegistrar& impl(const char* name, Kernel&& kernel) {
    library_.impl(name, std::forward<Kernel>(kernel));
    record_meta_kernel(std::string("aten::") + name);
    return *this;
  }

 private:
  torch::Library& library_;
};

// One function per file of tracer/meta/, called by registry.cpp.
void register_pointwise_meta(MetaRegistrar& m);
void register_normalization_meta(MetaRegistrar& m);
void register_convolution_meta(MetaRegistrar& m);
void register_indexing_meta(MetaRegistrar& m);
void register_reduction_meta(MetaRegistrar& m);
void register_attention_meta(MetaRegistrar& m);
void register_rnn_meta(MetaRegistrar& m);
void register_pooling_meta(MetaRegistrar& m);
void register_loss_meta(MetaRegistrar& m);
void register_optimizer_meta(MetaRegistrar& m);
void register_spectral_meta(MetaRegistrar& m);

}  // namespace aotpipe::detail

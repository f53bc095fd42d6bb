// The one registration of aotpipe's Meta kernels with the dispatcher, and the device hint.
#include <aotpipe/tracer/internal/meta_support.h>

#include <aotpipe/tracer/internal/meta_kernels.h>

#include <mutex>

namespace aotpipe::detail {
namespace {

std::vector<std::string>& registered() {
  static std::vector<std::string> names;
  return names;
}

thread_local c10::Device tls_device_hint{c10::kCPU};

TORCH_LIBRARY_IMPL(aten, Meta, library) {
  MetaRegistrar m(library);
  register_pointwise_meta(m);
  register_normalization_meta(m);
  register_convolution_meta(m);
  register_indexing_meta(m);
  register_reduction_meta(m);
  register_attention_meta(m);
  register_rnn_meta(m);
  register_pooling_meta(m);
  register_loss_meta(m);
  register_optimizer_meta(m);
  register_spectral_meta(m);
}

}  // namespace

void record_meta_kernel(std::string qualified_name) { registered().push_back(std::move(qualified_name)); }

const std::vector<std::string>& aotpipe_meta_kernel_ops() { return registered(); }

void link_meta_kernels() {}

c10::Device meta_device_hint() { return tls_device_hint; }

MetaDeviceHintScope::MetaDeviceHintScope(c10::Device device) : previous_(tls_device_hint) { tls_device_hint = device; }
MetaDeviceHintScope::~MetaDeviceHintScope() { tls_device_hint = previous_; }

}  // namespace aotpipe::detail

// Uses aotpipe from its Conan package: compiles a small function with aot_function, calls it,
// and checks its outputs and the gradients of its parameters against the same function run
// eagerly; then the compile cache's Redis level, which must be there exactly when the package was
// built with_redis. With `PROGRAM.pt2 OUT.aotpkg` arguments it also writes that program's package,
// which package_consumer (linking only aotpipe::package) then trains. Exit status 0 only when
// everything matches.
#include <aotpipe/aotpipe.h>

#include <ATen/ATen.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string_view>
#include <exception>
#include <string>

namespace {

// A linear layer with tanh, its squared sum as the loss; the activations as a second output.
aotpipe::TensorList layer(const aotpipe::TensorList& a) {
  at::Tensor hidden = at::addmm(a[2], a[0], a[1]).tanh();
  return {(hidden * hidden).sum(), hidden};
}

struct Inputs {
  at::Tensor x, weight, bias;
  aotpipe::TensorList list() const { return {x, weight, bias}; }
};

// The same values as fresh leaves each time, so the compiled and eager runs share nothing.
Inputs make_inputs(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  return {x.clone(), weight.clone().requires_grad_(true), bias.clone().requires_grad_(true)};
}

bool expect_close(const std::string& what, const at::Tensor& got, const at::Tensor& expected) {
  if (!got.defined() || got.sizes() != expected.sizes() || !at::allclose(got, expected, 1e-5, 1e-6)) {
    std::fprintf(stderr, "test_package: %s differs from eager PyTorch\n", what.c_str());
    return false;
  }
  return true;
}

// With Redis: a compile cache whose Redis level cannot be reached (nothing listens on port 1)
// still compiles correctly, with one warning: hiredis is linked and works. Without: the package
// says it has no Redis client.
bool check_redis_level(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                       const aotpipe::TensorList& expected) {
#ifdef AOTPIPE_EXPECT_REDIS
  if (!aotpipe::redis_remote_cache_available()) {
    std::fprintf(stderr, "test_package: built with_redis, but redis_remote_cache_available() is false\n");
    return false;
  }
  char folder[] = "/tmp/aotpipe-test-package-XXXXXX";
  if (!::mkdtemp(folder)) return false;
  aotpipe::CompileCacheOptions options;
  options.directory = folder;
  options.remote = aotpipe::redis_remote_cache("redis://127.0.0.1:1");
  int warnings = 0;
  options.on_warning = [&warnings](std::string_view) { ++warnings; };
  auto cache = std::make_shared<aotpipe::CompileCache>(std::move(options));
  Inputs inputs = make_inputs(x, weight, bias);
  aotpipe::TensorList out = aotpipe::aot_function(layer, {}, cache)(inputs.list());
  const bool ok = expect_close("loss through a cache with an unreachable Redis", out[0], expected[0]);
  const bool turned_off = cache->counters().remote_failed;
  cache->clear();
  std::string rm = std::string("rm -rf ") + folder;
  (void)std::system(rm.c_str());
  if (!turned_off || warnings != 1) {
    std::fprintf(stderr, "test_package: an unreachable Redis gave %d warnings (expected 1), turned off: %d\n", warnings,
                 turned_off);
    return false;
  }
  std::printf("test_package: the Redis level (hiredis) is built in; an unreachable server costs one warning\n");
  return ok;
#else
  (void)x, (void)weight, (void)bias, (void)expected;
  try {
    aotpipe::redis_remote_cache("redis://127.0.0.1:1");
  } catch (const std::invalid_argument& e) {
    std::printf("test_package: built without Redis: %s\n", e.what());
    return !aotpipe::redis_remote_cache_available();
  }
  std::fprintf(stderr, "test_package: built without Redis, but redis_remote_cache() did not say so\n");
  return false;
#endif
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc == 3) {
      const aotpipe::PackageSummary written = aotpipe::write_package(aotpipe::load_exported_program(argv[1]), argv[2]);
      std::printf("test_package: wrote %s (%zu compiles)\n", argv[2], written.compiles);
    }
    at::manual_seed(0);
    at::Tensor x = at::randn({8, 16});
    at::Tensor weight = at::randn({16, 4});
    at::Tensor bias = at::randn({4});

    Inputs eager = make_inputs(x, weight, bias);
    aotpipe::TensorList expected = layer(eager.list());
    expected[0].backward();

    aotpipe::CompiledFunction compiled = aotpipe::aot_function(layer);
    bool ok = true;
    for (int call = 0; call < 2; ++call) {  // the second call reuses the first call's compile
      Inputs inputs = make_inputs(x, weight, bias);
      aotpipe::TensorList out = compiled(inputs.list());
      if (out.size() != 2) {
        std::fprintf(stderr, "test_package: %zu outputs, expected 2\n", out.size());
        return 1;
      }
      out[0].backward();
      const std::string prefix = "call " + std::to_string(call + 1) + ": ";
      ok &= expect_close(prefix + "loss", out[0], expected[0]);
      ok &= expect_close(prefix + "activations", out[1], expected[1]);
      ok &= expect_close(prefix + "weight gradient", inputs.weight.grad(), eager.weight.grad());
      ok &= expect_close(prefix + "bias gradient", inputs.bias.grad(), eager.bias.grad());
    }
    if (compiled.num_compiled() != 1) {
      std::fprintf(stderr, "test_package: %zu compiles for one input signature\n", compiled.num_compiled());
      ok = false;
    }
    ok &= check_redis_level(x, weight, bias, expected);
    if (!ok) return 1;
    std::printf("test_package: aot_function output and gradients match eager PyTorch (loss %.6f)\n",
                expected[0].item<double>());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "test_package: %s\n", e.what());
    return 1;
  }
}

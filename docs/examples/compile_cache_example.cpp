// The compile cache: a second CompiledFunction (as a second process would) finds the first one's
// compile on disk and runs only post_compile; the result is checked against eager PyTorch.
#include <aotpipe/aotpipe.h>

#include <ATen/ATen.h>

#include <filesystem>
#include <iostream>
#include <string>

#include <stdlib.h>
#include <unistd.h>

int main() {
  // A private folder for this example; leave `directory` empty for $XDG_CACHE_HOME/aotpipe/compile.
  std::string folder = (std::filesystem::temp_directory_path() / "aotpipe-cache-example-XXXXXX").string();
  aotpipe::CompileCacheOptions options;
  options.directory = ::mkdtemp(folder.data());
  auto cache = std::make_shared<aotpipe::CompileCache>(options);

  aotpipe::Function fn = [](const aotpipe::TensorList& a) { return aotpipe::TensorList{(a[0].tanh() * a[1]).sum()}; };
  aotpipe::AotConfig config;
  aotpipe::TensorList inputs = {at::randn({8, 4}).requires_grad_(true), at::randn({8, 4})};

  aotpipe::CompileOutput first = aotpipe::compile("step", fn, inputs, config, nullptr, cache);   // compiles, stores
  aotpipe::CompileOutput second = aotpipe::compile("step", fn, inputs, config, nullptr, cache);  // loads
  std::cout << "first: " << aotpipe::to_string(first.cache.outcome) << ", second: "
            << aotpipe::to_string(second.cache.outcome) << " (key " << second.cache.key << ")\n";

  aotpipe::TensorList out = second.runtime(inputs);
  out[0].backward();
  at::Tensor x = inputs[0].detach().clone().requires_grad_(true);
  aotpipe::TensorList expected = fn({x, inputs[1]});
  expected[0].backward();
  const bool same = first.cache.outcome == aotpipe::CacheOutcome::Miss &&
                    second.cache.outcome == aotpipe::CacheOutcome::Hit && at::allclose(out[0], expected[0]) &&
                    at::allclose(inputs[0].grad(), x.grad());

  cache->clear();  // the entries and their folders
  ::rmdir(options.directory.c_str());
  std::cout << (same ? "matches eager" : "DIFFERS from eager") << "\n";
  return same ? 0 : 1;
}

// Choosing a partitioner: the same function under default_partition (save every forward value
// the backward reads) and min_cut_rematerialization_partition (save less, recompute cheap ops in
// the backward). Both give eager's gradients; they differ in what the forward saves.
#include <aotpipe/aotpipe.h>

#include <ATen/ATen.h>

#include <iostream>

int main() {
  aotpipe::Function fn = [](const aotpipe::TensorList& a) { return aotpipe::TensorList{a[0].cos().cos().cos()}; };
  at::Tensor x = at::randn({1024}).requires_grad_(true);

  at::Tensor x_eager = x.detach().clone().requires_grad_(true);
  fn({x_eager})[0].sum().backward();

  bool same = true;
  for (auto [name, partitioner] : {std::pair{"default", aotpipe::partitioners::default_partition()},
                                   std::pair{"min_cut", aotpipe::partitioners::min_cut_rematerialization_partition()}}) {
    aotpipe::AotConfig config;
    config.partition_fn = partitioner;
    aotpipe::CompiledFunction compiled = aotpipe::aot_function(fn, config);
    x.mutable_grad() = at::Tensor();
    compiled({x})[0].sum().backward();
    same = same && at::allclose(x.grad(), x_eager.grad());

    const aotpipe::PartitionResult& partition = *compiled.compiled_state({x})->partition;
    std::cout << name << ": the forward saves " << partition.saved_values.size() << " values ("
              << partition.saved_bytes << " bytes), the backward recomputes " << partition.recomputed.size()
              << " ops\n";
  }
  std::cout << (same ? "both match eager" : "a partitioner DIFFERS from eager") << "\n";
  return same ? 0 : 1;
}

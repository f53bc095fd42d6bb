// Inspecting a compile: the stage-1 metadata (PyTorch's ViewAndMutationMeta, as JSON with
// PyTorch's field names) and the graphs of the compile serving a given signature.
#include <aotpipe/aotpipe.h>

#include <ATen/ATen.h>

#include <iostream>

int main() {
  // Mutates its first input and returns a view of it.
  aotpipe::Function fn = [](const aotpipe::TensorList& a) {
    a[0].mul_(2);
    return aotpipe::TensorList{a[0].view(-1), a[0] * a[1]};
  };
  auto make_inputs = [] { return aotpipe::TensorList{at::ones({2, 2}), at::ones({2, 2}).requires_grad_(true)}; };

  // The analysis alone: which inputs are mutated, which outputs alias what.
  std::cout << aotpipe::to_json(aotpipe::collect_metadata(fn, make_inputs())) << "\n";

  aotpipe::CompiledFunction compiled = aotpipe::aot_function(fn);
  aotpipe::TensorList inputs = make_inputs();
  std::shared_ptr<const aotpipe::CompileState> state = compiled.compiled_state(inputs);  // compiles
  if (!state->partition) {  // an input requires grad: a joint graph is traced and partitioned
    std::cerr << "expected a training compile\n";
    return 1;
  }
  std::cout << state->traced.joint->graph << state->partition->forward << state->partition->backward;

  // The compiled function behaves as eager: outputs, the mutation of a[0], the view.
  aotpipe::TensorList out = compiled(inputs);
  aotpipe::TensorList eager_inputs = make_inputs();
  aotpipe::TensorList expected = fn(eager_inputs);
  const bool same = at::allclose(out[0], expected[0]) && at::allclose(out[1], expected[1]) &&
                    at::allclose(inputs[0], eager_inputs[0]) && out[0].is_view() &&
                    out[0].storage().is_alias_of(inputs[0].storage());
  std::cout << (same ? "matches eager" : "DIFFERS from eager") << "\n";
  return same ? 0 : 1;
}

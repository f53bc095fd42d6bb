#include <aotpipe/backend/backend_traits.h>
#include <aotpipe/pipeline/identified.h>

#include <utility>

namespace aotpipe {
namespace {

using Signature = CompiledGraph(const Graph&, const std::vector<TensorMeta>&);

// The callable a Compiler holds when it declared traits (inside its Identified when it is named).
struct DeclaringCompiler {
  BackendTraits traits;
  Compiler compiler;
  CompiledGraph operator()(const Graph& graph, const std::vector<TensorMeta>& inputs) const {
    return compiler(graph, inputs);
  }
};

}  // namespace

Compiler with_backend_traits(Compiler compiler, BackendTraits traits) {
  if (auto* named = compiler.target<Identified<Signature>>())
    return Identified<Signature>{named->identity, DeclaringCompiler{traits, std::move(named->fn)}};
  return DeclaringCompiler{traits, std::move(compiler)};
}

BackendTraits backend_traits_of(const Compiler& compiler) {
  const Compiler* inner = &compiler;
  if (const auto* named = compiler.target<Identified<Signature>>()) inner = &named->fn;
  if (const auto* declaring = inner->target<DeclaringCompiler>()) return declaring->traits;
  return {};
}

}  // namespace aotpipe

#pragma once
// A callable with a stable identity. The compile cache keys on what produced a compile; a
// std::function holding an arbitrary lambda has no identity that survives the process, so the
// cache only trusts callables wrapped in Identified (PyTorch's cache likewise bypasses
// compilers it cannot hash). The identity names what the callable is, with its version and
// every option that changes its result: "aotpipe.interpreter/2".
//
//   Compiler mine = Identified<Compiler::result_type(const Graph&, const std::vector<TensorMeta>&)>{
//       "acme.fuser/3 unroll=4", acme_fuser};   // or named_compiler("acme.fuser/3 unroll=4", acme_fuser)
#include <functional>
#include <optional>
#include <string>
#include <utility>

namespace aotpipe {

template <typename Signature>
struct Identified;

template <typename Result, typename... Args>
struct Identified<Result(Args...)> {
  std::string identity;
  std::function<Result(Args...)> fn;

  Result operator()(Args... args) const { return fn(std::forward<Args>(args)...); }
};

// The identity of `callable` when it holds an Identified, else nullopt.
template <typename Result, typename... Args>
std::optional<std::string> identity_of(const std::function<Result(Args...)>& callable) {
  if (const auto* identified = callable.template target<Identified<Result(Args...)>>()) return identified->identity;
  return std::nullopt;
}

}  // namespace aotpipe

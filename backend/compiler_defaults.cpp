#include <aotpipe/backend/compiler_defaults.h>
#include <aotpipe/backend/backends.h>

#include <utility>

namespace aotpipe {

DefaultedCompilers default_compilers(Compiler forward, Compiler backward, Compiler inference) {
  if (!forward) forward = backends::interpreter();
  if (!backward) backward = forward;
  if (!inference) inference = forward;
  return {std::move(forward), std::move(backward), std::move(inference)};
}

}  // namespace aotpipe

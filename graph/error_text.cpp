#include <aotpipe/graph/error_text.h>

#include <c10/util/Exception.h>

namespace aotpipe {

std::string error_text(const std::exception& e) {
  if (const auto* c10_error = dynamic_cast<const c10::Error*>(&e)) return c10_error->what_without_backtrace();
  return e.what();
}

}  // namespace aotpipe

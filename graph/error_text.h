#pragma once
// An exception's message without c10's C++ backtrace. c10::Error::what() symbolizes the stack it
// captured on its first call (a dladdr per frame: milliseconds), which a reader that rejects bad
// input, or a tracer that turns a kernel's error into its own, should not pay, and whose frames
// no user message wants.
#include <exception>
#include <string>

namespace aotpipe {

std::string error_text(const std::exception& e);

}  // namespace aotpipe

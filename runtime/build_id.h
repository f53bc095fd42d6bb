#pragma once
// This build of aotpipe: its version and a digest of the library's sources (cmake/build_id.cmake
// generates the definition at build time). The compile cache keys on it; a package records it.
#include <string_view>

namespace aotpipe {

std::string_view aotpipe_build_id();

}  // namespace aotpipe

#pragma once
// Backends by name: what `aotpipe compile --backend NAME` and a package's manifest name. The
// interpreter is always registered. A backend built as a library of its own registers itself
// where that library is linked or loaded (cuda/: the CUDA-graph backend, which needs
// libtorch_cuda), so code that only names a backend by string (the CLI, load_package) does not
// link it, and the CLI loads CUDA only for a command that asks for it (docs/cli.md).
#include <aotpipe/graph/calling_convention.h>

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace aotpipe {

// Makes the backend's compiler with its default options.
using BackendFactory = std::function<Compiler()>;

// Registers `make` under `name`, replacing a registration of that name. Thread-safe; returns
// true, so that a static initializer can call it.
bool register_backend(std::string name, BackendFactory make);
// The compiler of the backend registered as `name`; nullopt where none is.
std::optional<Compiler> find_backend(std::string_view name);
// Every registered name, sorted.
std::vector<std::string> registered_backends();

}  // namespace aotpipe

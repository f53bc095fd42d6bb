#pragma once
// What the subcommands do with torch.export archives (.pt2) beyond what the library offers:
// describe one for `show`, and make inputs for `compile --check`.
#include <aotpipe/export/exported_program.h>

#include <cstdint>
#include <string>

namespace aotpipe::cli {

// The program's provenance, graph signature (one line per input and output spec: kind, graph
// value, target) and symbolic dimensions, as `# ` comment lines the graph parser skips.
std::string describe_exported_program(const ExportedProgram& program);

// Metadata examples of the program's flat function's arguments (what `compile` compiles for),
// tied state (one tensor under two names) one example.
TensorList compile_example_args(const ExportedProgram& program);

// Arguments of the program's flat function for one check run: fresh copies of its state
// (parameters stay leaves that require grad; tied state stays one tensor), then its sample inputs, or random inputs made from
// the metadata of its user inputs when the archive has none. Equal for equal seeds.
TensorList check_inputs(const ExportedProgram& program, uint64_t seed);

}  // namespace aotpipe::cli

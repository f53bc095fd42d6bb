// torch.export archives (.pt2) as arbitrary bytes: the zip structure, its records and what is
// in them. load_exported_program rejects bad bytes with Pt2Error only; the compile-key reader
// (archive_compile_ingredients) too. Odd-sized inputs map the weights, even-sized ones read them.
#include "fuzz_input.h"

#include <aotpipe/export/exported_program.h>

using namespace aotpipe;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  constexpr std::string_view target = "pt2_archive";
  const fuzz::MemoryFile file(fuzz::as_text(data, size));
  fuzz::rejects_only_with<Pt2Error>(target, "Pt2Error", [&] {
    LoadExportedProgramOptions options;
    options.map_weights = size % 2 == 1;
    const ExportedProgram program = load_exported_program(file.path(), options);
    (void)program.graph();
  });
  fuzz::rejects_only_with<Pt2Error>(target, "Pt2Error", [&] { (void)archive_compile_ingredients(file.path()); });
  return 0;
}

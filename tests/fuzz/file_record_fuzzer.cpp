// The compile cache's file records (`aotpipe compile`'s "these bytes compiled to entry K, with
// this report row", tools/aotpipe/file_records.h) as arbitrary bytes: parse_file_record reads a
// record or throws; the caller drops such a record with a warning, so any std::exception is an
// answer here, and only a crash or a sanitizer report is a finding.
#include "fuzz_input.h"

#include "aotpipe/file_records.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  try {
    (void)aotpipe::cli::parse_file_record(aotpipe::fuzz::as_text(data, size));
  } catch (const std::exception&) {}
  return 0;
}

#!/usr/bin/env bash
# The runtime-only consumer links no compiler: no code of the tracer, of the compile stages'
# analyses, of the partitioner, of the pipeline's scheduler or of the compile cache is in
# RUNTIME_BINARY (examples/train_package), while FULL_BINARY (the aotpipe CLI, which compiles)
# has each of them, so the check can tell. Prints both binaries' sizes.
#
# usage: runtime_only_check.sh RUNTIME_BINARY FULL_BINARY
set -euo pipefail
runtime=$1
full=$2
compiler_code=(
  'aotpipe::trace_joint('                                  # tracer
  'aotpipe::detail::register_pointwise_meta('              # tracer's meta kernels
  'aotpipe::dedupe_pre_compile('                           # stages: analyses
  'aotpipe::synthetic_base_pre_compile('
  'aotpipe::collect_metadata('
  'aotpipe::partitioners::min_cut_rematerialization_partition('  # partitioner (Boost.Graph)
  'aotpipe::Scheduler::'                                    # pipeline (oneTBB, Asio)
  'aotpipe::CompileCache::'                                 # compile cache
)
runtime_symbols=$(nm -C --defined-only "$runtime")
full_symbols=$(nm -C --defined-only "$full")
status=0
for symbol in "${compiler_code[@]}"; do
  if ! grep -qF -- "$symbol" <<<"$full_symbols"; then
    echo "check broken: $full lacks $symbol (renamed? update this list)"
    status=1
  fi
  if grep -qF -- "$symbol" <<<"$runtime_symbols"; then
    echo "$runtime links compiler code: $symbol"
    status=1
  fi
done
echo "runtime-only consumer $(basename "$runtime"): $(stat -c %s "$runtime") bytes; full library $(basename "$full"): $(stat -c %s "$full") bytes"
exit $status

#!/usr/bin/env bash
# Checks of the `aotpipe` command-line tool, run by CTest (label `cli`):
#   cli_test.sh examples AOTPIPE SOURCE_DIR   every example graph runs with --check-meta and reports ok
#   cli_test.sh broken   AOTPIPE SOURCE_DIR   good and broken fixtures mixed: each broken file is named
#                                             with its error, the good ones still run, exit status != 0
#   cli_test.sh show     AOTPIPE SOURCE_DIR   show prints a graph that show reads back to the same text;
#                                             a .pt2 archive with its graph signature
#   cli_test.sh compile_examples AOTPIPE SOURCE_DIR
#                                             every example (.aotg and .pt2) compiles (-j2) and matches
#                                             eager (--check); per-graph outputs, summary and Chrome
#                                             trace are written
#   cli_test.sh compile_broken   AOTPIPE SOURCE_DIR
#                                             broken files and failing graphs are listed with their stage
#                                             and message, the good ones still compile, exit status 1
#   cli_test.sh compile_usage    AOTPIPE SOURCE_DIR
#                                             --pipeline and --partitioner: text pipelines, usage errors
#   cli_test.sh shards           AOTPIPE SOURCE_DIR
#                                             compile --shard K/N and gather: one report, missing shards
#                                             named, deterministic assignment, usage errors
#   cli_test.sh mpi              AOTPIPE SOURCE_DIR
#                                             mpirun -n 3 aotpipe compile: one report from rank 0,
#                                             failures with their rank; -n 2 and -n 4: outputs
#                                             identical to one process; a rank killed mid-batch fails the job and the
#                                             re-run compiles only what is missing (exit 77 without
#                                             mpirun)
#   cli_test.sh stages_in_docs   AOTPIPE SOURCE_DIR
#                                             docs/cli.md's stage table is what --list-stages prints
#   cli_test.sh cache            AOTPIPE SOURCE_DIR
#                                             4 processes compile the corpus into one cache at once; a
#                                             re-run hits every graph with the same results; stats,
#                                             explain, clear, --no-cache
#   cli_test.sh cache_records    AOTPIPE SOURCE_DIR
#                                             a warm run finds every graph by its file's record: the
#                                             cold run's rows and --out files; a changed file, seed or
#                                             partitioner, a damaged record and a record whose entry is
#                                             gone each fall back to the key, correctly
#   cli_test.sh cache_kill       AOTPIPE SOURCE_DIR
#                                             a compile killed (SIGKILL) mid-batch leaves a cache the
#                                             re-run reads without a warning, recompiling the rest
#   cli_test.sh cache_redis      AOTPIPE SOURCE_DIR
#                                             two processes with different local caches share compiles
#                                             through a redis-server (the second hits); with Redis
#                                             stopped, one warning and every graph still compiles
#                                             (exit 77 without redis-server)
#   cli_test.sh compile_cuda     AOTPIPE SOURCE_DIR
#                                             --device cuda:0 without a GPU: every example compiles and
#                                             every value of its compiled graphs is on cuda:0
#   cli_test.sh cuda_on_demand   AOTPIPE SOURCE_DIR
#                                             the executable does not link libtorch_cuda; a CPU compile
#                                             does not load it (on a machine without a GPU), --device
#                                             cuda:0 and --backend cuda_graphs do; a graph on cuda:0 in a
#                                             process without CUDA fails naming the remedy (exit 77 in a
#                                             build without the CUDA plugin)
set -uo pipefail

mode=$1 exe=$2 src=$3
fixtures=$src/tests/cli/fixtures
failures=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Every test has its own compile cache (aotpipe compile's default one is under XDG_CACHE_HOME).
export XDG_CACHE_HOME=$tmp/xdg-cache

check() {  # check DESCRIPTION COMMAND...: count a failed assertion, keep going
  local what=$1; shift
  if "$@"; then echo "PASS: $what"; else echo "FAIL: $what"; failures=$((failures + 1)); fi
}
# The report line of one file (the path is its second column).
line_of() { grep -E "^[^ ]+ +[^ ]*/$1 " "$tmp/out" || true; }
reports_ok() { line_of "$1" | grep -qE ' ok$'; }
reports_failure() {  # FILE STAGE TEXT: FILE's line says FAILED STAGE and contains TEXT
  line_of "$1" | grep -F "FAILED $2:" | grep -qF -- "$3"
}
in_failures() {  # FILE TEXT: the Failures section names FILE, TEXT in its entry (which may span lines)
  sed -n '/^Failures$/,$p' "$tmp/out" |
    awk -v file="/$1:" 'index($0, file) && /^  [^ ]/ { on = 1; print; next } /^  [^ ]/ { on = 0 } on' |
    grep -qF -- "$2"
}
summary_is() {  # GRAPHS OK FAILED
  sed -n '/^Summary$/,/^$/p' "$tmp/out" | grep -qE "^ +$1 +$2 +$3$"
}
run() { "$exe" "$@" >"$tmp/out" 2>"$tmp/err"; echo $? >"$tmp/rc"; cat "$tmp/out" "$tmp/err"; }
# `aotpipe compile` reports: a table row per graph (named by graph), a Summary, a Failures list.
compiled_ok() { grep -qE "^$1 .* ok$" "$tmp/out"; }
compile_failed() {  # FILE STAGE TEXT: the Failures entry of FILE says STAGE, its message contains TEXT
  sed -n '/^Failures$/,$p' "$tmp/out" |
    awk -v file="/$1 (" -v stage=": $2:" 'index($0, file) && index($0, stage) { on = 1; next } /^  [^ ]/ { on = 0 } on' |
    grep -qF -- "$3"
}
compile_summary_is() {  # GRAPHS OK FAILED
  sed -n '/^Summary$/,/^$/p' "$tmp/out" | grep -qE "^ +$1 +$2 +$3 "
}
rc() { cat "$tmp/rc"; }

case $mode in
  examples)
    run run "$src/examples" --check-meta
    check "exit status 0" test "$(rc)" -eq 0
    n=0
    for f in "$src"/examples/*.aotg; do
      n=$((n + 1))
      check "$(basename "$f") ok" reports_ok "$(basename "$f")"
    done
    check "at least 8 examples" test "$n" -ge 8
    check "summary $n graphs, $n ok, 0 failed" summary_is "$n" "$n" 0
    ;;
  broken)
    run run "$fixtures" "$tmp/does-not-exist.aotg" --check-meta
    check "exit status non-zero" test "$(rc)" -ne 0
    check "good_pointwise.aotg still ok" reports_ok good_pointwise.aotg
    check "nested/good_constant.aotg (random constant bound) ok" reports_ok good_constant.aotg
    check "empty file" reports_failure empty.aotg "parse error" "line 1, column 1: expected 'graph'"
    check "binary garbage" reports_failure garbage.aotg "parse error" "line 1, column 1: unexpected character"
    check "truncated file" reports_failure truncated.aotg "parse error" "line 5, column 1:"
    check "unknown operator" reports_failure unknown_op.aotg "parse error" "line 4, column 19: unknown operator 'aten::frobnicate'"
    check "use before definition" reports_failure use_before_def.aotg "parse error" "line 4, column 40: use of undefined value %c"
    check "verifier error" reports_failure verifier_error.aotg "verify error" "[argument-type]"
    check "verifier lists every problem" in_failures verifier_error.aotg "[unused-value]"
    check "op failing at run time" reports_failure shape_mismatch.aotg "run error" "aten::mm failed: mat1 and mat2 shapes cannot be multiplied"
    check "TensorMeta mismatch (--check-meta)" reports_failure wrong_meta.aotg "run error" "%t = aten::t produced f32[8, 4] stride=[1, 8], declared f32[8, 4]"
    check "missing path" reports_failure does-not-exist.aotg "read error" "no such file or directory"
    check "no C++ backtrace in the report" bash -c "! grep -q 'Exception raised from' '$tmp/out'"
    check "summary 11 graphs, 2 ok, 9 failed" summary_is 11 2 9
    for f in empty garbage truncated unknown_op use_before_def verifier_error shape_mismatch wrong_meta; do
      check "$f.aotg named in Failures" in_failures "$f.aotg" "error"
    done
    # Without --check-meta the wrong declared strides go unnoticed: the graph runs.
    run run "$fixtures/wrong_meta.aotg"
    check "wrong_meta.aotg runs without --check-meta" test "$(rc)" -eq 0
    ;;
  show)
    run show "$src/examples/mlp_layer.aotg"
    check "show exits 0" test "$(rc)" -eq 0
    check "show prints the graph" grep -q '^graph mlp_layer(' "$tmp/out"
    cp "$tmp/out" "$tmp/printed.aotg"
    run show "$tmp/printed.aotg"
    check "show reads its own output back to the same text" cmp -s "$tmp/out" "$tmp/printed.aotg"
    run show "$fixtures/good_pointwise.aotg" "$fixtures/unknown_op.aotg"
    check "show exits non-zero on a broken file" test "$(rc)" -ne 0
    check "show still prints the good file" grep -q '^graph good_pointwise(' "$tmp/out"
    check "show names the broken file and its error" grep -qF "unknown_op.aotg: parse error: line 4, column 19: unknown operator" "$tmp/err"
    # A torch.export archive: its signature as comments, then its graph, which show reads back.
    run show "$src/examples/pt2/buffer_mutation_const.aten.pt2"
    check "show imports a .pt2" test "$(rc)" -eq 0
    check "show prints the export's signature" bash -c "grep -qE '^#   BUFFER +%b_mask +mask \(not persistent\)$' '$tmp/out' &&
      grep -qE '^#   CONSTANT_TENSOR +%c_scale +scale$' '$tmp/out' && grep -qE '^#   BUFFER_MUTATION +%add_1 +steps$' '$tmp/out'"
    check "show prints the imported graph" grep -q '^graph buffer_mutation_const_aten(%p_lin_weight: f32\[6, 6\] requires_grad' "$tmp/out"
    cp "$tmp/out" "$tmp/imported.aotg"
    run show "$tmp/imported.aotg"
    check "the imported graph reads back" test "$(rc)" -eq 0
    head -c 2000 "$src/examples/pt2/gpt_block_loss.pt2" >"$tmp/truncated.pt2"
    run show "$tmp/truncated.pt2"
    check "a truncated .pt2 is an import error naming the file" \
      bash -c "test \$(cat '$tmp/rc') -ne 0 && grep -qF 'truncated.pt2: import error: $tmp/truncated.pt2: not a readable .pt2 archive' '$tmp/err'"
    ;;
  compile_examples)
    run compile "$src/examples" -j 2 --check --no-cpu-fallback --out "$tmp/out.d" --trace "$tmp/trace.json"
    check "exit status 0" test "$(rc)" -eq 0
    # Truly fake: no op of the corpus runs its CPU kernel while compiling (else --no-cpu-fallback fails it).
    check "the summary reports no CPU fallback" grep -q "CPU fallback: none" "$tmp/out"
    check "every graph's fallback column is 0" \
      bash -c "! grep -E ' ok$' '$tmp/out' | awk '{ if (\$(NF-4) != 0) print }' | grep -q ."
    n=0
    for f in "$src"/examples/*.aotg "$src"/examples/pt2/*.pt2; do
      n=$((n + 1))
      name=$(basename "$f"); name=${name%.aotg}; name=${name%.pt2}
      check "$name compiled and matches eager" compiled_ok "$name"
      check "$name: metadata.json and partition.txt written" test -s "$tmp/out.d/$name/metadata.json" -a -s "$tmp/out.d/$name/partition.txt"
    done
    check "at least 50 examples" test "$n" -ge 50
    check "the .pt2 models are among them" test "$(ls "$src"/examples/pt2/*.pt2 | wc -l)" -ge 12
    check "summary $n graphs, $n ok, 0 failed" compile_summary_is "$n" "$n" 0
    # A training graph: forward, backward, joint graph and its picture, all readable back.
    d=$tmp/out.d/mlp_layer
    for f in forward backward joint; do
      run show "$d/$f.aotg"
      check "mlp_layer/$f.aotg reads back" test "$(rc)" -eq 0
    done
    check "mlp_layer/joint.dot draws the cut" grep -q 'color=red' "$d/joint.dot"
    if command -v dot >/dev/null; then check "mlp_layer/joint.svg rendered" grep -q '<svg' "$d/joint.svg"; fi
    check "partition report lists saved values and both partitioners" \
      bash -c "grep -q '^saved for the backward' '$d/partition.txt' && grep -q '^  default_partition ' '$d/partition.txt' && grep -q '^memory plan of backward: [0-9]* intermediates in an arena of' '$d/partition.txt' && grep -Eq '^order of backward for peak memory: (kept|lpmf), estimated peak [0-9]+ bytes' '$d/partition.txt'"
    check "metadata.json is PyTorch's schema" grep -q '"output_type"' "$d/metadata.json"
    # An inference graph (nothing requires grad): one inference.aotg, no backward.
    check "an inference-only example writes inference.aotg" \
      bash -c "ls '$tmp'/out.d/*/inference.aotg >/dev/null 2>&1"
    check "the Chrome trace has a complete event per stage of every graph" \
      "${AOTPIPE_PYTHON:-python3}" -c "import json,sys; e=[x for x in json.load(open(sys.argv[1]))['traceEvents'] if x.get('ph')=='X']; sys.exit(0 if len(e) >= 6*$n else 1)" "$tmp/trace.json"
    ;;
  compile_broken)
    run compile "$fixtures" "$tmp/does-not-exist.aotg" "$src/examples/mlp_layer.aotg" -j 2 --out "$tmp/out.d"
    check "exit status 1" test "$(rc)" -eq 1
    check "good_pointwise compiled" compiled_ok good_pointwise
    check "good_constant (random constant bound) compiled" compiled_ok good_constant
    # Names are what each file declares, made unique in batch order: truncated.aotg (before it)
    # declares mlp_layer too and keeps the name though it fails to parse.
    check "mlp_layer compiled, as mlp_layer#2" compiled_ok 'mlp_layer#2'
    check "truncated.aotg reported under the name it declares" grep -qE '^mlp_layer .*FAILED parse error$' "$tmp/out"
    check "good graphs' outputs written" test -s "$tmp/out.d/mlp_layer#2/forward.aotg"
    check "empty file" compile_failed empty.aotg "parse error" "line 1, column 1: expected 'graph'"
    check "binary garbage" compile_failed garbage.aotg "parse error" "unexpected character"
    check "truncated file" compile_failed truncated.aotg "parse error" "line 5, column 1:"
    check "unknown operator" compile_failed unknown_op.aotg "parse error" "unknown operator 'aten::frobnicate'"
    check "use before definition" compile_failed use_before_def.aotg "parse error" "use of undefined value %c"
    check "verifier error" compile_failed verifier_error.aotg "verify error" "[argument-type]"
    check "a graph failing while traced names the stage, graph and op" \
      compile_failed shape_mismatch.aotg "metadata stage" "aten::mm"
    check "missing path" compile_failed does-not-exist.aotg "read error" "no such file or directory"
    check "no C++ backtrace in the report" bash -c "! grep -q 'Exception raised from' '$tmp/out'"
    cp "$src/tests/cli/fixtures/garbage.aotg" "$tmp/garbage.pt2"
    run compile "$src/examples/pt2/unet_decoder_block.pt2" "$tmp/garbage.pt2" --no-svg
    check "a .pt2 that is not an archive fails alone" bash -c "test \$(cat '$tmp/rc') -eq 1 && grep -qE '^unet_decoder_block .* ok$' '$tmp/out'"
    check "its import error is reported" compile_failed garbage.pt2 "import error" "not a readable .pt2 archive"
    ;;
  compile_usage)
    run compile "$src/examples/mlp_layer.aotg" "$src/examples/lstm_cell.aotg" --partitioner default \
      --pipeline "metadata,group(dedupe,synthetic_base),joint,partition,compile" --check
    check "a nested pipeline with the default partitioner compiles and matches eager" test "$(rc)" -eq 0
    check "mlp_layer ok" compiled_ok mlp_layer
    run compile "$src/examples/mlp_layer.aotg" --pipeline "metadata,frobnicate,compile"
    check "an unknown stage is a usage error (exit 2)" test "$(rc)" -eq 2
    check "the error names the stage and lists the known ones" \
      bash -c "grep -q frobnicate '$tmp/err' && grep -q synthetic_base '$tmp/err'"
    run compile "$src/examples/mlp_layer.aotg" --partitioner fastest
    check "an unknown partitioner is a usage error (exit 2)" test "$(rc)" -eq 2
    run compile "$src/examples/mlp_layer.aotg" --backend cuda_graphs --check --no-svg
    check "--backend cuda_graphs on CPU inputs compiles and matches eager" test "$(rc)" -eq 0
    check "the backend says why each graph runs in the interpreter" \
      bash -c "grep -qF \"mlp_layer: cuda_graphs: graph 'forward' runs in the interpreter: input 0 (%primals_1) is on cpu\" '$tmp/out' && grep -qF \"graph 'backward' runs in the interpreter\" '$tmp/out'"
    run compile "$src/examples/mlp_layer.aotg" "$src/examples/transformer_ffn.aotg" "$src/examples/tied_weight_view_output.aotg" \
      --backend planned --check --no-svg
    check "--backend planned (out= kernels into a planned arena) compiles and matches eager" test "$(rc)" -eq 0
    check "transformer_ffn ok with planned" compiled_ok transformer_ffn
    run compile "$src/examples/mlp_layer.aotg" --backend tensorrt
    check "an unknown backend is a usage error naming the known ones" \
      bash -c "test $(rc) -eq 2 && grep -q tensorrt '$tmp/err' && grep -q cuda_graphs '$tmp/err'"
    ;;
  packages)
    pkg="$tmp/tied.aotpkg"
    run compile "$src/examples/pt2/tied_lm_head.pt2" --package "$pkg"
    check "compile --package writes a package (exit 0)" bash -c "test $(rc) -eq 0 && test -s '$pkg'"
    check "it says what it holds" grep -qF "2 compile(s) of 'tied_lm_head' for cpu" "$tmp/out"
    run package info "$pkg"
    check "package info checks it (exit 0)" test "$(rc)" -eq 0
    check "package info lists versions, device, state and both compiles" \
      bash -c "grep -q '^built with  aotpipe .* torch ' '$tmp/out' && grep -q '^device      cpu' '$tmp/out' && grep -q '8 parameter(s)' '$tmp/out' && grep -q 'training  grad mode on   i64\[2, 6\]' '$tmp/out' && grep -q 'inference grad mode off  i64\[2, 6\]' '$tmp/out' && grep -q '^integrity   ok' '$tmp/out'"
    run run "$pkg"
    check "run steps each compile of the package" bash -c "test $(rc) -eq 0 && grep -qE '^tied .* ok$' '$tmp/out'"
    python3 -c "import sys; p=sys.argv[1]; b=bytearray(open(p,'rb').read()); b[-100]^=0x5a; open(sys.argv[2],'wb').write(b)" "$pkg" "$tmp/bad.aotpkg"
    run package info "$tmp/bad.aotpkg" "$pkg"
    check "a corrupted package fails package info (exit 1), naming the blob; the next is still checked" \
      bash -c "test $(rc) -eq 1 && grep -q 'bad.aotpkg: FAILED: .*is corrupted' '$tmp/out' && grep -q '^integrity   ok' '$tmp/out'"
    run run "$tmp/bad.aotpkg"
    check "run reports a corrupted package as failed (exit 1)" bash -c "test $(rc) -eq 1 && grep -q 'FAILED run error: .*corrupted' '$tmp/out'"
    run compile "$src/examples/pt2/dynamic_mlp.pt2" --package "$tmp/d.aotpkg" --sizes 3x8 --sizes 5x8
    check "--sizes compiles each set (4 compiles)" bash -c "test $(rc) -eq 0 && grep -qF '4 compile(s)' '$tmp/out'"
    run compile "$src/examples/pt2/dynamic_mlp.pt2" --package "$tmp/d.aotpkg" --sizes 3xq
    check "a bad --sizes is a usage error naming it" bash -c "test $(rc) -eq 2 && grep -qF \"'q' is not a size\" '$tmp/err'"
    run compile "$src/examples/pt2/dynamic_mlp.pt2" "$src/examples/pt2/tied_lm_head.pt2" --package "$tmp/two.aotpkg"
    check "--package takes one archive (exit 2)" bash -c "test $(rc) -eq 2 && grep -qF 'exactly one torch.export archive' '$tmp/err'"
    run compile "$src/examples/mlp_layer.aotg" --sizes 3x8
    check "--sizes without --package is a usage error" bash -c "test $(rc) -eq 2 && grep -qF 'only goes with --package' '$tmp/err'"
    ;;
  shards)
    # A batch in 3 shards (as 3 tasks of a job array would run it), merged by gather.
    inputs=("$src/examples/pt2" "$src/examples/mlp_layer.aotg" "$src/examples/lstm_cell.aotg" "$fixtures/unknown_op.aotg")
    total=$(( $(ls "$src"/examples/pt2/*.pt2 | wc -l) + 3 ))
    for k in 0 1; do
      run compile "${inputs[@]}" --shard "$k/3" --out "$tmp/o" --no-svg
      check "shard $k/3 wrote its manifest" test -s "$tmp/o/shards/shard-$k-of-3.json"
    done
    run gather "$tmp/o/shards"
    check "gather with a shard missing exits 1" test "$(rc)" -eq 1
    check "gather names the missing shard and how to resubmit it" grep -qF "Missing shards: 2 of 3" "$tmp/out"
    run compile "${inputs[@]}" --shard 2/3 --manifest "$tmp/o/shards/shard-2-of-3.json" --no-svg
    run gather "$tmp/o/shards"
    check "gather of all shards: exit 1 (the batch has one broken file)" test "$(rc)" -eq 1
    check "the one report has every file once: $total graphs, $((total - 1)) ok, 1 failed" \
      compile_summary_is "$total" "$((total - 1))" 1
    check "no shard is missing" bash -c "! grep -q 'Missing shards' '$tmp/out'"
    check "the broken file's failure, as compile reports it" compile_failed unknown_op.aotg "parse error" "unknown operator"
    check "every graph of the batch in one table" bash -c "for n in mlp_layer lstm_cell resnet_bn_train resnet_bn_train.aten gpt_block_loss; do grep -qE \"^\$n \" '$tmp/out' || exit 1; done"
    # The same shard twice gives the same files (deterministic assignment).
    grep -o '"file": *"[^"]*"' "$tmp/o/shards/shard-1-of-3.json" >"$tmp/first"
    run compile "${inputs[@]}" --shard 1/3 --out "$tmp/o2" --no-svg
    grep -o '"file": *"[^"]*"' "$tmp/o2/shards/shard-1-of-3.json" >"$tmp/second"
    check "a shard's files are the same on every run" cmp -s "$tmp/first" "$tmp/second"
    run compile "${inputs[@]}" --shard 0/2 --out "$tmp/o" --no-svg
    run gather "$tmp/o/shards"
    check "manifests of another split are refused by name" \
      bash -c "test \$(cat '$tmp/rc') -eq 2 && grep -q 'manifests of different batches' '$tmp/err'"
    run compile "${inputs[@]}" --shard 3/3 --out "$tmp/o"
    check "--shard 3/3 is a usage error" bash -c "test \$(cat '$tmp/rc') -ne 0 && grep -q 'K must be below N' '$tmp/err'"
    run compile "${inputs[@]}" --shard 1/3
    check "--shard without --out or --manifest is refused" bash -c "test \$(cat '$tmp/rc') -ne 0 && grep -q 'needs --out DIR or --manifest FILE' '$tmp/err'"
    ;;
  mpi)
    # The batch split over 3 MPI ranks; rank 0 prints the one report (exit 77: no mpirun here).
    command -v mpirun >/dev/null || { echo "SKIP: mpirun not found (Debian openmpi-bin)"; exit 77; }
    mpi=(mpirun --allow-run-as-root --oversubscribe -n 3)
    inputs=("$src/examples/pt2" "$src/examples/mlp_layer.aotg" "$src/examples/lstm_cell.aotg")
    total=$(( $(ls "$src"/examples/pt2/*.pt2 | wc -l) + 2 ))
    "${mpi[@]}" "$exe" compile "${inputs[@]}" -j 1 --check --no-svg --out "$tmp/o" >"$tmp/out" 2>"$tmp/err"; echo $? >"$tmp/rc"
    cat "$tmp/out"
    check "mpirun -n 3: exit status 0" test "$(rc)" -eq 0
    check "one summary for the whole batch: $total graphs, all ok" compile_summary_is "$total" "$total" 0
    check "one table row per graph" test "$(grep -cE ' ok$' "$tmp/out")" -eq "$total"
    check "the summary names the ranks" grep -q "(3 MPI ranks on 1 host, 3 worker threads in all)" "$tmp/out"
    check "every rank wrote its graphs' outputs" bash -c "ls '$tmp'/o/*/metadata.json | wc -l | grep -qx $total"
    "${mpi[@]}" "$exe" compile "${inputs[@]}" "$fixtures/unknown_op.aotg" -j 1 --no-svg >"$tmp/out" 2>"$tmp/err"; echo $? >"$tmp/rc"
    cat "$tmp/out"
    check "a failure anywhere: exit status 1" test "$(rc)" -eq 1
    check "the failure is reported with the rank that saw it" \
      bash -c "grep -qE 'unknown_op.aotg \(unknown_op\) \[rank [0-2] on [^]]+\]: parse error:' '$tmp/out'"
    "${mpi[@]}" "$exe" compile "${inputs[@]}" --shard 0/2 --out "$tmp/o" >"$tmp/out" 2>"$tmp/err"; echo $? >"$tmp/rc"
    check "--shard under mpirun is a usage error" bash -c "test \$(cat '$tmp/rc') -ne 0 && grep -q 'drop --shard' '$tmp/err'"
    # Rank 0 hands the corpus out in chunks; duplicate graph names get the same folders as in one
    # process, and every file is identical to a single-process run's.
    corpus=("$src/examples" "$src/examples/mlp_layer.aotg" "$src/examples/pt2/unet_decoder_block.pt2")
    total=$(( $(ls "$src"/examples/*.aotg "$src"/examples/pt2/*.pt2 | wc -l) + 2 ))
    "$exe" compile "${corpus[@]}" -j 2 --no-svg --no-cache --out "$tmp/single" >"$tmp/out" 2>"$tmp/err"
    for n in 2 4; do
      mpirun --allow-run-as-root --oversubscribe -n $n "$exe" compile "${corpus[@]}" -j 1 --no-svg --no-cache \
        --out "$tmp/ranks$n" >"$tmp/out" 2>"$tmp/err"
      check "the corpus over $n ranks: all $total ok" compile_summary_is "$total" "$total" 0
      check "$n ranks: the same outputs as one process (duplicates as name#2)" \
        bash -c "test -s '$tmp/ranks$n/mlp_layer#2/forward.aotg' && diff -r '$tmp/ranks$n' '$tmp/single'"
    done
    # A rank killed mid-batch: Open MPI aborts the job, loudly; the re-run compiles only what no
    # rank had published to the cache.
    cache=$tmp/mpi-cache
    "${mpi[@]}" "$exe" compile "$src/examples" -j 1 --check --no-svg --cache-dir "$cache" >"$tmp/killed.out" 2>&1 &
    job=$!
    rank1=
    until [ -n "$rank1" ] || ! kill -0 "$job" 2>/dev/null; do
      for pid in $(pgrep -f -- "$exe compile" || true); do
        tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx OMPI_COMM_WORLD_RANK=1 && rank1=$pid
      done
    done
    until [ -n "$(find "$cache" -name '*.entry' 2>/dev/null | head -1)" ] || ! kill -0 "$job" 2>/dev/null; do :; done
    kill -KILL "$rank1" 2>/dev/null
    wait "$job"; echo $? >"$tmp/rc"
    check "the job with a killed rank fails" test "$(rc)" -ne 0
    check "mpirun names the killed rank" grep -qE "rank 1 .*(signal 9|Killed)" "$tmp/killed.out"
    check "no report from the aborted job" bash -c "! grep -q '^Summary' '$tmp/killed.out'"
    stored=$(find "$cache" -name '*.entry' | wc -l)
    examples=$(ls "$src"/examples/*.aotg "$src"/examples/pt2/*.pt2 | wc -l)
    "${mpi[@]}" "$exe" compile "$src/examples" -j 1 --no-svg --cache-dir "$cache" >"$tmp/out" 2>"$tmp/err"; echo $? >"$tmp/rc"
    check "the re-run completes: all $examples ok" compile_summary_is "$examples" "$examples" 0
    check "the re-run loads the $stored stored graphs and compiles the other $((examples - stored))" \
      grep -qE "compile cache: $stored hits, $((examples - stored)) misses, 0 bypassed" "$tmp/out"
    check "the killed run left no unusable entry" bash -c "! grep -q unusable '$tmp/err'"
    ;;
  stages_in_docs)
    # The stage table of docs/cli.md is the one `--list-stages` prints from compile_stages().
    run compile --list-stages
    check "--list-stages exits 0" test "$(rc)" -eq 0
    check "six stages listed" test "$(grep -c '^| `' "$tmp/out")" -eq 6
    while IFS= read -r line; do
      check "docs/cli.md has: $line" grep -qxF "  $line" "$src/docs/cli.md"
    done <"$tmp/out"
    ;;
  compile_fallback)
    # An op without a Meta kernel: counted (table, summary) when allowed, named when refused.
    run compile "$src/tests/cli/uncovered/cdist_l1.aotg" --no-svg --check
    check "exit status 0 with the fallback allowed" test "$(rc)" -eq 0
    check "the table counts 3 fallback calls (forward: metadata and joint traces; backward)" \
      bash -c "grep -E '^cdist_l1 ' '$tmp/out' | awk '{ exit !(\$(NF-4) == 3) }'"
    check "the summary names the ops" bash -c "grep -qE 'aten::_cdist_forward +2 calls in 1 graph$' '$tmp/out' && grep -qE 'aten::_cdist_backward +1 call in 1 graph$' '$tmp/out'"
    run compile "$src/tests/cli/uncovered/cdist_l1.aotg" --no-svg --no-cpu-fallback
    check "exit status 1 with the fallback refused" test "$(rc)" -eq 1
    check "the failure names the first uncovered op" \
      compile_failed cdist_l1.aotg "metadata stage" "aten::_cdist_forward: has no Meta kernel, so fake tracing cannot compute its output metadata (TraceOptions::allow_cpu_fallback is off)"
    ;;
  compile_cuda)
    run compile "$src/examples" -j 2 --device cuda:0 --no-svg --no-cpu-fallback --out "$tmp/out.d"
    n=$(ls "$src"/examples/*.aotg "$src"/examples/pt2/*.pt2 | wc -l)
    check "exit status 0" test "$(rc)" -eq 0
    check "summary $n graphs, $n ok, 0 failed" compile_summary_is "$n" "$n" 0
    # sdpa_causal_attention recorded the CPU-only flash kernel: for cuda:0 it is the composite again.
    check "the CPU flash attention is retargeted" \
      bash -c "! grep -q _for_cpu '$tmp/out.d/sdpa_causal_attention/forward.aotg' && grep -q device=cuda:0 '$tmp/out.d/sdpa_causal_attention/forward.aotg'"
    # Without a GPU to choose a fused kernel, SDPA for cuda:0 is its math form: said once, not silently.
    if [ -e /dev/nvidiactl ] || [ -n "$(ls /proc/driver/nvidia/gpus 2>/dev/null)" ]; then
      check "with a GPU, no word of SDPA's math form" bash -c "! grep -q 'recorded in its math form' '$tmp/err'"
    else
      check "without a GPU, SDPA's math form is said once" \
        bash -c "test \"\$(grep -c 'scaled_dot_product_attention is compiled for cuda:0 on a machine without a GPU, so it is recorded in its math form' '$tmp/err')\" -eq 1"
    fi
    ls "$tmp"/out.d/*/forward.aotg "$tmp"/out.d/*/backward.aotg "$tmp"/out.d/*/inference.aotg >"$tmp/graphs" 2>/dev/null
    check "compiled graphs written" test -s "$tmp/graphs"
    # Every tensor value (inputs and node results) says device=cuda:0; the CPU is never printed,
    # except for 0-dim constants: the Python scalars an export passed (CPU scalars, as in eager).
    check "no value of a compiled graph is on the CPU" \
      bash -c "! xargs grep -hE '%[A-Za-z_0-9]+: [a-z0-9]+\\[' <'$tmp/graphs' | grep -v 'device=cuda:0' | grep -vE '%[A-Za-z_0-9]+: [a-z0-9]+\\[\\] = constant\\('"
    check "factories name cuda:0" bash -c "! xargs grep -h 'device(\"cpu\")' <'$tmp/graphs'"
    check "mlp_layer's forward is on cuda:0" grep -q "device=cuda:0" "$tmp/out.d/mlp_layer/forward.aotg"
    check "a CPU-exported .pt2 compiles for cuda:0" grep -q "device=cuda:0" "$tmp/out.d/resnet_bn_train/forward.aotg"
    # Compiled again: every graph comes from the cache (constants without data included).
    cp "$tmp/out.d/lstm_cell/forward.aotg" "$tmp/lstm_cold.aotg"
    run compile "$src/examples" -j 2 --device cuda:0 --no-svg --no-cpu-fallback --out "$tmp/out.d"
    check "a warm compile for cuda:0 hits every graph" grep -q "compile cache: $n hits, 0 misses" "$tmp/out"
    check "the hit writes the cold compile's forward graph" cmp "$tmp/lstm_cold.aotg" "$tmp/out.d/lstm_cell/forward.aotg"
    run compile "$src/examples/mlp_layer.aotg" --device gpu0
    check "a bad --device is a usage error naming it" bash -c "grep -q \"not a device: 'gpu0'\" '$tmp/err'"
    ;;
  cuda_on_demand)
    if [ ! -f "$(dirname "$exe")/libaotpipe_cuda_plugin.so" ]; then
      echo "SKIP: this build has no CUDA plugin (no libtorch_cuda found)"; exit 77
    fi
    loads_cuda() {  # COMMAND...: the command succeeds, and the loader maps libtorch_cuda while it runs
      LD_DEBUG=files LD_DEBUG_OUTPUT="$tmp/ld" "$exe" "$@" >"$tmp/ld-out" 2>&1
      local rc=$?
      grep -qE 'file=[^ ]*libtorch_cuda\.so' "$tmp"/ld.*
      local mapped=$?
      rm -f "$tmp"/ld.*
      [ $rc -eq 0 ] || { echo "exit status $rc:"; tail -5 "$tmp/ld-out"; }
      [ $rc -eq 0 ] && [ $mapped -eq 0 ]
    }
    does_not_load_cuda() { ! loads_cuda "$@"; }
    mlp=$src/examples/mlp_layer.aotg
    check "the executable does not link libtorch_cuda, libtorch or libc10_cuda" \
      bash -c "! readelf -d '$exe' | grep NEEDED | grep -qE 'libtorch_cuda|libtorch\.so|libc10_cuda'"
    # A machine with an NVIDIA GPU loads CUDA for every command (its inputs may be on the GPU).
    if [ -e /dev/nvidiactl ] || [ -n "$(ls /proc/driver/nvidia/gpus 2>/dev/null)" ]; then
      check "with a GPU, a CPU compile loads CUDA" loads_cuda compile "$mlp" --no-cache --no-svg
    else
      check "a CPU compile does not load CUDA" does_not_load_cuda compile "$mlp" --no-cache --no-svg
    fi
    AOTPIPE_LOAD_CUDA=0 check "AOTPIPE_LOAD_CUDA=0: a CPU compile does not load CUDA" \
      does_not_load_cuda compile "$mlp" --no-cache --no-svg
    check "--device cuda:0 loads CUDA" loads_cuda compile "$mlp" --no-cache --no-svg --device cuda:0
    check "--backend cuda_graphs loads CUDA" loads_cuda compile "$mlp" --no-cache --no-svg --backend cuda_graphs
    # The plugin registered the backend in the executable: its graphs compile, on CPU inputs to the interpreter.
    run compile "$mlp" --no-cache --no-svg --backend cuda_graphs
    check "--backend cuda_graphs compiles through the plugin's backend" \
      bash -c "test $(rc) -eq 0 && grep -qF \"mlp_layer: cuda_graphs: graph 'forward' runs in the interpreter\" '$tmp/out'"
    # A package for the CUDA-graph backend: package info and run load CUDA to find it.
    run compile "$src/examples/pt2/tied_lm_head.pt2" --package "$tmp/cg.aotpkg" --backend cuda_graphs
    check "a package for cuda_graphs is written" test "$(rc)" -eq 0
    check "package info of a cuda_graphs package loads CUDA and checks it" loads_cuda package info "$tmp/cg.aotpkg"
    check "run of a cuda_graphs package loads CUDA and runs it" loads_cuda run "$tmp/cg.aotpkg"
    check "cache explain --device cuda:0 loads CUDA" loads_cuda cache explain "$mlp" --device cuda:0
    # A graph file already on cuda:0, compiled with no --device: it needs CUDA's answers.
    run compile "$mlp" --device cuda:0 --no-svg --no-cache --out "$tmp/cuda.d"
    check "a graph compiled for cuda:0 is written" grep -q device=cuda:0 "$tmp/cuda.d/mlp_layer/forward.aotg"
    if [ -e /dev/nvidiactl ] || [ -n "$(ls /proc/driver/nvidia/gpus 2>/dev/null)" ]; then
      AOTPIPE_LOAD_CUDA=0 run compile "$tmp/cuda.d/mlp_layer/forward.aotg" --no-svg --no-cache
      check "AOTPIPE_LOAD_CUDA=0: a graph on cuda:0 fails naming the setting" \
        compile_failed forward.aotg unsupported "graph 'forward' is on cuda:0, and AOTPIPE_LOAD_CUDA=0 keeps CUDA out"
    else
      run compile "$tmp/cuda.d/mlp_layer/forward.aotg" --no-svg --no-cache
      check "without CUDA, a graph on cuda:0 fails naming it and the remedy" \
        compile_failed forward.aotg unsupported "graph 'forward' is on cuda:0, and this process did not load CUDA: pass --device cuda:0"
    fi
    AOTPIPE_LOAD_CUDA=1 run compile "$tmp/cuda.d/mlp_layer/forward.aotg" --no-svg --no-cache
    check "AOTPIPE_LOAD_CUDA=1: the graph on cuda:0 compiles" compile_summary_is 1 1 0
    AOTPIPE_CUDA_PLUGIN=$tmp/missing.so run compile "$mlp" --no-svg --no-cache --device cuda:0
    check "a plugin that cannot be loaded: exit status 2 and the file named" \
      bash -c "test $(rc) -eq 2 && grep -qF 'cannot load CUDA' '$tmp/err' && grep -qF '$tmp/missing.so' '$tmp/err'"
    # A plugin file of another build (its build id changed by one byte), and a library that is no
    # aotpipe plugin: refused before they are loaded, saying why.
    python3 - "$(dirname "$exe")/libaotpipe_cuda_plugin.so" "$tmp/other_build.so" <<'PY'
import sys
data = open(sys.argv[1], "rb").read()
at = data.index(b"aotpipe-cuda-plugin-build-id:") + len(b"aotpipe-cuda-plugin-build-id:")
open(sys.argv[2], "wb").write(data[:at] + (b"X" if data[at:at + 1] != b"X" else b"Y") + data[at + 1:])
PY
    AOTPIPE_CUDA_PLUGIN=$tmp/other_build.so LD_DEBUG=files LD_DEBUG_OUTPUT="$tmp/ld-other" \
      run compile "$mlp" --no-svg --no-cache --device cuda:0
    check "a plugin of another build: exit status 2, refused naming both builds" \
      bash -c "test $(rc) -eq 2 && grep -qF 'other_build.so: it is from another build of aotpipe' '$tmp/err'"
    check "a plugin of another build is never mapped (the loader's log names what it mapped)" \
      bash -c "grep -q 'file=.*libc10' $tmp/ld-other.* && ! grep -qF 'other_build.so' $tmp/ld-other.*"
    AOTPIPE_CUDA_PLUGIN=$(ldd "$exe" | awk '/libc10\.so/ { print $3; exit }') run compile "$mlp" --no-svg --no-cache --device cuda:0
    check "a library that is no aotpipe plugin is refused saying so" \
      bash -c "test $(rc) -eq 2 && grep -qF 'carries no aotpipe build id' '$tmp/err'"
    ;;
  cache)
    cache=$tmp/cache
    n=$(ls "$src"/examples/*.aotg | wc -l)
    pids=()
    for p in 1 2 3 4; do
      "$exe" compile "$src/examples" -j 1 --no-svg --cache-dir "$cache" >"$tmp/p$p.out" 2>"$tmp/p$p.err" &
      pids+=($!)
    done
    for p in 1 2 3 4; do
      wait "${pids[$((p - 1))]}"
      check "concurrent process $p exits 0" test $? -eq 0
      check "concurrent process $p warns of no unusable entry" bash -c "! grep -q unusable '$tmp/p$p.err'"
    done
    run compile "$src/examples" -j 2 --no-svg --cache-dir "$cache" --check --out "$tmp/warm"
    check "the warm run exits 0" test "$(rc)" -eq 0
    m=$(grep -cE ' ok$' "$tmp/out")
    check "the warm run hits every graph ($m)" grep -qE "compile cache: $m hits, 0 misses, 0 bypassed" "$tmp/out"
    check "the warm run warns of nothing" bash -c "! grep -q warn '$tmp/err'"
    check "hits are marked per graph" bash -c "grep -E ' ok$' '$tmp/out' | awk '{ if (\$(NF-3) != \"hit\") exit 1 }'"
    "$exe" compile "$src/examples" -j 2 --no-svg --no-cache --out "$tmp/cold" >"$tmp/cold.out" 2>&1
    check "--no-cache compiles (cache off)" grep -q "compile cache: off" "$tmp/cold.out"
    for f in forward backward joint; do
      check "hit and cold compile write identical mlp_layer/$f.aotg" cmp "$tmp/warm/mlp_layer/$f.aotg" "$tmp/cold/mlp_layer/$f.aotg"
    done
    check "hit and cold compile write identical lstm_cell metadata" cmp "$tmp/warm/lstm_cell/metadata.json" "$tmp/cold/lstm_cell/metadata.json"
    run cache stats --cache-dir "$cache"
    check "stats counts the entries" grep -qE "^entries +$m$" "$tmp/out"
    check "stats sees no temporary file left" grep -qE "^temporary files +0$" "$tmp/out"
    run cache explain "$src/examples/mlp_layer.aotg" --cache-dir "$cache"
    for ingredient in program inputs grad_mode pipeline partition_fn fw_compiler aotpipe libtorch; do
      check "explain shows the $ingredient ingredient" grep -qE "^  $ingredient " "$tmp/out"
    done
    check "explain finds the entry" bash -c "grep -E '^  entry ' '$tmp/out' | grep -vq absent"
    run cache explain "$src/examples/mlp_layer.aotg" --cache-dir "$cache" --partitioner default
    check "another partitioner is another key, not stored yet" bash -c "grep -E '^  entry ' '$tmp/out' | grep -q absent"
    run cache clear --cache-dir "$cache"
    check "clear removes every entry" grep -q "removed $m entries" "$tmp/out"
    run cache stats --cache-dir "$cache"
    check "stats after clear: 0 entries" grep -qE "^entries +0$" "$tmp/out"
    test "$n" -gt 0
    ;;
  cache_records)
    cache=$tmp/cache
    # The report's columns that do not vary from run to run: name, ops, forward and backward ops,
    # CPU fallbacks, saved bytes under both partitioners, status.
    columns() { grep -E ' ok$' "$1" | awk '{ print $1, $2, $3, $4, $(NF-4), $(NF-2), $(NF-1), $NF }'; }
    run compile "$src/examples" -j 2 --no-svg --cache-dir "$cache" --out "$tmp/cold"
    check "the cold run exits 0" test "$(rc)" -eq 0
    m=$(grep -cE ' ok$' "$tmp/out")
    cp "$tmp/out" "$tmp/cold.out"
    check "the cold run compiles every graph ($m)" grep -qE "compile cache: 0 hits, $m misses, 0 bypassed$" "$tmp/out"
    run cache stats --cache-dir "$cache"
    check "stats counts a record per graph file" grep -qE "^records +$m$" "$tmp/out"
    run compile "$src/examples" -j 2 --no-svg --cache-dir "$cache" --out "$tmp/warm"
    check "the warm run exits 0" test "$(rc)" -eq 0
    check "the warm run finds every graph by its file's record" \
      grep -qE "compile cache: $m hits, 0 misses, 0 bypassed \($m of the hits found by their file's record" "$tmp/out"
    check "the warm run warns of nothing" bash -c "! grep -q warn '$tmp/err'"
    check "its rows are the cold run's" diff <(columns "$tmp/cold.out") <(columns "$tmp/out")
    check "its --out files are the cold run's" diff -r "$tmp/cold" "$tmp/warm"
    # Bytes outside the program (a comment): no record, the entry found by key; then a record.
    cp "$src/examples/mlp_layer.aotg" "$tmp/mlp_layer.aotg"
    echo "# changed" >>"$tmp/mlp_layer.aotg"
    run compile "$tmp/mlp_layer.aotg" --no-svg --cache-dir "$cache"
    check "a file changed outside its program hits by key" grep -qE "compile cache: 1 hits, 0 misses, 0 bypassed$" "$tmp/out"
    run compile "$tmp/mlp_layer.aotg" --no-svg --cache-dir "$cache"
    check "... and by its own record the next time" grep -q "(1 of the hits found by their file's record" "$tmp/out"
    # Another graph name, the same program: the same entry, the outputs named after this graph.
    sed 's/^graph mlp_layer(/graph renamed_layer(/' "$src/examples/mlp_layer.aotg" >"$tmp/renamed_layer.aotg"
    for pass in key record; do
      run compile "$tmp/renamed_layer.aotg" --no-svg --cache-dir "$cache" --out "$tmp/renamed-$pass"
      check "a renamed graph hits ($pass)" grep -qE "compile cache: 1 hits, 0 misses" "$tmp/out"
      check "its outputs carry its name ($pass)" grep -q "^renamed_layer: joint graph" "$tmp/renamed-$pass/renamed_layer/partition.txt"
    done
    run compile "$src/examples" -j 2 --no-svg --cache-dir "$cache" --seed 7
    check "another --seed finds no record of the first" bash -c "! grep -q \"found by their file's record\" '$tmp/out'"
    check "... and compiles the graphs with random constants again" grep -qE "compile cache: [0-9]+ hits, [1-9][0-9]* misses" "$tmp/out"
    # Each option that changes the compile is in the record's digest: none finds the first run's.
    for option in "--partitioner default" "--device cuda:0" "--no-cpu-fallback" \
      "--pipeline metadata,dedupe,synthetic_base,joint,partition(default),compile"; do
      run compile "$src/examples/mlp_layer.aotg" --no-svg --cache-dir "$cache" $option
      check "$option finds no record of the first run" bash -c "! grep -q \"found by their file's record\" '$tmp/out'"
    done
    check "another partitioner is another entry too" grep -qE "compile cache: 0 hits, 1 misses, 0 bypassed$" \
      <("$exe" compile "$src/examples/mlp_layer.aotg" --no-svg --cache-dir "$tmp/other-cache" --partitioner default)
    # Damaged records: a warning each, every graph still found by its key.
    find "$cache" -name '*.record' -exec sh -c 'printf garbage >"$1"' _ {} \;
    run compile "$src/examples" -j 2 --no-svg --cache-dir "$cache"
    check "damaged records: exit 0" test "$(rc)" -eq 0
    check "damaged records are named in warnings" grep -qE "compile cache record .*\.record is unusable" "$tmp/err"
    check "damaged records: every graph hits by key" grep -qE "compile cache: $m hits, 0 misses, 0 bypassed$" "$tmp/out"
    check "damaged records: the rows are the cold run's" diff <(columns "$tmp/cold.out") <(columns "$tmp/out")
    # Records whose entries are gone: compiled again.
    find "$cache" -name '*.entry' -delete
    run compile "$src/examples" -j 2 --no-svg --cache-dir "$cache"
    check "records without entries: every graph compiled again" grep -qE "compile cache: 0 hits, $m misses, 0 bypassed$" "$tmp/out"
    check "records without entries: the rows are the cold run's" diff <(columns "$tmp/cold.out") <(columns "$tmp/out")
    run compile "$src/examples" -j 2 --no-svg --cache-dir "$cache" --check
    check "--check loads every graph (no record used) and matches eager" \
      bash -c "grep -qE 'compile cache: $m hits, 0 misses, 0 bypassed$' '$tmp/out' && test \$(cat '$tmp/rc') -eq 0"
    run cache clear --cache-dir "$cache"
    check "clear removes the records too" grep -qE "removed [0-9]+ entries and [1-9][0-9]* records" "$tmp/out"
    run cache stats --cache-dir "$cache"
    check "stats after clear: 0 records" grep -qE "^records +0$" "$tmp/out"
    ;;
  cache_kill)
    cache=$tmp/cache
    # The whole corpus on one thread, killed as soon as its first entry is published.
    "$exe" compile "$src/examples" -j 1 --no-svg --cache-dir "$cache" >"$tmp/killed.out" 2>&1 &
    pid=$!
    until [ -n "$(find "$cache" -name '*.entry' 2>/dev/null | head -1)" ] || ! kill -0 "$pid" 2>/dev/null; do :; done
    kill -KILL "$pid" 2>/dev/null
    wait "$pid"
    check "the compile was killed mid-batch" bash -c "! grep -q '^Summary' '$tmp/killed.out'"
    run compile "$src/examples" -j 2 --no-svg --cache-dir "$cache"
    check "the re-run exits 0" test "$(rc)" -eq 0
    check "the re-run warns of no unusable entry" bash -c "! grep -q unusable '$tmp/err'"
    check "the re-run loads what the killed run stored" grep -qE "compile cache: [1-9][0-9]* hits, [1-9][0-9]* misses" "$tmp/out"
    run cache stats --cache-dir "$cache"
    check "every graph has its entry now" grep -qE "^entries +$(ls "$src"/examples/*.aotg "$src"/examples/pt2/*.pt2 | wc -l)$" "$tmp/out"
    ;;
  cache_redis)
    command -v redis-server >/dev/null && command -v redis-cli >/dev/null || { echo "SKIP: no redis-server"; exit 77; }
    port=$("${AOTPIPE_PYTHON:-python3}" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --loglevel warning >/dev/null &
    redis=$!
    until redis-cli -p "$port" ping 2>/dev/null | grep -q PONG; do kill -0 "$redis" || break; done
    remote=redis://127.0.0.1:$port
    n=$(ls "$src"/examples/*.aotg | wc -l)
    run compile "$src"/examples/*.aotg -j 2 --no-svg --cache-dir "$tmp/a" --remote-cache "$remote"
    check "the first process compiles every graph" grep -q "compile cache: 0 hits, $n misses" "$tmp/out"
    run compile "$src"/examples/*.aotg -j 2 --no-svg --cache-dir "$tmp/b" --remote-cache "$remote"
    check "the second process, another local cache, hits every graph through Redis" grep -q "compile cache: $n hits, 0 misses" "$tmp/out"
    check "and warns of nothing" bash -c "! grep -q warn '$tmp/err'"
    kill "$redis"; wait "$redis"
    run compile "$src"/examples/*.aotg -j 2 --no-svg --cache-dir "$tmp/c" --remote-cache "$remote"
    check "with Redis stopped every graph still compiles" test "$(rc)" -eq 0
    check "with Redis stopped: one warning" test "$(grep -c 'remote cache is off' "$tmp/err")" -eq 1
    run compile "$src/examples/mlp_layer.aotg" --remote-cache http://x
    check "a bad --remote-cache is a usage error" bash -c "grep -q 'expected redis://HOST:PORT' '$tmp/err'"
    ;;
  *)
    echo "unknown mode $mode" >&2
    exit 2
    ;;
esac

if ((failures)); then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all checks passed"

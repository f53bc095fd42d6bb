#!/usr/bin/env bash
# Checks of the `aotpipe` command-line tool, run by CTest (label `cli`):
#   cli_test.sh examples AOTPIPE SOURCE_DIR   every example graph runs with --check-meta and reports ok
#   cli_test.sh broken   AOTPIPE SOURCE_DIR   good and broken fixtures mixed: each broken file is named
#                                             with its error, the good ones still run, exit status != 0
#   cli_test.sh show     AOTPIPE SOURCE_DIR   show prints a graph that show reads back to the same text
set -uo pipefail

mode=$1 exe=$2 src=$3
fixtures=$src/tests/cli/fixtures
failures=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

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

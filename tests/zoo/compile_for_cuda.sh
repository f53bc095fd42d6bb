#!/usr/bin/env bash
# tests/zoo/compile_for_cuda.sh AOTPIPE ZOO_DIR_FILE: every archive of the zoo, exported on the
# CPU, compiles for cuda:0 on fake tensors (no GPU needed) with no op on the CPU fallback. The only
# failures allowed are the programs PyTorch itself cannot differentiate (the manifest's
# export_backward_error: the CLI compiles a training step), and each must fail with that error,
# and the programs with data-dependent sizes (the manifest's data_dependent), whose compile is
# refused naming them (they run as exported: zoo_test).
set -uo pipefail
exe=$1
zoo=$(cat "$2")
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$exe" compile "$zoo" --device cuda:0 --no-svg --no-cache --no-cpu-fallback -j 2 >"$out" 2>&1
python3 - "$zoo/manifest.json" "$out" <<'PY'
import json, re, sys
manifest = json.load(open(sys.argv[1]))
report = open(sys.argv[2]).read()
exported = [m for m in manifest["models"] if m["status"] != "export_failed"]
refused = {m["name"]: m["export_backward_error"] for m in exported if "export_backward_error" in m}
unsupported = {m["name"] for m in exported if "data_dependent" in m}
summary = re.search(r"^\s+(\d+)\s+(\d+)\s+(\d+)\s", report.split("Summary", 1)[-1], re.M)
if not summary:
    sys.exit("no summary in the report:\n" + report[-2000:])
graphs, ok, failed = map(int, summary.groups())
problems = []
if graphs != 2 * len(exported):
    problems.append(f"{graphs} graphs compiled, the zoo has {2 * len(exported)} archives")
failures = re.findall(r"^  \S+ \((\S+)\.(train|eval)\): [^\n]*\n\s+(.*)$", report, re.M)
for name, mode, message in failures:
    if name in unsupported:
        if "the program has data-dependent sizes (u" not in message or "cannot be compiled" not in message:
            problems.append(f"{name}.{mode} failed otherwise than for its data-dependent sizes: {message}")
    elif name not in refused:
        problems.append(f"{name}.{mode} failed: {message}")
    elif "modified by an inplace operation" not in message:
        problems.append(f"{name}.{mode} failed otherwise than PyTorch: {message}")
expected_failures = 2 * (len(refused) + len(unsupported))
if failed != len(failures) or failed != expected_failures:
    problems.append(f"{failed} failed; expected {expected_failures} (the programs PyTorch cannot differentiate, "
                    "and those with data-dependent sizes)")
if problems:
    sys.exit("\n".join(problems) + "\n\n" + report[-3000:])
print(f"{ok} of {graphs} zoo archives compile for cuda:0; {2 * len(refused)} refused as PyTorch refuses them, "
      f"{2 * len(unsupported)} for their data-dependent sizes")
PY

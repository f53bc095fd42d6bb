#!/usr/bin/env python3
"""Writes the seed corpus of every fuzz target (docs/fuzzing.md) under OUT/<target>/.

    make_corpus.py --aotpipe build/tools/aotpipe --out ~/.cache/aotpipe/fuzz/seeds

From the repository: the graph files (examples/, the CLI's fixtures), pipeline texts, the small
.pt2 archives of examples/pt2 and their records (for pt2_records: a selector byte, then the
record). From the default build's CLI: the payloads of compile cache entries and file records
(artifact, file_record), written by compiling examples into a fresh cache, and a package. Every
run writes the same files for the same repository and build: the corpus is a cache, made again
when missing."""
import argparse
import pathlib
import shutil
import struct
import subprocess
import tempfile
import zipfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
MAGIC = b"AOTPCACH"
CHECKSUM_DIGITS = 32
# What `aotpipe compile --pipeline` and the stage registry read: well-formed, nested, parameters.
PIPELINES = [
    "metadata,dedupe,synthetic_base,joint,partition,compile",
    "metadata,group(dedupe,synthetic_base),joint,partition(min_cut),compile",
    "metadata, group( dedupe , group(synthetic_base) ), joint, partition(default), compile",
    "metadata,joint,partition(min_cut),compile(interpreter)",
    "group()",
    "",
]
# The records a .pt2 reader parses; pt2_records_fuzzer.cpp picks among them by the first byte,
# in name order, leaving out the tensors' bytes and those every archive writer adds.
# Larger seeds slow every mutation down (libFuzzer's max_len follows the largest seed).
MAX_SEED_BYTES = 64 * 1024
# pt2_archive's -max_len (scripts/fuzz): a bigger seed would be cut short, a broken zip.
MAX_ARCHIVE_SEED_BYTES = 16 * 1024
WRITER_ADDS = {".data/version", "byteorder", ".data/serialization_id"}


def parsed_records(archive):
    with zipfile.ZipFile(archive) as z:
        records = {}
        for name in z.namelist():
            inner = name.split("/", 1)[1]
            if inner in WRITER_ADDS or "/weights/weight_" in inner:
                continue
            records[inner] = z.read(name)
    return [records[name] for name in sorted(records)]


def payload(framed):
    """The payload of a cache file: the magic, u32 version, u32 key length, the key, u64 payload
    length, the checksum's hex digits, then the payload (cache/compile_cache.cpp)."""
    assert framed.startswith(MAGIC), "not a cache entry"
    at = len(MAGIC) + 4
    (key_length,) = struct.unpack_from("<I", framed, at)
    at += 4 + key_length
    (length,) = struct.unpack_from("<Q", framed, at)
    at += 8 + CHECKSUM_DIGITS
    assert len(framed) - at == length, "truncated cache entry"
    return framed[at:]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--aotpipe", required=True, help="the default build's CLI")
    parser.add_argument("--out", required=True, type=pathlib.Path)
    args = parser.parse_args()
    out = args.out
    if out.exists():
        shutil.rmtree(out)

    def put(target, name, data):
        folder = out / target
        folder.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)

    for path in sorted(ROOT.glob("examples/*.aotg")) + sorted((ROOT / "tests/cli/fixtures").rglob("*.aotg")):
        put("graph_text", f"{path.parent.name}-{path.name}", path.read_bytes())
    for i, text in enumerate(PIPELINES):
        put("pipeline_text", f"pipeline-{i}", text.encode())
    archives = [p for p in sorted(ROOT.glob("examples/pt2/*.pt2")) if p.stat().st_size <= MAX_SEED_BYTES]
    for path in archives:
        if path.stat().st_size <= MAX_ARCHIVE_SEED_BYTES:
            put("pt2_archive", path.name, path.read_bytes())
    seed_archive = ROOT / "examples/pt2/dynamic_mlp.pt2"
    for i, record in enumerate(parsed_records(seed_archive)):
        put("pt2_records", f"record-{i}", bytes([i]) + record)

    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        graphs = [str(ROOT / "examples" / name) for name in ("mlp_layer.aotg", "qkv_unbind_views.aotg", "flatten_output_view.aotg")]
        graphs += [str(p) for p in archives[:4]]
        subprocess.run([args.aotpipe, "compile", *graphs, "--cache-dir", str(tmp / "cache"), "--no-svg"],
                       check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for path in sorted((tmp / "cache").rglob("*")):
            if path.suffix == ".entry" and path.stat().st_size <= MAX_SEED_BYTES:
                put("artifact", path.stem, payload(path.read_bytes()))
            elif path.suffix == ".record":
                put("file_record", path.stem, payload(path.read_bytes()))
        package = tmp / "dynamic_mlp.aotpkg"
        subprocess.run([args.aotpipe, "compile", str(seed_archive), "--package", str(package), "--no-cache"],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        put("package", package.name, package.read_bytes())
    for target in sorted(p.name for p in out.iterdir()):
        files = list((out / target).iterdir())
        print(f"{target}: {len(files)} seeds, {sum(f.stat().st_size for f in files)} bytes")


if __name__ == "__main__":
    main()

#pragma once
// Reads a torch.save zip (one pickled value and its tensors' storages) from untrusted bytes: the
// sample inputs of a .pt2 archive. libtorch's own reader (torch::jit::pickle_load) trusts what
// the bytes claim: its in-memory zip reader copies past their end when the zip's directory says
// there is more, its unpickler allocates a string as long as a length prefix says before reading
// it, and a storage gets the size its pickle names whatever its record holds. Each was found by
// the pt2 fuzzers (tests/fuzz, docs/fuzzing.md). This reader checks the claims first and hands
// torch's unpickler only bytes that keep them.
#include <ATen/core/ivalue.h>
#include <c10/core/Allocator.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace aotpipe::pt2 {

// Whether a zip entry claiming `claimed` uncompressed bytes can be real in a zip of `zip_bytes`:
// deflate expands at most 1032:1, and a stored entry lies inside the zip (which miniz checks).
// torch's readers allocate the claim before extracting, so every reader of untrusted zips asks
// this first.
inline bool zip_claim_fits(std::size_t claimed, std::size_t zip_bytes) { return claimed / 1032 <= zip_bytes; }

// Reads `n` bytes of a zip at `offset` into `out`; false when they are not all there.
using ZipReadAt = std::function<bool(std::uint64_t offset, std::size_t n, unsigned char* out)>;

// The first entry of a zip's central directory whose claimed uncompressed size does not fit
// (zip_claim_fits), described as "record 'NAME' claims N bytes"; nullopt when every claim fits
// or the directory cannot be found (the zip reader then says what is wrong). Asked before torch's
// zip reader is built: its constructor extracts the version record at the size that record
// claims, before any caller could check it.
std::optional<std::string> zip_overclaim(std::uint64_t zip_bytes, const ZipReadAt& read_at);

// The value torch.save wrote into `bytes`; throws std::runtime_error (or c10::Error from torch)
// naming what is wrong: a record bigger than the bytes could expand to, a pickle opcode this
// reader does not know or whose length runs past the pickle, a tensor reaching past its storage.
c10::IValue load_torch_save(const at::DataPtr& bytes, std::size_t size);

}  // namespace aotpipe::pt2

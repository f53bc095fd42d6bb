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

namespace aotpipe::pt2 {

// Whether a zip entry claiming `claimed` uncompressed bytes can be real in a zip of `zip_bytes`:
// deflate expands at most 1032:1, and a stored entry lies inside the zip (which miniz checks).
// torch's readers allocate the claim before extracting, so every reader of untrusted zips asks
// this first.
inline bool zip_claim_fits(std::size_t claimed, std::size_t zip_bytes) { return claimed / 1032 <= zip_bytes; }

// The value torch.save wrote into `bytes`; throws std::runtime_error (or c10::Error from torch)
// naming what is wrong: a record bigger than the bytes could expand to, a pickle opcode this
// reader does not know or whose length runs past the pickle, a tensor reaching past its storage.
c10::IValue load_torch_save(const at::DataPtr& bytes, std::size_t size);

}  // namespace aotpipe::pt2

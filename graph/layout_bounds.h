#pragma once
// The bounds a tensor layout read from a file must keep before anything computes with it: every
// size, stride and the storage offset non-negative, and the element count, the contiguous
// strides, the extent (offset + the furthest element) and its bytes within int64. A reader of
// untrusted metadata (graph text, .pt2 archives, cache entries, packages) checks these and names
// the value; after that, numel(), nbytes() and contiguous_strides() cannot overflow.
#include <aotpipe/graph/tensor_meta.h>

#include <optional>
#include <string>

namespace aotpipe {

// What is wrong with these sizes ("size -1 of dimension 0 is negative", "sizes [...] hold more
// than 2^63 elements"), or nullopt.
std::optional<std::string> sizes_error(c10::IntArrayRef sizes);
// The same for the whole layout: sizes, strides (as many as sizes), storage offset, and the
// extent in bytes of the dtype.
std::optional<std::string> layout_error(const TensorMeta& meta);

// Elements of storage the layout reaches (the storage offset, plus the furthest element, plus
// one), 0 for an empty tensor: the storage a view needs. For a layout layout_error accepts.
int64_t storage_extent(const TensorMeta& meta);

}  // namespace aotpipe

// Dedupe's runtime half (its plan's post-compile wrapper, the duplicate-pattern guard and the
// plan's codec): what a stored artifact made callable links, the stage's analysis apart.
#include <aotpipe/stages/dedupe/dedupe.h>

#include <aotpipe/graph/byte_codec.h>

#include <fmt/format.h>

#include <stdexcept>
#include <unordered_map>

namespace aotpipe {

TensorList DedupeInfo::remove_dupe_args(TensorList args) const {
  TensorList kept;
  kept.reserve(args.size());
  for (std::size_t i = 0; i < args.size(); ++i)
    if (keep_arg_mask[i]) kept.push_back(std::move(args[i]));
  return kept;
}

TensorList DedupeInfo::add_dupe_args(const TensorList& args) const {
  TensorList full;
  full.reserve(add_dupe_map.size());
  for (std::size_t i : add_dupe_map) full.push_back(args[i]);
  return full;
}

std::vector<std::size_t> duplicate_pattern(const TensorList& args) {
  std::vector<std::size_t> first(args.size());
  std::unordered_map<const c10::TensorImpl*, std::size_t> seen;
  for (std::size_t i = 0; i < args.size(); ++i) {
    // Undefined tensors are never duplicates of each other (they carry no data).
    if (!args[i].defined()) {
      first[i] = i;
      continue;
    }
    first[i] = seen.emplace(args[i].unsafeGetTensorImpl(), i).first->second;
  }
  return first;
}

void check_duplicate_pattern(const DedupeInfo& info, const TensorList& args) {
  if (args.size() != info.first_occurrence.size())
    throw std::invalid_argument(fmt::format("aotpipe dedupe: the graph was compiled for {} inputs, called with {}",
                                            info.first_occurrence.size(), args.size()));
  const auto actual = duplicate_pattern(args);
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::size_t expected = info.first_occurrence[i];
    if (actual[i] == expected) continue;
    if (expected != i)
      throw std::invalid_argument(fmt::format(
          "aotpipe dedupe: input {} was compiled as a duplicate of input {} (the same tensor passed twice), but "
          "this call passes a different tensor; recompile for distinct inputs",
          i, expected));
    throw std::invalid_argument(
        fmt::format("aotpipe dedupe: input {} is the same tensor as input {}, but the graph was compiled for distinct "
                    "inputs; recompile for duplicated inputs",
                    i, actual[i]));
  }
}

RuntimeFn dedupe_post_compile(DedupeInfo info, RuntimeFn compiled) {
  return [info = std::move(info), compiled = std::move(compiled)](TensorList args) {
    check_duplicate_pattern(info, args);
    if (!info.specialized) return compiled(std::move(args));
    return compiled(info.remove_dupe_args(std::move(args)));
  };
}

void WrapperTraits<DedupeInfo>::encode(ByteWriter& out, const DedupeInfo& info) {
  out.boolean(info.specialized);
  out.list(info.keep_arg_mask, [&](bool keep) { out.boolean(keep); });
  out.u64s(info.add_dupe_map);
  out.u64s(info.first_occurrence);
}

DedupeInfo WrapperTraits<DedupeInfo>::decode(ByteReader& in) {
  DedupeInfo info;
  info.specialized = in.boolean("dedupe specialized");
  info.keep_arg_mask = in.list("dedupe keep_arg_mask", [&] { return in.boolean("dedupe keep_arg_mask"); });
  info.add_dupe_map = in.u64s("dedupe add_dupe_map");
  info.first_occurrence = in.u64s("dedupe first_occurrence");
  const std::size_t n = info.first_occurrence.size();
  if (info.keep_arg_mask.size() != n || info.add_dupe_map.size() != n)
    ByteReader::fail("dedupe plan", "lists of inconsistent lengths");
  std::size_t kept = 0;
  for (bool keep : info.keep_arg_mask) kept += keep ? 1 : 0;
  for (std::size_t i = 0; i < n; ++i)
    if (info.first_occurrence[i] > i || info.add_dupe_map[i] >= (info.specialized ? kept : n))
      ByteReader::fail("dedupe plan", "an index out of range");
  return info;
}

}  // namespace aotpipe

#include <aotpipe/stages/common/plan_codec.h>

#include <aotpipe/graph/byte_codec.h>
#include <aotpipe/stages/dedupe/dedupe.h>
#include <aotpipe/stages/synthetic_base/synthetic_base.h>

#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <utility>
#include <variant>

namespace aotpipe {
namespace {

template <std::size_t... I>
consteval bool distinct_tags(std::index_sequence<I...>) {
  const std::uint64_t tags[] = {WrapperTraits<std::variant_alternative_t<I, RuntimePlan>>::codec_tag...};
  for (std::size_t a = 0; a < sizeof...(I); ++a)
    for (std::size_t b = a + 1; b < sizeof...(I); ++b)
      if (tags[a] == tags[b]) return false;
  return true;
}
static_assert(distinct_tags(std::make_index_sequence<std::variant_size_v<RuntimePlan>>{}),
              "two runtime plan kinds share a codec tag");

template <std::size_t... I>
std::optional<RuntimePlan> decode_tagged(std::uint64_t tag, ByteReader& in, std::index_sequence<I...>) {
  std::optional<RuntimePlan> plan;
  auto try_kind = [&]<std::size_t K>(std::integral_constant<std::size_t, K>) {
    using Traits = WrapperTraits<std::variant_alternative_t<K, RuntimePlan>>;
    if (Traits::codec_tag != tag) return false;
    plan.emplace(std::in_place_index<K>, Traits::decode(in));
    return true;
  };
  (try_kind(std::integral_constant<std::size_t, I>{}) || ...);
  return plan;
}

}  // namespace

void encode_runtime_plan(ByteWriter& out, const RuntimePlan& plan) {
  std::visit(
      [&]<class Plan>(const Plan& kind) {
        out.u64(WrapperTraits<Plan>::codec_tag);
        WrapperTraits<Plan>::encode(out, kind);
      },
      plan);
}

void encode_input_alias_info(ByteWriter& out, const InputAliasInfo& info) {
  const bool flags[] = {info.is_leaf,
                        info.mutates_data,
                        info.mutates_metadata,
                        info.mutations_hidden_from_autograd,
                        info.mutations_under_no_grad_or_inference_mode,
                        info.mutates_storage_metadata,
                        info.requires_grad,
                        info.keep_input_mutations};
  std::uint64_t bits = 0;
  for (std::size_t i = 0; i < std::size(flags); ++i) bits |= static_cast<std::uint64_t>(flags[i]) << i;
  out.u64(bits);
}

InputAliasInfo decode_input_alias_info(ByteReader& in) {
  const std::uint64_t bits = in.u64("input alias flags");
  if (bits >= (1u << 8)) ByteReader::fail("input alias flags", "more than 8 flags");
  auto flag = [bits](int i) { return ((bits >> i) & 1) != 0; };
  InputAliasInfo info;
  info.is_leaf = flag(0);
  info.mutates_data = flag(1);
  info.mutates_metadata = flag(2);
  info.mutations_hidden_from_autograd = flag(3);
  info.mutations_under_no_grad_or_inference_mode = flag(4);
  info.mutates_storage_metadata = flag(5);
  info.requires_grad = flag(6);
  info.keep_input_mutations = flag(7);
  return info;
}

RuntimePlan decode_runtime_plan(ByteReader& in) {
  const std::uint64_t tag = in.u64("runtime plan kind");
  std::optional<RuntimePlan> plan =
      decode_tagged(tag, in, std::make_index_sequence<std::variant_size_v<RuntimePlan>>{});
  if (!plan) throw std::invalid_argument(fmt::format("unknown runtime plan {}", tag));
  return std::move(*plan);
}

}  // namespace aotpipe

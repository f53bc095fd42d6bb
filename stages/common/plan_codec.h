#pragma once
// The stages' records in a compiled artifact's header (graph/byte_codec.h): the runtime plans
// and the input metadata they and the artifact carry. Each plan kind's tag and codec are declared
// beside the plan, in its WrapperTraits (wrapper_stage.h); encode_runtime_plan and
// decode_runtime_plan dispatch over RuntimePlan's kinds, so a new kind needs no change here.
#include <aotpipe/stages/common/runtime_plans.h>
#include <aotpipe/stages/metadata/view_and_mutation_meta.h>

namespace aotpipe {

class ByteWriter;
class ByteReader;

void encode_runtime_plan(ByteWriter& out, const RuntimePlan& plan);
// Throws (ByteFormatError, std::invalid_argument) when the bytes are not a plan of a known kind.
RuntimePlan decode_runtime_plan(ByteReader& in);

// An InputAliasInfo: its eight flags, one bit each. Throws ByteFormatError when malformed.
void encode_input_alias_info(ByteWriter& out, const InputAliasInfo& info);
InputAliasInfo decode_input_alias_info(ByteReader& in);

}  // namespace aotpipe

#pragma once
// The serialized Graph of a torch.export program -> aotpipe's IR, for one set of symbol values.
#include <aotpipe/export/internal/serde.h>
#include <aotpipe/graph/graph.h>

#include <string>
#include <string_view>

namespace aotpipe::pt2 {

// Builds the graph of `graph_json` (models/model.json's graph_module.graph) with its symbolic
// sizes evaluated under `symbols`: inputs and values keep the export's names and carry their
// TensorMeta; each call node is the exact overload the export recorded, its arguments matched
// by name against the c10 schema with the omitted ones at their defaults. Symbolic integer
// nodes (aten::sym_size.int, operator.mul, ...) are evaluated here, so the graph has none;
// a Python number passed for a Tensor parameter becomes a wrapped-number tensor constant, as
// Python's argument parser makes it; `_assert_tensor_metadata` nodes are dropped (the tracer
// checks metadata itself, and `--device` would make their device argument wrong); grad-mode
// regions (`with torch.no_grad():`) are inlined with their inputs detached.
// Throws Pt2Error naming `where`, the node and the argument.
Graph import_graph(const Json& graph_json, std::string graph_name, const SymbolValues& symbols, std::string_view where);

}  // namespace aotpipe::pt2

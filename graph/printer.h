#pragma once
// The readable text form of a Graph (docs/ir.md). parse_graph (parser.h) reads it back:
// print(parse(print(g))) == print(g).
#include <ATen/core/ivalue.h>
#include <ATen/core/jit_type_base.h>

#include <string>

namespace aotpipe {

class Graph;
class Node;
class Value;

std::string print_graph(const Graph& graph);
// The text form with the names normalized: the graph is called `g` and its values v0, v1, ... in
// the order they are defined (inputs first). Graphs that differ only in names print the same;
// the compile cache keys on it. Equals print_graph of a copy renamed that way, without the copy.
std::string print_graph_canonical(const Graph& graph);
// One node as its line of the text form, without indentation or newline.
std::string print_node(const Node& node);
// A constant argument as the text form writes it for a schema argument of type `type`
// (dtypes as torch.float32, devices as device("cuda:0"), floats always with a '.' or exponent).
std::string format_constant(const c10::IValue& value, const c10::TypePtr& type);
// `%x: f32[2, 3]`
std::string format_value_decl(const Value& value);

}  // namespace aotpipe

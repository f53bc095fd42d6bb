#pragma once
// The value encodings of torch.export's serialized schema (torch/_export/serde/schema.py,
// version 8.17) and their c10 counterparts. The JSON is read with nlohmann::json directly rather
// than torch's generated_serialization_types.h: its parser leaves a union's tag uninitialised for
// a key it does not know (a newer schema, a corrupt file), where we must say which key at which
// node is unknown.
#include <aotpipe/graph/checked_json.h>
#include <aotpipe/graph/tensor_meta.h>

#include <c10/core/Device.h>
#include <c10/core/Layout.h>
#include <c10/core/MemoryFormat.h>
#include <c10/core/ScalarType.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace aotpipe::pt2 {

using Json = CheckedJson;  // numbers read exactly or refused (graph/checked_json.h)

// Values of the export's symbols ("s77" -> 16) for one specialization.
using SymbolValues = std::map<std::string, int64_t, std::less<>>;

// A value the schema allows but this reader cannot give a meaning to (thrown with what and why;
// callers add where).
class SerdeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The schema's enums use their own numbering (ScalarType.FLOAT = 7 where c10's Float = 6).
c10::ScalarType dtype_from_serde(int64_t serde);
c10::Layout layout_from_serde(int64_t serde);
c10::MemoryFormat memory_format_from_serde(int64_t serde);
c10::Device device_from_serde(const Json& device);  // {"type": "cuda", "index": 0}

// Evaluates a sympy srepr expression ("Symbol('s77', positive=True, integer=True)",
// "Mul(Integer(2), Symbol('s0', ...))") with the given symbol values. Throws SerdeError for an
// unbound symbol or an unsupported function.
int64_t evaluate_sym_expr(std::string_view srepr, const SymbolValues& symbols);
// The symbols an srepr expression mentions.
std::vector<std::string> symbols_of(std::string_view srepr);
// A bare symbol ("Symbol('s77', ...)") -> "s77"; anything else -> nullopt.
std::optional<std::string> as_bare_symbol(std::string_view srepr);

// Whether `symbol` is data-dependent: torch.export names the sizes it reads from tensor values
// (nonzero's, item()'s) u0, u1, ... ("unbacked"), the input sizes it can bind s0, s1, ...
bool is_unbacked_symbol(std::string_view symbol);
// The data-dependent symbols a SymInt ({"as_int": 3} or {"as_expr": ...}) mentions, in order.
std::vector<std::string> unbacked_symbols_of(const Json& sym_int);
// The data-dependent symbols a serialized TensorMeta's sizes, strides or offset mention, in order.
std::vector<std::string> unbacked_symbols_of_meta(const Json& meta);

// A SymInt ({"as_int": 3} or {"as_expr": {"expr_str": ..., "hint": ...}}) under `symbols`.
int64_t sym_int_value(const Json& sym_int, const SymbolValues& symbols);

// A serialized TensorMeta with its symbolic sizes evaluated under `symbols`.
TensorMeta tensor_meta_from_serde(const Json& meta, const SymbolValues& symbols);

// The single key of a union object ({"as_tensor": {...}} -> "as_tensor"); throws SerdeError for
// an object with none or several.
const std::string& union_key(const Json& object);

}  // namespace aotpipe::pt2

#include <aotpipe/export/internal/serde.h>

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <limits>
#include <vector>

namespace aotpipe::pt2 {

c10::ScalarType dtype_from_serde(int64_t serde) {
  using S = c10::ScalarType;
  switch (serde) {
    case 1: return S::Byte;
    case 2: return S::Char;
    case 3: return S::Short;
    case 4: return S::Int;
    case 5: return S::Long;
    case 6: return S::Half;
    case 7: return S::Float;
    case 8: return S::Double;
    case 9: return S::ComplexHalf;
    case 10: return S::ComplexFloat;
    case 11: return S::ComplexDouble;
    case 12: return S::Bool;
    case 13: return S::BFloat16;
    case 28: return S::UInt16;
    case 29: return S::Float8_e4m3fn;
    case 30: return S::Float8_e5m2;
    case 31: return S::Float8_e4m3fnuz;
    case 32: return S::Float8_e5m2fnuz;
    default: throw SerdeError(fmt::format("unknown dtype {} (the schema's ScalarType numbering)", serde));
  }
}

c10::Layout layout_from_serde(int64_t serde) {
  switch (serde) {
    case 1: return c10::kSparse;
    case 2: return c10::kSparseCsr;
    case 3: return c10::kSparseCsc;
    case 4: return c10::kSparseBsr;
    case 5: return c10::kSparseBsc;
    case 6: return c10::kMkldnn;
    case 7: return c10::kStrided;
    default: throw SerdeError(fmt::format("unknown layout {} (the schema's Layout numbering)", serde));
  }
}

c10::MemoryFormat memory_format_from_serde(int64_t serde) {
  switch (serde) {
    case 1: return c10::MemoryFormat::Contiguous;
    case 2: return c10::MemoryFormat::ChannelsLast;
    case 3: return c10::MemoryFormat::ChannelsLast3d;
    case 4: return c10::MemoryFormat::Preserve;
    default: throw SerdeError(fmt::format("unknown memory format {} (the schema's MemoryFormat numbering)", serde));
  }
}

c10::Device device_from_serde(const Json& device) {
  const std::string type = device.at("type").get<std::string>();
  std::string text = type;
  if (device.contains("index") && !device.at("index").is_null())
    text += ":" + std::to_string(device.at("index").get<int64_t>());
  try {
    return c10::Device(text);
  } catch (const std::exception&) { throw SerdeError(fmt::format("unknown device '{}'", text)); }
}

// ---- sympy srepr expressions ----------------------------------------------------------------

namespace {

// A tiny recursive-descent reader of srepr: Name(arg, ..., key=value), 'strings', integers.
class SreprEvaluator {
 public:
  SreprEvaluator(std::string_view text, const SymbolValues* symbols, std::vector<std::string>* seen)
      : text_(text), symbols_(symbols), seen_(seen) {}

  int64_t run() {
    int64_t v = expression();
    skip_space();
    if (pos_ != text_.size()) fail("trailing text");
    return v;
  }

 private:
  [[noreturn]] void fail(std::string_view what) const {
    throw SerdeError(fmt::format("cannot evaluate symbolic expression '{}': {} at offset {}", text_, what, pos_));
  }
  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool eat(char c) {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!eat(c)) fail(fmt::format("expected '{}'", c));
  }
  std::string identifier() {
    skip_space();
    const std::size_t start = pos_;
    while (pos_ < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_')) ++pos_;
    if (start == pos_) fail("expected a name");
    return std::string(text_.substr(start, pos_ - start));
  }
  std::string quoted() {
    skip_space();
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"')) fail("expected a quoted name");
    const char q = text_[pos_++];
    const std::size_t start = pos_;
    while (pos_ < text_.size() && text_[pos_] != q) ++pos_;
    if (pos_ >= text_.size()) fail("unterminated string");
    return std::string(text_.substr(start, pos_++ - start));
  }
  int64_t integer_literal() {
    skip_space();
    const std::size_t start = pos_;
    if (pos_ < text_.size() && text_[pos_] == '-') ++pos_;
    while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) ++pos_;
    if (start == pos_) fail("expected an integer");
    return std::stoll(std::string(text_.substr(start, pos_ - start)));
  }
  // Skips `key=value` keyword arguments (Symbol's assumptions).
  void skip_keywords() {
    while (eat(',')) {
      identifier();
      expect('=');
      skip_space();
      while (pos_ < text_.size() && text_[pos_] != ',' && text_[pos_] != ')') ++pos_;
    }
  }
  int64_t floor_div(int64_t n, int64_t d) const {
    if (d == 0) fail("division by zero");
    int64_t q = n / d;
    if (n % d != 0 && ((n < 0) != (d < 0))) --q;
    return q;
  }
  std::vector<int64_t> operands() {
    std::vector<int64_t> values{expression()};
    while (eat(',')) values.push_back(expression());
    expect(')');
    return values;
  }
  int64_t expression() {
    skip_space();
    if (pos_ < text_.size() && (std::isdigit(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '-'))
      return integer_literal();
    const std::string fn = identifier();
    expect('(');
    if (fn == "Symbol") {
      const std::string name = quoted();
      skip_keywords();
      expect(')');
      if (seen_) seen_->push_back(name);
      if (!symbols_) return 0;
      auto it = symbols_->find(name);
      if (it == symbols_->end()) fail(fmt::format("symbol {} has no value", name));
      return it->second;
    }
    if (fn == "Integer") {
      const int64_t v = integer_literal();
      expect(')');
      return v;
    }
    const std::vector<int64_t> a = operands();
    auto need = [&](std::size_t n) {
      if (a.size() != n) fail(fmt::format("{} takes {} operands", fn, n));
    };
    if (fn == "Add") {
      int64_t s = 0;
      for (int64_t v : a) s += v;
      return s;
    }
    if (fn == "Mul") {
      int64_t p = 1;
      for (int64_t v : a) p *= v;
      return p;
    }
    if (fn == "Max" || fn == "Min") {
      int64_t r = a.at(0);
      for (int64_t v : a) r = fn == "Max" ? std::max(r, v) : std::min(r, v);
      return r;
    }
    if (fn == "FloorDiv" || fn == "CleanDiv" || fn == "IntTrueDiv") {
      need(2);
      return floor_div(a[0], a[1]);
    }
    if (fn == "CeilDiv") {
      need(2);
      return -floor_div(-a[0], a[1]);
    }
    if (fn == "Mod" || fn == "PythonMod") {
      need(2);
      if (a[1] == 0) fail("modulo by zero");
      int64_t r = a[0] % a[1];
      if (r != 0 && ((r < 0) != (a[1] < 0))) r += a[1];
      return r;
    }
    if (fn == "Pow" || fn == "PowByNatural") {
      need(2);
      if (a[1] < 0) fail("negative exponent");
      int64_t r = 1;
      for (int64_t i = 0; i < a[1]; ++i) r *= a[0];
      return r;
    }
    fail(fmt::format("unsupported function {}", fn));
  }

  std::string_view text_;
  const SymbolValues* symbols_;
  std::vector<std::string>* seen_;
  std::size_t pos_ = 0;
};

}  // namespace

int64_t evaluate_sym_expr(std::string_view srepr, const SymbolValues& symbols) {
  return SreprEvaluator(srepr, &symbols, nullptr).run();
}

std::vector<std::string> symbols_of(std::string_view srepr) {
  std::vector<std::string> seen;
  SreprEvaluator(srepr, nullptr, &seen).run();
  return seen;
}

std::optional<std::string> as_bare_symbol(std::string_view srepr) {
  const std::size_t start = srepr.find_first_not_of(' ');
  if (start == std::string_view::npos || srepr.substr(start, 7) != "Symbol(") return std::nullopt;
  std::vector<std::string> seen = symbols_of(srepr);
  if (seen.size() != 1) return std::nullopt;
  return seen.front();
}

bool is_unbacked_symbol(std::string_view symbol) {
  return symbol.size() > 1 && symbol.front() == 'u' && std::all_of(symbol.begin() + 1, symbol.end(), [](char c) {
           return std::isdigit(static_cast<unsigned char>(c));
         });
}

std::vector<std::string> unbacked_symbols_of(const Json& sym_int) {
  std::vector<std::string> found;
  if (!sym_int.is_object() || !sym_int.contains("as_expr")) return found;
  for (std::string& symbol : symbols_of(sym_int.at("as_expr").at("expr_str").get<std::string>()))
    if (is_unbacked_symbol(symbol) && std::find(found.begin(), found.end(), symbol) == found.end())
      found.push_back(std::move(symbol));
  return found;
}

std::vector<std::string> unbacked_symbols_of_meta(const Json& meta) {
  std::vector<std::string> found;
  auto scan = [&](const Json& sym_int) {
    for (std::string& symbol : unbacked_symbols_of(sym_int))
      if (std::find(found.begin(), found.end(), symbol) == found.end()) found.push_back(std::move(symbol));
  };
  for (const Json& s : meta.at("sizes")) scan(s);
  for (const Json& s : meta.at("strides")) scan(s);
  scan(meta.at("storage_offset"));
  return found;
}

int64_t sym_int_value(const Json& sym_int, const SymbolValues& symbols) {
  const std::string& key = union_key(sym_int);
  if (key == "as_int") return sym_int.at("as_int").get<int64_t>();
  if (key == "as_expr") return evaluate_sym_expr(sym_int.at("as_expr").at("expr_str").get<std::string>(), symbols);
  throw SerdeError(fmt::format("unknown SymInt kind '{}'", key));
}

TensorMeta tensor_meta_from_serde(const Json& meta, const SymbolValues& symbols) {
  TensorMeta out;
  out.dtype = dtype_from_serde(meta.at("dtype").get<int64_t>());
  const int64_t layout = meta.at("layout").get<int64_t>();
  if (layout_from_serde(layout) != c10::kStrided)
    throw SerdeError(fmt::format("layout {} is not strided; only strided tensors are supported", layout));
  for (const Json& s : meta.at("sizes")) out.sizes.push_back(sym_int_value(s, symbols));
  for (const Json& s : meta.at("strides")) out.strides.push_back(sym_int_value(s, symbols));
  out.storage_offset = sym_int_value(meta.at("storage_offset"), symbols);
  out.device = device_from_serde(meta.at("device"));
  out.requires_grad = meta.value("requires_grad", false);
  return out;
}

const std::string& union_key(const Json& object) {
  if (!object.is_object() || object.size() != 1)
    throw SerdeError(fmt::format("expected an object with one key, got {}", object.dump().substr(0, 120)));
  return object.begin().key();
}

}  // namespace aotpipe::pt2

#include <aotpipe/graph/layout_bounds.h>
#include <aotpipe/graph/parser.h>
#include <aotpipe/graph/text_format.h>

#include <fmt/format.h>

#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <memory>

namespace aotpipe {

ParseError::ParseError(std::size_t line, std::size_t column, const std::string& message)
    : std::runtime_error(fmt::format("line {}, column {}: {}", line, column, message)),
      line_(line),
      column_(column),
      message_(message) {}

namespace {

enum class Tok { End, Ident, ValueRef, Int, Float, String, Punct };

struct Token {
  Tok kind = Tok::End;
  std::string text;  // identifier / value name (without %) / string contents / punctuation
  int64_t int_value = 0;
  double float_value = 0;
  std::size_t line = 1, column = 1;
};

std::string describe(const Token& t) {
  switch (t.kind) {
    case Tok::End: return "end of input";
    case Tok::Ident: return fmt::format("'{}'", t.text);
    case Tok::ValueRef: return fmt::format("'%{}'", t.text);
    case Tok::Int: return fmt::format("number {}", t.int_value);
    case Tok::Float: return "a floating-point number";
    case Tok::String: return "a string";
    case Tok::Punct: return fmt::format("'{}'", t.text);
  }
  return "?";
}

class Lexer {
 public:
  explicit Lexer(std::string_view text) : text_(text) {}

  Token next() {
    skip_space_and_comments();
    Token t;
    t.line = line_;
    t.column = column_;
    if (pos_ >= text_.size()) return t;
    char c = text_[pos_];
    if (c == '%') {
      advance();
      t.kind = Tok::ValueRef;
      std::size_t end = pos_;
      while (end < text_.size() && is_ident_char(text_[end])) ++end;
      take_line_free(t, end);
      if (t.text.empty()) fail(t, "expected a value name after '%'");
      return t;
    }
    if (is_ident_start(c)) {
      t.kind = Tok::Ident;
      // Identifiers may contain '.' and '::' (aten::mul.Tensor, torch.float32).
      std::size_t end = pos_;
      while (end < text_.size()) {
        if (is_ident_char(text_[end])) {
          ++end;
        } else if (text_.substr(end, 2) == "::" && end + 2 < text_.size() && is_ident_start(text_[end + 2])) {
          end += 2;
        } else {
          break;
        }
      }
      take_line_free(t, end);
      if (t.text == "inf" || t.text == "nan") {
        t.kind = Tok::Float;
        t.float_value =
            t.text == "inf" ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
      }
      return t;
    }
    if (is_digit(c) ||
        (c == '-' && pos_ + 1 < text_.size() && (is_digit(text_[pos_ + 1]) || text_.substr(pos_ + 1, 3) == "inf"))) {
      return number(t);
    }
    if (c == '"') return string(t);
    if (std::string_view("()[]{},:=").find(c) != std::string_view::npos) {
      t.kind = Tok::Punct;
      t.text = advance();
      return t;
    }
    fail(t, fmt::format("unexpected character '{}'", printable(c)));
  }

  [[noreturn]] static void fail(const Token& at, const std::string& message) {
    throw ParseError(at.line, at.column, message);
  }

 private:
  static std::string printable(char c) {
    if (std::isprint(static_cast<unsigned char>(c))) return std::string(1, c);
    return fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
  }

  // The token's text is text_[pos_, end), which holds no newline: one copy, one column update.
  void take_line_free(Token& t, std::size_t end) {
    t.text.assign(text_.data() + pos_, end - pos_);
    column_ += end - pos_;
    pos_ = end;
  }

  char advance() {
    char c = text_[pos_++];
    if (c == '\n') {
      ++line_;
      column_ = 1;
    } else {
      ++column_;
    }
    return c;
  }

  void skip_space_and_comments() {
    while (pos_ < text_.size()) {
      char c = text_[pos_];
      if (is_space(c)) {
        advance();
      } else if (c == '#') {
        while (pos_ < text_.size() && text_[pos_] != '\n') advance();
      } else {
        break;
      }
    }
  }

  Token number(Token& t) {
    std::size_t start = pos_;
    if (text_[pos_] == '-') advance();
    if (text_.substr(pos_, 3) == "inf") {
      for (int i = 0; i < 3; ++i) advance();
      t.kind = Tok::Float;
      t.float_value = -std::numeric_limits<double>::infinity();
      return t;
    }
    bool is_float = false;
    auto digits = [&] {
      while (pos_ < text_.size() && is_digit(text_[pos_])) advance();
    };
    digits();
    if (pos_ < text_.size() && text_[pos_] == '.') {
      is_float = true;
      advance();
      digits();
    }
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      is_float = true;
      advance();
      if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) advance();
      std::size_t exp_start = pos_;
      digits();
      if (pos_ == exp_start) fail(t, "malformed number: exponent has no digits");
    }
    std::string_view literal = text_.substr(start, pos_ - start);
    if (is_float) {
      t.kind = Tok::Float;
      auto [ptr, ec] = std::from_chars(literal.data(), literal.data() + literal.size(), t.float_value);
      if (ec != std::errc() || ptr != literal.data() + literal.size())
        fail(t, fmt::format("malformed number '{}'", literal));
    } else {
      t.kind = Tok::Int;
      auto [ptr, ec] = std::from_chars(literal.data(), literal.data() + literal.size(), t.int_value);
      if (ec != std::errc() || ptr != literal.data() + literal.size())
        fail(t, fmt::format("integer '{}' is out of range", literal));
    }
    return t;
  }

  Token string(Token& t) {
    t.kind = Tok::String;
    advance();  // opening quote
    while (true) {
      if (pos_ >= text_.size() || text_[pos_] == '\n') fail(t, "unterminated string");
      char c = advance();
      if (c == '"') break;
      if (c == '\\') {
        if (pos_ >= text_.size()) fail(t, "unterminated string");
        char e = advance();
        switch (e) {
          case 'n': t.text += '\n'; break;
          case 't': t.text += '\t'; break;
          case '"': t.text += '"'; break;
          case '\\': t.text += '\\'; break;
          default: fail(t, fmt::format("unknown escape '\\{}' in string", printable(e)));
        }
      } else {
        t.text += c;
      }
    }
    return t;
  }

  std::string_view text_;
  std::size_t pos_ = 0;
  std::size_t line_ = 1, column_ = 1;
};

// An argument as written, before the schema says what it means.
struct Literal {
  enum class Kind { ValueRef, Int, Float, Bool, None, String, List, Dtype, Layout, MemoryFormat, Device } kind;
  Value* value = nullptr;
  int64_t int_value = 0;
  double float_value = 0;
  std::string text;
  std::vector<Literal> items;
  Token at;
};

class Parser {
 public:
  explicit Parser(std::string_view text) : lexer_(text) { tok_ = lexer_.next(); }

  Graph parse() {
    expect_ident("graph");
    Graph graph(parse_name());
    graph_ = &graph;
    expect_punct("(");
    if (!is_punct(")")) {
      do {
        Decl d = parse_decl();
        define_check(d);
        graph.add_input(d.name, d.type, std::move(d.meta));
      } while (accept_punct(","));
    }
    expect_punct(")");
    expect_punct(":");
    while (!(tok_.kind == Tok::Ident && tok_.text == "return")) {
      if (tok_.kind == Tok::End) fail("expected a node or 'return'");
      parse_node();
    }
    advance();
    expect_punct("(");
    std::vector<Value*> outputs;
    if (!is_punct(")")) {
      do { outputs.push_back(parse_value_ref()); } while (accept_punct(","));
    }
    expect_punct(")");
    if (tok_.kind != Tok::End) fail("expected end of input after the return statement");
    graph.set_outputs(std::move(outputs));
    return graph;
  }

 private:
  struct Decl {
    std::string name;
    ValueType type = ValueType::Tensor;
    std::optional<TensorMeta> meta;
    Token at;
  };

  [[noreturn]] void fail(const std::string& what) {
    Lexer::fail(tok_, fmt::format("{}, found {}", what, describe(tok_)));
  }
  [[noreturn]] void fail_at(const Token& at, const std::string& message) { Lexer::fail(at, message); }
  void advance() { tok_ = lexer_.next(); }
  bool is_punct(std::string_view p) const { return tok_.kind == Tok::Punct && tok_.text == p; }
  bool accept_punct(std::string_view p) {
    if (!is_punct(p)) return false;
    advance();
    return true;
  }
  void expect_punct(std::string_view p) {
    if (!accept_punct(p)) fail(fmt::format("expected '{}'", p));
  }
  void expect_ident(std::string_view word) {
    if (tok_.kind != Tok::Ident || tok_.text != word) fail(fmt::format("expected '{}'", word));
    advance();
  }
  std::string parse_name() {
    if (tok_.kind != Tok::Ident && tok_.kind != Tok::String) fail("expected a graph name");
    std::string name = tok_.text;
    advance();
    return name;
  }
  int64_t parse_int() {
    if (tok_.kind != Tok::Int) fail("expected an integer");
    int64_t v = tok_.int_value;
    advance();
    return v;
  }
  std::vector<int64_t> parse_int_list() {
    expect_punct("[");
    std::vector<int64_t> values;
    if (!is_punct("]")) {
      do { values.push_back(parse_int()); } while (accept_punct(","));
    }
    expect_punct("]");
    return values;
  }

  Value* parse_value_ref() {
    if (tok_.kind != Tok::ValueRef) fail("expected a value reference like %x");
    Value* v = graph_->find_value(tok_.text);
    if (!v) fail_at(tok_, fmt::format("use of undefined value %{}", tok_.text));
    advance();
    return v;
  }

  void define_check(const Decl& d) {
    if (graph_->find_value(d.name)) fail_at(d.at, fmt::format("value %{} is defined twice", d.name));
  }

  c10::Device parse_device_text() {
    if (tok_.kind != Tok::Ident) fail("expected a device like cpu or cuda:0");
    Token at = tok_;
    std::string text = tok_.text;
    advance();
    if (is_punct(":")) {
      advance();
      text += ":" + std::to_string(parse_int());
    }
    try {
      return c10::Device(text);
    } catch (const std::exception&) { fail_at(at, fmt::format("invalid device '{}'", text)); }
  }

  Decl parse_decl() {
    Decl d;
    d.at = tok_;
    if (tok_.kind != Tok::ValueRef) fail("expected a value declaration like %x: f32[2]");
    d.name = tok_.text;
    advance();
    expect_punct(":");
    if (tok_.kind != Tok::Ident) fail("expected a type (f32[...], Tensor, int, float, bool or Scalar)");
    Token type_tok = tok_;
    std::string type = tok_.text;
    advance();
    if (type == "Tensor") return d;
    if (type == "int" || type == "float" || type == "bool" || type == "Scalar") {
      d.type = type == "int"     ? ValueType::Int
               : type == "float" ? ValueType::Float
               : type == "bool"  ? ValueType::Bool
                                 : ValueType::Scalar;
      return d;
    }
    auto dtype = dtype_from_short_name(type);
    if (!dtype) fail_at(type_tok, fmt::format("unknown type '{}'", type));
    TensorMeta meta;
    meta.dtype = *dtype;
    const Token sizes_tok = tok_;
    meta.sizes = parse_int_list();
    if (auto error = sizes_error(meta.sizes)) fail_at(sizes_tok, *error);
    meta.strides = contiguous_strides(meta.sizes);
    for (;;) {
      if (tok_.kind != Tok::Ident) break;
      if (tok_.text == "stride") {
        advance();
        expect_punct("=");
        Token at = tok_;
        meta.strides = parse_int_list();
        if (meta.strides.size() != meta.sizes.size())
          fail_at(at, fmt::format("stride has {} entries, sizes have {}", meta.strides.size(), meta.sizes.size()));
      } else if (tok_.text == "offset") {
        advance();
        expect_punct("=");
        meta.storage_offset = parse_int();
      } else if (tok_.text == "device") {
        advance();
        expect_punct("=");
        meta.device = parse_device_text();
      } else if (tok_.text == "requires_grad") {
        advance();
        meta.requires_grad = true;
      } else {
        break;
      }
    }
    if (auto error = layout_error(meta)) fail_at(type_tok, *error);
    d.meta = std::move(meta);
    return d;
  }

  Literal parse_literal() {
    Literal lit{};
    lit.at = tok_;
    switch (tok_.kind) {
      case Tok::ValueRef:
        lit.kind = Literal::Kind::ValueRef;
        lit.value = parse_value_ref();
        return lit;
      case Tok::Int:
        lit.kind = Literal::Kind::Int;
        lit.int_value = tok_.int_value;
        advance();
        return lit;
      case Tok::Float:
        lit.kind = Literal::Kind::Float;
        lit.float_value = tok_.float_value;
        advance();
        return lit;
      case Tok::String:
        lit.kind = Literal::Kind::String;
        lit.text = tok_.text;
        advance();
        return lit;
      case Tok::Punct:
        if (is_punct("[")) {
          advance();
          lit.kind = Literal::Kind::List;
          if (!is_punct("]")) {
            do { lit.items.push_back(parse_literal()); } while (accept_punct(","));
          }
          expect_punct("]");
          return lit;
        }
        break;
      case Tok::Ident: {
        const std::string& word = tok_.text;
        if (word == "True" || word == "False") {
          lit.kind = Literal::Kind::Bool;
          lit.int_value = word == "True";
        } else if (word == "None") {
          lit.kind = Literal::Kind::None;
        } else if (word == "device") {
          advance();
          expect_punct("(");
          if (tok_.kind != Tok::String) fail("expected a device string like \"cuda:0\"");
          lit.kind = Literal::Kind::Device;
          lit.text = tok_.text;
          try {
            (void)c10::Device(lit.text);
          } catch (const std::exception&) { fail_at(tok_, fmt::format("invalid device '{}'", lit.text)); }
          advance();
          expect_punct(")");
          return lit;
        } else if (auto dtype = dtype_from_torch_name(word)) {
          lit.kind = Literal::Kind::Dtype;
          lit.int_value = static_cast<int64_t>(*dtype);
        } else if (auto layout = layout_from_torch_name(word)) {
          lit.kind = Literal::Kind::Layout;
          lit.int_value = static_cast<int64_t>(*layout);
        } else if (auto format = memory_format_from_torch_name(word)) {
          lit.kind = Literal::Kind::MemoryFormat;
          lit.int_value = static_cast<int64_t>(*format);
        } else {
          fail("expected an argument (a value, number, True/False/None, string, list, dtype or device)");
        }
        advance();
        return lit;
      }
      default: break;
    }
    fail("expected an argument");
  }

  // Turns a literal into an argument of the given schema type.
  Argument coerce(const Literal& lit, const c10::TypePtr& schema_type, const std::string& where) {
    c10::TypePtr type = schema_type;
    if (type->kind() == c10::TypeKind::OptionalType) {
      if (lit.kind == Literal::Kind::None) return Argument::none();
      type = type->expectRef<c10::OptionalType>().getElementType();
    }
    if (lit.kind == Literal::Kind::ValueRef) return lit.value;
    if (type->kind() == c10::TypeKind::ListType) {
      if (lit.kind != Literal::Kind::List) {
        // `int[1]` arguments accept a single int, as in Python.
        if (lit.kind == Literal::Kind::Int) return Argument(std::vector<int64_t>{lit.int_value});
        fail_at(lit.at, fmt::format("{}: expected a list for type {}", where, schema_type->str()));
      }
      c10::TypePtr elem = type->expectRef<c10::ListType>().getElementType();
      c10::TypePtr elem_inner =
          elem->kind() == c10::TypeKind::OptionalType ? elem->expectRef<c10::OptionalType>().getElementType() : elem;
      if (elem_inner->kind() == c10::TypeKind::TensorType) {
        ValueList list;
        for (const Literal& item : lit.items) {
          if (item.kind == Literal::Kind::ValueRef) {
            list.values.push_back(item.value);
          } else if (item.kind == Literal::Kind::None && elem->kind() == c10::TypeKind::OptionalType) {
            list.values.push_back(nullptr);
          } else {
            fail_at(item.at, fmt::format("{}: expected a tensor value in {}", where, schema_type->str()));
          }
        }
        return list;
      }
      return constant_list(lit, elem, where);
    }
    return constant_scalar(lit, type, where);
  }

  c10::IValue constant_list(const Literal& lit, const c10::TypePtr& elem, const std::string& where) {
    switch (elem->kind()) {
      case c10::TypeKind::IntType:
      case c10::TypeKind::SymIntType: {
        std::vector<int64_t> values;
        for (const Literal& item : lit.items) {
          if (item.kind != Literal::Kind::Int)
            fail_at(item.at, fmt::format("{}: expected an integer list element", where));
          values.push_back(item.int_value);
        }
        return values;
      }
      case c10::TypeKind::FloatType: {
        std::vector<double> values;
        for (const Literal& item : lit.items) {
          if (item.kind == Literal::Kind::Int)
            values.push_back(static_cast<double>(item.int_value));
          else if (item.kind == Literal::Kind::Float)
            values.push_back(item.float_value);
          else
            fail_at(item.at, fmt::format("{}: expected a float list element", where));
        }
        return values;
      }
      case c10::TypeKind::BoolType: {
        c10::List<bool> values;
        for (const Literal& item : lit.items) {
          if (item.kind != Literal::Kind::Bool) fail_at(item.at, fmt::format("{}: expected True or False", where));
          values.push_back(item.int_value != 0);
        }
        return values;
      }
      default: {
        c10::impl::GenericList values(elem);
        for (const Literal& item : lit.items) values.push_back(constant_scalar(item, elem, where));
        return values;
      }
    }
  }

  c10::IValue constant_scalar(const Literal& lit, const c10::TypePtr& type, const std::string& where) {
    switch (lit.kind) {
      case Literal::Kind::None: return c10::IValue();
      case Literal::Kind::Int:
        if (type->kind() == c10::TypeKind::FloatType) return static_cast<double>(lit.int_value);
        return lit.int_value;
      case Literal::Kind::Float: return lit.float_value;
      case Literal::Kind::Bool: return lit.int_value != 0;
      case Literal::Kind::String: return lit.text;
      case Literal::Kind::Dtype:
      case Literal::Kind::Layout:
      case Literal::Kind::MemoryFormat: return lit.int_value;
      case Literal::Kind::Device: return c10::Device(lit.text);
      case Literal::Kind::List: {
        // A list where the schema has none (a verifier error later, kept as written).
        c10::impl::GenericList values(c10::AnyType::get());
        for (const Literal& item : lit.items) values.push_back(constant_scalar(item, c10::AnyType::get(), where));
        return values;
      }
      case Literal::Kind::ValueRef: break;
    }
    fail_at(lit.at, fmt::format("{}: a value reference is not allowed here", where));
  }

  void parse_node() {
    std::vector<Decl> decls;
    if (tok_.kind == Tok::ValueRef) {
      do { decls.push_back(parse_decl()); } while (accept_punct(","));
      expect_punct("=");
    }
    for (std::size_t i = 0; i < decls.size(); ++i) {
      define_check(decls[i]);
      for (std::size_t j = 0; j < i; ++j)
        if (decls[j].name == decls[i].name)
          fail_at(decls[i].at, fmt::format("value %{} is defined twice", decls[i].name));
    }
    if (tok_.kind != Tok::Ident) fail("expected an operator name like aten::mul.Tensor or constant(...)");
    Token op_tok = tok_;
    std::string op_name = tok_.text;
    advance();
    Node* node = nullptr;
    if (op_name == "constant") {
      expect_punct("(");
      if (tok_.kind != Tok::String) fail("expected the constant's key as a string");
      std::string key = tok_.text;
      advance();
      expect_punct(")");
      if (decls.size() != 1 || !decls[0].meta)
        fail_at(op_tok, "a constant defines exactly one tensor value with its type");
      Value* v = graph_->add_constant_ref(key, *decls[0].meta, decls[0].name);
      node = v->producer();
    } else {
      node = parse_call(op_tok, op_name, decls);
    }
    if (accept_punct("{")) {
      do {
        if (tok_.kind != Tok::Ident) fail("expected an attribute name");
        std::string key = tok_.text;
        advance();
        expect_punct("=");
        if (tok_.kind != Tok::Ident && tok_.kind != Tok::String) fail("expected an attribute value");
        node->attrs()[key] = tok_.text;
        advance();
      } while (accept_punct(","));
      expect_punct("}");
    }
  }

  Node* parse_call(const Token& op_tok, const std::string& op_name, std::vector<Decl>& decls) {
    std::optional<c10::OperatorHandle> op;
    try {
      op = resolve_operator(op_name);
    } catch (const GraphError& e) { fail_at(op_tok, e.what()); }
    const auto& formals = op->schema().arguments();
    std::vector<std::optional<Argument>> args(formals.size());
    expect_punct("(");
    std::size_t positional = 0;
    bool seen_keyword = false;
    if (!is_punct(")")) {
      do {
        Token at = tok_;
        std::size_t index = 0;
        if (tok_.kind == Tok::Ident && peek_is_keyword_argument()) {
          std::string key = tok_.text;
          advance();
          expect_punct("=");
          auto it =
              std::find_if(formals.begin(), formals.end(), [&](const c10::Argument& a) { return a.name() == key; });
          if (it == formals.end()) fail_at(at, fmt::format("{} has no argument named '{}'", op_name, key));
          index = static_cast<std::size_t>(it - formals.begin());
          seen_keyword = true;
        } else {
          if (seen_keyword) fail_at(at, "positional argument after a keyword argument");
          index = positional++;
          if (index >= formals.size()) fail_at(at, fmt::format("{} takes {} arguments", op_name, formals.size()));
          if (formals[index].kwarg_only())
            fail_at(at, fmt::format("{}: argument '{}' is keyword-only", op_name, formals[index].name()));
        }
        if (args[index]) fail_at(at, fmt::format("{}: argument '{}' given twice", op_name, formals[index].name()));
        Literal lit = parse_literal();
        args[index] =
            coerce(lit, formals[index].real_type(), fmt::format("{} argument '{}'", op_name, formals[index].name()));
      } while (accept_punct(","));
    }
    expect_punct(")");
    std::vector<Argument> full;
    for (std::size_t i = 0; i < formals.size(); ++i) {
      if (args[i]) {
        full.push_back(std::move(*args[i]));
      } else if (formals[i].default_value()) {
        full.emplace_back(*formals[i].default_value());
      } else {
        fail_at(op_tok, fmt::format("{}: missing argument '{}'", op_name, formals[i].name()));
      }
    }
    std::vector<OutputSpec> outputs;
    outputs.reserve(decls.size());
    for (Decl& d : decls) outputs.push_back(OutputSpec{d.name, std::move(d.meta), d.type});
    try {
      return graph_->add_call(*op, std::move(full), std::move(outputs));
    } catch (const GraphError& e) { fail_at(op_tok, e.what()); }
  }

  // `name=` starts a keyword argument; a bare identifier (True, torch.float32) does not.
  bool peek_is_keyword_argument() {
    Lexer copy = lexer_;
    Token next = copy.next();
    return next.kind == Tok::Punct && next.text == "=";
  }

  Lexer lexer_;
  Token tok_;
  Graph* graph_ = nullptr;
};

}  // namespace

Graph parse_graph(std::string_view text) { return Parser(text).parse(); }

std::optional<std::string> peek_graph_name(std::string_view text) {
  try {
    Lexer lexer(text);
    const Token keyword = lexer.next();
    if (keyword.kind != Tok::Ident || keyword.text != "graph") return std::nullopt;
    Token name = lexer.next();
    if (name.kind != Tok::Ident && name.kind != Tok::String) return std::nullopt;
    return std::move(name.text);
  } catch (const ParseError&) {
    return std::nullopt;  // e.g. a quoted name cut off where the prefix ends
  }
}

}  // namespace aotpipe

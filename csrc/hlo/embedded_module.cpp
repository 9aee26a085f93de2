// Embedding reads just enough of the MLIR text to move it: the module's
// braces, each func.func's symbol, and @main's argument and result types.
// Everything else is copied as it is, so the plugin's parser (not ours)
// decides what the ops mean; what it rejects is reported when the module is
// first compiled on its own (aten/custom_call.cpp).
//
// Locations are removed because JAX refers to `#locN` aliases defined at the
// end of its text, outside the module, and two embedded modules would define
// the same aliases.
#include "hlo/embedded_module.h"

#include <cctype>
#include <set>

#include "common/error.h"

namespace torch_tpu::hlo {

namespace {

[[noreturn]] void bad(const std::string& what) {
  fail(ErrorKind::Value, "StableHLO module: ", what);
}

bool ident_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$' || c == '.' ||
         c == '-';
}

// Index just past the string literal starting at text[i] == '"'.
size_t skip_string(const std::string& text, size_t i) {
  for (++i; i < text.size(); ++i) {
    if (text[i] == '\\') ++i;
    else if (text[i] == '"') return i + 1;
  }
  bad("unterminated string literal");
}

// Index of the bracket closing the one at text[open], skipping strings.
size_t matching(const std::string& text, size_t open) {
  const char o = text[open];
  const char c = o == '(' ? ')' : o == '{' ? '}' : o == '[' ? ']' : '>';
  int depth = 0;
  for (size_t i = open; i < text.size();) {
    char ch = text[i];
    if (ch == '"') {
      i = skip_string(text, i);
      continue;
    }
    if (ch == o) ++depth;
    if (ch == c && --depth == 0) return i;
    ++i;
  }
  bad(std::string("unbalanced '") + o + "'");
}

size_t skip_space(const std::string& text, size_t i) {
  while (i < text.size()) {
    if (std::isspace(static_cast<unsigned char>(text[i]))) {
      ++i;
    } else if (text.compare(i, 2, "//") == 0) {
      size_t nl = text.find('\n', i);
      i = nl == std::string::npos ? text.size() : nl + 1;
    } else {
      break;
    }
  }
  return i;
}

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  size_t e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// The text without `loc(...)` annotations and `#loc...` alias lines.
std::string strip_locations(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    char ch = text[i];
    if (ch == '"') {
      size_t end = skip_string(text, i);
      out.append(text, i, end - i);
      i = end;
      continue;
    }
    bool line_start = i == 0 || text[i - 1] == '\n';
    if (line_start && text.compare(i, 4, "#loc") == 0) {
      size_t nl = text.find('\n', i);
      i = nl == std::string::npos ? text.size() : nl + 1;
      continue;
    }
    if (text.compare(i, 4, "loc(") == 0 && (i == 0 || !ident_char(text[i - 1]))) {
      i = matching(text, i + 3) + 1;
      continue;
    }
    out += ch;
    ++i;
  }
  return out;
}

// The module's body: the text inside `module [@name] [attributes {...}] {`.
std::string module_body(const std::string& text) {
  size_t i = skip_space(text, 0);
  if (text.compare(i, 6, "module") != 0 || (i + 6 < text.size() && ident_char(text[i + 6])))
    return text;  // bare functions
  i = skip_space(text, i + 6);
  if (i < text.size() && text[i] == '@') {
    ++i;
    while (i < text.size() && ident_char(text[i])) ++i;
    i = skip_space(text, i);
  }
  if (text.compare(i, 10, "attributes") == 0) {
    i = skip_space(text, i + 10);
    if (i >= text.size() || text[i] != '{') bad("expected '{' after 'module ... attributes'");
    i = skip_space(text, matching(text, i) + 1);
  }
  if (i >= text.size() || text[i] != '{') bad("expected '{' opening the module's body");
  size_t close = matching(text, i);
  if (!trim(text.substr(close + 1)).empty()) bad("text after the module's closing '}'");
  return text.substr(i + 1, close - i - 1);
}

// Splits at commas outside brackets and strings.
std::vector<std::string> split_top(const std::string& s) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t i = 0; i < s.size();) {
    char ch = s[i];
    if (ch == '"') {
      i = skip_string(s, i);
      continue;
    }
    if (ch == '(' || ch == '{' || ch == '[' || ch == '<') {
      i = matching(s, i) + 1;
      continue;
    }
    if (ch == ',') {
      parts.push_back(s.substr(start, i - start));
      start = i + 1;
    }
    ++i;
  }
  if (!trim(s.substr(start)).empty() || !parts.empty()) parts.push_back(s.substr(start));
  return parts;
}

// The type at the start of `s` ("tensor<...>", then attributes or nothing).
TensorType leading_type(const std::string& s, const std::string& where) {
  std::string t = trim(s);
  if (t.compare(0, 7, "tensor<") != 0)
    bad(where + " has type '" + t + "': only tensor types are supported");
  return parse_tensor_type(t.substr(0, matching(t, 6) + 1));
}

struct FuncHeader {
  size_t keyword = 0;  // position of "func.func"
  size_t symbol = 0;   // position of '@'
  size_t end = 0;      // just past the symbol
  std::string name;
};

// A symbol reference at text[at] == '@': a bare identifier or a quoted name
// (JAX quotes names like "<lambda>"). Sets *name to the name without quotes;
// returns the index just past it.
size_t symbol_end(const std::string& text, size_t at, std::string* name) {
  if (at + 1 < text.size() && text[at + 1] == '"') {
    size_t e = skip_string(text, at + 1);
    *name = text.substr(at + 2, e - at - 3);
    return e;
  }
  size_t e = at + 1;
  while (e < text.size() && ident_char(text[e])) ++e;
  *name = text.substr(at + 1, e - at - 1);
  return e;
}

// Every `func.func [visibility] @name` at the top level of the body.
std::vector<FuncHeader> functions_of(const std::string& body) {
  std::vector<FuncHeader> found;
  for (size_t i = 0; i < body.size();) {
    char ch = body[i];
    if (ch == '"') {
      i = skip_string(body, i);
      continue;
    }
    if (ch == '{') {  // a function body (or an attribute dictionary)
      i = matching(body, i) + 1;
      continue;
    }
    if (body.compare(i, 9, "func.func") == 0 && (i == 0 || !ident_char(body[i - 1]))) {
      FuncHeader h;
      h.keyword = i;
      size_t j = skip_space(body, i + 9);
      for (const char* vis : {"public", "private", "nested"}) {
        size_t n = std::string(vis).size();
        if (body.compare(j, n, vis) == 0 && !ident_char(body[j + n])) j = skip_space(body, j + n);
      }
      if (j >= body.size() || body[j] != '@') bad("expected '@name' after 'func.func'");
      h.symbol = j;
      size_t e = symbol_end(body, j, &h.name);
      h.end = e;
      found.push_back(h);
      i = e;
      continue;
    }
    ++i;
  }
  return found;
}

}  // namespace

TensorType parse_tensor_type(const std::string& text) {
  std::string t = trim(text);
  if (t.compare(0, 7, "tensor<") != 0 || t.back() != '>') bad("'" + t + "' is not a tensor type");
  std::string inner = t.substr(7, t.size() - 8);
  if (inner.find(',') != std::string::npos)
    bad("'" + t + "': tensor encodings are not supported");
  TensorType out;
  size_t start = 0;
  while (true) {
    size_t x = inner.find('x', start);
    // Dimensions are digits (or '?'); the element type follows the last 'x'.
    bool is_dim = x != std::string::npos && x > start;
    for (size_t k = start; is_dim && k < x; ++k)
      is_dim = std::isdigit(static_cast<unsigned char>(inner[k])) || inner[k] == '?';
    if (!is_dim) break;
    std::string dim = inner.substr(start, x - start);
    if (dim.find('?') != std::string::npos)
      bad("'" + t + "': dynamic dimensions are not supported (shapes must be static)");
    out.shape.push_back(std::stoll(dim));
    start = x + 1;
  }
  std::string element = trim(inner.substr(start));
  for (int k = 0; k <= static_cast<int>(kLastElementType); ++k) {
    auto e = static_cast<ElementType>(k);
    if (element == mlir_name(e)) {
      out.dtype = e;
      return out;
    }
  }
  bad("'" + t + "': element type '" + element + "' is not one the device holds");
}

EmbeddedModule embed_module(const std::string& text, const std::string& prefix) {
  std::string body = module_body(strip_locations(text));
  std::vector<FuncHeader> funcs = functions_of(body);
  std::set<std::string> symbols;
  const FuncHeader* main = nullptr;
  for (const auto& f : funcs) {
    if (!symbols.insert(f.name).second) bad("function @" + f.name + " is defined twice");
    if (f.name == "main") main = &f;
  }
  if (!main) bad("no 'func.func @main' (the entry function) found");

  EmbeddedModule m;
  m.entry = prefix + "main";
  // @main's signature: `(%a: type {attrs}, ...) -> type` or `-> (type {attrs}, ...)`.
  size_t open = skip_space(body, main->end);
  if (open >= body.size() || body[open] != '(') bad("expected '(' after '@main'");
  size_t close = matching(body, open);
  for (const std::string& arg : split_top(body.substr(open + 1, close - open - 1))) {
    size_t colon = arg.find(':');
    if (colon == std::string::npos) bad("@main argument '" + trim(arg) + "' has no type");
    m.inputs.push_back(leading_type(arg.substr(colon + 1), "@main argument " + trim(arg.substr(0, colon))));
  }
  size_t r = skip_space(body, close + 1);
  if (body.compare(r, 2, "->") == 0) {
    r = skip_space(body, r + 2);
    if (r < body.size() && body[r] == '(') {
      size_t rc = matching(body, r);
      int k = 0;
      for (const std::string& res : split_top(body.substr(r + 1, rc - r - 1)))
        m.outputs.push_back(leading_type(res, "@main result " + std::to_string(k++)));
    } else {
      m.outputs.push_back(leading_type(body.substr(r), "@main result 0"));
    }
  }
  if (m.outputs.empty()) bad("@main returns nothing");

  // Copy the body, renaming symbol references and making every function
  // private (a public function inside another module means nothing to XLA).
  std::string out;
  out.reserve(body.size() + funcs.size() * (prefix.size() + 8));
  size_t next_func = 0;
  for (size_t i = 0; i < body.size();) {
    if (next_func < funcs.size() && i == funcs[next_func].keyword) {
      out += "func.func private ";
      i = funcs[next_func].symbol;
      ++next_func;
      continue;
    }
    char ch = body[i];
    if (ch == '"') {
      size_t end = skip_string(body, i);
      out.append(body, i, end - i);
      i = end;
      continue;
    }
    if (ch == '@') {
      std::string name;
      size_t e = symbol_end(body, i, &name);
      if (symbols.count(name)) {
        bool quoted = body[i + 1] == '"';
        out += quoted ? "@\"" + prefix + name + "\"" : "@" + prefix + name;
        i = e;
        continue;
      }
    }
    out += ch;
    ++i;
  }
  m.functions = out;
  return m;
}

}  // namespace torch_tpu::hlo

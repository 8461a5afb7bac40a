// The TE lexer.
#include "contract/lexer.h"

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace cake::te {

std::string_view tok_spelling(Tok t) {
  switch (t) {
    case Tok::Ident: return "a name";
    case Tok::Number: return "a number";
    case Tok::LBracket: return "'['";
    case Tok::RBracket: return "']'";
    case Tok::LParen: return "'('";
    case Tok::RParen: return "')'";
    case Tok::Comma: return "','";
    case Tok::Colon: return "':'";
    case Tok::Semicolon: return "';'";
    case Tok::Assign: return "'='";
    case Tok::PlusAssign: return "'+='";
    case Tok::Plus: return "'+'";
    case Tok::Minus: return "'-'";
    case Tok::Star: return "'*'";
    case Tok::Slash: return "'/'";
    case Tok::Percent: return "'%'";
    case Tok::Lt: return "'<'";
    case Tok::Le: return "'<='";
    case Tok::Gt: return "'>'";
    case Tok::Ge: return "'>='";
    case Tok::EqEq: return "'=='";
    case Tok::Ne: return "'!='";
    case Tok::AndAnd: return "'&&'";
    case Tok::OrOr: return "'||'";
    case Tok::Bang: return "'!'";
    case Tok::Question: return "'?'";
    case Tok::DotDot: return "'..'";
    case Tok::Newline: return "end of line";
    case Tok::End: return "end of input";
  }
  return "?";
}

std::vector<Token> lex(std::string_view s, const SourceMap& map) {
  std::vector<Token> out;
  int line = 1, col = 1;
  int depth = 0;
  size_t i = 0;
  auto here = [&] { return map.map(line, col); };
  auto push = [&](Tok k, size_t len) {
    Token t;
    t.kind = k;
    t.text = std::string(s.substr(i, len));
    t.pos = here();
    out.push_back(std::move(t));
    i += len;
    col += static_cast<int>(len);
  };
  while (i < s.size()) {
    char c = s[i];
    if (c == '\n') {
      if (depth == 0 && !out.empty() && out.back().kind != Tok::Newline) push(Tok::Newline, 1);
      else ++i;
      ++line;
      col = 1;
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\r') { ++i; ++col; continue; }
    if (c == '#') {
      while (i < s.size() && s[i] != '\n') { ++i; ++col; }
      continue;
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t j = i;
      while (j < s.size() && (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == '_')) ++j;
      push(Tok::Ident, j - i);
      continue;
    }
    if (std::isdigit(static_cast<unsigned char>(c)) ||
        (c == '.' && i + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[i + 1])))) {
      size_t j = i;
      bool is_int = true;
      while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
      if (j < s.size() && s[j] == '.' && !(j + 1 < s.size() && s[j + 1] == '.')) {
        is_int = false;
        ++j;
        while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
      }
      if (j < s.size() && (s[j] == 'e' || s[j] == 'E')) {
        size_t k = j + 1;
        if (k < s.size() && (s[k] == '+' || s[k] == '-')) ++k;
        if (k < s.size() && std::isdigit(static_cast<unsigned char>(s[k]))) {
          is_int = false;
          j = k;
          while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
        } else {
          fail_at(map.file, here(), "malformed number '" + std::string(s.substr(i, k - i)) + "'",
                  "an exponent needs digits, as in 1e-6");
        }
      }
      std::string text(s.substr(i, j - i));
      errno = 0;
      double v = std::strtod(text.c_str(), nullptr);
      if (errno == ERANGE && v != 0.0)
        fail_at(map.file, here(), "number '" + text + "' is out of range", "numbers must fit a double");
      if (is_int && v > 9.007199254740992e15)
        fail_at(map.file, here(), "integer literal '" + text + "' is too large", "integers up to 2^53 are exact");
      push(Tok::Number, j - i);
      out.back().number = v;
      out.back().int_literal = is_int;
      continue;
    }
    auto two = [&](char a, char b) { return c == a && i + 1 < s.size() && s[i + 1] == b; };
    if (two('+', '=')) { push(Tok::PlusAssign, 2); continue; }
    if (two('<', '=')) { push(Tok::Le, 2); continue; }
    if (two('>', '=')) { push(Tok::Ge, 2); continue; }
    if (two('=', '=')) { push(Tok::EqEq, 2); continue; }
    if (two('!', '=')) { push(Tok::Ne, 2); continue; }
    if (two('&', '&')) { push(Tok::AndAnd, 2); continue; }
    if (two('|', '|')) { push(Tok::OrOr, 2); continue; }
    if (two('.', '.')) { push(Tok::DotDot, 2); continue; }
    switch (c) {
      case '[': ++depth; push(Tok::LBracket, 1); continue;
      case '(': ++depth; push(Tok::LParen, 1); continue;
      case ']': if (depth > 0) --depth; push(Tok::RBracket, 1); continue;
      case ')': if (depth > 0) --depth; push(Tok::RParen, 1); continue;
      case ',': push(Tok::Comma, 1); continue;
      case ':': push(Tok::Colon, 1); continue;
      case ';': push(Tok::Semicolon, 1); continue;
      case '=': push(Tok::Assign, 1); continue;
      case '+': push(Tok::Plus, 1); continue;
      case '-': push(Tok::Minus, 1); continue;
      case '*': push(Tok::Star, 1); continue;
      case '/': push(Tok::Slash, 1); continue;
      case '%': push(Tok::Percent, 1); continue;
      case '<': push(Tok::Lt, 1); continue;
      case '>': push(Tok::Gt, 1); continue;
      case '!': push(Tok::Bang, 1); continue;
      case '?': push(Tok::Question, 1); continue;
      default: break;
    }
    char shown[8];
    if (std::isprint(static_cast<unsigned char>(c))) std::snprintf(shown, sizeof shown, "%c", c);
    else std::snprintf(shown, sizeof shown, "\\x%02x", static_cast<unsigned char>(c));
    fail_at(map.file, here(), "unexpected character '" + std::string(shown) + "'",
            "TE uses names, numbers and the operators + - * / % < > = ! & | ? [ ] ( ) , : ..");
  }
  Token end;
  end.kind = Tok::End;
  end.pos = map.map(line, col);
  // Report "end of input" just after the last token, not on a line the scalar does not have.
  for (size_t k = out.size(); k-- > 0;)
    if (out[k].kind != Tok::Newline) {
      end.pos = {out[k].pos.line, out[k].pos.col + static_cast<int>(out[k].text.size())};
      break;
    }
  out.push_back(end);
  return out;
}

}  // namespace cake::te

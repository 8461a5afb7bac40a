// Tokens of the TE language and the lexer that produces them (positions mapped to the file).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "contract/source_map.h"

namespace cake::te {

enum class Tok {
  Ident, Number, LBracket, RBracket, LParen, RParen, Comma, Colon, Semicolon, Assign, PlusAssign,
  Plus, Minus, Star, Slash, Percent, Lt, Le, Gt, Ge, EqEq, Ne, AndAnd, OrOr, Bang, Question,
  DotDot, Newline, End
};

struct Token {
  Tok kind = Tok::End;
  std::string text;
  double number = 0;
  bool int_literal = false;
  Pos pos;
};

std::string_view tok_spelling(Tok t);

// Splits TE text into tokens; newlines inside brackets or parentheses are dropped. Throws
// ContractError on a character that starts no token or on a malformed number.
std::vector<Token> lex(std::string_view text, const SourceMap& map);

}  // namespace cake::te

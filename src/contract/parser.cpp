// Recursive descent over TE tokens. Precedence, lowest first: || && (== !=) (< <= > >=) (+ -)
// (* / %) unary(- !) primary. Nesting is bounded so hostile input cannot exhaust the stack.
#include "contract/parser.h"

#include <limits>
#include <string>

#include "contract/lexer.h"

namespace cake::te {
namespace {

constexpr int kMaxDepth = 200;

class Parser {
 public:
  Parser(std::vector<Token> toks, const SourceMap& map) : t_(std::move(toks)), map_(map) {}

  std::vector<Stmt> program() {
    std::vector<Stmt> out;
    skip_separators();
    while (peek().kind != Tok::End) {
      out.push_back(statement());
      if (peek().kind != Tok::End && peek().kind != Tok::Newline && peek().kind != Tok::Semicolon)
        error(peek(), "expected end of line after the statement, found " + describe(peek()),
              "one definition per line, or separate them with ';'");
      skip_separators();
    }
    return out;
  }

  ShapeSpec shape() {
    ShapeSpec sp;
    skip_separators();
    if (peek().kind == Tok::Ident) {
      sp.dtype_pos = peek().pos;
      sp.dtype = next().text;
    }
    expect(Tok::LBracket, "to start the shape", "a shape reads [N, D] or i32[N, D]");
    if (peek().kind != Tok::RBracket) {
      do sp.dims.push_back(expr());
      while (accept(Tok::Comma));
    }
    expect(Tok::RBracket, "to close the shape");
    skip_separators();
    if (peek().kind != Tok::End) error(peek(), "unexpected " + describe(peek()) + " after the shape");
    return sp;
  }

  Application application() {
    skip_separators();
    const Token& name = expect(Tok::Ident, "naming a distribution", "normal(0, 1), uniform(-1, 1), randint(0, V)");
    Application a;
    a.name = name.text;
    a.pos = name.pos;
    expect(Tok::LParen, "after the distribution name", "normal(0, 1)");
    if (peek().kind != Tok::RParen) {
      do a.args.push_back(expr());
      while (accept(Tok::Comma));
    }
    expect(Tok::RParen, "to close the argument list");
    skip_separators();
    if (peek().kind != Tok::End) error(peek(), "unexpected " + describe(peek()) + " after the distribution");
    return a;
  }

  ExprPtr lone_expression() {
    skip_separators();
    if (peek().kind == Tok::End) error(peek(), "expected an expression, found nothing");
    ExprPtr e = expr();
    skip_separators();
    if (peek().kind != Tok::End) error(peek(), "unexpected " + describe(peek()) + " after the expression");
    return e;
  }

 private:
  std::vector<Token> t_;
  size_t i_ = 0;
  int depth_ = 0;
  const SourceMap& map_;

  const Token& peek(size_t k = 0) const { return t_[std::min(i_ + k, t_.size() - 1)]; }
  const Token& next() {
    const Token& t = t_[i_];
    if (i_ + 1 < t_.size()) ++i_;
    return t;
  }
  bool accept(Tok k) {
    if (peek().kind != k) return false;
    next();
    return true;
  }
  static std::string describe(const Token& t) {
    if (t.kind == Tok::Ident || t.kind == Tok::Number) return "'" + t.text + "'";
    return std::string(tok_spelling(t.kind));
  }
  [[noreturn]] void error(const Token& t, std::string msg, std::string hint = {}) const {
    fail_at(map_.file, t.pos, std::move(msg), std::move(hint));
  }
  const Token& expect(Tok k, const char* what, const char* hint = "") {
    if (peek().kind != k)
      error(peek(), std::string("expected ") + std::string(tok_spelling(k)) + " " + what + ", found " +
                        describe(peek()), hint);
    return next();
  }
  void skip_separators() {
    while (peek().kind == Tok::Newline || peek().kind == Tok::Semicolon) next();
  }

  struct DepthGuard {
    Parser& p;
    explicit DepthGuard(Parser& parser, const Token& at) : p(parser) {
      if (++p.depth_ > kMaxDepth) p.error(at, "expression nested too deeply", "split it into named definitions");
    }
    ~DepthGuard() { --p.depth_; }
  };

  Stmt statement() {
    const Token& name = peek();
    if (name.kind != Tok::Ident)
      error(name, "expected a definition 'name[i, ...] = expr', found " + describe(name));
    Stmt s;
    s.target = next().text;
    s.pos = name.pos;
    if (accept(Tok::LBracket)) {
      if (peek().kind != Tok::RBracket) {
        do s.index.push_back(expr());
        while (accept(Tok::Comma));
      }
      expect(Tok::RBracket, "to close the index list");
    }
    if (accept(Tok::PlusAssign)) {
      s.accumulate = true;
    } else if (!accept(Tok::Assign)) {
      error(peek(), "expected '=' or '+=' after '" + s.target + "[...]', found " + describe(peek()),
            "a definition reads name[i, j] = expr");
    }
    if (peek().kind == Tok::Newline || peek().kind == Tok::End)
      error(peek(), "missing expression after '" + std::string(s.accumulate ? "+=" : "=") + "'");
    s.rhs = expr();
    return s;
  }

  ExprPtr expr() { return binary_level(0); }

  static int precedence(Tok k) {
    switch (k) {
      case Tok::OrOr: return 1;
      case Tok::AndAnd: return 2;
      case Tok::EqEq: case Tok::Ne: return 3;
      case Tok::Lt: case Tok::Le: case Tok::Gt: case Tok::Ge: return 4;
      case Tok::Plus: case Tok::Minus: return 5;
      case Tok::Star: case Tok::Slash: case Tok::Percent: return 6;
      default: return 0;
    }
  }
  static Op binop(Tok k) {
    switch (k) {
      case Tok::OrOr: return Op::Or;
      case Tok::AndAnd: return Op::And;
      case Tok::EqEq: return Op::Eq;
      case Tok::Ne: return Op::Ne;
      case Tok::Lt: return Op::Lt;
      case Tok::Le: return Op::Le;
      case Tok::Gt: return Op::Gt;
      case Tok::Ge: return Op::Ge;
      case Tok::Plus: return Op::Add;
      case Tok::Minus: return Op::Sub;
      case Tok::Star: return Op::Mul;
      case Tok::Slash: return Op::Div;
      default: return Op::Mod;
    }
  }

  // Precedence climbing; all binary operators are left-associative.
  ExprPtr binary_level(int min_prec) {
    DepthGuard g(*this, peek());
    ExprPtr lhs = unary();
    for (;;) {
      int p = precedence(peek().kind);
      if (p == 0 || p <= min_prec) break;
      const Token& op = next();
      ExprPtr rhs = binary_level(p);
      Pos start = lhs->pos;  // a binary expression is located where it starts
      lhs = make_binary(binop(op.kind), std::move(lhs), std::move(rhs), start);
    }
    return lhs;
  }

  ExprPtr unary() {
    DepthGuard g(*this, peek());
    if (peek().kind == Tok::Minus || peek().kind == Tok::Bang) {
      const Token& op = next();
      ExprPtr a = unary();
      if (op.kind == Tok::Minus && a->kind == ExprKind::Number) {  // fold -literal
        a->number = -a->number;
        a->pos = op.pos;
        return a;
      }
      auto e = std::make_unique<Expr>();
      e->kind = ExprKind::Unary;
      e->op = op.kind == Tok::Minus ? Op::Neg : Op::Not;
      e->pos = op.pos;
      e->args.push_back(std::move(a));
      return e;
    }
    if (peek().kind == Tok::Plus) {
      next();
      return unary();
    }
    return primary();
  }

  // After '(' of a reduction-capable name: "k :", "k ," ... ":" or "k in".
  bool looks_like_reduction() const {
    size_t k = 0;
    for (;;) {
      if (peek(k).kind != Tok::Ident) return false;
      if (peek(k + 1).kind == Tok::Ident && peek(k + 1).text == "in") return true;
      if (peek(k + 1).kind == Tok::Colon) return true;
      if (peek(k + 1).kind != Tok::Comma) return false;
      k += 2;
    }
  }

  ExprPtr primary() {
    const Token& t = peek();
    if (t.kind == Tok::Number) {
      next();
      return make_number(t.number, t.int_literal, t.pos);
    }
    if (t.kind == Tok::LParen) {
      next();
      ExprPtr e = expr();
      expect(Tok::RParen, "to close '('");
      return e;
    }
    if (t.kind != Tok::Ident)
      error(t, "expected an expression, found " + describe(t),
            "an expression starts with a number, a name, '(' , '-' or '!'");
    const Token& name = next();
    if (name.text == "inf") return make_number(std::numeric_limits<double>::infinity(), false, name.pos);
    if (name.text == "cast" && peek().kind == Tok::Lt) return cast(name);
    if (peek().kind == Tok::LParen) return call(name);
    if (peek().kind == Tok::LBracket || peek().kind == Tok::Question) return read(name);
    auto e = std::make_unique<Expr>();
    e->kind = ExprKind::Name;
    e->name = name.text;
    e->pos = name.pos;
    return e;
  }

  ExprPtr cast(const Token& name) {
    next();  // <
    const Token& ty = expect(Tok::Ident, "naming the dtype of cast<T>", "cast<f32>(e), cast<i32>(e), ...");
    auto dt = parse_dtype(ty.text);
    if (!dt) error(ty, "unknown dtype '" + ty.text + "' in cast", "dtypes are f32 f16 bf16 i32 i64 i8 bool");
    expect(Tok::Gt, "to close cast<T>");
    expect(Tok::LParen, "after cast<T>");
    auto e = std::make_unique<Expr>();
    e->kind = ExprKind::Cast;
    e->cast_to = *dt;
    e->pos = name.pos;
    e->args.push_back(expr());
    expect(Tok::RParen, "to close cast<T>(...)");
    return e;
  }

  ExprPtr call(const Token& name) {
    next();  // (
    auto e = std::make_unique<Expr>();
    e->name = name.text;
    e->pos = name.pos;
    auto red = parse_reduce(name.text);
    if (red && looks_like_reduction()) {
      e->kind = ExprKind::Reduce;
      e->reduce = *red;
      do {
        const Token& v = expect(Tok::Ident, "naming a reduction variable");
        ReduceVar rv;
        rv.name = v.text;
        rv.pos = v.pos;
        if (peek().kind == Tok::Ident && peek().text == "in") {
          next();
          rv.lo = expr();
          expect(Tok::DotDot, "in the range 'k in lo..hi'");
          rv.hi = expr();
        }
        e->rvars.push_back(std::move(rv));
      } while (accept(Tok::Comma));
      expect(Tok::Colon, "after the reduction variables", "sum(k: x[i, k])");
      e->args.push_back(expr());
      expect(Tok::RParen, "to close the reduction");
      return e;
    }
    if (red && (*red == ReduceOp::Sum || *red == ReduceOp::Prod || *red == ReduceOp::ArgMax ||
                *red == ReduceOp::ArgMin)) {
      if (peek().kind == Tok::Colon)
        error(peek(), "reduction '" + name.text + "' over nothing", "name the variables: " + name.text + "(k: ...)");
      error(peek(), "'" + name.text + "' is a reduction and needs variables", name.text + "(k: x[i, k])");
    }
    auto fn = parse_fn(name.text);
    if (!fn) {
      if (peek().kind == Tok::Colon)
        error(peek(), "reduction '" + name.text + "' over nothing", "name the variables: max(k: ...)");
      error(name, "unknown function '" + name.text + "'",
            "functions: where min max abs exp log sqrt rsqrt tanh erf sigmoid sin cos pow floor ceil round; "
            "reductions: sum max min prod argmax argmin");
    }
    e->kind = ExprKind::Call;
    e->fn = *fn;
    if (peek().kind == Tok::Colon)
      error(peek(), "reduction '" + name.text + "' over nothing", "name the variables: " + name.text + "(k: ...)");
    if (peek().kind != Tok::RParen) {
      do e->args.push_back(expr());
      while (accept(Tok::Comma));
    }
    expect(Tok::RParen, "to close the argument list");
    int want = fn_arity(*fn);
    if (static_cast<int>(e->args.size()) != want)
      error(name, "'" + name.text + "' takes " + std::to_string(want) + " argument" + (want == 1 ? "" : "s") +
                      ", given " + std::to_string(e->args.size()));
    return e;
  }

  ExprPtr read(const Token& name) {
    auto e = std::make_unique<Expr>();
    e->kind = ExprKind::Read;
    e->name = name.text;
    e->pos = name.pos;
    if (accept(Tok::Question)) {
      e->padded = true;
      if (accept(Tok::LParen)) {
        e->pad_value = expr();
        expect(Tok::RParen, "to close the padding value x?(v)[...]");
      }
    }
    expect(Tok::LBracket, "to index the tensor", "padded reads are written x?[i] or x?(v)[i]");
    if (peek().kind != Tok::RBracket) {
      do e->args.push_back(expr());
      while (accept(Tok::Comma));
    }
    expect(Tok::RBracket, "to close the index list");
    return e;
  }
};

}  // namespace

std::vector<Stmt> parse_program(std::string_view text, const SourceMap& map) {
  return Parser(lex(text, map), map).program();
}

ExprPtr parse_expression(std::string_view text, const SourceMap& map) {
  return Parser(lex(text, map), map).lone_expression();
}

ShapeSpec parse_shape(std::string_view text, const SourceMap& map) { return Parser(lex(text, map), map).shape(); }

Application parse_application(std::string_view text, const SourceMap& map) {
  return Parser(lex(text, map), map).application();
}

}  // namespace cake::te

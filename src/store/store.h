// The CAKE store (DESIGN §2 store/): one SQLite file of runs, candidates, measurements, traces and router
// abilities. Opening creates or migrates the schema (PRAGMA user_version), in WAL mode with foreign keys on.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

struct sqlite3;
struct sqlite3_stmt;

namespace cake::store {

// A prepared statement (RAII over sqlite3_stmt). Bind indices are 1-based, column indices 0-based.
class Statement {
 public:
  Statement(sqlite3* db, std::string_view sql);  // throws cake::Error with the sqlite message
  ~Statement();
  Statement(Statement&& o) noexcept;
  Statement& operator=(Statement&& o) noexcept;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Statement& bind(int index, int64_t v);
  Statement& bind(int index, int v) { return bind(index, int64_t{v}); }
  Statement& bind(int index, double v);
  Statement& bind(int index, std::string_view v);
  Statement& bind(int index, const char* v) { return bind(index, std::string_view(v)); }
  Statement& bind_null(int index);

  bool step();   // true when a row is available, false when done; throws on error
  void reset();  // ready to step again (bindings kept)

  int column_count() const;
  bool column_is_null(int col) const;
  int64_t column_int64(int col) const;
  double column_double(int col) const;
  std::string column_text(int col) const;

  sqlite3_stmt* handle() const { return stmt_; }

 private:
  void check(int rc, const char* what);
  sqlite3* db_ = nullptr;
  sqlite3_stmt* stmt_ = nullptr;
};

namespace detail {
struct BusyWait;  // a Store's busy handler state (store.cpp)
}

class Store {
 public:
  static constexpr int kSchemaVersion = 4;

  static std::filesystem::path default_path();  // cache_path("cake.db")

  // Opens (creating when absent) the database at path and brings its schema to kSchemaVersion.
  // Throws cake::Error when the file cannot be opened or was written by a newer schema.
  explicit Store(const std::filesystem::path& path = default_path());
  ~Store();
  Store(Store&& o) noexcept;
  Store& operator=(Store&& o) noexcept;
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  void exec(std::string_view sql);  // one or more statements, no results
  Statement prepare(std::string_view sql);

  int schema_version();                    // PRAGMA user_version
  std::vector<std::string> table_names();  // user tables, sorted
  std::string journal_mode();              // "wal" once opened
  bool foreign_keys();                     // PRAGMA foreign_keys
  int64_t last_insert_rowid() const;

  const std::filesystem::path& path() const { return path_; }
  sqlite3* handle() const { return db_; }

  // How long a statement waits for another connection's write transaction before it fails with "database
  // is locked" (default kBusyWait). An evolution run holds the write lock while it measures a variant (its
  // build, timing and validation commit together: tens of seconds), so a second process writing the same
  // store waits; after two seconds it says so on stderr, once per wait.
  void set_busy_wait(std::chrono::milliseconds limit);
  static constexpr std::chrono::milliseconds kBusyWait = std::chrono::minutes(30);

 private:
  void migrate();
  std::filesystem::path path_;
  sqlite3* db_ = nullptr;
  std::unique_ptr<detail::BusyWait> busy_;  // on the heap: SQLite holds its address across moves
};

// BEGIN IMMEDIATE … COMMIT, rolled back when destroyed before commit().
class Transaction {
 public:
  explicit Transaction(Store& s);
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  void commit();

 private:
  Store& store_;
  bool done_ = false;
};

}  // namespace cake::store

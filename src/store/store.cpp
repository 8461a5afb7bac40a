// SQLite store: opening, schema migrations keyed by PRAGMA user_version, and the RAII statement wrapper.
#include "store/store.h"

#include <sqlite3.h>

#include <chrono>
#include <cstdio>
#include <iterator>
#include <utility>

#include "core/error.h"
#include "core/paths.h"

namespace cake::store {

namespace {

// Migration i (0-based) brings the schema from version i to i+1. Append, never edit a shipped one.
constexpr const char* kMigrations[] = {
    R"sql(
CREATE TABLE IF NOT EXISTS runs (
  id            INTEGER PRIMARY KEY,
  started_at    TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  command       TEXT NOT NULL,
  contract_name TEXT,
  contract_hash TEXT,
  target_json   TEXT,
  cake_version  TEXT
);
CREATE TABLE IF NOT EXISTS candidates (
  id            INTEGER PRIMARY KEY,
  run_id        INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  track         TEXT NOT NULL,
  knobs_json    TEXT,
  source_hash   TEXT,
  artifact_path TEXT,
  parent_id     INTEGER REFERENCES candidates(id) ON DELETE SET NULL,
  created_at    TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
CREATE INDEX IF NOT EXISTS candidates_run ON candidates(run_id);
CREATE INDEX IF NOT EXISTS candidates_parent ON candidates(parent_id);
CREATE TABLE IF NOT EXISTS measurements (
  id             INTEGER PRIMARY KEY,
  candidate_id   INTEGER NOT NULL REFERENCES candidates(id) ON DELETE CASCADE,
  case_set       TEXT NOT NULL,
  case_index     INTEGER NOT NULL,
  dtype          TEXT NOT NULL,
  verdict        TEXT NOT NULL,
  time_ns_median REAL,
  time_ns_spread REAL,
  mere           REAL,
  mare           REAL,
  efficiency     REAL,
  created_at     TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
CREATE INDEX IF NOT EXISTS measurements_candidate ON measurements(candidate_id);
CREATE TABLE IF NOT EXISTS traces (
  id          INTEGER PRIMARY KEY,
  run_id      INTEGER REFERENCES runs(id) ON DELETE CASCADE,
  skill       TEXT NOT NULL,
  input_json  TEXT,
  output_json TEXT,
  elapsed_ms  REAL,
  created_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
CREATE INDEX IF NOT EXISTS traces_run ON traces(run_id);
CREATE TABLE IF NOT EXISTS router_abilities (
  target      TEXT NOT NULL,
  policy      TEXT NOT NULL,
  track       TEXT NOT NULL,
  params_json TEXT NOT NULL,
  fitted_at   TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  PRIMARY KEY (target, policy, track)
);
)sql",
    // 2: every measured (operator, track) outcome the router learns from (DESIGN §7 L3).
    R"sql(
CREATE TABLE IF NOT EXISTS router_outcomes (
  id            INTEGER PRIMARY KEY,
  target        TEXT NOT NULL,
  policy        TEXT NOT NULL,
  track         TEXT NOT NULL,
  operator      TEXT NOT NULL,
  contract_hash TEXT NOT NULL,
  profile_json  TEXT NOT NULL,
  score         REAL NOT NULL,
  run_id        INTEGER REFERENCES runs(id) ON DELETE SET NULL,
  created_at    TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
CREATE INDEX IF NOT EXISTS router_outcomes_key ON router_outcomes(target, policy);
)sql",
    // 3: Evolution mode (DESIGN §8): every variant as it is planned and measured, and one row per round, so
    // an interrupted run resumes with nothing lost or measured twice.
    R"sql(
CREATE TABLE IF NOT EXISTS evolution_variants (
  id            INTEGER PRIMARY KEY,
  run_id        INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  round         INTEGER NOT NULL,
  track         TEXT NOT NULL,
  knobs_json    TEXT NOT NULL,
  source_hash   TEXT NOT NULL,
  parent_id     INTEGER REFERENCES evolution_variants(id) ON DELETE SET NULL,
  strategy      TEXT NOT NULL,
  status        TEXT NOT NULL,
  candidate_id  INTEGER REFERENCES candidates(id) ON DELETE SET NULL,
  total_s       REAL,
  efficiency    REAL,
  passed        INTEGER,
  total         INTEGER,
  result_json   TEXT,
  measured_at   TEXT,
  UNIQUE (run_id, track, knobs_json)
);
CREATE INDEX IF NOT EXISTS evolution_variants_run ON evolution_variants(run_id, round);
CREATE TABLE IF NOT EXISTS evolution_rounds (
  run_id        INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  round         INTEGER NOT NULL,
  best_id       INTEGER REFERENCES evolution_variants(id) ON DELETE SET NULL,
  best_s        REAL,
  efficiency    REAL,
  good          INTEGER,
  medium        INTEGER,
  poor          INTEGER,
  signature     TEXT,
  strategies    TEXT,
  stop_reason   TEXT,
  PRIMARY KEY (run_id, round)
);
)sql",
    // 4: the end of an Evolution run: its best and its seed timed again, alternately, and the one delivered.
    R"sql(
CREATE TABLE IF NOT EXISTS evolution_confirmations (
  run_id        INTEGER PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
  seed_id       INTEGER REFERENCES evolution_variants(id) ON DELETE SET NULL,
  best_id       INTEGER REFERENCES evolution_variants(id) ON DELETE SET NULL,
  winner_id     INTEGER REFERENCES evolution_variants(id) ON DELETE SET NULL,
  repeats       INTEGER NOT NULL,
  efficiency    REAL,
  seed_json     TEXT NOT NULL,
  best_json     TEXT NOT NULL,
  efficiencies_json TEXT NOT NULL
);
)sql",
};
static_assert(std::size(kMigrations) == Store::kSchemaVersion);

// What to add to an error when another connection's write transaction outlasted the busy wait.
std::string busy_hint(sqlite3* db) {
  return db && (sqlite3_extended_errcode(db) & 0xff) == SQLITE_BUSY
             ? " (another process held the store's write lock longer than the wait; try again when it is "
               "done)"
             : "";
}

[[noreturn]] void fail(sqlite3* db, const std::string& what) {
  throw Error("store: " + what + ": " + (db ? sqlite3_errmsg(db) : "out of memory") + busy_hint(db));
}

}  // namespace

// ---- Statement

Statement::Statement(sqlite3* db, std::string_view sql) : db_(db) {
  if (sqlite3_prepare_v2(db, sql.data(), int(sql.size()), &stmt_, nullptr) != SQLITE_OK)
    fail(db, "prepare \"" + std::string(sql.substr(0, 60)) + "\"");
}

Statement::~Statement() {
  sqlite3_finalize(stmt_);
}

Statement::Statement(Statement&& o) noexcept
    : db_(std::exchange(o.db_, nullptr)), stmt_(std::exchange(o.stmt_, nullptr)) {}

Statement& Statement::operator=(Statement&& o) noexcept {
  if (this != &o) {
    sqlite3_finalize(stmt_);
    db_ = std::exchange(o.db_, nullptr);
    stmt_ = std::exchange(o.stmt_, nullptr);
  }
  return *this;
}

void Statement::check(int rc, const char* what) {
  if (rc != SQLITE_OK) fail(db_, what);
}

Statement& Statement::bind(int index, int64_t v) {
  check(sqlite3_bind_int64(stmt_, index, v), "bind");
  return *this;
}

Statement& Statement::bind(int index, double v) {
  check(sqlite3_bind_double(stmt_, index, v), "bind");
  return *this;
}

Statement& Statement::bind(int index, std::string_view v) {
  check(sqlite3_bind_text(stmt_, index, v.data(), int(v.size()), SQLITE_TRANSIENT), "bind");
  return *this;
}

Statement& Statement::bind_null(int index) {
  check(sqlite3_bind_null(stmt_, index), "bind");
  return *this;
}

bool Statement::step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  fail(db_, "step \"" + std::string(sqlite3_sql(stmt_)).substr(0, 60) + "\"");
}

void Statement::reset() {
  sqlite3_reset(stmt_);
}

int Statement::column_count() const {
  return sqlite3_column_count(stmt_);
}
bool Statement::column_is_null(int col) const {
  return sqlite3_column_type(stmt_, col) == SQLITE_NULL;
}
int64_t Statement::column_int64(int col) const {
  return sqlite3_column_int64(stmt_, col);
}
double Statement::column_double(int col) const {
  return sqlite3_column_double(stmt_, col);
}

std::string Statement::column_text(int col) const {
  const auto* p = sqlite3_column_text(stmt_, col);
  return p ? std::string(reinterpret_cast<const char*>(p), size_t(sqlite3_column_bytes(stmt_, col)))
           : std::string();
}

// ---- Store

namespace detail {
struct BusyWait {
  std::filesystem::path path;
  std::chrono::milliseconds limit = Store::kBusyWait;
  std::chrono::steady_clock::time_point since;
  bool said = false;
};
}  // namespace detail

namespace {
constexpr auto kSayAfter = std::chrono::seconds(2);

// SQLite's busy handler: called with tries = 0, 1, ... while another connection holds the write lock;
// non-zero means try again. Sleeps 1 ms for the first tries (short transactions), 20 ms after.
int wait_for_writer(void* state, int tries) {
  auto& w = *static_cast<detail::BusyWait*>(state);
  const auto now = std::chrono::steady_clock::now();
  if (tries == 0) {
    w.since = now;
    w.said = false;
  }
  const auto waited = now - w.since;
  if (waited >= w.limit) return 0;
  if (!w.said && waited >= kSayAfter) {
    w.said = true;
    std::fprintf(stderr, "cake: waiting for another process's transaction on %s (up to %lld s)\n",
                 w.path.c_str(), static_cast<long long>(w.limit.count() / 1000));
  }
  sqlite3_sleep(tries < 20 ? 1 : 20);
  return 1;
}
}  // namespace

std::filesystem::path Store::default_path() {
  return cache_path("cake.db");
}

Store::Store(const std::filesystem::path& path) : path_(path), busy_(std::make_unique<detail::BusyWait>()) {
  busy_->path = path;
  const int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
  if (sqlite3_open_v2(path.c_str(), &db_, flags, nullptr) != SQLITE_OK) {
    const std::string msg = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    db_ = nullptr;
    throw Error("store: cannot open " + path.string() + ": " + msg);
  }
  try {
    sqlite3_extended_result_codes(db_, 1);
    sqlite3_busy_handler(db_, wait_for_writer, busy_.get());
    exec("PRAGMA foreign_keys = ON");
    if (journal_mode() != "wal") {
      Statement s(db_, "PRAGMA journal_mode = WAL");
      if (!s.step() || s.column_text(0) != "wal") throw Error("store: cannot switch to WAL journal mode");
    }
    migrate();
  } catch (const Error& e) {
    sqlite3_close(db_);
    db_ = nullptr;
    throw Error(std::string(e.what()) + " (" + path.string() + ")");
  }
}

Store::~Store() {
  sqlite3_close(db_);
}

Store::Store(Store&& o) noexcept
    : path_(std::move(o.path_)), db_(std::exchange(o.db_, nullptr)), busy_(std::move(o.busy_)) {}

void Store::set_busy_wait(std::chrono::milliseconds limit) {
  busy_->limit = limit;
}

Store& Store::operator=(Store&& o) noexcept {
  if (this != &o) {
    sqlite3_close(db_);
    path_ = std::move(o.path_);
    db_ = std::exchange(o.db_, nullptr);
    busy_ = std::move(o.busy_);
  }
  return *this;
}

void Store::exec(std::string_view sql) {
  const std::string s(sql);
  char* err = nullptr;
  if (sqlite3_exec(db_, s.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    const std::string msg = err ? err : sqlite3_errmsg(db_);
    sqlite3_free(err);
    throw Error("store: exec \"" + s.substr(0, 60) + "\": " + msg + busy_hint(db_));
  }
}

Statement Store::prepare(std::string_view sql) {
  return Statement(db_, sql);
}

int Store::schema_version() {
  Statement s(db_, "PRAGMA user_version");
  return s.step() ? int(s.column_int64(0)) : 0;
}

std::vector<std::string> Store::table_names() {
  Statement s(
      db_, "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name");
  std::vector<std::string> names;
  while (s.step()) names.push_back(s.column_text(0));
  return names;
}

std::string Store::journal_mode() {
  Statement s(db_, "PRAGMA journal_mode");
  return s.step() ? s.column_text(0) : std::string();
}

bool Store::foreign_keys() {
  Statement s(db_, "PRAGMA foreign_keys");
  return s.step() && s.column_int64(0) != 0;
}

int64_t Store::last_insert_rowid() const {
  return sqlite3_last_insert_rowid(db_);
}

void Store::migrate() {
  if (const int v = schema_version(); v > kSchemaVersion)
    throw Error("store: schema version " + std::to_string(v) + " is newer than this cake understands (" +
                std::to_string(kSchemaVersion) + ")");
  while (schema_version() < kSchemaVersion) {
    Transaction t(*this);
    // Re-read under the write lock: another process may have migrated meanwhile.
    const int v = schema_version();
    if (v >= kSchemaVersion) break;
    exec(kMigrations[v]);
    exec("PRAGMA user_version = " + std::to_string(v + 1));
    t.commit();
  }
}

// ---- Transaction

Transaction::Transaction(Store& s) : store_(s) {
  store_.exec("BEGIN IMMEDIATE");
}

Transaction::~Transaction() {
  if (!done_) sqlite3_exec(store_.handle(), "ROLLBACK", nullptr, nullptr, nullptr);
}

void Transaction::commit() {
  store_.exec("COMMIT");
  done_ = true;
}

}  // namespace cake::store

// Tests of the SQLite store: a fresh database gets every table, the schema version, WAL and foreign keys;
// reopening is idempotent; statements bind and read back; a write waits for another connection's
// transaction; bad paths and newer schemas raise cake::Error.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/error.h"
#include "store/store.h"

namespace fs = std::filesystem;
using cake::store::Statement;
using cake::store::Store;
using cake::store::Transaction;

namespace {

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/cake-store-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path db() const { return dir_ / "cake.db"; }
  fs::path dir_;
};

const std::vector<std::string> kTables = {
    "candidates",   "evolution_confirmations", "evolution_rounds", "evolution_variants",
    "measurements", "router_abilities",        "router_outcomes",  "runs",
    "traces"};

std::vector<std::string> columns(Store& s, const std::string& table) {
  Statement st = s.prepare("SELECT name FROM pragma_table_info(?1) ORDER BY cid");
  st.bind(1, table);
  std::vector<std::string> out;
  while (st.step()) out.push_back(st.column_text(0));
  return out;
}

}  // namespace

TEST_F(StoreTest, FreshDatabaseHasSchema) {
  Store s(db());
  EXPECT_TRUE(fs::exists(db()));
  EXPECT_EQ(s.path(), db());
  EXPECT_EQ(s.schema_version(), Store::kSchemaVersion);
  EXPECT_EQ(s.table_names(), kTables);
  EXPECT_EQ(s.journal_mode(), "wal");
  EXPECT_TRUE(s.foreign_keys());
  EXPECT_EQ(columns(s, "runs"), (std::vector<std::string>{"id", "started_at", "command", "contract_name",
                                                          "contract_hash", "target_json", "cake_version"}));
  EXPECT_EQ(columns(s, "candidates"),
            (std::vector<std::string>{"id", "run_id", "track", "knobs_json", "source_hash", "artifact_path",
                                      "parent_id", "created_at"}));
  EXPECT_EQ(columns(s, "measurements"),
            (std::vector<std::string>{"id", "candidate_id", "case_set", "case_index", "dtype", "verdict",
                                      "time_ns_median", "time_ns_spread", "mere", "mare", "efficiency",
                                      "created_at"}));
  EXPECT_EQ(columns(s, "traces"), (std::vector<std::string>{"id", "run_id", "skill", "input_json",
                                                            "output_json", "elapsed_ms", "created_at"}));
  EXPECT_EQ(columns(s, "router_abilities"),
            (std::vector<std::string>{"target", "policy", "track", "params_json", "fitted_at"}));
}

TEST_F(StoreTest, ReopenIsIdempotentAndKeepsData) {
  {
    Store s(db());
    s.prepare("INSERT INTO runs(command, contract_name) VALUES (?1, ?2)")
        .bind(1, "doctor")
        .bind(2, "add")
        .step();
    EXPECT_EQ(s.last_insert_rowid(), 1);
  }
  for (int i = 0; i < 3; ++i) {
    Store s(db());
    EXPECT_EQ(s.schema_version(), Store::kSchemaVersion);
    EXPECT_EQ(s.table_names(), kTables);
    Statement q = s.prepare("SELECT command, contract_name, started_at FROM runs");
    ASSERT_TRUE(q.step());
    EXPECT_EQ(q.column_text(0), "doctor");
    EXPECT_EQ(q.column_text(1), "add");
    EXPECT_FALSE(q.column_text(2).empty());
    EXPECT_FALSE(q.step());
  }
}

TEST_F(StoreTest, VersionOneDatabaseMigratesAndKeepsItsRuns) {
  {
    Store s(db());
    s.exec("INSERT INTO runs(command) VALUES ('bench standard')");
    s.exec("DROP TABLE router_outcomes; PRAGMA user_version = 1");  // what a version-1 file holds
  }
  Store s(db());
  EXPECT_EQ(s.schema_version(), Store::kSchemaVersion);
  EXPECT_EQ(s.table_names(), kTables);
  Statement st = s.prepare("SELECT count(*) FROM runs");
  ASSERT_TRUE(st.step());
  EXPECT_EQ(st.column_int64(0), 1);
}

TEST_F(StoreTest, StatementsBindAndReadBack) {
  Store s(db());
  s.exec("INSERT INTO runs(command) VALUES ('generate')");
  const int64_t run = s.last_insert_rowid();
  s.prepare("INSERT INTO candidates(run_id, track, knobs_json) VALUES (?1, ?2, ?3)")
      .bind(1, run)
      .bind(2, "simd")
      .bind(3, R"({"vec":16})")
      .step();
  const int64_t cand = s.last_insert_rowid();
  Statement ins = s.prepare(
      "INSERT INTO measurements(candidate_id, case_set, case_index, dtype, verdict, time_ns_median, mere) "
      "VALUES (?1, 'standard', ?2, 'f32', 'pass', ?3, ?4)");
  for (int i = 0; i < 3; ++i) {
    ins.bind(1, cand).bind(2, i).bind(3, 1000.5 + i).bind_null(4);
    EXPECT_FALSE(ins.step());
    ins.reset();
  }
  Statement q = s.prepare("SELECT count(*), sum(time_ns_median), max(mere IS NULL) FROM measurements");
  ASSERT_TRUE(q.step());
  EXPECT_EQ(q.column_int64(0), 3);
  EXPECT_DOUBLE_EQ(q.column_double(1), 3001.5 + 3);
  EXPECT_EQ(q.column_int64(2), 1);
  EXPECT_EQ(q.column_count(), 3);

  // Router abilities: one row per (target, policy, track).
  s.exec(
      "INSERT INTO router_abilities(target, policy, track, params_json) VALUES ('cpu', 'builtin', 'simd', "
      "'{}')");
  EXPECT_THROW(s.exec("INSERT INTO router_abilities(target, policy, track, params_json) VALUES "
                      "('cpu','builtin','simd','{}')"),
               cake::Error);
}

TEST_F(StoreTest, ForeignKeysAreEnforced) {
  Store s(db());
  EXPECT_THROW(s.exec("INSERT INTO candidates(run_id, track) VALUES (999, 'simd')"), cake::Error);
  EXPECT_THROW(s.exec("INSERT INTO measurements(candidate_id, case_set, case_index, dtype, verdict) "
                      "VALUES (999, 'standard', 0, 'f32', 'pass')"),
               cake::Error);
}

TEST_F(StoreTest, TransactionRollsBackUnlessCommitted) {
  Store s(db());
  {
    Transaction t(s);
    s.exec("INSERT INTO runs(command) VALUES ('a')");
  }
  {
    Transaction t(s);
    s.exec("INSERT INTO runs(command) VALUES ('b')");
    t.commit();
  }
  Statement q = s.prepare("SELECT group_concat(command) FROM runs");
  ASSERT_TRUE(q.step());
  EXPECT_EQ(q.column_text(0), "b");
}

// A write waits for another connection's transaction (an evolution run holds one while it measures a
// variant) and goes through once it commits; with a wait shorter than the transaction it fails, saying
// why. The wait moves with the Store.
TEST_F(StoreTest, AWriteWaitsForAnotherConnectionsTransaction) {
  using std::chrono::milliseconds;
  Store holder(db());
  Store opened(db());
  Store writer = std::move(opened);
  holder.exec("BEGIN IMMEDIATE");
  holder.exec("INSERT INTO runs(command) VALUES ('held')");
  writer.set_busy_wait(milliseconds(200));
  try {
    writer.exec("INSERT INTO runs(command) VALUES ('early')");
    FAIL() << "wrote while another connection held the write lock";
  } catch (const cake::Error& e) {
    EXPECT_NE(std::string(e.what()).find("another process held the store's write lock"), std::string::npos)
        << e.what();
  }
  writer.set_busy_wait(Store::kBusyWait);
  std::thread release([&] {
    std::this_thread::sleep_for(milliseconds(300));
    holder.exec("COMMIT");
  });
  const auto t0 = std::chrono::steady_clock::now();
  writer.exec("INSERT INTO runs(command) VALUES ('after')");
  const auto waited = std::chrono::steady_clock::now() - t0;
  release.join();
  EXPECT_GE(waited, milliseconds(250));
  Statement q = writer.prepare("SELECT group_concat(command) FROM (SELECT command FROM runs ORDER BY id)");
  ASSERT_TRUE(q.step());
  EXPECT_EQ(q.column_text(0), "held,after");
}

TEST_F(StoreTest, BadPathThrowsCakeError) {
  EXPECT_THROW(Store(dir_ / "no" / "such" / "dir" / "cake.db"), cake::Error);
  EXPECT_THROW(Store{dir_}, cake::Error);  // a directory, not a database file
  fs::path junk = dir_ / "junk.db";
  {
    FILE* f = std::fopen(junk.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    std::fputs("this is not an SQLite database, just text long enough to fill a header.......", f);
    std::fclose(f);
  }
  try {
    Store bad(junk);
    FAIL() << "opened a non-database file";
  } catch (const cake::Error& e) {
    EXPECT_NE(std::string(e.what()).find("store"), std::string::npos) << e.what();
  }
}

TEST_F(StoreTest, BadSqlThrowsWithSqliteMessage) {
  Store s(db());
  try {
    s.prepare("SELEC nonsense");
    FAIL() << "prepared invalid SQL";
  } catch (const cake::Error& e) {
    EXPECT_NE(std::string(e.what()).find("syntax error"), std::string::npos) << e.what();
  }
}

TEST_F(StoreTest, NewerSchemaIsRefused) {
  {
    Store s(db());
    s.exec("PRAGMA user_version = 99");
  }
  EXPECT_THROW(Store{db()}, cake::Error);
}

TEST_F(StoreTest, DefaultPathIsInTheCache) {
  const char* old = std::getenv("CAKE_CACHE_DIR");
  const std::string saved = old ? old : "";
  setenv("CAKE_CACHE_DIR", dir_.c_str(), 1);
  EXPECT_EQ(Store::default_path(), dir_ / "cake.db");
  {
    Store s;
    EXPECT_EQ(s.table_names(), kTables);
  }
  EXPECT_TRUE(fs::exists(dir_ / "cake.db"));
  if (old)
    setenv("CAKE_CACHE_DIR", saved.c_str(), 1);
  else
    unsetenv("CAKE_CACHE_DIR");
}

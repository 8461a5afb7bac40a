// `cake check <contract>... [--json]`: validates contracts and prints their structural profiles.
#include <unistd.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "contract/contract.h"
#include "core/error.h"
#include "profile/profile.h"

namespace cake::cli {

void add_check_command(CLI::App& app) {
  struct Opts {
    std::vector<std::string> files;
    bool json = false;
  };
  auto opts = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand("check", "validate contracts and print their structural profiles");
  cmd->add_option("contracts", opts->files, "contract files (YAML)")->required();
  cmd->add_flag("--json", opts->json, "print one JSON document on stdout");
  cmd->callback([opts] {
    nlohmann::json doc = nlohmann::json::array();
    int failed = 0;
    for (const auto& f : opts->files) {
      nlohmann::json entry = {{"file", f}};
      try {
        CheckedContract c = load_and_check(f);
        profile::Profile p = profile::profile_of(c);
        entry["ok"] = true;
        entry["name"] = c.contract.name;
        entry["level"] = c.contract.level ? nlohmann::json(c.contract.level) : nlohmann::json(nullptr);
        entry["hash"] = c.hash;
        entry["profile"] = profile::to_json(p);
        if (!opts->json) std::printf("%-22s ok   %s\n", c.contract.name.c_str(), profile::to_text(p).c_str());
      } catch (const ContractError& e) {
        ++failed;
        entry["ok"] = false;
        entry["error"] = {{"file", e.loc().file},
                          {"line", e.loc().line},
                          {"col", e.loc().col},
                          {"message", e.message()},
                          {"hint", e.hint()}};
        if (!opts->json) std::fprintf(stderr, "%s\n", e.what());
      }
      doc.push_back(std::move(entry));
    }
    if (opts->json)
      std::printf("%s\n", doc.dump(2).c_str());
    else if (opts->files.size() > 1)
      std::printf("%zu of %zu contracts valid\n", opts->files.size() - failed, opts->files.size());
    set_exit_code(failed ? 1 : 0);
  });
}

}  // namespace cake::cli

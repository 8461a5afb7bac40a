// libFuzzer target for the contract loader and checker: any byte string must either load and
// check, or raise ContractError; never crash, hang or leak. A contract that checks must also
// survive the printer: re-loading its canonical text gives the same content hash.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "contract/contract.h"
#include "contract/printer.h"
#include "core/error.h"
#include "profile/profile.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  std::string hash, printed;
  try {
    cake::CheckedContract c = cake::check_contract(cake::load_contract_text(text, "fuzz.yaml"));
    (void)cake::profile::profile_of(c);
    hash = c.hash;
    printed = cake::print_contract(c.contract);
  } catch (const cake::ContractError&) {
    return 0;
  }
  try {
    cake::CheckedContract again = cake::check_contract(cake::load_contract_text(printed, "printed.yaml"));
    if (again.hash != hash) {
      std::fprintf(stderr, "round trip changed the hash:\n%s\n", printed.c_str());
      __builtin_trap();
    }
  } catch (const cake::ContractError& e) {
    std::fprintf(stderr, "printed contract does not re-load: %s\n%s\n", e.what(), printed.c_str());
    __builtin_trap();
  }
  return 0;
}

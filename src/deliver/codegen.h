// The sources an operator package is made of (DESIGN §9), generated from a checked contract: the C
// header, the C wrapper library (cake_<op>_run, the typed entry points, lazy RTLD_LOCAL loading of the
// kernel), the CMake package files and the PyTorch custom op. Pure text generation: package.cpp writes
// the files and compiles the wrapper.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "contract/contract.h"

namespace cake::deliver {

// True for a C identifier ([A-Za-z_][A-Za-z0-9_]*); operator names must be one.
bool is_c_identifier(std::string_view s);

// The typed entry point convention, for one dtype of the contract:
//   int cake_<op>_<dtype>(const T* <input>..., T* <output>..., double <param>..., int64_t <free size>...);
// inputs and outputs in the contract's order, each a dense row-major buffer of its storage type (float;
// uint16_t for f16 / bf16 bits; int32_t, int64_t, int8_t, bool), then the params in their order, then
// every free size symbol (raw pointers carry no shapes): first those the input shapes name, in order of
// first appearance (softmax: N, D), then the others in the order of the contract's standard case rule
// (conv2d: ..., KW, S, P). cake_<op>_run keeps the ABI's order (CheckedContract::sizes: free ones sorted).
std::string typed_entry_name(const CheckedContract& c, DType d);
std::string typed_entry_decl(const CheckedContract& c, DType d);  // "int cake_softmax_f32(...)"

std::string header_source(const CheckedContract& c);         // include/cake_<op>.h
std::string wrapper_source(const CheckedContract& c);        // the wrapper library's C source
std::string cmake_config(const CheckedContract& c);          // lib/cmake/cake_<op>/cake_<op>Config.cmake
std::string cmake_config_version(std::string_view version);  // ...ConfigVersion.cmake

// The PyTorch binding: schema "softmax(Tensor x) -> Tensor" (registered in namespace `cake`), its C++
// source and the CMakeLists.txt that builds it as the shared library cake_<op>_torch. Tensor arguments
// are the contract's inputs; then one `float` per param (default: the contract's value); then one `int`
// per free size no input shape determines (a size is determined when some input dim is the symbol S or
// k*S for an integer literal k), in the typed entry points' order; then `ScalarType dtype` when no input
// carries the operator dtype. Outputs are returned (a tuple when there are several).
std::string torch_schema(const CheckedContract& c);
std::string torch_source(const CheckedContract& c);
std::string torch_cmake(const CheckedContract& c);

// A markdown section on how to call the package (entry points, CMake snippet, torch op).
std::string usage_markdown(const CheckedContract& c);

}  // namespace cake::deliver

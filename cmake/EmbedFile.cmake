# Script mode helper of cake_embed: writes IN's text as a C++ raw string named SYMBOL into OUT.
file(READ ${IN} text)
string(FIND "${text}" ")cake_embed\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${IN} contains the raw-string delimiter )cake_embed\"")
endif()
file(WRITE ${OUT} "// Generated from ${IN} by cmake/EmbedFile.cmake; do not edit.\nnamespace cake::embedded {\nextern const char* const ${SYMBOL};\nconst char* const ${SYMBOL} = R\"cake_embed(${text})cake_embed\";\n}\n")

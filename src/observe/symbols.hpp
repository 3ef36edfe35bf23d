// Names for code addresses, for weft's own reports (the blocking graph's
// dumps): "function+0x1a", the function demangled. Read from the symbol
// tables of the loaded objects' files (.symtab, else .dynsym), so static
// functions of a program that was not stripped have their names too; an
// address no symbol covers is "object+0xoffset". Not for hot paths: the
// first look-up in an object reads its file (cached afterwards, under a
// lock).
#pragma once

#include <string>

namespace weft::detail {

std::string symbolize(const void *addr);
// The function alone (demangled, no offset, no argument list), "" if unknown.
std::string function_name(const void *addr);

} // namespace weft::detail

// Docroot confinement, part one: turn a request target into a clean path
// relative to the document root, or refuse it.
//
// The target's query and fragment are dropped, %XX escapes are decoded, and
// the result is normalised segment by segment ("" and "." vanish, ".." drops
// the previous segment). Decoding comes first, so "%2e%2e" is "..". Refused
// with 400: a malformed escape, a decoded NUL, an encoded slash (%2F: it
// would let one segment name another directory), and any ".." that would
// climb above the root. Refused with 414: a path longer than PATH_MAX.
//
// Part two is in the file cache: the clean path is opened with openat2
// RESOLVE_BENEATH from a descriptor of the root, so a symlink that leaves
// the root is refused by the kernel (403) unless the server allows it.
#pragma once

#include <cstddef>
#include <string_view>

namespace weft::http {

struct CleanPath {
    static constexpr size_t kMax = 4096; // PATH_MAX
    char buf[kMax];                       // "a/b/c": no leading slash, "" is the root
    size_t len = 0;
    bool dir_form = false;                // the target ended with '/' (or is the root)

    std::string_view view() const { return {buf, len}; }
};

// 0 on success, else the HTTP status to answer (400 or 414).
int clean_path(std::string_view target, CleanPath *out);

} // namespace weft::http

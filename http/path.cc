#include "path.hpp"

namespace weft::http {
namespace {

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

} // namespace

int clean_path(std::string_view target, CleanPath *out) {
    size_t cut = target.find_first_of("?#");
    if (cut != std::string_view::npos) target = target.substr(0, cut);
    if (target.empty() || target.front() != '/') return 400;
    if (target.size() > CleanPath::kMax) return 414;

    // Decode and normalise in one pass. `seg` is where the current segment
    // starts in out->buf; `len` is the output so far, segments joined by '/'.
    char *o = out->buf;
    size_t len = 0, seg = 0;
    bool names_dir = false; // the last segment was "", "." or "..": a directory
    auto end_segment = [&]() -> bool { // false: ".." above the root
        std::string_view s(o + seg, len - seg);
        names_dir = s.empty() || s == "." || s == "..";
        if (s.empty() || s == ".") {
            len = seg;
        } else if (s == "..") {
            if (seg == 0) return false;
            // drop "x/" before it: seg-1 is the '/' that ended the previous segment
            size_t prev = seg - 1;
            while (prev > 0 && o[prev - 1] != '/') --prev;
            len = prev;
        } else {
            if (len == CleanPath::kMax) return false;
            o[len++] = '/';
        }
        seg = len;
        return true;
    };

    for (size_t i = 1; i <= target.size(); ++i) { // i = 0 is the leading '/'
        if (i == target.size() || target[i] == '/') {
            if (!end_segment()) return len == CleanPath::kMax ? 414 : 400;
            continue;
        }
        char c = target[i];
        if (c == '\0') return 400; // the parser never passes one; a caller might
        if (c == '%') {
            if (i + 2 >= target.size()) return 400; // needs two hex digits
            int h = hex_value(target[i + 1]), l = hex_value(target[i + 2]);
            if (h < 0 || l < 0) return 400;
            c = static_cast<char>(h * 16 + l);
            if (c == '\0' || c == '/') return 400;
            i += 2;
        }
        if (len == CleanPath::kMax) return 414;
        o[len++] = c;
    }
    // Every segment ended with a '/'; the path itself does not.
    out->dir_form = names_dir || len == 0;
    if (len > 0 && o[len - 1] == '/') --len;
    out->len = len;
    return 0;
}

} // namespace weft::http

#include "mime.hpp"

#include "parser.hpp"

namespace weft::http {
namespace {

struct Type {
    std::string_view ext, type;
};
constexpr Type kTypes[] = {
    {"html", "text/html; charset=utf-8"},
    {"htm", "text/html; charset=utf-8"},
    {"css", "text/css; charset=utf-8"},
    {"js", "text/javascript; charset=utf-8"},
    {"mjs", "text/javascript; charset=utf-8"},
    {"json", "application/json"},
    {"txt", "text/plain; charset=utf-8"},
    {"xml", "application/xml"},
    {"png", "image/png"},
    {"jpg", "image/jpeg"},
    {"jpeg", "image/jpeg"},
    {"gif", "image/gif"},
    {"svg", "image/svg+xml"},
    {"ico", "image/x-icon"},
    {"webp", "image/webp"},
    {"pdf", "application/pdf"},
    {"wasm", "application/wasm"},
    {"woff2", "font/woff2"},
    {"mp4", "video/mp4"},
    {"gz", "application/gzip"},
    {"zip", "application/zip"},
};

} // namespace

std::string_view content_type(std::string_view path) {
    size_t dot = path.rfind('.'), slash = path.rfind('/');
    if (dot != std::string_view::npos && (slash == std::string_view::npos || dot > slash)) {
        std::string_view ext = path.substr(dot + 1);
        for (const auto &t : kTypes)
            if (iequals(ext, t.ext)) return t.type;
    }
    return "application/octet-stream";
}

} // namespace weft::http

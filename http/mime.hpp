// Content-Type by file-name extension.
#pragma once

#include <string_view>

namespace weft::http {

// The media type for `path` by its extension (case-insensitive);
// "application/octet-stream" when the extension is unknown or missing.
std::string_view content_type(std::string_view path);

} // namespace weft::http

// HTTP dates (RFC 9110 §5.6.7): formatting, parsing, and the Date header
// formatted once per second.
#pragma once

#include <ctime>
#include <string_view>

namespace weft::http {

constexpr size_t kHttpDateLen = 29; // "Sun, 06 Nov 1994 08:49:37 GMT"

// Writes exactly kHttpDateLen characters (no NUL).
void format_http_date(time_t t, char out[kHttpDateLen]);

// IMF-fixdate, and the obsolete RFC 850 and asctime forms a recipient must
// accept. -1 if `s` is none of them.
time_t parse_http_date(std::string_view s);

// The current time as an HTTP date, reformatted when the second changes.
// One per kernel thread (thread_local): no lock, and a vproc's threads share it.
std::string_view http_date_now();

} // namespace weft::http

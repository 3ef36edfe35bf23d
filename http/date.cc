#include "date.hpp"

#include <cstring>

namespace weft::http {
namespace {

constexpr char kDays[7][4] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
constexpr char kMonths[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                 "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

void put2(char *p, int v) {
    p[0] = static_cast<char>('0' + v / 10);
    p[1] = static_cast<char>('0' + v % 10);
}

int month_of(std::string_view m) {
    for (int i = 0; i < 12; ++i)
        if (m == kMonths[i]) return i;
    return -1;
}

// Digits at s[pos, pos+n), -1 if any is not a digit.
int digits(std::string_view s, size_t pos, size_t n) {
    if (pos + n > s.size()) return -1;
    int v = 0;
    for (size_t i = pos; i < pos + n; ++i) {
        if (s[i] < '0' || s[i] > '9') return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v;
}

// "HH:MM:SS" at s[pos].
bool parse_clock(std::string_view s, size_t pos, struct tm *tm) {
    if (pos + 8 > s.size() || s[pos + 2] != ':' || s[pos + 5] != ':') return false;
    tm->tm_hour = digits(s, pos, 2);
    tm->tm_min = digits(s, pos + 3, 2);
    tm->tm_sec = digits(s, pos + 6, 2);
    return tm->tm_hour >= 0 && tm->tm_hour < 24 && tm->tm_min >= 0 && tm->tm_min < 60 && tm->tm_sec >= 0 &&
           tm->tm_sec <= 60;
}

time_t finish(struct tm *tm) {
    if (tm->tm_mday < 1 || tm->tm_mday > 31 || tm->tm_mon < 0) return -1;
    return timegm(tm);
}

} // namespace

void format_http_date(time_t t, char out[kHttpDateLen]) {
    struct tm tm;
    gmtime_r(&t, &tm);
    std::memcpy(out, kDays[tm.tm_wday], 3);
    std::memcpy(out + 3, ", ", 2);
    put2(out + 5, tm.tm_mday);
    out[7] = ' ';
    std::memcpy(out + 8, kMonths[tm.tm_mon], 3);
    out[11] = ' ';
    int y = tm.tm_year + 1900;
    put2(out + 12, (y / 100) % 100);
    put2(out + 14, y % 100);
    out[16] = ' ';
    put2(out + 17, tm.tm_hour);
    out[19] = ':';
    put2(out + 20, tm.tm_min);
    out[22] = ':';
    put2(out + 23, tm.tm_sec);
    std::memcpy(out + 25, " GMT", 4);
}

time_t parse_http_date(std::string_view s) {
    struct tm tm {};
    size_t comma = s.find(',');
    if (comma == 3) { // IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT"
        if (s.size() != kHttpDateLen || s.substr(25) != " GMT") return -1;
        tm.tm_mday = digits(s, 5, 2);
        tm.tm_mon = month_of(s.substr(8, 3));
        int y = digits(s, 12, 4);
        if (y < 1970 || !parse_clock(s, 17, &tm)) return -1;
        tm.tm_year = y - 1900;
        return finish(&tm);
    }
    if (comma != std::string_view::npos) { // RFC 850: "Sunday, 06-Nov-94 08:49:37 GMT"
        std::string_view r = s.substr(comma + 1);
        if (r.size() != 23 || r[0] != ' ' || r[3] != '-' || r[7] != '-' || r.substr(19) != " GMT") return -1;
        tm.tm_mday = digits(r, 1, 2);
        tm.tm_mon = month_of(r.substr(4, 3));
        int y = digits(r, 8, 2);
        if (y < 0 || !parse_clock(r, 11, &tm)) return -1;
        // RFC 9110 §5.6.7: a two-digit year more than 50 years in the future is in the past century.
        struct tm now;
        time_t t = time(nullptr);
        gmtime_r(&t, &now);
        tm.tm_year = 100 + y; // 20yy
        if (tm.tm_year > now.tm_year + 50) tm.tm_year -= 100;
        return finish(&tm);
    }
    // asctime: "Sun Nov  6 08:49:37 1994"
    if (s.size() != 24 || s[3] != ' ' || s[7] != ' ' || s[10] != ' ' || s[19] != ' ') return -1;
    tm.tm_mon = month_of(s.substr(4, 3));
    tm.tm_mday = s[8] == ' ' ? digits(s, 9, 1) : digits(s, 8, 2);
    int y = digits(s, 20, 4);
    if (y < 1970 || !parse_clock(s, 11, &tm)) return -1;
    tm.tm_year = y - 1900;
    return finish(&tm);
}

std::string_view http_date_now() {
    thread_local time_t shown = -1;
    thread_local char text[kHttpDateLen];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME_COARSE, &ts); // vDSO, no system call
    if (ts.tv_sec != shown) {
        format_http_date(ts.tv_sec, text);
        shown = ts.tv_sec;
    }
    return {text, kHttpDateLen};
}

} // namespace weft::http

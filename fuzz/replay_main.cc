// Runs a libFuzzer target once on every input of the given files and
// directories (a directory's regular files, in name order), without
// libFuzzer: the corpus replay of `make test`, built with the ordinary
// compiler and, in the ASan build, with the sanitizers.
//
// Usage: replay_main CORPUS_DIR_OR_FILE...
// Exit status: 0 if at least one input ran (a failing input aborts), 1 if
// none did, 2 on a usage or read error.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

namespace fs = std::filesystem;

namespace {

bool run_file(const fs::path &p) {
    std::ifstream in(p, std::ios::binary);
    if (!in) {
        std::fprintf(stderr, "replay: cannot read %s\n", p.c_str());
        return false;
    }
    std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::printf("  %s (%zu bytes)\n", p.c_str(), bytes.size()); // the last one named is the one that failed
    std::fflush(stdout);
    static const uint8_t kEmpty[1] = {0};
    LLVMFuzzerTestOneInput(bytes.empty() ? kEmpty : bytes.data(), bytes.size());
    return true;
}

} // namespace

int main(int argc, char **argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: %s CORPUS_DIR_OR_FILE...\n", argv[0]);
        return 2;
    }
    size_t ran = 0;
    for (int i = 1; i < argc; ++i) {
        const fs::path arg(argv[i]);
        std::error_code ec;
        std::vector<fs::path> files;
        if (fs::is_directory(arg, ec)) {
            for (const auto &entry : fs::directory_iterator(arg, ec))
                if (entry.is_regular_file()) files.push_back(entry.path());
            std::sort(files.begin(), files.end());
        } else if (fs::is_regular_file(arg, ec)) {
            files.push_back(arg);
        } else {
            std::fprintf(stderr, "replay: %s is neither a file nor a directory\n", argv[i]);
            return 2;
        }
        if (ec) {
            std::fprintf(stderr, "replay: %s: %s\n", argv[i], ec.message().c_str());
            return 2;
        }
        for (const auto &f : files) {
            if (!run_file(f)) return 2;
            ++ran;
        }
    }
    std::printf("replayed %zu input%s\n", ran, ran == 1 ? "" : "s");
    if (ran == 0) {
        std::fprintf(stderr, "replay: no inputs found\n");
        return 1;
    }
    return 0;
}

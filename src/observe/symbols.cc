#include "observe/symbols.hpp"

#include <cxxabi.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

namespace weft::detail {

namespace {

struct Symbol {
    uintptr_t lo, size; // link-time address
    std::string name;   // demangled
};

struct Object {
    std::vector<Symbol> symbols; // sorted by lo
};

std::string demangle(const char *name) {
    int status = 0;
    char *d = abi::__cxa_demangle(name, nullptr, nullptr, &status);
    if (status != 0 || !d) return name;
    std::string s(d);
    std::free(d);
    return s;
}

// The function symbols of an ELF file: .symtab when it has one, else .dynsym.
Object read_object(const char *path) {
    Object obj;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return obj;
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size < static_cast<off_t>(sizeof(Elf64_Ehdr))) {
        close(fd);
        return obj;
    }
    size_t size = static_cast<size_t>(st.st_size);
    void *map = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return obj;
    auto *base = static_cast<const char *>(map);
    auto in_file = [&](uint64_t off, uint64_t n) { return off <= size && n <= size - off; };
    const auto *eh = reinterpret_cast<const Elf64_Ehdr *>(base);
    if (std::memcmp(eh->e_ident, ELFMAG, SELFMAG) == 0 && eh->e_ident[EI_CLASS] == ELFCLASS64 &&
        eh->e_shentsize == sizeof(Elf64_Shdr) && in_file(eh->e_shoff, uint64_t{eh->e_shnum} * sizeof(Elf64_Shdr))) {
        const auto *sh = reinterpret_cast<const Elf64_Shdr *>(base + eh->e_shoff);
        const Elf64_Shdr *table = nullptr;
        for (int want : {SHT_SYMTAB, SHT_DYNSYM}) {
            for (unsigned i = 0; i < eh->e_shnum && !table; ++i)
                if (sh[i].sh_type == static_cast<unsigned>(want) && sh[i].sh_link < eh->e_shnum) table = &sh[i];
            if (table) break;
        }
        if (table && in_file(table->sh_offset, table->sh_size)) {
            const Elf64_Shdr &strs = sh[table->sh_link];
            if (in_file(strs.sh_offset, strs.sh_size)) {
                const auto *syms = reinterpret_cast<const Elf64_Sym *>(base + table->sh_offset);
                size_t n = table->sh_size / sizeof(Elf64_Sym);
                for (size_t i = 0; i < n; ++i) {
                    const Elf64_Sym &s = syms[i];
                    if (ELF64_ST_TYPE(s.st_info) != STT_FUNC || s.st_value == 0 || s.st_name >= strs.sh_size)
                        continue;
                    const char *name = base + strs.sh_offset + s.st_name;
                    if (!std::memchr(name, 0, strs.sh_size - s.st_name)) continue;
                    // gcc's local aliases of global functions (f.localalias)
                    // sit at the same address as f: keep f's name.
                    size_t len = std::strlen(name);
                    if (len > 11 && !std::strcmp(name + len - 11, ".localalias")) continue;
                    obj.symbols.push_back({s.st_value, s.st_size, demangle(name)});
                }
            }
        }
    }
    munmap(map, size);
    std::sort(obj.symbols.begin(), obj.symbols.end(), [](const Symbol &a, const Symbol &b) { return a.lo < b.lo; });
    return obj;
}

struct Found {
    std::string object; // file name
    uintptr_t bias = 0; // load address - link address
    uintptr_t lo = 0;   // link address of the object's lowest segment
    bool ok = false;
};

// Which loaded object holds addr.
Found object_of(uintptr_t addr) {
    Found f;
    struct Arg {
        uintptr_t addr;
        Found *f;
    } arg{addr, &f};
    dl_iterate_phdr(
        [](dl_phdr_info *info, size_t, void *p) -> int {
            auto *a = static_cast<Arg *>(p);
            for (int i = 0; i < info->dlpi_phnum; ++i) {
                const ElfW(Phdr) &ph = info->dlpi_phdr[i];
                if (ph.p_type != PT_LOAD) continue;
                uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
                if (a->addr >= lo && a->addr < lo + ph.p_memsz) {
                    a->f->object = info->dlpi_name && *info->dlpi_name ? info->dlpi_name : "/proc/self/exe";
                    a->f->bias = info->dlpi_addr;
                    a->f->ok = true;
                    return 1;
                }
            }
            return 0;
        },
        &arg);
    return f;
}

std::mutex g_lock;
std::map<std::string, Object> g_objects;

const Symbol *lookup(uintptr_t addr, Found *where) {
    *where = object_of(addr);
    if (!where->ok) return nullptr;
    auto it = g_objects.find(where->object);
    if (it == g_objects.end()) it = g_objects.emplace(where->object, read_object(where->object.c_str())).first;
    const std::vector<Symbol> &v = it->second.symbols;
    uintptr_t link = addr - where->bias;
    auto u = std::upper_bound(v.begin(), v.end(), link, [](uintptr_t a, const Symbol &s) { return a < s.lo; });
    if (u == v.begin()) return nullptr;
    const Symbol &s = *(u - 1);
    if (s.size && link >= s.lo + s.size) return nullptr;
    return &s;
}

const char *basename_of(const std::string &path) {
    const char *slash = std::strrchr(path.c_str(), '/');
    return slash ? slash + 1 : path.c_str();
}

} // namespace

std::string symbolize(const void *addr) {
    auto a = reinterpret_cast<uintptr_t>(addr);
    char buf[64];
    std::lock_guard<std::mutex> g(g_lock);
    Found where;
    if (const Symbol *s = lookup(a, &where)) {
        std::snprintf(buf, sizeof buf, "+0x%lx", static_cast<unsigned long>(a - where.bias - s->lo));
        return s->name + buf;
    }
    if (where.ok) {
        std::snprintf(buf, sizeof buf, "+0x%lx", static_cast<unsigned long>(a - where.bias));
        return std::string(basename_of(where.object)) + buf;
    }
    std::snprintf(buf, sizeof buf, "%p", addr);
    return buf;
}

std::string function_name(const void *addr) {
    std::lock_guard<std::mutex> g(g_lock);
    Found where;
    const Symbol *s = lookup(reinterpret_cast<uintptr_t>(addr), &where);
    if (!s) return "";
    // "ns::f(int, char)" -> "ns::f": the argument list says little in a graph.
    std::string n = s->name;
    int depth = 0;
    for (size_t i = n.size(); i-- > 0;) {
        if (n[i] == ')') ++depth;
        else if (n[i] == '(' && --depth == 0) {
            if (i > 0) n.resize(i);
            break;
        }
    }
    // "(anonymous namespace)::" says nothing in a label.
    static const std::string anon = "(anonymous namespace)::";
    for (size_t at; (at = n.find(anon)) != std::string::npos;) n.erase(at, anon.size());
    return n;
}

} // namespace weft::detail

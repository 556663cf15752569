// Parses the ptxas -v report line by line. ptxas prints, per entry function: "Compiling entry function 'F'",
// "Function properties for F" followed by a stack/spill line, then "Used N registers, ... N bytes smem"; and, for a
// Hopper kernel whose wgmmas it serialized, a note "... wgmma.mma_async instructions are serialized due to ... in the
// function 'F'".
#include "compile/ptxas_report.hpp"

#include <cctype>
#include <map>
#include <optional>

namespace coda {
namespace {

struct Frame {
    int stack = 0;
    int spill_stores = 0;
    int spill_loads = 0;
};

std::string_view trim(std::string_view s) {
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
    return s;
}

// The integer written just before `unit` in `line` (e.g. unit " registers" in "Used 40 registers,").
std::optional<int> number_before(std::string_view line, std::string_view unit) {
    const std::size_t at = line.find(unit);
    if (at == std::string_view::npos) return std::nullopt;
    std::size_t begin = at;
    while (begin > 0 && std::isdigit(static_cast<unsigned char>(line[begin - 1]))) --begin;
    if (begin == at) return std::nullopt;
    long value = 0;
    for (std::size_t i = begin; i < at && value < (1L << 30); ++i) value = value * 10 + (line[i] - '0');
    return static_cast<int>(value);
}

// Text after `marker`, up to the next quote if the name is quoted, else to the end of the line.
std::optional<std::string> name_after(std::string_view line, std::string_view marker) {
    const std::size_t at = line.find(marker);
    if (at == std::string_view::npos) return std::nullopt;
    std::string_view rest = trim(line.substr(at + marker.size()));
    if (!rest.empty() && rest.front() == '\'') {
        rest.remove_prefix(1);
        rest = rest.substr(0, rest.find('\''));
    }
    if (rest.empty()) return std::nullopt;
    return std::string(rest);
}

}  // namespace

std::vector<ResourceUsage> parse_ptxas_report(std::string_view log) {
    std::vector<ResourceUsage> kernels;
    std::map<std::string, Frame> frames;
    std::map<std::string, bool> serialized;  // functions named by a wgmma serialization note
    std::string properties_of;      // the function whose "Function properties" line came last
    constexpr std::size_t kNone = static_cast<std::size_t>(-1);
    std::size_t current = kNone;  // index of the entry function being compiled, target of "Used ..." lines

    while (!log.empty()) {
        const std::size_t eol = log.find('\n');
        const std::string_view line = log.substr(0, eol);
        log = eol == std::string_view::npos ? std::string_view() : log.substr(eol + 1);
        if (line.find("ptxas") == std::string_view::npos) continue;

        if (line.find("wgmma.mma_async instructions are serialized") != std::string_view::npos) {
            if (auto name = name_after(line, "in the function")) serialized[*name] = true;
        } else if (auto name = name_after(line, "Compiling entry function")) {
            current = kernels.size();
            kernels.push_back(ResourceUsage{*name});
            properties_of.clear();
        } else if (auto name = name_after(line, "Function properties for")) {
            properties_of = *name;
        } else if (line.find("bytes stack frame") != std::string_view::npos) {
            if (properties_of.empty()) continue;
            Frame& f = frames[properties_of];
            f.stack = number_before(line, " bytes stack frame").value_or(0);
            f.spill_stores = number_before(line, " bytes spill stores").value_or(0);
            f.spill_loads = number_before(line, " bytes spill loads").value_or(0);
        } else if (line.find("Used ") != std::string_view::npos && current != kNone) {
            kernels[current].registers = number_before(line, " registers").value_or(0);
            kernels[current].shared_bytes = number_before(line, " bytes smem").value_or(0);
            current = kNone;  // a second "Used" line without a new entry function belongs to nobody
        }
    }
    // The properties block may come before or after the "Used" line, so frames are joined at the end.
    for (ResourceUsage& k : kernels) {
        k.wgmma_serialized = serialized.count(k.function) > 0 ? 1 : 0;
        if (auto it = frames.find(k.function); it != frames.end()) {
            k.stack_frame_bytes = it->second.stack;
            k.spill_store_bytes = it->second.spill_stores;
            k.spill_load_bytes = it->second.spill_loads;
        }
    }
    return kernels;
}

}  // namespace coda

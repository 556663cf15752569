// Parses "sm_<digits>[a|f]"; compute_* names are rejected since they give PTX, not a cubin.
#include "util/arch.hpp"

#include <cctype>

#include "coda/kernel_abi.cuh"

namespace coda {

std::optional<int> sm_number(std::string_view arch) {
    if (arch.substr(0, 3) != "sm_") return std::nullopt;
    std::size_t digits = 0;
    while (3 + digits < arch.size() && std::isdigit(static_cast<unsigned char>(arch[3 + digits]))) ++digits;
    const std::string_view suffix = arch.substr(3 + digits);
    if (digits < 2 || digits > 3 || !(suffix.empty() || suffix == "a" || suffix == "f")) return std::nullopt;
    int number = 0;
    for (std::size_t i = 3; i < 3 + digits; ++i) number = number * 10 + (arch[i] - '0');
    return number;
}

int max_dynamic_smem_bytes(int number) {
    constexpr int kKiB = 1024;
    if (number == 80 || number == 87) return 163 * kKiB;
    // 9.x to 11.x share sm_90's limit, which the Hopper mainloop's stage budget is written against.
    if (number >= 90 && number < 120) return kSm90MaxDynamicSmemBytes;
    return 99 * kKiB;
}

}  // namespace coda

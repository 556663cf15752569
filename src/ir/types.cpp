// Text names of the vocabulary types; the parser and printer both go through these tables.
#include "coda/types.hpp"

#include <array>
#include <utility>

namespace coda {
namespace {

template <class E, std::size_t N>
std::string_view name_of(const std::array<std::pair<E, std::string_view>, N>& table, E e) {
    for (const auto& [value, name] : table)
        if (value == e) return name;
    return "?";
}

template <class E, std::size_t N>
std::optional<E> value_of(const std::array<std::pair<E, std::string_view>, N>& table, std::string_view s) {
    for (const auto& [value, name] : table)
        if (name == s) return value;
    return std::nullopt;
}

constexpr std::array<std::pair<DType, std::string_view>, 6> kDTypes{
    {{DType::BF16, "bf16"}, {DType::F16, "f16"}, {DType::F32, "f32"}, {DType::I32, "i32"}, {DType::E4M3, "e4m3"},
     {DType::E5M2, "e5m2"}}};
constexpr std::array<std::pair<Domain, std::string_view>, 3> kDomains{
    {{Domain::Gemm, "gemm"}, {Domain::Tile, "tile"}, {Domain::Finalize, "finalize"}}};
constexpr std::array<std::pair<Width, std::string_view>, 3> kWidths{
    {{Width::Half, "half"}, {Width::Full, "full"}, {Width::Double, "double"}}};
constexpr std::array<std::pair<ReduceOp, std::string_view>, 5> kReduceOps{{{ReduceOp::Sum, "sum"},
                                                                           {ReduceOp::Max, "max"},
                                                                           {ReduceOp::Min, "min"},
                                                                           {ReduceOp::SumSq, "sumsq"},
                                                                           {ReduceOp::Lse, "lse"}}};
constexpr std::array<std::pair<Major, std::string_view>, 2> kMajors{{{Major::K, "k"}, {Major::MN, "mn"}}};
constexpr std::array<std::pair<Accumulation, std::string_view>, 2> kAccumulations{
    {{Accumulation::Fast, "fast"}, {Accumulation::Promoted, "promoted"}}};
constexpr std::array<std::pair<ScaleMode, std::string_view>, 3> kScaleModes{
    {{ScaleMode::Off, "none"}, {ScaleMode::Block128x128, "block"}, {ScaleMode::Block1x128, "block_1x128"}}};

}  // namespace

std::string_view to_string(DType d) { return name_of(kDTypes, d); }
std::string_view to_string(Domain d) { return name_of(kDomains, d); }
std::string_view to_string(Width w) { return name_of(kWidths, w); }
std::string_view to_string(ReduceOp r) { return name_of(kReduceOps, r); }
std::string_view to_string(Major m) { return name_of(kMajors, m); }
std::string_view to_string(Accumulation a) { return name_of(kAccumulations, a); }
std::string_view to_string(ScaleMode s) { return name_of(kScaleModes, s); }

std::optional<DType> parse_dtype(std::string_view s) { return value_of(kDTypes, s); }
std::optional<Domain> parse_domain(std::string_view s) { return value_of(kDomains, s); }
std::optional<Width> parse_width(std::string_view s) { return value_of(kWidths, s); }
std::optional<ReduceOp> parse_reduce_op(std::string_view s) { return value_of(kReduceOps, s); }
std::optional<Major> parse_major(std::string_view s) { return value_of(kMajors, s); }
std::optional<Accumulation> parse_accumulation(std::string_view s) { return value_of(kAccumulations, s); }
std::optional<ScaleMode> parse_scale_mode(std::string_view s) { return value_of(kScaleModes, s); }

std::size_t size_of(DType d) {
    switch (d) {
        case DType::E4M3:
        case DType::E5M2: return 1;
        case DType::BF16:
        case DType::F16: return 2;
        case DType::F32:
        case DType::I32: return 4;
    }
    return 0;
}

int values_per_pair(Width w) {
    switch (w) {
        case Width::Half: return 1;
        case Width::Full: return 2;
        case Width::Double: return 4;
    }
    return 2;
}

long long columns(Width w, long long n) {
    switch (w) {
        case Width::Half: return n / 2;
        case Width::Full: return n;
        case Width::Double: return 2 * n;
    }
    return n;
}

}  // namespace coda

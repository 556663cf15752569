// The skip ledger (skip_ledger.hpp).
#include "support/skip_ledger.hpp"

#include <fmt/format.h>

namespace coda::test {

void SkipLedger::skipped(const std::string& test_case, const std::string& why) { skipped_.emplace(test_case, why); }

void SkipLedger::ran() { ++cases_run_; }

int SkipLedger::exit_code(int framework_result) const {
    if (framework_result != 0) return framework_result;
    return cases_run_ > 0 && cases_skipped() >= cases_run_ ? kSkipExitCode : 0;
}

std::string SkipLedger::summary() const {
    if (skipped_.empty()) return {};
    std::string s = fmt::format("{} of {} test cases skipped, not passed:", cases_skipped(), cases_run_);
    for (const auto& [test_case, why] : skipped_) s += fmt::format("\n  {}: {}", test_case, why);
    return s;
}

std::string SkipLedger::line(const std::string& test_case, const std::string& why) {
    return fmt::format("SKIPPED: {}: {}", test_case, why);
}

}  // namespace coda::test

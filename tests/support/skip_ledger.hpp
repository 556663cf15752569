// Which test cases of a run skipped and why, so that a suite whose cases need hardware this machine lacks reports
// them as skipped (the exit code ctest reads as such), never as passed. Plain C++, so the CPU tests can check it.
#pragma once

#include <map>
#include <string>

namespace coda::test {

// The exit code ctest reports as "skipped" (SKIP_RETURN_CODE in tests/CMakeLists.txt).
inline constexpr int kSkipExitCode = 77;

class SkipLedger {
public:
    // A case that ended early for want of hardware; a case that skips more than once (its sections) counts once.
    void skipped(const std::string& test_case, const std::string& why);
    // Every case that ended, skipped or not.
    void ran();

    int cases_run() const { return cases_run_; }
    int cases_skipped() const { return static_cast<int>(skipped_.size()); }

    // The run's exit code from the test framework's: a failure stays one; a run in which every case that ran
    // skipped (ctest runs one case at a time) is kSkipExitCode; otherwise 0.
    int exit_code(int framework_result) const;
    // When any case skipped: "N of M test cases skipped, not passed:" and a line per case with its reason; else
    // empty.
    std::string summary() const;

    // "SKIPPED: <case>: <why>", the line a skip prints.
    static std::string line(const std::string& test_case, const std::string& why);

private:
    std::map<std::string, std::string> skipped_;  // case -> its first reason
    int cases_run_ = 0;
};

}  // namespace coda::test

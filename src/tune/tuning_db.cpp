// The tuning database's file format, its locked and atomic update, and the in-memory copy that follows the
// file. A bad line never stops a run: it is skipped with a warning, and the next `coda tune` rewrites the file.
#include "tune/tuning_db.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>

#include <fmt/format.h>

#include "cache/file_lock.hpp"
#include "coda/error.hpp"
#include "config/settings.hpp"
#include "mainloop/mainloops.hpp"
#include "util/log.hpp"

namespace coda {
namespace {

namespace fs = std::filesystem;

constexpr std::size_t kFields = 5;
// Past this many, one line sums up the rest, so a mangled file does not flood the log.
constexpr int kWarnedLinesMax = 5;

std::int64_t round_up_to_power_of_two(std::int64_t v) {
    std::int64_t p = 1;
    while (p < v && p <= INT64_MAX / 2) p <<= 1;
    return p;
}

std::vector<std::string> split_tabs(const std::string& line) {
    std::vector<std::string> fields;
    std::size_t start = 0;
    for (std::size_t tab; (tab = line.find('\t', start)) != std::string::npos; start = tab + 1)
        fields.push_back(line.substr(start, tab - start));
    fields.push_back(line.substr(start));
    return fields;
}

bool is_graph_hash(const std::string& s) {
    return s.size() == 16 && std::all_of(s.begin(), s.end(), [](char c) {
               return std::isdigit(static_cast<unsigned char>(c)) || (c >= 'a' && c <= 'f');
           });
}

// Exactly the spellings shape_class produces.
bool is_shape_class(const std::string& s) {
    if (s == "any") return true;
    long long m = 0, n = 0, k = 0;
    char tail = 0;
    if (std::sscanf(s.c_str(), "m%lld n%lld k%lld%c", &m, &n, &k, &tail) != 3) return false;
    return shape_class(ProblemShape{m, n, k}) == s;
}

// Only configs coda tune can choose are accepted: every one is valid for every graph, so a record can never
// make a later compile fail. A record of a config that is no longer a candidate is stale: tune again.
bool is_candidate(const KernelConfig& c) {
    const std::vector<NamedConfig> named = mainloop_of(c).candidates();
    return std::any_of(named.begin(), named.end(), [&](const NamedConfig& n) { return n.config == c; });
}

// The reason a line is not a record, or "" when `out` holds it.
std::string parse_line(const std::string& line, TuningRecord& out) {
    const std::vector<std::string> f = split_tabs(line);
    if (f.size() != kFields)
        return fmt::format("{} tab-separated fields instead of {} (gpu, graph hash, shape class, config, median ms)",
                           f.size(), kFields);
    if (f[0].empty()) return "empty GPU name";
    if (!is_graph_hash(f[1])) return fmt::format("graph hash '{}' is not 16 lowercase hex digits", f[1]);
    if (!is_shape_class(f[2])) return fmt::format("shape class '{}' is not like 'm4096 n4096 k4096' or 'any'", f[2]);
    std::optional<KernelConfig> config;
    try {
        config = KernelConfig::parse(f[3]);
    } catch (const Error& e) {
        return e.what();
    }
    if (!is_candidate(*config))
        return fmt::format("config '{}' is not one that coda tune times (run coda tune again)", f[3]);
    char* end = nullptr;
    const double ms = std::strtod(f[4].c_str(), &end);
    if (f[4].empty() || end != f[4].c_str() + f[4].size() || !std::isfinite(ms) || ms < 0)
        return fmt::format("median '{}' is not a non-negative number of milliseconds", f[4]);
    out = TuningRecord{f[0], f[1], f[2], *config, ms};
    return "";
}

// Tabs and line breaks would split the record; device names have neither, but keep the format safe.
std::string one_field(std::string s) {
    std::replace_if(s.begin(), s.end(), [](char c) { return c == '\t' || c == '\n' || c == '\r'; }, ' ');
    return s;
}

}  // namespace

std::string shape_class(const ProblemShape& s) {
    if (s.m <= 0 || s.n <= 0 || s.k <= 0) return "any";
    return fmt::format("m{} n{} k{}", round_up_to_power_of_two(s.m), round_up_to_power_of_two(s.n),
                       round_up_to_power_of_two(s.k));
}

std::string format_tuning_line(const TuningRecord& r) {
    return fmt::format("{}\t{}\t{}\t{}\t{:.6g}", one_field(r.gpu), r.graph_hash, r.shape_class, r.config.to_text(),
                       r.median_ms);
}

TuningDb TuningDb::parse(const std::string& text, const std::string& source) {
    TuningDb db;
    std::istringstream in(text);
    int line_number = 0, skipped = 0;
    for (std::string line; std::getline(in, line);) {
        ++line_number;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.empty() || line[0] == '#') continue;
        TuningRecord record;
        const std::string problem = parse_line(line, record);
        if (problem.empty()) {
            db.put(std::move(record));
            continue;
        }
        if (++skipped <= kWarnedLinesMax)
            logger("coda.tune")->warn("{}:{}: skipping a corrupt tuning record: {}", source, line_number, problem);
    }
    if (skipped > kWarnedLinesMax)
        logger("coda.tune")->warn("{}: skipped {} more corrupt tuning records", source, skipped - kWarnedLinesMax);
    return db;
}

TuningDb TuningDb::load(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        std::error_code ec;
        if (fs::exists(path, ec))
            logger("coda.tune")->warn("cannot read the tuning database {}; using the default configs", path.string());
        return {};
    }
    std::stringstream text;
    text << in.rdbuf();
    return parse(text.str(), path.string());
}

const TuningRecord* TuningDb::find(const std::string& gpu, const std::string& graph_hash,
                                   const std::string& shape_class) const {
    auto it = index_.find(Key{gpu, graph_hash, shape_class});
    return it == index_.end() ? nullptr : &records_[it->second];
}

bool TuningDb::has(const std::string& gpu, const std::string& shape_class) const {
    return gpu_classes_.count({gpu, shape_class}) != 0;
}

void TuningDb::put(TuningRecord record) {
    record.gpu = one_field(std::move(record.gpu));
    Key key{record.gpu, record.graph_hash, record.shape_class};
    if (auto it = index_.find(key); it != index_.end()) {
        records_[it->second] = std::move(record);
        return;
    }
    gpu_classes_.emplace(record.gpu, record.shape_class);
    index_.emplace(std::move(key), records_.size());
    records_.push_back(std::move(record));
}

std::string TuningDb::to_text() const {
    std::string text =
        "# coda tuning database, written by `coda tune`. One record a line, fields separated by tabs:\n"
        "# gpu, graph hash, shape class, config, median ms. A later line for the same key replaces an earlier one.\n";
    for (const TuningRecord& r : records_) text += format_tuning_line(r) + "\n";
    return text;
}

void record_tuning(const fs::path& path, const TuningRecord& record) {
    const auto fail = [&](const std::string& what) {
        return Error(fmt::format("cannot record a tuned config in {}: {}; set CODA_TUNING_FILE (or CODA_CACHE_DIR) "
                                 "to a writable place",
                                 path.string(), what));
    };
    std::error_code ec;
    if (!path.parent_path().empty()) {
        fs::create_directories(path.parent_path(), ec);
        if (ec) throw fail(fmt::format("cannot create {}: {}", path.parent_path().string(), ec.message()));
    }
    std::string error;
    const fs::path lock_path = path.string() + ".lock";
    std::optional<FileLock> lock = FileLock::acquire(lock_path, error);
    if (!lock) throw fail(fmt::format("cannot lock {}: {}", lock_path.string(), error));

    // Under the lock: what other writers recorded meanwhile is in the file now and is kept.
    TuningDb db = TuningDb::load(path);
    db.put(record);
    // The lock makes this process the only writer, so its pid makes the temporary name unique.
    const fs::path temp = path.parent_path() / fmt::format(".{}.{}.tmp", path.filename().string(), ::getpid());
    {
        std::ofstream out(temp, std::ios::binary | std::ios::trunc);
        out << db.to_text();
        out.close();
        if (!out) {
            fs::remove(temp, ec);
            throw fail(fmt::format("cannot write {}", temp.string()));
        }
    }
    fs::rename(temp, path, ec);
    if (ec) {
        std::error_code ignored;
        fs::remove(temp, ignored);
        throw fail(fmt::format("cannot rename {} into place: {}", temp.string(), ec.message()));
    }
}

fs::path tuning_file() { return settings().tuning_file; }

TuningDbWatcher::TuningDbWatcher(fs::path path, std::chrono::steady_clock::duration recheck)
    : path_(std::move(path)), recheck_(recheck) {}

TuningDbWatcher::Stamp TuningDbWatcher::stamp_of(const fs::path& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return {};
    return Stamp{true, static_cast<long long>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec,
                 static_cast<long long>(st.st_size), static_cast<long long>(st.st_ino)};
}

std::shared_ptr<const TuningDb> TuningDbWatcher::current() {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto now = std::chrono::steady_clock::now();
    if (db_ && now - last_check_ < recheck_) return db_;
    last_check_ = now;
    // A rename gives a new inode, so a rewrite is seen even when the clock's resolution hides the new mtime.
    const Stamp stamp = stamp_of(path_);
    if (db_ && stamp == stamp_) return db_;
    stamp_ = stamp;
    auto db = std::make_shared<TuningDb>(stamp.exists ? TuningDb::load(path_) : TuningDb{});
    if (stamp.exists)
        logger("coda.tune")->debug("loaded {} tuning records from {}", db->records().size(), path_.string());
    db_ = std::move(db);
    return db_;
}

}  // namespace coda

// The tuning database: which tile configuration `coda tune` measured fastest, keyed by GPU name, graph hash
// and shape class. A tab-separated text file (default <cache dir>/tuning.tsv) that a user can read and edit.
#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "coda/kernel_config.hpp"
#include "coda/runtime.hpp"

namespace coda {

// The class of shapes one tuned config stands for: M, N and K each rounded up to a power of two, e.g.
// "m16384 n8192 k4096" for 16384 x 6144 x 4096. "any" when a dimension is unknown (0 or less).
std::string shape_class(const ProblemShape& shape);

struct TuningRecord {
    std::string gpu;          // the device name, e.g. "NVIDIA H200"
    std::string graph_hash;   // graph_hash(graph): 16 hex digits
    std::string shape_class;  // shape_class(shape)
    KernelConfig config = PortableConfig{};
    double median_ms = 0;     // what the winner measured (for people reading the file; lookups ignore it)
};

// One line of the file: gpu, graph hash, shape class, config text, median ms, separated by tabs.
std::string format_tuning_line(const TuningRecord& record);

// The records of one file, one per key; a later line for a key replaces an earlier one.
class TuningDb {
public:
    // Reads `path`. A missing file is an empty database; an unreadable one too, with a warning. A corrupt line
    // (wrong field count, unknown config, bad number) is skipped with a warning naming the file and line.
    static TuningDb load(const std::filesystem::path& path);
    // Parses file content; `source` names it in warnings.
    static TuningDb parse(const std::string& text, const std::string& source);

    // The record for the key, or nullptr.
    const TuningRecord* find(const std::string& gpu, const std::string& graph_hash, const std::string& shape_class) const;
    // Whether any record has this GPU and shape class: lets a lookup skip hashing the graph.
    bool has(const std::string& gpu, const std::string& shape_class) const;
    // Adds the record, or replaces the one with its key (keeping that one's place in the file).
    void put(TuningRecord record);
    const std::vector<TuningRecord>& records() const { return records_; }
    // The whole file: a comment header, then one line per record.
    std::string to_text() const;

private:
    using Key = std::tuple<std::string, std::string, std::string>;  // gpu, graph hash, shape class
    std::vector<TuningRecord> records_;
    std::map<Key, std::size_t> index_;  // into records_
    std::set<std::pair<std::string, std::string>> gpu_classes_;  // (gpu, shape class) of every record
};

// Adds or replaces `record` in the file at `path`, creating its directory. Writers of one file are serialized
// by a lock file (<path>.lock) and re-read the file under it, so no writer loses another's records; the new
// file is written to a temporary name and renamed into place, so readers never see half a file. Throws
// coda::Error naming the path when the file cannot be written.
void record_tuning(const std::filesystem::path& path, const TuningRecord& record);

// CODA_TUNING_FILE, else <cache dir>/tuning.tsv.
std::filesystem::path tuning_file();

// A database kept in memory and reloaded when its file changes (modification time, size or inode), looking at
// the file at most once per `recheck` interval, so a lookup on the hot path costs no file I/O. Thread-safe.
class TuningDbWatcher {
public:
    explicit TuningDbWatcher(std::filesystem::path path,
                             std::chrono::steady_clock::duration recheck = std::chrono::seconds(1));
    // The database as of the latest look at the file (empty while there is no file).
    std::shared_ptr<const TuningDb> current();
    const std::filesystem::path& path() const { return path_; }

private:
    struct Stamp {
        bool exists = false;
        long long mtime_ns = 0, size = 0, inode = 0;
        bool operator==(const Stamp& o) const {
            return exists == o.exists && mtime_ns == o.mtime_ns && size == o.size && inode == o.inode;
        }
    };
    static Stamp stamp_of(const std::filesystem::path& path);

    std::filesystem::path path_;
    std::chrono::steady_clock::duration recheck_;
    std::mutex mutex_;
    std::chrono::steady_clock::time_point last_check_;
    Stamp stamp_;
    std::shared_ptr<const TuningDb> db_;
};

}  // namespace coda

// CODA_RECORD: every graph a process builds, appended with its arch and config to a .coda file, so that
// `coda warm DIR/*.coda` on a build machine fills a cache with exactly a training job's kernels.
#pragma once

#include <string>

#include "runtime/pipeline.hpp"

namespace coda {

// Appends `graph`'s canonical text (as prepared: no second rendering) and a `target` line to
// CODA_RECORD/coda-record-<host>-<pid>.coda, once per cache key and process (one file per process: the processes of a
// job never interleave their writes). Without CODA_RECORD it does nothing; a failed write is a warning, never an error
// of the build.
void record_build(const PreparedGraph& graph, const BuildTarget& target, const std::string& key);

}  // namespace coda

// Tuning records that ship with coda: `coda tune` measurements of the LLaMA block's epilogues at the benchmark
// layers' shapes, on the GPU each was measured on. The default config consults them after the user's tuning file
// (whose records win) and before the mainloop's rules, which cannot tell these epilogues apart.
#pragma once

#include "tune/tuning_db.hpp"

namespace coda {

// The shipped records as text, in the tuning file's format.
const char* builtin_tuning_text();
// The same, parsed once.
const TuningDb& builtin_tuning_db();

}  // namespace coda

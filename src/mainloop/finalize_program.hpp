// Finalizers (templates/coda/finalize_program.cuh): combine reduction partials into per-row values, one thread per
// element. They take no config.
#pragma once

#include "mainloop/mainloop.hpp"

namespace coda {

const Mainloop& finalize_program_mainloop();

}  // namespace coda

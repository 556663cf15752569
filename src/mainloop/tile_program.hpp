// Tile programs (templates/coda/tile_program.cuh): epilogue graphs over M x N input tiles with no GEMM, on a fixed
// 64 x 128 tile. They take no config.
#pragma once

#include "mainloop/mainloop.hpp"

namespace coda {

const Mainloop& tile_program_mainloop();

}  // namespace coda

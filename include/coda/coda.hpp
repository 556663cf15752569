// The whole public API of coda in one include.
#pragma once

#include "coda/args.hpp"
#include "coda/error.hpp"
#include "coda/graph.hpp"
#include "coda/kernel_config.hpp"
#include "coda/limits.hpp"
#include "coda/runtime.hpp"
#include "coda/tensor.hpp"
#include "coda/text.hpp"
#include "coda/types.hpp"
#include "coda/validate.hpp"

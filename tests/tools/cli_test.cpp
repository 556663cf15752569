// The coda command line as a user runs it: warm (twice; -j spelled three ways), cache list/clear, dump, demo --no-run,
// malformed or empty graph files, usage errors and help. Each run gets a private cache directory.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "cache/kernel_cache.hpp"
#include "driver/cuda_driver.hpp"
#include "support/run_cli.hpp"
#include "support/temp_dir.hpp"

namespace {

using Run = coda::test::CliRun;

Run run(const std::string& arguments, const std::string& cache_dir) { return coda::test::run_cli(arguments, cache_dir); }

// The lines of `output` that start with `prefix` and contain `text`.
std::size_t count_lines(const std::string& output, const std::string& prefix, const std::string& text) {
    std::istringstream lines(output);
    std::size_t n = 0;
    for (std::string line; std::getline(lines, line);)
        n += line.rfind(prefix, 0) == 0 && line.find(text) != std::string::npos;
    return n;
}

}  // namespace

TEST_CASE("coda warm fills the cache and a second run compiles nothing, and cache list and clear see it", "[tools]") {
    // Every graph of tools/graphs: the block's 21 (which the demo compiles too) and the FP8 block's.
    std::size_t graphs = 0;
    for (const auto& entry : std::filesystem::directory_iterator(std::string(CODA_SOURCE_DIR) + "/tools/graphs"))
        graphs += entry.path().extension() == ".coda";
    REQUIRE(graphs > 21);
    coda::test::TempDir cache("coda-cli-cache");
    const Run first = run("warm --arch sm_90a -j 2 tools/graphs/*.coda", cache.path().string());
    INFO(first.output);
    REQUIRE(first.status == 0);
    CHECK_THAT(first.output,
               Catch::Contains(fmt::format("{0} kernels for sm_90a: {0} compiled, 0 already in the disk cache", graphs)));

    const Run second = run("warm --arch sm_90a tools/graphs/*.coda", cache.path().string());
    INFO(second.output);
    REQUIRE(second.status == 0);
    CHECK_THAT(second.output,
               Catch::Contains(fmt::format("{0} kernels for sm_90a: 0 compiled, {0} already in the disk cache", graphs)));

    const Run list = run("cache list", cache.path().string());
    REQUIRE(list.status == 0);
    CHECK_THAT(list.output, Catch::Contains(fmt::format("{} entries", graphs)) && Catch::Contains("out_proj"));

    const Run demo = run("demo --no-run", cache.path().string());
    INFO(demo.output);
    REQUIRE(demo.status == 0);
    CHECK_THAT(demo.output, Catch::Contains("struct Epilogue") && Catch::Contains("disk cache") &&
                                Catch::Contains("OK: all 21 kernels compiled"));

    const Run clear = run("cache clear", cache.path().string());
    REQUIRE(clear.status == 0);
    CHECK_THAT(clear.output, Catch::Contains(fmt::format("removed {} entries", graphs)));
    CHECK_THAT(run("cache list", cache.path().string()).output, Catch::Contains("0 entries"));
}

TEST_CASE("coda dump prints readable generated CUDA", "[tools]") {
    coda::test::TempDir cache("coda-cli-cache");
    const Run dump = run("dump tools/graphs/out_proj.coda", cache.path().string());
    INFO(dump.output);
    REQUIRE(dump.status == 0);
    CHECK_THAT(dump.output, Catch::Contains("coda generated kernel") && Catch::Contains("%x1_value = add %acc %residual") &&
                                Catch::Contains("#include \"coda/hopper_gemm.cuh\"") &&
                                Catch::Contains("coda_kernel_info"));
}

TEST_CASE("the leave-one-out variants of tools/leave_one_out parse and check", "[tools]") {
    // docs/PERFORMANCE.md times them with coda tune; dump checks each graph without compiling it.
    coda::test::TempDir cache("coda-cli-cache");
    const Run dump = run("dump tools/leave_one_out/*.coda", cache.path().string());
    INFO(dump.output);
    REQUIRE(dump.status == 0);
    for (const char* name : {"lm_lse_only", "lm_sum_only", "lm_max_only", "lm_label_only", "rb_no_accumulate",
                             "rb_no_reduce_col", "rb_accumulate_only", "rb_reduce_col_only", "sb_no_reduce_row",
                             "identity_k", "identity_mn"})
        CHECK_THAT(dump.output, Catch::Contains(std::string("graph ") + name));
}

TEST_CASE("a malformed graph file fails with the file, line and node", "[tools]") {
    coda::test::TempDir dir("coda-cli-bad");
    const std::string syntax = (dir.path() / "syntax.coda").string();
    std::ofstream(syntax) << "graph bad gemm in=bf16 a=k b=k\n%acc = accumulator\n%y = frobnicate %acc\n"
                             "%out = store bf16 %y\n";
    const Run r1 = run("dump " + syntax, dir.path().string());
    INFO(r1.output);
    CHECK(r1.status == 1);
    CHECK_THAT(r1.output, Catch::Contains("syntax.coda:3") && Catch::Contains("frobnicate"));

    const std::string typing = (dir.path() / "typing.coda").string();
    std::ofstream(typing) << "# a width mistake\ngraph bad gemm in=bf16 a=k b=k\n%acc = accumulator\n"
                             "%g = even %acc\n%sum = add %g %acc\n%out = store bf16 %sum\n";
    const Run r2 = run("warm --arch sm_90a " + typing, dir.path().string());
    INFO(r2.output);
    CHECK(r2.status == 1);
    CHECK_THAT(r2.output, Catch::Contains("typing.coda:5") && Catch::Contains("%sum"));

    const Run r3 = run("dump " + (dir.path() / "missing.coda").string(), dir.path().string());
    CHECK(r3.status == 1);
    CHECK_THAT(r3.output, Catch::Contains("cannot read graph file"));
}

TEST_CASE("coda bench block --list runs LLaMA-3's vocabulary at d = 2048 by default, only where V matters",
          "[tools]") {
    coda::test::TempDir cache("coda-cli-bench-list");
    const std::string dir = cache.path().string();
    const Run plain = run("bench block --list", dir);
    INFO(plain.output);
    REQUIRE(plain.status == 0);
    // The LM head GEMMs, cross-entropy backward and ce_finalize at V = 32768 for both widths, and at 128256 for
    // d = 2048 only; everything else once per width.
    for (const std::string graph : {"lm_head_ce ", "lm_head_ce_stats ", "lm_head_ce_backward "}) {
        CHECK(count_lines(plain.output, graph, " 2048  16384  32768   2048") == 1);
        CHECK(count_lines(plain.output, graph, " 2048  16384 128256   2048") == 1);
        CHECK(count_lines(plain.output, graph, " 4096  16384  32768   4096") == 1);
        CHECK(count_lines(plain.output, graph, "") == 3);
    }
    for (const std::string graph : {"cross_entropy_backward ", "cross_entropy_backward_row_scale "}) {
        CHECK(count_lines(plain.output, graph, "tile      2048  16384 128256") == 1);
        CHECK(count_lines(plain.output, graph, "") == 3);
    }
    // What coda.torch runs: the bf16 norm backward variants at the dgrads they sit on, the LM head's at K = V, and
    // dgamma's finalizer over the column partials (it folds into d values).
    CHECK(count_lines(plain.output, "rmsnorm_backward_residual ", "qkv dgrad       2048  16384   2048   6144") == 1);
    CHECK(count_lines(plain.output, "rmsnorm_backward_residual ", "gate/up dgrad") == 2);
    CHECK(count_lines(plain.output, "rmsnorm_backward_bf16 ", "lm head dgrad   2048  16384   2048 128256") == 1);
    CHECK(count_lines(plain.output, "rmsnorm_backward_bf16 ", "") == 3);
    CHECK(count_lines(plain.output, "dgamma_finalize ", "finalize  4096   4096   4096") == 1);
    CHECK(count_lines(plain.output, "rope_backward_from_output ", "tile      2048  16384   6144") == 1);
    CHECK(count_lines(plain.output, "swiglu_backward_tile ", "tile      4096  16384  14336") == 1);
    CHECK(count_lines(plain.output, "ce_finalize", "finalize  2048  16384 128256") == 1);
    CHECK(count_lines(plain.output, "ce_finalize", "") == 3);
    CHECK(count_lines(plain.output, "gate_up_swiglu", "") == 2);
    CHECK(count_lines(plain.output, "rms_finalize", "") == 2);
    CHECK(count_lines(plain.output, "copy", "") == 2);

    // --vocab replaces the default: each V at every --d.
    const Run given = run("bench block --list --d 4096 --vocab 128256", dir);
    INFO(given.output);
    REQUIRE(given.status == 0);
    CHECK(count_lines(given.output, "lm_head_ce ", " 4096  16384 128256   4096") == 1);
    CHECK(count_lines(given.output, "", "32768") == 0);
    CHECK(count_lines(given.output, "", " 2048  16384 ") == 0);

    // --only keeps the named graphs' rows (a finalizer's producer is built, not listed); an unknown name is an error.
    const Run only = run("bench block --list --d 2048 --vocab 32768 --only ce_finalize --only swiglu_backward", dir);
    INFO(only.output);
    REQUIRE(only.status == 0);
    CHECK(count_lines(only.output, "ce_finalize", "finalize  2048  16384  32768") == 1);
    CHECK(count_lines(only.output, "swiglu_backward ", "down dgrad") == 1);
    CHECK(count_lines(only.output, "lm_head_ce", "") == 0);
    CHECK(count_lines(only.output, "copy", "") == 0);
    CHECK_THAT(only.output, Catch::Contains("(2 rows;"));
    const Run unknown = run("bench block --list --only swiglu", dir);
    CHECK(unknown.status == 1);
    CHECK_THAT(unknown.output, Catch::Contains("--only 'swiglu' names no row") && Catch::Contains("swiglu_backward"));
}

TEST_CASE("coda bench rejects bad arguments before it needs a GPU", "[tools]") {
    coda::test::TempDir cache("coda-cli-bench");
    const std::string dir = cache.path().string();
    const Run odd = run("bench epilogue --n 7", dir);
    CHECK(odd.status != 0);
    CHECK_THAT(odd.output, Catch::Contains("need M >= 1, an even N >= 2") && Catch::Contains("N=7"));
    const Run fp8 = run("bench gemm --fp8 e4m4", dir);
    CHECK(fp8.status != 0);
    CHECK_THAT(fp8.output, Catch::Contains("e4m4") && Catch::Contains("e4m3"));
    if (!coda::Driver::instance().available()) {
        const Run fp8_gpu = run("bench gemm --fp8 e5m2 --m 256 --n 256 --k 256", dir);
        CHECK(fp8_gpu.status != 0);
        CHECK_THAT(fp8_gpu.output, Catch::Contains("bench gemm needs a GPU"));
    }
    const Run config = run("bench epilogue --config 'hopper bm=x'", dir);
    CHECK(config.status != 0);
    CHECK_THAT(config.output, Catch::Contains("'x' is not an integer"));
    // Without a GPU, bench epilogue gets as far as the GPU check: its graphs are valid.
    if (!coda::Driver::instance().available()) {
        const Run plain = run("bench epilogue", dir);
        CHECK(plain.status != 0);
        CHECK_THAT(plain.output, Catch::Contains("bench epilogue needs a GPU"));
    }
    const Run d = run("bench block --d 3000", dir);
    CHECK(d.status == 1);
    CHECK_THAT(d.output, Catch::Contains("--d must be 2048 or 4096") && Catch::Contains("3000"));
    const Run vocab = run("bench block --vocab 32001", dir);
    CHECK(vocab.status == 1);
    CHECK_THAT(vocab.output, Catch::Contains("need an even --vocab >= 2") && Catch::Contains("32001"));
    const Run vocabs = run("bench block --vocab 128256 --vocab 7 --list", dir);
    CHECK(vocabs.status == 1);
    CHECK_THAT(vocabs.output, Catch::Contains("need an even --vocab >= 2") && Catch::Contains("got 7"));
    const Run iters = run("bench block --iters 0", dir);
    CHECK(iters.status == 1);
    CHECK_THAT(iters.output, Catch::Contains("need 1 <= --iters"));
    // Without a GPU, bench block gets as far as the GPU check (its graphs built and given shapes) and writes no CSV.
    if (!coda::Driver::instance().available()) {
        const std::string csv = (cache.path() / "block.csv").string();
        const Run block = run("bench block --d 2048 --vocab 128256 --csv " + csv, dir);
        INFO(block.output);
        CHECK(block.status == 1);
        CHECK_THAT(block.output, Catch::Contains("coda bench block: error: bench block needs a GPU"));
        std::ifstream written(csv);
        std::string header;
        std::getline(written, header);
        CHECK(header.rfind("kind,epilogue,gemm,d,m,n,k", 0) == 0);
    }
    const Run hold = run("bench gemm --hold-ms -1", dir);
    CHECK(hold.status == 1);
    CHECK_THAT(hold.output, Catch::Contains("need 0 <= --hold-ms <= 600000") && Catch::Contains("-1"));
    // Without a GPU, bench gemm takes every shape set and its options, and stops at the GPU check.
    if (!coda::Driver::instance().available()) {
        const Run all = run("bench gemm --shapes all --identity-only --hold-ms 1500", dir);
        CHECK(all.status == 1);
        CHECK_THAT(all.output, Catch::Contains("bench gemm needs a GPU"));
    }
    const Run what = run("bench everything", dir);
    CHECK(what.status != 0);
    CHECK_THAT(what.output, Catch::Contains("expected 'gemm', 'jit', 'tile', 'epilogue' or 'block'"));
}

namespace {

namespace fs = std::filesystem;

// The one *.kernel file in `dir` (a test that warmed one graph finds its key this way).
fs::path only_entry(const fs::path& dir) {
    std::vector<fs::path> found;
    for (const auto& f : fs::directory_iterator(dir))
        if (f.path().extension() == ".kernel") found.push_back(f.path());
    REQUIRE(found.size() == 1);
    return found[0];
}

}  // namespace

TEST_CASE("coda cache list shows whole keys and names a FIFO or directory without hanging", "[tools]") {
    coda::test::TempDir cache("coda-cli-cache");
    const std::string dir = cache.path().string();
    const std::string key = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    coda::KernelCache(cache.path(), true).get_or_build(key, [] {
        coda::CacheEntry e;
        e.cubin = "cubin";
        e.kernel_name = "kernel";
        e.description = "a hand-made entry";
        return e;
    });
    const Run one = coda::test::run_cli_timed("cache list", dir, 20);
    INFO(one.output);
    CHECK(one.status == 0);
    CHECK_THAT(one.output, Catch::Contains(key + "  ") && Catch::Contains("a hand-made entry") &&
                               Catch::Contains("\n1 entry, "));

    const std::string fifo_key(64, 'f'), dir_key(64, 'd');
    REQUIRE(::mkfifo((cache.path() / (fifo_key + ".kernel")).c_str(), 0644) == 0);
    fs::create_directory(cache.path() / (dir_key + ".kernel"));
    const Run odd = coda::test::run_cli_timed("cache list", dir, 20);
    INFO(odd.output);
    CHECK(odd.status == 0);  // 124: it hung
    CHECK_THAT(odd.output, Catch::Contains(fifo_key) && Catch::Contains("(is a FIFO, not a cache entry)") &&
                               Catch::Contains(dir_key) && Catch::Contains("(is a directory, not a cache entry)") &&
                               Catch::Contains("\n3 entries, "));
    const Run clear = coda::test::run_cli_timed("cache clear", dir, 20);
    CHECK(clear.status == 0);
    CHECK_THAT(clear.output, Catch::Contains("removed 3 entries"));
}

TEST_CASE("coda warm rebuilds over a FIFO in its entry's place instead of hanging", "[tools]") {
    coda::test::TempDir cache("coda-cli-cache");
    const std::string dir = cache.path().string();
    const std::string graph = "warm --arch sm_90a tools/graphs/rms_finalize.coda";
    const Run first = run(graph, dir);
    INFO(first.output);
    REQUIRE(first.status == 0);
    const fs::path entry = only_entry(cache.path());
    fs::remove(entry);
    REQUIRE(::mkfifo(entry.c_str(), 0644) == 0);

    const Run again = coda::test::run_cli_timed(graph, dir, 60);
    INFO(again.output);
    CHECK(again.status == 0);  // 124: it hung
    CHECK_THAT(again.output, Catch::Contains(entry.string() + " is a FIFO, not a cache entry") &&
                                 Catch::Contains("1 kernel for sm_90a: 1 compiled"));
    CHECK(fs::is_regular_file(fs::symlink_status(entry)));
}

TEST_CASE("a read-only pre-warmed cache serves another user's warm and misses compile into memory", "[tools]") {
    coda::test::TempDir tmp("coda-cli-readonly");
    const fs::path cache = tmp.path() / "cache";
    const std::string warm_one = "warm --arch sm_90a tools/graphs/rms_finalize.coda";
    const Run warm = run(warm_one, cache.string());
    INFO(warm.output);
    REQUIRE(warm.status == 0);
    fs::permissions(tmp.path(), fs::perms(0755));  // mkdtemp's 0700 would keep the other user out altogether
    fs::permissions(cache, fs::perms(0555));

    // As nobody when the tests run as root: root's writes ignore permission bits.
    const Run hit = coda::test::run_cli_timed(warm_one, cache.string(), 60, true);
    INFO(hit.output);
    CHECK(hit.status == 0);
    CHECK_THAT(hit.output, Catch::Contains("1 kernel for sm_90a: 0 compiled, 1 already in the disk cache"));
    CHECK_THAT(hit.output, !Catch::Contains("warn") && !Catch::Contains("memory only"));

    const Run list = coda::test::run_cli_timed("cache list", cache.string(), 20, true);
    INFO(list.output);
    CHECK(list.status == 0);
    CHECK_THAT(list.output, Catch::Contains("\n1 entry, ") && !Catch::Contains("warn"));

    const Run miss = coda::test::run_cli_timed(warm_one + " tools/graphs/ce_finalize.coda", cache.string(), 60, true);
    INFO(miss.output);
    CHECK(miss.status == 0);
    CHECK_THAT(miss.output, Catch::Contains("2 kernels for sm_90a: 1 compiled, 1 already in the disk cache") &&
                                Catch::Contains("is read-only for this process"));

    const Run clear = coda::test::run_cli_timed("cache clear", cache.string(), 20, true);
    INFO(clear.output);
    CHECK(clear.status != 0);
    CHECK_THAT(clear.output, Catch::Contains("cannot clear the kernel cache"));
    fs::permissions(cache, fs::perms(0755));
    CHECK(fs::exists(only_entry(cache)));
}

TEST_CASE("coda warm takes -j N, -jN and --jobs=N, and counts in words", "[tools]") {
    coda::test::TempDir cache("coda-cli-jobs");
    const std::string dir = cache.path().string();
    // A finalize graph: the quickest kernel to compile.
    const Run attached = run("warm --arch sm_90a -j2 tools/graphs/rms_finalize.coda", dir);
    INFO(attached.output);
    REQUIRE(attached.status == 0);
    CHECK_THAT(attached.output, Catch::Contains("1 kernel for sm_90a: 1 compiled, 0 already in the disk cache"));

    const Run separate = run("warm --arch=sm_90a -j 2 tools/graphs/rms_finalize.coda", dir);
    INFO(separate.output);
    CHECK(separate.status == 0);
    CHECK_THAT(separate.output, Catch::Contains("1 kernel for sm_90a: 0 compiled, 1 already in the disk cache"));

    const Run long_form = run("warm --arch sm_90a --jobs=2 tools/graphs/rms_finalize.coda", dir);
    INFO(long_form.output);
    CHECK(long_form.status == 0);

    CHECK_THAT(run("cache list", dir).output, Catch::Contains("1 entry, "));
    CHECK_THAT(run("cache clear", dir).output, Catch::Contains("removed 1 entry from"));
}

TEST_CASE("coda warm and dump refuse input that holds no graph", "[tools]") {
    coda::test::TempDir dir("coda-cli-empty");
    const std::string cache = (dir.path() / "cache").string();
    const std::string graphs = (dir.path() / "graphs").string();
    std::filesystem::create_directories(graphs);
    const std::string empty = (dir.path() / "empty.coda").string();
    std::ofstream{empty};
    const std::string comments = (dir.path() / "comments.coda").string();
    std::ofstream(comments) << "# graph out_proj gemm\n\n   # nothing else\n";

    for (const char* command : {"warm --arch sm_90a ", "dump "}) {
        const Run directory = run(command + graphs, cache);
        INFO(directory.output);
        CHECK(directory.status == 1);
        CHECK_THAT(directory.output, Catch::Contains("'" + graphs + "' is a directory; give .coda files (e.g. " +
                                                     graphs + "/*.coda)"));
        CHECK_THAT(run(command + graphs + "/", cache).output, Catch::Contains("(e.g. " + graphs + "/*.coda)"));

        for (const std::string& file : {empty, comments}) {
            const Run nothing = run(command + file, cache);
            INFO(nothing.output);
            CHECK(nothing.status == 1);
            CHECK_THAT(nothing.output,
                       Catch::Contains("'" + file + "' holds no graph; expected a line 'graph NAME DOMAIN"));
        }
    }
    // One empty file among good ones still fails, before anything is compiled.
    const Run mixed = run("warm --arch sm_90a tools/graphs/rms_finalize.coda " + empty, cache);
    CHECK(mixed.status == 1);
    CHECK_THAT(mixed.output, Catch::Contains("holds no graph") && !Catch::Contains("compiled"));
}

TEST_CASE("usage errors exit with status 2 and say what was expected, and help exits with 0", "[tools]") {
    coda::test::TempDir cache("coda-cli-usage");
    const std::string dir = cache.path().string();
    struct Case {
        const char* arguments;
        const char* message;
    };
    for (const Case& c : {Case{"", "Usage: coda"},
                          Case{"frob", "expected 'demo', 'dump', 'warm', 'cache', 'bench', 'tune' or 'help', got 'frob'"},
                          Case{"cache", "coda cache: error: expected 'list' or 'clear'"},
                          Case{"cache show", "expected 'list' or 'clear', got 'show'"},
                          Case{"bench", "expected 'gemm', 'jit', 'tile', 'epilogue' or 'block'"},
                          Case{"warm --frobnicate tools/graphs/out_proj.coda", "--frobnicate"},
                          Case{"warm -j many tools/graphs/out_proj.coda", "many"},
                          Case{"bench gemm --iters", "--iters"},
                          Case{"bench gemm --shapes bogus", "--shapes: bogus not in {set,llama,all}"},
                          Case{"bench gemm --shapes llama --m 4096", "--m excludes --shapes"},
                          Case{"demo --no-run extra", "extra"},
                          Case{"help frob", "got 'frob'"}}) {
        const Run r = run(c.arguments, dir);
        INFO("coda " << c.arguments << "\n" << r.output);
        CHECK(r.status == 2);
        CHECK_THAT(r.output, Catch::Contains(c.message));
    }

    const Run help = run("help", dir);
    INFO(help.output);
    CHECK(help.status == 0);
    CHECK_THAT(help.output, Catch::Contains("-j,--jobs N") && Catch::Contains("--per-round P") &&
                                Catch::Contains("--no-run") && Catch::Contains("list") && Catch::Contains("clear"));
    for (const char* arguments : {"--help", "warm --help", "help warm", "help bench epilogue", "bench epilogue -h"}) {
        const Run r = run(arguments, dir);
        INFO("coda " << arguments << "\n" << r.output);
        CHECK(r.status == 0);
        CHECK_THAT(r.output, Catch::Contains("Usage: coda"));
    }
    CHECK_THAT(run("help bench epilogue", dir).output, Catch::Contains("Usage: coda bench epilogue"));
}

TEST_CASE("coda warm rejects a graph over the limits before compiling anything", "[tools]") {
    coda::test::TempDir dir("coda-cli-limits");
    // 50,000 stores once crashed NVRTC (a stack overflow); now validation turns them away.
    const std::string stores = (dir.path() / "stores.coda").string();
    {
        std::ofstream out(stores);
        out << "graph stores gemm in=bf16 a=k b=k\n%acc = accumulator\n";
        for (int i = 0; i < 50000; ++i) out << "%out" << i << " = store bf16 %acc\n";
    }
    const Run r = run("warm --arch sm_90a " + stores, dir.path().string());
    CHECK(r.status == 1);
    CHECK_THAT(r.output, Catch::Contains("stores.coda:1: graph 'stores': 50001 nodes, more than "
                                         "coda::limits::kMaxNodes") &&
                             Catch::Contains("50000 inputs and outputs") && !Catch::Contains("compiled"));
}

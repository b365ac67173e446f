#!/usr/bin/env -S node --initial-old-space-size=128
/**
 * The command's entry point: sizes libuv's thread pool, then runs the CLI (main.ts).
 *
 * DuckDB's Node binding runs every statement (and `connect`) on libuv's pool and holds a pool thread until the
 * statement ends; fs writes, fsyncs, crypto and zlib use the same pool, which is one per process and shared by
 * the worker threads. At libuv's default of 4 threads, a compaction, a flush, a tail insert and a log fsync fill
 * it, and every other read waits behind statements that run for seconds. Waiting threads cost address space, not
 * CPU (DuckDB's `threads` setting still bounds the work done at once). libuv reads the size once, when the pool
 * starts, and loading an ES module already starts it: so this entry is CommonJS, and sets the size first (and
 * DuckDB's allocator settings, below, for the same reason: they are read once, when the library loads). The first
 * line gives node the server's flags (core/node-flags.ts); `npm start` gives them too.
 */
if (!process.env.UV_THREADPOOL_SIZE) process.env.UV_THREADPOOL_SIZE = '64'
/*
 * DuckDB's allocator (its own jemalloc) hands pages it has not reused for 1 s back to the system (its build's
 * `dirty_decay_ms:1000,muzzy_decay_ms:1000`, which jemalloc prints with `stats_print:true`); under steady ingest
 * and reads the next statements fault them in again, ~10 µs a page on this machine kind. 30 s keeps them: in 5-minute
 * soaks at 2,900 calls/s the server took 14,500-18,900 page faults a second against 28,500-32,300 and 1.28-1.33 CPU
 * cores against 1.53-1.68, and the reads' medians fell 2-4x; RSS after warm-up, median 1.8 GiB against 1.2. Kept
 * pages are RSS outside DuckDB's `memory_limit`, so only the default budget (80 % of RAM) gets this: a server given
 * `--memory-limit` keeps DuckDB's 1 s (test/memory-budget's 256 MiB peaked 636-681 MiB with 30 s, 561-629 without,
 * against its bound of ~665). jemalloc reads this when libduckdb loads (main.ts's imports), so it is set here; a value
 * the user set is kept.
 */
const budgetSet = !!process.env.WEFT_MEMORY_LIMIT || process.argv.some((a) => /^--memory-limit(=|$)/.test(a))
if (!process.env.DUCKDB_JE_MALLOC_CONF && !budgetSet) process.env.DUCKDB_JE_MALLOC_CONF = 'dirty_decay_ms:30000,muzzy_decay_ms:30000'
void import('./main.js')

#!/usr/bin/env -S node --initial-old-space-size=128
/**
 * The command's entry point: sizes libuv's thread pool, then runs the CLI (main.ts).
 *
 * DuckDB's Node binding runs every statement (and `connect`) on libuv's pool and holds a pool thread until the
 * statement ends; fs writes, fsyncs, crypto and zlib use the same pool, which is one per process and shared by
 * the worker threads. At libuv's default of 4 threads, a compaction, a flush, a tail insert and a log fsync fill
 * it, and every other read waits behind statements that run for seconds. Waiting threads cost address space, not
 * CPU (DuckDB's `threads` setting still bounds the work done at once). libuv reads the size once, when the pool
 * starts, and loading an ES module already starts it: so this entry is CommonJS, and sets the size first. The
 * first line gives node the server's flags (core/node-flags.ts); `npm start` gives them too.
 */
if (!process.env.UV_THREADPOOL_SIZE) process.env.UV_THREADPOOL_SIZE = '64'
void import('./main.js')

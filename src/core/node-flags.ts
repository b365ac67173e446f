/**
 * Node flags the server runs with: `npm start` and the `weft` command (weft.cts's first line) give them, and the
 * tests and benches start servers with them (test/node-flags.test.ts checks the three agree).
 *
 * `--initial-old-space-size=128`: V8 sizes the old generation's limit from the live heap (~20 MB here) and counts
 * the bytes of new ArrayBuffers against it, so an Arrow export, whose batches are ~1 GB of buffers for 1M calls,
 * ran ~90 full collections (V8's marking was ~15 % of the server's CPU in a profile). From 128 MB none ran in four
 * exports: in process 4.2-4.5 s became 3.0-3.8 s, and `curl -o /dev/null` of the export 145-223 MB/s became 210-265.
 * V8 flags apply to the process; worker threads are given the rest (core/worker-pool-options.ts).
 */
export const SERVER_NODE_FLAGS = ['--initial-old-space-size=128']

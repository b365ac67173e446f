/**
 * The import rules of the house (ARCHITECTURE: "imports run downhill"):
 *   core ← schemas ← domain (calls, query, catalog, stats, inference, geo, fixtures) ← api ← http ← server, models, main, index
 * and bench/ (the `weft bench` harness) on core and schemas only, beside main, which alone imports it,
 * and no cycles, between files or between folders. Checked by test/house.test.ts (npm test) and by
 *   npx depcruise src workers --config .dependency-cruiser.cjs
 */
const DOMAIN = '^src/(calls|query|catalog|stats|inference|geo|fixtures|clickhouse)/'
const TOP = '^src/(server|main|index|models)\\.ts$'
module.exports = {
  forbidden: [
    {
      name: 'no-cycles',
      severity: 'error',
      comment: 'A cycle between files makes neither readable alone.',
      from: {},
      to: { circular: true },
    },
    {
      name: 'core-is-the-bottom',
      severity: 'error',
      comment: 'core/ (errors, time, config, logging, version) imports nothing else of ours.',
      from: { path: '^src/core/' },
      to: { path: '^src/', pathNot: '^src/core/' },
    },
    {
      name: 'schemas-on-core-only',
      severity: 'error',
      comment: 'schemas/ is the contract: it may use core/, nothing above it.',
      from: { path: '^src/schemas/' },
      to: { path: '^src/', pathNot: '^src/(core|schemas)/' },
    },
    {
      name: 'domain-below-api-and-http',
      severity: 'error',
      comment: 'The domain never imports api/, http/ or the composition root.',
      from: { path: DOMAIN },
      to: { path: ['^src/(api|http)/', TOP] },
    },
    {
      name: 'api-below-http',
      severity: 'error',
      comment: 'api/ declares routes; http/ serves them. api/ never imports http/ or the composition root.',
      from: { path: '^src/api/' },
      to: { path: ['^src/http/', TOP] },
    },
    {
      name: 'http-below-the-root',
      severity: 'error',
      comment: 'Only server.ts / main.ts / index.ts put the parts together.',
      from: { path: '^src/http/' },
      to: { path: TOP },
    },
    {
      name: 'bench-talks-http-only',
      severity: 'error',
      comment: 'bench/ (the `weft bench` harness) measures servers over HTTP: it uses core/ and schemas/, never the server.',
      from: { path: '^src/bench/' },
      to: { path: '^src/', pathNot: '^src/(core|schemas|bench)/' },
    },
    {
      name: 'bench-is-a-command',
      severity: 'error',
      comment: 'Only main.ts starts the harness; nothing of the server depends on it.',
      from: { path: '^src/', pathNot: ['^src/bench/', '^src/main\\.ts$'] },
      to: { path: '^src/bench/' },
    },
    {
      name: 'stats-read-calls-through-source',
      severity: 'error',
      comment:
        'Statistics read calls through calls/source.ts (typed relations) and its types; only analytics.ts, which opens a store for embedding, names the store.',
      from: { path: '^src/stats/', pathNot: '^src/stats/analytics\\.ts$' },
      to: { path: '^src/calls/', pathNot: ['^src/calls/(source|model)\\.ts$'] },
    },
    {
      name: 'stats-open-the-store-only-to-embed',
      severity: 'error',
      comment: 'analytics.ts opens a store for embedders; it may name store.ts, nothing else of calls/ beyond source and model.',
      from: { path: '^src/stats/analytics\\.ts$' },
      to: { path: '^src/calls/', pathNot: ['^src/calls/(source|model|store)\\.ts$'] },
    },
    {
      name: 'workers-are-thin',
      severity: 'error',
      comment: 'Worker entry points call into the domain, never into api/ or http/.',
      from: { path: '^workers/' },
      to: { path: ['^src/(api|http)/', TOP] },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '(^dist/|node_modules)' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { extensions: ['.ts', '.js'] },
  },
}

// The call, statistics, usage and OpenTelemetry suites again, on the ClickHouse backend in-process (chdb): the same
// assertions on both backends. The suites' servers inherit WEFT_STORAGE; set before the suites (and their helpers)
// load, hence the dynamic imports. Without chdb installed (an optional dependency) the helper skips the file.
process.env.WEFT_STORAGE = 'chdb'
await import('./calls.test.js')
await import('./stats.test.js')
await import('./usage.test.js')
await import('./otel.test.js')

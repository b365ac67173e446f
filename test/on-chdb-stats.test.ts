// The statistics and usage suites again, on the ClickHouse backend in-process (chdb): the same assertions on both
// backends (the call and OpenTelemetry suites are in test/on-chdb-calls). The suites' servers inherit WEFT_STORAGE;
// set before the suites (and their helpers) load, hence the dynamic imports. Without chdb installed (an optional
// dependency) the helper skips the file.
process.env.WEFT_STORAGE = 'chdb'
await import('./stats.test.js')
await import('./usage.test.js')
